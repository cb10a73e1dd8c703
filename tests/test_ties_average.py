"""--ties average (issue 38): tied items share their gains, against the expected value over every order of the ties.

The reference here knows nothing of tie groups or shared gains: for each query it enumerates every order of
its tied items (each run of equal scores permuted every way, the runs in score order), evaluates each of
those plain rankings with the definitions written out below, and takes the mean. evalcore must give that mean
(1e-12) for embeddings, given scores, precomputed lists with scores and judged-only pairs, per query and in the
summary; with --depth, a tie group straddling the cut counts only its places above it. scikit-learn's
tie-averaged ndcg_score / dcg_score are checked too when it is installed (it is not in CI).
"""
from __future__ import annotations

import itertools
import json
import math
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

import evalcore
from evalcore.core import registry
from evalcore.engine.evaluate import Options
from evalcore.engine.evaluate import evaluate as engine_evaluate
from evalcore.io import dataset as ds

CLI = [str(Path(sys.executable).with_name("evalcore"))]
KS = (1, 2, 3, 5)
#: the metrics --ties average defines, at KS: every one the reference below computes
DEFINED = ["precision@k", "recall@k", "rprec", "ndcg", "ndcg@k", "ndcg_exp", "ndcg_exp@k", "dcg", "dcg@k",
           "ndcg_avg", "ndcg_avg@k", "rbp", "rbp_0.80", "RBP(p=0.7)", "num_rel", "num_rel_ret", "num_ret", "set_p",
           "set_recall", "set_f", "set_relative_p", "utility", "rprec_mult_0.60", "rprec_mult_2.00",
           "relative_p@k", "rndcg"]


# --------------------------------------------------------------------------- the reference: plain rankings


def _dcg(gains, cut):
    return math.fsum(g / math.log2(p + 2) for p, g in enumerate(gains[:cut]))


def plain_metrics(grades, judged, level=1):
    """Every defined metric of one plain ranking: ``grades`` the retrieved items' grades best first (0: not
    relevant), ``judged`` the grades of the query's relevant items (>= 1, retrieved or not). None where the
    metric is undefined (no relevant item at ``level``, or none of grade >= 1 for the gain measures)."""
    n = len(grades)
    binary = [1 if g >= level else 0 for g in grades]
    r = sum(1 for g in judged if g >= level)
    ideal = sorted((g for g in judged if g >= 1), reverse=True)
    out = {}

    def hits(cut):
        return sum(binary[:cut])

    for k in KS:
        out[f"precision_at_{k}"] = hits(k) / k if r else None
        out[f"recall_at_{k}"] = hits(k) / r if r else None
        out[f"relative_p_at_{k}"] = hits(k) / min(r, k) if r else None
        for name, gain in (("ndcg", lambda g: g), ("ndcg_exp", lambda g: 2 ** g - 1), ("ndcg_avg", lambda g: g)):
            idcg = _dcg([gain(g) for g in ideal], k)
            out[f"{name}_at_{k}"] = _dcg([gain(g) for g in grades], k) / idcg if ideal else None
        out[f"dcg_at_{k}"] = _dcg(grades, k) if ideal else None
    out["rprec"] = hits(r) / r if r else None
    for x in (0.6, 2.0):
        c = math.floor(x * r + 0.9)
        out[f"rprec_mult_{x:.2f}"] = hits(c) / c if r else None
    for name, gain in (("ndcg", lambda g: g), ("ndcg_exp", lambda g: 2 ** g - 1), ("ndcg_avg", lambda g: g)):
        idcg = _dcg([gain(g) for g in ideal], len(ideal))
        out[name] = _dcg([gain(g) for g in grades], n) / idcg if ideal else None
    out["dcg"] = _dcg(grades, n) if ideal else None
    for column, p in (("rbp", 0.9), ("rbp_0.80", 0.8), ("rbp_0.70", 0.7)):
        top = max(ideal) if ideal else 1
        out[column] = (1 - p) * math.fsum(g / top * p ** u for u, g in enumerate(grades)) if ideal else None
    h = hits(n)
    out["num_rel"] = float(r) if r else None
    out["num_rel_ret"] = float(h) if r else None
    out["num_ret"] = float(n)
    out["set_p"] = (h / n if n else 0.0) if r else None
    out["set_recall"] = h / r if r else None
    precision, recall = (h / n if n else 0.0), (h / r if r else 0.0)
    out["set_f"] = (2 * precision * recall / (precision + recall) if h else 0.0) if r else None
    out["set_relative_p"] = (h / min(n, r) if n else 0.0) if r else None
    out["utility"] = float(h - (n - h))
    if r and ideal:   # trec_eval's Rndcg: at the R of each grade, and at the list's end past R' + 1
        cuts = sorted({sum(1 for g in ideal if g >= grade) for grade in set(ideal)})
        if n >= len(ideal) + 2:
            cuts.append(n)
        out["rndcg"] = math.fsum(_dcg(grades, c) / _dcg(ideal, c) for c in cuts) / len(cuts)
    else:
        out["rndcg"] = None
    return out


