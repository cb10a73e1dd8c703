"""One evaluation: plan, run the tasks, reduce.

``evaluate`` plans the run (``engine.plan``), runs the chunks in this process
or on a Dask client (``engine.schedule``, ``engine.tasks``) and reduces their
rows in chunk order (``engine.reduce``); every mean is a correctly rounded
sum over the per-query rows, so results are the same for any chunking or
worker count. What run.json records about the run is a ``RunRecord``.
"""
from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa
import zarr

from evalcore.core import registry
from evalcore.engine import cache as run_caches
from evalcore.engine import expansion as expansion_phase
from evalcore.engine import progress
from evalcore.engine import rerank as rerank_phase
from evalcore.engine.faults import Fault, StallWatch, broadcasts_kept, check_stall_timeout, retried_chunks
from evalcore.engine.options import Options
from evalcore.engine.plan import (
    SPLIT_CHUNK_ROWS,
    DatasetShape,
    Span,
    TaskContext,
    cache_budget,
    cap_max_rank,
    cutoffs_past_lists,
    describe,
    plan_chunks,
    plan_shards,
    query_rows_array,
    shard_owners,
)
from evalcore.engine.reduce import add_top1_keys, empty_per_query, run_warnings, score_note, summarize
from evalcore.engine.schedule import ClusterChunks, load_kernels_aside, raise_input_error, run_here, splits_columns
from evalcore.errors import WorkerStalled
from evalcore.io import dataset as ds
from evalcore.io.validate import validate as validate_dataset

__all__ = ["Options", "Result", "RunRecord", "evaluate"]


@dataclass(frozen=True)
class RunRecord:
    """What run.json records about a run (besides the report files' own names)."""

    shape: DatasetShape
    run_id: str
    cache_bytes: int
    gallery_shards: list[Span] | None
    options: Options
    dataset: str
    fingerprint: str
    chunks: list[tuple[int, int]]
    counts: dict
    scores: str
    near_ties_resolved: int
    warnings: list[str]
    timings: dict
    workers: int
    #: cluster runs: the stall limit's floor (seconds), and the workers lost or restarted during the run
    stall_timeout: float | None = None
    faults: list[Fault] = field(default_factory=list)
    #: re-ranked runs: the chunks that counted from the neighbour search's kept estimates
    rerank_chunks_from_estimates: int | None = None

    def as_dict(self) -> dict:
        """The run.json payload: the dataset's description, then the run's own fields."""
        out = self.shape.record()
        out.update({"run_id": self.run_id, "cache_bytes": self.cache_bytes,
                    "gallery_shards": [list(s) for s in self.gallery_shards] if self.gallery_shards else None,
                    "options": asdict(self.options), "dataset": self.dataset, "fingerprint": self.fingerprint,
                    "chunks": [list(c) for c in self.chunks], "counts": dict(self.counts), "scores": self.scores,
                    "near_ties_resolved": self.near_ties_resolved, "warnings": list(self.warnings),
                    "timings": dict(self.timings), "workers": self.workers, "stall_timeout": self.stall_timeout,
                    "faults": [f.record() for f in self.faults],
                    "workers_lost": [f.worker for f in self.faults if f.worker],
                    "retried_chunks": [list(c) for c in retried_chunks(self.faults)]})
        if self.rerank_chunks_from_estimates is not None:
            out["rerank_chunks_from_estimates"] = self.rerank_chunks_from_estimates
        return out


