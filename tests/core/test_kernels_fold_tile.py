"""The compiled fold (core/kernels.py): one tile of score estimates into counts, rank 1 and undecided pairs.

For each query row i and each column j that is not junk, the exact score lies
within e of the estimate v. The fold counts a negative against the thresholds
it surely beats, emits it (NEAR) when the interval [v - e, v + e] straddles a
threshold's boundary, and emits it (TOP) when it may be rank 1. ``fold_settled``
then folds the emitted pairs with their exact scores. Here the estimates are
exact (dyadic values) and e is a chosen number of ulps, so the brute-force
counts are known exactly.
"""
import numpy as np
import pytest

from evalcore.core.kernels import NEAR, TOP, fold_settled, fold_tile
from evalcore.core.ranking import tie_boundaries

ULP1 = 2.0 ** -23   # float32 spacing just above 1.0


def up(x, n=1):
    for _ in range(n):
        x = np.nextafter(np.float32(x), np.float32(np.inf))
    return np.float32(x)


def down(x, n=1):
    for _ in range(n):
        x = np.nextafter(np.float32(x), np.float32(-np.inf))
    return np.float32(x)


def fold(scores, thresholds, err=3 * ULP1, ties="pessimistic", col0=0, junk=None, settle=True):
    """fold_tile then (``settle``) fold_settled with the scores themselves as the exact values."""
    scores = np.ascontiguousarray(scores, dtype=np.float32)
    n, width = scores.shape
    start = np.zeros(n + 1, dtype=np.int64)
    np.cumsum([len(t) for t in thresholds], out=start[1:])
    thr = np.concatenate([np.sort(np.asarray(t, dtype=np.float32)) for t in thresholds] + [np.zeros(0, np.float32)])
    bounds = tie_boundaries(thr, ties)
    hist = np.zeros(len(thr), np.int64)
    low = np.full(n, -np.inf)
    out_idx, out_flag = np.empty(scores.size, np.int64), np.empty(scores.size, np.uint8)
    junk = np.zeros(0, bool) if junk is None else np.asarray(junk, bool)
    k = fold_tile(scores.copy(), junk, np.full(n, err), np.ones(width), 1.0, 0.0, low, start, bounds, hist,
                  out_idx, out_flag)
    rows, cols = np.divmod(out_idx[:k], width)
    flags = out_flag[:k].copy()
    best, best_idx = np.full(n, -np.inf, np.float32), np.full(n, -1, np.int64)
    if settle:
        fold_settled(rows, cols + col0, flags, scores[rows, cols], ties == "pessimistic", start, thr, hist, best,
                     best_idx)
    return {"hist": hist, "start": start, "thr": thr, "best": best, "best_idx": best_idx,
            "emitted": list(zip(rows.tolist(), cols.tolist(), flags.tolist())), "low": low}


def beaten_counts(out):
    """Per row, per ascending threshold: negatives that beat it (suffix sums of the histogram)."""
    counts = []
    for i in range(len(out["start"]) - 1):
        h = out["hist"][out["start"][i]:out["start"][i + 1]]
        counts.append([int(h[p:].sum()) for p in range(len(h))])
    return counts


def brute_force_counts(scores, thresholds, junk=None, ties="pessimistic"):
    keep = np.ones(scores.shape[1], bool) if junk is None else ~np.asarray(junk, bool)
    beats = (lambda v, t: v >= t) if ties == "pessimistic" else (lambda v, t: v > t)
    return [[int(beats(scores[i][keep & np.isfinite(scores[i])], th).sum()) for th in sorted(np.float32(x) for x in t)]
            for i, t in enumerate(thresholds)]


def planted_tile():
    """Two rows of negatives around thresholds 1.0 and 0.5: equal, 1 ulp either side, 2-4 ulps away, far."""
    one, half = np.float32(1.0), np.float32(0.5)
    row0 = [one, up(one), down(one), up(one, 3), down(one, 3), up(one, 4), down(one, 4), half, up(half),
            down(half), np.float32(0.9), np.float32(0.1), np.float32(2.0), one]
    row1 = [half, half, up(half, 2), down(half, 2), np.float32(0.75), np.float32(-1.0), up(half, 7),
            down(half, 7), np.float32(0.2), np.float32(0.6), np.float32(0.4), np.float32(0.5), one, down(one)]
    return np.array([row0, row1], dtype=np.float32), [[one, half], [half]]


@pytest.mark.parametrize("ties", ["pessimistic", "optimistic"])
def test_fold_counts_equal_brute_force_counts_with_planted_near_ties(ties):
    scores, thresholds = planted_tile()
    assert beaten_counts(fold(scores, thresholds, ties=ties)) == brute_force_counts(scores, thresholds, ties=ties)


