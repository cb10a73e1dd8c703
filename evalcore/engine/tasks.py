"""The tasks: per-query rows for one chunk of queries, whole or as a graph over gallery shards.

A task opens the dataset itself, so only a path (or a scattered in-memory
group), the options, two integers and the task context travel to a worker,
and only the chunk's rows (or a shard's tile states) travel back. An input
error is returned as a value, not raised: a retry would not make the data
any better, and the driver reports it.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import pyarrow as pa

from evalcore.core import metrics as m
from evalcore.core import protocols as p
from evalcore.core import registry, scan
from evalcore.core.lists import rank_lists
from evalcore.core.ranking import Ranked, normalize_rows, rank_by_lists, row_norms
from evalcore.core.rerank import RerankModel
from evalcore.core.scan.embeddings import EMBEDDINGS
from evalcore.core.scan.rerank import RERANK, RerankQueries, with_cosines
from evalcore.core.scan.scores import ScoreQueries
from evalcore.engine import progress
from evalcore.engine.gallery import GalleryBlocks, ScoreBlocks, gallery_side
from evalcore.engine.options import Options
from evalcore.engine.plan import TaskContext, describe
from evalcore.errors import InputError, OptionError, mention
from evalcore.io import dataset as ds
from evalcore.io import kinds
from evalcore.io import truth as truth_io
from evalcore.io.kinds import InputKind
from evalcore.types import LIST_ITEMS

T = TypeVar("T")


@dataclass(frozen=True)
class TaskInputError:
    """An input error a task returns as a value (a retry would not make the data any better); the driver
    raises it (``raise_it``): the error itself, its class and fields pickled across the worker processes."""

    error: InputError

    def raise_it(self) -> None:
        raise self.error.with_traceback(None)


@dataclass(frozen=True)
class ChunkResult:
    """What a chunk's task returns: its per-query rows for queries q0..q1 and a few counters, or the input
    error that stopped it (then ``table`` is None)."""

    q0: int
    q1: int
    table: pa.Table | None
    near_ties: int = 0
    seconds: float = 0.0
    #: gallery shards whose states were added (sharded runs only)
    shards: int | None = None
    input_error: TaskInputError | None = None
    #: re-ranked runs: whether the chunk counted from the search's kept estimates (else its own products)
    from_estimates: bool = False

    def stats(self) -> dict:
        """The counters as ``on_chunk`` receives them: q0, q1, near_ties, seconds (and shards when sharded)."""
        out: dict = {"q0": self.q0, "q1": self.q1, "near_ties": self.near_ties, "seconds": self.seconds}
        if self.shards is not None:
            out["shards"] = self.shards
        return out


def first_error(*values) -> TaskInputError | None:
    """The first input error among a task's inputs (results of earlier tasks), or None."""
    return next((v for v in values if isinstance(v, TaskInputError)), None)


def as_value(task: Callable[[], T]) -> T | TaskInputError:
    """``task()``, or the input error it raised, as a value."""
    try:
        return task()
    except InputError as exc:
        return TaskInputError(exc)


def load_truth(group, options: Options, q0: int, q1: int, n_gallery: int, run_id: str = "") -> p.Truth:
    """The protocol's relevant and junk sets for queries q0..q1 (its module reads, then pure code)."""
    return p.get(options.protocol).load(dataset_reader(group, run_id), options, q0, q1, n_gallery)


def dataset_reader(group, run_id: str = "") -> truth_io.DatasetReader:
    """The dataset as protocols read it, the gallery side kept for the run."""
    return truth_io.DatasetReader(group, lambda names: gallery_side(group, run_id, names))


def keys_of(group, side: str, idx: np.ndarray) -> list:
    """Keys of the given rows (-1 gives null); defaults are q<i> / g<i>."""
    prefix = side[0]
    if ds.has(group, f"{side}/key"):
        valid = idx[idx >= 0]
        uniq = np.unique(valid)
        read = ds.read(group, f"{side}/key", uniq) if uniq.size else np.empty(0, object)
        lookup = dict(zip(uniq.tolist(), (str(x) for x in read)))
        return [lookup[i] if i >= 0 else None for i in idx.tolist()]
    return [f"{prefix}{i}" if i >= 0 else None for i in idx.tolist()]


