"""``evalcore nightly``: history store, reruns, regression gates, trend page, concurrent runs."""
import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import random_reid

from evalcore.cli.main import main
from evalcore.errors import InputError
from evalcore.io import dataset as ds
from evalcore.io import history as h
from evalcore.jobs.gates import check_gates

CLI = [str(Path(sys.executable).with_name("evalcore"))]


def run(*args, timeout=240):
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "EVALCORE_DEBUG": ""})


def start(*args):
    return subprocess.Popen([*CLI, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "EVALCORE_DEBUG": ""})


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    """A model and the same model regressed (noise added to every embedding)."""
    root = tmp_path_factory.mktemp("nightly-data")
    data = random_reid(np.random.default_rng(7), n_query=200, n_gallery=1500, dims=16, n_ids=40)
    ds.write_dataset(root / "good.zarr", data, {"protocol": "reid"})
    noise = np.random.default_rng(8)
    worse = dict(data)
    for side in ("query", "gallery"):
        worse[f"{side}/emb"] = (data[f"{side}/emb"] + 1.5 * noise.standard_normal(data[f"{side}/emb"].shape)
                                ).astype(np.float32)
    ds.write_dataset(root / "worse.zarr", worse, {"protocol": "reid"})
    return root


GATES = """
[gates.map]
max_drop_previous = 0.01

[gates.hit_at_1]
max_drop_previous = 0.02
"""


def job_file(path: Path, dataset, root: Path, gates: str = GATES, extra: str = "") -> Path:
    path.write_text(f"""
reports = "{root / 'reports'}"
history = "{root / 'history'}"
trend_metrics = ["map", "hit_at_1"]

[[evaluation]]
name = "reid-small"
dataset = "{dataset}"
protocol = "reid"
ks = [1, 5]
{gates}
{extra}
""")
    return path


def history_rows(root: Path) -> list[dict]:
    return [r for r in h.read_history(root / "history").to_pylist() if r["group"] == "all"]


