"""The scan backend interface: what ranks a chunk of queries against the gallery, whatever makes the scores.

Every backend works the same way (README, How it works: "Ranks are counts"):

1. ``thresholds``: the score of each query's relevant pairs (CSR order of
   the chunk's ``Truth``), before the scan; a subset of pairs when a gallery
   shard holds only some of the items;
2. ``new_states``: empty per-query states (counts of negatives beating each
   threshold, and the rank-1 candidate);
3. ``scan``: fold the gallery columns ``start .. stop`` into the states;
   states of disjoint column ranges are independent;
4. ``merge``: states of the same queries over disjoint column ranges, added;
5. ``finish``: exact ranks, rank 1 and the reported scores, as a ``Ranked``.

The engine calls nothing else: the in-process column split (``rank`` with
``threads``) and the sharded task graph (thresholds per shard, a scan per
shard, one merge and finish) run any backend. Backends are registered by name
in ``evalcore.core.scan.BACKENDS``; a new one (a GPU scan, a top-k search) is
one module there plus its entry.

What a backend scans is its ``source``, read by gallery columns: for the
embedding backends a ``Gallery`` (normalised rows, block by block), for
given scores a ``ScoreSource`` (the chunk's rows of the score matrix).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np

from evalcore.core.protocols import Truth

#: the fixed tile grid: query rows x gallery columns per product and fold (README, How it works: the tile grid)
TILE_ROWS = 512
TILE_COLS = 4096
#: the granule of the column ranges threads split a scan into (``column_spans``)
SPAN_COLS = 256

Span = tuple[int, int]


@dataclass
class Ranked:
    """What the metrics need, for the queries of one chunk.

    ``ranks[indptr[i]:indptr[i+1]]`` are query i's relevant ranks r_1 < r_2 < ...
    (only the ranked ones for precomputed lists); ``n_relevant`` is R.
    """

    indptr: np.ndarray
    ranks: np.ndarray
    n_relevant: np.ndarray
    top1: np.ndarray          # gallery index of rank 1, -1 if nothing is ranked
    top1_score: np.ndarray    # float64, NaN if unknown
    relevant_score: np.ndarray  # best score of a relevant item, NaN if none
    near_ties: int = 0        # negatives whose estimate left a comparison open, settled canonically
    rerank_distance: np.ndarray | None = None  # re-ranked runs: rank 1's final distance (NaN if none)
    #: for each rank, the relevant pair it belongs to (index into the chunk's ``Truth.rel_items``), so gains
    #: follow their items; None: the pairs in CSR order (every relevant item ranked, equal gains)
    pairs: np.ndarray | None = None
    #: for each rank, the judged not-relevant items (grade 0) ranked above it; None where the ranking
    #: cannot tell (a scan of the whole gallery)
    judged_before: np.ndarray | None = None
    #: per query, the items its ranking holds (a list's kept entries: trec_eval's num_ret before -M); None
    #: for a scan of the whole gallery
    n_retrieved: np.ndarray | None = None
    #: (indptr, places): per query, the places of its judged not-relevant items (grade 0) in its ranking,
    #: ascending, CSR; None where the ranking cannot tell (a scan of the whole gallery)
    nonrel_ranks: tuple[np.ndarray, np.ndarray] | None = None
    #: (first place, size) of each relevant rank's tie group (equal scores), aligned with ``ranks``; None
    #: where the ranking does not say (a scan; a list without scores)
    tie_groups: tuple[np.ndarray, np.ndarray] | None = None
    #: for each rank, the items in the pool but not judged (qrels -2) ranked above it (infAP); None: none known
    pool_before: np.ndarray | None = None


# --------------------------------------------------------------------------- what a backend scans


class Columns(Protocol):
    """Anything a scan walks by gallery columns: ``n_rows`` gallery items, read in blocks."""

    @property
    def n_rows(self) -> int: ...

    def blocks(self, start: int = 0, stop: int | None = None) -> Iterator[tuple[int, np.ndarray]]:
        """``(g0, block)`` in order, covering gallery items ``start .. stop`` (``start`` a multiple of
        TILE_COLS; no arguments: the whole gallery)."""
        ...


class Gallery(Columns, Protocol):
    """Normalised float32 gallery rows (the embedding backends): ``blocks`` yields ``(g0, rows g0 ..)``
    with g0 a multiple of TILE_COLS, ``rows(idx)`` the rows at sorted indices."""

    def rows(self, idx: np.ndarray) -> np.ndarray: ...


@runtime_checkable
class WholeGallery(Protocol):
    """A gallery that may also hold all its normalised rows as one array (``whole``; None when it does not)."""

    @property
    def whole(self) -> np.ndarray | None: ...


def whole_rows(gallery: object) -> np.ndarray | None:
    """All normalised gallery rows as one array, where the gallery has them in memory, else None."""
    return gallery.whole if isinstance(gallery, WholeGallery) else None


@runtime_checkable
class DenseTileMemory(Protocol):
    """A gallery kept across chunks (``engine.gallery``) that remembers which of its tiles a scan found dense
    (most pairs undecided: a constant or collapsed submission), so later chunks start dense there."""

    @property
    def dense_tiles(self) -> set[int]: ...


def dense_tiles_of(gallery: object) -> set[int] | None:
    """The gallery's remembered dense tiles (their first columns), or None where it keeps none."""
    return gallery.dense_tiles if isinstance(gallery, DenseTileMemory) else None


