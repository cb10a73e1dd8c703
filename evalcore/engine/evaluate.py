"""One evaluation: chunks of queries -> per-query rows -> summary and CMC.

``evaluate_chunk`` is the task: it opens the dataset itself, so only a path
and two integers travel to a worker, and only the chunk's rows travel back.
``evaluate`` runs the chunks in place or on a Dask client and reduces them in
chunk order; every mean is a correctly rounded sum over the per-query rows,
so results are the same for any chunking or worker count.
"""
from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace

import numpy as np
import pyarrow as pa
import zarr

from evalcore.core import metrics as m
from evalcore.core import protocols as p
from evalcore.core.ranking import (
    TILE_COLS,
    TILE_ROWS,
    Ranked,
    dot_overflow_rows,
    normalize_rows,
    rank_by_embeddings,
    rank_by_lists,
    row_norms,
)
from evalcore.errors import InputError
from evalcore.io import dataset as ds
from evalcore.io import truth as truth_io
from evalcore.io.validate import validate as validate_dataset
from evalcore.types import EMPTY_QUERIES, PROTOCOLS, SIMILARITIES, TIES, EmptyQueries, Protocol, Similarity, Ties


@dataclass(frozen=True)
class Options:
    """The evaluation options of the command line (README, Commands), dataset and output aside."""

    protocol: Protocol = "class"
    similarity: Similarity = "cosine"
    ks: tuple[int, ...] = (1, 3, 5, 10)
    max_rank: int = 50
    ties: Ties = "pessimistic"
    threshold: float | None = None
    map_at: int | None = None
    judged_only: bool = False
    radius: float | None = None
    #: qrels: a judged query with no relevant item is left out of the means (skip) or scores 0 (zero)
    empty_queries: EmptyQueries = "skip"

    def checked(self) -> Options:
        """The same options, or an InputError naming the bad one."""
        if self.protocol not in PROTOCOLS:
            raise InputError(f"--protocol: {self.protocol!r} is not one of {', '.join(PROTOCOLS)}")
        if self.similarity not in SIMILARITIES:
            raise InputError(f"--similarity: {self.similarity!r} is not cosine or dot")
        if self.ties not in TIES:
            raise InputError(f"--ties: {self.ties!r} is not pessimistic or optimistic")
        if not self.ks or any(int(k) != k or k < 1 for k in self.ks):
            raise InputError(f"--ks: {','.join(map(str, self.ks))} must be positive integers")
        if len(set(self.ks)) != len(self.ks):
            raise InputError(f"--ks: {','.join(map(str, self.ks))} repeats a value")
        if int(self.max_rank) != self.max_rank or self.max_rank < 1:
            raise InputError(f"--max-rank: {self.max_rank} must be a positive integer")
        if self.threshold is not None and not math.isfinite(self.threshold):
            raise InputError(f"--threshold: {self.threshold} must be a finite number")
        if self.map_at is not None and (int(self.map_at) != self.map_at or self.map_at < 1):
            raise InputError(f"--map-at: {self.map_at} must be a positive integer")
        if self.radius is not None and not (math.isfinite(self.radius) and self.radius >= 0):
            raise InputError(f"--radius: {self.radius} must be a finite number >= 0")
        if self.radius is not None and self.protocol not in ("geo", "xy"):
            raise InputError(f"--radius: only applies to the geo and xy protocols, not {self.protocol!r}")
        if self.judged_only and self.protocol != "qrels":
            raise InputError(f"--judged-only: only applies to the qrels protocol, not {self.protocol!r}")
        if self.empty_queries not in EMPTY_QUERIES:
            raise InputError(f"--empty-queries: {self.empty_queries!r} is not skip or zero")
        if self.empty_queries == "zero" and self.protocol != "qrels":
            raise InputError(f"--empty-queries: zero only applies to the qrels protocol, not {self.protocol!r} "
                             "(there a query with no relevant item is an open-set query; see --threshold)")
        return replace(self, ks=tuple(sorted(int(k) for k in self.ks)), max_rank=int(self.max_rank))


@dataclass
class Result:
    """The three report tables and what run.json records about the run."""

    per_query: pa.Table
    summary: pa.Table
    cmc: pa.Table
    info: dict = field(default_factory=dict)


# --------------------------------------------------------------------------- dataset shape


def describe(group, options: Options) -> dict:
    """Sizes and how queries are ranked; InputError when something needed is missing."""
    by_lists = ds.has(group, "ranking/item")
    if not by_lists and not (ds.has(group, "query/emb") and ds.has(group, "gallery/emb")):
        missing = "query/emb" if not ds.has(group, "query/emb") else "gallery/emb"
        raise InputError(f"{missing}: missing (needed to rank; or give ranking/item)")
    if by_lists:
        n_queries = group["ranking/item"].shape[0]
    else:
        n_queries = group["query/emb"].shape[0]
    n_gallery = None
    for name in ("gallery/emb", "gallery/label", "gallery/key", "gallery/lat", "gallery/x", "gallery/cam"):
        if ds.has(group, name):
            n_gallery = group[name].shape[0]
            break
    if n_gallery is None:
        raise InputError("gallery: no array tells the gallery size (give gallery/emb, gallery/label or gallery/key)")
    info = {"n_queries": int(n_queries), "n_gallery": int(n_gallery), "ranked_by": "ranking/item" if by_lists else "embeddings"}
    if by_lists:
        k = group["ranking/item"].shape[1]
        info["list_length"] = int(k)
        info["list_scores"] = bool(ds.has(group, "ranking/score"))
        too_long = [x for x in (*options.ks, options.map_at or 0) if x > k]
        if too_long:
            raise InputError(f"--ks: {too_long[0]} is larger than the ranking lists (ranking/item has K = {k})")
        if options.threshold is not None and not ds.has(group, "ranking/score"):
            raise InputError("--threshold: needs ranking/score (the precomputed lists have no scores)")
    else:
        info["dims"] = int(group["query/emb"].shape[1])
        info["query_dtype"] = str(group["query/emb"].dtype)
        info["gallery_dtype"] = str(group["gallery/emb"].dtype)
    return info