def expected_metrics(items, scores, grade, judged, level=1, depth=None):
    """The mean of ``plain_metrics`` over every order of the ties: ``items`` a query's retrieved items,
    ``scores`` theirs (equal scores tie), ``grade`` item -> grade (0 if absent)."""
    order = sorted(range(len(items)), key=lambda i: -scores[i])
    runs = [list(g) for _, g in itertools.groupby(order, key=lambda i: scores[i])]
    total: dict = {}
    count = 0
    for arrangement in itertools.product(*(itertools.permutations(run) for run in runs)):
        ranking = [items[i] for run in arrangement for i in run]
        if depth is not None:
            ranking = ranking[:depth]
        values = plain_metrics([grade.get(x, 0) for x in ranking], judged, level)
        for name, v in values.items():
            total.setdefault(name, []).append(v)
        count += 1
    return {name: (None if vs[0] is None else math.fsum(vs) / count) for name, vs in total.items()}


def assert_matches(result, expected):
    """Per query at 1e-12 (nulls where the reference has None), and every summary mean."""
    rows = result.per_query.to_pylist()
    assert len(rows) == len(expected)
    for row, want in zip(rows, expected):
        for name, value in want.items():
            if name not in row:
                continue
            if value is None:
                assert row[name] is None, (row["query"], name, row[name])
            else:
                assert row[name] == pytest.approx(value, abs=1e-12), (row["query"], name, row[name], value)
    summary = result.summary.to_pylist()[0]
    counted = [w for w, row in zip(expected, rows) if row["n_relevant"]]   # the means are over the known queries
    for c in registry.run_columns(result.run["options"].get("metrics"), result.run["options"]["ks"], None,
                                  ties="average"):
        values = [w[c.name] for w in counted if w.get(c.name) is not None]
        if c.summary is None or c.name not in expected[0] or not values:
            continue
        want = math.fsum(values) if c.metric.aggregate == "sum" else math.fsum(values) / len(values)
        assert summary[c.summary] == pytest.approx(want, abs=1e-12), c.summary


def tied_rows(rng, n_rows, n_cols, levels):
    """Scores with planted ties: each value one of ``levels`` quantised steps."""
    return rng.integers(0, levels, (n_rows, n_cols)).astype(np.float64) / levels


# --------------------------------------------------------------------------- every input kind


@pytest.mark.parametrize("seed", [0, 1])
def test_given_scores_equal_the_mean_over_every_order_of_the_ties(seed):
    rng = np.random.default_rng(seed)
    nq, ng = 7, 9
    scores = tied_rows(rng, nq, ng, 3)
    ql, gl = rng.integers(0, 3, nq), rng.integers(0, 3, ng)
    junk = rng.random(ng) < 0.15
    result = evalcore.evaluate(scores=scores, query_labels=ql, gallery_labels=gl, gallery_junk=junk,
                               protocol="class", ties="average", ks=KS, metrics=DEFINED)
    expected = []
    for q in range(nq):
        items = [g for g in range(ng) if not junk[g]]
        relevant = {g: 1 for g in items if gl[g] == ql[q]}
        expected.append(expected_metrics(items, [scores[q, g] for g in items], relevant, [1] * len(relevant)))
    assert_matches(result, expected)
    assert result.run["options"]["ties"] == "average"
    assert "--ties average" in result.run["scores"]


