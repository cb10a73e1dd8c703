"""Metrics by name: ``evaluate(metrics=...)``, ``--metrics``, ``evalcore metrics`` and ``metric_names()``.

The registered metrics are checked end to end against their brute-force
references (tests/core/metrics/references.py) on a full sort of every query's
scores (tests/reference.py), and a selection against the default run.
"""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import random_reid
from reference import cosine_scores, relevance_reid

import evalcore
from evalcore.core import registry
from evalcore.io import dataset as ds
from evalcore.jobs import nightly
from evalcore.render import pages

CLI = [str(Path(sys.executable).with_name("evalcore"))]
_spec = importlib.util.spec_from_file_location(
    "metric_references", Path(__file__).parent / "core" / "metrics" / "references.py")
references = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(references)

IDENTITY = ["query", "key", "label", "cam", "group", "n_relevant", "n_junk"]
AFTER = ["top1", "top1_key", "top1_score", "relevant_score"]
KWARGS = {"query/emb": "query", "gallery/emb": "gallery", "query/label": "query_labels",
          "gallery/label": "gallery_labels", "query/cam": "query_cams", "gallery/cam": "gallery_cams",
          "gallery/junk": "gallery_junk", "query/group": "query_groups"}


def run(*args, timeout=240):
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "EVALCORE_DEBUG": ""})


@pytest.fixture(scope="module")
def data():
    return random_reid(np.random.default_rng(17), n_query=250, n_gallery=2500, dims=16, n_ids=60)


@pytest.fixture(scope="module")
def kwargs(data):
    return {KWARGS[k]: v for k, v in data.items()} | {"protocol": "reid"}


@pytest.fixture(scope="module")
def default(kwargs):
    return evalcore.evaluate(**kwargs, ks=(1, 3), threshold=0.8, sweep=True)


def full_rankings(data):
    """(0/1 relevance of each query's whole ranking, best first; R) from a full sort of the score matrix
    (equal float32 scores ordered as --ties pessimistic orders them)."""
    rel, junk = relevance_reid(data["query/label"], data["query/cam"], data["gallery/label"], data["gallery/cam"],
                               data["gallery/junk"])
    scores = cosine_scores(data["query/emb"], data["gallery/emb"]).astype(np.float32)  # evalcore compares float32
    out = []
    for i in range(len(scores)):
        keep = np.flatnonzero(~junk[i])
        order = keep[np.lexsort((keep, rel[i, keep], -scores[i, keep]))]  # equal scores: non-relevant first
        out.append((rel[i, order], int(rel[i].sum())))
    return out


def test_every_registered_metric_by_name_matches_its_reference_on_a_full_sort(data, kwargs):
    # a scan keeps no tie groups: the tie-averaged nDCG is refused there (tests/core/metrics/test_gain_and_judged.py)
    names = [m.name.replace("@k", "@7") for m in registry.METRICS if "tie_groups" not in m.needs]
    result = evalcore.evaluate(**kwargs, ks=(1,), metrics=names)
    columns = registry.run_columns(names, (1,), None)
    assert result.per_query.column_names == IDENTITY + [c.name for c in columns] + AFTER
    rows = result.per_query.to_pylist()
    for (relevant, r), row in zip(full_rankings(data), rows):
        for c in columns:
            want = references.REFERENCES[c.metric.name](relevant, r, c.k)
            got = row[c.name]
            assert got == (want if want is None or c.metric.dtype == "int64" else pytest.approx(want, abs=1e-12)), \
                (row["query"], c.name)
    for c in columns:
        assert str(result.per_query.schema.field(c.name).type) == {"int64": "int64", "float64": "double"}[c.metric.dtype]


def test_a_selection_computes_just_those_and_agrees_with_the_default_run(kwargs, default):
    chosen = evalcore.evaluate(**kwargs, ks=(1, 3), threshold=0.8, sweep=True,
                               metrics=["map", "mrr", "recall@5", "ndcg@10"])
    assert chosen.per_query.column_names == IDENTITY + ["ap", "rr", "recall_at_5", "ndcg_at_10"] + AFTER + \
        ["accepted", "outcome"]
    assert chosen.summary.column_names[:7] == ["group", "n_queries", "n_evaluated", "n_unknown", "map", "mrr",
                                               "recall_at_5"]
    assert "hit_at_1" not in chosen.summary.column_names and chosen.cmc.num_rows == 0
    for name in ("query", "ap", "rr", "top1_key", "accepted", "outcome"):
        assert chosen.per_query.column(name).equals(default.per_query.column(name)), name
    for name in ("map", "mrr", "tp", "fnir"):
        assert chosen.summary.column(name).equals(default.summary.column(name)), name
    assert chosen.sweep.equals(default.sweep)  # the open set still knows which rank-1 items are correct
    assert list(chosen.run["options"]["metrics"]) == ["map", "mrr", "recall@5", "ndcg@10"]
    assert "metrics" not in default.run["options"]


