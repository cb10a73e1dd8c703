"""Progress that moves, and a first run that says why it waits (issue 39, items 1 and 2).

References: ranks by brute force (numpy argsort of the cosine scores) for the
counted run; the pair count Q x G from the arrays' shapes; the compile notice
from a fresh NUMBA_CACHE_DIR in a subprocess (nothing cached there, so numba
must compile, and numba writes its cache files there).
"""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import evalcore
from evalcore.cli.main import main

#: gallery rows: three gallery tiles (4,096 columns each) in one read block
N_GALLERY = 10_000


def _arrays(n_query: int = 600, dims: int = 16, seed: int = 3) -> dict:
    rng = np.random.default_rng(seed)
    return {"query": rng.standard_normal((n_query, dims)).astype(np.float32),
            "gallery": rng.standard_normal((N_GALLERY, dims)).astype(np.float32),
            "query_labels": rng.integers(0, 40, n_query), "gallery_labels": rng.integers(0, 40, N_GALLERY)}


def _first_rank_brute(a: dict) -> np.ndarray:
    """Rank of each query's first relevant item by a full sort of the float64 cosine scores (no ties here)."""
    q = a["query"].astype(np.float64)
    g = a["gallery"].astype(np.float64)
    s = (q / np.linalg.norm(q, axis=1)[:, None]) @ (g / np.linalg.norm(g, axis=1)[:, None]).T
    order = np.argsort(-s, axis=1, kind="stable")
    rel = a["gallery_labels"][order] == a["query_labels"][:, None]
    return rel.argmax(axis=1) + 1


@pytest.mark.parametrize("threads", [1, 2])
def test_on_progress_counts_pairs_tile_by_tile(threads, monkeypatch):
    """A run here over three gallery tiles and two chunks: several updates, never decreasing, ending at Q x G."""
    a = _arrays()
    calls: list[tuple[int, int, str]] = []
    r = evalcore.evaluate(**a, chunk_rows=512, workers=None,
                          on_progress=lambda done, total, phase: calls.append((done, total, phase)))
    assert len(r.info["chunks"]) == 2 and r.info["workers"] == 1  # in this process, two chunks
    ranking = [c for c in calls if c[2] == "ranking"]
    total = 600 * N_GALLERY
    assert ranking[0] == (0, total, "ranking") and ranking[-1] == (total, total, "ranking")
    done = [d for d, _, _ in ranking]
    assert done == sorted(done)
    assert len(set(done)) >= 2 * 3  # two chunks x three tiles at least
    # counting changes no number: the ranks are a brute-force sort's
    assert r.per_query.column("first_rank").to_pylist() == _first_rank_brute(a).tolist()


class FakeTerminal(io.StringIO):
    """stderr as a terminal: tqdm draws its bar into it."""

    def isatty(self) -> bool:
        return True


def _cli_run(tmp_path, stderr, *extra: str) -> int:
    a = _arrays(n_query=300)
    path = tmp_path / "ds.zarr"
    from evalcore.io import dataset as ds

    ds.write_dataset(path, {"query/emb": a["query"], "gallery/emb": a["gallery"], "query/label": a["query_labels"],
                            "gallery/label": a["gallery_labels"]}, chunk_rows=128, overwrite=True)
    old = sys.stderr
    sys.stderr = stderr
    try:
        return main(["evaluate", str(path), "--out", str(tmp_path / "out"), "--chunk-rows", "128", *extra])
    finally:
        sys.stderr = old


def test_terminal_gets_a_bar_with_eta_and_quiet_turns_it_off(tmp_path, monkeypatch, capsys):
    from evalcore.engine import progress

    monkeypatch.setattr(progress, "BAR_DELAY_S", 0.0)  # the run is shorter than the bar's usual delay
    shown = FakeTerminal()
    assert _cli_run(tmp_path, shown) == 0
    text = shown.getvalue()
    assert "ranking:" in text  # the bar, by pairs ranked
    assert "pairs/s]" in text and "<" in text  # a rate and an ETA ([elapsed<remaining, rate])
    quiet = FakeTerminal()
    assert _cli_run(tmp_path, quiet, "--quiet", "--overwrite") == 0
    assert quiet.getvalue() == ""


def test_no_bar_in_a_log_one_line_per_phase(tmp_path):
    log = io.StringIO()  # not a terminal
    assert _cli_run(tmp_path, log) == 0
    lines = log.getvalue().splitlines()
    assert "%|" not in log.getvalue()  # no bar drawn
    ends = [line for line in lines if line.startswith("evalcore: ranking done: ")]
    assert len(ends) == 1 and ends[0].startswith(f"evalcore: ranking done: {300 * N_GALLERY:,} pairs ranked in ")
    chunks = json.loads((tmp_path / "out" / "run.json").read_text())["chunks"]
    assert sum(line.startswith("evalcore: chunk ") for line in lines) == len(chunks)  # the per-chunk lines stay


