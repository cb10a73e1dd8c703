"""The canonical score of a pair of rows (README, "The canonical score").

    canonical(q, g) = the float32 number nearest to  sum_k q_k g_k  (exact, real arithmetic)

for the two rows as normalised (cosine: x * float32(1 / ||x||), the norm
summed in float64; dot: the rows as given, float16 widened to float32).
Round to nearest, ties to even. It depends on the two rows and nothing else,
so it is the same on every machine, BLAS library and device, whatever the
tile, chunk or gallery order the pair sits in.

How it is computed. A product of two float32 numbers is exact in float64
(24 + 24 significand bits), so only the sum rounds: a float64 sum s of D
exact products, in any order, is within gamma64_D * sum_k |q_k g_k| of the
exact value. If rounding both ends of that interval to float32 gives the
same number, that number is the canonical score (rounding is monotone).
Otherwise (s within its error bound of a float32 rounding midpoint, a few
pairs in a million on clean data, more where scores are small) a
double-double sum (error gamma_D^2 sum_k |q_k g_k|) decides; for the pairs
lying on a midpoint even then, ``math.fsum`` gives the exact sum correctly
rounded to float64, and its residual settles the one case where rounding
that to float32 could round twice.

Many pairs over few rows (a constant or collapsed submission puts every pair
of a tile in question) go through one float64 matrix product instead of a
loop over pairs; any float64 summation order is within the same bound.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

#: float64 unit roundoff
U64 = 2.0 ** -53


def gamma64(dims: int) -> float:
    """gamma_D of float64 arithmetic, D u / (1 - D u), slightly widened for the rounding of its own use."""
    return dims * U64 / (1 - dims * U64) * (1 + 1e-8)


def exact_score(q: np.ndarray, g: np.ndarray) -> np.float32:
    """canonical(q, g) by an exact sum: fsum of the exact float64 products, then one correct rounding.

    ``math.fsum`` returns the float64 f nearest to the exact sum x. Rounding f
    to float32 equals rounding x, except when f lies exactly on a float32
    rounding midpoint while x does not; then the sign of x - f (the residual,
    also summed exactly) says which way x rounds.
    """
    products = q.astype(np.float64) * g.astype(np.float64)
    return rounded_sum(products.tolist())


def rounded_sum(terms: list[float]) -> np.float32:
    """The float32 nearest to the exact sum of ``terms`` (float64 numbers), ties to even (``exact_score``)."""
    f = math.fsum(terms)
    c = np.float32(f)
    if float(c) != f and math.isfinite(float(c)):
        other = np.nextafter(c, np.float32(np.inf) if f > float(c) else np.float32(-np.inf))
        if f == (float(c) + float(other)) / 2:  # f is a midpoint: exact in float64
            residual = math.fsum([*terms, -f])
            if residual != 0:
                up = residual > 0
                c = max(c, other) if up else min(c, other)
    return np.float32(c)


@njit(cache=True, nogil=True, boundscheck=False)
def _round_checked(s, bound, bn, gamma, out, bad):
    """out = float32 rounding of s; bad[i, j] = 1 where a number within the error bound of s rounds otherwise.

    The bound is gamma * bound[i] * bn[j], widened by two float64 ulps of s
    (s - err and s + err are themselves rounded). Rounding is monotone, so
    checking both ends checks the whole interval. Returns how many are bad.
    """
    n_bad = 0
    for i in range(s.shape[0]):
        for j in range(s.shape[1]):
            x = s[i, j]
            err = gamma * bound[i] * bn[j] + abs(x) * (4 * U64) + 1e-300
            c = np.float32(x)
            out[i, j] = c
            if np.float32(x - err) != c or np.float32(x + err) != c:
                bad[i, j] = 1
                n_bad += 1
            else:
                bad[i, j] = 0
    return n_bad


@njit(cache=True, nogil=True, boundscheck=False, fastmath={"reassoc", "contract"})
def _pair_sums(a, b, ia, ib, out, bound):
    """out[p] = sum_k a[ia[p], k] b[ib[p], k] and bound[p] = sum_k |...|, in float64 (products exact).

    Reassociation and FMA are allowed: the error bound holds for any order.
    """
    dims = a.shape[1]
    for p in range(ia.shape[0]):
        x = ia[p]
        y = ib[p]
        s = 0.0
        t = 0.0
        for k in range(dims):
            v = np.float64(a[x, k]) * np.float64(b[y, k])
            s += v
            t += abs(v)
        out[p] = s
        bound[p] = t


@njit(cache=True, nogil=True, boundscheck=False)
def _settle_double_double(a, b, ia, ib, out, unsettled):
    """Canonical scores of pairs too close to a rounding midpoint for a float64 sum to tell.

    The exact products are summed as a double-double (TwoSum keeps each
    addition's rounding error): x = s + c is within 2 gamma_D^2 sum|p| of the
    exact sum. With f = float32(s) and m_lo, m_hi the midpoints to its float32
    neighbours (exact in float64), x rounds to f, to the one below or the one
    above whenever it lies further than that bound from both midpoints; the
    distance s - m is taken exactly (TwoSum again). Pairs still within the
    bound of a midpoint (an exact tie, in practice) are flagged for
    ``exact_score``. Returns how many.
    """
    dims = a.shape[1]
    g = dims * U64 / (1 - dims * U64)
    n_left = 0
    for p in range(ia.shape[0]):
        x = ia[p]
        y = ib[p]
        s = 0.0
        c = 0.0
        t = 0.0
        for k in range(dims):
            v = np.float64(a[x, k]) * np.float64(b[y, k])
            z = s + v
            w = z - s
            c += (s - (z - w)) + (v - w)
            s = z
            t += abs(v)
        bound = 2 * g * g * t * (1 + 1e-6) + 1e-300
        f = np.float32(s)
        below = np.float64(np.nextafter(f, np.float32(-np.inf)))
        above = np.float64(np.nextafter(f, np.float32(np.inf)))
        fd = np.float64(f)
        # x - m for both midpoints, as (exact difference of s and m) + c
        d = np.empty(2)
        for side in range(2):
            m = (fd + below) / 2 if side == 0 else (fd + above) / 2
            h = s - m
            w = h - s
            lo = (s - (h - w)) + (-m - w)
            d[side] = h + (lo + c)
        if d[0] > bound and d[1] < -bound:
            out[p] = f
            unsettled[p] = 0
        elif d[0] < -bound and d[0] > -(fd - below) + bound:
            out[p] = np.float32(below)
            unsettled[p] = 0
        elif d[1] > bound and d[1] < (above - fd) - bound:
            out[p] = np.float32(above)
            unsettled[p] = 0
        else:
            unsettled[p] = 1
            n_left += 1
    return n_left


def settle(a: np.ndarray, b: np.ndarray, ia: np.ndarray, ib: np.ndarray) -> np.ndarray:
    """Canonical scores of pairs whose float64 sum was too close to a rounding midpoint: a double-double
    sum for nearly all of them, ``exact_score`` (``math.fsum``) for the ones on a midpoint."""
    ia = np.asarray(ia, dtype=np.int64)
    ib = np.asarray(ib, dtype=np.int64)
    out = np.empty(len(ia), dtype=np.float32)
    unsettled = np.empty(len(ia), dtype=np.uint8)
    if _settle_double_double(a, b, ia, ib, out, unsettled):
        for p in np.flatnonzero(unsettled):
            out[p] = exact_score(a[ia[p]], b[ib[p]])
    return out


def compact(idx: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct values of ``idx`` ascending, each entry's position among them), values in 0..size-1.

    ``np.unique`` without its sort: a presence table, O(size + len(idx)).
    """
    present = np.zeros(size, dtype=bool)
    present[idx] = True
    values = np.flatnonzero(present)
    position = np.zeros(size, dtype=np.int64)
    position[values] = np.arange(len(values))
    return values, position[idx]


def _pair_inputs(a: np.ndarray, b: np.ndarray, ia: np.ndarray, ib: np.ndarray):
    """The rows as contiguous float32 and the pair indices as int64 (what the pair loops take)."""
    return (np.ascontiguousarray(a, dtype=np.float32), np.ascontiguousarray(b, dtype=np.float32),
            np.asarray(ia, dtype=np.int64), np.asarray(ib, dtype=np.int64))


def _through_block(a: np.ndarray, b: np.ndarray, ia: np.ndarray, ib: np.ndarray, block_fn) -> np.ndarray | None:
    """The pairs' values from one float64 matrix product of their distinct rows (``block_fn``) when the pairs
    are many and dense, else None (the pair loop is cheaper)."""
    n = len(ia)
    if n <= 4096:
        return None
    ua, inv_a = compact(ia, len(a)) if len(a) <= 8 * n else np.unique(ia, return_inverse=True)
    ub, inv_b = compact(ib, len(b)) if len(b) <= 8 * n else np.unique(ib, return_inverse=True)
    # a matrix product does ~10 times the work of the loop per second: worth it when pairs are dense
    if 10 * n < len(ua) * len(ub):
        return None
    return block_fn(a[ua], b[ub]).reshape(-1)[inv_a.reshape(-1) * len(ub) + inv_b.reshape(-1)]


def canonical_pairs(a: np.ndarray, b: np.ndarray, ia: np.ndarray, ib: np.ndarray) -> np.ndarray:
    """canonical(a[ia[p]], b[ib[p]]) for every p, as float32.

    Pairs over few distinct rows go through one float64 matrix product of
    those rows (``canonical_block``); the rest through a compiled loop over
    pairs. Either way the numbers are the same.
    """
    a, b, ia, ib = _pair_inputs(a, b, ia, ib)
    n = len(ia)
    if not n:
        return np.empty(0, dtype=np.float32)
    dense = _through_block(a, b, ia, ib, canonical_block)
    if dense is not None:
        return dense
    s = np.empty(n, dtype=np.float64)
    bound = np.empty(n, dtype=np.float64)
    _pair_sums(a, b, ia, ib, s, bound)
    c = np.empty((n, 1), dtype=np.float32)
    bad = np.empty((n, 1), dtype=np.uint8)
    if _round_checked(s.reshape(n, 1), bound, np.ones(1), gamma64(a.shape[1]), c, bad):
        redo = np.flatnonzero(bad[:, 0])
        c[redo, 0] = settle(a, b, ia[redo], ib[redo])
    return c[:, 0]


def canonical_block(a: np.ndarray, b: np.ndarray, b64: np.ndarray | None = None,
                    b_norms: np.ndarray | None = None) -> np.ndarray:
    """canonical(a[i], b[j]) for every i, j: a float64 matrix product, checked, then the few settled exactly.

    The bound uses Cauchy-Schwarz, sum_k |a_k b_k| <= ||a|| ||b||, so no second
    product of absolute values is needed. ``b64`` and ``b_norms`` (b widened
    to float64 and its row norms) may be given when b is scored many times.
    """
    a64 = a.astype(np.float64)
    b64 = b.astype(np.float64) if b64 is None else b64
    s = a64 @ b64.T
    an = np.sqrt(np.einsum("ij,ij->i", a64, a64))
    bn = np.sqrt(np.einsum("ij,ij->i", b64, b64)) if b_norms is None else b_norms
    c = np.empty(s.shape, dtype=np.float32)
    bad = np.empty(s.shape, dtype=np.uint8)
    if _round_checked(s, an, bn, gamma64(a.shape[1]), c, bad):
        i, j = np.nonzero(bad)
        c[i, j] = settle(np.ascontiguousarray(a, dtype=np.float32), np.ascontiguousarray(b, dtype=np.float32), i, j)
    return c


# --------------------------------------------------------------------------- squared L2 distances (euclidean)
#
#     dist(q, g) = the float32 number nearest to  sum_k (q_k - g_k)^2  (exact), ties to even
#
# on the rows as given (float16 widened to float32); ``--similarity euclidean`` ranks by it, lower first, and
# its canonical score is -dist(q, g) (negation is exact, so it is the float32 nearest to -||q - g||^2). The
# same scheme as the dot product's: a float64 sum whose error bound is checked against float32 rounding,
# and an exact sum for the pairs it cannot settle. The float64 sum of the differences' squares has no
# cancellation (every term is >= 0): it is within gamma64_{D+2} of its own value, so only pairs near a
# float32 rounding midpoint need the exact sum, whose terms q_k^2, g_k^2 and -2 q_k g_k are exact in float64.


def exact_sq_dist(q: np.ndarray, g: np.ndarray) -> np.float32:
    """dist(q, g) by an exact sum (``math.fsum`` of q_k^2, g_k^2 and -2 q_k g_k, each exact in float64), then
    one correct rounding (``rounded_sum``)."""
    q64 = q.astype(np.float64)
    g64 = g.astype(np.float64)
    return rounded_sum(np.concatenate([q64 * q64, g64 * g64, -2.0 * (q64 * g64)]).tolist())


@njit(cache=True, nogil=True, boundscheck=False, fastmath={"reassoc", "contract"})
def _pair_sq_dists(a, b, ia, ib, out):
    """out[p] = sum_k (a[ia[p], k] - b[ib[p], k])^2 in float64: every term >= 0, so any order (reassociation and
    FMA allowed) is within gamma64_{D+2} * out[p] of the exact value (one rounding in the difference, one in
    the square, D - 1 in the sum)."""
    dims = a.shape[1]
    for p in range(ia.shape[0]):
        x = ia[p]
        y = ib[p]
        s = 0.0
        for k in range(dims):
            d = np.float64(a[x, k]) - np.float64(b[y, k])
            s += d * d
        out[p] = s


@njit(cache=True, nogil=True, boundscheck=False)
def _round_checked_l2(s, an, bn, gamma, out, bad):
    """As ``_round_checked`` for s[i, j] = ||a_i||^2 + ||b_j||^2 - 2 a_i . b_j summed in float64: its error is
    at most gamma (||a_i|| + ||b_j||)^2, widened by two float64 ulps of s. Returns how many are bad."""
    n_bad = 0
    for i in range(s.shape[0]):
        for j in range(s.shape[1]):
            x = s[i, j]
            r = an[i] + bn[j]
            err = gamma * r * r + abs(x) * (4 * U64) + 1e-300
            c = np.float32(x)
            out[i, j] = c
            if np.float32(x - err) != c or np.float32(x + err) != c:
                bad[i, j] = 1
                n_bad += 1
            else:
                bad[i, j] = 0
    return n_bad


def sq_dist_pairs(a: np.ndarray, b: np.ndarray, ia: np.ndarray, ib: np.ndarray) -> np.ndarray:
    """dist(a[ia[p]], b[ib[p]]) for every p, as float32 (``canonical_pairs`` for squared L2 distances).

    Pairs over few distinct rows go through one float64 matrix product (``sq_dist_block``), the rest
    through a compiled loop over pairs; a pair whose float64 sum lies too close to a float32 rounding
    midpoint is summed exactly (``exact_sq_dist``). The numbers are the same either way.
    """
    a, b, ia, ib = _pair_inputs(a, b, ia, ib)
    n = len(ia)
    if not n:
        return np.empty(0, dtype=np.float32)
    dense = _through_block(a, b, ia, ib, sq_dist_block)
    if dense is not None:
        return dense
    s = np.empty(n, dtype=np.float64)
    _pair_sq_dists(a, b, ia, ib, s)
    c = np.empty((n, 1), dtype=np.float32)
    bad = np.empty((n, 1), dtype=np.uint8)
    if _round_checked(s.reshape(n, 1), s, np.ones(1), gamma64(a.shape[1] + 2), c, bad):
        for p in np.flatnonzero(bad[:, 0]):
            c[p, 0] = exact_sq_dist(a[ia[p]], b[ib[p]])
    return c[:, 0] + np.float32(0)  # -0.0 (a float64 sum of zeros cannot give it, but be sure) as 0.0


def sq_dist_block(a: np.ndarray, b: np.ndarray, b64: np.ndarray | None = None) -> np.ndarray:
    """dist(a[i], b[j]) for every i, j: ||a_i||^2 + ||b_j||^2 - 2 a_i . b_j from one float64 matrix product,
    checked against its error bound gamma64_{D+2} (||a_i|| + ||b_j||)^2 (the dot product within gamma64_D
    ||a_i|| ||b_j||, Cauchy-Schwarz; each squared norm within gamma64_D of itself; two more roundings). Pairs
    the bound leaves open (near-duplicate rows, where the three terms cancel) go through ``sq_dist_pairs``.
    ``b64``: b widened to float64, when b is scored many times."""
    a64 = a.astype(np.float64)
    b64 = b.astype(np.float64) if b64 is None else b64
    a2 = np.einsum("ij,ij->i", a64, a64)
    b2 = np.einsum("ij,ij->i", b64, b64)
    s = a64 @ b64.T
    s *= -2.0
    s += a2[:, None]
    s += b2[None, :]
    c = np.empty(s.shape, dtype=np.float32)
    bad = np.empty(s.shape, dtype=np.uint8)
    if _round_checked_l2(s, np.sqrt(a2), np.sqrt(b2), gamma64(a.shape[1] + 2) * (1 + 1e-6), c, bad):
        i, j = np.nonzero(bad)
        c[i, j] = sq_dist_pairs(a, b, i, j)
    return c


@njit(cache=True, nogil=True, boundscheck=False)
def _row_hashes(bits, mult):
    """A 64-bit hash of each row's bit pattern (equal rows, equal hashes)."""
    n, d = bits.shape
    out = np.empty(n, dtype=np.uint64)
    for i in range(n):
        h = np.uint64(0)
        for k in range(d):
            h += np.uint64(bits[i, k]) * mult[k]
        out[i] = h
    return out


_HASH_MULT = np.random.default_rng(20261124).integers(1, 2 ** 63, 1 << 16, dtype=np.uint64) | np.uint64(1)


def first_identical(rows: np.ndarray) -> np.ndarray:
    """For each row, the index of the first row identical to it (bit for bit, -0.0 and 0.0 apart).

    Identical rows have one canonical score against any query, so it is
    computed once: a hash finds candidates, and a row is only mapped to an
    earlier one it really equals.
    """
    rows = np.ascontiguousarray(rows, dtype=np.float32)
    n, d = rows.shape
    if d > len(_HASH_MULT):
        return np.arange(n)
    hashes = _row_hashes(rows.view(np.uint32), _HASH_MULT[:d])
    _, first, inverse = np.unique(hashes, return_index=True, return_inverse=True)
    rep = first[inverse.reshape(-1)]
    same = (rep == np.arange(n)) | (rows.view(np.uint32) == rows.view(np.uint32)[rep]).all(axis=1)
    return np.where(same, rep, np.arange(n))


def warm_up(rare: bool = True, euclidean: bool = False) -> None:
    """Compile (or load from the on-disk cache) the pair loop; ``rare``: also the loops few runs reach (identical
    gallery rows, pairs whose rounding the float64 sum cannot settle), which a first run otherwise compiles
    only when it meets them; ``euclidean``: also the squared-distance loops."""
    z = np.zeros((1, 1), np.float32)
    _pair_sums(z, z, np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1), np.zeros(1))
    _round_checked(np.zeros((1, 1)), np.zeros(1), np.zeros(1), 0.0, np.zeros((1, 1), np.float32),
                   np.zeros((1, 1), np.uint8))
    if euclidean:
        _pair_sq_dists(z, z, np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1))
        _round_checked_l2(np.zeros((1, 1)), np.zeros(1), np.zeros(1), 0.0, np.zeros((1, 1), np.float32),
                          np.zeros((1, 1), np.uint8))
    if not rare:
        return
    _row_hashes(np.zeros((1, 1), np.uint32), np.ones(1, np.uint64))
    _settle_double_double(np.ones((1, 1), np.float32), np.ones((1, 1), np.float32), np.zeros(1, np.int64),
                          np.zeros(1, np.int64), np.zeros(1, np.float32), np.zeros(1, np.uint8))
