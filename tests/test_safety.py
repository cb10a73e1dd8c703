"""Nothing lost: --overwrite replaces only what evalcore wrote, options are checked before any work,
concurrent replaces, leftovers of killed runs, names, SIGTERM, warnings on empty inputs."""
import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import load_vector, random_reid, vector_arrays
from reference import cosine_scores, evaluate_all, relevance_reid

from evalcore.cli.main import main
from evalcore.engine.plan import cap_max_rank
from evalcore.errors import InputError
from evalcore.io import challenge as ch
from evalcore.io import dataset as ds
from evalcore.io import history, report
from evalcore.jobs import common
from evalcore.render import pages

CLI = [str(Path(sys.executable).with_name("evalcore"))]
ENV = {**os.environ, "EVALCORE_DEBUG": ""}


def run(*args, timeout=240, cwd=None):
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=timeout, env=ENV,
                          cwd=cwd)


def snapshot(folder: Path) -> dict:
    """Every file under ``folder`` (hidden ones too) with a hash of its bytes."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def one_line_error(err: str, *words) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("evalcore: error:"), err
    for w in words:
        assert w in lines[0], (w, err)


@pytest.fixture
def reid(tmp_path):
    path = tmp_path / "work" / "ds.zarr"
    ds.write_dataset(path, vector_arrays(load_vector("reid_camera_junk")), {"protocol": "reid"})
    return path


def no_cluster(monkeypatch):
    """Make starting a cluster fail loudly: a check that comes only after the work shows up as exit 1."""
    import evalcore.engine.cluster as cluster

    def refuse(*a, **k):
        raise AssertionError("the cluster was started before the options were checked")
    monkeypatch.setattr(cluster, "dask_client", refuse)


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def tables():
    return {"per_query": pa.table({"query": [0, 1]}), "summary": pa.table({"group": ["all"]}),
            "cmc": pa.table({"k": [1]})}


# =========================================================================== 1. --overwrite deletes only ours


def test_evaluate_overwrite_refuses_the_folder_holding_the_dataset(reid, monkeypatch, capsys):
    no_cluster(monkeypatch)
    work = reid.parent
    (work / "notes.txt").write_text("my notes")
    before = snapshot(work)
    code = main(["evaluate", str(reid), "--out", str(work), "--overwrite", "--protocol", "reid"])
    assert code == 2
    one_line_error(capsys.readouterr().err, "--out")
    assert snapshot(work) == before


@pytest.mark.parametrize("where", ["equal", "inside"])
def test_evaluate_out_equal_to_or_inside_the_dataset_is_refused(reid, monkeypatch, capsys, where):
    no_cluster(monkeypatch)
    before = snapshot(reid.parent)
    out = reid if where == "equal" else reid / "query" / "report"
    assert main(["evaluate", str(reid), "--out", str(out), "--overwrite", "--protocol", "reid"]) == 2
    one_line_error(capsys.readouterr().err, "--out", "dataset")
    assert snapshot(reid.parent) == before


def test_report_folder_with_a_foreign_file_or_manifest_is_not_replaced(tmp_path):
    out = tmp_path / "r"
    report.write_report(out, tables(), {"x": 1})
    report.write_report(out, tables(), {"x": 2}, overwrite=True)  # ours: replaced
    assert report.read_report(out)["run"] == {"x": 2}
    (out / "notes.txt").write_text("added by the user")
    before = snapshot(tmp_path)
    with pytest.raises(InputError, match="--out .*notes.txt"):
        report.write_report(out, tables(), {"x": 3}, overwrite=True)
    assert snapshot(tmp_path) == before
    other = tmp_path / "other"
    other.mkdir()
    (other / "manifest.json").write_text(json.dumps({"files": ["run.json"], "version": 3}))
    (other / "run.json").write_text("{}")
    with pytest.raises(InputError, match="manifest.json evalcore did not write"):
        report.check_out(other, True)
    empty = tmp_path / "empty"
    empty.mkdir()
    report.write_report(empty, tables(), {"x": 4}, overwrite=True)  # an empty folder is fine
    assert report.read_report(empty)["run"] == {"x": 4}


def test_demo_overwrite_refuses_a_folder_demo_did_not_write(tmp_path, monkeypatch, capsys):
    no_cluster(monkeypatch)
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "thesis.tex").write_text("years of work")
    (folder / "report").mkdir()
    before = snapshot(folder)
    assert main(["demo", "--out", str(folder), "--overwrite"]) == 2
    one_line_error(capsys.readouterr().err, "--out")
    assert snapshot(folder) == before


def npz_inputs(folder: Path) -> Path:
    rng = np.random.default_rng(0)
    good = folder / "good.npz"
    np.savez(good, qf=rng.standard_normal((4, 3)), gf=rng.standard_normal((6, 3)), q_pids=np.arange(4),
             g_pids=np.arange(6) % 4, q_camids=np.zeros(4, int), g_camids=np.ones(6, int))
    return good


def test_import_into_the_current_folder_holding_the_input_is_refused(tmp_path):
    good = npz_inputs(tmp_path)
    (tmp_path / "unrelated.txt").write_text("keep me")
    before = snapshot(tmp_path)
    result = run("import", "npy", good.name, "--out", ".", "--overwrite", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    one_line_error(result.stderr, "--out")
    assert snapshot(tmp_path) == before


def test_import_overwrite_replaces_only_a_dataset_evalcore_wrote(tmp_path, capsys):
    (tmp_path / "in").mkdir()
    good = npz_inputs(tmp_path / "in")
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    before = snapshot(tmp_path)
    assert main(["import", "npy", str(good), "--out", str(folder), "--overwrite"]) == 2
    one_line_error(capsys.readouterr().err, "--out", "notes.txt")
    assert snapshot(tmp_path) == before
    # a group without the evalcore attribute is not ours either
    import zarr

    foreign = tmp_path / "foreign.zarr"
    zarr.open_group(str(foreign), mode="w").create_array("x", shape=(3,), dtype="int64")
    before = snapshot(tmp_path)
    assert main(["import", "npy", str(good), "--out", str(foreign), "--overwrite"]) == 2
    one_line_error(capsys.readouterr().err, "--out")
    assert snapshot(tmp_path) == before
    # ours: replaced, and the arrays are the new input's
    out = tmp_path / "ds.zarr"
    assert main(["import", "npy", str(good), "--out", str(out)]) == 0
    assert main(["import", "npy", str(good), "--out", str(out)]) == 2   # no --overwrite
    rng = np.random.default_rng(1)
    other = tmp_path / "in" / "other.npz"
    qf = rng.standard_normal((5, 3))
    np.savez(other, qf=qf, gf=rng.standard_normal((6, 3)), q_pids=np.arange(5), g_pids=np.arange(6) % 4,
             q_camids=np.zeros(5, int), g_camids=np.ones(6, int))
    assert main(["import", "npy", str(other), "--out", str(out), "--overwrite"]) == 0
    np.testing.assert_allclose(ds.read(ds.open_dataset(out), "query/emb"), qf.astype(np.float32))
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_score_overwrite_refuses_a_folder_score_did_not_write(tmp_path, capsys):
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "query.npy").write_bytes(b"")
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "paper.pdf").write_text("precious")
    before = snapshot(tmp_path)
    base = ["score", str(sub), "--truth", str(tmp_path / "truth.zarr"), "--team", "t"]
    assert main([*base, "--out", str(folder), "--overwrite"]) == 2
    one_line_error(capsys.readouterr().err, "--out", "paper.pdf")
    assert main([*base, "--out", str(sub / "res")]) == 2   # inside the submission
    one_line_error(capsys.readouterr().err, "--out", "submission")
    assert snapshot(tmp_path) == before


# =========================================================================== 8. options checked before any work


@pytest.mark.parametrize("extra, option", [
    (["--memory-limit", "abc"], "--memory-limit"),
    (["--memory-limit", "0.5"], "--memory-limit"),
    (["--scheduler", "tcp://127.0.0.1"], "--scheduler"),
    (["--max-rank", "0"], "--max-rank"),
])
def test_bad_cluster_options_exit_2_before_any_work(reid, monkeypatch, capsys, extra, option):
    no_cluster(monkeypatch)
    out = reid.parent / "out"
    assert main(["evaluate", str(reid), "--out", str(out), "--protocol", "reid", *extra]) == 2
    one_line_error(capsys.readouterr().err, option)
    assert not out.exists()


def test_bad_memory_limit_through_the_command_line_is_one_line(reid):
    result = run("evaluate", reid, "--out", reid.parent / "out", "--protocol", "reid", "--memory-limit", "abc")
    assert result.returncode == 2
    one_line_error(result.stderr, "--memory-limit")


@pytest.mark.parametrize("where", ["under_a_file", "proc"])
def test_an_out_that_cannot_be_created_is_refused_before_any_work(reid, monkeypatch, capsys, where):
    no_cluster(monkeypatch)
    if where == "under_a_file":
        (reid.parent / "afile").write_text("x")
        out = reid.parent / "afile" / "sub"
    else:
        out = Path("/proc/evalcore-test-out")
    before = snapshot(reid.parent)
    assert main(["evaluate", str(reid), "--out", str(out), "--protocol", "reid"]) == 2
    one_line_error(capsys.readouterr().err, "--out")
    assert snapshot(reid.parent) == before and not out.exists()


def test_score_and_nightly_check_cluster_options_first(tmp_path, monkeypatch, capsys):
    no_cluster(monkeypatch)
    sub = tmp_path / "sub"
    sub.mkdir()
    assert main(["score", str(sub), "--truth", str(tmp_path / "t.zarr"), "--team", "t", "--out",
                 str(tmp_path / "res"), "--memory-limit", "lots"]) == 2
    one_line_error(capsys.readouterr().err, "--memory-limit")
    job = tmp_path / "job.toml"
    job.write_text(textwrap.dedent(f"""
        reports = "{tmp_path / 'reports'}"
        history = "{tmp_path / 'history'}"
        scheduler = "tcp://somewhere"
        [[evaluation]]
        name = "a"
        dataset = "{tmp_path / 'missing.zarr'}"
    """))
    assert main(["nightly", str(job), "--date", "2024-01-02"]) == 2
    one_line_error(capsys.readouterr().err, "--scheduler")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.toml", "sub"]


def test_memory_limit_and_scheduler_checks():
    for good in ("auto", "4GiB", "500MB", "2e9", "1 GB"):
        assert common.check_memory_limit(good) == good
    for bad in ("abc", "0", "-1GB", "0.5", "4 GiBs"):
        with pytest.raises(InputError, match="--memory-limit"):
            common.check_memory_limit(bad)
    for good in ("tcp://127.0.0.1:8786", "tcp://node-1:1", "tls://[::1]:8786"):
        assert common.check_scheduler(good) == good
    for bad in ("tcp://127.0.0.1", "tcp://[::1]", "tcp://h:0", "tcp://h:70000", "127.0.0.1:8786", "tcp://:8786"):
        with pytest.raises(InputError, match="--scheduler"):
            common.check_scheduler(bad)


def test_the_worker_memory_floor_is_the_same_in_the_readme_the_options_and_the_engine():
    import re

    from evalcore.engine.cluster import MIN_WORKER_MEMORY

    readme = (Path(__file__).parents[1] / "deploy" / "README.md").read_text()   # "Where it runs" moved there
    stated = re.findall(r"below (\d+) MiB per worker", " ".join(readme.split()))
    assert stated == [str(MIN_WORKER_MEMORY >> 20)], stated
    assert common.check_memory_limit(f"{MIN_WORKER_MEMORY >> 20}MiB") == f"{MIN_WORKER_MEMORY >> 20}MiB"
    with pytest.raises(InputError, match="--memory-limit: .* per worker is too small"):
        common.check_memory_limit(str(MIN_WORKER_MEMORY - 1))   # bytes, as a job file's bare number


# =========================================================================== 9. --max-rank capped at G


def test_cmc_is_capped_at_the_gallery_size():
    assert cap_max_rank(50, 2000) == (50, None)
    cap, note = cap_max_rank(20_000_000, 2000)
    assert cap == 2000 and "20000000" in note and "2000" in note
    assert cap_max_rank(5, 0) == (5, None)  # ordinary curves keep k = 1..max_rank
    assert cap_max_rank(80, 10)[0] == 50


@pytest.mark.cluster
def test_huge_max_rank_writes_a_gallery_sized_cmc_equal_to_brute_force(tmp_path):
    rng = np.random.default_rng(5)
    arrays = random_reid(rng, n_query=40, n_gallery=120, dims=8, n_ids=10)
    path = tmp_path / "ds.zarr"
    ds.write_dataset(path, arrays, {"protocol": "reid"})
    out = tmp_path / "out"
    result = run("evaluate", path, "--out", out, "--max-rank", "100000", "--workers", "1", "--quiet")
    assert result.returncode == 0, result.stderr
    assert "--max-rank 100000" in result.stderr   # the warning is printed too
    cmc = [r for r in pq.read_table(out / "cmc.parquet").to_pylist() if r["group"] == "all"]
    assert [r["k"] for r in cmc] == list(range(1, 121))
    run_json = json.loads((out / "run.json").read_text())
    assert any("--max-rank 100000" in w for w in run_json["warnings"])
    # brute force: fraction of known queries whose first relevant item is within k
    scores = cosine_scores(arrays["query/emb"], arrays["gallery/emb"])
    rel, junk = relevance_reid(arrays["query/label"], arrays["query/cam"], arrays["gallery/label"],
                               arrays["gallery/cam"], arrays["gallery/junk"])
    rows = evaluate_all(scores, rel, junk, (1,))
    first = np.array([r["first_rank"] for r in rows if r["n_relevant"] > 0])
    want = [(first <= k).mean() for k in range(1, 121)]
    assert np.allclose([r["cmc"] for r in cmc], want, atol=1e-12)
    assert cmc[-1]["cmc"] == pytest.approx(1.0)


# =========================================================================== 10. concurrent replaces


REPLACER = textwrap.dedent("""
    import os, sys, time
    import pyarrow as pa
    from evalcore.io import report

    # widen the window between moving the old report aside and renaming the new one in, so the race
    # that hit 4 of 600 runs is hit every time without the lock
    real = os.replace
    def slow(src, dst):
        real(src, dst)
        if ".old-" in str(dst):
            time.sleep(0.02)
    os.replace = slow
    out, tag = sys.argv[1], sys.argv[2]
    for i in range(20):
        t = {"per_query": pa.table({"i": [i]}), "summary": pa.table({"group": ["all"]}), "cmc": pa.table({"k": [1]})}
        report.write_report(out, t, {"writer": tag, "i": i}, overwrite=True)