SMALL_RUN = textwrap.dedent("""
    import numpy as np, evalcore
    rng = np.random.default_rng(0)
    r = evalcore.evaluate(query=rng.standard_normal((20, 8)).astype(np.float32),
                          gallery=rng.standard_normal((300, 8)).astype(np.float32),
                          query_labels=rng.integers(0, 5, 20), gallery_labels=rng.integers(0, 5, 300))
    print(r.metrics["map"])
""")


def _run(cmd: list[str], cache: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "NUMBA_CACHE_DIR": cache}
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=True)


def test_compile_notice_on_the_first_run_only(tmp_path):
    cache = str(tmp_path / "numba-cache")
    first = _run([sys.executable, "-c", SMALL_RUN], cache)
    notices = [line for line in first.stderr.splitlines() if "compiling kernels" in line]
    assert len(notices) == 1
    assert notices[0].startswith(f"evalcore: compiling kernels (first run only, cached in {cache}")
    assert any(name.endswith(".nbi") for _, _, files in os.walk(cache) for name in files)  # numba wrote there
    second = _run([sys.executable, "-c", SMALL_RUN], cache)
    assert "compiling" not in second.stderr
    assert second.stdout == first.stdout


def test_warmup_fills_the_cache(tmp_path):
    cache = str(tmp_path / "numba-cache")
    cli = "import sys; from evalcore.cli.main import main; sys.exit(main(sys.argv[1:]))"
    warm = _run([sys.executable, "-c", cli, "warmup", "--only", "embeddings"], cache)
    assert f"cached in {cache}" in warm.stdout
    assert "compiling kernels" not in warm.stderr + warm.stdout  # warmup says what it does, not the run's notice
    run = _run([sys.executable, "-c", SMALL_RUN], cache)
    assert "compiling" not in run.stderr


def calls_into(calls: list):
    return lambda done, total, phase: calls.append((done, total, phase))


def test_cluster_runs_count_chunks_and_shard_scans():
    """On a client: finished chunks, or (chunk, shard) scans with gallery shards; done == total at the end."""
    from distributed import Client, LocalCluster

    a = _arrays(n_query=600)
    brute = _first_rank_brute(a).tolist()
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        for shards, phase in ((None, "chunks"), (2, "shards")):
            calls: list[tuple[int, int, str]] = []
            r = evalcore.evaluate(**a, client=client, chunk_rows=256, gallery_shards=shards, on_progress=calls_into(calls))
            total = len(r.info["chunks"]) * (shards or 1)
            assert len(r.info["chunks"]) > 1 and (r.info["gallery_shards"] is None) == (shards is None)
            counted = [c for c in calls if c[2] == phase]
            assert counted[0] == (0, total, phase) and counted[-1] == (total, total, phase)
            done = [d for d, _, _ in counted]
            assert done == sorted(done) and len(set(done)) == total + 1  # every task, in order
            assert r.per_query.column("first_rank").to_pylist() == brute


# --------------------------------------------------------------------------- imports: bytes read and written


def _trec_files(tmp_path, n_query: int = 300, depth: int = 50) -> tuple[str, str]:
    """A TREC run and qrels big enough for several of the reader's pieces (``trec.PIECE_BYTES`` made small)."""
    rng = np.random.default_rng(5)
    run = [f"q{q} Q0 d{rng.integers(5000)}_{r} {r + 1} {1 - r / depth:.4f} tag\n"
           for q in range(n_query) for r in range(depth)]
    qrels = [f"q{q} 0 d{rng.integers(5000)}_{r} {rng.integers(3)}\n" for q in range(n_query) for r in range(5)]
    (tmp_path / "run").write_text("".join(run))
    (tmp_path / "qrels").write_text("".join(qrels))
    return str(tmp_path / "run"), str(tmp_path / "qrels")