def _nullable(values: np.ndarray, null: np.ndarray) -> pa.Array:
    return pa.array(values, mask=null)


def rank_chunk(group, options: Options, ctx: TaskContext, truth: p.Truth, q0: int, q1: int, threads: int = 1,
               map_fn=map, rerank: RerankModel | None = None, estimates: np.ndarray | None = None) -> Ranked:
    """Relevant ranks for one chunk, from a scan backend or from precomputed lists (``threads``: column ranges
    of the scan run through ``map_fn``); re-ranked by ``rerank`` when given (from ``estimates``, when given,
    instead of products)."""
    gallery_junk = gallery_side(group, ctx.run_id, ("junk",)).get("junk")
    if rerank is not None:
        return rank_reranked(group, options, ctx, truth, q0, q1, rerank, threads, map_fn, gallery_junk, estimates)
    return RANKERS[ctx.shape.ranked_by](group, options, ctx, truth, q0, q1, threads, map_fn, gallery_junk)


#: how one chunk of each input kind (``io.kinds``) is ranked: kind name -> ranker; a kind ranked by a scan backend
#: also gives the chunk's (queries, source) in SCAN_SOURCES
RANKERS: dict[str, Callable[..., Ranked]] = {}
SCAN_SOURCES: dict[str, Callable[..., tuple]] = {}


def ranker_of(*kinds_: InputKind, table: dict[str, Callable] = RANKERS):
    """Register the decorated function as the ranker of ``kinds_`` (or, with ``table=SCAN_SOURCES``, as their
    chunk source)."""
    def register(fn):
        for kind in kinds_:
            table[kind.name] = fn
        return fn
    return register


@ranker_of(kinds.LISTS)
def rank_precomputed_lists(group, options: Options, ctx: TaskContext, truth: p.Truth, q0: int, q1: int,
                           threads: int, map_fn, gallery_junk) -> Ranked:
    """Ranks of one chunk from its precomputed lists (and their scores, for tie groups)."""
    kind = ctx.shape.kind
    items = ds.read(group, kind.query_array, slice(q0, q1)).astype(np.int64)
    scores = ds.read(group, kind.optional[0], slice(q0, q1)) if ds.has(group, kind.optional[0]) else None
    if options.judged_only and options.depth is not None and options.depth < items.shape[1]:
        # trec_eval -M N -J: the list is cut at N before the unjudged items leave it (N entries, not N judged)
        items, scores = items[:, :options.depth], None if scores is None else scores[:, :options.depth]
    return rank_by_lists(items, scores, truth, gallery_junk, ties=options.ties, q0=q0, n_gallery=ctx.shape.n_gallery)


@ranker_of(kinds.SCORES, kinds.EMBEDDINGS)
def rank_by_scan(group, options: Options, ctx: TaskContext, truth: p.Truth, q0: int, q1: int, threads: int, map_fn,
                 gallery_junk) -> Ranked:
    """Ranks of one chunk by its kind's scan backend (judged-only: among each query's allowed items alone)."""
    if truth.allowed_indptr is not None:
        return truth_io.rank_among_allowed(group, options, truth, q0, q1)
    backend, queries, source = chunk_scan(group, options, q0, q1, ctx, cache=True)
    source = progress.counted(ctx.run_id, source, q0, q1, backend.name)  # a run here: pairs ranked, tile by tile
    return scan.rank(backend, queries, truth, source, ties=options.ties, gallery_junk=gallery_junk, threads=threads,
                     map_fn=map_fn)


