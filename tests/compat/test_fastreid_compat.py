"""evalcore.compat.fastreid.evaluate_rank: fast-reid's call and return value, against a brute-force reference.

fast-reid publishes no test with expected values (its
fastreid/evaluation/rank_cylib/test_cython.py compares its Python and Cython
paths on random data and prints them), so the reference is
market1501_reference.py, written from fastreid/evaluation/rank.py
(eval_market1501: CMC, AP and INP per counted query).
"""
from __future__ import annotations

import inspect

import numpy as np
import pytest
from market1501_reference import market1501_reference

from evalcore.compat import fastreid, torchreid
from evalcore.errors import InputError


def cosine_reid(seed, num_q=30, num_g=300, dim=64):
    """fast-reid's test_cython.py data: 1 - cosine of random non-negative features, random pids and camids
    (some query pids beyond the gallery's)."""
    rng = np.random.default_rng(seed)
    q = rng.random((num_q, dim)).astype(np.float32)
    g = rng.random((num_g, dim)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    distmat = 1 - q @ g.T
    return (distmat, rng.integers(0, num_q + 10, num_q), rng.integers(0, num_q, num_g),
            rng.integers(0, 5, num_q), rng.integers(0, 5, num_g))


def assert_same(got, expected):
    cmc, all_ap, all_inp = got
    want_cmc, want_ap, want_inp = expected
    assert cmc.dtype == np.float32 and cmc.shape == want_cmc.shape
    np.testing.assert_allclose(cmc, want_cmc.astype(np.float32), rtol=1e-6, atol=0)
    assert len(all_ap) == len(want_ap) and len(all_inp) == len(want_inp)
    np.testing.assert_allclose(all_ap, want_ap, rtol=1e-12, atol=0)
    np.testing.assert_allclose(all_inp, want_inp, rtol=1e-12, atol=0)


def test_signature_is_fastreids():
    # fastreid/evaluation/rank.py: evaluate_rank(distmat, q_pids, g_pids, q_camids, g_camids, max_rank=50,
    #                                            use_metric_cuhk03=False, use_cython=True)
    parameters = inspect.signature(fastreid.evaluate_rank).parameters
    assert [(p.name, p.default) for p in parameters.values()] == [
        ("distmat", inspect.Parameter.empty), ("q_pids", inspect.Parameter.empty),
        ("g_pids", inspect.Parameter.empty), ("q_camids", inspect.Parameter.empty),
        ("g_camids", inspect.Parameter.empty), ("max_rank", 50), ("use_metric_cuhk03", False),
        ("use_cython", True), ("seed", 0)]  # seed: evalcore's extra keyword for use_metric_cuhk03


@pytest.mark.parametrize("seed", range(5))
def test_calls_as_fastreid_users_write_them_match_the_reference(seed):
    distmat, q_pids, g_pids, q_camids, g_camids = cosine_reid(seed)
    expected5 = market1501_reference(distmat, q_pids, g_pids, q_camids, g_camids, 5)
    assert 0 < len(expected5[1]) < len(q_pids)  # some queries skipped, some counted
    # test_cython.py's call, and ReidEvaluator's (fastreid/evaluation/reid_evaluation.py: the default max_rank)
    assert_same(fastreid.evaluate_rank(distmat, q_pids, g_pids, q_camids, g_camids, 5, use_cython=False), expected5)
    expected50 = market1501_reference(distmat, q_pids, g_pids, q_camids, g_camids, 50)
    cmc, all_AP, all_INP = fastreid.evaluate_rank(distmat, q_pids, g_pids, q_camids, g_camids)
    assert_same((cmc, all_AP, all_INP), expected50)
    # ReidEvaluator then reports np.mean of each list; the mAP equals torchreid's
    assert np.mean(all_AP) == pytest.approx(torchreid.evaluate_rank(distmat, q_pids, g_pids, q_camids,
                                                                    g_camids)[1], rel=1e-12)
    assert np.mean(all_INP) == pytest.approx(np.mean(expected50[2]), rel=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_string_identities_and_keywords_match_the_reference(seed):
    distmat, q_pids, g_pids, q_camids, g_camids = cosine_reid(seed + 10)
    args = dict(distmat=distmat.astype(np.float64), q_pids=[f"person_{p}" for p in q_pids],
                g_pids=[f"person_{p}" for p in g_pids], q_camids=[f"c{c}" for c in q_camids],
                g_camids=[f"c{c}" for c in g_camids])
    expected = market1501_reference(*args.values(), 10)
    assert_same(fastreid.evaluate_rank(**args, max_rank=10, use_metric_cuhk03=False, use_cython=True), expected)


def test_inp_under_ties_counts_pessimistically():
    distmat, q_pids, g_pids, q_camids, g_camids = cosine_reid(20, num_g=200)
    distmat = np.round(distmat * 20).astype(np.float32)  # a handful of distance levels
    g_pids = g_pids % 12
    q_pids = q_pids % 12
    expected = market1501_reference(distmat, q_pids, g_pids, q_camids, g_camids, 20)
    assert_same(fastreid.evaluate_rank(distmat, q_pids, g_pids, q_camids, g_camids, 20), expected)


def test_tensors_are_taken_as_fastreid_users_pass_them():
    torch = pytest.importorskip("torch")
    distmat, q_pids, g_pids, q_camids, g_camids = cosine_reid(30)
    expected = market1501_reference(distmat, q_pids, g_pids, q_camids, g_camids, 10)
    got = fastreid.evaluate_rank(torch.from_numpy(distmat), torch.from_numpy(q_pids), torch.from_numpy(g_pids),
                                 torch.from_numpy(q_camids), torch.from_numpy(g_camids), 10)
    assert_same(got, expected)


@pytest.mark.parametrize("change, name", [
    (dict(distmat=np.full((2, 3), np.nan)), "distmat"),
    (dict(distmat=np.zeros((3, 3))), "q_pids"),  # 2 pids for 3 rows
    (dict(use_metric_cuhk03=True, seed=-1), "seed"),
    (dict(q_pids=[9, 9]), "q_pids"),
])
def test_bad_input_is_one_input_error_naming_fastreids_parameter(change, name):
    args = dict(distmat=np.array([[0.1, 0.2, 0.3], [0.3, 0.2, 0.1]]), q_pids=[1, 2], g_pids=[1, 2, 2],
                q_camids=[0, 0], g_camids=[1, 1, 1])
    with pytest.raises(InputError) as info:
        fastreid.evaluate_rank(**{**args, **change})
    assert str(info.value).startswith(f"{name}: ") and "\n" not in str(info.value)
