"""Where the tasks run: submitted to a Dask client as a graph, or here on threads."""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, cast

import zarr
from threadpoolctl import threadpool_limits

from evalcore.engine import progress
from evalcore.engine.faults import CANCELLED_RETRIES, TaskKey, TaskKind, resubmittable, task_key, test_stall
from evalcore.engine.gallery import GalleryBlocks
from evalcore.engine.options import Options
from evalcore.engine.plan import DatasetShape, Span, TaskContext
from evalcore.engine.rerank import Pieces, estimate_rows, worker_pieces
from evalcore.engine.tasks import ChunkResult, chunk_truth, combine_shards, evaluate_chunk, scan_shard, shard_bands
from evalcore.errors import ClusterError
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
                  shards: list[Span] | None, owners: list[list[str]] | None = None, model=None,
                  estimates: Pieces | None = None, on_scan=None, attempt: int = 0) -> list:
    """Futures of every chunk's ``ChunkResult``: one task each, or a small graph over gallery shards.

    ``model``: the re-ranking model as scattered to every worker (a future the caller holds for the run:
    ``ClusterChunks``); ``attempt``: N for the Nth submission of chunks the scheduler cancelled (their keys
    end in -rN, ``TaskKey``).

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
        # a chunk runs where the kept estimates of its rows are, if it can, and reads them there by key: not
        # a dependency, so a lost holder costs the chunk its own products, never the run (``worker_pieces``)
        where = client.who_has([f for _, _, f in estimates]) if estimates else {}
        futures = []
        for q0, q1 in chunks:
            mine = [(a, b, cast(Any, f).key) for a, b, f in estimates or [] if a < q1 and b > q0]
            holders = sorted({w for _, _, key in mine for w in where.get(key, ())})
            pin = {"workers": holders, "allow_other_workers": True} if holders else {}
            futures.append(client.submit(chunk_task, path, options, q0, q1, storage_options, ctx, model, mine,
                                         key=task_key("chunk", q0, q1, run, attempt=attempt), retries=3,
                                         pure=False, **pin))
        return futures

    # a chunk submitted again goes before every task of the first submission: the run waits on it alone
    order = iter(range(10 ** 9 * (1 + attempt), 0, -1))

    def submit(fn, kind: TaskKind, q0: int, q1: int, *args, shard: Span | None = None, workers=None):
        # the order of submission, as explicit priorities: a worker runs its ready tasks in that order
        # (Dask's own ordering of separately submitted tasks does not follow it)
        pin = {"workers": workers, "allow_other_workers": True} if workers else {}
        return client.submit(fn, path, options, q0, q1, *args, key=task_key(kind, q0, q1, run, shard, attempt),
                             retries=3, pure=False, priority=next(order), **pin)

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


class ClusterChunks:
    """A cluster run's chunk futures (``submit_chunks``), what they read from every worker held for the
    whole run, and a chunk submitted again when the scheduler cancels its future.

    Held: data scattered to the workers (the re-ranking model, arrays given in
    memory) is pure data to the scheduler, which forgets it as soon as no
    client wants it and no task waits for it, that is once every chunk has
    finished. A chunk whose result was then lost with its worker (finished,
    not yet fetched) could no longer be computed, and the scheduler cancelled
    it ("already forgotten") where a lost one is run again. Held here, the
    data stays while the run goes on, and Dask runs such a chunk again itself.

    Submitted again (``again``): a chunk whose future the scheduler cancelled
    all the same (``faults.resubmittable``), under a new key, at most
    ``CANCELLED_RETRIES`` times, the held data scattered again from the
    driver's copy first if the cluster lost every copy of it. ``completed``
    gives every chunk's result exactly once.
    """

    def __init__(self, client, source, options: Options, chunks: list[Span], storage_options, ctx: TaskContext,
                 shards: list[Span] | None, owners: list[list[str]] | None = None, rerank=None,
                 estimates: Pieces | None = None, on_scan=None):
        self.client, self.chunks = client, chunks
        self._submit = (options, storage_options, ctx, shards, owners)
        self._estimates = estimates
        # the driver's copies, scattered to every worker once (not once per task), again if every copy is lost
        self._inputs = {"source": source if isinstance(source, zarr.Group) else None,
                        "model": rerank if shards is None else None}
        self._held: dict[str, Any] = {}
        self._source = source
        self.attempts = [0] * len(chunks)
        #: each chunk's future now (its latest submission)
        self.futures = submit_chunks(client, self._path(), options, chunks, storage_options, ctx, shards, owners,
                                     self._broadcast("model"), estimates, on_scan)

    def _broadcast(self, name: str):
        """The held future of input ``name`` on every worker (None when the run has none), scattered again
        when the cluster lost it."""
        value = self._inputs[name]
        if value is None:
            return None
        held = self._held.get(name)
        if held is None or held.status != "finished":
            held = self._held[name] = self.client.scatter(value, broadcast=True, hash=False)
        return held

    def _path(self):
        return self._broadcast("source") if self._inputs["source"] is not None else self._source

    def again(self, i: int, exc: BaseException):
        """Chunk ``i`` submitted again after its future ended with ``exc``, a cancellation; ``exc`` raised
        again when it is final (``faults.FINAL_CANCEL_REASONS``), a ClusterError naming the queries when the
        chunk was cancelled ``CANCELLED_RETRIES`` times already."""
        if not resubmittable(exc):
            raise exc
        q0, q1 = self.chunks[i]
        if self.attempts[i] >= CANCELLED_RETRIES:
            raise ClusterError(f"the scheduler cancelled the task of queries {q0}-{q1 - 1} {self.attempts[i] + 1} "
                               f"times (last: {getattr(exc, 'reason', exc)}), each time it was submitted again; "
                               "see the scheduler's log; nothing was written") from exc
        self.attempts[i] += 1
        options, storage_options, ctx, shards, owners = self._submit
        (future,) = submit_chunks(self.client, self._path(), options, [(q0, q1)], storage_options, ctx, shards,
                                  owners, self._broadcast("model"), self._estimates, attempt=self.attempts[i])
        self.futures[i] = future
        return future

    def completed(self, on_again: Callable[[Any, Any, str], None] | None = None) -> Iterator[tuple[int, Any]]:
        """(chunk index, result) of every chunk, each once, as they finish; a future is released once the
        caller took its result (asks for the next). A chunk cancelled by the scheduler is submitted again
        (``again``; ``on_again(cancelled, new, reason)`` is told) and its new future waited for; any other
        failure is raised as the future raises it."""
        # deferred: cluster runs only (as_completed renamed: the module's own is concurrent.futures')
        from distributed import CancelledError
        from distributed import as_completed as completing

        index = {f.key: i for i, f in enumerate(self.futures)}
        waiting = set(range(len(self.futures)))
        pending = completing(self.futures, loop=self.client.loop)
        for future in pending:
            i = index.pop(future.key)
            try:
                result = future.result()
            except CancelledError as exc:
                new = self.again(i, exc)
                index[new.key] = i
                if on_again is not None:
                    on_again(future, new, getattr(exc, "reason", "unknown"))
                pending.add(new)
                continue
            if i not in waiting:  # never two results for one chunk (one future per chunk is waited for)
                continue
            waiting.discard(i)
            yield i, result
            future.release()
        if waiting:  # as_completed ends when every future did: a chunk left without a result is a bug, said so
            run = self._submit[2].run_id
            spans = ", ".join(TaskKey("chunk", *self.chunks[i], run).queries() for i in sorted(waiting))
            raise ClusterError(f"the cluster run ended without the results of {spans}; nothing was written")

    def release(self) -> None:
        """The held inputs given back (the run is over)."""
        self._held.clear()


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
