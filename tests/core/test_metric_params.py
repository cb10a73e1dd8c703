"""A metric's parameters declared on the metric (issues 36 item 1 and 38): ``nDCG(gain=exp)@10``, ``dcg(base=10)``,
``RBP(p=0.73)``.

The references here are written from the definitions, not from evalcore's code: DCG with log base b and linear or
exponential gain summed item by item over each ranking (``math.log(r + 1, b)``), nDCG over the ideal of the judged
grades, and, under --ties average, the mean over every order of the tied items. scikit-learn's ``dcg_score
(log_base=b)`` and ``ndcg_score`` are checked too where it is installed (not in CI: the brute force carries it).
Then the names: every parameterised spelling leads to one record whose column ``registry.lookup`` turns back into
it (what a worker, ``compare`` and the nightly job do), ``select`` is idempotent, the names of before stay, a
bad key or value is refused naming the option and listing what the metric takes.
"""
from __future__ import annotations

import itertools
import math
import pickle
import subprocess
import sys
import warnings

import numpy as np
import pytest

import evalcore
from evalcore.core import metrics as m
from evalcore.core import registry

KS = (1, 3, 5)
#: (gain, base) settings of dcg / ndcg the brute force checks, with the spellings that ask for them
SETTINGS = [("linear", 2.0), ("exp", 2.0), ("linear", 10.0), ("exp", 10.0), ("linear", 1.5), ("exp", math.e)]


def _spell(measure, gain, base, cut=""):
    params = [f"gain={gain}"] if gain != "linear" else []
    params += [f"base={base!r}"] if base != 2.0 else []
    return f"{measure}({', '.join(params)}){cut}" if params else f"{measure}{cut}"


def _column(spelling, k=None):
    metric, cut = registry.parse(spelling)
    return registry.Column(metric, cut if cut is not None else k).name


# --------------------------------------------------------------------------- the brute force


def _gain(g, gain):
    return (2.0 ** g - 1.0) if gain == "exp" else float(g)


def dcg_reference(grades, gain="linear", base=2.0, k=None):
    """sum over the ranked items at places r = 1, 2, ... (<= k) of gain(g_r) / log_b(r + 1); grades below 1 gain
    nothing."""
    top = grades if k is None else grades[:k]
    return math.fsum(_gain(g, gain) / math.log(r + 1, base) for r, g in enumerate(top, start=1) if g >= 1)


def ndcg_reference(grades, judged, gain="linear", base=2.0, k=None):
    """DCG over the DCG of the ideal ranking: every judged grade >= 1, highest first; None without one."""
    ideal = sorted((g for g in judged if g >= 1), reverse=True)
    if not ideal:
        return None
    return dcg_reference(grades, gain, base, k) / dcg_reference(ideal, gain, base, k)


def references(grades, judged):
    """Every column the tests below ask for, of one ranking (``grades`` in ranked order, ``judged`` the query's
    judged grades, retrieved or not). None where the query has no item of grade >= 1 (null)."""
    known = any(g >= 1 for g in judged)
    out = {}
    for gain, base in SETTINGS:
        for k in (None, *KS):
            cut = "" if k is None else "@k"
            out[_column(_spell("dcg", gain, base, cut), k)] = dcg_reference(grades, gain, base, k) if known else None
            out[_column(_spell("ndcg", gain, base, cut), k)] = ndcg_reference(grades, judged, gain, base, k)
    return out


def all_spellings():
    return [_spell(measure, gain, base, cut) for gain, base in SETTINGS for measure in ("dcg", "ndcg")
            for cut in ("", "@k")]


def _check(rows, expected, key="key"):
    checked = 0
    for row in rows:
        want = expected[row[key]]
        for name, value in want.items():
            if value is None:
                assert row[name] is None, (row[key], name, row[name])
            else:
                assert row[name] == pytest.approx(value, rel=1e-12, abs=1e-13), (row[key], name, row[name], value)
                checked += 1
    assert checked > 100


def _graded(rng, n_query, n_gallery, share=0.5):
    """{qid: {docid: grade 0..4}} on about ``share`` of the pairs; one query judged with no relevant item."""
    qrels = {f"q{q}": {f"d{g}": int(rng.integers(0, 5)) for g in range(n_gallery) if rng.random() < share}
             for q in range(n_query)}
    qrels["q0"] = {d: 0 for d in qrels["q0"]}
    return qrels


