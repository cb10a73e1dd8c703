"""Given scores: the scan backend over a score or distance matrix supplied as it is (``scores/value``).

Every pair's value is given, so nothing is estimated and no error bound is
needed: values are compared exactly as given. float64 stays float64 (never
rounded to float32, so two values closer than a float32 ulp still differ),
float32 and float16 are widened to float64 exactly, and distances
(``higher_is_better`` false) are negated, which is exact too. A value equal to
a relevant item's is a tie and the tie policy applies; rank 1 is the item
the policy puts first among the highest values, the lowest gallery index
among those. ``top1_score`` and ``relevant_score`` report the values as
given: distances stay distances.

Memory: the source yields the chunk's rows one gallery block at a time, and
the fold widens ``TILE_COLS`` columns of it at a time. Values must be finite
(the reader checks them and names the array and rows).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evalcore.core.kernels import fold_exact
from evalcore.core.protocols import Truth, segment_ids
from evalcore.core.scan.base import TILE_COLS, Ranked, ScoreSource, Span
from evalcore.core.scan.counts import CountState, finish_states, merge_states, tile_mask

_NO_JUNK = np.zeros(0, dtype=bool)


@dataclass
class ScoreQueries:
    """One chunk's queries: ``n`` rows from ``q0``, and whether higher values are better (false: distances)."""

    q0: int
    n: int
    higher_is_better: bool = True


def given_values(raw: np.ndarray, higher_is_better: bool) -> np.ndarray:
    """A float64 copy of ``raw`` (exact for float16/32/64), negated for distances: higher is better after it."""
    values = np.array(raw, dtype=np.float64, order="C", copy=True)
    if not higher_is_better:
        np.negative(values, out=values)
    return values


def as_given(values: np.ndarray, higher_is_better: bool) -> np.ndarray:
    """Values compared (higher is better) back to the values as given (distances negated back)."""
    return values if higher_is_better else -values


class ScoreState(CountState):
    """The chunk's queries over given values (float64): ``CountState`` folded by ``kernels.fold_exact``."""

    def __init__(self, truth: Truth, n: int, thresholds: np.ndarray, ties: str, higher_is_better: bool = True):
        super().__init__(truth, 0, n, 0, thresholds, ties, np.float64)
        self.higher_is_better = higher_is_better

    def update(self, values: np.ndarray, col0: int, colmask: np.ndarray | None) -> None:
        """Fold the chunk's values of gallery items ``col0 ..`` (float64, ours to overwrite)."""
        sub = values[self.l0:self.l1]
        self.mask(sub, col0)
        fold_exact(sub, _NO_JUNK if colmask is None else colmask, col0, self.pessimistic, self.thr_start,
                   self.thr_sorted, self.hist, self.best, self.best_idx)


class ScoreScan:
    """The scan backend over a given score matrix; its source is a ``ScoreSource`` (the chunk's rows)."""

    name = "scores"
    splits_pairs = True

    def thresholds(self, queries: ScoreQueries, truth: Truth, source: ScoreSource,
                   pairs: np.ndarray | None = None) -> np.ndarray:
        pair_row = segment_ids(truth.rel_indptr)
        items = truth.rel_items
        if pairs is not None:
            pair_row, items = pair_row[pairs], items[pairs]
        raw = source.values(pair_row, items) if len(items) else np.empty(0)
        return given_values(raw, queries.higher_is_better)

    def new_states(self, queries: ScoreQueries, truth: Truth, thresholds: np.ndarray,
                   ties: str) -> list[ScoreState]:
        return [ScoreState(truth, queries.n, thresholds, ties, queries.higher_is_better)]

    def scan(self, queries: ScoreQueries, states: list[ScoreState], source: ScoreSource, span: Span | None,
             gallery_junk: np.ndarray | None) -> None:
        blocks = source.blocks() if span is None else source.blocks(*span)
        for g0, block in blocks:
            for c0 in range(0, block.shape[1], TILE_COLS):
                values = given_values(block[:, c0:c0 + TILE_COLS], queries.higher_is_better)
                colmask = tile_mask(g0 + c0, values.shape[1], gallery_junk)
                for state in states:
                    state.update(values, g0 + c0, colmask)

    def merge(self, parts: list[list[ScoreState]]) -> list[ScoreState]:
        return merge_states(parts)

    def finish(self, states: list[ScoreState], truth: Truth, ties: str) -> Ranked:
        ranked = finish_states(states, truth, ties)
        higher_is_better = all(state.higher_is_better for state in states)
        ranked.top1_score = as_given(ranked.top1_score, higher_is_better)
        ranked.relevant_score = as_given(ranked.relevant_score, higher_is_better)
        return ranked


SCORES = ScoreScan()