def rank_reranked(group, options: Options, ctx: TaskContext, truth: p.Truth, q0: int, q1: int, model: RerankModel,
                  threads: int, map_fn, gallery_junk, estimates: np.ndarray | None = None) -> Ranked:
    """Ranks of one chunk by re-ranking's final distance (``core.scan.rerank``), cosine scores reported."""
    query, gallery = chunk_inputs(group, options, q0, q1, ctx, cache=True)
    queries = RerankQueries(normalize_rows(query, "cosine"), q0, model.scale[q0:q1], model.shared(q0, q1),
                            model.params, estimates=estimates)
    ranked = scan.rank(RERANK, queries, truth, progress.counted(ctx.run_id, gallery, q0, q1, RERANK.name),
                       ties=options.ties, gallery_junk=gallery_junk,
                       threads=threads, map_fn=map_fn)
    return with_cosines(queries, truth, gallery, ranked)


def chunk_scan(group, options: Options, q0: int, q1: int, ctx: TaskContext, span=None, cache: bool = False):
    """(backend, queries, source) of one chunk: what ``core.scan`` ranks it with, and what it scans."""
    queries, source = SCAN_SOURCES[ctx.shape.ranked_by](group, options, q0, q1, ctx, span, cache)
    return backend_of(ctx), queries, source


@ranker_of(kinds.SCORES, table=SCAN_SOURCES)
def scores_source(group, options: Options, q0: int, q1: int, ctx: TaskContext, span, cache: bool):
    """A chunk of the given score matrix, read a bounded block at a time."""
    source = ScoreBlocks(group, q0, q1)
    return ScoreQueries(q0, q1 - q0, source.higher_is_better), source


@ranker_of(kinds.EMBEDDINGS, table=SCAN_SOURCES)
def embeddings_source(group, options: Options, q0: int, q1: int, ctx: TaskContext, span, cache: bool):
    """A chunk's query rows (normalised as the similarity says) and its gallery reader."""
    query, gallery = chunk_inputs(group, options, q0, q1, ctx, span=span, cache=cache)
    return EMBEDDINGS.queries(normalize_rows(query, options.similarity), q0, ctx.shape.n_queries,
                              options.similarity), gallery



def backend_of(ctx: TaskContext):
    """The registered scan backend of the dataset's input kind (``io.kinds``)."""
    name = ctx.shape.kind.backend
    if name is None:
        raise ValueError(f"input kind {ctx.shape.ranked_by!r} is not ranked by a scan backend")
    return scan.backend(name)



def chunk_inputs(group, options: Options, q0: int, q1: int, ctx: TaskContext, span=None, cache: bool = False):
    """The chunk's query rows (checked for NaN/Inf/zero) and a reader of its gallery (or shard)."""
    query = ds.read_array(group["query/emb"], "query/emb", slice(q0, q1))
    norms = row_norms(query)
    problems = ds.check_embeddings("query/emb", q0, query, options.similarity == "cosine", norms=norms)
    if problems:
        raise problems[0]
    budget = ctx.cache_bytes if cache else 0
    gallery = GalleryBlocks(group, options.similarity, ctx.run_id, budget, span=span)
    gallery.query_norms = (q0, norms)  # dot: each gallery block is checked against these for float32 overflow
    return query, gallery



def _open_chunk(path, options, q0, q1, storage_options, ctx, span=None):
    """Dataset, scan backend, queries and source; a shard's reader keeps its blocks."""
    group = ds.open_dataset(path, storage_options)
    return (group, *chunk_scan(group, options, q0, q1, ctx, span=span, cache=span is not None))


def chunk_truth(path: str, options: Options, q0: int, q1: int, storage_options,
                ctx: TaskContext) -> p.Truth | TaskInputError:
    """Task: the chunk's relevant and junk sets, or an input error as a value."""
    return as_value(lambda: load_truth(ds.open_dataset(path, storage_options), options, q0, q1,
                                       ctx.shape.n_gallery, ctx.run_id))