# --------------------------------------------------------------------------- values: three kinds of input


def test_given_scores_with_graded_qrels_match_the_brute_force():
    rng = np.random.default_rng(36)
    nq, ng = 14, 30
    scores = rng.permutation(nq * ng).reshape(nq, ng) / (nq * ng)   # no ties
    qrels = _graded(rng, nq, ng)
    query_ids, doc_ids = [f"q{q}" for q in range(nq)], [f"d{g}" for g in range(ng)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", evalcore.EvalcoreWarning)
        result = evalcore.evaluate(scores=scores, query_ids=query_ids, gallery_ids=doc_ids, qrels=qrels, ks=KS,
                                   metrics=all_spellings())
    expected = {}
    for q, qid in enumerate(query_ids):
        order = np.argsort(-scores[q], kind="stable")
        expected[qid] = references([qrels[qid].get(doc_ids[j], 0) for j in order], list(qrels[qid].values()))
    _check(result.per_query.to_pylist(), expected)
    # the summary: the mean over the queries with a relevant item
    summary = result.summary.to_pylist()[0]
    for name in expected["q1"]:
        values = [w[name] for w in expected.values() if w[name] is not None]
        assert summary[name] == pytest.approx(math.fsum(values) / len(values), rel=1e-12), name


def test_embeddings_with_graded_qrels_match_the_brute_force():
    """Cosine on random vectors: the queries whose cosines are all at least 1e-5 apart (a hundred times float32's
    rounding, so the canonical scores rank as float64's do) are checked, most of them."""
    rng = np.random.default_rng(7)
    nq, ng, d = 10, 28, 16
    query = rng.standard_normal((nq, d)).astype(np.float32)
    gallery = rng.standard_normal((ng, d)).astype(np.float32)
    unit = gallery.astype(np.float64) / np.linalg.norm(gallery.astype(np.float64), axis=1, keepdims=True)
    exact = query.astype(np.float64) @ unit.T / np.linalg.norm(query.astype(np.float64), axis=1, keepdims=True)
    apart = np.diff(np.sort(exact, axis=1), axis=1).min(axis=1) > 1e-5
    assert apart.sum() >= 7
    qrels = _graded(rng, nq, ng)
    query_ids, doc_ids = [f"q{q}" for q in range(nq)], [f"d{g}" for g in range(ng)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", evalcore.EvalcoreWarning)
        result = evalcore.evaluate(query=query, gallery=gallery, query_ids=query_ids, gallery_ids=doc_ids,
                                   qrels=qrels, ks=KS, metrics=all_spellings())
    expected = {}
    for q, qid in enumerate(query_ids):
        order = np.argsort(-exact[q], kind="stable")
        expected[qid] = references([qrels[qid].get(doc_ids[j], 0) for j in order], list(qrels[qid].values()))
    _check([row for row, ok in zip(result.per_query.to_pylist(), apart) if ok], expected)


def _trec_lists(import_trec, rng, n_query=9, n_docs=14, ties=False):
    """A TREC run (each query's list a part of the documents; equal scores where ``ties``) with graded qrels,
    imported as precomputed rankings: (dataset, run, qrels)."""
    qrels, run = {}, {}
    for q in range(1, n_query + 1):
        docs = [f"d{j}" for j in range(n_docs)]
        qrels[f"q{q}"] = {d: int(rng.integers(0, 4)) for d in docs if rng.random() < 0.6}
        ranked = [d for d in docs if rng.random() < 0.8]
        values = rng.integers(1, 4, len(ranked)) / 4 if ties else rng.permutation(len(ranked)) / len(ranked)
        run[f"q{q}"] = {d: float(s) for d, s in zip(ranked, values)}
    out = import_trec(qrels, run)
    return out, run, qrels


def test_precomputed_lists_with_graded_qrels_match_the_brute_force(import_trec):
    """Lists shorter than the judged documents: the ideal holds every judged grade >= 1, listed or not."""
    path, run, qrels = _trec_lists(import_trec, np.random.default_rng(11))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", evalcore.EvalcoreWarning)
        result = evalcore.evaluate(str(path), ks=KS, metrics=all_spellings())
    expected = {}
    for q, docs in run.items():
        ranked = sorted(docs, key=lambda d: -docs[d])
        expected[q] = references([qrels[q].get(d, 0) for d in ranked], list(qrels[q].values()))
    rows = [row for row in result.per_query.to_pylist() if row["key"] in expected]
    assert len(rows) >= 7
    _check(rows, expected)


def test_ranx_dcg_burges_is_dcg_with_exponential_gain():
    """ranx's dcg_burges@k = sum_{i <= k} (2^g_i - 1) / log2(i + 1) (ranx's metrics/dcg.py with the Burges gain),
    written out here and through ``evalcore.compat.ranx``; ``metrics=["dcg_burges@5"]`` is ``dcg_exp@5``."""
    from evalcore.compat import ranx

    rng = np.random.default_rng(5)
    nq, ng = 12, 25
    scores = rng.permutation(nq * ng).reshape(nq, ng) / (nq * ng)
    query_ids, doc_ids = [f"q{q}" for q in range(nq)], [f"d{g}" for g in range(ng)]
    qrels = {q: {doc_ids[j]: int(rng.integers(0, 5)) for j in rng.choice(ng, 10, replace=False)} for q in query_ids}
    for q in query_ids:
        qrels[q][doc_ids[int(rng.integers(ng))]] = 3
    assert registry.select(["dcg_burges@5", "dcg_burges"]) == ("dcg_exp@5", "dcg_exp")
    result = evalcore.evaluate(scores=scores, query_ids=query_ids, gallery_ids=doc_ids, qrels=qrels,
                               metrics=["dcg_burges@5", "dcg_burges"])
    run = {q: {d: float(scores[i, j]) for j, d in enumerate(doc_ids)} for i, q in enumerate(query_ids)}
    for name, cut in (("dcg_exp_at_5", 5), ("dcg_exp", None)):
        got = result.per_query.column(name).to_pylist()
        want = []
        for i, q in enumerate(query_ids):
            ranked = [qrels[q].get(doc_ids[j], 0) for j in np.argsort(-scores[i], kind="stable")]
            want.append(math.fsum((2.0 ** g - 1) / math.log2(r + 1) for r, g in enumerate(ranked[:cut], start=1)))
        assert got == pytest.approx(want, rel=1e-12)
        spelt = "dcg_burges@5" if cut else "dcg_burges"
        assert got == list(ranx.evaluate(qrels, run, spelt, return_mean=False))


def test_scikit_learn_dcg_score_with_its_log_base_and_ndcg_score():
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(3)
    nq, ng = 12, 20
    scores = rng.permutation(nq * ng).reshape(nq, ng) / (nq * ng)
    grades = rng.integers(0, 4, (nq, ng))
    grades[:, 0] = np.maximum(grades[:, 0], 1)
    query_ids, doc_ids = [f"q{q}" for q in range(nq)], [f"d{g}" for g in range(ng)]
    qrels = {query_ids[q]: {doc_ids[g]: int(grades[q, g]) for g in range(ng)} for q in range(nq)}
    result = evalcore.evaluate(scores=scores, query_ids=query_ids, gallery_ids=doc_ids, qrels=qrels, ks=KS,
                               metrics=all_spellings())
    for q, row in enumerate(result.per_query.to_pylist()):
        for gain, base in SETTINGS:
            truth = (2.0 ** grades[q:q + 1] - 1) if gain == "exp" else grades[q:q + 1].astype(float)
            for k in (None, *KS):
                cut = "" if k is None else "@k"
                dcg = sklearn_metrics.dcg_score(truth, scores[q:q + 1], k=k, log_base=base)
                ndcg = sklearn_metrics.ndcg_score(truth, scores[q:q + 1], k=k)
                assert row[_column(_spell("dcg", gain, base, cut), k)] == pytest.approx(dcg, rel=1e-12)
                assert row[_column(_spell("ndcg", gain, base, cut), k)] == pytest.approx(ndcg, rel=1e-12)


def test_ndcg_s_base_cancels_to_the_last_bit():
    """Decided: nDCG at any base is computed as the base-2 nDCG (the base cancels in the ratio), so its values
    equal the plain nDCG's bit for bit; DCG at base b is log2(b) times DCG at base 2 (to rounding)."""
    path_rng = np.random.default_rng(2)
    nq, ng = 16, 40
    scores = path_rng.permutation(nq * ng).reshape(nq, ng) / (nq * ng)
    qrels = _graded(path_rng, nq, ng)
    query_ids, doc_ids = [f"q{q}" for q in range(nq)], [f"d{g}" for g in range(ng)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", evalcore.EvalcoreWarning)
        result = evalcore.evaluate(scores=scores, query_ids=query_ids, gallery_ids=doc_ids, qrels=qrels, ks=(5,),
                                   metrics=["ndcg", "ndcg(base=10)", "ndcg(base=1.01)", "ndcg@5", "ndcg(base=3)@5",
                                            "ndcg_exp", "ndcg_exp(base=10)", "ndcg(gain=exp, base=7)@5",
                                            "ndcg_exp@5", "dcg", "dcg(base=10)"])
    table = result.per_query
    for plain, other in (("ndcg", "ndcg_base10"), ("ndcg", "ndcg_base1.01"), ("ndcg_at_5", "ndcg_base3_at_5"),
                         ("ndcg_exp", "ndcg_exp_base10"), ("ndcg_exp_at_5", "ndcg_exp_base7_at_5")):
        a, b = np.array(table.column(plain).to_pylist(), float), np.array(table.column(other).to_pylist(), float)
        assert np.array_equal(a, b, equal_nan=True), (plain, other)
        assert result.summary.column(plain).to_pylist() == result.summary.column(other).to_pylist()
    a, b = np.array(table.column("dcg").to_pylist(), float), np.array(table.column("dcg_base10").to_pylist(), float)
    assert np.allclose(b, a * math.log2(10), rtol=1e-14, equal_nan=True)
    assert not np.array_equal(a, b, equal_nan=True)


# --------------------------------------------------------------------------- --ties average


def _tied_mean(grades_by_item, scores, judged, gain, base, k, normalised):
    """The mean of (n)DCG over every order of the tied items (each run of equal scores permuted every way)."""
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    runs = [list(g) for _, g in itertools.groupby(order, key=lambda i: scores[i])]
    values = []
    for arrangement in itertools.product(*(itertools.permutations(run) for run in runs)):
        grades = [grades_by_item[i] for run in arrangement for i in run]
        values.append(ndcg_reference(grades, judged, gain, base, k) if normalised else
                      dcg_reference(grades, gain, base, k))
    return None if values[0] is None else math.fsum(values) / len(values)


TIED = ["dcg(base=10)", "dcg(gain=exp)@k", "dcg(gain=exp, base=3)", "ndcg(base=10)@k", "ndcg(gain=exp, base=3)"]


def test_settings_keep_their_average_form_and_equal_the_mean_over_every_order_of_the_ties():
    for name in [*TIED, "RBP(p=0.73)", "ndcg(ties=average, gain=exp)@k"]:
        assert registry.parse(name)[0].average is not None, name
    assert registry.parse("rbp_resid(p=0.7)")[0].average is None
    assert registry.parse("ndcg(ties=average, gain=exp)")[0].average == registry.parse("ndcg_exp_avg")[0].function
    rng = np.random.default_rng(38)
    nq, ng = 6, 8
    scores = rng.integers(0, 3, (nq, ng)) / 3
    grades = rng.integers(0, 4, (nq, ng))
    query_ids, doc_ids = [f"q{q}" for q in range(nq)], [f"d{g}" for g in range(ng)]
    qrels = {query_ids[q]: {doc_ids[g]: int(grades[q, g]) for g in range(ng)} for q in range(nq)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", evalcore.EvalcoreWarning)
        result = evalcore.evaluate(scores=scores, query_ids=query_ids, gallery_ids=doc_ids, qrels=qrels, ks=(2, 5),
                                   ties="average", metrics=TIED)
    checked = 0
    for q, row in enumerate(result.per_query.to_pylist()):
        judged = list(grades[q])
        for name in TIED:
            metric, _ = registry.parse(name)
            gain, base = dict(metric.bound).get("gain", "linear"), float(dict(metric.bound).get("base", 2.0))
            for k in ((2, 5) if metric.parameter else (None,)):
                want = _tied_mean(list(grades[q]), list(scores[q]), judged, gain, base, k,
                                  metric.name.startswith("ndcg"))
                got = row[registry.Column(metric, k).name]
                assert got == (None if want is None else pytest.approx(want, rel=1e-12, abs=1e-13)), (q, name, k)
                checked += 1
    assert checked == nq * 7   # three without a cut-off, two at k = 2 and 5


def test_ndcg_ties_average_at_a_setting_on_lists_with_scores(import_trec):
    """ndcg(ties=average, gain=exp)@k (ndcg_exp_avg_at_k) under the default --ties: tie groups of a list with
    scores, the mean over every order of the ties."""
    path, run, qrels = _trec_lists(import_trec, np.random.default_rng(4), n_query=6, n_docs=8, ties=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", evalcore.EvalcoreWarning)
        result = evalcore.evaluate(str(path), ks=(3,), metrics=["ndcg(ties=average, gain=exp)@k",
                                                                "nDCG(ties = 'average', base=5)"])
    assert {"ndcg_exp_avg_at_3", "ndcg_avg_base5"} <= set(result.per_query.column_names)
    checked = 0
    for row in result.per_query.to_pylist():
        docs = run[row["key"]]
        items = list(docs)
        grades = [qrels[row["key"]].get(d, 0) for d in items]
        judged = list(qrels[row["key"]].values())
        want = _tied_mean(grades, [docs[d] for d in items], judged, "exp", 2.0, 3, True)
        assert row["ndcg_exp_avg_at_3"] == (None if want is None else pytest.approx(want, rel=1e-12))
        want = _tied_mean(grades, [docs[d] for d in items], judged, "linear", 2.0, None, True)
        assert row["ndcg_avg_base5"] == (None if want is None else pytest.approx(want, rel=1e-12))
        checked += want is not None
    assert checked >= 4


# --------------------------------------------------------------------------- names


#: parameterised spellings -> (the name select gives, its per-query column at k = 5 where it has a cut-off)
NAMES = {
    # the names of before, unchanged
    "ndcg(gain=exp)@10": ("ndcg_exp@10", "ndcg_exp_at_10"), "nDCG(gain=exp)": ("ndcg_exp", "ndcg_exp"),
    "nDCG(gain = exponential)@k": ("ndcg_exp@k", "ndcg_exp_at_5"), "nDCG(gain=linear)@5": ("ndcg@5", "ndcg_at_5"),
    "nDCG(ties=average)": ("ndcg_avg", "ndcg_avg"), "nDCG(ties=average)@3": ("ndcg_avg@3", "ndcg_avg_at_3"),
    "RBP(p=0.9)": ("rbp", "rbp"), "RBP(p=0.8)": ("rbp_0.80", "rbp_0.80"), "rbp(p=0.80)": ("rbp_0.80", "rbp_0.80"),
    "rbp_resid(p=0.5)": ("rbp_resid_0.50", "rbp_resid_0.50"), "RBP(p=0.73)": ("rbp_0.73", "rbp_0.73"),
    "rbp_resid(p=0.735)": ("rbp_resid_0.735", "rbp_resid_0.735"), "rbp_0.73": ("rbp_0.73", "rbp_0.73"),
    "nDCG(dcg='exp-log2')@10": ("ndcg_exp@10", "ndcg_exp_at_10"),
    # new settings
    "dcg(gain=exp)": ("dcg_exp", "dcg_exp"), "dcg(gain=exp)@10": ("dcg_exp@10", "dcg_exp_at_10"),
    "dcg(gain=exp)@k": ("dcg_exp@k", "dcg_exp_at_5"), "dcg(base=10)": ("dcg_base10", "dcg_base10"),
    "DCG( base = 10 , gain = 'exp' )@5": ("dcg_exp_base10@5", "dcg_exp_base10_at_5"),
    "dcg(gain=\"exponential\",base=10.0)@5": ("dcg_exp_base10@5", "dcg_exp_base10_at_5"),
    "dcg(base=2.5)@k": ("dcg_base2.5@k", "dcg_base2.5_at_5"), "dcg(base=2)": ("dcg", "dcg"),
    "ndcg(base=10)@5": ("ndcg_base10@5", "ndcg_base10_at_5"), "ndcg(base=10)": ("ndcg_base10", "ndcg_base10"),
    "ndcg_exp(base=10)@k": ("ndcg_exp_base10@k", "ndcg_exp_base10_at_5"),
    "ndcg_avg(gain=exp)": ("ndcg_exp_avg", "ndcg_exp_avg"),
    "ndcg(base=3, ties=average, gain=exp)@7": ("ndcg_exp_avg_base3@7", "ndcg_exp_avg_base3_at_7"),
    "dcg_burges@10": ("dcg_exp@10", "dcg_exp_at_10"), "dcg_exp_base10@5": ("dcg_exp_base10@5", "dcg_exp_base10_at_5"),
    "dcg_exp_base10_at_5": ("dcg_exp_base10@5", "dcg_exp_base10_at_5"), "dcg_exp": ("dcg_exp", "dcg_exp"),
    "RBP(p=1e-05)": ("rbp_1e-05", "rbp_1e-05"),
}


@pytest.mark.parametrize("spelt", NAMES)
def test_every_parameterised_spelling_names_one_metric_that_its_columns_lead_back_to(spelt):
    name, column_name = NAMES[spelt]
    assert registry.select([spelt]) == (name,)
    assert registry.select(registry.select([spelt])) == (name,)          # idempotent
    metric, k = registry.parse(spelt)
    assert registry.parse(name) == (metric, k)
    column = registry.Column(metric, k if k is not None or metric.parameter is None else 5)
    assert column.name == column_name
    # what a worker, compare and the nightly job do: the column's name alone gives the same metric
    assert registry.lookup(column.name) == column and registry.lookup(column.summary) == column
    assert registry.parse(column.name) == (metric, column.k) and registry.parse(column.spec) == (metric, column.k)
    assert pickle.loads(pickle.dumps(column)) == column
    assert registry.direction(column.summary) == ("lower" if "resid" in name else "higher")
    label = registry.label(column.name)
    assert label and "{k}" not in label
    assert metric.definition.partition(" = ")[0] == metric.column.replace("{k}", "k")


def test_the_labels_and_definitions_of_a_setting():
    metric = registry.parse("dcg(gain=exp, base=10)@k")[0]
    assert metric.label == "DCG@{k} (exp gain, base 10)" and registry.label("dcg_exp_base10_at_5") == \
        "DCG@5 (exp gain, base 10)"
    assert metric.definition == "dcg_exp_base10_at_k = sum_{r_i <= k} (2^g_i - 1) / log_10(r_i + 1)"
    ndcg = registry.parse("ndcg(base=10)")[0]
    assert ndcg.definition == ("ndcg_base10 = sum_i g_i / log_10(r_i + 1) / sum_{j=1..R} g*_j / log_10(j + 1)")
    assert "the base cancels" in ndcg.function.__doc__
    assert registry.label("rbp_0.73") == "RBP (p 0.73)" and registry.label("rbp_resid_0.60") == \
        "RBP residual (p 0.6)"
    assert registry.label("ndcg_exp_avg_base3_at_5") == "nDCG@5 (exp gain, ties averaged, base 3)"
    assert registry.parse("ndcg(ties=average)@k")[0].needs == ("tie_groups",)
    assert registry.parse("ndcg(ties=average, base=3)@k")[0].needs == ("tie_groups",)
    assert registry.parse("rbp_resid(p=0.3)")[0].needs == ("n_retrieved", "judged")


def test_the_registered_settings_are_the_names_the_mechanism_gives():
    """ndcg_exp, ndcg_avg, rbp_0.80, ... are registered records of their plain metric's settings: binding their
    values to the plain metric gives that record, under the names and columns of before."""
    settings = [x for x in registry.METRICS if x.family is not None]
    assert {x.name for x in settings} == {"ndcg_exp", "ndcg_exp@k", "ndcg_avg", "ndcg_avg@k",
                                          *(f"rbp_{p}" for p in ("0.50", "0.80", "0.95", "0.98")),
                                          *(f"rbp_resid_{p}" for p in ("0.50", "0.80", "0.95", "0.98"))}
    for record in settings:
        plain = registry.BY_NAME[record.family]
        assert registry._bind(plain, dict(record.bound)) is record
        assert record.params == plain.params and record.direction == plain.direction
        for pattern in ("name", "column", "summary"):
            assert registry._with_setting(getattr(plain, pattern), plain, record.bound) == getattr(record, pattern)
    assert registry.BY_NAME["ndcg_exp@k"].column == "ndcg_exp_at_{k}"
    assert registry.BY_NAME["ndcg_avg@k"].summary == "ndcg_avg_at_{k}"


def test_a_made_setting_is_the_same_metric_in_another_process():
    column = registry.lookup("ndcg_exp_avg_base3_at_5")
    code = ("import pickle, sys; from evalcore.core import registry; column = pickle.loads(sys.stdin.buffer.read()); "
            "assert registry.lookup(column.name) == column, column; print(column.metric.definition)")
    done = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(column), capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().strip() == column.metric.definition


def test_a_setting_s_columns_come_after_its_plain_metric_s_registered_settings_in_report_order():
    columns = registry.run_columns(["dcg(base=10)", "map", "rbp_0.73", "dcg(gain=exp)", "ndcg(base=3)", "ndcg",
                                    "rbp_0.80", "rbp(p=0.6)", "dcg"], (5,), None)
    names = [c.name for c in columns]
    # made settings in the order of their values, parameter by parameter as declared (gain, then base)
    assert names == ["ap", "ndcg", "ndcg_base3", "rbp_0.80", "rbp_0.60", "rbp_0.73", "dcg", "dcg_base10", "dcg_exp"]


@pytest.mark.parametrize("given, words", [
    ("dcg(foo=1)", "dcg has no parameter 'foo'; dcg takes gain = linear | exp (default linear); base = a number > 1 "
                   "(default 2)"),
    ("dcg(gain=cubic)@5", "gain must be linear or exp, not 'cubic'; dcg@k takes gain = linear | exp"),
    ("dcg(base=1)", "base must be a number > 1; dcg takes"), ("ndcg(base=0.5)@3", "base must be a number > 1"),
    ("dcg(base=inf)", "base must be a number > 1"), ("dcg(base=x)", "base must be a number > 1"),
    ("dcg(ties=average)", "dcg has no parameter 'ties'"),
    ("ndcg(ties=optimistic)", "ties must be run or average"),
    ("ndcg(gain=exp, gain=linear)", "gain is given twice"), ("ndcg(gain)", "give each parameter as key=value"),
    ("ndcg_exp(gain=linear)", "ndcg_exp is gain=exp already: write ndcg(gain=...)"),
    ("rbp(p=1)", "the persistence p must be a number between 0 and 1; rbp takes p = a number between 0 and 1 "
                 "(default 0.9)"),
    ("rbp(p=0.7)@5", "rbp takes no cut-off"), ("map(gain=exp)", "map takes no parameters"),
    ("dcg(gain=exp)@0", "the cut-off must be a positive integer"), ("nothing(p=1)", "no metric is called 'nothing'"),
    ("dcg(rel=2)", "evalcore sets rel for the whole run"),
])
def test_a_bad_key_or_value_is_refused_naming_the_option_and_what_the_metric_takes(given, words):
    with pytest.raises(evalcore.OptionError) as caught:
        registry.select([given])
    assert caught.value.option == "--metrics" and words in str(caught.value), str(caught.value)
    assert str(caught.value).startswith(f"--metrics: {given!r}: ")


@pytest.mark.parametrize("given", ["dcg_base2", "dcg_base10.0", "dcg_base1", "dcg_base10_at_05", "rbp_0.730",
                                   "ndcg_exp_exp", "dcg_avg", "dcg_exp_base0.5@5"])
def test_a_setting_s_name_is_taken_only_as_its_record_spells_it(given):
    with pytest.raises(evalcore.OptionError, match="unknown metric"):
        registry.parse(given)
    assert registry.lookup(given) is None


def test_python_names_the_parameter_metrics():
    scores = np.array([[0.9, 0.1, 0.5]])
    with pytest.raises(evalcore.OptionError) as caught:
        evalcore.evaluate(scores=scores, query_labels=[1], gallery_labels=[1, 0, 1], metrics=["dcg(base=-3)"])
    assert caught.value.option == "metrics"
    assert str(caught.value).startswith("metrics: 'dcg(base=-3)': base must be a number > 1; dcg takes gain = ")


# --------------------------------------------------------------------------- the listing


def test_the_listing_shows_each_metric_s_parameters_after_its_definition():
    listed = {info.name: info for info in evalcore.metric_names()}
    assert listed["dcg"].params == (registry.GAIN, registry.BASE)
    assert listed["ndcg@k"].params == (registry.GAIN, registry.TIES, registry.BASE)
    assert listed["ndcg_exp"].params == (registry.TIES, registry.BASE)   # gain is bound
    assert listed["rbp"].params == (registry.PERSISTENCE,) and listed["rbp_0.80"].params == ()
    line = str(listed["dcg"])
    assert line.endswith(f"{listed['dcg'].definition}  [gain = linear | exp (default linear); base = a number > 1 "
                         "(default 2)]")
    assert str(listed["rbp"]).endswith("[p = a number between 0 and 1 (default 0.9)]")
    # a metric without parameters: its line as before, ending with its definition
    assert str(listed["map"]).endswith(listed["map"].definition) and "[" not in str(listed["map"])
    averaged = {info.name: info for info in evalcore.metric_names(ties="average")}
    assert averaged["dcg@k"].params == (registry.GAIN, registry.BASE) and "rbp_resid" not in averaged
    for param in (registry.GAIN, registry.BASE, registry.TIES, registry.PERSISTENCE):
        assert param.description and "\n" not in param.description
        assert param.value(m.number_text(param.default) if not isinstance(param.default, str) else param.default) \
            == param.default


# --------------------------------------------------------------------------- readers of a report's columns


def test_compare_and_a_nightly_job_take_settings_by_any_spelling(tmp_path):
    """compare rebuilds each metric from the reports' column names (registry.lookup) and keeps those asked for;
    a nightly job stores ``select``'s names and checks its gates against the summary columns they write."""
    from evalcore.jobs.nightly import evaluation_metrics, load_job

    rng = np.random.default_rng(12)
    nq, ng = 40, 30
    query_ids, doc_ids = [f"q{q}" for q in range(nq)], [f"d{g}" for g in range(ng)]
    qrels = _graded(rng, nq, ng, share=0.4)
    asked = ["dcg(gain=exp, base=10)@5", "RBP(p=0.73)", "ndcg(base=3)@k", "map"]
    for name in ("a", "b"):
        scores = rng.permutation(nq * ng).reshape(nq, ng) / (nq * ng)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", evalcore.EvalcoreWarning)
            evalcore.evaluate(scores=scores, query_ids=query_ids, gallery_ids=doc_ids, qrels=qrels, ks=(5,),
                              metrics=asked).save(tmp_path / name)
    result = evalcore.compare(tmp_path / "a", tmp_path / "b", resamples=200, permutations=200,
                              metrics=["dcg_exp_base10@5", "rbp(p=0.73)", "ndcg(base=3)@5"])
    assert {r.metric for r in result.rows} == {"dcg_exp_base10_at_5", "rbp_0.73", "ndcg_base3_at_5"}
    job = tmp_path / "job.toml"
    job.write_text('reports = "r"\nhistory = "h"\ntrend_metrics = ["dcg_exp_base10_at_5", "rbp_0.73"]\n'
                   '[[evaluation]]\nname = "a"\ndataset = "d.zarr"\nks = [5]\n'
                   'metrics = ["dcg(gain=exp, base=10)@5", "RBP(p=0.73)", "nDCG(base=3)@k"]\n'
                   "[gates.ndcg_base3_at_5]\nmax_drop_previous = 0.01\n")
    loaded = load_job(job)
    assert loaded["evaluation"][0]["metrics"] == ["dcg_exp_base10@5", "rbp_0.73", "ndcg_base3@k"]
    assert {"dcg_exp_base10_at_5", "rbp_0.73", "ndcg_base3_at_5"} <= set(evaluation_metrics(loaded["evaluation"][0]))
