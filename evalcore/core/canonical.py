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
pairs in a million) ``math.fsum`` gives the exact sum correctly rounded to
float64, and its residual settles the one case where rounding that to
float32 could round twice.

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
    f = math.fsum(products.tolist())
    c = np.float32(f)
    if float(c) != f and math.isfinite(float(c)):
        other = np.nextafter(c, np.float32(np.inf) if f > float(c) else np.float32(-np.inf))
        if f == (float(c) + float(other)) / 2:  # f is a midpoint: exact in float64
            residual = math.fsum([*products.tolist(), -f])
            if residual != 0:
                up = residual > 0
                c = max(c, other) if up else min(c, other)
    return np.float32(c)


def round_checked(s: np.ndarray, err: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(float32 rounding of s, whether every real number within ``err`` of s rounds to it too)."""
    # widen by two float64 ulps of s: s - err and s + err are themselves rounded
    err = err + np.abs(s) * (4 * U64) + 1e-300
    c = s.astype(np.float32)
    ok = ((s - err).astype(np.float32) == c) & ((s + err).astype(np.float32) == c)
    return c, ok


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


def _fix(a: np.ndarray, b: np.ndarray, ia: np.ndarray, ib: np.ndarray, c: np.ndarray, ok: np.ndarray) -> None:
    """Settle the pairs whose float64 sum was too close to a rounding midpoint (in place)."""
    for p in np.flatnonzero(~ok):
        c[p] = exact_score(a[ia[p]], b[ib[p]])


def canonical_pairs(a: np.ndarray, b: np.ndarray, ia: np.ndarray, ib: np.ndarray) -> np.ndarray:
    """canonical(a[ia[p]], b[ib[p]]) for every p, as float32.

    Pairs over few distinct rows go through one float64 matrix product of
    those rows (``canonical_block``); the rest through a compiled loop over
    pairs. Either way the numbers are the same.
    """
    ia = np.asarray(ia, dtype=np.int64)
    ib = np.asarray(ib, dtype=np.int64)
    n = len(ia)
    if not n:
        return np.empty(0, dtype=np.float32)
    a = np.ascontiguousarray(a, dtype=np.float32)
    b = np.ascontiguousarray(b, dtype=np.float32)
    if n > 4096:
        ua, inv_a = np.unique(ia, return_inverse=True)
        ub, inv_b = np.unique(ib, return_inverse=True)
        # a matrix product does ~10 times the work of the loop per second: worth it when pairs are dense
        if 10 * n >= len(ua) * len(ub):
            return canonical_block(a[ua], b[ub])[inv_a.reshape(-1), inv_b.reshape(-1)]
    s = np.empty(n, dtype=np.float64)
    bound = np.empty(n, dtype=np.float64)
    _pair_sums(a, b, ia, ib, s, bound)
    c, ok = round_checked(s, gamma64(a.shape[1]) * bound)
    if not ok.all():
        _fix(a, b, ia, ib, c, ok)
    return c


def canonical_block(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """canonical(a[i], b[j]) for every i, j: a float64 matrix product, checked, then the few settled exactly.

    The bound uses Cauchy-Schwarz, sum_k |a_k b_k| <= ||a|| ||b||, so no second
    product of absolute values is needed.
    """
    a64 = a.astype(np.float64)
    b64 = b.astype(np.float64)
    s = a64 @ b64.T
    an = np.sqrt(np.einsum("ij,ij->i", a64, a64))
    bn = np.sqrt(np.einsum("ij,ij->i", b64, b64))
    c, ok = round_checked(s, gamma64(a.shape[1]) * np.multiply.outer(an, bn))
    if not ok.all():
        for i, j in zip(*np.nonzero(~ok)):
            c[i, j] = exact_score(a[i], b[j])
    return c


def warm_up() -> None:
    """Compile (or load from the on-disk cache) the pair loop."""
    z = np.zeros((1, 1), np.float32)
    _pair_sums(z, z, np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1), np.zeros(1))