def cap_max_rank(max_rank: int, n_gallery: int) -> tuple[int, str | None]:
    """(the CMC curve's length, a warning or None): at most max(G, 50).

    No query can have its first relevant item at a rank above G, so
    cmc[k] = cmc[G] for every k > G: a longer curve adds nothing but rows
    (--max-rank 20000000 over 2,000 items wrote 85 MB and used 7 GB). Curves
    up to the default length 50 are kept as asked even for tiny galleries, so
    k = 1..max_rank holds for every ordinary request.
    """
    cap = max(int(n_gallery), Options.max_rank)
    if max_rank <= cap:
        return max_rank, None
    return cap, (f"--max-rank {max_rank} is more than the {n_gallery} gallery items: the CMC curve stops at "
                 f"rank {cap} (it cannot rise beyond the gallery size)")


def plan_chunks(n_queries: int, chunk_rows: int, n_workers: int = 1) -> list[tuple[int, int]]:
    """Query ranges for the tasks: whole query tiles (TILE_ROWS), balanced across the workers.

    At most ``chunk_rows`` (the Zarr chunk, rounded up to whole tiles) per
    task; the number of tasks is a multiple of the worker count (at least two
    per worker while there are tiles to share) and task sizes differ by at
    most one tile, so no worker is left with the long tail. A tile is never
    split between tasks (its product would be computed twice).
    """
    if n_queries == 0:
        return []
    n_tiles = -(-n_queries // TILE_ROWS)
    max_tiles = max(1, -(-chunk_rows // TILE_ROWS))
    n_tasks = max(-(-n_tiles // max_tiles), 2 * n_workers)
    n_tasks = -(-n_tasks // n_workers) * n_workers
    n_tasks = min(n_tasks, n_tiles)
    base, extra = divmod(n_tiles, n_tasks)
    edges = [0]
    for i in range(n_tasks):
        edges.append(edges[-1] + base + (1 if i < extra else 0))
    return [(a * TILE_ROWS, min(n_queries, b * TILE_ROWS)) for a, b in zip(edges[:-1], edges[1:])]


# --------------------------------------------------------------------------- one chunk


#: gallery-side protocol arrays a worker keeps between the tasks of one run
_GALLERY_SIDE: dict = {}


def gallery_side(group, run_id: str | None, names: tuple[str, ...]) -> dict:
    """Gallery labels, cameras, junk flags and the label sort: read once per worker and run."""
    key = (run_id, names)
    if run_id and key in _GALLERY_SIDE:
        return _GALLERY_SIDE[key]
    out: dict = {name: ds.read(group, f"gallery/{name}").astype(bool if name == "junk" else np.int64)
           for name in names if ds.has(group, f"gallery/{name}")}
    if "label" in out:
        out["label_index"] = p.label_index(out["label"])
    if run_id:
        for other in [k for k in _GALLERY_SIDE if k[0] != run_id]:
            del _GALLERY_SIDE[other]
        _GALLERY_SIDE[key] = out
    return out


def load_truth(group, options: Options, q0: int, q1: int, n_gallery: int, run_id: str | None = None) -> p.Truth:
    """The protocol's relevant and junk sets for queries q0..q1 (reads, then pure code)."""
    rows = slice(q0, q1)
    if options.protocol in ("class", "reid"):
        g = gallery_side(group, run_id, ("label", "cam", "junk"))
        ql = ds.read(group, "query/label", rows).astype(np.int64)
        if options.protocol == "class":
            return p.class_truth(ql, g["label"], g.get("junk"), index=g["label_index"])
        return p.reid_truth(ql, ds.read(group, "query/cam", rows).astype(np.int64), g["label"], g["cam"],
                            g.get("junk"), index=g["label_index"])
    gallery_junk = gallery_side(group, run_id, ("junk",)).get("junk")

    return truth_io.load(group, options, q0, q1, n_gallery, gallery_junk)


def _keys(group, side: str, idx: np.ndarray) -> list:
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


def rank_chunk(group, options: Options, info: dict, truth: p.Truth, q0: int, q1: int, pool=None) -> Ranked:
    """Relevant ranks for one chunk, from embeddings or from precomputed lists."""
    gallery_junk = gallery_side(group, info.get("run_id"), ("junk",)).get("junk")
    if info["ranked_by"] == "ranking/item":
        items = ds.read(group, "ranking/item", slice(q0, q1)).astype(np.int64)
        scores = ds.read(group, "ranking/score", slice(q0, q1)) if ds.has(group, "ranking/score") else None
        return rank_by_lists(items, scores, truth, gallery_junk, ties=options.ties, q0=q0)
    if truth.allowed_indptr is not None:

        return truth_io.rank_among_allowed(group, options, truth, q0, q1)
    query, gallery = chunk_inputs(group, options, q0, q1, info, cache=True)
    split = {} if pool is None else {"parts": pool._max_workers, "map_fn": pool.map}
    return rank_by_embeddings(query, q0, truth, gallery, n_query=info["n_queries"], similarity=options.similarity,
                              ties=options.ties, gallery_junk=gallery_junk, **split)


def chunk_inputs(group, options: Options, q0: int, q1: int, info: dict, span=None, cache: bool = False):
    """The chunk's query rows (checked for NaN/Inf/zero) and a reader of its gallery (or shard)."""
    query = ds.read_array(group["query/emb"], "query/emb", slice(q0, q1))
    norms = row_norms(query)
    problems = ds.check_embeddings("query/emb", q0, query, options.similarity == "cosine", norms=norms)
    if problems:
        raise InputError(problems[0])
    budget = info.get("cache_bytes", 0) if cache else 0
    gallery = GalleryBlocks(group, options.similarity, info.get("run_id"), budget, span=span)
    gallery.query_norms = (q0, norms)  # dot: each gallery block is checked against these for float32 overflow
    return query, gallery


#: normalised gallery blocks kept by a worker process between the tasks of one run
_BLOCK_CACHE: dict = {}


class GalleryBlocks:
    """Normalised float32 gallery rows, read from Zarr a block at a time.

    A block is a whole number of score tiles and, where chunks are not huge,
    of Zarr chunks, so every byte is decompressed once per read. Within one
    run (``run_id``) a worker keeps the blocks it has read while they fit
    ``cache_bytes``, so its next task does not read them again; a new run
    starts afresh, so a rewritten dataset is never served stale. Rows are
    checked (NaN/Inf, zero vectors under cosine) as they are first read.
    """

    def __init__(self, group, similarity: str, run_id: str | None = None, cache_bytes: int = 0,
                 block_bytes: int = 64 << 20, span: tuple[int, int] | None = None):
        self.array = group["gallery/emb"]
        self.similarity = similarity
        self.query_norms: tuple[int, np.ndarray] | None = None
        self.n_rows, dims = self.array.shape
        tiles = max(1, block_bytes // (TILE_COLS * dims * 4))
        chunk = self.array.chunks[0]
        if chunk * dims * 4 <= 4 * block_bytes:
            tiles = max(tiles, -(-chunk // TILE_COLS))
        self.block_rows = tiles * TILE_COLS
        # what a task reads: the whole gallery, or its shard; cached while that fits the budget
        span = span or (0, self.n_rows)
        fits = cache_bytes and (span[1] - span[0]) * dims * 4 <= cache_bytes
        self.cache: dict | None = None
        if fits and run_id:
            key = (run_id, span)
            for other in [k for k in _BLOCK_CACHE if k != key]:
                del _BLOCK_CACHE[other]  # one run, one shard at a time: memory stays within the budget
            self.cache = _BLOCK_CACHE.setdefault(key, {})

    @property
    def whole(self) -> np.ndarray | None:
        """All rows as one normalised array, when ``prefetch`` read them into one (else None)."""
        return None if self.cache is None else self.cache.get("whole")

    def prefetch(self, map_fn=map) -> None:
        """Read and normalise every block into one contiguous array, the blocks as views of it."""
        if self.cache is None or "whole" in self.cache:
            return
        whole = np.empty((self.n_rows, self.array.shape[1]), dtype=np.float32)
        # _read caches each block: a view of ``whole``, normalised in place
        list(map_fn(lambda g0: self._read(g0, into=whole[g0:g0 + self.block_rows]),
                    range(0, self.n_rows, self.block_rows)))
        self.cache["whole"] = whole

    def _read(self, g0: int, into: np.ndarray | None = None) -> np.ndarray:
        if self.cache is not None and g0 in self.cache:
            self._check_dot(g0, self.cache[("norms", g0)])  # a cached block meets this task's queries too
            return self.cache[g0]
        raw = ds.read_array(self.array, "gallery/emb", slice(g0, g0 + self.block_rows))
        if into is not None:
            into[...] = raw  # float16 is upcast on the way
            raw = into
        elif raw.dtype != np.float32:
            raw = raw.astype(np.float32)  # float16 products are slow in numpy: upcast the block once
        norms = row_norms(raw)
        problems = ds.check_embeddings("gallery/emb", g0, raw, self.similarity == "cosine", norms=norms)
        if problems:
            raise InputError(problems[0])
        self._check_dot(g0, norms)
        block = normalize_rows(raw, self.similarity, norms=norms, copy=False)
        if self.cache is not None:
            self.cache[g0] = block
            self.cache[("norms", g0)] = norms
        return block

    def _check_dot(self, g0: int, norms: np.ndarray) -> None:
        """Under dot: InputError when a row of this block times a query row can overflow float32."""
        if self.similarity == "dot" and self.query_norms is not None:
            problems = dot_overflow_problems(*self.query_norms, g0, norms, self.array.shape[1])
            if problems:
                raise InputError(problems[0])

    def blocks(self, start: int = 0, stop: int | None = None):
        """(g0, normalised rows g0..) covering rows start..stop; ``start`` is tile-aligned."""
        stop = self.n_rows if stop is None else min(stop, self.n_rows)
        first = (start // self.block_rows) * self.block_rows
        for b0 in range(first, stop, self.block_rows):
            block = self._read(b0)
            a, z = max(start, b0) - b0, min(stop, b0 + self.block_rows) - b0
            yield b0 + a, block[a:z]

    def rows(self, idx: np.ndarray) -> np.ndarray:
        """Rows at sorted indices ``idx``: taken from cached blocks, else read directly."""
        if self.cache is None:
            return normalize_rows(ds.read_array(self.array, "gallery/emb", idx), self.similarity)
        out = np.empty((len(idx), self.array.shape[1]), dtype=np.float32)
        bounds = np.searchsorted(idx, np.arange(0, self.n_rows + self.block_rows, self.block_rows))
        for b, (a, z) in enumerate(zip(bounds[:-1], bounds[1:])):
            if z > a:
                g0 = b * self.block_rows
                np.take(self._read(g0), idx[a:z] - g0, axis=0, out=out[a:z])
        return out


def dot_overflow_problems(q0: int, query_norms: np.ndarray, g0: int, gallery_norms: np.ndarray,
                          dims: int) -> list[str]:
    """Under dot: the query and gallery rows whose products can overflow float32, as one message."""
    q_rows, g_rows = dot_overflow_rows(query_norms, gallery_norms, dims)
    if not g_rows.size:
        return []
    return [ds.dot_overflow_message(q_rows + q0, query_norms[q_rows].max(), g_rows + g0,
                                    gallery_norms[g_rows].max())]


# --------------------------------------------------------------------------- sharded gallery
#
# When the gallery is larger than what a worker should hold, a chunk becomes
# one small task (relevant sets and threshold bands), one task per gallery
# shard (a scan of that shard's tiles), and one task that adds the shards'
# counts and writes the rows. Shards are whole blocks of whole tiles, so
# every score is the same number as in an unsharded run.


def shard_bounds(n_gallery: int, block_rows: int, shards: int) -> list[tuple[int, int]]:
    """Gallery ranges of whole blocks (whole tiles if there are fewer blocks than shards)."""
    unit = block_rows if -(-n_gallery // block_rows) >= shards else TILE_COLS
    n_units = -(-n_gallery // unit)
    shards = max(1, min(shards, n_units))
    edges = [round(i * n_units / shards) * unit for i in range(shards + 1)]
    return [(a, min(b, n_gallery)) for a, b in zip(edges[:-1], edges[1:]) if a < b]


def _open_chunk(path, options, q0, q1, storage_options, info, span=None):
    """Dataset, normalised query rows and gallery reader; a shard's reader keeps its blocks."""
    group = ds.open_dataset(path, storage_options)
    query, gallery = chunk_inputs(group, options, q0, q1, info, span=span, cache=span is not None)
    return group, normalize_rows(query, options.similarity), gallery


def chunk_truth(path: str, options: Options, q0: int, q1: int, storage_options, info: dict):
    """Task: the chunk's relevant and junk sets, or an input error as a value."""
    try:
        group = ds.open_dataset(path, storage_options)
        return load_truth(group, options, q0, q1, info["n_gallery"], info.get("run_id"))
    except InputError as exc:
        return InputError(str(exc))


def shard_bands(path: str, options: Options, q0: int, q1: int, s0: int, s1: int, storage_options, info: dict,
                truth):
    """Task: threshold bands of the chunk's relevant pairs whose item lies in gallery rows s0..s1.

    Done per shard so the rows come from the shard a worker already holds,
    not from scattered reads of the whole gallery.
    """
    from evalcore.core.ranking import threshold_bounds

    if isinstance(truth, InputError):
        return truth
    try:
        _, qn, gallery = _open_chunk(path, options, q0, q1, storage_options, info, span=(s0, s1))
        pairs = np.nonzero((truth.rel_items >= s0) & (truth.rel_items < s1))[0]
        return pairs, *threshold_bounds(qn, truth, gallery, pairs)
    except InputError as exc:
        return InputError(str(exc))


def _gather_bands(truth, bands) -> tuple[np.ndarray, np.ndarray]:
    lo = np.empty(len(truth.rel_items), dtype=np.float32)
    hi = np.empty(len(truth.rel_items), dtype=np.float32)
    for pairs, part_lo, part_hi in bands:
        lo[pairs], hi[pairs] = part_lo, part_hi
    return lo, hi


def scan_shard(path: str, options: Options, q0: int, q1: int, s0: int, s1: int, storage_options, info: dict,
               truth, *bands):
    """Task: the chunk's tile states over gallery rows s0..s1 (bands of every shard given)."""
    from evalcore.core.ranking import new_states, query_tiles, scan_gallery

    errors = [x for x in (truth, *bands) if isinstance(x, InputError)]
    if errors:
        return errors[0]
    try:
        group, qn, gallery = _open_chunk(path, options, q0, q1, storage_options, info, span=(s0, s1))
        gallery_junk = gallery_side(group, info.get("run_id"), ("junk",)).get("junk")
        tiles = query_tiles(qn, q0, info["n_queries"])
        states = new_states(tiles, q0, truth, *_gather_bands(truth, bands))
        scan_gallery(tiles, states, gallery.blocks(s0, s1), gallery_junk)
        return states
    except InputError as exc:
        return InputError(str(exc))


def combine_shards(path: str, options: Options, q0: int, q1: int, storage_options, info: dict, truth, *parts):
    """Task: add the shards' states and write the chunk's per-query rows."""
    from evalcore.core.ranking import finish_states, merge_states

    started = time.perf_counter()
    errors = [x for x in (truth, *parts) if isinstance(x, InputError)]
    if errors:
        return None, {"q0": q0, "q1": q1, "input_error": str(errors[0]), "near_ties": 0, "seconds": 0.0}
    ranked = finish_states(merge_states(list(parts)), truth, options.ties)
    try:
        group = ds.open_dataset(path, storage_options)
        table = per_query_table(group, options, truth, ranked, q0, q1)
    except InputError as exc:
        return None, {"q0": q0, "q1": q1, "input_error": str(exc), "near_ties": 0, "seconds": 0.0}
    return table, {"q0": q0, "q1": q1, "near_ties": ranked.near_ties, "shards": len(parts),
                   "seconds": time.perf_counter() - started}


def submit_chunks(client, path, options, chunks, storage_options, info, shards) -> list:
    """Futures of every chunk's (table, stats): one task each, or a small graph over gallery shards.

    Sharded work is submitted shard by shard (earlier submissions run first):
    the bands of every chunk in shard 1, 2, ..., then the scans from the last
    shard back to the first, so a worker goes through one shard for many
    chunks while that shard sits in its cache.
    """
    run = info["run_id"][:8]
    if shards is None:
        return [client.submit(evaluate_chunk, path, options, q0, q1, storage_options, info,
                              key=f"evalcore-chunk-{q0}-{q1}-{run}", retries=3, pure=False) for q0, q1 in chunks]
    submit = lambda fn, name, *args: client.submit(fn, path, options, *args, key=f"evalcore-{name}-{run}",  # noqa: E731
                                                   retries=3, pure=False)
    truths = [submit(chunk_truth, f"truth-{q0}-{q1}", q0, q1, storage_options, info) for q0, q1 in chunks]
    bands = [[submit(shard_bands, f"bands-{q0}-{q1}-{s0}-{s1}", q0, q1, s0, s1, storage_options, info, truth)
              for (q0, q1), truth in zip(chunks, truths)] for s0, s1 in shards]
    scans = {}
    for k in reversed(range(len(shards))):
        s0, s1 = shards[k]
        for i, (q0, q1) in enumerate(chunks):
            scans[k, i] = submit(scan_shard, f"scan-{q0}-{q1}-{s0}-{s1}", q0, q1, s0, s1, storage_options, info, truths[i],
                                 *[bands[j][i] for j in range(len(shards))])
    return [submit(combine_shards, f"combine-{q0}-{q1}", q0, q1, storage_options, info, truths[i],
                   *[scans[k, i] for k in range(len(shards))]) for i, (q0, q1) in enumerate(chunks)]


def run_here(source, options, chunks, storage_options, info, shards, threads: int, results: list,
             on_chunk=None) -> None:
    """Run every chunk in this process, on ``threads`` threads, into ``results`` (in chunk order).

    BLAS is held to one thread for the whole run: the grid's exactness needs
    it, and the chunks are the parallelism. With more than one thread and an
    unsharded gallery that fits the cache, the gallery blocks are read and
    normalised first, in parallel, so every thread then shares one copy.
    """
    from threadpoolctl import threadpool_limits

    def finished(i: int, result, done: int) -> None:
        results[i] = result
        _raise_input_error(result[1])
        if on_chunk:
            on_chunk(result[1], done, len(chunks))

    with threadpool_limits(limits=1, user_api="blas"):
        if threads <= 1:
            for i, (q0, q1) in enumerate(chunks):
                finished(i, run_chunk_here(source, options, q0, q1, storage_options, info, shards), i + 1)
            return
        from concurrent.futures import ThreadPoolExecutor, as_completed

        with ThreadPoolExecutor(threads, thread_name_prefix="evalcore") as pool:
            if shards is None and info["ranked_by"] == "embeddings" and not options.judged_only:
                # chunks one after another, each scan split over the threads by gallery columns:
                # the threads finish together, however few chunks there are
                prefetch_gallery(pool, source, options, storage_options, info)
                for i, (q0, q1) in enumerate(chunks):
                    finished(i, evaluate_chunk(source, options, q0, q1, storage_options, info, pool=pool), i + 1)
                return
            futures = {pool.submit(run_chunk_here, source, options, q0, q1, storage_options, info, shards): i
                       for i, (q0, q1) in enumerate(chunks)}
            try:
                for done, future in enumerate(as_completed(futures), start=1):
                    finished(futures[future], future.result(), done)
            except BaseException:
                for future in futures:
                    future.cancel()
                raise


def prefetch_gallery(pool, source, options, storage_options, info) -> None:
    """Read and normalise the gallery blocks into the run's cache, a block per thread, when they fit."""
    group = ds.open_dataset(source, storage_options)
    GalleryBlocks(group, options.similarity, info["run_id"], info.get("cache_bytes", 0)).prefetch(pool.map)


def forget_run(run_id: str) -> None:
    """Drop what this process kept for a run (gallery blocks, gallery-side arrays): it has ended."""
    for cache in (_BLOCK_CACHE, _GALLERY_SIDE):
        for key in [k for k in cache if k[0] == run_id]:
            cache.pop(key, None)


def run_chunk_here(path, options, q0, q1, storage_options, info, shards):
    """The same work without a cluster, one piece after another."""
    if shards is None:
        return evaluate_chunk(path, options, q0, q1, storage_options, info)
    truth = chunk_truth(path, options, q0, q1, storage_options, info)
    bands = [shard_bands(path, options, q0, q1, s0, s1, storage_options, info, truth) for s0, s1 in shards]
    parts = [scan_shard(path, options, q0, q1, s0, s1, storage_options, info, truth, *bands) for s0, s1 in shards]
    return combine_shards(path, options, q0, q1, storage_options, info, truth, *parts)


def plan_shards(group, info: dict, gallery_shards: int | None) -> list[tuple[int, int]] | None:
    """Gallery shards: as asked, or as many as keep each under a worker's gallery budget."""
    if info["ranked_by"] != "embeddings":
        return None
    gallery = group["gallery/emb"]
    bytes_needed = info["n_gallery"] * gallery.shape[1] * 4
    if gallery_shards is None:
        budget = info.get("cache_bytes") or 0
        gallery_shards = -(-bytes_needed // budget) if budget and bytes_needed > budget else 1
    if gallery_shards <= 1:
        return None
    block_rows = GalleryBlocks(group, "dot").block_rows
    return shard_bounds(info["n_gallery"], block_rows, gallery_shards)


def evaluate_chunk(path: str, options: Options, q0: int, q1: int, storage_options: dict | None = None,
                   info: dict | None = None, pool=None) -> tuple[pa.Table, dict]:
    """The task: per-query rows for queries q0..q1 and a few counters (``pool``: threads that split the scan)."""
    started = time.perf_counter()
    try:
        group = ds.open_dataset(path, storage_options)
        info = info or describe(group, options)
        truth = load_truth(group, options, q0, q1, info["n_gallery"], info.get("run_id"))
        ranked = rank_chunk(group, options, info, truth, q0, q1, pool)
        table = per_query_table(group, options, truth, ranked, q0, q1)
    except InputError as exc:  # returned, not raised: a retry would not make the data any better
        return None, {"q0": q0, "q1": q1, "input_error": str(exc), "near_ties": 0,
                      "seconds": time.perf_counter() - started}
    stats = {"q0": q0, "q1": q1, "near_ties": ranked.near_ties, "seconds": time.perf_counter() - started}
    return table, stats


def per_query_table(group, options: Options, truth: p.Truth, ranked: Ranked, q0: int, q1: int) -> pa.Table:
    """The per_query.parquet rows of one chunk, in query order."""
    n = q1 - q0
    r = ranked
    cols: dict[str, pa.Array] = {"query": pa.array(np.arange(q0, q1, dtype=np.int64))}
    cols["key"] = pa.array(_keys(group, "query", np.arange(q0, q1)), pa.string())
    if ds.has(group, "query/label"):
        cols["label"] = pa.array(ds.read(group, "query/label", slice(q0, q1)).astype(np.int64))
    if ds.has(group, "query/group"):
        cols["group"] = pa.array([str(x) for x in ds.read(group, "query/group", slice(q0, q1))], pa.string())
    cols["n_relevant"] = pa.array(r.n_relevant.astype(np.int64))
    cols["n_junk"] = pa.array(truth.n_junk.astype(np.int64))
    zero_empty = truth.columns["n_judged"] > 0 if options.empty_queries == "zero" else None
    values = m.per_query_metrics(r.indptr, r.ranks, r.n_relevant, options.ks, options.map_at, zero_empty)
    for name, v in values.items():
        if name in ("first_rank", "last_rank"):
            cols[name] = _nullable(v.astype(np.int64), v < 0)
        else:
            cols[name] = _nullable(v.astype(np.float64), np.isnan(v))
    cols["top1"] = _nullable(r.top1, r.top1 < 0)  # top1_key is added once, on the driver
    cols["top1_score"] = _nullable(r.top1_score, np.isnan(r.top1_score))
    cols["relevant_score"] = _nullable(r.relevant_score, np.isnan(r.relevant_score))
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
    if "gt_distance" in truth.columns:

        d = truth_io.top1_distance(group, options, q0, q1, r.top1)
        cols["top1_distance"] = _nullable(d, np.isnan(d))
    assert all(len(a) == n for a in cols.values())
    return pa.table(cols)


# --------------------------------------------------------------------------- reduce


def add_top1_keys(group, per_query: pa.Table) -> pa.Table:
    """Insert ``top1_key`` after ``top1``: one read of the gallery keys for the whole run."""
    top1 = per_query.column("top1").fill_null(-1).to_numpy()
    keys = pa.array(_keys(group, "gallery", top1), pa.string())
    return per_query.add_column(per_query.column_names.index("top1") + 1, "top1_key", keys)


def metric_columns(per_query: pa.Table) -> list[str]:
    return [c for c in per_query.column_names if m.summary_column(c) is not None]


def summarize(per_query: pa.Table, options: Options) -> tuple[pa.Table, pa.Table]:
    """summary.parquet (group "all", then one row per query/group) and cmc.parquet."""
    names = metric_columns(per_query)
    columns = {c: per_query.column(c).to_numpy(zero_copy_only=False).astype(np.float64) for c in names}
    n_relevant = per_query.column("n_relevant").to_numpy()
    counted = counted_queries(per_query, options)
    first = per_query.column("first_rank").fill_null(-1).to_numpy()
    outcome = (np.asarray(per_query.column("outcome").to_pylist(), dtype=object)
               if "outcome" in per_query.column_names else None)
    groups = [("all", np.ones(len(n_relevant), dtype=bool))]
    if "group" in per_query.column_names:
        labels = np.asarray(per_query.column("group").to_pylist(), dtype=object)
        groups += [(g, labels == g) for g in sorted(set(labels.tolist()))]
    rows: list[dict] = []
    cmc_rows: dict[str, list] = {"group": [], "k": [], "cmc": []}
    for name, sel in groups:
        row = {"group": name}
        row.update(m.summary_row({c: v[sel] for c, v in columns.items()}, n_relevant[sel], names,
                                 None if outcome is None else outcome[sel], options.threshold, counted[sel]))
        rows.append(row)
        curve = m.cmc_curve(first[sel], n_relevant[sel], options.max_rank, counted[sel])
        cmc_rows["group"] += [name] * options.max_rank
        cmc_rows["k"] += list(range(1, options.max_rank + 1))
        cmc_rows["cmc"] += [None if math.isnan(x) else float(x) for x in curve]
    summary = pa.Table.from_pylist(rows, schema=_summary_schema(rows))
    cmc = pa.table({"group": pa.array(cmc_rows["group"], pa.string()), "k": pa.array(cmc_rows["k"], pa.int64()),
                    "cmc": pa.array(cmc_rows["cmc"], pa.float64())})
    return summary, cmc


def counted_queries(per_query: pa.Table, options: Options) -> np.ndarray:
    """Queries in the means: R > 0, and under ``--empty-queries zero`` a judged query with R = 0 too."""
    counted = per_query.column("n_relevant").to_numpy() > 0
    if options.empty_queries == "zero" and "n_judged" in per_query.column_names:
        counted |= per_query.column("n_judged").to_numpy() > 0
    return counted


def _summary_schema(rows: list[dict]) -> pa.Schema:
    fields = []
    for name in rows[0]:
        if name == "group":
            fields.append(pa.field(name, pa.string()))
        elif name in ("n_queries", "n_evaluated", "n_unknown", "tp", "fp", "fn", "tn"):
            fields.append(pa.field(name, pa.int64()))
        else:
            fields.append(pa.field(name, pa.float64()))
    return pa.schema(fields)


def evaluate(path, options: Options = Options(), *, client=None, threads: int = 1,
             storage_options: dict | None = None, chunk_rows: int | None = None, gallery_shards: int | None = None,
             on_chunk: Callable[[dict, int, int], None] | None = None) -> Result:
    """Evaluate a dataset: the three report tables as pyarrow Tables, plus run information.

    ``path`` is a path or URL, or an open ``zarr.Group`` (an in-memory one
    included). Without ``client`` the chunks run here: on ``threads`` threads
    of this process that share one normalised copy of the gallery (the kernel
    and BLAS release the GIL), each with one BLAS thread. With a
    ``distributed.Client`` each chunk is one task (retried if a worker dies),
    or, when the gallery is larger than a worker's share of memory (or
    ``gallery_shards`` says so), a task per (chunk, gallery shard) whose
    counts are added. ``on_chunk(stats, done, total)`` is called as chunks finish.
    """
    options = options.checked()
    started = time.perf_counter()
    group = ds.open_dataset(path, storage_options)
    source = group if isinstance(path, zarr.Group) else str(path)
    info = describe(group, options)
    max_rank, capped = cap_max_rank(options.max_rank, info["n_gallery"])
    options = replace(options, max_rank=max_rank)
    # structure here, once; embedding values are checked by the tasks as they read them
    problems = validate_dataset(group, options.protocol, similarity=options.similarity, judged_only=options.judged_only,
                           scan_values=False)
    problems.raise_if_any()
    info["run_id"] = uuid.uuid4().hex
    info["cache_bytes"] = cache_budget(client)
    zarr_rows = ds.array(group, "ranking/item" if info["ranked_by"] == "ranking/item" else "query/emb").chunks[0]
    n_workers = len(client.scheduler_info()["workers"]) if client is not None else 1
    # no worker yet (still starting, or all gone): plan for one; the cluster's watch gives up if none comes
    chunks = plan_chunks(info["n_queries"], chunk_rows or zarr_rows, max(1, n_workers))
    shards = plan_shards(group, info, gallery_shards)
    info["gallery_shards"] = [list(x) for x in shards] if shards else None
    validated = time.perf_counter()
    results: list = [None] * len(chunks)
    if client is None:
        try:
            run_here(source, options, chunks, storage_options, info, shards, max(1, threads), results, on_chunk)
        finally:
            forget_run(info["run_id"])
    else:
        from distributed import as_completed

        if isinstance(source, zarr.Group):  # arrays in memory: one copy per worker, not one per task
            source = client.scatter(source, broadcast=True, hash=False)
        futures = submit_chunks(client, source, options, chunks, storage_options, info, shards)
        index = {f.key: i for i, f in enumerate(futures)}
        for done, future in enumerate(as_completed(futures), start=1):
            results[index[future.key]] = future.result()
            if "input_error" in results[index[future.key]][1]:
                client.cancel(futures)
                _raise_input_error(results[index[future.key]][1])
            if on_chunk:
                on_chunk(results[index[future.key]][1], done, len(chunks))
            future.release()
    ranked = time.perf_counter()
    per_query = pa.concat_tables([t for t, _ in results]) if results else _empty_per_query(options)
    if "top1" in per_query.column_names:
        per_query = add_top1_keys(group, per_query)
    summary, cmc = summarize(per_query, options)
    finished = time.perf_counter()
    stats = [s for _, s in results]
    info.update({
        "options": asdict(options),
        "dataset": "<in memory>" if isinstance(path, zarr.Group) else str(path),
        "fingerprint": ds.fingerprint(group),
        "chunks": [[s["q0"], s["q1"]] for s in stats],
        "counts": {"queries": info["n_queries"], "gallery": info["n_gallery"],
                   "known": int(summary.column("n_evaluated")[0].as_py()),
                   "unknown": int(summary.column("n_unknown")[0].as_py())},
        "scores": score_note(info, options),
        "near_ties_resolved": int(sum(s["near_ties"] for s in stats)),
        "warnings": run_warnings(per_query, options) + ([capped] if capped else []),
        "timings": {"validate_s": validated - started, "rank_s": ranked - validated,
                    "reduce_s": finished - ranked, "total_s": finished - started,
                    "chunk_s": [round(s["seconds"], 4) for s in stats]},
        "workers": n_workers,
    })
    return Result(per_query, summary, cmc, info)


def run_warnings(per_query: pa.Table, options: Options) -> list[str]:
    """What a reader of the summary should know: queries left out of the means, and why."""
    out = []
    n_relevant = per_query.column("n_relevant").to_numpy()
    unknown = int((n_relevant == 0).sum())
    zeroed = int(((n_relevant == 0) & counted_queries(per_query, options)).sum())
    if zeroed:
        out.append(f"{zeroed} judged queries have no relevant item: they count with every metric 0 "
                   "(--empty-queries zero)")
        unknown -= zeroed
    if unknown:
        out.append(f"{unknown} of {len(n_relevant)} queries have no relevant gallery item (unknown, open set): "
                   "their metrics are null and they are left out of every mean"
                   + ("" if options.threshold is not None else "; pass --threshold to score them as open-set queries")
                   + _judged_empty_note(per_query, options))
    if "first_rank" in per_query.column_names:
        unranked = int(((n_relevant > 0) & per_query.column("first_rank").is_null().to_numpy(zero_copy_only=False)).sum())
        if unranked:
            out.append(f"{unranked} known queries have no relevant item in their ranking lists: rr, hit and ap are 0")
    return out


def _judged_empty_note(per_query: pa.Table, options: Options) -> str:
    """Under qrels/skip: how many left-out queries trec_eval would count as 0."""
    if options.empty_queries != "skip" or "n_judged" not in per_query.column_names:
        return ""
    judged = int(((per_query.column("n_relevant").to_numpy() == 0) & (per_query.column("n_judged").to_numpy() > 0)).sum())
    return f"; {judged} of them are judged, which trec_eval counts as 0 (--empty-queries zero)" if judged else ""


def _raise_input_error(stats: dict) -> None:
    if "input_error" in stats:
        raise InputError(stats["input_error"])


def cache_budget(client) -> int:
    """Bytes of normalised gallery a worker may keep between tasks: a third of its memory limit."""
    limit = 0
    if client is not None:
        limits = [w.get("memory_limit") or 0 for w in client.scheduler_info()["workers"].values()]
        limit = min(limits) if limits else 0
    if not limit:
        try:
            import psutil

            limit = psutil.virtual_memory().total // 4
        except ImportError:  # pragma: no cover
            limit = 1 << 30
    return int(limit // 3)


def score_note(info: dict, options: Options) -> str:
    """How scores were computed, for run.json (README, How it works: the tile grid)."""
    if info["ranked_by"] == "ranking/item":
        if info.get("list_scores"):
            return (f"given: ranking/item order; items of equal ranking/score (as float32) form tie groups, "
                    f"each ordered {options.ties} (--ties) whatever order the list gives")
        return "given: ranking/item order as it stands (no ranking/score, so ties cannot be seen; --ties does not apply)"
    if options.judged_only:
        return ("judged-only: per (query, judged item) pair, float64 dot product of the normalised float32 rows "
                "summed in dimension order, rounded to float32")
    how = "cosine: rows L2-normalised in float64, stored as float32" if options.similarity == "cosine" \
        else "dot: raw inner product of float32 rows"
    return (f"{how}; scores are float32 BLAS products on a fixed {TILE_ROWS}x{TILE_COLS} tile grid with one "
            "BLAS thread, so each (query, gallery) score is one number whatever the chunking; relevant and "
            "non-relevant scores come from the same tiles")


def _empty_per_query(options: Options) -> pa.Table:
    """The per-query table of a dataset without queries: the columns, no rows."""
    cols = {"query": pa.array([], pa.int64()), "key": pa.array([], pa.string()),
            "n_relevant": pa.array([], pa.int64()), "n_junk": pa.array([], pa.int64())}
    none = np.zeros(1, np.int64)
    for name in m.per_query_metrics(none, np.empty(0, np.int64), none[:0], options.ks, options.map_at):
        cols[name] = pa.array([], pa.int64() if name.endswith("_rank") else pa.float64())
    cols["top1_score"] = pa.array([], pa.float64())
    return pa.table(cols)
