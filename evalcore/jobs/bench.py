"""``evalcore bench``: evaluate, the matrix-product floor and a full-sort evaluator, side by side.

All three run in one invocation on the same generated data and the same
cores, so the ratios mean something on a noisy shared machine even when the
absolute seconds do not.

``evalcore bench --sweep`` runs a series of gallery sizes at a fixed query
count and width, at each worker count asked, and prints a cost table: one
row per (gallery size, workers) with evaluate's seconds and the floor's,
measured one after the other in the same invocation, their ratio, the
gallery shards the run used and the peak memory (see :func:`run_sweep`).
"""
from __future__ import annotations

import contextlib
import csv
import io
import logging
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

import numpy as np
import psutil
import zarr
from threadpoolctl import threadpool_limits

import evalcore
from evalcore.errors import OptionError, input_error, mention
from evalcore.io.dataset import member_array, member_group
from evalcore.jobs import synthetic
from evalcore.jobs.common import check_memory_limit, parse_number
from evalcore.jobs.timing import alternate, seconds_of
from evalcore.render import svg

SHAPES = {
    # name: queries, gallery, dims, stored dtype, identities, worker memory limit
    "small": (1000, 20_000, 64, "float32", 2000, None),
    "medium": (2000, 200_000, 64, "float32", 20_000, "1GiB"),
    "market": (3368, 19_732, 2048, "float32", 751, None),
    "large": (20_000, 1_000_000, 128, "float16", 100_000, "4GiB"),
    "xl": (10_000, 2_000_000, 256, "float16", 200_000, "2GiB"),
    # re-ranking at a scale whose dense (Q+G)^2 matrices would need > 160 GiB
    "reid-200k": (20_000, 200_000, 128, "float16", 20_000, "4GiB"),
}
#: the conventional evaluator holds Q x G float32 scores and int64 argsort indices
CONVENTIONAL_LIMIT_BYTES = 8 << 30
#: timed pairs per compared figure (``--repeat``)
DEFAULT_REPEAT = 5


@dataclass
class Peak:
    """Largest resident set size seen, per process, while a block runs (sampled every 50 ms)."""

    pids: list[int]
    peak: int = 0
    #: largest sum over the processes of one sample's resident set sizes
    total: int = 0
    _stop: bool = False

    def __enter__(self):
        self._procs = [psutil.Process(p) for p in self.pids]
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self):
        while not self._stop:
            total = 0
            for proc in self._procs:
                try:
                    rss = proc.memory_info().rss
                except Exception:  # noqa: BLE001 - a worker may be gone
                    continue
                self.peak = max(self.peak, rss)
                total += rss
            self.total = max(self.total, total)
            time.sleep(0.05)

    def __exit__(self, *exc):
        self._stop = True
        self._thread.join()


def _read(root: zarr.Group, name: str) -> np.ndarray:
    """All of the array ``root[name]`` as numpy (zarr types a read as array-or-scalar; these are arrays)."""
    return np.asarray(member_array(root, name)[:])


def matrix_product_floor(path: str, threads: int, q: np.ndarray | None = None, g: np.ndarray | None = None) -> float:
    """Seconds for the bare float32 Q x G product on ``threads`` BLAS threads, data in memory (read from
    ``path`` unless given).

    The faster of two block shapes (cache-sized 512 x 4096 output tiles, and
    large 2048 x 16384 blocks), so the floor is as low as plain numpy gets.
    """
    if q is None or g is None:
        q, g = floor_operands(path)
    q, g = np.asarray(q, dtype=np.float32), np.asarray(g, dtype=np.float32)
    best = float("inf")
    with threadpool_limits(limits=threads, user_api="blas"):
        for rows, cols in ((512, 4096), (2048, 16384)):
            started = time.perf_counter()
            for a in range(0, q.shape[0], rows):
                for b in range(0, g.shape[0], cols):
                    q[a:a + rows] @ g[b:b + cols].T
            best = min(best, time.perf_counter() - started)
    return best


def floor_operands(path: str) -> tuple[np.ndarray, np.ndarray]:
    """Query and gallery rows as float32 in memory (the gallery read a block at a time)."""
    root = zarr.open_group(path, mode="r")
    q = np.asarray(_read(root, "query/emb"), dtype=np.float32)
    gallery = member_array(root, "gallery/emb")
    g = np.empty(gallery.shape, dtype=np.float32)
    step = 1 << 16
    for a in range(0, gallery.shape[0], step):
        g[a:a + step] = gallery[a:a + step]
    return q, g