@pytest.mark.parametrize("similarity", ["dot", "euclidean", "cosine"])
def test_embeddings_equal_the_mean_over_every_order_of_the_ties(similarity):
    """dot and euclidean: small integer vectors (exact products and squared distances, many equal); cosine:
    gallery rows repeated (identical rows have identical canonical scores). reid: same identity and camera is
    junk, removed before counting."""
    rng = np.random.default_rng(3)
    nq, d = 6, 3
    if similarity in ("dot", "euclidean"):
        gallery = rng.integers(0, 3, (10, d)).astype(np.float32)
        query = rng.integers(0, 3, (nq, d)).astype(np.float32)
        exact = query.astype(np.float64) @ gallery.astype(np.float64).T
        if similarity == "euclidean":   # higher is better: minus the squared distance
            exact = -((query.astype(np.float64)[:, None, :] - gallery.astype(np.float64)[None]) ** 2).sum(-1)
    else:
        distinct = rng.normal(size=(4, d)).astype(np.float32)
        gallery = distinct[rng.integers(0, 4, 10)]
        query = rng.normal(size=(nq, d)).astype(np.float32)
        unit = gallery.astype(np.float64) / np.linalg.norm(gallery.astype(np.float64), axis=1, keepdims=True)
        exact = query.astype(np.float64) @ unit.T   # equal exactly where the rows are identical, apart elsewhere
    ng = len(gallery)
    ql, gl = rng.integers(0, 3, nq), rng.integers(0, 3, ng)
    qc, gc = rng.integers(0, 2, nq), rng.integers(0, 2, ng)
    result = evalcore.evaluate(query=query, gallery=gallery, query_labels=ql, gallery_labels=gl, query_cams=qc,
                               gallery_cams=gc, protocol="reid", similarity=similarity, ties="average", ks=KS,
                               metrics=DEFINED)
    expected = []
    for q in range(nq):
        items = [g for g in range(ng) if not (gl[g] == ql[q] and gc[g] == qc[q])]   # junk removed
        relevant = {g: 1 for g in items if gl[g] == ql[q]}
        expected.append(expected_metrics(items, [exact[q, g] for g in items], relevant, [1] * len(relevant)))
    assert_matches(result, expected)


def _write_lists(path, items, scores, ql, gl):
    ds.write_dataset(path, {"ranking/item": np.asarray(items, np.int64), "ranking/score": np.asarray(scores, np.float32),
                            "query/label": np.asarray(ql), "gallery/label": np.asarray(gl)}, {"protocol": "class"})
    return path


@pytest.mark.parametrize("depth", [None, 3])
def test_lists_with_scores_equal_the_mean_over_every_order_of_the_ties(tmp_path, depth):
    """Top-6 lists of 10 items, tied groups shuffled in the list; relevant items past the list count in R.
    With --depth 3 a group straddling place 3 counts only its places up to 3."""
    rng = np.random.default_rng(4)
    nq, ng, top = 8, 10, 6
    levels = tied_rows(rng, nq, ng, 3)
    ql, gl = rng.integers(0, 3, nq), rng.integers(0, 3, ng)
    items = np.empty((nq, top), np.int64)
    for q in range(nq):
        shuffled = rng.permutation(ng)
        items[q] = shuffled[np.argsort(-levels[q, shuffled], kind="stable")][:top]
    scores = np.take_along_axis(levels, items, axis=1)
    path = _write_lists(tmp_path / "lists.zarr", items, scores, ql, gl)
    result = evalcore.evaluate(str(path), ties="average", ks=KS, metrics=DEFINED, depth=depth)
    expected = []
    for q in range(nq):
        relevant = {g: 1 for g in range(ng) if gl[g] == ql[q]}
        expected.append(expected_metrics(list(items[q]), list(scores[q]), relevant, [1] * len(relevant),
                                         depth=depth))
    assert_matches(result, expected)


def _graded(rng, nq, ng):
    """{qid: {docid: grade}} with grades 0..3 on about half of the pairs."""
    return {f"q{q}": {f"d{g}": int(rng.integers(0, 4)) for g in range(ng) if rng.random() < 0.6} for q in range(nq)}


