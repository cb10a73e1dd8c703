"""``evalcore warmup``: fill numba's on-disk cache ahead, so no run (or Dask worker) compiles on its first call.

evalcore's loops are numba kernels compiled on first use and cached on disk
(NUMBA_CACHE_DIR, else __pycache__ beside each module, else numba's user
cache). A kernel is compiled for the argument types it is called with, so
warmup compiles them the way runs call them: by running a tiny evaluation of
every kind (embeddings under cosine and dot, ReID with cameras and the
open-set sweep, given scores and distances, intervals, re-ranking, query
expansion and database augmentation, an imported TREC run with graded
qrels and judged-only ranking), then lists any kernel still not compiled.
"""
from __future__ import annotations

import importlib
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

#: the modules that define kernels: warmup checks each of their kernels was compiled
KERNEL_MODULES = ("evalcore.core.kernels", "evalcore.core.canonical", "evalcore.core.list_kernels",
                  "evalcore.core.result_lists", "evalcore.core.intervals", "evalcore.core.rerank",
                  "evalcore.core.scan.neighbors", "evalcore.core.scan.rerank", "evalcore.io.importers.trec_scan")


def all_kernels() -> dict[str, Any]:
    """Every numba kernel of evalcore, as ``module.name`` -> dispatcher."""
    from numba.core.registry import CPUDispatcher

    out: dict[str, Any] = {}
    for name in KERNEL_MODULES:
        module = importlib.import_module(name)
        out.update({f"{name}.{k}": v for k, v in vars(module).items() if isinstance(v, CPUDispatcher)})
    return out


def not_compiled(kernels: dict[str, Any]) -> list[str]:
    """The kernels with neither a version in this process nor an index in numba's on-disk cache. (A kernel
    called only from other kernels is compiled, and cached, with them; loaded from the cache, it shows no
    version of its own, so its index file is what says it is there. ``inline="always"`` kernels are compiled
    into their callers and never alone.)"""
    def cached(k: Any) -> bool:
        index = getattr(getattr(getattr(k, "_cache", None), "_cache_file", None), "_index_path", None)
        return isinstance(index, str) and os.path.exists(index)

    return [name for name, k in kernels.items()
            if not getattr(k, "signatures", None) and not cached(k)
            and getattr(k, "targetoptions", {}).get("inline") != "always"]


def _embeddings(rng: Any, q: int = 40, g: int = 300, d: int = 8) -> dict:
    import numpy as np

    return {"query": rng.standard_normal((q, d)).astype(np.float32),
            "gallery": rng.standard_normal((g, d)).astype(np.float32),
            "query_labels": rng.integers(0, 6, q), "gallery_labels": rng.integers(0, 6, g)}


def _trec_files(folder: str) -> tuple[str, str]:
    """A tiny TREC run and graded qrels (with a negative grade and an unjudged document)."""
    qrels, run = os.path.join(folder, "qrels.txt"), os.path.join(folder, "run.txt")
    with open(qrels, "w") as f:
        f.write("q1 0 d1 2\nq1 0 d2 0\nq1 0 d3 1\nq1 0 d4 -1\nq2 0 d2 1\nq2 0 d5 0\n")
    with open(run, "w") as f:
        f.write("q1 Q0 d3 1 3.0 r\nq1 Q0 d2 2 2.0 r\nq1 Q0 d9 3 1.5 r\nq1 Q0 d1 4 1.0 r\n"
                "q2 Q0 d5 1 2.0 r\nq2 Q0 d2 2 2.0 r\n")
    return qrels, run


