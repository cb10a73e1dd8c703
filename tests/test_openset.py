"""Threshold sweep and target FPIR against a direct count at every threshold."""
import numpy as np
import pytest
from conftest import random_reid

from evalcore.core import openset
from evalcore.engine.evaluate import Options, evaluate


def direct(score, correct, known, t):
    accepted = score >= t
    tp = int((accepted & correct).sum())
    fp = int((accepted & ~correct).sum())
    fn = int((~accepted & correct).sum())
    tn = int((~accepted & ~correct).sum())
    fpir = (accepted & ~known).sum() / (~known).sum() if (~known).any() else np.nan
    fnir = (known & ~(accepted & correct)).sum() / known.sum() if known.any() else np.nan
    return tp, fp, fn, tn, fpir, fnir


def test_sweep_matches_direct_counts_at_every_threshold():
    rng = np.random.default_rng(0)
    n = 400
    score = np.round(rng.random(n), 2)          # many equal scores: decision points shared
    known = rng.random(n) < 0.8
    correct = known & (rng.random(n) < score)
    pts = openset.sweep(score, correct, known)
    assert np.array_equal(pts["threshold"][:-1], np.unique(score)) and pts["threshold"][-1] == np.inf
    for i, t in enumerate(pts["threshold"]):
        want = direct(score, correct, known, t)
        got = tuple(pts[k][i] for k in ("tp", "fp", "fn", "tn", "fpir", "fnir"))
        assert got[:4] == want[:4]
        assert got[4] == pytest.approx(want[4]) and got[5] == pytest.approx(want[5])
    for target in (0.0, 0.05, 0.3, 1.0):
        t, fnir = openset.at_target_fpir(pts, target)
        finite = [x for x in pts["threshold"] if direct(score, correct, known, x)[4] <= target]
        lowest = min(finite)
        assert (t if t is not None else np.inf) == lowest
        assert fnir == pytest.approx(direct(score, correct, known, lowest)[5])


def test_sweep_through_evaluate_agrees_with_the_threshold_columns(write):
    """At the run's own threshold the sweep row equals the summary's open-set counts."""
    rng = np.random.default_rng(2)
    data = random_reid(rng, n_query=300, n_gallery=2000, dims=16, unknown=0.2)
    path = write(data)
    threshold = 0.75
    result = evaluate(path, Options(protocol="reid", ks=(1,), threshold=threshold))
    sweep, summary = openset.sweep_tables(result.per_query, result.summary, target_fpir=0.1)
    rows = [r for r in sweep.to_pylist() if r["group"] == "all"]
    at = min((r for r in rows if r["threshold"] >= threshold), key=lambda r: r["threshold"])
    s = summary.to_pylist()[0]
    assert (at["tp"], at["fp"], at["fn"], at["tn"]) == (s["tp"], s["fp"], s["fn"], s["tn"])
    assert at["fnir"] == pytest.approx(s["fnir"]) and at["fpir"] == pytest.approx(s["fpir"])
    assert s["fnir_at_target_fpir"] is not None and s["threshold_at_target_fpir"] is not None
    assert {r["group"] for r in sweep.to_pylist()} == {"all", "g0", "g1", "g2"}