@pytest.mark.parametrize("level, judged_only", [(1, False), (2, False), (1, True)])
def test_graded_qrels_share_their_grades_and_judged_only_pairs_too(level, judged_only):
    """Graded gains (ndcg, dcg, rbp, rndcg take the grades; the binary measures relevance at --rel-level), on
    given scores beside qrels; --judged-only ranks each query among its judged pairs alone."""
    rng = np.random.default_rng(5 + level)
    nq, ng = 6, 9
    scores = tied_rows(rng, nq, ng, 3)
    qrels = _graded(rng, nq, ng)
    query_ids, gallery_ids = [f"q{q}" for q in range(nq)], [f"d{g}" for g in range(ng)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", evalcore.EvalcoreWarning)
        result = evalcore.evaluate(scores=scores, query_ids=query_ids, gallery_ids=gallery_ids, qrels=qrels,
                                   ties="average", ks=KS, metrics=DEFINED, rel_level=level, judged_only=judged_only)
    by_key = {row["key"]: row for row in result.per_query.to_pylist()}
    for q in range(nq):
        judged = qrels[f"q{q}"]
        grade = {g: judged.get(f"d{g}", 0) for g in range(ng)}
        items = [g for g in range(ng) if f"d{g}" in judged] if judged_only else list(range(ng))
        want = expected_metrics(items, [scores[q, g] for g in items], grade,
                                [v for v in judged.values() if v >= 1], level)
        row = by_key[f"q{q}"]
        for name, value in want.items():
            if value is None:
                assert row[name] is None, (q, name)
            else:
                assert row[name] == pytest.approx(value, abs=1e-12), (q, name, row[name], value)


def test_judged_only_embeddings_share_their_gains(tmp_path):
    """Judged-only on embeddings (canonical scores per judged pair): integer vectors, dot, exact ties."""
    rng = np.random.default_rng(9)
    nq, ng = 5, 8
    gallery = rng.integers(0, 3, (ng, 2)).astype(np.float32)
    query = rng.integers(1, 3, (nq, 2)).astype(np.float32)
    exact = query.astype(np.float64) @ gallery.astype(np.float64).T
    qrels = _graded(rng, nq, ng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", evalcore.EvalcoreWarning)
        result = evalcore.evaluate(query=query, gallery=gallery, query_ids=[f"q{q}" for q in range(nq)],
                                   gallery_ids=[f"d{g}" for g in range(ng)], qrels=qrels, similarity="dot",
                                   judged_only=True, ties="average", ks=KS, metrics=DEFINED)
    by_key = {row["key"]: row for row in result.per_query.to_pylist()}
    for q in range(nq):
        judged = qrels[f"q{q}"]
        items = [g for g in range(ng) if f"d{g}" in judged]
        want = expected_metrics(items, [exact[q, g] for g in items], {g: judged.get(f"d{g}", 0) for g in items},
                                [v for v in judged.values() if v >= 1])
        for name, value in want.items():
            got = by_key[f"q{q}"][name]
            assert got == (None if value is None else pytest.approx(value, abs=1e-12)), (q, name)


def test_trec_run_lists_graded_share_their_grades(import_trec):
    """A TREC run imported with its scores (equal scores are ties) beside graded qrels, every list cut by
    --depth 4: lists with scores under graded relevance."""
    rng = np.random.default_rng(11)
    qrels, run = {}, {}
    for q in range(1, 7):
        docs = [f"d{j}" for j in range(7)]
        qrels[f"q{q}"] = {d: int(rng.integers(0, 4)) for d in docs if rng.random() < 0.7}
        ranked = [d for d in docs if rng.random() < 0.85]
        run[f"q{q}"] = {d: float(rng.integers(1, 4)) / 4 for d in ranked}
    out = import_trec(qrels, run)
    result = engine_evaluate(out, Options(protocol="qrels", ks=KS, ties="average", depth=4,
                                          metrics=registry.select(DEFINED)))
    by_key = {row["key"]: row for row in result.per_query.to_pylist()}
    checked = 0
    for q, docs in run.items():
        if q not in by_key:
            continue
        items = list(docs)
        want = expected_metrics(items, [docs[d] for d in items], qrels.get(q, {}),
                                [g for g in qrels.get(q, {}).values() if g >= 1], depth=4)
        for name, value in want.items():
            got = by_key[q][name]
            assert got == (None if value is None else pytest.approx(value, abs=1e-12)), (q, name)
        checked += 1
    assert checked >= 5


def test_a_group_straddling_the_depth_shares_its_gain_over_its_places_and_counts_those_above_the_cut(tmp_path):
    """Hand-worked: one list, scores 0.9, 0.5, 0.5, 0.5, 0.5 (one relevant item in the group of four at places
    2..5), --depth 3: the group gives each of its places 1/4, places 2 and 3 are retrieved."""
    path = _write_lists(tmp_path / "l.zarr", [[0, 1, 2, 3, 4]], [[0.9, 0.5, 0.5, 0.5, 0.5]], [7], [1, 2, 7, 3, 4])
    row = evalcore.evaluate(str(path), ties="average", ks=(1, 3, 5), depth=3,
                            metrics=["precision@k", "recall@k", "dcg", "num_rel_ret"]).per_query.to_pylist()[0]
    assert row["precision_at_1"] == 0.0
    assert row["precision_at_3"] == pytest.approx(2 / 4 / 3, abs=1e-15)
    assert row["recall_at_5"] == pytest.approx(2 / 4, abs=1e-15)      # places 4, 5 are past the cut
    assert row["num_rel_ret"] == pytest.approx(0.5, abs=1e-15)
    assert row["dcg"] == pytest.approx((1 / math.log2(3) + 1 / math.log2(4)) / 4, abs=1e-15)
    whole = evalcore.evaluate(str(path), ties="average", ks=(5,), metrics=["recall@5", "num_rel_ret"])
    assert whole.per_query.to_pylist()[0]["recall_at_5"] == 1.0 == whole.per_query.to_pylist()[0]["num_rel_ret"]


# --------------------------------------------------------------------------- ndcg_avg, scikit-learn


def test_ndcg_avg_equals_ndcg_under_average_for_lists_with_scores(tmp_path):
    rng = np.random.default_rng(12)
    nq, ng = 20, 12
    levels = tied_rows(rng, nq, ng, 4)
    items = np.argsort(-levels, axis=1, kind="stable")
    path = _write_lists(tmp_path / "l.zarr", items, np.take_along_axis(levels, items, axis=1),
                        rng.integers(0, 3, nq), rng.integers(0, 3, ng))
    result = evalcore.evaluate(str(path), ties="average", ks=(3, 10), metrics=["ndcg", "ndcg_avg", "ndcg@k",
                                                                             "ndcg_avg@k"])
    pq_ = result.per_query
    assert pq_.column("ndcg").equals(pq_.column("ndcg_avg"))
    for k in (3, 10):
        assert pq_.column(f"ndcg_at_{k}").equals(pq_.column(f"ndcg_avg_at_{k}"))
    plain = evalcore.evaluate(str(path), ks=(3, 10), metrics=["ndcg", "ndcg_avg"]).per_query
    assert plain.column("ndcg_avg").equals(pq_.column("ndcg_avg"))        # ndcg_avg is the same under any policy
    assert not plain.column("ndcg").equals(pq_.column("ndcg"))            # and the pessimistic ndcg is not it


def test_a_scan_keeps_tie_groups_under_average_so_ndcg_avg_works_there_and_equals_ndcg():
    rng = np.random.default_rng(13)
    scores = tied_rows(rng, 6, 10, 3)
    labels = dict(query_labels=rng.integers(0, 2, 6), gallery_labels=rng.integers(0, 2, 10))
    result = evalcore.evaluate(scores=scores, **labels, ties="average", metrics=["ndcg", "ndcg_avg"])
    assert result.per_query.column("ndcg").equals(result.per_query.column("ndcg_avg"))
    with pytest.raises(evalcore.InputError, match=r"^metrics: ndcg_avg need\(s\) the tie groups"):
        evalcore.evaluate(scores=scores, **labels, metrics=["ndcg_avg"])


@pytest.mark.parametrize("seed", [14, 15])
def test_scikit_learn_ndcg_score_and_dcg_score(seed):
    """scikit-learn's ndcg_score / dcg_score average over ties by default (ignore_ties=False). Skipped without
    scikit-learn (not in CI: the reference above carries the checks)."""
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(seed)
    nq, ng = 30, 25
    scores = tied_rows(rng, nq, ng, 5)
    ql, gl = rng.integers(0, 4, nq), rng.integers(0, 4, ng)
    result = evalcore.evaluate(scores=scores, query_labels=ql, gallery_labels=gl, ties="average", ks=(1, 5, 10),
                               metrics=["ndcg", "ndcg@k", "dcg", "dcg@k"])
    for q, row in enumerate(result.per_query.to_pylist()):
        truth = (gl == ql[q]).astype(float)[None, :]
        if not truth.any():
            continue
        assert row["ndcg"] == pytest.approx(sklearn_metrics.ndcg_score(truth, scores[q:q + 1]), abs=1e-12)
        assert row["dcg"] == pytest.approx(sklearn_metrics.dcg_score(truth, scores[q:q + 1]), abs=1e-12)
        for k in (1, 5, 10):
            assert row[f"ndcg_at_{k}"] == pytest.approx(sklearn_metrics.ndcg_score(truth, scores[q:q + 1], k=k),
                                                        abs=1e-12)
            assert row[f"dcg_at_{k}"] == pytest.approx(sklearn_metrics.dcg_score(truth, scores[q:q + 1], k=k),
                                                       abs=1e-12)


# --------------------------------------------------------------------------- invariance


def _clustered(rng, nq, ng, d=8):
    """Integer embeddings with repeated gallery rows (many exact ties under dot and cosine)."""
    distinct = rng.integers(-2, 3, (ng // 3, d)).astype(np.float32)
    distinct[np.all(distinct == 0, axis=1), 0] = 1
    gallery = distinct[rng.integers(0, len(distinct), ng)]
    query = rng.integers(-2, 3, (nq, d)).astype(np.float32)
    query[np.all(query == 0, axis=1), 0] = 1
    return query, gallery


@pytest.mark.parametrize("similarity", ["dot", "cosine", "euclidean"])
def test_results_are_bit_identical_under_chunking_shards_threads_and_gallery_order(tmp_path, similarity):
    rng = np.random.default_rng(16)
    nq, ng = 300, 5000
    query, gallery = _clustered(rng, nq, ng)
    ql, gl = rng.integers(0, 30, nq), rng.integers(0, 30, ng)
    perm = rng.permutation(ng)
    options = Options(protocol="class", similarity=similarity, ties="average", ks=(1, 5, 20),
                      metrics=registry.select(["ndcg", "ndcg@k", "precision@k", "recall@k", "rbp", "dcg", "rprec"]))
    plain = tmp_path / "plain.zarr"
    shuffled = tmp_path / "shuffled.zarr"
    ds.write_dataset(plain, {"query/emb": query, "gallery/emb": gallery, "query/label": ql, "gallery/label": gl},
                     chunk_rows=64)
    ds.write_dataset(shuffled, {"query/emb": query, "gallery/emb": gallery[perm], "query/label": ql,
                                "gallery/label": gl[perm]}, chunk_rows=128)
    metric_names = [c.name for c in options.checked().columns()]
    runs = [engine_evaluate(plain, options),
            engine_evaluate(plain, options, chunk_rows=37, threads=2),
            engine_evaluate(plain, options, gallery_shards=3),
            engine_evaluate(shuffled, options, chunk_rows=300)]
    base = runs[0].per_query
    assert base.column("ndcg").null_count < nq
    for other in runs[1:]:
        for name in [*metric_names, "n_relevant", "top1_score", "relevant_score"]:
            assert other.per_query.column(name).equals(base.column(name)), name
        assert other.summary.equals(runs[0].summary)
    # and the ties matter here: pessimistic gives another nDCG somewhere
    pess = engine_evaluate(plain, Options(protocol="class", similarity=similarity, ks=(1,), metrics=("ndcg",)))
    assert not pess.per_query.column("ndcg").equals(base.column("ndcg"))


def test_given_scores_are_bit_identical_under_chunking_and_gallery_order(tmp_path):
    rng = np.random.default_rng(20)
    nq, ng = 200, 3000
    scores = tied_rows(rng, nq, ng, 7)
    ql, gl = rng.integers(0, 20, nq), rng.integers(0, 20, ng)
    perm = rng.permutation(ng)
    options = Options(protocol="class", ties="average", ks=(1, 10, 100),
                      metrics=registry.select(["ndcg", "ndcg@k", "precision@k", "recall@k", "rbp", "rndcg"]))
    plain, shuffled = tmp_path / "plain.zarr", tmp_path / "shuffled.zarr"
    ds.write_dataset(plain, {"scores/value": scores, "query/label": ql, "gallery/label": gl}, chunk_rows=50)
    ds.write_dataset(shuffled, {"scores/value": scores[:, perm], "query/label": ql, "gallery/label": gl[perm]},
                     chunk_rows=64)
    names = [c.name for c in options.checked().columns()]
    runs = [engine_evaluate(plain, options), engine_evaluate(plain, options, chunk_rows=33, threads=2),
            engine_evaluate(shuffled, options)]
    for other in runs[1:]:
        for name in [*names, "top1_score", "relevant_score"]:
            assert other.per_query.column(name).equals(runs[0].per_query.column(name)), name
        assert other.summary.equals(runs[0].summary)


# --------------------------------------------------------------------------- the defined set and the refusals


def test_registry_defines_exactly_the_measures_linear_in_the_places_gains():
    defined = {x.name for x in registry.METRICS if x.average is not None}
    assert defined == {
        "rprec", "ndcg", "recall@k", "precision@k", "ndcg@k", "num_rel", "num_rel_ret",
        *(f"rprec_mult_{x / 5:.2f}" for x in range(1, 11)), "num_ret", "set_p", "set_recall", "set_f",
        "set_relative_p", "utility", "ndcg_exp", "ndcg_exp@k", "ndcg_avg", "ndcg_avg@k", "rbp",
        *(f"rbp_{p:.2f}" for p in (0.5, 0.8, 0.95, 0.98)), "rndcg", "dcg", "dcg@k", "relative_p@k"}
    for name in ("map", "mrr", "hit@k", "first_rank", "minp", "bpref", "err@k", "set_map", "rbp_resid", "judged@k",
                 "infap", "bing", "g", "ndcg_rel", "11pt_avg", "map_cut@k", "mrr@k", "gm_map"):
        assert registry.BY_NAME[name].average is None, name
    assert registry.parse("RBP(p=0.7)")[0].average is not None
    assert registry.parse("rbp_resid(p=0.7)")[0].average is None
    listed = evalcore.metric_names(ties="average")
    assert [m.name for m in listed] == [x.name for x in registry.METRICS if x.average is not None]
    assert all(m.definition for m in listed)


def test_the_default_set_is_the_defined_subset_and_the_run_says_which_were_left_out():
    rng = np.random.default_rng(17)
    kwargs = dict(scores=tied_rows(rng, 5, 8, 3), query_labels=rng.integers(0, 2, 5),
                  gallery_labels=rng.integers(0, 2, 8))
    with pytest.warns(evalcore.EvalcoreWarning, match=r'ties="average": the default metrics first_rank, '
                                                      r"last_rank, map, map_trapz, minp, mrr, hit@k are left out"):
        result = evalcore.evaluate(**kwargs, ties="average", ks=(1, 3))
    metrics = [c for c in result.per_query.column_names if c not in
               ("query", "key", "label", "n_relevant", "n_junk", "top1", "top1_key", "top1_score", "relevant_score")]
    assert metrics == ["recall_at_1", "precision_at_1", "recall_at_3", "precision_at_3"]
    assert result.summary.column_names[4:] == metrics
    assert result.cmc.num_rows == 0
    assert any("left out" in w for w in result.run["warnings"])
    assert result.run["options"]["ties"] == "average"
    # the same columns, the same names, another policy: pessimistic's recall@3 differs somewhere or not, but
    # its columns are the default ones
    plain = evalcore.evaluate(**kwargs, ks=(1, 3))
    assert set(metrics) < set(plain.per_query.column_names)


@pytest.mark.parametrize("given, named", [
    (dict(metrics=["map", "ndcg"]), r"^metrics: map is not defined under ties average"),
    (dict(metrics=["hit@1", "mrr", "recall@5"]), r"^metrics: hit@1, mrr are not defined under ties average"),
    (dict(metrics=["ndcg"], map_at=10), r"^map_at: map@10 is not defined under ties average"),
    (dict(metrics=["ndcg"], threshold=0.5), r"^threshold: the open-set outcome is not defined under ties average"),
    (dict(metrics=["ndcg"], sweep=True), r"^sweep: the open-set sweep is not defined under ties average"),
])
def test_an_undefined_metric_or_figure_under_average_is_an_option_error_naming_it(given, named):
    kwargs = dict(scores=np.ones((2, 3)), query_labels=[0, 1], gallery_labels=[0, 1, 0])
    with pytest.raises(evalcore.OptionError, match=named):
        evalcore.evaluate(**kwargs, ties="average", **given)


def test_lists_without_scores_keep_their_order_under_average(tmp_path):
    """No ranking/score: no tie can be seen, the given order stands (tie groups of one) and run.json says so."""
    path = tmp_path / "l.zarr"
    ds.write_dataset(path, {"ranking/item": np.array([[0, 1, 2, 3]]), "query/label": np.array([7]),
                            "gallery/label": np.array([1, 7, 2, 7])}, {"protocol": "class"})
    average = evalcore.evaluate(str(path), ties="average", ks=(1, 2), metrics=["precision@k", "ndcg"])
    plain = evalcore.evaluate(str(path), ks=(1, 2), metrics=["precision@k", "ndcg"])
    for name in ("precision_at_1", "precision_at_2", "ndcg"):
        assert average.per_query.column(name).equals(plain.per_query.column(name)), name
    assert "--ties does not apply" in average.run["scores"]


def run(*args, timeout=240):
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "EVALCORE_DEBUG": ""})


def test_command_line_average_and_its_refusal(tmp_path):
    rng = np.random.default_rng(18)
    path = tmp_path / "ds.zarr"
    ds.write_dataset(path, {"scores/value": tied_rows(rng, 4, 6, 2), "query/label": rng.integers(0, 2, 4),
                            "gallery/label": rng.integers(0, 2, 6)}, {"protocol": "class"})
    done = run("evaluate", path, "--out", tmp_path / "r", "--ties", "average", "--metrics", "ndcg,precision@2",
               "--quiet")
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "r" / "run.json").read_text())["options"]["ties"] == "average"
    assert pq.read_table(tmp_path / "r" / "per_query.parquet").column_names[5:7] == ["ndcg", "precision_at_2"]
    bad = run("evaluate", path, "--out", tmp_path / "bad", "--ties", "average", "--metrics", "map,ndcg")
    assert bad.returncode == 2 and not (tmp_path / "bad").exists()
    assert bad.stderr.startswith("evalcore: error: --metrics: map is not defined under --ties average")
    assert len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr
    listing = run("metrics", "--ties", "average")
    assert listing.returncode == 0
    assert [line.split()[0] for line in listing.stdout.splitlines()] == \
        [x.name for x in registry.METRICS if x.average is not None]


