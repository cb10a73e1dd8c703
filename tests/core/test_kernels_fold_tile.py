"""The compiled fold (core/kernels.py): one tile of scores into rank-1, counts and near entries.

For each query row i and each column j that is not junk: a running arg-max
(lowest index on equal scores); a score above every band [lo, hi] of the
n_hi lowest thresholds surely beats them (hist[n_hi - 1] += 1); a score inside
some band is kept as a near entry, for the exact comparison at the end.
"""
import numpy as np

from evalcore.core.kernels import fold_tile

ULP1 = np.float32(2.0 ** -23)   # float32 spacing just above 1.0


def up(x, n=1):
    for _ in range(n):
        x = np.nextafter(np.float32(x), np.float32(np.inf))
    return np.float32(x)


def down(x, n=1):
    for _ in range(n):
        x = np.nextafter(np.float32(x), np.float32(-np.inf))
    return np.float32(x)


def fold(scores, thresholds, bands=3, col0=0, junk=None):
    """Run fold_tile on ``scores`` with per-row exact ``thresholds`` and bands of +-``bands`` ulps."""
    n = scores.shape[0]
    row_start = np.zeros(n + 1, dtype=np.int64)
    np.cumsum([len(t) for t in thresholds], out=row_start[1:])
    exact = [np.sort(np.asarray(t, dtype=np.float32)) for t in thresholds]
    lo = np.concatenate([[down(v, bands) for v in t] for t in exact] + [[]]).astype(np.float32)
    hi = np.concatenate([[up(v, bands) for v in t] for t in exact] + [[]]).astype(np.float32)
    lo_min = np.array([lo[row_start[i]] if row_start[i + 1] > row_start[i] else np.inf for i in range(n)],
                      dtype=np.float32)
    best, best_idx = np.full(n, -np.inf, np.float32), np.full(n, -1, np.int64)
    hist = np.zeros(len(lo), np.int64)
    near_row, near_val = np.empty(scores.size, np.int64), np.empty(scores.size, np.float32)
    junk = np.zeros(0, bool) if junk is None else np.asarray(junk, bool)
    k = fold_tile(np.ascontiguousarray(scores, dtype=np.float32), col0, junk, best, best_idx, lo_min, row_start,
                  lo, hi, hist, near_row, near_val)
    return {"best": best, "best_idx": best_idx, "hist": hist, "row_start": row_start, "exact": exact,
            "near": list(zip(near_row[:k].tolist(), near_val[:k].tolist()))}


def beaten_counts(out, ties="pessimistic"):
    """Per row, per ascending threshold: negatives that beat it, from the histogram plus the near entries."""
    counts = []
    for i, t in enumerate(out["exact"]):
        s0 = out["row_start"][i]
        h = out["hist"][s0:s0 + len(t)]
        row = [int(h[p:].sum()) for p in range(len(t))]
        for r, v in out["near"]:
            if r == i:
                for p, th in enumerate(t):
                    row[p] += (v >= th) if ties == "pessimistic" else (v > th)
        counts.append(row)
    return counts


def brute_force_counts(scores, thresholds, junk=None, ties="pessimistic"):
    keep = np.ones(scores.shape[1], bool) if junk is None else ~np.asarray(junk, bool)
    beats = (lambda v, t: v >= t) if ties == "pessimistic" else (lambda v, t: v > t)
    return [[int(beats(scores[i][keep], th).sum()) for th in sorted(np.float32(x) for x in t)]
            for i, t in enumerate(thresholds)]


def planted_tile():
    """Two rows of negatives around thresholds 1.0 and 0.5: equal, 1 ulp either side, 2-4 ulps away, far."""
    one, half = np.float32(1.0), np.float32(0.5)
    row0 = [one, up(one), down(one), up(one, 3), down(one, 3), up(one, 4), down(one, 4), half, up(half),
            down(half), np.float32(0.9), np.float32(0.1), np.float32(2.0), one]
    row1 = [half, half, up(half, 2), down(half, 2), np.float32(0.75), np.float32(-1.0), up(half, 7),
            down(half, 7), np.float32(0.2), np.float32(0.6), np.float32(0.4), np.float32(0.5), one, down(one)]
    return np.array([row0, row1], dtype=np.float32), [[one, half], [half]]