@dataclass
class Result:
    """An evaluation's report tables (pyarrow) and its run record, as the engine's ``evaluate`` returns
    them; ``evalcore.Result`` (api) is this record plus ``save``, which writes the report folder and its
    HTML page from the layers above the engine.

    ``per_query``, ``summary``, ``cmc``: the tables of the report folder;
    ``sweep``: the threshold sweep when asked for; ``run``: what run.json
    records (options, counts, warnings, timings, how scores were computed);
    ``record``: the engine's ``RunRecord`` of the run, which ``run`` starts from.
    """

    per_query: pa.Table
    summary: pa.Table
    cmc: pa.Table
    run: dict = field(default_factory=dict)
    sweep: pa.Table | None = None
    record: RunRecord | None = field(default=None, repr=False, compare=False)

    @property
    def info(self) -> dict:
        """The run.json payload as a dict (a copy of ``run``)."""
        return dict(self.run)

    @property
    def metrics(self) -> dict[str, Any]:
        """The summary's ``group = "all"`` row as a dict: ``{"map": ..., "hit_at_1": ..., ...}``."""
        rows = self.summary.to_pylist()
        return next((r for r in rows if r.get("group") == "all"), {})

    @property
    def warnings(self) -> list[str]:
        return list(self.run.get("warnings", []))

    def tables(self) -> dict[str, pa.Table]:
        out = {"per_query": self.per_query, "summary": self.summary, "cmc": self.cmc}
        if self.sweep is not None:
            out["threshold_sweep"] = self.sweep
        return out

    def __repr__(self) -> str:
        m = self.metrics
        # map, hit@1 and mINP, or the first three of the run's own metrics (metrics=["ndcg@10", "bpref"])
        names = [k for k in ("map", "hit_at_1", "minp") if k in m] or registry.display_order(m, terminal=True)[:3]
        shown = ", ".join(f"{k}={m[k]:.4f}" for k in names if m.get(k) is not None)
        return f"<evalcore.Result {self.per_query.num_rows} queries: {shown or 'no known queries'}>"


def evaluate(path, options: Options | None = None, *, client=None, threads: int = 1,
             storage_options: dict | None = None, chunk_rows: int | None = None, gallery_shards: int | None = None,
             on_chunk: Callable[[dict, int, int], None] | None = None,
             stall_timeout: float | None = None, on_progress: progress.OnProgress | None = None) -> Result:
    """Evaluate a dataset: the three report tables as pyarrow Tables, plus run information.

    ``path`` is a path or URL, or an open ``zarr.Group`` (an in-memory one
    included). Without ``client`` the chunks run here: on ``threads`` threads
    of this process that share one normalised copy of the gallery (the kernel
    and BLAS release the GIL), each with one BLAS thread. With a
    ``distributed.Client`` each chunk is one task (retried if a worker dies),
    or, when the gallery is larger than a worker's share of memory (or
    ``gallery_shards`` says so), a task per (chunk, gallery shard) whose
    counts are added. ``on_chunk(stats, done, total)`` is called as chunks finish;
    ``on_progress(done, total, phase)`` as the work goes (``engine.progress``: pairs
    ranked here, tile by tile; tasks finished on a client; total 0 for the
    notice that kernels are compiling, which without ``on_progress`` goes to stderr).
    On a client, a worker lost mid-run is recorded (``RunRecord.faults``) and
    one that holds a task for ``stall_timeout`` seconds (or 10 x the longest
    task so far, if longer) is restarted, or the run fails with
    ``WorkerStalled``: see ``engine.faults``.
    """
    asked = options or Options()
    broadcasts = client is not None and bool(asked.rerank or asked.query_expansion or asked.database_augmentation
                                             or isinstance(path, zarr.Group))
    on_progress = on_progress or progress.print_notice
    from evalcore.core import kernels  # deferred: numba

    # before numba compiles a kernel the cache does not hold, the run says why it waits (first run only)
    with kernels.compile_notices(lambda folder: on_progress(0, 0, progress.compile_phase(folder))), \
            broadcasts_kept(client) if broadcasts else contextlib.nullcontext():
        return _evaluate(path, options, client=client, threads=threads, storage_options=storage_options,
                         chunk_rows=chunk_rows, gallery_shards=gallery_shards, on_chunk=on_chunk,
                         stall_timeout=stall_timeout, on_progress=on_progress)


