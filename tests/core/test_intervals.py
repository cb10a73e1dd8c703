"""core.intervals against independent references: scipy.stats (bootstrap, permutation_test, ttest_rel),
full enumeration of sign flips written here, and Holm's step-down procedure written here."""
import itertools
import math

import numpy as np
import pytest
from scipy import stats

from evalcore.core import intervals as iv
from evalcore.errors import InputError


def enumerated_p(d):
    """Exact two-sided sign-flip p-value by looping over every flip (the definition, nothing shared)."""
    d = list(map(float, d))
    observed = abs(sum(d) / len(d))
    hits = total = 0
    for signs in itertools.product((1, -1), repeat=len(d)):
        total += 1
        if abs(sum(s * x for s, x in zip(signs, d)) / len(d)) >= observed - 1e-12:
            hits += 1
    return hits / total


def holm_direct(p):
    """Holm's step-down procedure as textbooks state it: reject in ascending order while p_(i) <= alpha/(m-i+1);
    the adjusted value is the smallest alpha at which p_(i) is rejected."""
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adjusted[i] = running
    return adjusted


def test_counts_are_resamples_with_replacement_of_every_query_equally():
    counts = iv.resample_counts(50, iv.stream_seeds(3, 4000, 0))
    assert counts.shape == (4000, 50) and (counts.sum(axis=1) == 50).all()
    assert (counts == np.round(counts)).all() and counts.min() >= 0
    # each query is drawn Binomial(50, 1/50) times: mean 1, variance 49/50
    assert abs(counts.mean() - 1) < 1e-12
    assert abs(counts.var() - 0.98) < 0.03
    per_query = counts.mean(axis=0)  # 4000 draws each: sd about 0.016
    assert np.abs(per_query - 1).max() < 0.08


def test_signs_are_fair_and_independent():
    signs = iv.random_signs(130, iv.stream_seeds(1, 2000, 1))
    assert set(np.unique(signs)) == {-1.0, 1.0}
    assert abs(signs.mean()) < 0.01
    assert abs(np.corrcoef(signs[:, 0], signs[:, 1])[0, 1]) < 0.06


@pytest.mark.parametrize("seed", [0, 7])
def test_percentile_interval_within_monte_carlo_error_of_scipy(seed):
    rng = np.random.default_rng(seed)
    values = np.column_stack([rng.exponential(1.0, 300), rng.integers(0, 2, 300).astype(float)])
    low, high = iv.mean_interval(values, 0.9, 20_000, seed)
    for j in range(values.shape[1]):
        ref = stats.bootstrap((values[:, j],), np.mean, confidence_level=0.9, method="percentile",
                              n_resamples=20_000, random_state=np.random.default_rng(seed + 100))
        width = ref.confidence_interval.high - ref.confidence_interval.low
        # Monte Carlo error of a 5% quantile over 20,000 resamples is about 1% of the width
        assert abs(low[j] - ref.confidence_interval.low) < 0.05 * width
        assert abs(high[j] - ref.confidence_interval.high) < 0.05 * width


def test_bootstrap_leaves_out_nan_as_the_mean_does():
    rng = np.random.default_rng(2)
    x = rng.random(40)
    with_nan = np.concatenate([x, [np.nan] * 10])
    means = iv.bootstrap_means(with_nan, 500, 0)[:, 0]
    # each resample's mean is a mean of values of x only: within x's range
    assert np.nanmin(means) >= x.min() and np.nanmax(means) <= x.max()
    assert np.isfinite(means).sum() >= 499


@pytest.mark.parametrize("n", [1, 5, 9, 12])
def test_exact_randomization_p_equals_full_enumeration(n):
    rng = np.random.default_rng(n)
    d = np.round(rng.normal(0.2, 1, n), 2)
    assert iv.randomization_p(d, 100, 0)[0] == pytest.approx(enumerated_p(d), abs=1e-15)


