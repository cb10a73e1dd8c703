"""evalcore.compat.torchreid.evaluate_rank: torchreid's call and return value, against a brute-force reference.

torchreid publishes no test with expected values (its
torchreid/metrics/rank_cylib/test_cython.py only times and prints random
runs), so the reference is market1501_reference.py, written from the
definition in torchreid/metrics/rank.py (eval_market1501). torch is not
installed for these tests; the tensor test runs only where it is.
"""
from __future__ import annotations

import inspect
import time

import numpy as np
import pytest
from market1501_reference import market1501_reference

from evalcore.compat.torchreid import evaluate_rank
from evalcore.errors import InputError


def random_reid(seed, num_q=40, num_g=300, ids=25, cams=4, dtype=np.float32):
    """Distances with distinct values; pids include -1 (an identity like any other in torchreid) and queries
    whose identity is absent from the gallery or present only under their own camera."""
    rng = np.random.default_rng(seed)
    distmat = (rng.random((num_q, num_g)) * 20).astype(dtype)
    q_pids = rng.integers(-1, ids + 5, num_q)  # ids + 5: some identities no gallery item has
    g_pids = rng.integers(-1, ids, num_g)
    return distmat, q_pids, g_pids, rng.integers(0, cams, num_q), rng.integers(0, cams, num_g)


def as_strings(values, prefix):
    return np.array([f"{prefix}{v:04d}" for v in values])


def assert_same(got, expected):
    cmc, mAP = got
    want_cmc, want_ap, _ = expected
    assert cmc.dtype == np.float32 and cmc.shape == want_cmc.shape
    np.testing.assert_allclose(cmc, want_cmc.astype(np.float32), rtol=1e-6, atol=0)
    assert mAP == pytest.approx(np.mean(want_ap), rel=1e-12, abs=0)


def counted(expected, num_q):
    return 0 < len(expected[1]) < num_q  # some queries skipped, some counted: the skip rule is exercised


# --------------------------------------------------------------------------- calls as torchreid users write them


def test_signature_is_torchreids():
    # torchreid/metrics/rank.py: evaluate_rank(distmat, q_pids, g_pids, q_camids, g_camids, max_rank=50,
    #                                          use_metric_cuhk03=False, use_cython=True)
    parameters = inspect.signature(evaluate_rank).parameters
    assert [(p.name, p.default) for p in parameters.values()] == [
        ("distmat", inspect.Parameter.empty), ("q_pids", inspect.Parameter.empty),
        ("g_pids", inspect.Parameter.empty), ("q_camids", inspect.Parameter.empty),
        ("g_camids", inspect.Parameter.empty), ("max_rank", 50), ("use_metric_cuhk03", False),
        ("use_cython", True), ("seed", 0)]  # seed: evalcore's extra keyword for use_metric_cuhk03


@pytest.mark.parametrize("seed", range(5))
def test_positional_call_with_max_rank_matches_the_reference(seed):
    distmat, q_pids, g_pids, q_camids, g_camids = random_reid(seed)
    expected = market1501_reference(distmat, q_pids, g_pids, q_camids, g_camids, 5)
    assert counted(expected, len(q_pids))
    # as torchreid's test_cython.py calls it
    assert_same(evaluate_rank(distmat, q_pids, g_pids, q_camids, g_camids, 5, use_cython=False), expected)
    assert_same(evaluate_rank(distmat, q_pids, g_pids, q_camids, g_camids, 5), expected)


@pytest.mark.parametrize("seed", range(3))
def test_engine_style_and_keyword_calls_match_the_reference(seed):
    distmat, q_pids, g_pids, q_camids, g_camids = random_reid(seed + 10, num_g=120)
    expected = market1501_reference(distmat, q_pids, g_pids, q_camids, g_camids, 50)
    # as torchreid's engine calls it: the default max_rank=50
    assert_same(evaluate_rank(distmat, q_pids, g_pids, q_camids, g_camids, use_metric_cuhk03=False), expected)
    assert_same(evaluate_rank(distmat=distmat, q_pids=q_pids, g_pids=g_pids, q_camids=q_camids,
                              g_camids=g_camids, max_rank=50, use_metric_cuhk03=False, use_cython=True), expected)
    assert_same(evaluate_rank(distmat.tolist(), q_pids.tolist(), g_pids.tolist(), q_camids.tolist(),
                              g_camids.tolist()), expected)