def conventional_map(path: str, threads: int) -> tuple[float, float, float]:
    """The usual evaluate.py: full score matrix, argsort per row, per-query loop (reid rule).

    Returns (seconds, mAP, rank-1).
    """
    started = time.perf_counter()
    root = zarr.open_group(path, mode="r")
    q = np.asarray(_read(root, "query/emb"), dtype=np.float32)
    g = np.asarray(_read(root, "gallery/emb"), dtype=np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    ql, qc = _read(root, "query/label"), _read(root, "query/cam")
    gl, gc = _read(root, "gallery/label"), _read(root, "gallery/cam")
    gj = _read(root, "gallery/junk") if "junk" in member_group(root, "gallery") else np.zeros(len(gl), bool)
    with threadpool_limits(limits=threads, user_api="blas"):
        scores = q @ g.T
        order = np.argsort(-scores, axis=1)
    aps, hits = [], []
    for i in range(len(q)):
        idx = order[i]
        same = gl[idx] == ql[i]
        junk = (same & (gc[idx] == qc[i])) | gj[idx]
        good = same & ~junk & (ql[i] >= 0)
        keep = ~junk
        good = good[keep]
        if not good.any():
            continue
        ranks = np.nonzero(good)[0] + 1
        aps.append(np.mean(np.arange(1, len(ranks) + 1) / ranks))
        hits.append(ranks[0] == 1)
    return time.perf_counter() - started, float(np.mean(aps)), float(np.mean(hits))


#: the conventional evaluate.py as a whole program: what a user runs today, timed as a fresh process
CONVENTIONAL_SCRIPT = """
import sys, numpy as np, zarr
root = zarr.open_group(sys.argv[1], mode="r")
q = np.asarray(root["query/emb"][:], dtype=np.float32); g = np.asarray(root["gallery/emb"][:], dtype=np.float32)
q /= np.linalg.norm(q, axis=1, keepdims=True); g /= np.linalg.norm(g, axis=1, keepdims=True)
ql, qc, gl, gc = (root[n][:] for n in ("query/label", "query/cam", "gallery/label", "gallery/cam"))
gj = root["gallery/junk"][:] if "junk" in root["gallery"] else np.zeros(len(gl), bool)
order = np.argsort(-(q @ g.T), axis=1)
aps, hits = [], []
for i in range(len(q)):
    idx = order[i]
    same = gl[idx] == ql[i]
    junk = (same & (gc[idx] == qc[i])) | gj[idx]
    good = (same & ~junk & (ql[i] >= 0))[~junk]
    if good.any():
        ranks = np.nonzero(good)[0] + 1
        aps.append(np.mean(np.arange(1, len(ranks) + 1) / ranks)); hits.append(ranks[0] == 1)
print(f"mAP {np.mean(aps):.4f} rank-1 {np.mean(hits):.4f}")
"""


def whole_process(command: list[str], env: dict | None = None, peaks: list[int] | None = None) -> float:
    """Wall seconds of a fresh process, start to exit (imports, cluster start, work, shutdown); with ``peaks``,
    its peak RSS in bytes is appended there (the child's own, as the kernel accounts it at exit)."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err, env=env)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode != 0:
            err.seek(0)
            raise RuntimeError(f"{command[:3]} exited {child.returncode}: "
                               f"{err.read().decode(errors='replace').strip()[-500:]}")
    if peaks is not None:
        peaks.append(usage.ru_maxrss * 1024)  # Linux reports KiB
    return seconds


def in_memory_arrays(path: str) -> dict:
    """The dataset's arrays as numpy, the way a training loop holds its features."""
    root = zarr.open_group(path, mode="r")
    out = {"query": _read(root, "query/emb"), "gallery": _read(root, "gallery/emb"),
           "query_labels": _read(root, "query/label"), "gallery_labels": _read(root, "gallery/label"),
           "query_cams": _read(root, "query/cam"), "gallery_cams": _read(root, "gallery/cam")}
    if "junk" in member_group(root, "gallery"):
        out["gallery_junk"] = _read(root, "gallery/junk")
    return out


def whole_process_figures(path: str, workers: int, repeat: int) -> None:
    """The command and the conventional script as fresh processes (alternated, ``repeat`` pairs), a cold first
    run, and the API on arrays against the floor measured in the same process (alternated)."""
    exe = shutil.which("evalcore") or os.path.join(os.path.dirname(sys.executable), "evalcore")
    with tempfile.TemporaryDirectory(prefix="evalcore-bench-out-") as out:
        cmd = [exe, "evaluate", path, "--out", os.path.join(out, "r"), "--protocol", "reid", "--quiet",
               "--overwrite"]
        t_cold = whole_process(cmd, env={**os.environ, "NUMBA_CACHE_DIR": os.path.join(out, "numba-cold")})
        processes = alternate(lambda: whole_process([sys.executable, "-c", CONVENTIONAL_SCRIPT, path]),
                              lambda: whole_process(cmd), repeat)
    arrays = in_memory_arrays(path)
    result = evalcore.evaluate(**arrays, protocol="reid", ks=(1, 5, 10))  # warm: kernel loaded, pages touched
    in_memory = alternate(seconds_of(lambda: evalcore.evaluate(**arrays, protocol="reid", ks=(1, 5, 10))),
                          lambda: matrix_product_floor(path, workers, arrays["query"], arrays["gallery"]), repeat)
    # what --ci (10,000 resamples of every mean and CMC point) adds to the same evaluation
    with_ci = alternate(seconds_of(lambda: evalcore.evaluate(**arrays, protocol="reid", ks=(1, 5, 10), ci=0.95)),
                        seconds_of(lambda: evalcore.evaluate(**arrays, protocol="reid", ks=(1, 5, 10))), repeat)
    print("  whole processes, start to exit (alternated pairs; median, min-max):", flush=True)
    print(f"    conventional script (python -c)    {processes.first.text()}", flush=True)
    print(f"    evalcore evaluate (command)        {processes.second.text()}   script / command = "
          f"{processes.ratio_text()}   ({result.run['execution']})", flush=True)
    print(f"    evalcore evaluate, cold first run  {t_cold:6.2f} s   (empty kernel cache)", flush=True)
    print(f"  evalcore.evaluate on numpy arrays  {in_memory.first.text()}   api / floor = {in_memory.ratio_text()}"
          f"   (floor {in_memory.second.text()}, same process)", flush=True)
    print(f"  evalcore.evaluate with ci=0.95     {with_ci.first.text()}   with / without = {with_ci.ratio_text()}"
          f"   (without {with_ci.second.text()}, alternated)", flush=True)


def generate(path: str, shape: str) -> None:
    nq, ng, dims, dtype, ids, _ = SHAPES[shape]
    write_data(path, nq, ng, dims, dtype, ids, keys=shape in ("small", "market"))


def write_data(path: str, nq: int, ng: int, dims: int, dtype: str, ids: int, keys: bool = False) -> None:
    """The benchmarks' clustered reid data (10% distractors, 1% junk, 2% open-set queries, seed 1)."""
    synthetic.write_clustered(path, synthetic.Clusters(n_query=nq, n_gallery=ng, dims=dims, n_ids=ids, dtype=dtype,
                                                   distractors=0.1, junk=0.01, unknown=0.02),
                              seed=1, query_chunk=1024, gallery_chunk=65536, keys=keys)


def run(args) -> int:
    if getattr(args, "sweep", False):
        return run_sweep(args)
    for option in SWEEP_ONLY:
        if getattr(args, option.lstrip("-").replace("-", "_"), None) is not None:
            raise input_error(option, "only with " + mention("--sweep"))
    args.shape = args.shape or "market"
    workers = parse_number("--workers", args.workers or "2", int)
    if workers < 1:
        raise OptionError("--workers", f"{workers} must be at least 1")
    repeat = parse_number("--repeat", str(getattr(args, "repeat", None) or DEFAULT_REPEAT), int)
    if repeat < 1:
        raise OptionError("--repeat", f"{repeat} must be at least 1")
    # deferred: the engine brings distributed and numba, which evalcore --help should not import
    from distributed import Client, LocalCluster

    from evalcore.engine.cluster import PRELOAD
    from evalcore.engine.evaluate import Options, evaluate

    nq, ng, dims, dtype, _, limit = SHAPES[args.shape]
    limit = args.memory_limit or limit or "auto"
    tmp = None
    if args.data_dir:
        path = os.path.join(args.data_dir, f"bench-{args.shape}.zarr")
    else:
        tmp = tempfile.TemporaryDirectory(prefix="evalcore-bench-")
        path = os.path.join(tmp.name, f"{args.shape}.zarr")
    print(f"shape {args.shape}: {nq:,} queries x {ng:,} gallery x {dims:,} dims stored as {dtype}, "
          f"{workers} worker processes x 1 thread, memory limit {limit}", flush=True)
    if not os.path.exists(os.path.join(path, "zarr.json")):
        t = time.perf_counter()
        generate(path, args.shape)
        print(f"  generated clustered data in {time.perf_counter() - t:.1f} s ({path})", flush=True)


    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                      memory_limit=limit, silence_logs=logging.ERROR, preload=PRELOAD,
                      scheduler_kwargs={"dashboard_address": "127.0.0.1:0"}) as cluster, \
            Client(cluster, set_as_default=False) as client:
        pids = [os.getpid()] + list(client.run(os.getpid).values())
        with Peak(pids) as peak:
            result = evaluate(path, Options(protocol="reid", ks=(1, 5, 10)), client=client)  # warm: kernels loaded
        q, g = floor_operands(path)
        timed = alternate(seconds_of(lambda: evaluate(path, Options(protocol="reid", ks=(1, 5, 10)), client=client)),
                          lambda: matrix_product_floor(path, workers, q, g), repeat)
    t_eval = timed.first.median
    summary = result.summary.to_pylist()[0]
    shards = result.info.get("gallery_shards")
    print(f"  tasks: {len(result.info['chunks'])} query chunks"
          + (f" x {len(shards)} gallery shards (the gallery exceeds a third of a worker's memory limit)"
             if shards else ", whole gallery per task"), flush=True)
    print(f"  evaluate (evalcore, cluster)        {timed.first.text()}   mAP {summary['map']:.4f}  "
          f"rank-1 {summary['hit_at_1']:.4f}  peak RSS of the largest process {peak.peak / 2**20:,.0f} MiB",
          flush=True)
    print(f"  matrix-product floor (float32 gemm) {timed.second.text()}   evaluate / floor = {timed.ratio_text()}",
          flush=True)
    need = nq * ng * (4 + 8)
    if args.skip_conventional:
        print("  conventional evaluator               skipped (--skip-conventional)")
    elif need > CONVENTIONAL_LIMIT_BYTES:
        print(f"  conventional evaluator               does not fit: its Q x G scores and argsort need "
              f"{need / 2**30:,.0f} GiB")
    else:
        with Peak([os.getpid()]) as cpeak:
            t_conv, conv_map, conv_r1 = conventional_map(path, workers)
        print(f"  conventional (full matrix + argsort) {t_conv:6.2f} s   conventional / evaluate = "
              f"{t_conv / t_eval:.2f}   mAP {conv_map:.4f} (|diff| {abs(conv_map - summary['map']):.1e})  "
              f"peak RSS {cpeak.peak / 2**20:,.0f} MiB", flush=True)
        whole_process_figures(path, workers, repeat)
    if getattr(args, "rerank", False):
        bench_rerank(path, workers, limit, t_eval, summary["map"], repeat)
    if tmp is not None:
        tmp.cleanup()
    return 0


