"""``evalcore bench``: evaluate, the matrix-product floor and a full-sort evaluator, side by side.

All three run in one invocation on the same generated data and the same
cores, so the ratios mean something on a noisy shared machine even when the
absolute seconds do not.
"""
from __future__ import annotations

import os
import tempfile
import threading
import time
from dataclasses import dataclass

import numpy as np

SHAPES = {
    # name: queries, gallery, dims, stored dtype, identities, worker memory limit
    "small": (1000, 20_000, 64, "float32", 2000, None),
    "medium": (2000, 200_000, 64, "float32", 20_000, "1GiB"),
    "market": (3368, 19_732, 2048, "float32", 751, None),
    "large": (20_000, 1_000_000, 128, "float16", 100_000, "4GiB"),
    "xl": (10_000, 2_000_000, 256, "float16", 200_000, "2GiB"),
}
#: the conventional evaluator holds Q x G float32 scores and int64 argsort indices
CONVENTIONAL_LIMIT_BYTES = 8 << 30


@dataclass
class Peak:
    """Largest resident set size seen, per process, while a block runs (sampled every 50 ms)."""

    pids: list[int]
    peak: int = 0
    _stop: bool = False

    def __enter__(self):
        import psutil

        self._procs = [psutil.Process(p) for p in self.pids]
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self):
        while not self._stop:
            for proc in self._procs:
                try:
                    self.peak = max(self.peak, proc.memory_info().rss)
                except Exception:  # noqa: BLE001 - a worker may be gone
                    pass
            time.sleep(0.05)

    def __exit__(self, *exc):
        self._stop = True
        self._thread.join()


def matrix_product_floor(path: str, threads: int) -> float:
    """Seconds for the bare float32 Q x G product on ``threads`` BLAS threads, data in memory.

    The faster of two block shapes (cache-sized 512 x 4096 output tiles, and
    large 2048 x 16384 blocks), so the floor is as low as plain numpy gets.
    """
    import zarr
    from threadpoolctl import threadpool_limits

    root = zarr.open_group(path, mode="r")
    q = np.asarray(root["query/emb"][:], dtype=np.float32)
    gallery = root["gallery/emb"]
    g = np.empty(gallery.shape, dtype=np.float32)
    step = 1 << 16
    for a in range(0, gallery.shape[0], step):
        g[a:a + step] = gallery[a:a + step]
    best = float("inf")
    with threadpool_limits(limits=threads, user_api="blas"):
        for rows, cols in ((512, 4096), (2048, 16384)):
            started = time.perf_counter()
            for a in range(0, q.shape[0], rows):
                for b in range(0, g.shape[0], cols):
                    q[a:a + rows] @ g[b:b + cols].T
            best = min(best, time.perf_counter() - started)
    return best


