"""nDCG with exponential gain, ERR@k and Judged@k (issue 38, CONTRACT §18, part 2), against the peers that define them.

- ``ndcg_exp`` / ``ndcg_exp@k``: Burges et al.'s gain 2^g - 1, as ir_measures computes ``nDCG(gains={g: 2^g - 1})``
  (it relabels the qrels with the gains and asks pytrec_eval for ``ndcg`` / ``ndcg_cut``): the expected values
  here come from pytrec_eval itself (trec_eval 9's code in process; an optional test dependency, the tests skip
  without it) on the same relabelled qrels. Ties: trec_eval's docno order on both sides (``--order trec_eval``).
- ``judged@k``: ir_measures' ``Judged@k`` (its ``judged`` provider, pure Python; skipped without ir_measures): the
  share of the top min(k, n) that has a judgement. Scores here are distinct: ir_measures breaks ties by docno
  ascending, trec_eval by docno descending.
- ``err@k``: Chapelle et al.'s cascade with gdeval's grades (0..4, stop probability (2^g - 1)/2^4), as
  ir_measures' ``ERR@k`` runs it (gdeval.pl, from the TREC Web track; needs perl; it prints 5 decimals), and at
  full precision against the cascade walked down each ranking here.
"""
import math
import random
import shutil

import pytest

from evalcore.engine.evaluate import Options, evaluate
from evalcore.io import importers

KS = (1, 3, 5, 10)


def draw(seed: int, ties: bool):
    """({qid: {docno: grade 0..3}}, {qid: {docno: score}}): judged and unjudged documents in the runs."""
    rng = random.Random(seed)
    qrels, run = {}, {}
    for q in range(1, 13):
        docs = [f"d{j:02d}" for j in range(rng.randint(4, 20))]
        qrels[f"q{q}"] = {d: rng.choice([0, 0, 1, 2, 3]) for d in rng.sample(docs, rng.randint(1, len(docs)))}
        ranked = rng.sample(docs, rng.randint(1, len(docs)))
        scores = rng.sample(range(1000), len(ranked)) if not ties else [rng.choice([1, 2, 3, 5]) for _ in ranked]
        run[f"q{q}"] = {d: s / 1000 for d, s in zip(ranked, scores)}
    return qrels, run


def evalcore_rows(tmp_path, qrels, run, metrics, order="trec_eval"):
    """{qid: per-query row} and the summary row, through import trec-run --order ORDER and evaluate (``score``
    keeps ranking/score, so equal scores are ties; ``trec_eval`` breaks them by docno, descending)."""
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "qrels").write_text("".join(f"{q} 0 {d} {g}\n" for q, docs in qrels.items() for d, g in docs.items()))
    lines = []
    for q, docs in run.items():
        ordered = sorted(docs.items(), key=lambda x: (-x[1], x[0]))
        lines += [f"{q} Q0 {d} {i + 1} {s!r} r\n" for i, (d, s) in enumerate(ordered)]
    (tmp_path / "run").write_text("".join(lines))
    out = tmp_path / "ds.zarr"
    importers.import_to("trec-run", [tmp_path / "run"], out, qrels=str(tmp_path / "qrels"), order=order)
    result = evaluate(out, Options(protocol="qrels", ks=KS, empty_queries="zero", metrics=metrics))
    return {row["key"]: row for row in result.per_query.to_pylist()}, result.summary.to_pylist()[0]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_exponential_gain_ndcg_equals_pytrec_eval_on_relabelled_qrels(tmp_path, seed):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels, run = draw(seed, ties=True)
    gains = {q: {d: 2 ** g - 1 for d, g in docs.items()} for q, docs in qrels.items()}
    measures = {"ndcg", "ndcg_cut." + ",".join(map(str, KS))}
    want = pytrec_eval.RelevanceEvaluator(gains, measures).evaluate(run)
    rows, summary = evalcore_rows(tmp_path, qrels, run, ["ndcg_exp", "ndcg_exp@k"])
    assert set(rows) == set(want)
    for q, values in want.items():
        assert rows[q]["ndcg_exp"] == pytest.approx(values["ndcg"], rel=1e-12, abs=1e-15), q
        for k in KS:
            assert rows[q][f"ndcg_exp_at_{k}"] == pytest.approx(values[f"ndcg_cut_{k}"], rel=1e-12, abs=1e-15), (q, k)
    assert summary["ndcg_exp"] == pytest.approx(math.fsum(v["ndcg"] for v in want.values()) / len(want), rel=1e-12)
    # and it is not the linear-gain nDCG: grades 2 and 3 weigh 3 and 7, not 2 and 3
    linear = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg"}).evaluate(run)
    assert any(abs(linear[q]["ndcg"] - want[q]["ndcg"]) > 1e-3 for q in want)


