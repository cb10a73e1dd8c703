"""Measures named in each field's own spelling (core.spellings): trec_eval's, ir_measures', ranx's.

Two kinds of check: each spelling becomes the evalcore metric with that field's definition (the table below
is the fields' own documentation, not evalcore's output), and evaluating under the fields' spellings gives
what a brute force of each field's definition gives, and what ``evalcore.trec`` (checked against trec_eval's
published outputs in test_trec_*) gives for trec_eval's names.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import evalcore
from evalcore.core import registry, spellings

#: spelling -> the evalcore metric (as ``registry.select`` spells it) with the same definition
SAME = {
    # trec_eval: -m names and the names it prints with -q (P_5)
    "P.5": "precision@5", "P_5": "precision@5", "recall.100": "recall@100", "ndcg_cut.10": "ndcg@10",
    "ndcg_cut_10": "ndcg@10", "map_cut.100": "map_cut@100", "success.1": "hit@1", "relative_P.5": "relative_p@5",
    "recip_rank": "mrr", "Rprec": "rprec", "set_P": "set_p", "set_F": "set_f", "infAP": "infap", "binG": "bing",
    "Rndcg": "rndcg", "rbp.p=0.8": "rbp_0.80", "rbp_resid.p=0.5": "rbp_resid_0.50", "unj.5": "unj@5",
    "num_rel_ret": "num_rel_ret", "map": "map", "ndcg": "ndcg", "bpref": "bpref",
    # ir_measures (measures/*.py): AP@k is trec_eval's map_cut (1/R), not evalcore's landmark map@k
    "P@5": "precision@5", "R@100": "recall@100", "AP": "map", "AP@100": "map_cut@100", "RR": "mrr",
    "RR@10": "mrr@10", "nDCG": "ndcg", "nDCG@10": "ndcg@10", "nDCG(dcg='exp-log2')@10": "ndcg_exp@10",
    "nDCG(dcg=log2)": "ndcg", "Success@10": "hit@10", "Judged@10": "judged@10", "ERR@20": "err@20",
    "NumRel": "num_rel", "NumRet": "num_ret", "NumRelRet": "num_rel_ret", "SetP": "set_p", "SetR": "set_recall",
    "SetF": "set_f", "SetAP": "set_map", "IPrec@0.5": "iprec_at_recall_0.50", "IPrec@0": "iprec_at_recall_0.00",
    "Bpref": "bpref", "RBP(p=0.8)": "rbp_0.80",
    # ranx
    "hit_rate@10": "hit@10", "r-precision": "rprec", "ndcg_burges@10": "ndcg_exp@10", "ndcg_burges": "ndcg_exp",
    "dcg_burges@10": "dcg_exp@10", "dcg_burges": "dcg_exp",   # ranx's sum_i (2^g_i - 1) / log2(i + 1)
    "precision@5": "precision@5", "mrr@10": "mrr@10",
    # evalcore's own names are untouched, whatever their case
    "map@100": "map@100", "mAP@100": "map@100", "ap_at_100": "map@100", "Recall@5": "recall@5",
}

#: spellings refused, and a word of what the message says to write instead
REFUSED = {
    "hits@10": "precision@k times k", "f1@10": "harmonic mean", "rbp.95": "compat.ranx",
    "P(rel=2)@5": "--rel-level", "AP(judged_only=True)": "--judged-only", "nDCG(gains={0:0})": "qrels/rel",
    "nDCG(dcg='exp')": "exp-log2", "IPrec@0.55": "0.1", "P.5,10": "P.5, P.10",
}


@pytest.mark.parametrize("spelt, name", SAME.items())
def test_a_field_s_spelling_is_the_metric_of_its_definition(spelt, name):
    assert registry.select([spelt]) == (name,)


@pytest.mark.parametrize("spelt, says", REFUSED.items())
def test_a_spelling_evalcore_computes_otherwise_is_refused_saying_what_to_write(spelt, says):
    with pytest.raises(evalcore.OptionError) as caught:
        registry.select([spelt], "--metrics")
    assert caught.value.option == "--metrics"
    assert repr(spelt) in str(caught.value) and says in str(caught.value)


def test_every_trec_eval_measure_the_trec_command_computes_is_spelt_in_metrics_too():
    # one table for both: evalcore trec -m NAME and metrics=[NAME] name the same metric
    for measure, (metric, _) in spellings.TREC_EVAL.items():
        if "{level}" in metric:
            continue
        spelt = f"{measure}.7" if "{k}" in metric else measure
        assert registry.select([spelt]) == registry.select([metric.replace("{k}", "7")]), measure


# --------------------------------------------------------------------------- the values, end to end


def _data(seed=3, n_query=12, n_gallery=60):
    rng = np.random.default_rng(seed)
    scores = rng.permutation(n_query * n_gallery).reshape(n_query, n_gallery) / (n_query * n_gallery)  # no ties
    query_ids = [f"q{i}" for i in range(n_query)]
    doc_ids = [f"d{j}" for j in range(n_gallery)]
    qrels = {q: {doc_ids[j]: int(rng.integers(0, 4)) for j in rng.choice(n_gallery, 15, replace=False)}
             for q in query_ids}
    for q in query_ids:   # every query has a relevant document
        qrels[q][doc_ids[int(rng.integers(n_gallery))]] = 2
    return scores, query_ids, doc_ids, qrels


def _ranked_grades(scores, doc_ids, judged):
    order = np.argsort(-scores, kind="stable")
    return [judged.get(doc_ids[j], 0) for j in order]


def _field_definitions(grades, judged, k):
    """Each field's definition written out from its documentation (binary relevance: grade >= 1)."""
    rel = [1 if g >= 1 else 0 for g in grades]
    n_rel = sum(1 for g in judged.values() if g >= 1)
    precision_at = sum(rel[:k]) / k
    recall_at = sum(rel[:k]) / n_rel
    hits = np.flatnonzero(rel)
    ap_cut = sum((i + 1) / (r + 1) for i, r in enumerate(hits) if r < k) / n_rel      # ir_measures AP@k
    rr_at = next((1 / (r + 1) for r in hits if r < k), 0.0)
    ideal = sorted((g for g in judged.values() if g >= 1), reverse=True)

    def ndcg(gain):
        dcg = sum(gain(g) / math.log2(i + 2) for i, g in enumerate(grades[:k]) if g >= 1)
        return dcg / sum(gain(g) / math.log2(i + 2) for i, g in enumerate(ideal[:k]))

    return {f"P@{k}": precision_at, f"R@{k}": recall_at, f"AP@{k}": ap_cut, f"RR@{k}": rr_at,
            f"Success@{k}": float(hits[0] < k), f"hit_rate@{k}": float(hits[0] < k),
            f"nDCG@{k}": ndcg(lambda g: g), f"nDCG(dcg='exp-log2')@{k}": ndcg(lambda g: 2.0 ** g - 1),
            f"ndcg_burges@{k}": ndcg(lambda g: 2.0 ** g - 1), "r-precision": sum(rel[:n_rel]) / n_rel,
            # ranx's dcg_burges@k (ranx's metrics.dcg with the Burges gain): not normalised
            f"dcg_burges@{k}": sum((2.0 ** g - 1) / math.log2(i + 2) for i, g in enumerate(grades[:k]) if g >= 1)}


