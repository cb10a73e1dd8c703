"""The gallery as a task sees it: normalised float32 blocks read from Zarr, and its side arrays.

IO and checks at the edge of compute: every row is checked (NaN/Inf, zero
vectors under cosine, float32 overflow under dot) as it is first read, then
kept in the run's cache (``engine.cache``) while the budget allows.
"""
from __future__ import annotations

import numpy as np

from evalcore.core.ranking import dot_overflow_rows, normalize_rows, row_norms
from evalcore.engine import cache as run_caches
from evalcore.engine.plan import BLOCK_BYTES, Span, block_rows
from evalcore.errors import InputError
from evalcore.io import dataset as ds
from evalcore.io.truth import read_gallery_side


def gallery_side(group, run_id: str, names: tuple[str, ...]) -> dict:
    """Gallery labels, cameras, junk flags and the label sort: read once per worker and run."""

    if not run_id:
        return read_gallery_side(group, names)
    return run_caches.run_cache(run_id, 0).side(names, lambda: read_gallery_side(group, names))


class GalleryBlocks:
    """Normalised float32 gallery rows, read from Zarr a block at a time.

    A block is a whole number of score tiles and, where chunks are not huge,
    of Zarr chunks, so every byte is decompressed once per read. Within one
    run (``run_id``) a worker keeps the blocks of the span it reads (the whole
    gallery, or its shard) while they fit ``cache_bytes``, so its next task
    does not read them again.
    """

    def __init__(self, group, similarity: str, run_id: str = "", cache_bytes: int = 0,
                 block_bytes: int = BLOCK_BYTES, span: Span | None = None):
        self.array = group["gallery/emb"]
        self.similarity = similarity
        self.query_norms: tuple[int, np.ndarray] | None = None
        self.n_rows, dims = self.array.shape
        self.block_rows = block_rows(self.array.chunks[0], dims, block_bytes)
        span = span or (0, self.n_rows)
        self.cache: dict | None = None
        self._dense_tiles: set[int] = set()
        if run_id and cache_bytes:
            self.cache = run_caches.run_cache(run_id, cache_bytes).span(span, (span[1] - span[0]) * dims * 4)

    @property
    def dense_tiles(self) -> set[int]:
        """Gallery tiles (their first column) where a scan found most pairs undecided, remembered for the run
        (``core.scan.embeddings.scan_gallery``): a constant or collapsed submission is found out once."""
        if self.cache is None:
            return self._dense_tiles
        return self.cache.setdefault("dense_tiles", set())

    @property
    def whole(self) -> np.ndarray | None:
        """All rows as one normalised array, when ``prefetch`` read them into one (else None)."""
        return None if self.cache is None else self.cache.get("whole")

    def prefetch(self, map_fn=map, pieces: int = 2) -> None:
        """Read and normalise every block into one contiguous array, the blocks as views of it.

        The blocks are read through ``map_fn``, then their norms and their
        normalisation are split into ``pieces`` runs of rows each, so the threads
        share the work even when the whole gallery is one block. Row-wise work,
        so the split changes no number; a block's problems are reported whole,
        blocks in order.
        """
        if self.cache is None or "whole" in self.cache:
            return
        dims = self.array.shape[1]
        whole = np.empty((self.n_rows, dims), dtype=np.float32)
        starts = range(0, self.n_rows, self.block_rows)

        def load(g0: int) -> None:  # float16 is upcast on the way
            rows = slice(g0, min(self.n_rows, g0 + self.block_rows))
            ds.read_into(self.array, "gallery/emb", rows, whole[rows])

        list(map_fn(load, starts))
        norms = np.empty(self.n_rows, dtype=np.float64)
        runs = row_runs(self.n_rows, self.block_rows, pieces)

        def measure(run: Span) -> None:
            norms[run[0]:run[1]] = row_norms(whole[run[0]:run[1]])

        list(map_fn(measure, runs))
        for g0 in starts:
            self._check(g0, whole[g0:g0 + self.block_rows], norms[g0:g0 + self.block_rows])

        def scale(run: Span) -> None:
            a, z = run
            normalize_rows(whole[a:z], self.similarity, norms=norms[a:z], copy=False)

        list(map_fn(scale, runs))
        for g0 in starts:
            self._keep(g0, whole[g0:g0 + self.block_rows], norms[g0:g0 + self.block_rows])
        self.cache["whole"] = whole

    def _read(self, g0: int) -> np.ndarray:
        if self.cache is not None and g0 in self.cache:
            self._check_dot(g0, self.cache[("norms", g0)])  # a cached block meets this task's queries too
            return self.cache[g0]
        raw = ds.read_array(self.array, "gallery/emb", slice(g0, g0 + self.block_rows))
        if raw.dtype != np.float32:
            raw = raw.astype(np.float32)  # float16 products are slow in numpy: upcast the block once
        norms = row_norms(raw)
        self._check(g0, raw, norms)
        block = normalize_rows(raw, self.similarity, norms=norms, copy=False)
        if self.cache is not None:
            self._keep(g0, block, norms)
        return block

    def _check(self, g0: int, block: np.ndarray, norms: np.ndarray) -> None:
        """InputError for the block's first problem: NaN/Inf or zero rows (from its float64 norms), or under
        dot a possible float32 overflow with the queries."""
        problems = ds.check_embeddings("gallery/emb", g0, block, self.similarity == "cosine", norms=norms)
        if problems:
            raise problems[0]
        self._check_dot(g0, norms)

    def _keep(self, g0: int, block: np.ndarray, norms: np.ndarray) -> None:
        """The normalised block and its norms in the run's cache."""
        assert self.cache is not None
        self.cache[g0] = block
        self.cache[("norms", g0)] = norms

    def _check_dot(self, g0: int, norms: np.ndarray) -> None:
        """Under dot: InputError when a row of this block times a query row can overflow float32."""
        if self.similarity == "dot" and self.query_norms is not None:
            problems = dot_overflow_problems(*self.query_norms, g0, norms, self.array.shape[1])
            if problems:
                raise problems[0]

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