def _evaluate(path, options: Options | None, *, client, threads: int, storage_options: dict | None,
              chunk_rows: int | None, gallery_shards: int | None, on_chunk: Callable[[dict, int, int], None] | None,
              stall_timeout: float | None, on_progress: progress.OnProgress) -> Result:
    """``evaluate``, while the broadcasts it relies on stay on every worker."""
    options = (options or Options()).checked()
    stall_timeout = check_stall_timeout(stall_timeout)
    started = time.perf_counter()
    group = ds.open_dataset(path, storage_options)
    source = group if isinstance(path, zarr.Group) else str(path)
    shape = describe(group, options)
    if client is None and shape.kind.backend is not None:
        load_kernels_aside(shape.kind.backend)  # overlaps the checks and the gallery read below
    max_rank, capped = cap_max_rank(options.max_rank, shape.n_gallery)
    options = replace(options, max_rank=max_rank)
    # structure here, once; embedding values are checked by the tasks as they read them
    kept: dict[str, np.ndarray] = {}  # gallery/key, read whole by the checks: the top-1 keys come from it
    problems = validate_dataset(group, options.protocol, similarity=options.similarity, judged_only=options.judged_only,
                                scan_values=False, keep=kept)
    problems.raise_if_any()
    fingerprint = ds.fingerprint(group)  # of the dataset as given, also when its vectors are expanded below
    expand_started = time.perf_counter()
    if options.query_expansion or options.database_augmentation:
        group = source = expand_for(group, shape, options, client, threads)
        shape = describe(group, options)
    expand_s = time.perf_counter() - expand_started
    ctx = TaskContext(shape, run_id=uuid.uuid4().hex, cache_bytes=cache_budget(client))
    zarr_rows = ds.array(group, query_rows_array(shape)).chunks[0]
    n_workers = len(client.scheduler_info()["workers"]) if client is not None else 1
    # re-ranking ranks whole-gallery chunks against its model (no gallery shards: README, Re-ranking); judged-only
    # ranking reads each chunk's judged rows alone (io.truth.rank_among_allowed), which a shard's scan would not
    shards = None if options.rerank or options.judged_only \
        else plan_shards(group, shape, ctx.cache_bytes, gallery_shards, n_workers)
    owners = shard_owners(len(shards), sorted(client.scheduler_info()["workers"])) \
        if shards and client is not None else None
    if client is None and chunk_rows is None and splits_columns(options, shape, shards, max(1, threads)):
        # every chunk's scan uses all the threads: fewer, larger chunks each save a wait for the last thread
        chunks = plan_chunks(shape.n_queries, max(zarr_rows, SPLIT_CHUNK_ROWS), 1, per_worker=1)
    else:
        # no worker yet (still starting, or all gone): plan for one; the cluster's watch gives up if none comes
        chunks = plan_chunks(shape.n_queries, chunk_rows or zarr_rows, max(1, n_workers))
    model = None
    search_s = 0.0
    estimates: rerank_phase.Pieces = []
    model_started = time.perf_counter()
    if options.rerank:
        # phase stays referenced to the end of the run: the kept estimates' futures must outlive the chunks
        phase = build_model_for(group, shape, options, client, threads)
        model, search_s, estimates = phase.model, phase.search_s, phase.estimates
    model_s = time.perf_counter() - model_started
    validated = time.perf_counter()
    results: list = [None] * len(chunks)  # each chunk's ChunkResult, in chunk order
    faults: list[Fault] = []
    if client is None:
        counter = progress.PairCounter(on_progress, chunks, shape.n_gallery)
        progress.register(ctx.run_id, counter)
        try:
            counter.start()
            run_here(source, options, chunks, storage_options, ctx, shards, max(1, threads), results, on_chunk, model,
                     estimates)
        finally:
            progress.forget(ctx.run_id)
            run_caches.forget_run(ctx.run_id)
    else:
        # deferred: runs without a client never import distributed
        from distributed import CancelledError

        # sharded: progress by (chunk, shard) scans as they finish, else by chunks
        scans = progress.TaskCounter(on_progress, len(chunks) * len(shards), "shards") if shards else None
        # arrays in memory and the re-ranking model: one copy per worker, held for the run (``ClusterChunks``)
        tasks = ClusterChunks(client, source, options, chunks, storage_options, ctx, shards, owners, model,
                              estimates, on_scan=scans.one if scans else None)
        if not shards:
            on_progress(0, len(chunks), "chunks")
        watch = StallWatch(client, tasks.futures, ctx.run_id, stall_timeout)
        try:
            with watch:
                try:
                    for done, (i, chunk) in enumerate(tasks.completed(on_again=watch.resubmitted), start=1):
                        results[i] = chunk
                        watch.progress()
                        if chunk.input_error is not None:
                            client.cancel(tasks.futures)
                            raise_input_error(chunk)
                        if on_chunk:
                            on_chunk(chunk.stats(), done, len(chunks))
                        if not shards:
                            on_progress(done, len(chunks), "chunks")
                except CancelledError:
                    if watch.failure:
                        raise WorkerStalled(watch.failure) from None
                    raise
            if scans:  # every chunk is combined, so every scan is done, whether or not its callback has come
                scans.finish()
        finally:
            tasks.release()
            forget_on_workers(client, ctx.run_id, skip=watch.unavailable)
        faults = watch.faults
    ranked = time.perf_counter()
    per_query = pa.concat_tables([r.table for r in results]) if results else empty_per_query(options)
    if "top1" in per_query.column_names:
        per_query = add_top1_keys(group, per_query, kept.get("gallery/key"))
    summary, cmc = summarize(per_query, options)
    finished = time.perf_counter()
    record = RunRecord(
        shape=shape, run_id=ctx.run_id, cache_bytes=ctx.cache_bytes, gallery_shards=shards, options=options,
        dataset="<in memory>" if isinstance(path, zarr.Group) else str(path),
        fingerprint=fingerprint,
        chunks=[(r.q0, r.q1) for r in results],
        counts={"queries": shape.n_queries, "gallery": shape.n_gallery,
                "known": int(summary.column("n_evaluated")[0].as_py()),
                "unknown": int(summary.column("n_unknown")[0].as_py())},
        scores=score_note(shape, options),
        near_ties_resolved=int(sum(r.near_ties for r in results)),
        warnings=run_warnings(per_query, options) + ([capped] if capped else [])
        + [w for w in [cutoffs_past_lists(shape, options)] if w] + [f.message() for f in faults],
        timings={"validate_s": validated - started - model_s - expand_s,
                 **({"rerank_model_s": model_s, "rerank_search_s": search_s} if model else {}),
                 **({"expansion_s": expand_s} if options.query_expansion or options.database_augmentation else {}),
                 "rank_s": ranked - validated,
                 "reduce_s": finished - ranked, "total_s": finished - started,
                 "chunk_s": [round(r.seconds, 4) for r in results]},
        workers=n_workers, stall_timeout=stall_timeout if client is not None else None, faults=faults,
        rerank_chunks_from_estimates=sum(r.from_estimates for r in results) if model is not None else None)
    return Result(per_query, summary, cmc, run=record.as_dict(), record=record)