# --------------------------------------------------------------------------- evalcore bench --rerank

#: the dense reference, run in float32 as the shipped function is, holds about this many (Q + G)^2 float32
#: matrices at its peak: its three inputs together, original, V, V_qe, initial_rank (int32), one temporary
REFERENCE_MATRICES = 6


def rerank_commands(path: str, repeat: int):
    """``evalcore evaluate --rerank`` against ``evalcore evaluate`` on the same dataset, as fresh processes,
    alternated pair by pair (how a user on one machine runs both), and the re-ranking command's largest peak
    RSS in bytes."""
    exe = shutil.which("evalcore") or os.path.join(os.path.dirname(sys.executable), "evalcore")
    peaks: list[int] = []
    with tempfile.TemporaryDirectory(prefix="evalcore-bench-out-") as out:
        plain = [exe, "evaluate", path, "--out", os.path.join(out, "p"), "--protocol", "reid", "--ks", "1,5,10",
                 "--quiet", "--overwrite"]
        reranked = [exe, "evaluate", path, "--out", os.path.join(out, "r"), "--protocol", "reid", "--ks", "1,5,10",
                    "--rerank", "20,6,0.3", "--quiet", "--overwrite"]
        timed = alternate(lambda: whole_process(reranked, peaks=peaks), lambda: whole_process(plain), repeat)
        return timed, max(peaks)