def test_recall_at_5_works_when_5_is_not_in_ks_and_equals_the_run_that_has_it(kwargs):
    named = evalcore.evaluate(**kwargs, ks=(1,), metrics="recall@5")
    plain = evalcore.evaluate(**kwargs, ks=(1, 5))
    assert named.per_query.column("recall_at_5").equals(plain.per_query.column("recall_at_5"))
    assert named.metrics["recall_at_5"] == plain.metrics["recall_at_5"]


def test_a_hit_metric_brings_the_cmc_curve_of_the_default_run(kwargs, default):
    chosen = evalcore.evaluate(**kwargs, ks=(1, 3), metrics=["hit@1"])
    assert chosen.cmc.equals(default.cmc)
    assert "first_rank" not in chosen.per_query.column_names


def test_listing_every_name_is_the_default_set_plus_the_rest(kwargs, default):
    everything = evalcore.evaluate(**kwargs, ks=(1, 3), threshold=0.8, metrics=[m.name if m.parameter is None else f"{m.base}@{k}"
                                                                            for m in registry.METRICS for k in (1, 3)
                                                                            if "tie_groups" not in m.needs])
    for name in default.per_query.column_names:
        assert everything.per_query.column(name).equals(default.per_query.column(name)), name
    assert {"rprec", "ndcg_at_1", "ndcg_at_3"} <= set(everything.per_query.column_names)


def test_an_unknown_name_is_an_input_error_naming_metrics_and_the_known_ones(kwargs):
    with pytest.raises(evalcore.InputError, match=r"^metrics: unknown metric 'ndgc@10' \(did you mean 'ndcg@10'\?\); "
                                                  r"known: first_rank, .*map, .*ndcg@k") as info:
        evalcore.evaluate(**kwargs, metrics=["map", "ndgc@10"])
    assert isinstance(info.value, evalcore.OptionError) and info.value.option == "metrics"
    with pytest.raises(evalcore.InputError, match=r"^metrics: give at least one metric name"):
        evalcore.evaluate(**kwargs, metrics=[])


def test_metric_names_lists_every_registered_metric_one_a_line():
    listed = evalcore.metric_names()
    assert [m.name for m in listed] == [m.name for m in registry.METRICS]
    ap = next(m for m in listed if m.name == "map")
    assert (ap.column, ap.summary, ap.direction) == ("ap", "map", "higher")
    assert all(str(m).startswith(m.name) and m.definition in str(m) for m in listed)
    assert "metric_names" in dir(evalcore)


def test_the_report_page_and_terminal_show_a_selection(kwargs):
    chosen = evalcore.evaluate(**kwargs, metrics=["rprec", "ndcg@10", "precision@2"])
    html = pages.render_report_html(chosen.per_query, chosen.summary, chosen.cmc, chosen.run)
    assert "R-precision" in html and "nDCG@10" in html and "precision@2" in html
    text = pages.format_terminal(chosen.summary, chosen.per_query)
    assert "R-precision" in text and "nDCG@10" in text
    # the worst queries are those of lowest AP: without ap they are not listed as if they were
    assert "No worst queries" in text and "No worst queries" in html and "lowest-AP" not in html


def test_cut_offs_past_the_lists_count_the_missing_places_as_not_relevant(tmp_path):
    """As trec_eval's P_1000 on a shorter list: precision@k over k, the places after K not relevant."""
    items = np.array([[0, 1, 2], [2, 1, 0]])
    path = tmp_path / "lists.zarr"
    ds.write_dataset(path, {"ranking/item": items, "query/label": np.array([1, 2]),
                            "gallery/label": np.array([1, 2, 1])}, {"protocol": "class"})
    result = evalcore.evaluate(str(path))                            # the default --ks 1,3,5,10, K = 3
    assert result.per_query.column("precision_at_10").to_pylist() == [2 / 10, 1 / 10]
    assert result.per_query.column("recall_at_5").to_pylist() == [1.0, 1.0]
    assert [w for w in result.warnings if "cut-offs 5, 10 are past" in w and "K = 3" in w]
    result = evalcore.evaluate(str(path), metrics=["map", "hit@3"])  # no cut-off past K: no warning
    assert result.per_query.column("ap").to_pylist() == [(1 + 2 / 3) / 2, 1 / 2]
    assert not [w for w in result.warnings if "past" in w]
    result = evalcore.evaluate(str(path), metrics=["recall@4"])
    assert [w for w in result.warnings if "cut-off 4 is past" in w]