def shard_bands(path: str, options: Options, q0: int, q1: int, s0: int, s1: int, storage_options, ctx: TaskContext,
                chunks: list[tuple[int, int]], *truths) -> list | TaskInputError:
    """Task: for each chunk of a batch (queries q0..q1), the canonical scores (thresholds) of its relevant
    pairs whose item lies in gallery rows s0..s1, as (pairs, scores); or the first input error, as a value.

    Done per shard so the rows come from the shard its owner holds, not from
    scattered reads of the whole gallery; and for a batch of chunks at once,
    so a worker goes through its shards' bands one shard after another,
    without waiting on each chunk's relevant sets between them.
    """
    error = first_error(*truths)
    if error:
        return error

    def bands() -> list:
        group = ds.open_dataset(path, storage_options)
        out = []
        for (c0, c1), truth in zip(chunks, truths):
            backend, queries, source = chunk_scan(group, options, c0, c1, ctx, span=(s0, s1), cache=True)
            pairs = np.nonzero((truth.rel_items >= s0) & (truth.rel_items < s1))[0]
            out.append((pairs, backend.thresholds(queries, truth, source, pairs)))
        return out

    return as_value(bands)


def _gather_thresholds(truth, bands) -> np.ndarray:
    dtype = bands[0][1].dtype if bands else np.float32
    thresholds = np.empty(len(truth.rel_items), dtype=dtype)
    for pairs, scores in bands:
        thresholds[pairs] = scores
    return thresholds


def scan_shard(path: str, options: Options, q0: int, q1: int, s0: int, s1: int, storage_options, ctx: TaskContext,
               truth, at: int, *bands):
    """Task: the chunk's tile states over gallery rows s0..s1 (``bands``: every shard's thresholds of the
    chunk's batch, the chunk at position ``at`` in each); or the first input error, as a value."""
    error = first_error(truth, *bands)
    if error:
        return error

    def states():
        group, backend, queries, source = _open_chunk(path, options, q0, q1, storage_options, ctx, span=(s0, s1))
        gallery_junk = gallery_side(group, ctx.run_id, ("junk",)).get("junk")
        thresholds = _gather_thresholds(truth, [batch[at] for batch in bands])
        states = backend.new_states(queries, truth, thresholds, options.ties)
        backend.scan(queries, states, progress.counted(ctx.run_id, source, q0, q1, backend.name), (s0, s1),
                     gallery_junk)
        return states

    return as_value(states)


def combine_shards(path: str, options: Options, q0: int, q1: int, storage_options, ctx: TaskContext, truth,
                   *parts) -> ChunkResult:
    """Task: add the shards' states and write the chunk's per-query rows."""
    started = time.perf_counter()
    error = first_error(truth, *parts)
    if error:
        return ChunkResult(q0, q1, None, input_error=error)
    backend = backend_of(ctx)
    ranked = backend.finish(backend.merge(list(parts)), truth, options.ties)
    table = as_value(lambda: per_query_table(ds.open_dataset(path, storage_options), options, truth, ranked, q0, q1,
                                                ctx.shape.n_gallery))
    if isinstance(table, TaskInputError):
        return ChunkResult(q0, q1, None, input_error=table)
    return ChunkResult(q0, q1, table, near_ties=ranked.near_ties, seconds=time.perf_counter() - started,
                       shards=len(parts))



def evaluate_chunk(path: str, options: Options, q0: int, q1: int, storage_options: dict | None = None,
                   ctx: TaskContext | None = None, threads: int = 1, map_fn=map,
                   rerank: RerankModel | None = None, estimates: np.ndarray | None = None) -> ChunkResult:
    """The task: per-query rows for queries q0..q1 and a few counters (``threads`` column ranges of the scan,
    run through ``map_fn``: a thread pool's map; ``rerank``: the run's re-ranking model, ``estimates`` the
    float32 estimates of these queries against the gallery its search kept, if any)."""
    started = time.perf_counter()
    try:
        group = ds.open_dataset(path, storage_options)
        ctx = ctx or TaskContext(describe(group, options))
        truth = load_truth(group, options, q0, q1, ctx.shape.n_gallery, ctx.run_id)
        ranked = rank_chunk(group, options, ctx, truth, q0, q1, threads, map_fn, rerank, estimates)
        table = per_query_table(group, options, truth, ranked, q0, q1, ctx.shape.n_gallery)
    except InputError as exc:  # returned, not raised: a retry would not make the data any better
        return ChunkResult(q0, q1, None, seconds=time.perf_counter() - started, input_error=TaskInputError(exc))
    return ChunkResult(q0, q1, table, near_ties=ranked.near_ties, seconds=time.perf_counter() - started,
                       from_estimates=estimates is not None)