def reference_module():
    """The tests' dense re-ranking reference (tests/rerank_reference.py of a source checkout), or None."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "tests" / "rerank_reference.py"
    if not path.exists():
        return None
    spec = importlib.util.spec_from_file_location("evalcore_bench_rerank_reference", path)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def search_product_floor(path: str, threads: int) -> float:
    """Seconds for the bare float32 product of query ∪ gallery with itself (the rows the neighbour search
    multiplies), on ``threads`` BLAS threads, data in memory: the faster of two block shapes."""
    root = zarr.open_group(path, mode="r")
    rows = np.concatenate([np.asarray(_read(root, "query/emb"), dtype=np.float32),
                           np.asarray(_read(root, "gallery/emb"), dtype=np.float32)])
    return matrix_product_floor(path, threads, rows, rows)


def bench_rerank(path: str, workers: int, limit: str, t_plain: float, plain_map: float, repeat: int = 1) -> None:
    """Re-ranked evaluation against the plain one (on the cluster, then as whole commands run here on
    threads, ``repeat`` alternated pairs), and the dense reference function where it fits."""
    from distributed import Client, LocalCluster

    from evalcore.engine.cluster import PRELOAD
    from evalcore.engine.evaluate import Options, evaluate

    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                      memory_limit=limit, silence_logs=logging.ERROR, preload=PRELOAD,
                      scheduler_kwargs={"dashboard_address": "127.0.0.1:0"}) as cluster, \
            Client(cluster, set_as_default=False) as client:
        pids = [os.getpid()] + list(client.run(os.getpid).values())
        with Peak(pids) as peak:
            t = time.perf_counter()
            result = evaluate(path, Options(protocol="reid", ks=(1, 5, 10), rerank=(20, 6, 0.3)), client=client)
            t_rerank = time.perf_counter() - t
    summary = result.summary.to_pylist()[0]
    model_s = result.info["timings"].get("rerank_model_s", 0.0)
    search_s = result.info["timings"].get("rerank_search_s", 0.0)
    print(f"  re-ranked (k1=20, k2=6, lambda=0.3)  {t_rerank:9.2f} s   re-ranked / plain = {t_rerank / t_plain:.2f}  "
          f"(neighbours and model {model_s:.2f} s, of which the search {search_s:.2f} s)  mAP {summary['map']:.4f} (plain {plain_map:.4f})  "
          f"rank-1 {summary['hit_at_1']:.4f}  peak RSS of the largest process {peak.peak / 2**20:,.0f} MiB, "
          f"all processes {peak.total / 2**20:,.0f} MiB", flush=True)
    t_floor = search_product_floor(path, workers)
    print(f"  search floor ((Q+G)^2 float32 gemm)  {t_floor:9.2f} s   search / floor = {search_s / t_floor:.2f}",
          flush=True)
    commands, command_peak = rerank_commands(path, repeat)
    print(f"  whole commands here (threads), alternated pairs: evaluate --rerank {commands.first.text()}   "
          f"re-ranked / plain = {commands.ratio_text()}   (plain {commands.second.text()})   "
          f"peak RSS of the re-ranking command {command_peak / 2**20:,.0f} MiB", flush=True)
    module = reference_module()
    root = zarr.open_group(path, mode="r")
    nq, ng = member_array(root, "query/emb").shape[0], member_array(root, "gallery/emb").shape[0]
    need = REFERENCE_MATRICES * (nq + ng) ** 2 * 4
    if module is None:
        print("  dense reference re_ranking           skipped (tests/rerank_reference.py is not here: run from a "
              "source checkout)")
        return
    if need > psutil.virtual_memory().available * 0.6:  # a shared machine: leave room for the others
        print(f"  dense reference re_ranking           does not fit: its (Q+G)^2 float32 matrices need about "
              f"{need / 2**30:,.0f} GiB, {psutil.virtual_memory().available / 2**30:,.0f} GiB available")
        return
    from evalcore.core.scan.embeddings import normalize_rows

    with Peak([os.getpid()]) as rpeak, threadpool_limits(limits=workers):
        # what a user of the shipped function runs: float32 distances from a product, then the function
        t = time.perf_counter()
        q = normalize_rows(_read(root, "query/emb"), "cosine")
        g = normalize_rows(_read(root, "gallery/emb"), "cosine")
        dist = [float32_distances(a, b) for a, b in ((q, g), (q, q), (g, g))]
        final = module.re_ranking(*dist, k1=20, k2=6, lambda_value=0.3, dtype=np.float32)
        t_ref = time.perf_counter() - t
        del dist
    ap = reference_aps(final, root)
    ours = result.per_query.column("ap").to_numpy(zero_copy_only=False).astype(np.float64)
    known = ~np.isnan(ap)
    diff = float(np.max(np.abs(ap[known] - ours[known]))) if known.any() else 0.0
    print(f"  dense reference re_ranking (float32) {t_ref:9.2f} s   reference / re-ranked = {t_ref / t_rerank:.2f}  "
          f"peak RSS {rpeak.peak / 2**20:,.0f} MiB  mAP {float(np.mean(ap[known])):.4f}  "
          f"per-query AP max |diff| {diff:.1e}", flush=True)


def float32_distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """d = 2 - 2 cos of unit rows from a float32 product, as the shipped function's users compute its inputs."""
    d = np.matmul(a, b.T)
    d *= -2
    d += 2
    return d