""")


def test_two_processes_replacing_one_report_at_once(tmp_path):
    out = tmp_path / "r"
    report.write_report(out, tables(), {"writer": "first"})
    procs = [subprocess.Popen([sys.executable, "-c", REPLACER, str(out), tag], stderr=subprocess.PIPE, text=True,
                              cwd=tmp_path)   # not the repository: evalcore as installed (or PYTHONPATH)
             for tag in ("a", "b")]
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errors
    content = report.read_report(out)
    assert content["run"]["writer"] in ("a", "b") and content["run"]["i"] == 19
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r"]   # no .r.old-* or .r.tmp-* left


# =========================================================================== 11. leftovers of killed runs


KILLED_WRITER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    import pyarrow as pa
    import pyarrow.parquet as pq
    from evalcore.io import report

    real = pq.write_table
    def stall(table, where, **kw):
        real(table, where, **kw)
        Path(sys.argv[2]).write_text("ready")   # one file written into the temporary folder
        time.sleep(600)
    report.pq.write_table = stall
    t = {"per_query": pa.table({"i": [1]}), "summary": pa.table({"group": ["all"]}), "cmc": pa.table({"k": [1]})}
    report.write_report(sys.argv[1], t, {"x": 1}, overwrite=True)
""")


def test_a_report_write_killed_midway_is_cleaned_by_the_next_run(tmp_path):
    folder = tmp_path / "reports"
    out = folder / "r"
    report.write_report(out, tables(), {"x": 0})
    ready = tmp_path / "ready"
    proc = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(out), str(ready)], cwd=tmp_path)
    deadline = time.time() + 60
    while not ready.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert ready.exists()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    left = [p.name for p in folder.iterdir() if p.name != "r"]
    assert len(left) == 1 and left[0].startswith(".r.tmp-") and str(proc.pid) in left[0]
    assert report.read_report(out)["run"] == {"x": 0}           # the earlier report is intact
    report.write_report(out, tables(), {"x": 1}, overwrite=True)
    assert sorted(p.name for p in folder.iterdir()) == ["r"]
    assert report.read_report(out)["run"] == {"x": 1}


