"""Deciding with per-query values (README, Compare): bootstrap intervals, paired tests, Holm, wins/ties/losses.

One implementation behind ``evalcore compare``, ``evaluate --ci`` and the
nightly gates' ``significance``. Everything here works on per-query values
already paired (row q of A and of B is the same query) and is seeded: the
same values and ``seed`` give the same numbers, however the values were
computed (worker count, chunking).

Resampling is done as a counts matrix times the per-query values: a
bootstrap resample of n queries is a row of counts c (c_q = how often query q
was drawn, Σ c_q = n), and its mean of every metric column at once is
c @ V / n, summed by a compiled loop in query order (the same rounding whatever
else is resampled beside it, on any machine); a sign-flip permutation is a row
of ±1, its sums a matrix product (a p-value compares them with a tolerance). The counts and signs are
drawn by a compiled loop from one 64-bit seed per resample, those seeds from
``numpy.random.default_rng(seed)``, so how the work is split changes nothing.
"""
from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import overload

import numpy as np
from numba import njit
from threadpoolctl import threadpool_limits

from evalcore.errors import input_error

#: resamples (or permutations) per block: bounds the counts matrix at BLOCK x n float64
BLOCK = 256
#: the sign-flip test enumerates every flip up to this many queries
EXACT_MAX = 20
#: most resamples (or permutations) one interval or test takes: far past where more change the third decimal
#: (10,000 is the default), and B x columns means stay in memory (a million x 24 columns: 192 MB)
MAX_DRAWS = 1_000_000
#: |mean d*| counts as reaching |mean d| within this relative tolerance (floating-point sums of the same
#: values in another order differ in the last bits; scipy.stats.permutation_test does the same)
RELATIVE_TOLERANCE = 1e-12


@dataclass(frozen=True)
class Method:
    """How intervals and tests are computed: what run.json and comparison.json record."""

    #: the interval's confidence level, in (0, 1)
    level: float = 0.95
    #: bootstrap resamples
    resamples: int = 10_000
    #: sign-flip permutations (when n > EXACT_MAX; below, every flip)
    permutations: int = 10_000
    seed: int = 0

    def checked(self, prefix: str = "--") -> Method:
        """The same method, or an InputError naming the option (``prefix`` ``--`` or none for API names)."""
        name = (lambda s: prefix + s.replace("_", "-")) if prefix == "--" else (lambda s: s)
        if isinstance(self.level, bool) or not isinstance(self.level, (int, float)) or \
                not (math.isfinite(self.level) and 0 < self.level < 1):
            raise input_error(name('ci'), f"{self.level!r} must be a confidence level strictly between 0 and 1 "
                             "(0.95)")
        for field_name in ("resamples", "permutations"):
            value = getattr(self, field_name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise input_error(name(field_name), f"{value!r} must be a positive integer")
            if value > MAX_DRAWS:
                raise input_error(name(field_name), f"{value!r} is more than {MAX_DRAWS}, the most it takes "
                                 "(the default 10000 gives intervals and p-values to 0.0001)")
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) or self.seed < 0:
            raise input_error(name('seed'), f"{self.seed!r} must be a non-negative integer")
        return self

    def record(self) -> dict:
        """The run.json / comparison.json entry."""
        return {"method": "percentile bootstrap; two-sided sign-flip randomization test; paired t-test; Holm",
                "level": self.level, "resamples": int(self.resamples), "permutations": int(self.permutations),
                "seed": int(self.seed)}


# --------------------------------------------------------------------------- the compiled draws


@njit(cache=True, inline="always")
def _next(state):
    """splitmix64: the next 64-bit value of ``state`` (a one-element uint64 array)."""
    state[0] += np.uint64(0x9E3779B97F4A7C15)
    z = state[0]
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