@pytest.mark.parametrize("seed", [4, 5])
def test_judged_at_k_equals_ir_measures(tmp_path, seed):
    ir_measures = pytest.importorskip("ir_measures")
    qrels, run = draw(seed, ties=False)
    measures = [ir_measures.Judged @ k for k in KS]
    want: dict = {}
    for metric in ir_measures.iter_calc(measures, qrels, run):
        want.setdefault(metric.query_id, {})[metric.measure["cutoff"]] = metric.value
    rows, summary = evalcore_rows(tmp_path, qrels, run, ["judged"])
    assert set(rows) == set(want)
    for q, values in want.items():
        for k in KS:
            assert rows[q][f"judged_at_{k}"] == pytest.approx(values[k], rel=1e-12, abs=1e-15), (q, k)
    for k in KS:
        assert summary[f"judged_at_{k}"] == pytest.approx(math.fsum(v[k] for v in want.values()) / len(want))


def test_judged_at_k_leaves_an_in_the_pool_grade_out(tmp_path):
    """A negative TREC grade means "in the pool, not judged" (README, TREC): not judged here, where ir_measures
    counts any qrels line. Hand-worked: d1 (grade 1), d2 (-2), d3 (0), d4 (unjudged) in that order: judged@2 =
    1/2, judged@4 = 2/4, judged@10 = 2/4 (the list has 4)."""
    rows, _ = evalcore_rows(tmp_path, {"q1": {"d1": 1, "d2": -3, "d3": 0}},
                            {"q1": {"d1": 0.9, "d2": 0.8, "d3": 0.7, "d4": 0.6}}, ["judged@2", "judged@4", "judged@10"])
    assert (rows["q1"]["judged_at_2"], rows["q1"]["judged_at_4"], rows["q1"]["judged_at_10"]) == (0.5, 0.5, 0.5)


def cascade(grades, k, top=4):
    """gdeval's err(): walk the top k, stopping at each with probability (2^g - 1)/2^top, scoring 1/rank."""
    score, decay = 0.0, 1.0
    for i, g in enumerate(grades[:k]):
        stop = (2 ** g - 1) / 2 ** top
        score += stop * decay / (i + 1)
        decay *= 1 - stop
    return score


@pytest.mark.parametrize("seed", [6, 7])
def test_err_at_k_equals_the_cascade_and_gdeval(tmp_path, seed):
    rng = random.Random(seed)
    qrels, run = draw(seed, ties=False)
    # numeric topics and grades up to 4, as gdeval reads them
    qrels = {q[1:]: {d: rng.choice([0, 1, 2, 3, 4]) if g else 0 for d, g in docs.items()} for q, docs in qrels.items()}
    run = {q[1:]: docs for q, docs in run.items()}
    rows, _ = evalcore_rows(tmp_path, qrels, run, ["err"])
    cascades = {}
    for q, docs in run.items():
        grades = [max(qrels[q].get(d, 0), 0) for d, _ in sorted(docs.items(), key=lambda x: (-x[1], x[0]))]
        if any(g > 0 for g in qrels[q].values()):
            cascades[q] = {k: cascade(grades, k) for k in KS}
    # a judged query without a relevant document scores 0 (--empty-queries zero; gdeval leaves it out)
    assert cascades and {q for q, row in rows.items() if row["n_relevant"]} == set(cascades)
    assert all(row["err_at_10"] == 0 for q, row in rows.items() if q not in cascades)
    for q, values in cascades.items():
        for k in KS:
            assert rows[q][f"err_at_{k}"] == pytest.approx(values[k], rel=1e-12, abs=1e-15), (q, k)
    ir_measures = pytest.importorskip("ir_measures")
    if not shutil.which("perl"):
        pytest.skip("gdeval needs perl")
    for metric in ir_measures.iter_calc([ir_measures.ERR @ k for k in KS], qrels, run):
        if metric.query_id in cascades:
            assert rows[metric.query_id][f"err_at_{metric.measure['cutoff']}"] == pytest.approx(metric.value, abs=5e-6)