def test_stale_leftovers_go_live_ones_and_foreign_files_stay(tmp_path):
    dead = dead_pid()
    host = report._host_tag()
    folder = tmp_path / "reports"
    folder.mkdir()
    stale_tmp = folder / f".r.tmp-{dead}@{host}-0123abcd"
    stale_tmp.mkdir()
    (stale_tmp / "per_query.parquet").write_bytes(b"half")
    score_copy = folder / f".sub1.score-{dead}@{host}-89abcdef"
    (score_copy / "combined.zarr").mkdir(parents=True)
    (score_copy / "combined.zarr" / "zarr.json").write_text("{}")
    history_tmp = folder / f".x.parquet.tmp-{dead}@{host}-deadbeef"
    history_tmp.write_bytes(b"half")
    live_proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = folder / f".r2.tmp-{live_proc.pid}@{host}-00000000"
        live.mkdir()
        old_legacy = folder / ".r3.old-0a1b2c3d"        # an older evalcore's leftover: by age only
        old_legacy.mkdir()
        os.utime(old_legacy, (time.time() - 2 * 86400,) * 2)
        young_legacy = folder / ".r4.tmp-0a1b2c3d"
        young_legacy.mkdir()
        foreign = [folder / ".r.tmp-mine", folder / f"r.tmp-{dead}@{host}-0123abcd", folder / "notes.txt",
                   folder / f".r.tmp-{dead}@{host}-0123abcd.bak"]
        for f in foreign:
            f.write_text("not evalcore's")
            os.utime(f, (time.time() - 5 * 86400,) * 2)
        report.write_report(folder / "r", tables(), {"x": 1})
        names = sorted(p.name for p in folder.iterdir())
        assert names == sorted(["r", "r3", live.name, young_legacy.name, *(f.name for f in foreign)])
        # the legacy .r3.old-* had no r3 beside it: it is the earlier output moved aside, so it is put back
        assert (folder / "r3").is_dir()
    finally:
        live_proc.kill()
        live_proc.wait()


