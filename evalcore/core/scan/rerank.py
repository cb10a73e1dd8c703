"""The re-ranked scan: a chunk of queries ranked by k-reciprocal re-ranking's final distance (README, Re-ranking).

Per score tile, the canonical cosine scores of the chunk's queries against
the tile's gallery rows (``canonical_block``) give original(q, g) = d^2 / M_q;
the chunk's shared Jaccard terms (``core.rerank.shared_terms``, only the
pairs with one) are put in place and every other pair takes jaccard = 1, so
final = (1 - lambda) * jaccard + lambda * original for every pair of the tile
and nowhere else. The tile is then folded like a given distance matrix
(``kernels.fold_exact`` on the negated distances, exactly as given): ranks
are counts, ties follow the policy, rank 1 is the lowest index among the
smallest distances. Memory: the chunk's shared terms and one tile; no
query x gallery matrix.

``finish`` reports distances; ``with_cosines`` then puts the cosine score
back into ``top1_score`` and ``relevant_score`` (CONTRACT §15) and keeps the
re-ranked distance of rank 1 as ``rerank_distance``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from threadpoolctl import threadpool_limits

from evalcore.core.canonical import canonical_block, canonical_pairs
from evalcore.core.protocols import Truth, segment_ids
from evalcore.core.rerank import RerankParams, SparseRows, final_distance, jaccard, original_distance
from evalcore.core.scan.base import TILE_COLS, Gallery, Ranked, Span, whole_rows
from evalcore.core.scan.counts import finish_states, merge_states, tile_mask
from evalcore.core.scan.embeddings import threshold_scores
from evalcore.core.scan.scores import ScoreState


@dataclass
class RerankQueries:
    """One chunk of queries: normalised rows ``q0 ..``, their M (``scale``), their shared Jaccard terms
    (rows of the chunk, gallery items), the parameters; ``cosines`` of the relevant pairs once known."""

    normalized: np.ndarray
    q0: int
    scale: np.ndarray
    shared: SparseRows
    params: RerankParams
    cosines: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        rows = segment_ids(self.shared.indptr)
        order = np.argsort(self.shared.cols, kind="stable")
        self._rows, self._items, self._t = rows[order], self.shared.cols[order], self.shared.vals[order]

    def jaccard_tile(self, col0: int, width: int) -> np.ndarray:
        """Jaccard distances of the chunk against gallery items col0 .. col0 + width (1 where nothing is shared)."""
        out = np.ones((len(self.normalized), width))
        a, b = np.searchsorted(self._items, [col0, col0 + width])
        out[self._rows[a:b], self._items[a:b] - col0] = jaccard(self._t[a:b])
        return out

    def jaccard_pairs(self, rows: np.ndarray, items: np.ndarray) -> np.ndarray:
        """Jaccard distances at (chunk row, gallery item) pairs."""
        out = np.ones(len(rows))
        ind = self.shared.indptr
        for p, (r, g) in enumerate(zip(rows.tolist(), items.tolist())):
            seg = self.shared.cols[ind[r]:ind[r + 1]]
            at = int(np.searchsorted(seg, g))
            if at < len(seg) and seg[at] == g:
                out[p] = jaccard(self.shared.vals[ind[r] + at])
        return out

    def final(self, cos: np.ndarray, rows: np.ndarray | None, jac: np.ndarray) -> np.ndarray:
        """Final distances from cosine scores (a tile, or pairs at chunk ``rows``) and Jaccard distances."""
        scale = self.scale[:, None] if rows is None else self.scale[rows]
        return final_distance(jac, original_distance(cos, scale), self.params.lambda_value)


class RerankScan:
    """The scan backend of re-ranked evaluation; its source is a ``Gallery`` of normalised rows."""

    name = "rerank"

    def thresholds(self, queries: RerankQueries, truth: Truth, source: Gallery,
                   pairs: np.ndarray | None = None) -> np.ndarray:
        cos = threshold_scores(queries.normalized, truth, source, pairs)
        rows = segment_ids(truth.rel_indptr)
        items = truth.rel_items
        if pairs is not None:
            rows, items = rows[pairs], items[pairs]
        else:
            queries.cosines = cos
        # compared as negated distances: higher is better, exactly
        return -queries.final(cos, rows, queries.jaccard_pairs(rows, items))

    def new_states(self, queries: RerankQueries, truth: Truth, thresholds: np.ndarray,
                   ties: str) -> list[ScoreState]:
        return [ScoreState(truth, len(queries.normalized), thresholds, ties, higher_is_better=False)]

    def scan(self, queries: RerankQueries, states: list[ScoreState], source: Gallery, span: Span | None,
             gallery_junk: np.ndarray | None) -> None:
        blocks = source.blocks() if span is None else source.blocks(*span)
        with threadpool_limits(limits=1, user_api="blas"):
            for g0, block in blocks:
                for c0 in range(0, len(block), TILE_COLS):
                    rows = block[c0:c0 + TILE_COLS]
                    col0 = g0 + c0
                    cos = canonical_block(queries.normalized, rows)
                    values = -queries.final(cos, None, queries.jaccard_tile(col0, len(rows)))
                    colmask = tile_mask(col0, len(rows), gallery_junk)
                    for state in states:
                        state.update(values, col0, colmask)

    def merge(self, parts: list[list[ScoreState]]) -> list[ScoreState]:
        return merge_states(parts)

    def finish(self, states: list[ScoreState], truth: Truth, ties: str) -> Ranked:
        ranked = finish_states(states, truth, ties)
        ranked.top1_score = -ranked.top1_score
        ranked.relevant_score = -ranked.relevant_score
        return ranked


RERANK = RerankScan()


def with_cosines(queries: RerankQueries, truth: Truth, source: Gallery, ranked: Ranked) -> Ranked:
    """``ranked`` with cosine scores reported (rank 1's, and the best relevant one) and rank 1's re-ranked
    distance kept as ``rerank_distance``."""
    n = len(queries.normalized)
    ranked.rerank_distance = ranked.top1_score
    top1_cos = np.full(n, np.nan)
    has = np.flatnonzero(ranked.top1 >= 0)
    if len(has):
        items = ranked.top1[has]
        whole = whole_rows(source)
        if whole is not None:
            top1_cos[has] = canonical_pairs(queries.normalized, whole, has, items)
        else:
            union, inverse = np.unique(items, return_inverse=True)
            top1_cos[has] = canonical_pairs(queries.normalized, source.rows(union), has, inverse.reshape(-1))
    ranked.top1_score = top1_cos
    best = np.full(n, np.nan)
    if queries.cosines is not None and len(queries.cosines):
        rows = segment_ids(truth.rel_indptr)
        best_cos = np.full(n, -np.inf)
        np.maximum.at(best_cos, rows, queries.cosines.astype(np.float64))
        best = np.where(np.isfinite(best_cos), best_cos, np.nan)
    ranked.relevant_score = best
    return ranked