@pytest.mark.parametrize("seed", range(4))
def test_string_pids_and_string_camids_match_the_reference(seed):
    distmat, q_pids, g_pids, q_camids, g_camids = random_reid(seed + 20, dtype=np.float64)
    args = (distmat, as_strings(q_pids, "p"), as_strings(g_pids, "p"), as_strings(q_camids, "c"),
            as_strings(g_camids, "c"))
    expected = market1501_reference(*args, 10)
    assert counted(expected, len(q_pids))
    assert_same(evaluate_rank(*args, 10), expected)
    # the same data as the integers: string coding changes nothing
    assert_same(evaluate_rank(distmat, q_pids, g_pids, q_camids, g_camids, 10), expected)


def test_mixed_hashable_identities_match_the_reference():
    distmat, q_pids, g_pids, q_camids, g_camids = random_reid(30)

    def mixed(values):  # odd ids as strings, even ones as ints, -1 as a tuple: Python == tells them apart
        return [("none",) if v == -1 else (f"id{v}" if v % 2 else int(v)) for v in values]

    args = (distmat, mixed(q_pids), mixed(g_pids), [f"cam{c}" for c in q_camids], list(g_camids))
    expected = market1501_reference(*args, 20)  # no query camera equals a gallery camera: nothing removed
    assert_same(evaluate_rank(*args, 20), expected)
    assert_same(evaluate_rank(distmat, mixed(q_pids), mixed(g_pids), q_camids, g_camids, 20),
                market1501_reference(distmat, mixed(q_pids), mixed(g_pids), q_camids, g_camids, 20))


# --------------------------------------------------------------------------- where torchreid's code leaves it open


@pytest.mark.parametrize("seed", range(3))
def test_tied_distances_count_pessimistically(seed):
    distmat, q_pids, g_pids, q_camids, g_camids = random_reid(seed + 40, num_g=200, ids=10)
    distmat = np.floor(distmat / 4).astype(np.float32)  # five distance levels: ties everywhere
    expected = market1501_reference(distmat, q_pids, g_pids, q_camids, g_camids, 20)
    cmc, mAP = evaluate_rank(distmat, q_pids, g_pids, q_camids, g_camids, 20)
    assert_same((cmc, mAP), expected)
    # some tie mixes a match and a non-match, so the order inside ties matters here
    assert any({*row[g_pids == pid]} & {*row[g_pids != pid]} for row, pid in zip(distmat, q_pids, strict=True))
    # never above the value np.argsort's (unstable, machine-dependent) order gives: its positions as distances
    positions = np.argsort(np.argsort(distmat, axis=1), axis=1)
    assert mAP <= np.mean(market1501_reference(positions, q_pids, g_pids, q_camids, g_camids, 20)[1]) + 1e-12


def test_float64_distances_are_compared_as_given():
    # 1 and 1 + 1e-12 are one float32 value: rounding first would tie the non-match with the match
    distmat = np.array([[1.0, 1.0 + 1e-12, 2.0]])
    cmc, mAP = evaluate_rank(distmat, [7], [7, 8, 9], [0], [1, 1, 1], 3)
    assert cmc.tolist() == [1.0, 1.0, 1.0] and mAP == 1.0


def test_infinite_distances_mask_pairs_out_as_in_torchreid():
    distmat, q_pids, g_pids, q_camids, g_camids = random_reid(45, num_g=100)
    distmat[:, ::3] = np.inf  # pairs masked out: last, tied with each other (argsort puts them last)
    expected = market1501_reference(distmat, q_pids, g_pids, q_camids, g_camids, 100)
    assert_same(evaluate_rank(distmat, q_pids, g_pids, q_camids, g_camids, 100), expected)


def test_max_rank_past_the_gallery_gives_one_point_per_gallery_item():
    distmat, q_pids, g_pids, q_camids, g_camids = random_reid(50, num_g=30)
    expected = market1501_reference(distmat, q_pids, g_pids, q_camids, g_camids, 50)
    cmc, _ = evaluate_rank(distmat, q_pids, g_pids, q_camids, g_camids, 50)
    assert cmc.shape == (30,)
    assert_same((cmc, _), expected)


def test_huge_max_rank_is_cut_to_the_gallery_before_any_work():
    distmat, q_pids, g_pids, q_camids, g_camids = random_reid(51, num_g=30)
    started = time.perf_counter()
    cmc, _ = evaluate_rank(distmat, q_pids, g_pids, q_camids, g_camids, 10 ** 15)
    assert cmc.shape == (30,) and time.perf_counter() - started < 10


