"""The compiled loops: fold a tile of matrix-product scores into per-query counts, then settle the undecided
(and ``fold_exact``: the same counts from given, exact values in one pass).

numpy needs four passes over a tile for this (arg-max, compare, nonzero,
gather) plus a binary search per candidate; at D = 128 that cost as much as
the matrix product itself. One compiled pass does all of it for about a
third of the product's time (numba, JIT-compiled once and cached on disk).

The tile's scores are only estimates of the canonical scores
(``core.canonical``): each is within ``err`` of the exact dot product. The
fold decides what it can from them and emits the few pairs it cannot; their
canonical scores are computed and folded in by ``fold_settled``.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
from numba import njit
from numba.core import event

from evalcore.core import canonical

#: flags of an emitted pair: it may beat a threshold that its estimate cannot decide / it may be rank 1
NEAR = 1
TOP = 2


@njit(cache=True, nogil=True, boundscheck=False)
def fold_tile(scores, junk, qerr, gnorm, gmax, floor, low, bound_start, bounds, hist, out_idx, out_flag):
    """One pass over ``scores`` (queries x tile columns; relevant and per-query junk already -inf).

    Pair (i, j) has tile score v and exact score x with |x - v| <= e, where
    e = qerr[i] * gnorm[j] + floor (bound and margin for rounding, see
    ``ranking.score_error``). ``bounds[bound_start[i]:bound_start[i+1]]`` are
    row i's thresholds as float64 boundaries m, ascending: the pair beats a
    threshold exactly when x > m. For every column j not in ``junk``:

      * n_sure = #{m < v - e}, n_poss = #{m <= v + e}: equal means decided,
        so hist[bound_start[i] + n_sure - 1] += 1 (it beats the n_sure lowest
        thresholds); otherwise it is emitted with flag NEAR;
      * rank 1: low[i] is the largest v - e seen; a pair with v + e >= low[i]
        may have the highest canonical score and is emitted with flag TOP.

    Emitted pairs go to out_idx (i * width + j) and out_flag. Returns their number.
    """
    n, width = scores.shape
    has_junk = junk.shape[0] > 0
    neg_inf = np.float32(-np.inf)
    k = 0
    for i in range(n):
        s0 = bound_start[i]
        s1 = bound_start[i + 1]
        lowest = bounds[s0] if s1 > s0 else np.inf
        eq = qerr[i]
        emax = eq * gmax + floor
        lo = low[i]
        cut = min(lowest - emax, lo - emax)
        # a float32 gate at or below cut: one comparison per score in the common case
        gate = np.float32(cut - abs(cut) * 2.0 ** -20 - 1e-37)
        row = scores[i]
        for j in range(width):
            v = row[j]
            if v >= gate:
                if v == neg_inf or (has_junk and junk[j]):
                    continue
                vv = np.float64(v)
                e = eq * gnorm[j] + floor
                flag = 0
                if vv - e > lo:
                    lo = vv - e
                    cut = min(lowest - emax, lo - emax)
                    gate = np.float32(cut - abs(cut) * 2.0 ** -20 - 1e-37)
                if vv + e >= lo:
                    flag = TOP
                if vv + e >= lowest:
                    # n_sure: first index with m >= v - e
                    x = vv - e
                    a, z = s0, s1
                    while a < z:
                        mid = (a + z) >> 1
                        if bounds[mid] < x:
                            a = mid + 1
                        else:
                            z = mid
                    n_sure = a - s0
                    # n_poss: first index with m > v + e. Most pairs are decided (the next bound is past v + e),
                    # so the search starts only when it is not. Only n_poss > n_sure matters, but this shape ran
                    # the fold in 0.19 s against 0.32 s for the bare comparison (large, 2,048 x 300,000).
                    x = vv + e
                    a, z = s0 + n_sure, s1
                    if a < z and bounds[a] <= x:
                        a += 1
                        while a < z:
                            mid = (a + z) >> 1
                            if bounds[mid] <= x:
                                a = mid + 1
                            else:
                                z = mid
                    n_poss = a - s0
                    if n_poss > n_sure:
                        flag |= NEAR
                    elif n_sure > 0:
                        hist[s0 + n_sure - 1] += 1
                if flag:
                    out_idx[k] = i * width + j
                    out_flag[k] = flag
                    k += 1
        low[i] = lo
    return k


@njit(cache=True, nogil=True, boundscheck=False, inline="always")
def beaten_end(thresholds, a, z, v, pessimistic):
    """End of the thresholds[a:z] (ascending) that v beats: #{t <= v} (pessimistic: a tie goes to the
    negative) or #{t < v} (optimistic), plus a."""
    while a < z:
        mid = (a + z) >> 1
        t = thresholds[mid]
        if t < v or (pessimistic and t == v):
            a = mid + 1
        else:
            z = mid
    return a


@njit(cache=True, nogil=True, boundscheck=False)
def fold_settled(rows, cols, flags, canon, pessimistic, thr_start, thresholds, hist, best, best_idx):
    """Fold pairs with known canonical scores: counts against the exact thresholds, and rank 1.

    NEAR pairs: beaten = #{t <= c} (pessimistic: a tie goes to the negative)
    or #{t < c} (optimistic) over the row's ascending thresholds, then
    hist[thr_start[r] + beaten - 1] += 1. TOP pairs: the highest canonical
    score, lowest gallery index on ties, into best / best_idx.
    """
    for p in range(rows.shape[0]):
        r = rows[p]
        c = canon[p]
        f = flags[p]
        if f & NEAR:
            end = beaten_end(thresholds, thr_start[r], thr_start[r + 1], c, pessimistic)
            if end > thr_start[r]:
                hist[end - 1] += 1
        if f & TOP:
            col = cols[p]
            if c > best[r] or (c == best[r] and (best_idx[r] < 0 or col < best_idx[r])):
                best[r] = c
                best_idx[r] = col