def test_fold_counts_equal_brute_force_counts_with_planted_near_ties_under_both_tie_policies():
    scores, thresholds = planted_tile()
    out = fold(scores, thresholds)
    for ties in ("pessimistic", "optimistic"):
        assert beaten_counts(out, ties) == brute_force_counts(scores, thresholds, ties=ties)


def test_fold_keeps_every_score_inside_a_band_as_a_near_entry_and_nothing_else():
    scores, thresholds = planted_tile()
    out = fold(scores, thresholds, bands=3)
    want = sorted((i, float(v)) for i in range(2) for v in scores[i]
                  if any(down(t, 3) <= v <= up(t, 3) for t in thresholds[i]))
    assert sorted(out["near"]) == want


def test_fold_rank_one_is_the_highest_score_and_the_lowest_column_among_equals():
    scores = np.array([[0.3, 0.9, 0.2, 0.9], [0.1, 0.1, 0.1, 0.1]], dtype=np.float32)
    out = fold(scores, [[], []], col0=4096)
    assert out["best_idx"].tolist() == [4097, 4096] and out["best"].tolist() == [np.float32(0.9), np.float32(0.1)]


def test_fold_skips_junk_columns_for_counts_and_rank_one():
    scores, thresholds = planted_tile()
    junk = np.zeros(scores.shape[1], bool)
    junk[[0, 1, 12]] = True       # row 0's tie at 1.0, 1 ulp above, and row 1's 1.0
    out = fold(scores, thresholds, junk=junk)
    assert beaten_counts(out) == brute_force_counts(scores, thresholds, junk=junk)
    best = np.where(junk[None, :], -np.inf, scores).max(axis=1)
    assert out["best"].tolist() == best.tolist()


def test_fold_ignores_scores_set_to_minus_infinity_for_relevant_items():
    scores, thresholds = planted_tile()
    scores[0, 12] = -np.inf      # the relevant item itself is masked before the fold
    out = fold(scores, thresholds)
    assert beaten_counts(out) == brute_force_counts(scores, thresholds)


def test_fold_adds_to_the_state_of_an_earlier_tile():
    scores, thresholds = planted_tile()
    left, right = scores[:, :7], scores[:, 7:]
    n = 2
    row_start = np.array([0, 2, 3], np.int64)
    lo = np.array([down(0.5, 3), down(1.0, 3), down(0.5, 3)], np.float32)
    hi = np.array([up(0.5, 3), up(1.0, 3), up(0.5, 3)], np.float32)
    lo_min = np.array([lo[0], lo[2]], np.float32)
    best, best_idx = np.full(n, -np.inf, np.float32), np.full(n, -1, np.int64)
    hist = np.zeros(3, np.int64)
    near_row, near_val = np.empty(scores.size, np.int64), np.empty(scores.size, np.float32)
    k1 = fold_tile(np.ascontiguousarray(left), 0, np.zeros(0, bool), best, best_idx, lo_min, row_start, lo, hi, hist,
                   near_row, near_val)
    near = list(zip(near_row[:k1].tolist(), near_val[:k1].tolist()))
    k2 = fold_tile(np.ascontiguousarray(right), 7, np.zeros(0, bool), best, best_idx, lo_min, row_start, lo, hi, hist,
                   near_row, near_val)
    near += list(zip(near_row[:k2].tolist(), near_val[:k2].tolist()))
    whole = fold(scores, thresholds)
    assert hist.tolist() == whole["hist"].tolist() and sorted(near) == sorted(whole["near"])
    assert best_idx.tolist() == whole["best_idx"].tolist()