class ScoreSource(Columns, Protocol):
    """One chunk's rows of a given score matrix: ``blocks`` yields ``(g0, values)`` of shape (chunk rows, width),
    finite, in the dtype given; ``values(rows, items)`` the values at (chunk row, gallery item) pairs."""

    def values(self, rows: np.ndarray, items: np.ndarray) -> np.ndarray: ...


# --------------------------------------------------------------------------- the backend


QueriesT = TypeVar("QueriesT", contravariant=True)
SourceT = TypeVar("SourceT", contravariant=True)
StatesT = TypeVar("StatesT")


class SearchBackend(Protocol[QueriesT, SourceT, StatesT]):
    """A top-k search (``core.scan.neighbors``): the same walk over columns as a ``ScanBackend``, but its states
    keep each row's nearest columns instead of counts, so it has no thresholds and finishes into lists."""

    name: str

    def new_states(self, queries: QueriesT) -> StatesT: ...

    def scan(self, queries: QueriesT, states: StatesT, source: SourceT, span: Span | None) -> None: ...

    def merge(self, parts: list[StatesT]) -> StatesT: ...

    def finish(self, queries: QueriesT, states: StatesT) -> Any: ...


class ScanBackend(Protocol[QueriesT, SourceT, StatesT]):
    """Ranks one chunk of queries by scanning gallery columns (module docstring)."""

    name: str
    #: thresholds of disjoint runs of pairs may be computed apart and joined (``pair_thresholds``)
    splits_pairs: bool

    def thresholds(self, queries: QueriesT, truth: Truth, source: SourceT,
                   pairs: np.ndarray | None = None) -> np.ndarray:
        """Scores of the relevant pairs (CSR order of ``truth``; only ``pairs``, indices into it, when given)."""
        ...

    def new_states(self, queries: QueriesT, truth: Truth, thresholds: np.ndarray, ties: str) -> StatesT:
        """Empty states of the chunk's queries, counting against ``thresholds`` (all of the chunk's pairs)."""
        ...

    def scan(self, queries: QueriesT, states: StatesT, source: SourceT, span: Span | None,
             gallery_junk: np.ndarray | None) -> None:
        """Fold gallery columns ``span`` (None: all of ``source``) into ``states``; ``gallery_junk`` columns
        take no part."""
        ...

    def merge(self, parts: list[StatesT]) -> StatesT:
        """States of the same queries over disjoint column ranges, added up."""
        ...

    def finish(self, states: StatesT, truth: Truth, ties: str) -> Ranked:
        """Exact ranks, rank 1 and the reported scores of the chunk's queries."""
        ...


def column_spans(n_gallery: int, parts: int) -> list[Span]:
    """``parts`` gallery ranges of as equal width as ``SPAN_COLS`` allows (each scanned from its first column
    on the tile grid's widths): threads that split a chunk's columns finish together. Whole tiles would
    leave one thread 3 tiles to the other's 2 on Market's 4.8, waiting 17% of every chunk."""
    units = max(1, -(-n_gallery // SPAN_COLS))
    parts = max(1, min(parts, units))
    edges = [round(i * units / parts) * SPAN_COLS for i in range(parts + 1)]
    return [(a, min(b, n_gallery)) for a, b in zip(edges[:-1], edges[1:])]


#: fewer relevant pairs than this are scored on one thread (splitting them costs more than it saves)
SPLIT_PAIRS = 8192


def pair_thresholds(backend: ScanBackend[Any, Any, Any], queries: Any, truth: Truth, source: Columns,
                    threads: int, map_fn: Callable[[Callable[[Any], Any], Iterable[Any]], Iterable[Any]]) -> np.ndarray:
    """The chunk's thresholds (``backend.thresholds``), ``threads`` runs of pairs at a time through ``map_fn``:
    a pair's score depends on its two rows only, so the split changes no number."""
    n_pairs = len(truth.rel_items)
    if threads <= 1 or n_pairs < SPLIT_PAIRS or not backend.splits_pairs:
        return backend.thresholds(queries, truth, source)
    runs = np.array_split(np.arange(n_pairs), threads)
    return np.concatenate(list(map_fn(lambda pairs: backend.thresholds(queries, truth, source, pairs), runs)))


def rank(backend: ScanBackend[Any, Any, Any], queries: Any, truth: Truth, source: Columns, *, ties: str,
         gallery_junk: np.ndarray | None = None, threads: int = 1,
         map_fn: Callable[[Callable[[Any], Any], Iterable[Any]], Iterable[Any]] = map) -> Ranked:
    """Ranks of one chunk: thresholds, then one scan of the whole gallery, or, with ``threads > 1``, that many
    column ranges scanned through ``map_fn`` (a thread pool's ``map``: products and kernels release the GIL)
    and merged, as gallery shards are; the thresholds too are split over the threads, by pairs."""
    thresholds = pair_thresholds(backend, queries, truth, source, threads, map_fn)

    def scan(span: Span | None) -> Any:
        states = backend.new_states(queries, truth, thresholds, ties)
        backend.scan(queries, states, source, span, gallery_junk)
        return states

    spans = column_spans(source.n_rows, threads) if threads > 1 else []
    states = scan(None) if len(spans) <= 1 else backend.merge(list(map_fn(scan, spans)))
    return backend.finish(states, truth, ties)