def test_values_under_ir_measures_and_ranx_spellings_equal_their_definitions():
    scores, query_ids, doc_ids, qrels = _data()
    k = 5
    expected = [_field_definitions(_ranked_grades(scores[i], doc_ids, qrels[q]), qrels[q], k)
                for i, q in enumerate(query_ids)]
    names = list(expected[0])
    result = evalcore.evaluate(scores=scores, query_ids=query_ids, gallery_ids=doc_ids, qrels=qrels, metrics=names)
    for name in names:
        metric, cut = registry.parse(name)
        got = result.per_query.column(registry.Column(metric, cut).name).to_pylist()
        want = [row[name] for row in expected]
        assert got == pytest.approx(want, abs=1e-12), name


def test_values_under_trec_eval_spellings_equal_the_trec_command_s():
    scores, query_ids, doc_ids, qrels = _data(seed=5)
    run = {q: {d: float(scores[i, j]) for j, d in enumerate(doc_ids)} for i, q in enumerate(query_ids)}
    measures = ["P.5", "recall.10", "ndcg_cut.10", "map_cut.10", "success.5", "recip_rank", "Rprec",
                "relative_P.5", "ndcg"]
    printed = ["P_5", "recall_10", "ndcg_cut_10", "map_cut_10", "success_5", "recip_rank", "Rprec",
               "relative_P_5", "ndcg"]
    trec = evalcore.trec(qrels, run, measures).per_query
    result = evalcore.evaluate(scores=scores, query_ids=query_ids, gallery_ids=doc_ids, qrels=qrels,
                               metrics=measures)
    for measure, name in zip(measures, printed):
        metric, cut = registry.parse(measure)
        got = result.per_query.column(registry.Column(metric, cut).name).to_pylist()
        assert got == pytest.approx([trec[q][name] for q in query_ids], abs=1e-12), measure


def test_the_command_line_takes_a_field_s_spelling_and_refuses_one_in_a_line(tmp_path, capsys):
    from evalcore.cli.main import main

    scores, query_ids, doc_ids, qrels = _data(seed=7, n_query=4, n_gallery=20)
    lines = [f"{q} 0 {d} {g}" for q, docs in qrels.items() for d, g in docs.items()]
    (tmp_path / "qrels.txt").write_text("\n".join(lines) + "\n")
    run = [f"{q} Q0 {d} {r} {scores[i, j]:.6f} x" for i, q in enumerate(query_ids)
           for r, j in enumerate(np.argsort(-scores[i], kind="stable")) for d in [doc_ids[j]]]
    (tmp_path / "run.txt").write_text("\n".join(run) + "\n")
    assert main(["import", "trec-run", str(tmp_path / "run.txt"), "--qrels", str(tmp_path / "qrels.txt"),
                 "--out", str(tmp_path / "ds.zarr"), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(tmp_path / "ds.zarr"), "--metrics", "hits@5", "--quiet",
                 "--out", str(tmp_path / "refused")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("evalcore: error: --metrics: 'hits@5': ranx's hits@k")
    assert not (tmp_path / "refused").exists()
    assert main(["evaluate", str(tmp_path / "ds.zarr"), "--metrics", "P.5,nDCG@5", "--quiet",
                 "--out", str(tmp_path / "out")]) == 0
    summary = evalcore.read_report(str(tmp_path / "out"))["summary"]
    assert {"precision_at_5", "ndcg_at_5"} <= set(summary.column_names)