def test_a_job_file_takes_ties_average(tmp_path):
    from evalcore.jobs.nightly import load_job

    path = tmp_path / "job.toml"
    path.write_text('reports = "r"\nhistory = "h"\n[[evaluation]]\nname = "a"\ndataset = "d.zarr"\n'
                    'ties = "average"\nmetrics = ["ndcg@10"]\n')
    assert load_job(path)["evaluation"][0]["ties"] == "average"
    path.write_text(path.read_text().replace('"average"', '"mean"'))
    with pytest.raises(evalcore.InputError, match="ties 'mean' is not one of pessimistic, optimistic, average"):
        load_job(path)


def test_re_ranked_runs_average_between_the_two_orders():
    """k-reciprocal re-ranking folds as the scans do (``CountState``), so average works there too. No reference
    of its final distances can tell their ties apart here; what every order's mean must satisfy can: it lies
    between the pessimistic and optimistic values, and equals them where they agree (no tie that matters)."""
    rng = np.random.default_rng(19)
    distinct = rng.normal(size=(15, 8)).astype(np.float32)
    gallery = distinct[rng.integers(0, 15, 60)]            # repeated rows: tied final distances
    query = rng.normal(size=(20, 8)).astype(np.float32)
    kwargs = dict(query=query, gallery=gallery, query_labels=rng.integers(0, 5, 20),
                  gallery_labels=rng.integers(0, 5, 60), rerank=True, ks=(1, 5),
                  metrics=["precision@k", "recall@k", "ndcg", "rbp"])
    runs = {t: evalcore.evaluate(**kwargs, ties=t).per_query for t in ("pessimistic", "optimistic", "average")}
    tied = 0
    for name in ("precision_at_1", "precision_at_5", "recall_at_5", "ndcg", "rbp"):
        low, high, mean = (np.array(runs[t].column(name).to_pylist(), float)
                           for t in ("pessimistic", "optimistic", "average"))
        assert np.all(low <= mean + 1e-12) and np.all(mean <= high + 1e-12), name
        same = np.isclose(low, high, rtol=0, atol=1e-15)
        assert np.allclose(mean[same], low[same], rtol=0, atol=1e-12), name
        tied += int((~same).sum())
    assert tied > 0


def test_a_job_s_gate_on_a_metric_average_ties_leave_out_is_refused_when_the_job_is_read(tmp_path):
    from evalcore.jobs.nightly import load_job

    path = tmp_path / "job.toml"
    path.write_text('reports = "r"\nhistory = "h"\n[[evaluation]]\nname = "a"\ndataset = "d.zarr"\n'
                    'ties = "average"\n[gates.map]\nmax_drop_previous = 0.01\n')
    with pytest.raises(evalcore.InputError, match=r"'map' is not a metric"):
        load_job(path)
    path.write_text(path.read_text().replace("[gates.map]", "[gates.recall_at_5]"))
    assert load_job(path)["evaluation"][0]["ties"] == "average"