# one thread: on a shared machine numba's OpenMP threads wait on each other (measured 4x slower with 2 threads
# than with 1 on a busy 2-core machine); nogil lets the caller run other work beside it
@njit(cache=True, nogil=True, boundscheck=False)
def _fill_counts(seeds, n, out, limit):
    """Row b of ``out`` = the counts of n draws with replacement from 0..n-1, from the stream of seeds[b];
    returns False if a count would pass ``limit`` (65,535 for uint16 rows: then the caller counts in float64,
    with no limit, from the same draws).

    An index is the high word of (32 random bits x n) (Lemire), with rejection of
    the few values that would make it biased, so every index is equally likely.
    uint16 keeps a row of 100,000 queries in the L2 cache: the increments land
    at random places in it.
    """
    threshold = np.uint64((2 ** 32 - n) % n)
    for b in range(seeds.shape[0]):
        state = np.empty(1, np.uint64)
        state[0] = seeds[b]
        row = out[b]
        row[:] = 0
        drawn = 0
        while drawn < n:
            x = _next(state)
            for half in range(2):
                if drawn >= n:
                    break
                r = (x >> np.uint64(32 * half)) & np.uint64(0xFFFFFFFF)
                m = r * np.uint64(n)
                if (m & np.uint64(0xFFFFFFFF)) < threshold:
                    continue
                i = np.int64(m >> np.uint64(32))
                if row[i] >= limit:
                    return False
                row[i] += 1
                drawn += 1
    return True


