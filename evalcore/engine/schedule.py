"""Where the tasks run: submitted to a Dask client as a graph, or here on threads."""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, cast

from threadpoolctl import threadpool_limits

from evalcore.engine import progress
from evalcore.engine.faults import TaskKind, task_key, test_stall
from evalcore.engine.gallery import GalleryBlocks
from evalcore.engine.options import Options
from evalcore.engine.plan import DatasetShape, Span, TaskContext
from evalcore.engine.rerank import Pieces, estimate_rows, worker_pieces
from evalcore.engine.tasks import ChunkResult, chunk_truth, combine_shards, evaluate_chunk, scan_shard, shard_bands
from evalcore.io import dataset as ds


def load_kernels_aside(scan: str = "embeddings") -> threading.Thread:
    """Load the scan's compiled kernels from numba's cache on a thread of their own, and return it: those of
    ``scan`` ("embeddings" or "scores", ``kernels.warm_up``) alone, so a first run compiles no other.

    Loading them (numba's CPU target, which imports scipy.linalg, then each
    kernel) takes ~0.3 s of a fresh process and would otherwise wait in the
    first chunk; a run here starts it at once. It overlaps the gallery's read
    and normalisation (IO and numpy, outside the interpreter lock); the checks
    before those are Python like the loading and only share the time with it.
    A failure is left to the first chunk, which meets it again and reports it
    as it always does.
    """
    def load() -> None:
        from evalcore.core import kernels

        try:
            kernels.warm_up(scan)
        except Exception:  # noqa: BLE001 - the chunk's own call reports it
            pass

    thread = threading.Thread(target=load, name="evalcore-kernels")
    thread.start()
    return thread


def submit_chunks(client, path, options: Options, chunks: list[Span], storage_options, ctx: TaskContext,
                  shards: list[Span] | None, owners: list[list[str]] | None = None, rerank=None,
                  estimates: Pieces | None = None, on_scan=None) -> list:
    """Futures of every chunk's ``ChunkResult``: one task each, or a small graph over gallery shards.

    Sharded work is submitted shard by shard (earlier submissions run first):
    the bands of every chunk in shard 1, 2, ..., then the scans from the last
    shard back to the first. ``owners`` (``plan.shard_owners``) pins a
    shard's band and scan tasks to the workers that own it, so each worker
    reads only its own shards, and in that order it reads each of them once
    for the bands and the last one's scans, and again only for the scans of
    the others that no longer fit its cache. The pin is loose: when an
    owner is gone (died, or left), its tasks run on any worker, and the
    result is the same numbers. ``on_scan()`` is called (on Dask's callback thread) as each shard's scan ends.
    """
    run = ctx.run_id
    if shards is None:
        # a re-ranking model goes to every worker once, not once per task
        model = client.scatter(rerank, broadcast=True, hash=False) if rerank is not None else None
        # a chunk runs where the kept estimates of its rows are, if it can, and reads them there by key: not
        # a dependency, so a lost holder costs the chunk its own products, never the run (``worker_pieces``)
        where = client.who_has([f for _, _, f in estimates]) if estimates else {}
        futures = []
        for q0, q1 in chunks:
            mine = [(a, b, cast(Any, f).key) for a, b, f in estimates or [] if a < q1 and b > q0]
            holders = sorted({w for _, _, key in mine for w in where.get(key, ())})
            pin = {"workers": holders, "allow_other_workers": True} if holders else {}
            futures.append(client.submit(chunk_task, path, options, q0, q1, storage_options, ctx, model, mine,
                                         key=task_key("chunk", q0, q1, run), retries=3, pure=False, **pin))
        return futures

    order = iter(range(10 ** 9, 0, -1))

    def submit(fn, kind: TaskKind, q0: int, q1: int, *args, shard: Span | None = None, workers=None):
        # the order of submission, as explicit priorities: a worker runs its ready tasks in that order
        # (Dask's own ordering of separately submitted tasks does not follow it)
        pin = {"workers": workers, "allow_other_workers": True} if workers else {}
        return client.submit(fn, path, options, q0, q1, *args, key=task_key(kind, q0, q1, run, shard), retries=3,
                             pure=False, priority=next(order), **pin)

    owner = owners or [[] for _ in shards]
    truths = [submit(chunk_truth, "truth", q0, q1, storage_options, ctx) for q0, q1 in chunks]
    batches = band_batches(chunks, ctx.shape.dims or 1)
    # bands[k][b]: shard k's bands for the chunks of batch b
    bands = [[submit(shard_bands, "bands", chunks[b0][0], chunks[b1 - 1][1], s0, s1, storage_options, ctx,
                     chunks[b0:b1], *truths[b0:b1], shard=(s0, s1), workers=owner[k])
              for b0, b1 in batches] for k, (s0, s1) in enumerate(shards)]
    batch_of = [(b, i - b0) for b, (b0, b1) in enumerate(batches) for i in range(b0, b1)]
    scans = {}
    for k in reversed(range(len(shards))):
        s0, s1 = shards[k]
        for i, (q0, q1) in enumerate(chunks):
            b, at = batch_of[i]
            scans[k, i] = submit(scan_shard, "scan", q0, q1, s0, s1, storage_options, ctx, truths[i], at,
                                 *[bands[j][b] for j in range(len(shards))], shard=(s0, s1), workers=owner[k])
    if on_scan is not None:
        for future in scans.values():
            future.add_done_callback(lambda _: on_scan())
    return [submit(combine_shards, "combine", q0, q1, storage_options, ctx, truths[i],
                   *[scans[k, i] for k in range(len(shards))]) for i, (q0, q1) in enumerate(chunks)]