def test_a_kill_between_the_two_renames_gives_the_earlier_report_back(tmp_path):
    out = tmp_path / "r"
    report.write_report(out, tables(), {"x": "earlier"})
    dead = dead_pid()
    aside = tmp_path / f".r.old-{dead}@{report._host_tag()}-0000beef"
    os.replace(out, aside)                                    # what a kill right after the first rename leaves
    half = tmp_path / f".r.tmp-{dead}@{report._host_tag()}-0000cafe"
    half.mkdir()
    history.atomic_write(tmp_path / "other.json", b"{}")      # any later write in the folder
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.json", "r"]
    assert report.read_report(out)["run"] == {"x": "earlier"}


STEPPED_SWAP = textwrap.dedent("""
    import os, shutil, sys, time
    from pathlib import Path
    import pyarrow as pa
    from evalcore.io import report

    out, ready, stop_at, mode = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    count = [0]
    rename = os.replace

    def step(label):
        if count[0] == stop_at:
            Path(f"{ready}.part").write_text(label)
            rename(f"{ready}.part", ready)   # whole, then the parent kills us here
            time.sleep(600)
        count[0] += 1

    def stepped(label, fn):
        def call(*args, **kwargs):
            step("before " + label)
            result = fn(*args, **kwargs)
            step("after " + label)
            return result
        return call

    if mode == "two renames":          # a filesystem without RENAME_EXCHANGE
        report._RENAMEAT2 = None
    report.exchange = stepped("exchange", report.exchange)
    os.replace = stepped("rename", os.replace)
    shutil.rmtree = stepped("rmtree", shutil.rmtree)
    t = {"per_query": pa.table({"i": [1]}), "summary": pa.table({"group": ["all"]}), "cmc": pa.table({"k": [1]})}
    report.write_report(out, t, {"x": "new"}, overwrite=True)
""")