def test_a_list_shorter_than_max_rank_after_removal_keeps_cmc_at_one():
    # the query's only other-camera match is at rank 1 of a 2-item list (4 items removed, same pid + cam)
    distmat = np.array([[0.5, 0.1, 0.2, 0.3, 0.4, 0.9], [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]], dtype=np.float32)
    q_pids, g_pids = ["a", "b"], ["a", "a", "a", "a", "a", "b"]
    q_cams, g_cams = [1, 1], [2, 1, 1, 1, 1, 2]
    expected = market1501_reference(distmat, q_pids, g_pids, q_cams, g_cams, 6)
    cmc, mAP = evaluate_rank(distmat, q_pids, g_pids, q_cams, g_cams, 6)
    assert_same((cmc, mAP), expected)
    assert cmc.tolist() == [0.5, 0.5, 0.5, 0.5, 0.5, 1.0]


def test_missing_pids_match_nothing_as_nan_does_in_torchreid():
    distmat = np.array([[0.1, 0.2, 0.3], [0.3, 0.2, 0.1]])
    q_pids, g_pids = np.array([np.nan, 1.0]), np.array([np.nan, 1.0, 1.0])
    expected = market1501_reference(distmat, q_pids, g_pids, [0, 0], [1, 1, 1], 3)  # NaN == NaN is False
    assert len(expected[1]) == 1
    assert_same(evaluate_rank(distmat, q_pids, g_pids, [0, 0], [1, 1, 1], 3), expected)


def test_tensors_are_taken_as_torchreid_users_pass_them():
    torch = pytest.importorskip("torch")
    distmat, q_pids, g_pids, q_camids, g_camids = random_reid(60)
    expected = market1501_reference(distmat, q_pids, g_pids, q_camids, g_camids, 10)
    got = evaluate_rank(torch.from_numpy(distmat), torch.from_numpy(q_pids), torch.from_numpy(g_pids),
                        torch.from_numpy(q_camids), torch.from_numpy(g_camids), 10)
    assert_same(got, expected)


# --------------------------------------------------------------------------- refused, naming torchreid's parameter


@pytest.mark.parametrize("change, name", [
    (dict(distmat=np.zeros(5)), "distmat"),
    (dict(distmat=np.full((2, 3), np.nan)), "distmat"),
    (dict(distmat=np.array([[np.inf, 0, np.finfo(np.float64).max]] * 2)), "distmat"),
    (dict(distmat=np.array([["a", "b", "c"]] * 2)), "distmat"),
    (dict(q_pids=[1, 2, 3]), "q_pids"),
    (dict(g_camids=[0, 1]), "g_camids"),
    (dict(q_camids=[None, 1]), "q_camids"),
    (dict(g_pids=[[1], [2], [3]]), "g_pids"),
    (dict(max_rank=0), "max_rank"),
    (dict(max_rank=2.5), "max_rank"),
    (dict(use_metric_cuhk03=True, seed=-1), "seed"),
    (dict(q_pids=[5, 6]), "q_pids"),                       # no query has a match: torchreid's assertion
    (dict(q_camids=[1, 1], g_camids=[1, 1, 1]), "q_pids"),  # every match under the query's own camera
    (dict(distmat=np.zeros((2, 0)), g_pids=[], g_camids=[]), "g_pids"),
])
def test_bad_input_is_one_input_error_naming_torchreids_parameter(change, name):
    args = dict(distmat=np.array([[0.1, 0.2, 0.3], [0.3, 0.2, 0.1]]), q_pids=[1, 2], g_pids=[1, 2, 2],
                q_camids=[0, 0], g_camids=[1, 1, 1])
    with pytest.raises(InputError) as info:
        evaluate_rank(**{**args, **change})
    assert str(info.value).startswith(f"{name}: ") and "\n" not in str(info.value)


def test_the_docstring_examples_run():
    import doctest

    import evalcore.compat.fastreid
    import evalcore.compat.torchreid
    import evalcore.io.identities

    for module in (evalcore.compat.torchreid, evalcore.compat.fastreid, evalcore.io.identities):
        failed, attempted = doctest.testmod(module)
        assert attempted > 0 and failed == 0, module.__name__