@njit(cache=True, nogil=True, boundscheck=False)
def _fill_signs(seeds, q0, q1, out):
    """out[b, q - q0] = the sign of query q in flip b, for q in [q0, q1) (q0 a multiple of 64): bit q % 64 of
    the (q // 64 + 1)-th value of the stream of seeds[b] is set for −1. splitmix64 is counter-based, so any
    span of queries is drawn without the ones before it."""
    for b in range(seeds.shape[0]):
        state = np.empty(1, np.uint64)
        row = out[b]
        q = q0
        while q < q1:
            state[0] = seeds[b] + np.uint64(q // 64) * np.uint64(0x9E3779B97F4A7C15)
            x = _next(state)
            for bit in range(64):
                if q >= q1:
                    break
                row[q - q0] = -1.0 if (x >> np.uint64(bit)) & np.uint64(1) else 1.0
                q += 1


def stream_seeds(seed: int, count: int, stream: int) -> np.ndarray:
    """One 64-bit seed per resample (``stream`` 0: bootstrap, 1: permutations), from ``default_rng(seed)``."""
    rng = np.random.default_rng([int(seed), int(stream)])
    return rng.integers(0, 2 ** 63, size=count, dtype=np.int64).astype(np.uint64)


def resample_counts(n: int, seeds: np.ndarray) -> np.ndarray:
    """(len(seeds), n) float64: row b = how often each of n queries is drawn in resample b (rows sum to n)."""
    seeds = np.ascontiguousarray(seeds, np.uint64)
    compact = np.empty((len(seeds), n), np.uint16)
    if _fill_counts(seeds, n, compact, 65535.0):
        return compact.astype(np.float64)
    out = np.empty((len(seeds), n), np.float64)
    _fill_counts(seeds, n, out, np.inf)
    return out


def random_signs(n: int, seeds: np.ndarray) -> np.ndarray:
    """(len(seeds), n) float64 of ±1: row b is one random sign flip of n paired differences."""
    out = np.empty((len(seeds), n), np.float64)
    _fill_signs(np.ascontiguousarray(seeds, np.uint64), 0, n, out)
    return out


@njit(cache=True, nogil=True, boundscheck=False)
def _counts_product(rows, matrix, out):
    """out[b, j] = Σ_q rows[b, q] · matrix[q, j], summed in query order q = 0, 1, ..., n-1.

    Compiled, not BLAS: a BLAS product's rounding depends on the other columns in
    the call, the block's size, the library and the CPU (measured here: a mean's
    bootstrap moved by 6e-16 when other metrics were resampled with it), and the
    intervals must be the same whatever is compared beside them and wherever they
    run. Each sum is one column's own, in one fixed order; the loop over columns
    is the vectorised one, so no sum is reordered. A zero count adds +-0, which
    changes no sum (no branch on it: it would mispredict).
    """
    width = matrix.shape[1]
    for b in range(rows.shape[0]):
        acc = out[b]
        for j in range(width):
            acc[j] = 0.0
        row = rows[b]
        for q in range(rows.shape[1]):
            c = np.float64(row[q])
            values = matrix[q]
            for j in range(width):
                acc[j] += c * values[j]


# --------------------------------------------------------------------------- the work on every core


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def block_spans(count: int) -> list[slice]:
    """``count`` resamples as one contiguous run of whole blocks per core: each resample is drawn from its own
    seed, so how they are split changes no number."""
    blocks = -(-count // BLOCK)
    parts = max(1, min(_cores(), blocks))
    step = -(-blocks // parts) * BLOCK
    return [slice(start, min(start + step, count)) for start in range(0, count, step)]


def on_every_core(work, spans: list[slice]) -> list:
    """``work(span)`` for each span, side by side on threads (the draws are compiled without the GIL and the
    products are BLAS calls, so threads use every core; one BLAS thread each, see ``one_blas_thread``)."""
    with one_blas_thread():
        if len(spans) == 1:
            return [work(spans[0])]
        with ThreadPoolExecutor(len(spans)) as pool:
            return list(pool.map(work, spans))


def distinct_columns(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first, index): the first column of each distinct value among ``matrix``'s columns, and for column j the
    position of its value in ``first``. Equal columns have equal products, so each is multiplied once (a report's
    hit@1, P@1, nDCG@1 and RR@1 are the same column on binary judgements)."""
    seen: dict[bytes, int] = {}
    index = np.array([seen.setdefault(np.ascontiguousarray(matrix[:, j]).tobytes(), len(seen))
                      for j in range(matrix.shape[1])], np.int64)
    return np.unique(index, return_index=True)[1], index


# --------------------------------------------------------------------------- bootstrap


def _matrix(values) -> np.ndarray:
    v = np.asarray(values, dtype=np.float64)
    return v[:, None] if v.ndim == 1 else v


@njit(cache=True, nogil=True, boundscheck=False)
def _code_sums(rows, order, bounds, out):
    """out[b, c] = Σ_q rows[b, q] [code_q = c]: the counts times a one-hot matrix, without the matrix.
    ``order`` lists the queries by code, code c's from bounds[c] to bounds[c + 1] (queries whose code is
    outside the codes are not listed); each sum is kept in a register."""
    for b in range(rows.shape[0]):
        row = rows[b]
        for c in range(out.shape[1]):
            total = 0.0
            for i in range(bounds[c], bounds[c + 1]):
                total += row[order[i]]
            out[b, c] = total


def bootstrap_code_shares(codes, n_codes: int, resamples: int, seed: int, cumulative: bool = False) -> np.ndarray:
    """(resamples, n_codes): the share of each code among the queries of each bootstrap resample (the same
    resamples as ``bootstrap_means`` with that seed): share*_b(c) = Σ_q c_bq [code_q = c] / n;
    ``cumulative``: of the codes <= c.

    The cumulative shares are the means of indicator columns [code_q <= c] (a CMC
    from first ranks) at the cost of one column, not one per code; the counts are
    summed before the one division, so they equal those means exactly.
    """
    codes = np.asarray(codes, np.int64)
    return bootstrap_means(np.empty((len(codes), 0)), resamples, seed, codes, n_codes, cumulative)[1]


def _code_order(codes: np.ndarray, n_codes: int) -> tuple[np.ndarray, np.ndarray]:
    """(order, bounds) for ``_code_sums``: the queries with a code in 0..n_codes-1, by code."""
    inside = np.flatnonzero((codes >= 0) & (codes < n_codes))
    order = inside[np.argsort(codes[inside], kind="stable")]
    return order, np.searchsorted(codes[order], np.arange(n_codes + 1)).astype(np.int64)


@overload
def bootstrap_means(values, resamples: int, seed: int) -> np.ndarray: ...


@overload
def bootstrap_means(values, resamples: int, seed: int, codes: np.ndarray, n_codes: int,
                    cumulative: bool = False) -> tuple[np.ndarray, np.ndarray]: ...


def bootstrap_means(values, resamples: int, seed: int, codes=None, n_codes: int = 0, cumulative: bool = False):
    """(resamples, M): the mean of every column of ``values`` (n, M) in each bootstrap resample of its rows.

    mean*_b = Σ_q c_bq v_q / Σ_q c_bq [v_q not NaN], c_b the counts of resample b:
    NaN values leave the mean as the summary does (a column's mean over the
    queries where it is defined), the same resample for every column.
    With ``codes`` (an int per query), also ``bootstrap_code_shares`` of the same
    draws: (means, shares).
    """
    v = _matrix(values)
    n, width = v.shape
    out = np.full((resamples, width), np.nan)
    shares = np.full((resamples, n_codes), np.nan)
    if n == 0:
        return out if codes is None else (out, shares)
    defined = ~np.isnan(v)
    filled = np.where(defined, v, 0.0)
    complete = bool(defined.all())
    seeds = stream_seeds(seed, resamples, 0)
    # one product gives the sums and, where values are missing, the number of defined values drawn
    matrix = filled if complete else np.hstack([filled, defined.astype(np.float64)])
    first, index = distinct_columns(matrix)
    sums = np.empty((resamples, len(first)))
    order = None if codes is None else _code_order(np.asarray(codes, np.int64), n_codes)

    def span(part: slice) -> None:
        coded = None if order is None else (*order, shares[part])
        _bootstrap_blocks(seeds[part], n, matrix[:, first], sums[part], coded)

    on_every_core(span, block_spans(resamples))
    if width:
        total = sums[:, index]
        if complete:
            out[:] = total / n
        else:
            with np.errstate(invalid="ignore", divide="ignore"):
                out[:] = total[:, :width] / total[:, width:]
    if codes is None:
        return out
    return out, (np.cumsum(shares, axis=1) if cumulative else shares) / n


def one_blas_thread():
    """One BLAS thread for the block products: they are small, and on a busy machine BLAS threads waiting on
    each other made them 10x slower (measured: 1.0-1.6 s against 0.11 s a block on 2 shared cores)."""
    return threadpool_limits(limits=1, user_api="blas")


def _bootstrap_blocks(seeds: np.ndarray, n: int, matrix: np.ndarray, out: np.ndarray,
                      coded: tuple | None = None) -> None:
    """The resamples of ``seeds`` a block at a time: their counts times ``matrix`` into ``out``; with ``coded``
    (order, bounds, sums) also the counts' sums per code into sums (from the same draws)."""
    resamples = len(seeds)
    compact = np.empty((min(BLOCK, resamples), n), np.uint16)
    matrix = np.ascontiguousarray(matrix, np.float64)
    for start in range(0, resamples, BLOCK):
        block = seeds[start:start + BLOCK]
        rows = compact[:len(block)]
        if not _fill_counts(block, n, rows, 65535.0):
            rows = resample_counts(n, block)  # a count beyond uint16: count in float64 (the same draws)
        if coded is not None:
            _code_sums(rows, coded[0], coded[1], coded[2][start:start + len(block)])
        if matrix.shape[1]:
            part = np.empty((len(block), matrix.shape[1]))
            _counts_product(rows, matrix, part)
            out[start:start + len(block)] = part


def percentile_interval(means: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """The percentile interval of each column of bootstrap means: its (1-level)/2 and (1+level)/2 quantiles
    (numpy's default linear interpolation, as scipy.stats.bootstrap(method="percentile"))."""
    alpha = (1 - level) / 2
    with np.errstate(invalid="ignore"):
        low, high = np.nanpercentile(means, [100 * alpha, 100 * (1 - alpha)], axis=0) \
            if means.size and not np.isnan(means).all() else (np.full(means.shape[1], np.nan),) * 2
    return np.asarray(low, np.float64), np.asarray(high, np.float64)


def mean_interval(values, level: float, resamples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) per column: the percentile bootstrap interval of the mean of ``values`` (n, M)."""
    return percentile_interval(bootstrap_means(values, resamples, seed), level)


# --------------------------------------------------------------------------- paired tests


def paired_differences(baseline, run) -> np.ndarray:
    """d_q = m_run(q) − m_baseline(q), per query (and column)."""
    return np.asarray(run, dtype=np.float64) - np.asarray(baseline, dtype=np.float64)


def _reaches(stat: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """|mean d*| >= |mean d|, with a relative tolerance for sums taken in another order."""
    return np.abs(stat) >= np.abs(observed) * (1 - RELATIVE_TOLERANCE)


def all_sign_flips(n: int) -> np.ndarray:
    """(2^n, n) of ±1: every sign flip of n differences (row i flips q where bit q of i is set)."""
    codes = np.arange(2 ** n, dtype=np.int64)[:, None]
    return 1.0 - 2.0 * ((codes >> np.arange(n)) & 1).astype(np.float64)


def randomization_p(differences, permutations: int, seed: int) -> np.ndarray:
    """Two-sided sign-flip test of the mean of d, per column of ``differences`` (n, M).

    n <= 20: exact, p = #{flips s : |mean s·d| >= |mean d|} / 2^n over all 2^n
    flips. Else p = (1 + #{|mean d*| >= |mean d|}) / (1 + P) over P random flips.
    A column whose d are all 0 gets p = 1; NaN differences are left out of their column.
    """
    d = _matrix(differences)
    p = np.full(d.shape[1], np.nan)
    defined = ~np.isnan(d)
    # columns defined on the same queries are tested together: the same rows, so the same flips as one by one
    first, index = distinct_columns(defined)
    for g, j in enumerate(first):
        members = np.flatnonzero(index == g)
        p[members] = _randomization_block(d[defined[:, j]][:, members], permutations, seed)
    return p


def _randomization_block(d: np.ndarray, permutations: int, seed: int) -> np.ndarray:
    n, width = d.shape
    if n == 0:
        return np.full(width, np.nan)
    observed = d.mean(axis=0)
    if n <= EXACT_MAX:
        hits = np.zeros(width, np.int64)
        flips = all_sign_flips(n)
        for start in range(0, len(flips), 1 << 16):
            hits += _reaches((flips[start:start + (1 << 16)] @ d) / n, observed).sum(axis=0)
        return hits / float(len(flips))
    seeds = stream_seeds(seed, permutations, 1)
    first, index = distinct_columns(d)
    unique = np.ascontiguousarray(d[:, first])
    hits = sum(on_every_core(lambda part: _sign_flip_hits(seeds[part], unique, observed[first]),
                             block_spans(permutations)))
    return (1 + hits[index]) / (1.0 + permutations)


#: queries per slice of the sign-flip products: a BLOCK x SLICE float64 slice (2 MiB) stays in cache
SLICE = 1024


def _sign_flip_hits(seeds: np.ndarray, d: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """#{flips b : |mean s_b·d| reaches |mean d|} per column, over the flips drawn from ``seeds``."""
    n, width = d.shape
    hits = np.zeros(width, np.int64)
    signs = np.empty((min(BLOCK, len(seeds)), SLICE), np.float64)
    for start in range(0, len(seeds), BLOCK):
        block = seeds[start:start + BLOCK]
        sums = np.zeros((len(block), width))
        # the signs of a slice of queries are drawn into the cache and used there (counter-based draws)
        for q0 in range(0, n, SLICE):
            q1 = min(q0 + SLICE, n)
            part = signs[:len(block), :q1 - q0]
            _fill_signs(block, q0, q1, part)
            sums += part @ d[q0:q1]
        hits += _reaches(sums / n, observed).sum(axis=0)
    return hits


def ttest_p(differences) -> np.ndarray:
    """Paired t-test p-value per column (as scipy.stats.ttest_rel, two-sided): t = mean d / (sd d / √n),
    sd with n − 1, p = 2·P(T_{n−1} >= |t|). All d equal: p = 1 when they are 0, else 0 (scipy gives NaN);
    fewer than 2 queries: NaN. NaN differences are left out of their column."""
    # deferred: scipy.special costs 0.2 s to import, and every evaluate imports this module (--ci)
    from scipy.special import stdtr

    d = _matrix(differences)
    out = np.full(d.shape[1], np.nan)
    for j in range(d.shape[1]):
        x = d[~np.isnan(d[:, j]), j]
        n = len(x)
        if n < 2:
            continue
        mean = x.mean()
        sd = x.std(ddof=1)
        if sd == 0 or not np.isfinite(sd):
            out[j] = 1.0 if mean == 0 else 0.0
            continue
        t = mean / (sd / math.sqrt(n))
        out[j] = float(2 * stdtr(n - 1, -abs(t)))  # the t distribution's CDF below -|t|, twice
    return out


def holm(p_values) -> np.ndarray:
    """Holm–Bonferroni adjusted p-values: sorted ascending p_(1..m), adj_(i) = max_{j<=i} min(1, (m−j+1)·p_(j)).
    NaN p-values stay NaN and do not count in m."""
    p = np.asarray(p_values, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    idx = np.flatnonzero(~np.isnan(p))
    if not len(idx):
        return out
    order = idx[np.argsort(p[idx], kind="stable")]
    m = len(order)
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    out[order] = np.maximum.accumulate(scaled)
    return out


@dataclass(frozen=True)
class Tally:
    """Queries where the run is better (wins), equal (ties) or worse (losses) than the baseline."""

    wins: int
    ties: int
    losses: int


def wins_ties_losses(differences, higher_is_better: bool = True) -> Tally:
    """Count d_q > 0, = 0, < 0 (the other way round when lower is better); NaN differences are left out."""
    d = np.asarray(differences, dtype=np.float64)
    d = d[~np.isnan(d)]
    better, worse = (d > 0, d < 0) if higher_is_better else (d < 0, d > 0)
    return Tally(int(better.sum()), int((d == 0).sum()), int(worse.sum()))


# --------------------------------------------------------------------------- one paired comparison


@dataclass(frozen=True)
class PairedResult:
    """One metric compared on paired queries: the row of comparison.parquet, its names aside."""

    n: int
    mean_baseline: float
    mean_run: float
    diff: float
    ci_low: float
    ci_high: float
    p_randomization: float
    p_ttest: float
    wins: int
    ties: int
    losses: int


def defined_differences(baseline, run) -> np.ndarray:
    """d = run − baseline per query and column, NaN where either value is undefined."""
    a, b = _matrix(baseline), _matrix(run)
    if a.shape != b.shape:
        raise ValueError(f"paired values differ in shape: {a.shape} and {b.shape}")
    return np.where(np.isnan(a) | np.isnan(b), np.nan, paired_differences(a, b))


def compare_paired(baseline, run, method: Method, higher_is_better=True,
                   interval: tuple[np.ndarray, np.ndarray] | None = None) -> list[PairedResult]:
    """Every column of ``baseline`` and ``run`` (n, M), paired by row: difference, interval, tests, tally.

    A query enters a column when both its values are defined. ``higher_is_better``:
    one bool, or one per column. ``interval``: the (low, high) of the
    differences' means when the caller bootstrapped them itself (with other
    columns, in one pass).
    """
    a, b = _matrix(baseline), _matrix(run)
    d_defined = defined_differences(a, b)
    low, high = interval if interval is not None else \
        mean_interval(d_defined, method.level, method.resamples, method.seed)
    p_rand = randomization_p(d_defined, method.permutations, method.seed)
    p_t = ttest_p(d_defined)
    directions = np.broadcast_to(np.asarray(higher_is_better, dtype=bool), (a.shape[1],))
    out = []
    for j in range(a.shape[1]):
        keep = ~np.isnan(d_defined[:, j])
        tally = wins_ties_losses(d_defined[keep, j], bool(directions[j]))
        n = int(keep.sum())
        out.append(PairedResult(n, _mean(a[keep, j]), _mean(b[keep, j]), _mean(d_defined[keep, j]), float(low[j]),
                                float(high[j]), float(p_rand[j]), float(p_t[j]), tally.wins, tally.ties,
                                tally.losses))
    return out


def _mean(x: np.ndarray) -> float:
    return float(x.mean()) if len(x) else math.nan


def significant(p_value: float, alpha: float) -> bool:
    """The test rejects "no difference" at level ``alpha``."""
    return bool(p_value == p_value and p_value < alpha)


def statistically_tied(leader, other, alpha: float = 0.05, method: Method = Method()) -> bool:
    """Whether ``other``'s per-query values are statistically tied with the ``leader``'s on the same queries:
    the two-sided sign-flip test of their mean difference does not reject at ``alpha`` (for leaderboards)."""
    d = paired_differences(leader, other)
    return not significant(float(randomization_p(d, method.permutations, method.seed)[0]), alpha)


def marks(p_value: float) -> str:
    """Significance marks of a (Holm-adjusted) p-value: *** < 0.001, ** < 0.01, * < 0.05."""
    if not p_value == p_value:
        return ""
    return "***" if p_value < 0.001 else "**" if p_value < 0.01 else "*" if p_value < 0.05 else ""