def test_monte_carlo_randomization_p_within_error_of_scipy_permutation_test():
    rng = np.random.default_rng(5)
    a = rng.random(60)
    b = a + rng.normal(0.04, 0.15, 60)
    ref = stats.permutation_test((a, b), lambda x, y: np.mean(y - x), permutation_type="samples",
                                 n_resamples=40_000, alternative="two-sided", random_state=1).pvalue
    got = iv.randomization_p(b - a, 20_000, 0)[0]
    assert 0.005 < ref < 0.5
    assert abs(got - ref) < 4 * math.sqrt(ref * (1 - ref) / 20_000) + 4 * math.sqrt(ref * (1 - ref) / 40_000)


def test_ttest_equals_scipy_ttest_rel():
    rng = np.random.default_rng(9)
    a = rng.random((50, 3))
    b = a + rng.normal([0.0, 0.05, 0.2], 0.3, (50, 3))
    got = iv.ttest_p(b - a)
    for j in range(3):
        assert got[j] == pytest.approx(stats.ttest_rel(b[:, j], a[:, j]).pvalue, rel=1e-10)


def test_holm_equals_the_step_down_procedure():
    rng = np.random.default_rng(11)
    for m in (1, 2, 7, 30):
        p = rng.random(m) ** 3
        assert iv.holm(p) == pytest.approx(holm_direct(list(p)), abs=1e-15)
    assert np.isnan(iv.holm([0.01, np.nan, 0.04])[1])
    assert iv.holm([0.01, np.nan, 0.04])[[0, 2]] == pytest.approx(holm_direct([0.01, 0.04]))


def test_a_run_compared_with_itself_differs_by_zero_with_p_one():
    rng = np.random.default_rng(4)
    values = rng.random((200, 2))
    for row in iv.compare_paired(values, values, iv.Method(resamples=200, permutations=200)):
        assert (row.diff, row.ci_low, row.ci_high) == (0.0, 0.0, 0.0)
        assert row.p_randomization == 1.0 and row.p_ttest == 1.0
        assert (row.wins, row.ties, row.losses) == (0, 200, 0)


def test_a_planted_improvement_is_significant_and_counted_the_right_way():
    rng = np.random.default_rng(8)
    a = rng.random(400)
    b = np.clip(a + rng.normal(0.05, 0.1, 400), 0, 1)
    higher, lower = iv.compare_paired(np.column_stack([a, a]), np.column_stack([b, b]),
                                      iv.Method(resamples=2000, permutations=2000), [True, False])
    assert higher.diff == pytest.approx(np.mean(b - a))
    assert 0 < higher.ci_low < higher.diff < higher.ci_high
    assert higher.p_randomization < 0.001 and higher.p_ttest < 1e-6
    assert higher.wins == int((b > a).sum()) and higher.losses == int((b < a).sum())
    assert (lower.wins, lower.losses) == (higher.losses, higher.wins)
    assert not iv.statistically_tied(a, b)
    assert iv.statistically_tied(a, a + rng.normal(0, 1e-3, 400) * 0)


def test_same_seed_same_numbers_different_seed_other_draws():
    rng = np.random.default_rng(1)
    v = rng.random((300, 2))
    one = iv.bootstrap_means(v, 700, 5)
    assert np.array_equal(one, iv.bootstrap_means(v, 700, 5))
    # the first resamples do not depend on how many are asked for (blocks are drawn by resample)
    assert np.array_equal(one[:300], iv.bootstrap_means(v, 300, 5))
    assert not np.array_equal(one, iv.bootstrap_means(v, 700, 6))
    assert iv.randomization_p(v[:, 0] - 0.5, 500, 5)[0] == iv.randomization_p(v[:, 0] - 0.5, 500, 5)[0]


@pytest.mark.parametrize("field,value", [("level", 0.0), ("level", 1.0), ("level", 95), ("resamples", 0),
                                         ("permutations", -1), ("seed", -2), ("resamples", 2.5)])
def test_bad_method_is_an_input_error_naming_the_option(field, value):
    with pytest.raises(InputError, match="--ci" if field == "level" else f"--{field}"):
        iv.Method(**{field: value}).checked()


def test_marks():
    assert [iv.marks(p) for p in (0.0005, 0.005, 0.02, 0.2, math.nan)] == ["***", "**", "*", "", ""]