def test_an_import_reports_the_bytes_it_reads_and_writes(tmp_path, monkeypatch):
    from evalcore.io import progress
    from evalcore.io.importers import import_to, trec

    monkeypatch.setattr(trec, "PIECE_BYTES", 64 * 1024)  # several pieces per file
    run, qrels = _trec_files(tmp_path)
    calls: list[tuple[int, int, str]] = []
    with progress.reporting(lambda done, total, phase: calls.append((done, total, phase))):
        import_to("trec-run", [run], tmp_path / "ds.zarr", qrels=qrels)
    phases = [p for _, _, p in calls]
    assert phases == sorted(phases, key=["reading", "writing"].index)  # reading ends before writing starts
    reading = [(d, t) for d, t, p in calls if p == "reading"]
    total_read = os.path.getsize(run) + os.path.getsize(qrels)  # both files, every byte
    assert reading[-1] == (total_read, total_read)
    assert len(reading) > 4 and [d for d, _ in reading] == sorted(d for d, _ in reading)
    assert all(d < t for d, t in reading[:-1])  # done == total only once, at the end
    # the bytes written: every numeric array of the dataset, as Zarr holds them
    import zarr

    group = zarr.open_group(str(tmp_path / "ds.zarr"), mode="r")
    numeric = sum(a.nbytes for _, a in group.arrays() if a.dtype.kind in "biuf")
    numeric += sum(a.nbytes for _, sub in group.groups() for _, a in sub.arrays() if a.dtype.kind in "biuf")
    writing = [(d, t) for d, t, p in calls if p == "writing"]
    assert writing[0] == (0, numeric) and writing[-1] == (numeric, numeric)


def test_an_import_stopped_by_bad_input_ends_no_phase(tmp_path):
    from evalcore.errors import InputError
    from evalcore.io import progress
    from evalcore.io.importers import import_to

    run, qrels = _trec_files(tmp_path, n_query=20)
    with open(run, "a") as handle:
        handle.write("q1 Q0 dX 1 not-a-score tag\n")
    calls: list[tuple[int, int, str]] = []
    with pytest.raises(InputError), progress.reporting(lambda *call: calls.append(call)):
        import_to("trec-run", [run], tmp_path / "ds.zarr", qrels=qrels)
    assert not any(done == total for done, total, _ in calls if total)  # a log prints no "done" line
    assert not (tmp_path / "ds.zarr").exists()


def test_import_command_shows_a_bar_on_a_terminal_lines_in_a_log_nothing_with_quiet(tmp_path, monkeypatch):
    from evalcore.engine import progress

    monkeypatch.setattr(progress, "BAR_DELAY_S", 0.0)
    run, qrels = _trec_files(tmp_path)

    def imported(stderr, *extra: str) -> str:
        old = sys.stderr
        sys.stderr = stderr
        try:
            assert main(["import", "trec-run", run, "--qrels", qrels, "--out", str(tmp_path / "ds.zarr"),
                         "--overwrite", *extra]) == 0
        finally:
            sys.stderr = old
        return stderr.getvalue()

    shown = imported(FakeTerminal())
    assert "reading:" in shown and "writing:" in shown and "B/s]" in shown  # bars by bytes, with a rate
    log = imported(io.StringIO()).splitlines()
    total = os.path.getsize(run) + os.path.getsize(qrels)
    assert [line.split(" in ")[0] for line in log] == [f"evalcore: reading done: {total:,} bytes read",
                                                        log[1].split(" in ")[0]]
    assert log[1].startswith("evalcore: writing done: ") and log[1].endswith(" s")
    assert imported(io.StringIO(), "--quiet") == ""


def test_trec_reports_the_bytes_it_reads_then_the_ranking(tmp_path, monkeypatch):
    from evalcore.engine import progress
    from evalcore.io.importers import trec

    monkeypatch.setattr(trec, "PIECE_BYTES", 64 * 1024)
    run, qrels = _trec_files(tmp_path)
    calls: list[tuple[int, int, str]] = []
    evalcore.trec(qrels, run, ["map"], on_progress=lambda *call: calls.append(call))
    phases = list(dict.fromkeys(p for _, _, p in calls if not p.startswith(progress.COMPILING)))
    assert phases == ["reading", "ranking"]
    total = os.path.getsize(run) + os.path.getsize(qrels)
    assert [c for c in calls if c[2] == "reading"][-1] == (total, total, "reading")

    # the command: a bar on a terminal; in a log nothing but trec_eval's lines (trec_eval prints nothing else)
    monkeypatch.setattr(progress, "BAR_DELAY_S", 0.0)
    for stderr, shown in ((FakeTerminal(), True), (io.StringIO(), False)):
        old = sys.stderr
        sys.stderr = stderr
        try:
            assert main(["trec", "-m", "map", qrels, run]) == 0
        finally:
            sys.stderr = old
        text = stderr.getvalue()
        assert ("reading:" in text and "B/s]" in text) == shown, text
        assert not shown or "ranking:" in text
        assert shown or all(line.startswith("evalcore: warning: ") for line in text.splitlines()), text