@njit(cache=True, nogil=True, boundscheck=False)
def fold_exact(values, junk, col0, pessimistic, thr_start, thresholds, hist, best, best_idx):
    """One pass over exact values (queries x tile columns from gallery item ``col0``; relevant and
    per-query junk pairs already -inf): counts and rank 1 decided at once, nothing emitted.

    For every column j not in ``junk``: beaten = #{t <= v} (pessimistic: a tie
    goes to the negative) or #{t < v} (optimistic) over the row's ascending
    ``thresholds``, then hist[thr_start[i] + beaten - 1] += 1; rank 1 is the
    highest value, the lowest gallery index on ties, into best / best_idx.
    For given scores (``core.scan.scores``), whose values need no error bound.
    """
    n, width = values.shape
    has_junk = junk.shape[0] > 0
    for i in range(n):
        s0 = thr_start[i]
        s1 = thr_start[i + 1]
        lowest = thresholds[s0] if s1 > s0 else np.inf
        b = best[i]
        bi = best_idx[i]
        row = values[i]
        for j in range(width):
            v = row[j]
            if v == -np.inf or (has_junk and junk[j]):
                continue
            if v > b or (v == b and (bi < 0 or col0 + j < bi)):
                b = v
                bi = col0 + j
            if v > lowest or (pessimistic and v == lowest):
                hist[beaten_end(thresholds, s0, s1, v, pessimistic) - 1] += 1
        best[i] = b
        best_idx[i] = bi


def warm_up(scan: str = "all") -> None:
    """Compile (or load from the on-disk cache) the kernels of a scan before timing-sensitive work: ``scan``
    "embeddings" (the fold of estimates and canonical scores), "scores" (the fold of given values), or "all".

    Only what the run will call: compiling a kernel the run never uses costs a
    fresh environment seconds (fold_exact, the given-scores fold, was compiled by
    every embedding run; the rare canonical loops now compile when first met).
    """
    if scan in ("embeddings", "all"):
        s = np.zeros((1, 1), np.float32)
        fold_tile(s, np.zeros(0, np.bool_), np.zeros(1), np.ones(1), 1.0, 0.0, np.full(1, -np.inf),
                  np.zeros(2, np.int64), np.zeros(0), np.zeros(0, np.int64), np.zeros(1, np.int64),
                  np.zeros(1, np.uint8))
        fold_settled(np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1, np.uint8), np.zeros(1, np.float32),
                     True, np.zeros(2, np.int64), np.zeros(0, np.float32), np.zeros(0, np.int64),
                     np.zeros(1, np.float32), np.full(1, -1, np.int64))
        canonical.warm_up(rare=scan == "all", euclidean=scan == "all")
    if scan in ("scores", "all"):
        fold_exact(np.zeros((1, 1)), np.zeros(0, np.bool_), 0, True, np.zeros(2, np.int64), np.zeros(0),
                   np.zeros(0, np.int64), np.full(1, -np.inf), np.full(1, -1, np.int64))


def dask_setup(worker) -> None:  # noqa: ARG001 - distributed's preload hook
    """Workers started with ``--preload evalcore.core.kernels`` compile the kernel before their first task."""
    warm_up()


# --------------------------------------------------------------------------- the first run's notice


class _CompileWatch(event.Listener):
    """numba's "numba:compile" event starts only on a real compile (a kernel missing from the on-disk cache,
    or cached for another source): the moment to say why the first run waits."""

    def __init__(self) -> None:
        self.sinks: list[list] = []  # [sink, told] of each open ``compile_notices``, innermost last
        self.lock = threading.Lock()

    def on_start(self, ev: event.Event) -> None:
        dispatcher = (ev.data or {}).get("dispatcher")
        module = getattr(getattr(dispatcher, "py_func", None), "__module__", "") or ""
        if not module.startswith("evalcore."):
            return
        with self.lock:
            open_ = [s for s in self.sinks if not s[1]]
            for s in open_:
                s[1] = True
        for sink, _ in open_:
            try:
                sink(cache_dir(dispatcher))
            except Exception:  # noqa: BLE001 - a notice must never stop the compile it announces
                pass

    def on_end(self, ev: event.Event) -> None:
        pass


_WATCH = _CompileWatch()
event.register("numba:compile", _WATCH)


def cache_dir(dispatcher) -> str:
    """Where numba keeps a kernel's compiled code: NUMBA_CACHE_DIR's copy of the module's folder, or the
    __pycache__ beside the module (numba's own choice, read from its cache object)."""
    path = getattr(getattr(dispatcher, "_cache", None), "_cache_path", None)
    return str(path) if path else "numba's cache"


@contextmanager
def compile_notices(sink: Callable[[str], None]) -> Iterator[None]:
    """While open, ``sink(cache folder)`` is called once, just before numba compiles an evalcore kernel that is
    not in its on-disk cache; never when every kernel the work calls loads from the cache."""
    entry = [sink, False]
    with _WATCH.lock:
        _WATCH.sinks.append(entry)
    try:
        yield
    finally:
        with _WATCH.lock:
            _WATCH.sinks.remove(entry)