def test_dates_concurrent_runs_rerun_and_gates(tmp_path, datasets):
    """One history through four runs (each CLI run starts a local cluster, so they are shared)."""
    good = job_file(tmp_path / "good.toml", datasets / "good.zarr", tmp_path)
    hist = tmp_path / "history" / "reid-small"

    # two runs at once, on consecutive dates: both dates land, every file is whole
    procs = [start("nightly", good, "--date", day, "--workers", "1", "--quiet") for day in ("2025-03-01", "2025-03-02")]
    outputs = [p.communicate(timeout=240) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [e for _, e in outputs]
    assert sorted(p.name for p in hist.iterdir()) == ["2025-03-01.parquet", "2025-03-02.parquet"]
    for path in hist.iterdir():
        table = pq.read_table(path)                             # summary rows: "all" and the query groups
        assert table.column("group").to_pylist() == ["all", "g0", "g1", "g2"]
        assert set(table.column("run_date").to_pylist()) == {path.stem}
    assert not [p for p in (tmp_path / "history").rglob("*") if ".tmp-" in p.name]
    rows = history_rows(tmp_path)
    assert [r["run_date"] for r in rows] == ["2025-03-01", "2025-03-02"]
    assert rows[0]["map"] == rows[1]["map"] and rows[0]["evaluation"] == "reid-small"
    for day in ("2025-03-01", "2025-03-02"):
        assert (tmp_path / "reports" / day / "reid-small" / "manifest.json").is_file()
        assert (tmp_path / "reports" / day / "trend.html").read_text().count("data:image/svg+xml;base64,") == 2

    # the next day, same model: the gates against the previous run (day 2) hold
    result = run("nightly", good, "--date", "2025-03-03", "--workers", "1", "--quiet")
    assert result.returncode == 0, result.stderr
    gates = json.loads((tmp_path / "reports" / "2025-03-03" / "gates.json").read_text())
    assert gates["failed"] == 0 and len(gates["checks"]) == 2
    assert all(c["passed"] and c["reference_date"] == "2025-03-02" for c in gates["checks"])
    trend = (tmp_path / "reports" / "2025-03-03" / "trend.html").read_text()
    assert trend.count("data:image/svg+xml;base64,") == 2 and "3 run(s) from 2025-03-01 to 2025-03-03" in trend
    kept = {d: (hist / f"{d}.parquet").read_bytes() for d in ("2025-03-01", "2025-03-03")}

    # day 2 rerun with the regressed model, baseline pinned to day 1: gates fail (exit 3), day 2 replaced
    worse = job_file(tmp_path / "worse.toml", datasets / "worse.zarr", tmp_path,
                     GATES.replace("[gates.map]\n", "[gates.map]\nmax_drop_baseline = 0.02\n"),
                     '[baseline]\n"reid-small" = "2025-03-01"\n')
    result = run("nightly", worse, "--date", "2025-03-02", "--workers", "1", "--quiet")
    assert result.returncode == 3, result.stderr
    rows = history_rows(tmp_path)
    assert [r["run_date"] for r in rows] == ["2025-03-01", "2025-03-02", "2025-03-03"]   # replaced, not added
    old, new = rows[0]["map"], rows[1]["map"]
    assert new < old - 0.01
    assert {d: (hist / f"{d}.parquet").read_bytes() for d in kept} == kept             # other dates untouched
    failed = [line for line in result.stderr.splitlines() if line.startswith("evalcore: gate failed")]
    assert len(failed) == 3                                     # map vs previous and baseline, hit_at_1 vs previous
    for reference in ("previous run 2025-03-01", "baseline run 2025-03-01"):
        line = next(line for line in failed if reference in line and ": map " in line)
        assert "reid-small" in line and f"old {old:.6g}" in line and f"new {new:.6g}" in line
    assert (tmp_path / "reports" / "2025-03-02" / "reid-small" / "manifest.json").is_file()
    assert not [p for p in tmp_path.rglob("*") if ".tmp-" in p.name or ".old-" in p.name]


@pytest.mark.parametrize("text, words", [
    ('reports = "r"\nhistory = "h"\n', ["evaluation"]),
    ('reports = "r"\nhistory = "h"\n[[evaluation]]\nname = "a"\n', ["dataset"]),
    ('reports = "r"\nhistory = "h"\nfoo = 1\n[[evaluation]]\nname = "a"\ndataset = "d"\n', ["foo"]),
    ('reports = "r"\nhistory = "h"\n[[evaluation]]\nname = "../x"\ndataset = "d"\n', ["name"]),
    ('reports = "r"\nhistory = "h"\n[[evaluation]]\nname = "a"\ndataset = "d"\nks = [0]\n', ["ks"]),
    ('reports = "r"\nhistory = "h"\n[[evaluation]]\nname = "a"\ndataset = "d"\n[gates.map]\nmax_drop = 1\n',
     ["max_drop"]),
    ('reports = "r"\nhistory = "h"\n[[evaluation]]\nname = "a"\ndataset = "d"\n[baseline.b]\nmap = 0.5\n',
     ["baseline.b"]),
    ('reports = "r"\nhistory = "h"\n[[evaluation]]\nname = "a"\ndataset = "d"\n'
     '[gates.map]\nmax_drop_baseline = 0.1\n[baseline.a]\nmrr = 0.5\n', ["map"]),
    ('reports = "r"\nhistory = "h"\n[[evaluation]]\nname = "a"\ndataset = "d"\n[baseline]\na = "2025-13-01"\n',
     ["2025-13-01"]),
    ('reports = "r"\nhistory = [\n', ["TOML"]),
    ('reports = "r"\nhistory = "h"\nstall_timeout = "5m"\n[[evaluation]]\nname = "a"\ndataset = "d"\n',
     ["stall_timeout", "'5m'"]),
    ('reports = "r"\nhistory = "h"\nstall_timeout = -1\n[[evaluation]]\nname = "a"\ndataset = "d"\n',
     ["stall_timeout", "> 0"]),
])
def test_bad_job_files_exit_2_before_any_work(tmp_path, capsys, text, words, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "job.toml").write_text(text)
    assert main(["nightly", "job.toml", "--date", "2025-01-01"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "job.toml" in err
    assert all(w in err for w in words), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.toml"]


def test_bad_date_exits_2(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "job.toml").write_text('reports = "r"\nhistory = "h"\n[[evaluation]]\nname = "a"\ndataset = "d"\n')
    assert main(["nightly", "job.toml", "--date", "01/02/2025"]) == 2
    assert "--date" in capsys.readouterr().err


def test_example_job_file_is_valid():
    from evalcore.jobs.nightly import load_job

    job = load_job(Path(__file__).parents[1] / "jobs" / "nightly.example.toml")
    assert job["evaluation"][0]["dataset"] == "evalcore-demo/dataset.zarr"
    assert job["evaluation"][0]["protocol"] == "reid"
    assert job["gates"]["map"] == {"max_drop_previous": 0.01, "max_drop_baseline": 0.02}


# --------------------------------------------------------------------------- history functions


def summary(value: float, extra: float = 0.5) -> pa.Table:
    return pa.table({"group": ["all", "g0"], "n_queries": [10, 5], "map": [value, value - 0.1],
                     "fnir": [extra, extra]})


def test_history_write_read_replace_and_previous(tmp_path):
    root = tmp_path / "hist"
    h.write_run(root, "2025-01-02", "a", summary(0.8))
    h.write_run(root, "2025-01-01", "a", summary(0.9))
    h.write_run(root, "2025-01-03", "b", summary(0.5))
    table = h.read_history(root)
    assert table.column_names[:2] == ["run_date", "evaluation"]
    assert table.num_rows == 6 and table.column("run_date").to_pylist()[0] == "2025-01-01"
    before = (root / "b" / "2025-01-03.parquet").read_bytes()
    h.write_run(root, "2025-01-02", "a", summary(0.7))                 # rerun: only that file changes
    table = h.read_history(root)
    assert table.num_rows == 6 and (root / "b" / "2025-01-03.parquet").read_bytes() == before
    date, row = h.previous_run(table, "a", "2025-01-03")
    assert date == "2025-01-02" and row["map"] == 0.7
    assert h.previous_run(table, "a", "2025-01-01") is None
    assert h.previous_run(table, "b", "2025-01-03") is None
    (root / "a" / ".2025-01-09.parquet.tmp-abc").write_bytes(b"partial")  # a writer's temporary: ignored
    assert h.read_history(root).num_rows == 6
    with pytest.raises(InputError, match="run_date"):
        h.write_run(root, "2025-1-2", "a", summary(0.1))


def test_check_gates_previous_baseline_and_direction(tmp_path):
    root = tmp_path / "hist"
    h.write_run(root, "2025-01-01", "a", summary(0.80, extra=0.10))
    h.write_run(root, "2025-01-02", "a", summary(0.78, extra=0.20))
    table = h.read_history(root)
    gates = {"map": {"max_drop_previous": 0.01, "max_drop_baseline": 0.05}, "fnir": {"max_drop_previous": 0.05}}
    failures = check_gates(table, "a", "2025-01-02", gates, {"map": 0.90, "fnir": 0.1})
    kinds = sorted((f["metric"], f["reference"]) for f in failures)
    assert kinds == [("fnir", "previous"), ("map", "baseline"), ("map", "previous")]
    prev = next(f for f in failures if f["metric"] == "map" and f["reference"] == "previous")
    assert prev["old"] == 0.80 and prev["new"] == 0.78 and abs(prev["drop"] - 0.02) < 1e-12
    assert "a: map" in prev["message"] and "0.8" in prev["message"] and "0.78" in prev["message"]
    fnir = next(f for f in failures if f["metric"] == "fnir")
    assert not fnir["higher_is_better"] and "rose" in fnir["message"]
    assert check_gates(table, "a", "2025-01-02", {"map": {"max_drop_previous": 0.02}}) == []
    assert check_gates(table, "a", "2025-01-01", gates) == []          # first night: nothing to compare
    missing = check_gates(table, "a", "2025-01-02", {"map": {"max_drop_baseline": 0.1}}, "2024-12-31")
    assert len(missing) == 1 and "not in the history" in missing[0]["message"]
    by_date = check_gates(table, "a", "2025-01-02", {"map": {"max_drop_baseline": 0.01}}, "2025-01-01")
    assert len(by_date) == 1 and by_date[0]["reference_date"] == "2025-01-01"


def _writer(root: str, evaluation: str, dates: list) -> int:
    """Write runs under the lock and read the whole history back each time (a concurrent nightly)."""
    seen = 0
    for i, day in enumerate(dates):
        with h.history_lock(root):
            h.write_run(root, day, evaluation, summary(0.5 + i / 100))
            seen = h.read_history(root).num_rows
    return seen


def test_concurrent_writers_never_corrupt_the_history(tmp_path):
    import multiprocessing as mp

    days = [f"2025-05-{d:02d}" for d in range(1, 21)]
    ctx = mp.get_context("spawn")
    with ctx.Pool(2) as pool:
        jobs = [pool.apply_async(_writer, (str(tmp_path), name, days)) for name in ("a", "b")]
        assert all(j.get(timeout=120) >= 40 for j in jobs)
    table = h.read_history(tmp_path)
    assert table.num_rows == 2 * 2 * len(days)
    assert sorted(set(zip(table["evaluation"].to_pylist(), table["run_date"].to_pylist()))) == \
        sorted((e, d) for e in "ab" for d in days)
    assert not [p for p in tmp_path.rglob("*") if ".tmp-" in p.name]


def test_job_file_accepts_empty_queries_and_refuses_other_values(tmp_path):
    from evalcore.jobs.nightly import load_job

    def job(value):
        path = tmp_path / f"job-{value}.toml"
        path.write_text(f'reports = "r"\nhistory = "h"\n[[evaluation]]\nname = "a"\ndataset = "d.zarr"\n'
                        f'protocol = "qrels"\nempty_queries = "{value}"\n')
        return load_job(path)

    assert job("zero")["evaluation"][0]["empty_queries"] == "zero"
    with pytest.raises(InputError, match="empty_queries 'none' is not one of skip, zero"):
        job("none")


# --------------------------------------------------------------------------- job files checked before any work

BASE = 'reports = "r"\nhistory = "h"\n'
EVAL = '[[evaluation]]\nname = "a"\ndataset = "d.zarr"\nks = [1, 3, 5, 10]\n'


@pytest.mark.parametrize("text, words", [
    # a gate, a baseline or a trend metric the evaluation does not write
    (BASE + EVAL + "[gates.mAP]\nmax_drop_previous = 0.01\n",
     ["gates.mAP", "'mAP' is not a metric evaluation 'a' writes", "did you mean 'map'?", "known: n_queries"]),
    (BASE + EVAL + "[gates.hit_at_7]\nmax_drop_previous = 0.01\n", ["gates.hit_at_7", "hit_at_10"]),
    (BASE + EVAL + "[evaluation.gates.fpir]\nmax_drop_previous = 0.01\n", ["evaluation 'a': gates.fpir", "known"]),
    (BASE + EVAL.replace("ks = [1, 3, 5, 10]", "map_at = 50") + "[gates.map_at_100]\nmax_drop_previous = 0.1\n",
     ["map_at_100", "map_at_50"]),
    (BASE + EVAL + "[baseline.a]\nmap = 0.5\nmAP = 0.4\n", ["baseline.a.mAP", "did you mean 'map'?"]),
    ('trend_metrics = ["map", "hit_at_7"]\n' + BASE + EVAL, ["trend_metrics", "'hit_at_7'", "any evaluation"]),
    # sizes parsed and held to the worker memory floor at load
    ("memory_limit = 4\n" + BASE + EVAL, ["memory_limit: 4 per worker is too small", "512MiB"]),
    ('memory_limit = "100MB"\n' + BASE + EVAL, ["memory_limit: 100MB per worker is too small"]),
    ('memory_limit = "lots"\n' + BASE + EVAL, ["memory_limit: 'lots' is not a size"]),
    ("memory_limit = true\n" + BASE + EVAL, ["memory_limit must be a size"]),
    # a table where one value is expected, and a bad table where a table is meant
    ("memory_limit = { size = 4 }\n" + BASE + EVAL, ["memory_limit is a table, but it takes a single value"]),
    (BASE + EVAL.replace("[1, 3, 5, 10]", "{ a = 1 }"), ["evaluation 'a'", "ks is a table, but it takes a single value"]),
    (BASE + EVAL.replace("ks = [1, 3, 5, 10]", "protocol = { name = \"reid\" }"), ["protocol is a table"]),
    (BASE + EVAL + 'storage_options = "anon=true"\n', ["storage_options: must be a table"]),
    (BASE + EVAL + "storage_options = { expires = 2025-01-01 }\n", ["storage_options.expires", "TOML date"]),
    (BASE + EVAL + 'storage_options = { endpoint_url = "http://a", client_kwargs = { endpoint_url = "http://b" } }\n',
     ["endpoint_url is given both at the top and in client_kwargs"]),
])
def test_job_file_metrics_sizes_and_tables_are_checked_before_any_work(tmp_path, capsys, monkeypatch, text, words):
    import evalcore.engine.cluster as cluster

    def refuse(*a, **k):
        raise AssertionError("a cluster was started before the job file was checked")

    monkeypatch.setattr(cluster, "dask_client", refuse)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "job.toml").write_text(text)
    assert main(["nightly", "job.toml", "--date", "2025-01-01"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("evalcore: error: job.toml"), err
    assert all(w in err for w in words), (words, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.toml"]     # no report, history, trend or gates


def test_metrics_a_job_may_name_follow_its_options(tmp_path):
    from evalcore.engine.cluster import MIN_WORKER_MEMORY
    from evalcore.jobs.nightly import load_job

    path = tmp_path / "job.toml"
    path.write_text(BASE + f'trend_metrics = ["hit_at_7", "fpir", "map_at_100"]\nmemory_limit = {MIN_WORKER_MEMORY}\n'
                    + '[[evaluation]]\nname = "a"\ndataset = "d.zarr"\nks = [7]\nthreshold = 0.5\nmap_at = 100\n'
                    + "target_fpir = 0.1\n"
                    + "[evaluation.gates.fnir_at_target_fpir]\nmax_drop_previous = 0.01\n"
                    + '[[evaluation]]\nname = "b"\ndataset = "d.zarr"\nks = [7]\n'
                    + "[gates.hit_at_7]\nmax_drop_previous = 0.01\n[baseline.a]\nfpir = 0.1\nn_evaluated = 10\n")
    job = load_job(path)
    assert job["memory_limit"] == str(MIN_WORKER_MEMORY)       # the engine's floor itself, in bytes, is enough
    assert set(job["evaluation"][0]["gates"]) == {"fnir_at_target_fpir"}
    path.write_text(path.read_text().replace(f"= {MIN_WORKER_MEMORY}", f"= {MIN_WORKER_MEMORY - 1}"))
    with pytest.raises(InputError, match="memory_limit: .* per worker is too small"):
        load_job(path)


def test_the_metrics_a_job_may_name_are_the_summary_columns_an_evaluation_writes(write):
    """The names the job file is checked against come from the options; an evaluation with those options
    writes exactly those summary columns."""
    from evalcore import api
    from evalcore.jobs.nightly import evaluation_metrics

    rng = np.random.default_rng(3)
    arrays = random_reid(rng, n_query=40, n_gallery=200, dims=8, n_ids=15)
    arrays.update({f"{side}/{c}": rng.uniform(-1, 1, n) for side, n in (("query", 40), ("gallery", 200))
                   for c in ("lat", "lon")})
    arrays.update({"qrels/query": np.repeat(np.arange(40), 3), "qrels/item": (np.arange(120) * 7) % 200,
                   "qrels/rel": rng.integers(-1, 2, 120).astype(np.int8)})
    path = write(arrays)
    for protocol in ("reid", "class", "qrels", "geo"):          # the protocol changes values, not columns
        for options in ({}, {"ks": [2, 7]}, {"ks": [1], "map_at": 20}, {"threshold": 0.4},
                        {"ks": [3], "threshold": 0.4, "target_fpir": 0.1, "map_at": 5}):
            result = api.evaluate(str(path), protocol=protocol,
                                  **{**options, "ks": tuple(options.get("ks", (1, 3, 5, 10)))})
            assert result.summary.column_names == ["group", *evaluation_metrics(options)], (protocol, options)


def test_a_nested_storage_options_table_passes_through_typed(tmp_path, monkeypatch):
    from evalcore.jobs import common
    from evalcore.jobs.nightly import load_job, run_settings

    path = tmp_path / "job.toml"
    path.write_text(BASE + EVAL + 'storage_options = { anon = false, default_block_size = 1048576, '
                    'endpoint_url = "http://127.0.0.1:9", client_kwargs = { region_name = "eu-1", '
                    'config_kwargs = { retries = { max_attempts = 2 } } }, tags = ["a", 1] }\n')
    ev = load_job(path)["evaluation"][0]
    want = {"anon": False, "default_block_size": 1048576, "tags": ["a", 1],
            "client_kwargs": {"region_name": "eu-1", "config_kwargs": {"retries": {"max_attempts": 2}},
                              "endpoint_url": "http://127.0.0.1:9"}}
    args = argparse.Namespace(scheduler=None, workers=None, memory_limit=None)
    assert run_settings(ev, args, {}).storage_options == want
    # what the command line's --storage-option builds for the same endpoint is the same shape
    assert common.parse_storage_options(["endpoint_url=http://127.0.0.1:9", "anon=false"]) == \
        {"client_kwargs": {"endpoint_url": "http://127.0.0.1:9"}, "anon": False}
    seen = {}

    def fake_evaluate(source, **kwargs):
        seen.update(kwargs)
        raise common.InputError("stop here")

    from evalcore import api
    monkeypatch.setattr(api, "evaluate", fake_evaluate)
    monkeypatch.chdir(tmp_path)
    assert main(["nightly", str(path), "--date", "2025-01-01", "--quiet"]) == 2
    assert seen["storage_options"] == want                     # handed to the evaluation as the table it is


def test_stall_timeout_comes_from_the_command_line_else_the_job_file(tmp_path, capsys, monkeypatch):
    import argparse

    from evalcore.jobs.nightly import load_job, run_settings

    path = tmp_path / "job.toml"
    path.write_text('reports = "r"\nhistory = "h"\nstall_timeout = 90\n[[evaluation]]\nname = "a"\n'
                    'dataset = "d.zarr"\n')
    job = load_job(path)
    args = argparse.Namespace(scheduler=None, workers="1", memory_limit=None, stall_timeout=None)
    assert run_settings(job["evaluation"][0], args, job).stall_timeout == 90
    args.stall_timeout = "20"
    assert run_settings(job["evaluation"][0], args, job).stall_timeout == 20.0
    monkeypatch.chdir(tmp_path)
    assert main(["nightly", "job.toml", "--date", "2025-01-01", "--stall-timeout", "-5"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("evalcore: error: --stall-timeout: "), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.toml"]