def reference_aps(final: np.ndarray, root: zarr.Group) -> np.ndarray:
    """Per-query AP of the reference's final distances under the reid rule (NaN for unknown queries):
    a full sort per query, junk removed, pessimistic ties, as the field's evaluation scripts do."""
    ql, qc = _read(root, "query/label"), _read(root, "query/cam")
    gl, gc = _read(root, "gallery/label"), _read(root, "gallery/cam")
    try:
        gjunk: np.ndarray | None = _read(root, "gallery/junk").astype(bool)
    except KeyError:
        gjunk = None
    out = np.full(len(ql), np.nan)
    for i in range(len(ql)):
        same = (gl == ql[i]) & (ql[i] >= 0)
        rel, junk = same & (gc != qc[i]), same & (gc == qc[i])
        if gjunk is not None:
            junk, rel = junk | gjunk, rel & ~gjunk
        keep = np.flatnonzero(~junk)
        order = np.lexsort((keep, rel[keep], final[i, keep]))
        ranks = np.flatnonzero(rel[keep][order]) + 1
        if len(ranks):
            out[i] = float(np.mean(np.arange(1, len(ranks) + 1) / ranks))
    return out


# --------------------------------------------------------------------------- evalcore bench --sweep

#: the sweep's defaults: queries, width, gallery sizes, stored dtype, worker counts, memory limit per worker
SWEEP_QUERIES, SWEEP_DIMS, SWEEP_DTYPE = 10_000, 128, "float16"
SWEEP_SIZES = (100_000, 300_000, 1_000_000, 2_000_000)
SWEEP_WORKERS = (1, 2)
SWEEP_MEMORY_LIMIT = "2GiB"
#: options that only mean something with --sweep (their parser default is None)
SWEEP_ONLY = ("--sizes", "--dims", "--queries", "--workers-list", "--gallery-shards", "--csv", "--plot")
#: the table's columns: CSV name, heading, width, format
COLUMNS = (
    ("queries", "Q", 7, "{:,}"),
    ("gallery", "G", 10, "{:,}"),
    ("dims", "D", 5, "{}"),
    ("workers", "workers", 7, "{}"),
    ("gallery_shards", "shards", 6, "{}"),
    ("evaluate_s", "evaluate s", 10, "{:.4g}"),
    ("floor_s", "floor s", 9, "{:.4g}"),
    ("ratio", "ratio", 7, "{:.2f}"),
    ("peak_rss_max_mib", "peak MiB", 8, "{:,.0f}"),
    ("peak_rss_sum_mib", "sum MiB", 8, "{:,.0f}"),
)
CSV_EXTRA = ("qgd", "map", "generate_s")
BAR_WIDTH = 40