@pytest.mark.parametrize("seed", [8, 9])
def test_tie_averaged_ndcg_equals_scikit_learn_ndcg_score(tmp_path, seed):
    """ndcg_avg / ndcg_avg@k: McSherry and Najork's tie-averaged nDCG, as scikit-learn's ndcg_score computes it
    (ignore_ties=False, linear gains, log2 discount): every document of each query ranked, few distinct scores
    (ties of all sizes). Skipped without scikit-learn."""
    np = pytest.importorskip("numpy")
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    rng = random.Random(seed)
    qrels, run = {}, {}
    for q in range(1, 15):
        docs = [f"d{j:02d}" for j in range(rng.randint(2, 25))]
        qrels[f"q{q}"] = {d: rng.choice([0, 0, 1, 2, 3]) for d in docs}
        run[f"q{q}"] = {d: rng.choice([1, 2, 3, 4]) / 4 for d in docs}
    rows, summary = evalcore_rows(tmp_path, qrels, run, ["ndcg_avg", "ndcg_avg@k"], order="score")
    checked = 0
    for q, docs in run.items():
        truth = np.array([[qrels[q][d] for d in docs]], dtype=float)
        if not truth.any():
            continue
        scores = np.array([[docs[d] for d in docs]])
        assert rows[q]["ndcg_avg"] == pytest.approx(sklearn_metrics.ndcg_score(truth, scores), rel=1e-12), q
        for k in KS:
            want = sklearn_metrics.ndcg_score(truth, scores, k=k)
            assert rows[q][f"ndcg_avg_at_{k}"] == pytest.approx(want, rel=1e-12, abs=1e-15), (q, k)
        checked += 1
    assert checked >= 10
    # ties change it: the pessimistic nDCG of the same run differs somewhere
    plain, _ = evalcore_rows(tmp_path / "again", qrels, run, ["ndcg"], order="score")
    assert any(abs(plain[q]["ndcg"] - rows[q]["ndcg_avg"]) > 1e-6 for q in plain if plain[q]["n_relevant"])


def test_tie_averaged_ndcg_is_refused_for_a_scan_of_the_whole_gallery():
    import numpy as np

    import evalcore

    labels = dict(query_labels=np.array([0, 1]), gallery_labels=np.array([0, 1, 0]))
    with pytest.raises(evalcore.InputError, match=r"^metrics: ndcg_avg need\(s\) the tie groups of a precomputed"):
        evalcore.evaluate(scores=np.ones((2, 3)), metrics=["ndcg_avg"], **labels)


def test_the_contracts_parameter_spellings_name_the_registered_settings():
    from evalcore import InputError
    from evalcore.core import registry

    assert registry.select(["nDCG(gain=exp)@10", "nDCG(gain = exponential)", "nDCG(gain=linear)@5", "RBP(p=0.9)",
                            "nDCG(ties=average)@3", "ERR@10", "Judged@5"]) == \
        ("ndcg_exp@10", "ndcg_exp", "ndcg@5", "rbp", "ndcg_avg@3", "err@10", "judged@5")
    assert registry.select(["RBP(p=0.8)", "rbp(p=0.80)", "rbp_resid(p=0.95)"]) == ("rbp_0.80", "rbp_resid_0.95")
    assert registry.select(["RBP(p=0.7)"]) == ("rbp_0.70",)   # any 0 < p < 1 (tests/test_trec_measures_more.py)
    with pytest.raises(InputError, match=r"^--metrics: 'RBP\(p=1.7\)': the persistence p must be a number between "):
        registry.select(["RBP(p=1.7)"])
    with pytest.raises(InputError, match=r"^--metrics: 'map\(x=1\)': map takes no parameters \(ndcg, ndcg@k, "):
        registry.select(["map(x=1)"])