def chunk_task(path, options: Options, q0: int, q1: int, storage_options, ctx: TaskContext,
               rerank=None, estimates: list | None = None) -> ChunkResult:
    """The whole-gallery chunk task as a cluster runs it: ``evaluate_chunk``, after the tests' stall hook
    (``faults.test_stall``, a no-op unless ``EVALCORE_TEST_STALL`` is set); ``estimates``: (first row, end
    row, key) of the kept search estimates that hold its rows, used when this worker has them all."""
    test_stall(q0)
    return evaluate_chunk(path, options, q0, q1, storage_options, ctx, rerank=rerank,
                          estimates=estimate_rows(worker_pieces(estimates) if estimates else None, q0, q1))


#: query rows (as float32) one bands task holds at most
BAND_BATCH_BYTES = 64 << 20


def band_batches(chunks: list[Span], dims: int, max_bytes: int = BAND_BATCH_BYTES) -> list[Span]:
    """Consecutive runs of chunks (as index ranges) whose query rows fit ``max_bytes`` together."""
    out: list[Span] = []
    start, rows = 0, 0
    for i, (q0, q1) in enumerate(chunks):
        if i > start and (rows + q1 - q0) * dims * 4 > max_bytes:
            out.append((start, i))
            start, rows = i, 0
        rows += q1 - q0
    if chunks:
        out.append((start, len(chunks)))
    return out


def run_here(source, options: Options, chunks: list[Span], storage_options, ctx: TaskContext,
             shards: list[Span] | None, threads: int, results: list, on_chunk=None, rerank=None,
             estimates: Pieces | None = None) -> None:
    """Run every chunk in this process, on ``threads`` threads, into ``results`` (in chunk order).

    BLAS is held to one thread for the whole run: the grid's exactness needs
    it, and the chunks are the parallelism. With more than one thread and an
    unsharded gallery that fits the cache, the gallery blocks are read and
    normalised first, in parallel, so every thread then shares one copy.
    """
    def finished(i: int, result: ChunkResult, done: int) -> None:
        results[i] = result
        raise_input_error(result)
        progress.chunk_done(ctx.run_id, result.q0)  # its share, where it ranked without a scan
        if on_chunk:
            on_chunk(result.stats(), done, len(chunks))

    with threadpool_limits(limits=1, user_api="blas"):
        if threads <= 1:
            for i, (q0, q1) in enumerate(chunks):
                finished(i, run_chunk_here(source, options, q0, q1, storage_options, ctx, shards, rerank, estimates),
                         i + 1)
            return
        with ThreadPoolExecutor(threads, thread_name_prefix="evalcore") as pool:
            if splits_columns(options, ctx.shape, shards, threads):
                # chunks one after another, each scan split over the threads by gallery columns:
                # the threads finish together, however few chunks there are
                prefetch_gallery(pool, source, options, storage_options, ctx, threads)
                for i, (q0, q1) in enumerate(chunks):
                    finished(i, evaluate_chunk(source, options, q0, q1, storage_options, ctx, threads, pool.map,
                                               rerank, estimate_rows(estimates, q0, q1)), i + 1)
                return
            futures = {pool.submit(run_chunk_here, source, options, q0, q1, storage_options, ctx, shards, rerank,
                                   estimates): i
                       for i, (q0, q1) in enumerate(chunks)}
            try:
                for done, future in enumerate(as_completed(futures), start=1):
                    finished(futures[future], future.result(), done)
            except BaseException:
                for future in futures:
                    future.cancel()
                raise


def splits_columns(options: Options, shape: DatasetShape, shards: list[Span] | None, threads: int) -> bool:
    """Whether a run here splits each chunk's scan over its threads by gallery columns (``run_here``): an
    unsharded embedding scan on more than one thread."""
    return threads > 1 and shards is None and shape.kind.features and not options.judged_only


def prefetch_gallery(pool, source, options: Options, storage_options, ctx: TaskContext, threads: int) -> None:
    """Read and normalise the gallery blocks into the run's cache on the pool's ``threads``, when they fit."""
    group = ds.open_dataset(source, storage_options)
    GalleryBlocks(group, options.similarity, ctx.run_id, ctx.cache_bytes).prefetch(pool.map, threads)


def run_chunk_here(path, options: Options, q0: int, q1: int, storage_options, ctx: TaskContext,
                   shards: list[Span] | None, rerank=None, estimates: Pieces | None = None) -> ChunkResult:
    """The same work without a cluster, one piece after another."""
    if shards is None:
        return evaluate_chunk(path, options, q0, q1, storage_options, ctx, rerank=rerank,
                              estimates=estimate_rows(estimates, q0, q1))
    truth = chunk_truth(path, options, q0, q1, storage_options, ctx)
    bands = [shard_bands(path, options, q0, q1, s0, s1, storage_options, ctx, [(q0, q1)], truth) for s0, s1 in shards]
    parts = [scan_shard(path, options, q0, q1, s0, s1, storage_options, ctx, truth, 0, *bands) for s0, s1 in shards]
    return combine_shards(path, options, q0, q1, storage_options, ctx, truth, *parts)


def raise_input_error(result: ChunkResult) -> None:
    """A task's input error, returned as a value, raised here on the driver."""
    if result.input_error is not None:
        result.input_error.raise_it()