def conventional_map(path: str, threads: int) -> tuple[float, float, float]:
    """The usual evaluate.py: full score matrix, argsort per row, per-query loop (reid rule).

    Returns (seconds, mAP, rank-1).
    """
    import zarr
    from threadpoolctl import threadpool_limits

    started = time.perf_counter()
    root = zarr.open_group(path, mode="r")
    q = np.asarray(root["query/emb"][:], dtype=np.float32)
    g = np.asarray(root["gallery/emb"][:], dtype=np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    ql, qc = root["query/label"][:], root["query/cam"][:]
    gl, gc = root["gallery/label"][:], root["gallery/cam"][:]
    gj = root["gallery/junk"][:] if "junk" in root["gallery"] else np.zeros(len(gl), bool)
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


def whole_process(command: list[str], env: dict | None = None) -> float:
    """Wall seconds of a fresh process, start to exit (imports, cluster start, work, shutdown)."""
    import subprocess

    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{command[:3]} exited {done.returncode}: {done.stderr.strip()[-500:]}")
    return seconds


def in_memory_arrays(path: str) -> dict:
    """The dataset's arrays as numpy, the way a training loop holds its features."""
    import zarr

    root = zarr.open_group(path, mode="r")
    out = {"query": root["query/emb"][:], "gallery": root["gallery/emb"][:],
           "query_labels": root["query/label"][:], "gallery_labels": root["gallery/label"][:],
           "query_cams": root["query/cam"][:], "gallery_cams": root["gallery/cam"][:]}
    if "junk" in root["gallery"]:
        out["gallery_junk"] = root["gallery/junk"][:]
    return out


def whole_process_figures(path: str, t_floor: float, workers: int) -> None:
    """The command and the conventional script as fresh processes, the API on arrays, a cold first run."""
    import shutil
    import sys

    import evalcore

    exe = shutil.which("evalcore") or os.path.join(os.path.dirname(sys.executable), "evalcore")
    with tempfile.TemporaryDirectory(prefix="evalcore-bench-out-") as out:
        cmd = [exe, "evaluate", path, "--out", os.path.join(out, "r"), "--protocol", "reid", "--quiet",
               "--overwrite"]
        t_cold = whole_process(cmd, env={**os.environ, "NUMBA_CACHE_DIR": os.path.join(out, "numba-cold")})
        t_cmd = min(whole_process(cmd) for _ in range(2))
        t_script = whole_process([sys.executable, "-c", CONVENTIONAL_SCRIPT, path])
    arrays = in_memory_arrays(path)
    evalcore.evaluate(**arrays, protocol="reid", ks=(1, 5, 10))  # warm: kernel loaded, pages of the arrays touched
    t = time.perf_counter()
    result = evalcore.evaluate(**arrays, protocol="reid", ks=(1, 5, 10))
    t_api = time.perf_counter() - t
    print("  whole processes, start to exit:", flush=True)
    print(f"    conventional script (python -c)    {t_script:9.2f} s", flush=True)
    print(f"    evalcore evaluate (command)        {t_cmd:9.2f} s   script / command = {t_script / t_cmd:.2f}   "
          f"({result.run['execution']})", flush=True)
    print(f"    evalcore evaluate, cold first run  {t_cold:9.2f} s   (empty kernel cache)", flush=True)
    print(f"  evalcore.evaluate on numpy arrays  {t_api:9.2f} s   api / floor = {t_api / t_floor:.2f}", flush=True)


def generate(path: str, shape: str) -> None:
    from evalcore.jobs import synthetic

    nq, ng, dims, dtype, ids, _ = SHAPES[shape]
    synthetic.write_clustered(path, n_query=nq, n_gallery=ng, dims=dims, n_ids=ids, dtype=dtype,
                              distractors=0.1, junk=0.01, unknown=0.02, seed=1,
                              query_chunk=1024, gallery_chunk=65536, keys=shape in ("small", "market"))


def run(args) -> int:
    from distributed import Client, LocalCluster

    from evalcore.engine.cluster import PRELOAD
    from evalcore.engine.evaluate import Options, evaluate

    nq, ng, dims, dtype, _, limit = SHAPES[args.shape]
    workers = int(args.workers)
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

    import logging

    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                      memory_limit=limit, silence_logs=logging.ERROR, preload=PRELOAD) as cluster, \
            Client(cluster) as client:
        pids = [os.getpid()] + list(client.run(os.getpid).values())
        with Peak(pids) as peak:
            t = time.perf_counter()
            result = evaluate(path, Options(protocol="reid", ks=(1, 5, 10)), client=client)
            t_eval = time.perf_counter() - t
    summary = result.summary.to_pylist()[0]
    shards = result.info.get("gallery_shards")
    print(f"  tasks: {len(result.info['chunks'])} query chunks"
          + (f" x {len(shards)} gallery shards (the gallery exceeds a third of a worker's memory limit)"
             if shards else ", whole gallery per task"), flush=True)
    print(f"  evaluate (evalcore)                 {t_eval:9.2f} s   mAP {summary['map']:.4f}  "
          f"rank-1 {summary['hit_at_1']:.4f}  peak RSS of the largest process {peak.peak / 2**20:,.0f} MiB",
          flush=True)
    t_floor = matrix_product_floor(path, workers)
    print(f"  matrix-product floor (float32 gemm) {t_floor:9.2f} s   evaluate / floor = {t_eval / t_floor:.2f}",
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
        print(f"  conventional (full matrix + argsort) {t_conv:9.2f} s   conventional / evaluate = "
              f"{t_conv / t_eval:.2f}   mAP {conv_map:.4f} (|diff| {abs(conv_map - summary['map']):.1e})  "
              f"peak RSS {cpeak.peak / 2**20:,.0f} MiB", flush=True)
        whole_process_figures(path, t_floor, workers)
    if tmp is not None:
        tmp.cleanup()
    return 0
