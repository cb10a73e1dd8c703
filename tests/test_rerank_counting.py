"""The count-based re-ranked scan (core/scan/rerank.py) where its error bounds are tight or do not apply.

Pairs are counted from float32 estimates of their cosine, within the error
bound; pairs at cosine ~1 (where the final distance stops being monotone in
the cosine), lambda = 0 (every pair without a shared term at exactly the
same distance) and a gallery wider than one score tile (the running bars
carried from tile to tile) are the cases where a wrong shortcut would show.
Each is compared with the dense float64 reference (tests/rerank_reference.py)
through the same checks as tests/test_rerank.py.
"""
from __future__ import annotations

import numpy as np
import pytest
from conftest import random_reid
from test_rerank import assert_equal_to_reference, run


def test_queries_copied_into_the_gallery():
    """Query rows also in the gallery (cosine 1 up to rounding, beyond 1 after normalisation) rank exactly."""
    arrays = random_reid(np.random.default_rng(21), n_query=60, n_gallery=500, n_ids=25, spread=0.8)
    arrays["gallery/emb"][100:160] = arrays["query/emb"]
    arrays["gallery/emb"][300:330] = arrays["query/emb"][:30] * np.float32(3.0)  # same direction, other norm
    for ties in ("pessimistic", "optimistic"):
        result = run(arrays, "reid", (10, 4, 0.3), ties=ties)
        assert_equal_to_reference(result, arrays, "reid", (10, 4, 0.3), ties=ties)


@pytest.mark.parametrize("params", [(10, 3, 0.0), (6, 2, 1.0)])
def test_lambda_at_its_ends(params):
    """lambda = 0: every pair without a shared term is at final distance exactly 1 (a tie broken by policy and
    index); lambda = 1: the final distance is the scaled original alone."""
    arrays = random_reid(np.random.default_rng(22), n_query=50, n_gallery=400, n_ids=20, spread=0.8)
    for ties in ("pessimistic", "optimistic"):
        result = run(arrays, "class", params, ties=ties)
        assert_equal_to_reference(result, arrays, "class", params, ties=ties)


def test_gallery_wider_than_a_score_tile():
    """4,200 gallery rows: two score tiles of 4,096 columns, so bars and rank 1 carry from one tile to the next."""
    arrays = random_reid(np.random.default_rng(23), n_query=40, n_gallery=4200, n_ids=120, spread=0.7)
    result = run(arrays, "reid", (8, 3, 0.3))
    assert_equal_to_reference(result, arrays, "reid", (8, 3, 0.3))


def test_relevant_and_negative_copies_of_the_query_tie():
    """Each query twice in the gallery, once relevant and once not: an exact tie at cosine ~1, which the
    bounds must leave to exact final distances (pessimistic: the negative first)."""
    arrays = random_reid(np.random.default_rng(24), n_query=40, n_gallery=400, n_ids=20, spread=0.8,
                         global_junk=0.0)
    q = arrays["query/emb"]
    arrays["gallery/emb"][100:140] = q
    arrays["gallery/label"][100:140] = arrays["query/label"]
    arrays["gallery/emb"][200:240] = q
    arrays["gallery/label"][200:240] = arrays["query/label"] + 1000
    for ties in ("pessimistic", "optimistic"):
        result = run(arrays, "class", (6, 3, 0.3), ties=ties)
        assert_equal_to_reference(result, arrays, "class", (6, 3, 0.3), ties=ties)


def test_plain_gate_skips_only_what_the_bounds_would_not_count():
    """The fold's one-comparison gate: every float32 estimate below it has v + e < 1 and -final(v + e) below
    the bar, computed as the fold computes it (so skipping it changes nothing), and the gate sits within a
    few float32 steps of the bar's cosine minus e (so it does skip the pairs far from every threshold)."""
    from evalcore.core.scan.rerank import _negated, _plain_gate

    rng = np.random.default_rng(31)
    found = 0
    for _ in range(3000):
        lam = float(rng.choice([0.0, 1.0, rng.uniform(0.01, 0.99)]))
        m = float(rng.uniform(0.5, 16.0))
        e = float(10.0 ** rng.uniform(-9, -4))
        c_bar = float(rng.choice([1.0, rng.uniform(-1.0, 1.0)]))
        bar = float(_negated(c_bar, 1.0, m, lam)) + float(rng.choice([0.0, 1e-12, -1e-12]))
        gate = _plain_gate(bar, e, m, lam)
        if gate == -np.inf:
            assert lam == 0.0 and bar <= -1.0 or not c_bar - e > -1.0, (bar, e, m, lam)
            continue
        found += 1
        below = np.nextafter(gate, np.float32(-np.inf))
        for v in (below, np.nextafter(below, np.float32(-np.inf)), np.float32(-1.0)):
            if v < gate:
                x = np.float64(v) + e
                assert x < 1.0 and _negated(x, 1.0, m, lam) < bar, (bar, e, m, lam, gate, v)
        if 0.0 < lam and c_bar < 0.999:
            assert gate >= np.float32(c_bar - e) - 1e-5 * max(1.0, abs(c_bar)), (bar, e, m, lam, gate)
    assert found > 2000