# --------------------------------------------------------------------------- command line


def test_evalcore_metrics_prints_one_line_per_metric():
    done = run("metrics")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split()[0] for line in lines] == [m.name for m in registry.METRICS]
    assert lines == [str(m) for m in evalcore.metric_names()]


def test_evaluate_metrics_on_the_command_line(tmp_path, data):
    path = tmp_path / "ds.zarr"
    ds.write_dataset(path, data, {"protocol": "reid"})
    done = run("evaluate", path, "--out", tmp_path / "r", "--metrics", "map,recall@5", "--ks", "1", "--quiet")
    assert done.returncode == 0, done.stderr
    per_query = pq.read_table(tmp_path / "r" / "per_query.parquet")
    assert per_query.column_names == IDENTITY + ["ap", "recall_at_5"] + AFTER
    assert pq.read_table(tmp_path / "r" / "summary.parquet").column_names[4:] == ["map", "recall_at_5"]
    assert json.loads((tmp_path / "r" / "run.json").read_text())["options"]["metrics"] == ["map", "recall@5"]
    bad = run("evaluate", path, "--out", tmp_path / "bad", "--metrics", "map,mapp")
    assert bad.returncode == 2 and not (tmp_path / "bad").exists()
    assert bad.stderr.startswith("evalcore: error: --metrics: unknown metric 'mapp' (did you mean 'map'?); "
                                 "known: first_rank")
    assert len(bad.stderr.strip().splitlines()) == 1


def test_a_nightly_evaluation_takes_metrics_and_checks_their_names(tmp_path):
    def job(metrics):
        path = tmp_path / "job.toml"
        path.write_text(f'reports = "r"\nhistory = "h"\n[[evaluation]]\nname = "a"\ndataset = "d.zarr"\n'
                        f'metrics = {metrics}\n')
        return nightly.load_job(path)

    loaded = job('["ap", "hit@1", "recall_at_5"]')
    assert loaded["evaluation"][0]["metrics"] == ["map", "hit@1", "recall@5"]
    assert nightly.evaluation_spec(loaded["evaluation"][0]).options.metrics == ("map", "hit@1", "recall@5")
    with pytest.raises(evalcore.InputError, match=r"evaluation 'a': metrics: 'hits@1': ranx's hits@k counts"):
        job('"map,hits@1"')


def test_summary_names_are_what_a_run_writes(kwargs, default):
    names = registry.summary_names(None, (1, 3), None)
    assert default.summary.column_names[4:4 + len(names)] == names
    chosen = evalcore.evaluate(**kwargs, metrics=["rprec", "hit"], ks=(2,))
    assert chosen.summary.column_names[4:] == registry.summary_names(["rprec", "hit"], (2,), None)


@pytest.mark.parametrize("asked, compared", [
    (["ndcg"], ["ndcg"]),                      # the uncut measure alone, not ndcg@k's columns too
    (["ndcg@k"], ["ndcg_at_1", "ndcg_at_5"]),  # at every --ks (was refused: 'none of ndcg@k is in every run')
    (["recall"], ["recall_at_1", "recall_at_5"]),
    (["ndcg@5", "map"], ["map", "ndcg_at_5"]),
])
def test_compare_selects_the_metrics_as_evaluate_names_them(asked, compared):
    rng = np.random.default_rng(4)
    query, gallery = rng.standard_normal((60, 16)), rng.standard_normal((300, 16))
    labels = dict(query_labels=rng.integers(0, 20, 60), gallery_labels=rng.integers(0, 20, 300))
    every = ["map", "ndcg", "ndcg@k", "recall"]
    a = evalcore.evaluate(query=query, gallery=gallery, metrics=every, ks=(1, 5), **labels)
    b = evalcore.evaluate(query=query + 0.3 * rng.standard_normal(query.shape), gallery=gallery, metrics=every,
                          ks=(1, 5), **labels)
    result = evalcore.compare(a, b, metrics=asked, resamples=200, permutations=200)
    assert sorted(set(result.table().column("metric").to_pylist())) == compared