@pytest.mark.parametrize("mode", ["exchange", "two renames"])
def test_a_report_swap_killed_at_every_step(tmp_path, mode):
    """SIGKILL at each step of replacing a report: with the exchange, --out always holds a whole report (the
    earlier one or the new one); without it, a kill between the two renames leaves no --out until the next run
    puts the earlier report back. Either way the next run leaves exactly the report and nothing else."""
    labels, absent = [], []
    for stop_at in range(20):
        folder = tmp_path / f"kill-{stop_at}"
        out, ready = folder / "r", tmp_path / f"ready-{stop_at}"
        report.write_report(out, tables(), {"x": "earlier"})
        proc = subprocess.Popen([sys.executable, "-c", STEPPED_SWAP, str(out), str(ready), str(stop_at), mode],
                                cwd=tmp_path)
        deadline = time.time() + 60
        while not ready.exists() and proc.poll() is None and time.time() < deadline:
            time.sleep(0.02)
        if not ready.exists():                                # ran to the end without reaching this step
            assert proc.wait(timeout=60) == 0
            assert report.read_report(out)["run"] == {"x": "new"}
            assert sorted(p.name for p in folder.iterdir()) == ["r"]
            break
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        labels.append(ready.read_text())
        if os.path.lexists(out):
            assert report.read_report(out)["run"] in ({"x": "earlier"}, {"x": "new"}), labels[-1]
        else:
            absent.append(labels[-1])
        seen = report.read_report(out)["run"] if os.path.lexists(out) else None
        history.atomic_write(folder / "other.json", b"{}")   # any later evalcore write in the folder repairs
        assert sorted(p.name for p in folder.iterdir()) == ["other.json", "r"], labels[-1]
        assert report.read_report(out)["run"] == (seen or {"x": "earlier"})
    else:
        pytest.fail("the swap never finished")
    if mode == "exchange":
        assert labels == ["before exchange", "after exchange", "before rmtree", "after rmtree"]
        assert absent == []                                   # --out was there at every step
    else:
        assert labels == ["before exchange", "after exchange",   # the exchange answers "cannot"
                          "before rename", "after rename", "before rename", "after rename", "before rmtree",
                          "after rmtree"]
        assert absent == ["after rename", "before rename"]    # the window between the two renames