def row_runs(n_rows: int, block_rows: int, pieces: int) -> list[Span]:
    """Each block of rows cut into ``pieces`` runs of as equal length as possible (rows 0..n_rows)."""
    runs = []
    for g0 in range(0, n_rows, block_rows):
        g1 = min(n_rows, g0 + block_rows)
        edges = [g0 + (g1 - g0) * i // pieces for i in range(pieces + 1)]
        runs += [(a, z) for a, z in zip(edges[:-1], edges[1:]) if z > a]
    return runs


def dot_overflow_problems(q0: int, query_norms: np.ndarray, g0: int, gallery_norms: np.ndarray,
                          dims: int) -> list[InputError]:
    """Under dot: the query and gallery rows whose products can overflow float32, as one error."""
    q_rows, g_rows = dot_overflow_rows(query_norms, gallery_norms, dims)
    if not g_rows.size:
        return []
    return [ds.dot_overflow_error(q_rows + q0, query_norms[q_rows].max(), g_rows + g0,
                                  gallery_norms[g_rows].max())]


#: bytes of a chunk's given scores read at a time (whole Zarr chunks of columns, at least one)
SCORE_BLOCK_BYTES = 64 << 20


class ScoreBlocks:
    """One chunk's rows (queries q0..q1) of the given score matrix ``scores/value``, a gallery block at a time.

    The source of the ``scores`` scan backend (``core.scan.base.ScoreSource``).
    A block is a whole number of the array's column chunks, about
    ``block_bytes``; values are checked as they are read (NaN or infinite
    values are an input error naming the array and rows) and handed on in
    the dtype stored. Nothing is cached: each chunk reads only its own rows.
    """

    def __init__(self, group, q0: int, q1: int, block_bytes: int = SCORE_BLOCK_BYTES):
        self.array = ds.array(group, ds.SCORES)
        self.q0, self.q1 = q0, q1
        self.n_rows = int(self.array.shape[1])
        self.higher_is_better = ds.higher_is_better(group)
        cols = max(1, self.array.chunks[1])
        fit = block_bytes // max(1, (q1 - q0) * self.array.dtype.itemsize)
        self.block_cols = max(cols, fit // cols * cols)

    @staticmethod
    def _checked(values: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """``values`` (a block of ``rows``, or one value per row of ``rows``); InputError on NaN or Inf."""
        finite = np.isfinite(values)
        if not finite.all():
            bad = rows[~finite.all(axis=1)] if values.ndim == 2 else np.unique(rows[~finite])
            raise ds.nonfinite_score_error(bad)
        return values

    def blocks(self, start: int = 0, stop: int | None = None):
        """(g0, values of rows q0..q1 and gallery items g0..) covering items start..stop, in order."""
        stop = self.n_rows if stop is None else min(stop, self.n_rows)
        rows = np.arange(self.q0, self.q1)
        first = (start // self.block_cols) * self.block_cols
        for b0 in range(first, stop, self.block_cols):
            a, z = max(start, b0), min(stop, b0 + self.block_cols)
            block = ds.read_array(self.array, ds.SCORES, (slice(self.q0, self.q1), slice(a, z)))
            yield a, self._checked(block, rows)

    def values(self, rows: np.ndarray, items: np.ndarray) -> np.ndarray:
        """The values at (chunk row, gallery item) pairs, as stored."""
        rows = np.asarray(rows, dtype=np.int64) + self.q0
        return self._checked(ds.read_points(self.array, ds.SCORES, rows, items), rows)