def build_model_for(group, shape: DatasetShape, options: Options, client, threads: int) -> rerank_phase.RerankPhase:
    """The run's re-ranking model, its neighbour search's seconds and kept estimates: on the client, or on
    ``threads`` threads here."""
    assert options.rerank is not None
    if client is not None:
        return rerank_phase.build_timed(group, shape, options.rerank, client=client)
    from concurrent.futures import ThreadPoolExecutor

    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"), ThreadPoolExecutor(max(1, threads)) as pool:
        return rerank_phase.build_timed(group, shape, options.rerank, map_fn=pool.map)


def expand_for(group, shape: DatasetShape, options: Options, client, threads: int):
    """The dataset with αQE/DBA applied (``engine.expansion``): neighbour search on the client, or on
    ``threads`` threads here."""
    if client is not None:
        return expansion_phase.expanded(group, shape, options, client=client)
    from concurrent.futures import ThreadPoolExecutor

    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"), ThreadPoolExecutor(max(1, threads)) as pool:
        return expansion_phase.expanded(group, shape, options, map_fn=pool.map)


def forget_on_workers(client, run_id: str, skip: set[str] | frozenset[str] = frozenset()) -> None:
    """Give back the workers' memory of a finished run (its cached gallery); best effort.

    ``skip``: workers found stuck or being restarted, which would not answer (``client.run`` waits for every
    worker it is given).
    """
    if not run_id:
        return
    try:
        workers = [w for w in client.scheduler_info()["workers"] if w not in skip]
        if workers:
            client.run(run_caches.forget_run, run_id, workers=workers, on_error="ignore")
    except Exception:  # noqa: BLE001 - a cluster that is going away keeps nothing anyway
        pass