def per_query_table(group, options: Options, truth: p.Truth, ranked: Ranked, q0: int, q1: int,
                    n_gallery: int | None = None) -> pa.Table:
    """The per_query.parquet rows of one chunk, in query order."""
    n = q1 - q0
    r = ranked
    cols: dict[str, pa.Array] = {"query": pa.array(np.arange(q0, q1, dtype=np.int64))}
    cols["key"] = pa.array(keys_of(group, "query", np.arange(q0, q1)), pa.string())
    if ds.has(group, "query/label"):
        cols["label"] = pa.array(ds.read(group, "query/label", slice(q0, q1)).astype(np.int64))
    if ds.has(group, "query/cam"):  # reid: the worst-queries table names each query's camera
        cols["cam"] = pa.array(ds.read(group, "query/cam", slice(q0, q1)).astype(np.int64))
    if ds.has(group, "query/group"):
        cols["group"] = pa.array([str(x) for x in ds.read(group, "query/group", slice(q0, q1))], pa.string())
    lists = rank_lists(r, truth, options.rel_level, options.depth, n_gallery)  # R and the ranks at --rel-level, --depth
    cols["n_relevant"] = pa.array(lists.n_relevant)
    cols["n_junk"] = pa.array(truth.n_junk.astype(np.int64))
    zero_empty = truth.columns["n_judged"] > 0 if options.empty_queries == "zero" else None
    metric_columns = options.columns(first_rank=True)  # the registry's; first_rank for the open set and CMC
    if lists.judged_before is None and any(c.metric.judged for c in metric_columns):
        judged = ", ".join(dict.fromkeys(c.metric.name for c in metric_columns if c.metric.judged))
        raise OptionError("--metrics", f"{judged} need(s) to know the judged non-relevant items ranked above each "
                          "relevant one: evaluate precomputed rankings (" + mention(LIST_ITEMS) + ") or "
                          + mention("--judged-only") + " qrels")
    values = registry.compute(metric_columns, lists.indptr, lists.ranks, lists.n_relevant, zero_empty, lists,
                              options.ties)
    for c in metric_columns:
        cols[c.name] = _nullable(values[c.name].astype(c.metric.dtype), c.metric.null(values[c.name]))
    cols["top1"] = _nullable(r.top1, r.top1 < 0)  # top1_key is added once, on the driver
    cols["top1_score"] = _nullable(r.top1_score, np.isnan(r.top1_score))
    cols["relevant_score"] = _nullable(r.relevant_score, np.isnan(r.relevant_score))
    if r.rerank_distance is not None:
        cols["top1_rerank_distance"] = _nullable(r.rerank_distance, np.isnan(r.rerank_distance))
    if options.threshold is not None:
        correct = values["first_rank"] == 1
        accepted, outcome = m.open_set_outcome(r.top1_score, correct, options.threshold)
        cols["accepted"] = pa.array(accepted)
        cols["outcome"] = pa.array(outcome.tolist(), pa.string())
    for name, v in truth.columns.items():
        if np.asarray(v).dtype.kind in "iu":  # counts (n_judged) stay integers
            cols[name] = pa.array(np.asarray(v, dtype=np.int64))
            continue
        cols[name] = _nullable(np.asarray(v, dtype=np.float64), np.isnan(np.asarray(v, dtype=np.float64)))
    for name, v in p.get(options.protocol).top1_columns(dataset_reader(group), q0, q1, r.top1).items():
        cols[name] = _nullable(v, np.isnan(v))
    assert all(len(a) == n for a in cols.values())
    return pa.table(cols)