def parse_counts(option: str, text: str, suffixes: bool = False) -> list[int]:
    """A comma-separated list of positive integers (``100000,300000``; with ``suffixes`` also ``100k,1M``)."""
    items = [t.strip() for t in str(text).split(",")]
    if not any(items) or not all(items):
        raise input_error(option, f"{text!r} is not a comma-separated list of integers")
    values: list[int] = []
    for item in items:
        n = parse_count(option, item, suffixes)
        if n not in values:
            values.append(n)
    return values


def parse_count(option: str, text: str, suffixes: bool = False) -> int:
    """A positive integer (with ``suffixes`` also ``100k``, ``2M``), else an InputError naming the option."""
    item, scale = str(text).strip(), 1
    if suffixes and item[-1:].lower() in ("k", "m"):
        item, scale = item[:-1], 1000 if item[-1].lower() == "k" else 1_000_000
    try:
        n = int(item) * scale
    except ValueError:
        raise input_error(option, f"{text!r} is not {'a count like 100000 or 100k' if suffixes else 'an integer'}") \
            from None
    if n < 1:
        raise input_error(option, f"{n} must be at least 1")
    return n


def check_out_file(option: str, path: str | None, suffix: str | None = None) -> str | None:
    """A file the sweep will write: its folder exists, it is not a folder, it has ``suffix``."""
    if path is None:
        return None
    if suffix and not path.lower().endswith(suffix):
        raise input_error(option, f"{path!r} must end in {suffix}")
    if os.path.isdir(path):
        raise input_error(option, f"{path} is a folder")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise input_error(option, f"folder {folder} does not exist")
    return path


def sweep_settings(args) -> dict:
    """Every sweep option checked before any work: an InputError naming the first bad one."""
    for option, attr in (("--shape", "shape"), ("--skip-conventional", "skip_conventional")):
        if getattr(args, attr, None):
            raise input_error(option, "not with " + mention("--sweep") + " (the sweep's shapes come from "
                              + mention("--sizes") + ", " + mention("--queries") + ", " + mention("--dims") + ")")
    if args.workers_list is not None and args.workers is not None:
        raise OptionError("--workers-list", "give the worker counts once, with " + mention("--workers-list") + " or "
                          + mention("--workers"))
    workers_option = "--workers" if args.workers is not None else "--workers-list"
    workers_text = args.workers if args.workers is not None else args.workers_list
    shards = parse_count("--gallery-shards", args.gallery_shards) if args.gallery_shards is not None else None
    data_dir = args.data_dir
    if data_dir is not None and os.path.exists(data_dir) and not os.path.isdir(data_dir):
        raise OptionError("--data-dir", f"{data_dir} exists and is not a folder")
    return {
        "sizes": parse_counts("--sizes", args.sizes, suffixes=True) if args.sizes is not None else list(SWEEP_SIZES),
        "queries": parse_count("--queries", args.queries, suffixes=True) if args.queries is not None
        else SWEEP_QUERIES,
        "dims": parse_count("--dims", args.dims) if args.dims is not None else SWEEP_DIMS,
        "workers": parse_counts(workers_option, workers_text) if workers_text is not None else list(SWEEP_WORKERS),
        "memory_limit": check_memory_limit(args.memory_limit) or SWEEP_MEMORY_LIMIT,
        "gallery_shards": shards,
        "data_dir": data_dir,
        "csv": check_out_file("--csv", args.csv),
        "plot": check_out_file("--plot", args.plot, ".svg"),
    }


def sweep_name(nq: int, ng: int, dims: int) -> str:
    return f"sweep-q{nq}-g{ng}-d{dims}.zarr"