def test_the_exchange_swaps_two_folders_and_reports_when_it_cannot(tmp_path, monkeypatch):
    a, b = tmp_path / "a", tmp_path / "b"
    (a / "x").mkdir(parents=True)
    (b / "y").mkdir(parents=True)
    assert report.exchange(a, b)
    assert [p.name for p in a.iterdir()] == ["y"] and [p.name for p in b.iterdir()] == ["x"]
    with pytest.raises(FileNotFoundError):
        report.exchange(a, tmp_path / "missing")
    monkeypatch.setattr(report, "_RENAMEAT2", None)          # no renameat2 in this C library
    assert not report.exchange(a, b)
    assert [p.name for p in a.iterdir()] == ["y"]
    assert report.swap_into_place(b, a) == "two renames"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a"] and [p.name for p in a.iterdir()] == ["x"]


def test_a_symlinked_out_is_swapped_for_the_new_folder_and_its_target_is_left_alone(tmp_path):
    target = tmp_path / "elsewhere" / "r"
    report.write_report(target, tables(), {"x": "earlier"})
    out = tmp_path / "reports" / "r"
    out.parent.mkdir()
    out.symlink_to(target)
    report.write_report(out, tables(), {"x": "new"}, overwrite=True)
    assert not out.is_symlink() and report.read_report(out)["run"] == {"x": "new"}
    assert report.read_report(target)["run"] == {"x": "earlier"}     # the link went, not what it pointed to
    assert sorted(p.name for p in out.parent.iterdir()) == ["r"]