def workloads(folder: str) -> list[tuple[str, Callable[[], object]]]:
    """(name, call) of each tiny evaluation warmup runs."""
    # deferred, like numpy above: the command line reads WORKLOADS while it parses arguments
    import numpy as np

    import evalcore
    from evalcore.io.importers.write import import_to

    rng = np.random.default_rng(0)
    e = _embeddings(rng)
    cams = {"query_cams": rng.integers(0, 3, 40), "gallery_cams": rng.integers(0, 3, 300)}
    scores = rng.standard_normal((40, 300))
    labels = {"query_labels": e["query_labels"], "gallery_labels": e["gallery_labels"]}
    quiet = {"on_progress": lambda *_: None}
    qrels, run = _trec_files(folder)
    trec = os.path.join(folder, "trec.zarr")

    def trec_run() -> object:
        import_to("trec-run", run, trec, qrels=qrels)
        evalcore.evaluate(trec, metrics=["map", "ndcg", "ndcg@5", "bpref", "recall@5", "precision@5", "mrr"],
                          ci=0.9, resamples=50, **quiet)
        return evalcore.evaluate(trec, judged_only=True, metrics=["map", "bpref", "ndcg"], **quiet)

    return [
        ("embeddings", lambda: (evalcore.evaluate(**e, **quiet),
                                evalcore.evaluate(**e, similarity="dot", ties="optimistic", **quiet))),
        ("reid", lambda: evalcore.evaluate(**e, **cams, protocol="reid", threshold=0.1, sweep=True, **quiet)),
        ("scores", lambda: (evalcore.evaluate(scores=scores, **labels, **quiet),
                            evalcore.evaluate(distances=scores.astype(np.float32), **labels, **quiet))),
        ("intervals", lambda: evalcore.evaluate(**e, ci=0.9, resamples=50, **quiet)),
        ("rerank", lambda: evalcore.evaluate(**e, rerank=True, **quiet)),
        ("expansion", lambda: evalcore.evaluate(**e, query_expansion=(2, 1.0), database_augmentation=(2, 1.0),
                                                **quiet)),
        ("trec", trec_run),
    ]


#: what each workload runs (``evalcore warmup --only``)
WORKLOADS = {
    "embeddings": "embeddings under cosine and dot",
    "reid": "ReID with cameras, open-set threshold and sweep",
    "scores": "given scores and distances",
    "intervals": "bootstrap intervals (--ci)",
    "rerank": "k-reciprocal re-ranking",
    "expansion": "query expansion and database augmentation",
    "trec": "an imported TREC run with graded qrels, judged-only",
}


def warm_up_all(only: list[str] | None = None, out=None) -> int:
    """Run every workload (or those named in ``only``), then say where the kernels are cached, how long it took
    and which kernels are left to compile on first use."""
    out = out or sys.stdout
    from evalcore.core import kernels

    started = time.perf_counter()
    kernels.warm_up("all")  # the scans' kernels, the rare ones too, with the types a run gives them
    with tempfile.TemporaryDirectory(prefix="evalcore-warmup-") as folder:
        for name, call in workloads(folder):
            if only and name not in only:
                continue
            t = time.perf_counter()
            call()
            print(f"  {name} ({WORKLOADS[name]}): {time.perf_counter() - t:.1f} s", file=out, flush=True)
    for thread in threading.enumerate():  # a run's own early load of the scan's kernels (engine.schedule)
        if thread.name == "evalcore-kernels":
            thread.join()
    found = all_kernels()
    left = not_compiled(found)
    # numba keeps one folder per kernel module: under NUMBA_CACHE_DIR when set, else beside the module
    folder = os.environ.get("NUMBA_CACHE_DIR") or f"__pycache__ beside each kernel module (e.g. " \
        f"{kernels.cache_dir(kernels.fold_tile)})"
    print(f"evalcore: {len(found) - len(left)} of {len(found)} kernels compiled or loaded from the cache in "
          f"{time.perf_counter() - started:.1f} s; cached in {folder}", file=out, flush=True)
    if left:
        print(f"evalcore: not reached by warmup (compiled on first use): {', '.join(left)}", file=out, flush=True)
    return 0


def dask_setup(worker) -> None:  # noqa: ARG001 - distributed's preload hook
    """Workers started with ``--preload evalcore.jobs.warmup`` load every kernel (or compile it, on a machine
    whose CPU the image's cache was not built for, or with no cache) before they take a task: no task waits
    for a compile, and no first task looks stalled. A failure is logged, never stops the worker: its tasks
    then compile on first use, as without the preload."""
    import io
    import logging

    log = logging.getLogger("evalcore.warmup")
    text = io.StringIO()
    try:
        warm_up_all(out=text)
    except Exception as exc:  # noqa: BLE001 - a worker without warm kernels still works
        log.warning("evalcore warmup failed (kernels compile on first use): %s", exc)
        return
    log.info("%s", " ".join(text.getvalue().split("\n")[-3:]).strip())