def sweep_dataset(folder: str, nq: int, ng: int, dims: int) -> tuple[str, float | None]:
    """The dataset of this shape in ``folder``: reused if there, else generated (and its seconds returned).

    Generated under a temporary name and renamed when complete, so a sweep
    stopped midway never leaves a half-written dataset that a later one reuses.
    """
    path = os.path.join(folder, sweep_name(nq, ng, dims))
    if os.path.exists(os.path.join(path, "zarr.json")):
        root = zarr.open_group(path, mode="r")
        found = (member_array(root, "query/emb").shape, member_array(root, "gallery/emb").shape,
                 str(member_array(root, "gallery/emb").dtype))
        if found != ((nq, dims), (ng, dims), SWEEP_DTYPE):
            raise OptionError("--data-dir", f"{path} holds query {found[0]}, gallery {found[1]} {found[2]}, not the "
                             f"({nq}, {dims}) x ({ng}, {dims}) {SWEEP_DTYPE} its name says; remove it")
        return path, None
    os.makedirs(folder, exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    started = time.perf_counter()
    try:
        write_data(tmp, nq, ng, dims, SWEEP_DTYPE, max(1, ng // 10))
        shutil.rmtree(path, ignore_errors=True)  # a folder without zarr.json: an unusable leftover
        os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path, time.perf_counter() - started


def measure_row(path: str, nq: int, ng: int, dims: int, workers: int, memory_limit: str,
                gallery_shards: int | None) -> dict:
    """evaluate on a fresh local cluster of ``workers`` one-thread processes, then the floor on as many BLAS threads.

    A fresh cluster per row: a worker's resident memory rarely shrinks after a
    larger gallery, so one cluster for the whole sweep would blur the peaks.
    """
    # deferred: the engine brings distributed and numba, which evalcore --help should not import
    from distributed import Client, LocalCluster

    from evalcore.engine.cluster import PRELOAD
    from evalcore.engine.evaluate import Options, evaluate

    # no dashboard on :8787 (another cluster on this machine may hold it): the scheduler's routes on a free port
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                      memory_limit=memory_limit, silence_logs=logging.ERROR, preload=PRELOAD,
                      scheduler_kwargs={"dashboard_address": "127.0.0.1:0"}) as cluster, \
            Client(cluster, set_as_default=False) as client:
        client.wait_for_workers(workers)
        pids = [os.getpid()] + list(client.run(os.getpid).values())
        with Peak(pids) as peak:
            started = time.perf_counter()
            result = evaluate(path, Options(protocol="reid", ks=(1, 5, 10)), client=client,
                              gallery_shards=gallery_shards)
            t_eval = time.perf_counter() - started
    t_floor = matrix_product_floor(path, workers)
    shards = result.info.get("gallery_shards")
    return {"queries": nq, "gallery": ng, "dims": dims, "workers": workers,
            "gallery_shards": len(shards) if shards else 1,
            "evaluate_s": t_eval, "floor_s": t_floor, "ratio": t_eval / t_floor,
            "peak_rss_max_mib": peak.peak / 2**20, "peak_rss_sum_mib": peak.total / 2**20,
            "qgd": nq * ng * dims, "map": result.summary.to_pylist()[0]["map"]}


def format_table(rows: list[dict]) -> str:
    """The cost table, one line per row, right-aligned columns."""
    widths = [max(width, len(head), *(len(fmt.format(r[key])) for r in rows)) for key, head, width, fmt in COLUMNS]
    lines = ["  ".join(head.rjust(w) for (_, head, _, _), w in zip(COLUMNS, widths))]
    lines += ["  ".join(fmt.format(r[key]).rjust(w) for (key, _, _, fmt), w in zip(COLUMNS, widths)) for r in rows]
    return "\n".join(lines)


def format_bars(rows: list[dict], width: int = BAR_WIDTH) -> str:
    """evaluate / floor as a bar of ``#`` per row, scaled to the largest ratio."""
    top = max(r["ratio"] for r in rows)
    label = [f"G {r['gallery']:,}, {r['workers']} worker{'s' if r['workers'] > 1 else ''}" for r in rows]
    pad = max(len(t) for t in label)
    lines = [f"evaluate / floor (the full bar is {top:.2f}):"]
    for text, r in zip(label, rows):
        bar = "#" * max(1, round(r["ratio"] / top * width)) if r["ratio"] > 0 else ""
        lines.append(f"  {text.ljust(pad)}  {bar.ljust(width)}  {r['ratio']:.2f}")
    return "\n".join(lines)


def write_csv(path: str, rows: list[dict]) -> None:
    names = [key for key, _, _, _ in COLUMNS] + list(CSV_EXTRA)
    out = io.StringIO(newline="")
    writer = csv.writer(out)
    writer.writerow(names)
    for r in rows:
        writer.writerow(["" if r.get(n) is None else f"{r[n]:.6g}" if isinstance(r[n], float) else r[n]
                         for n in names])
    replace_file(path, out.getvalue())


def replace_file(path: str, text: str) -> None:
    """Write ``text`` next to ``path`` and rename it into place: a reader never sees half a file."""
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "w", newline="") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


def sweep_svg(rows: list[dict], title: str) -> str:
    """Two charts stacked in one SVG: evaluate / floor, then the seconds of both, against Q*G*D per worker count."""
    counts = sorted({r["workers"] for r in rows})
    colors = svg.palette(len(counts))
    # x in thousands, millions, ... of multiply-adds, so the tick labels stay short
    power = 3 * math.floor(math.log10(min(r["qgd"] for r in rows)) / 3)
    lo, hi = min(r["qgd"] for r in rows) / 10**power, max(r["qgd"] for r in rows) / 10**power
    # a log axis where it spans two decades or more (so it has at least two decade ticks), else linear from 0
    xlog = hi / lo >= 100
    xlim = (lo / 1.15, hi * 1.15) if xlog else (0.0, hi * 1.05)
    xlabel = f"Q x G x D, the score matrix's multiply-adds (x 10^{power})" if power else \
        "Q x G x D, the score matrix's multiply-adds"

    def series(key, workers, color, **style):
        mine = sorted((r for r in rows if r["workers"] == workers), key=lambda r: r["qgd"])
        return svg.Series(f"{key}, {plural(workers)}", [r["qgd"] / 10**power for r in mine], [r[key] for r in mine],
                          color=color, markers=True, **style)

    def plural(n):
        return f"{n} worker{'s' if n > 1 else ''}"

    ratio = svg.line_chart(
        [series("ratio", w, c) for w, c in zip(counts, colors)],
        svg.Axes(title=f"evaluate / matrix-product floor, {title}", xlabel=xlabel, ylabel="evaluate / floor",
                 xlim=xlim, ylim=(0.0, max(r["ratio"] for r in rows) * 1.1), xlog=xlog),
        legend=[svg.LegendEntry(plural(w), c, markers=True) for w, c in zip(counts, colors)], legend_at="below")
    seconds = svg.line_chart(
        [series("evaluate_s", w, c) for w, c in zip(counts, colors)]
        + [series("floor_s", w, c, dash=svg.DASHED) for w, c in zip(counts, colors)],
        svg.Axes(title="seconds: evaluate (solid), floor on as many BLAS threads (dashed)", xlabel=xlabel,
                 ylabel="seconds", xlim=xlim, ylim=(0.0, max(max(r["evaluate_s"], r["floor_s"]) for r in rows) * 1.1),
                 xlog=xlog),
        legend=[svg.LegendEntry(f"evaluate, {plural(w)}", c, markers=True) for w, c in zip(counts, colors)]
        + [svg.LegendEntry(f"floor, {w} thread{'s' if w > 1 else ''}", c, dash=svg.DASHED, markers=True)
           for w, c in zip(counts, colors)], legend_at="below")

    def body(chart: str, y: int) -> str:
        return chart.split("\n", 1)[1].replace("<svg ", f'<svg x="0" y="{y}" ', 1)  # drop the XML declaration

    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="{svg.WIDTH}" '
            f'height="{2 * svg.HEIGHT}" viewBox="0 0 {svg.WIDTH} {2 * svg.HEIGHT}">'
            + body(ratio, 0) + body(seconds, svg.HEIGHT) + "</svg>\n")


