"""compare pairs per-query values and reports the mean of their differences: a metric whose summary is not a
mean (gm_map, a geometric mean; num_rel_ret, a sum) must not appear there under its summary's name with an
arithmetic mean beside it (issue 38: a registered summary that compare would have misreported)."""
from __future__ import annotations

import numpy as np

import evalcore


def run(seed: int, tmp_path, name: str) -> str:
    rng = np.random.default_rng(seed)
    gallery = rng.normal(size=(60, 8)).astype(np.float32)
    query = gallery[:20] + rng.normal(scale=0.8, size=(20, 8)).astype(np.float32)
    labels = np.arange(60) % 10
    result = evalcore.evaluate(query=query, gallery=gallery, query_labels=labels[:20], gallery_labels=labels,
                               protocol="class", metrics=["map", "gm_map", "num_rel_ret"])
    return result.save(str(tmp_path / name))


def test_compare_leaves_out_summaries_that_are_not_means(tmp_path):
    a, b = run(0, tmp_path, "a"), run(1, tmp_path, "b")
    comparison = evalcore.compare(a, b)
    compared = {row.metric for row in comparison.rows}
    assert "map" in compared
    assert not compared & {"gm_map", "num_rel_ret"}, compared
    # the map row is the mean of the paired per-query AP differences, brute force from the reports
    pa, pb = (evalcore.read_report(p)["per_query"].to_pydict() for p in (a, b))
    diff = np.mean(np.array(pb["ap"]) - np.array(pa["ap"]))
    row = next(r for r in comparison.rows if r.metric == "map" and r.group == "all")
    assert np.isclose(row.result.diff, diff, rtol=0, atol=1e-12)