@pytest.mark.parametrize("n", [5, 1500, 2600])
def test_block_means_equal_the_dense_product_of_the_counts(n):
    """The sliced, compact (uint16) products give the means of counts @ values / n, counts as drawn."""
    rng = np.random.default_rng(n)
    v = rng.random((n, 3))
    v[rng.random(n) < 0.1, 1] = np.nan
    counts = iv.resample_counts(n, iv.stream_seeds(2, 300, 0))
    wide = np.empty_like(counts)
    iv._fill_counts(iv.stream_seeds(2, 300, 0), n, wide, np.inf)
    assert np.array_equal(counts, wide)
    defined = ~np.isnan(v)
    expected = (counts @ np.where(defined, v, 0)) / (counts @ defined)
    assert np.allclose(iv.bootstrap_means(v, 300, 2), expected, rtol=1e-12, atol=0)
    signs = iv.random_signs(n, iv.stream_seeds(2, 50, 1))
    part = np.empty((50, max(1, n - 64)))
    iv._fill_signs(iv.stream_seeds(2, 50, 1), 64, n, part)  # a later span alone draws the same signs
    assert np.array_equal(part[:, :n - 64], signs[:, 64:]) or n <= 64


def test_the_products_leave_the_blas_threads_as_they_were():
    """The bootstrap and the sign-flip test each limit BLAS to one thread for their products: the process's
    BLAS thread counts afterwards are those from before (threadpoolctl reads them)."""
    from threadpoolctl import threadpool_info

    before = [(x["filepath"], x["num_threads"]) for x in threadpool_info() if x["user_api"] == "blas"]
    rng = np.random.default_rng(0)
    a = rng.random((3000, 4))
    iv.compare_paired(a, a + rng.normal(0, 0.1, a.shape), iv.Method(resamples=600, permutations=600))
    after = [(x["filepath"], x["num_threads"]) for x in threadpool_info() if x["user_api"] == "blas"]
    assert after == before, (before, after)


def test_code_shares_are_the_means_of_indicator_columns():
    """The one-pass CMC: cumulative code shares equal bootstrap means of the columns [code <= c], exactly."""
    rng = np.random.default_rng(6)
    codes = rng.integers(-1, 12, 700)  # -1 and 10, 11: outside the 10 codes, never counted
    indicators = np.column_stack([(codes >= 0) & (codes <= c) for c in range(10)]).astype(float)
    assert np.array_equal(iv.bootstrap_code_shares(codes, 10, 400, 3, cumulative=True),
                          iv.bootstrap_means(indicators, 400, 3))
    shares = iv.bootstrap_code_shares(codes, 10, 400, 3)
    assert np.allclose(shares.sum(axis=1), iv.bootstrap_means(((codes >= 0) & (codes < 10)).astype(float), 400, 3)[:, 0])


def test_a_column_s_bootstrap_is_the_same_whatever_is_resampled_beside_it():
    """A metric's interval cannot depend on which other metrics are compared with it, the block size or the
    machine's BLAS: each column's resampled sums are its own, in query order (the command line's compare, which
    adds the CMC columns, and evalcore.compare without them gave intervals 6e-16 apart with BLAS products)."""
    rng = np.random.default_rng(11)
    v = rng.random((2500, 30))
    v[rng.random(v.shape) < 0.05] = np.nan
    alone = iv.bootstrap_means(v[:, [3]], 700, 5)
    for columns in ([3, 0], [7, 3, 12], list(range(30))):
        beside = iv.bootstrap_means(v[:, columns], 700, 5)
        assert np.array_equal(beside[:, columns.index(3)], alone[:, 0], equal_nan=True), columns
    # each sum equals the exact (math.fsum) sum of its draws to the last bits
    counts = iv.resample_counts(2500, iv.stream_seeds(5, 700, 0))
    defined = ~np.isnan(v[:, 3])
    exact = [math.fsum(counts[b, defined] * v[defined, 3]) / counts[b, defined].sum() for b in range(0, 700, 70)]
    assert np.allclose(alone[::70, 0], exact, rtol=1e-14, atol=0)