def run_sweep(args) -> int:
    """``evalcore bench --sweep``: the cost table over gallery sizes and worker counts.

    For each gallery size (fixed queries and width, stored as float16) and
    each worker count: evaluate on a fresh local cluster, timed and its peak
    memory sampled, then straight after it the matrix-product floor on as many
    BLAS threads as workers. Data generation is timed apart and left out of
    every ratio.
    """
    settings = sweep_settings(args)
    nq, dims, limit = settings["queries"], settings["dims"], settings["memory_limit"]
    tmp = None
    folder = settings["data_dir"]
    if folder is None:
        tmp = tempfile.TemporaryDirectory(prefix="evalcore-bench-sweep-")
        folder = tmp.name
    title = f"Q {nq:,}, D {dims}"
    print(f"sweep: {nq:,} queries x D {dims} stored as {SWEEP_DTYPE}, galleries "
          f"{', '.join(f'{g:,}' for g in settings['sizes'])}; workers {', '.join(map(str, settings['workers']))} "
          f"(1 thread each, memory limit {limit} per worker); gallery shards "
          f"{settings['gallery_shards'] or 'as planned'}; data in {folder}", flush=True)
    rows: list[dict] = []
    try:
        for ng in settings["sizes"]:
            path, t_gen = sweep_dataset(folder, nq, ng, dims)
            print(f"  G {ng:,}: " + (f"generated clustered data in {t_gen:.2f} s (not in any ratio)"
                                     if t_gen is not None else f"reusing {path}"), flush=True)
            for workers in settings["workers"]:
                row = measure_row(path, nq, ng, dims, workers, limit, settings["gallery_shards"])
                row["generate_s"] = t_gen
                asked = settings["gallery_shards"]
                asked = f" (asked {asked}; evaluate cuts shards at whole score tiles)" \
                    if asked and asked != row["gallery_shards"] else ""
                rows.append(row)
                print(f"  G {ng:,}, {workers} worker(s): evaluate {row['evaluate_s']:.4g} s, floor "
                      f"{row['floor_s']:.4g} s, ratio {row['ratio']:.2f}, shards {row['gallery_shards']}{asked}, "
                      f"mAP {row['map']:.4f}, peak {row['peak_rss_max_mib']:,.0f} MiB "
                      f"(sum {row['peak_rss_sum_mib']:,.0f} MiB)", flush=True)
                if settings["csv"]:
                    write_csv(settings["csv"], rows)  # after every row: a stopped sweep keeps what it measured
    finally:
        if tmp is not None:
            tmp.cleanup()
    print()
    print(f"cost table ({title}; shards 1 = whole gallery per task; floor = bare float32 Q x G product on as many "
          "BLAS threads as workers; peak = resident memory of the largest process, sum = driver + workers):")
    print(format_table(rows))
    print()
    print(format_bars(rows))
    if settings["csv"]:
        print(f"table written to {settings['csv']}")
    if settings["plot"]:
        replace_file(settings["plot"], sweep_svg(rows, title))
        print(f"chart written to {settings['plot']}")
    return 0