@pytest.mark.parametrize("ties", ["pessimistic", "optimistic"])
def test_fold_emits_as_near_exactly_the_scores_whose_interval_straddles_a_boundary(ties):
    scores, thresholds = planted_tile()
    err = 3 * ULP1
    out = fold(scores, thresholds, err=err, ties=ties, settle=False)
    near = sorted((r, c) for r, c, f in out["emitted"] if f & NEAR)
    bounds = [tie_boundaries(np.float32(t), ties) for t in thresholds]
    want = sorted((i, j) for i in range(2) for j, v in enumerate(scores[i].astype(np.float64))
                  if any(v - err <= m <= v + err for m in bounds[i]))
    assert near == want and near  # the planted ties are there to be emitted


def test_fold_with_no_error_decides_everything_itself():
    scores, thresholds = planted_tile()
    out = fold(scores, thresholds, err=0.0, settle=False)
    assert not [1 for _, _, f in out["emitted"] if f & NEAR]
    assert beaten_counts(out) == brute_force_counts(scores, thresholds)


def test_fold_rank_one_is_the_highest_score_and_the_lowest_column_among_equals():
    scores = np.array([[0.3, 0.9, 0.2, 0.9], [0.1, 0.1, 0.1, 0.1]], dtype=np.float32)
    out = fold(scores, [[], []], col0=4096)
    assert out["best_idx"].tolist() == [4097, 4096] and out["best"].tolist() == [np.float32(0.9), np.float32(0.1)]


def test_fold_emits_every_pair_that_may_be_rank_one_and_none_that_cannot():
    one = np.float32(1.0)
    scores = np.array([[0.5, down(one, 2), one, down(one, 12), 0.25, up(one)]], dtype=np.float32)
    out = fold(scores, [[]], err=2 * ULP1, settle=False)
    top = sorted(c for _, c, f in out["emitted"] if f & TOP)
    # 5 (the maximum) and everything within 2e of it; columns seen before the maximum while they led count too
    assert {1, 2, 5} <= set(top) and 3 not in top and 4 not in top
    assert out["low"][0] == float(up(one)) - 2 * ULP1


def test_fold_skips_junk_columns_for_counts_and_rank_one():
    scores, thresholds = planted_tile()
    junk = np.zeros(scores.shape[1], bool)
    junk[[0, 1, 12]] = True       # row 0's tie at 1.0, 1 ulp above, and row 1's 1.0
    out = fold(scores, thresholds, junk=junk)
    assert beaten_counts(out) == brute_force_counts(scores, thresholds, junk=junk)
    best = np.where(junk[None, :], -np.inf, scores).max(axis=1)
    assert out["best"].tolist() == best.astype(np.float32).tolist()


def test_fold_ignores_scores_set_to_minus_infinity_for_relevant_items():
    scores, thresholds = planted_tile()
    scores[0, 12] = -np.inf      # the relevant item itself is masked before the fold
    out = fold(scores, thresholds)
    assert beaten_counts(out) == brute_force_counts(scores, thresholds)
    assert all(c != 12 or r != 0 for r, c, _ in out["emitted"])


def test_fold_adds_to_the_state_of_an_earlier_tile():
    scores, thresholds = planted_tile()
    whole = fold(scores, thresholds)
    n, err = 2, 3 * ULP1
    start = np.array([0, 2, 3], np.int64)
    thr = np.array([0.5, 1.0, 0.5], np.float32)
    bounds = tie_boundaries(thr, "pessimistic")
    hist, low = np.zeros(3, np.int64), np.full(n, -np.inf)
    best, best_idx = np.full(n, -np.inf, np.float32), np.full(n, -1, np.int64)
    for c0, part in ((0, scores[:, :7]), (7, scores[:, 7:])):
        part = np.ascontiguousarray(part)
        out_idx, out_flag = np.empty(part.size, np.int64), np.empty(part.size, np.uint8)
        k = fold_tile(part.copy(), np.zeros(0, bool), np.full(n, err), np.ones(part.shape[1]), 1.0, 0.0, low, start,
                      bounds, hist, out_idx, out_flag)
        rows, cols = np.divmod(out_idx[:k], part.shape[1])
        fold_settled(rows, cols + c0, out_flag[:k], part[rows, cols], True, start, thr, hist, best, best_idx)
    assert hist.tolist() == whole["hist"].tolist()
    assert best_idx.tolist() == whole["best_idx"].tolist() and best.tolist() == whole["best"].tolist()