@pytest.mark.cluster
def test_evaluate_killed_by_sigterm_exits_143_and_leaves_nothing(tmp_path):
    rng = np.random.default_rng(2)
    arrays = random_reid(rng, n_query=12_000, n_gallery=30_000, dims=64, n_ids=500)
    path = tmp_path / "ds.zarr"
    ds.write_dataset(path, arrays, {"protocol": "reid"}, chunk_rows=256)
    before = snapshot(tmp_path)
    out = tmp_path / "out"
    proc = subprocess.Popen([*CLI, "evaluate", str(path), "--out", str(out), "--workers", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    lines = []
    for line in proc.stderr:          # one progress line per finished chunk (stderr is not a terminal)
        lines.append(line)
        if "chunk 1/" in line:
            break
    proc.send_signal(signal.SIGTERM)
    rest = proc.communicate(timeout=120)[1]
    assert proc.returncode == 143, "".join(lines) + rest
    # one line, besides the progress lines of chunks that finished before the signal
    assert [line for line in rest.splitlines() if line and not line.startswith("evalcore: chunk ")] \
        == ["evalcore: terminated"], rest
    assert not out.exists() and snapshot(tmp_path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds.zarr"]


# =========================================================================== 12. names


@pytest.mark.parametrize("name", ["team\x85x", "team\u2028x", "team\u2029x", "evil\u202etxt.exe", "zero\u200bwidth",
                                  "priv\ue000", "bad\nname", "\x7fdel"])
def test_team_names_with_invisible_or_line_breaking_characters_are_refused(name):
    with pytest.raises(InputError, match="--team"):
        ch.check_team(name)


@pytest.mark.parametrize("name", ["Équipe Zürich", "チーム", "team-42 (v2)", "🙂 smile"])
def test_printable_team_names_are_kept(name):
    assert ch.check_team(name) == name


# =========================================================================== 13. no noise


@pytest.mark.parametrize("n_query, n_gallery", [(0, 30), (20, 0)])
def test_empty_queries_or_gallery_render_without_warnings(write, n_query, n_gallery):
    from evalcore.engine.evaluate import Options, evaluate

    rng = np.random.default_rng(0)
    arrays = random_reid(rng, n_query=max(n_query, 1), n_gallery=max(n_gallery, 1), dims=4, n_ids=3)
    arrays = {k: (v[:n_query] if k.startswith("query/") else v[:n_gallery]) for k, v in arrays.items()}
    path = write(arrays, attrs={"protocol": "reid"})
    try:
        result = evaluate(path, Options(protocol="reid"))
    except InputError:
        pytest.skip("this build refuses an empty side before rendering")
    run_json = dict(result.info)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        html = pages.render_report_html(result.per_query, result.summary, result.cmc, run_json)
    assert 'alt="CMC' not in html and "Nothing to plot" in html  # one note, no empty box per plot


# =========================================================================== what each command wrote, replaced


@pytest.mark.cluster
def test_score_overwrites_its_own_folder_and_cleans_a_killed_runs_copy(tmp_path):
    from test_score import good_submission, make_truth, reference_map, save_npy

    truth = make_truth(tmp_path / "truth.zarr", n_query=20, n_gallery=300, judged=30, seed=3)
    query, gallery = good_submission(truth, 300, seed=4)
    sub = save_npy(tmp_path / "subs" / "run-1", query, gallery)
    results = tmp_path / "results"
    results.mkdir()
    dead = dead_pid()
    copy = results / f".alpha.score-{dead}@{report._host_tag()}-1234abcd"   # a SIGKILLed score's copy
    ds.write_dataset(copy / "combined.zarr", {"query/emb": query})
    out = results / "alpha"
    base = ["score", sub, "--truth", tmp_path / "truth.zarr", "--out", out, "--team", "alpha", "--workers", "1",
            "--quiet"]
    first = run(*base)
    assert first.returncode == 0, first.stderr
    assert not copy.exists()
    assert sorted(p.name for p in results.iterdir()) == [".leaderboard.parquet.lock", "alpha", "leaderboard.parquet",
                                                         "leaderboard_best.parquet"]
    assert run(*base).returncode == 2                       # exists, no --overwrite
    again = run(*base, "--overwrite")
    assert again.returncode == 0, again.stderr
    assert sorted(p.name for p in out.iterdir()) == ["organizer", "result.json"]
    want, _ = reference_map(truth, query, gallery)
    assert json.loads((out / "result.json").read_text())["score"] == pytest.approx(want, abs=1e-9)


@pytest.mark.cluster
def test_demo_overwrites_a_demo_folder(tmp_path):
    out = tmp_path / "demo"
    assert run("demo", "--out", out, "--dims", "8", "--workers", "1").returncode == 0
    assert sorted(p.name for p in out.iterdir()) == ["dataset.zarr", "evalcore-demo.json", "report"]
    first = (out / "report" / "run.json").read_bytes()
    again = run("demo", "--out", out, "--dims", "16", "--workers", "1", "--overwrite")
    assert again.returncode == 0, again.stderr
    assert sorted(p.name for p in out.iterdir()) == ["dataset.zarr", "evalcore-demo.json", "report"]
    assert (out / "report" / "run.json").read_bytes() != first
    assert ds.open_dataset(out / "dataset.zarr")["query/emb"].shape[1] == 16
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo"]
