"""``evalcore.compat.pytrec_eval``: pytrec_eval's RelevanceEvaluator, signature, return value and rules (issue 37,
item 3).

Expected values come from pytrec_eval's own test suite (cvangysel/pytrec_eval, tests/pytrec_eval_tests.py,
commit 0d8571efc2dea5a792358410d5affbe0ad383602), copied with their inputs; its two "traditional" cases
aggregate per-query values with ``compute_aggregated_measure`` and compare them with trec_eval's published
``test/out.test`` (``trec_eval qrels.test results.test``) and ``test/out.test.aql`` (``-m all_trec -l2
qrels.rel_level results.test``) at 3 places: their ``all`` lines (the measures evalcore computes) are copied
below as printed by trec_eval (usnistgov/trec_eval, 10.0-rc3), and checked here at the printed 4 places. The
last tests compare with pytrec_eval itself (pytrec-eval-terrier) on random graded runs with ties, skipped
when it is not installed.
"""
import math
import os
import random

import pytest

from evalcore.compat import pytrec_eval
from evalcore.errors import InputError

FIXTURES = os.path.join(os.path.dirname(__file__), os.pardir, "fixtures", "trec")
QREL = {"q1": {"d1": 0, "d2": 1, "d3": 0}, "q2": {"d2": 1, "d3": 1}}

OUT_TEST = {'num_q': 3, 'num_ret': 1500, 'num_rel': 561, 'num_rel_ret': 131, 'map': 0.1785, 'gm_map': 0.1051, 'Rprec': 0.2174,
    'bpref': 0.1981, 'recip_rank': 0.4064, 'iprec_at_recall_0.00': 0.4665, 'iprec_at_recall_0.10': 0.3885,
    'iprec_at_recall_0.20': 0.3186, 'iprec_at_recall_0.30': 0.2852, 'iprec_at_recall_0.40': 0.2666,
    'iprec_at_recall_0.50': 0.2184, 'iprec_at_recall_0.60': 0.0858, 'iprec_at_recall_0.70': 0.0348,
    'iprec_at_recall_0.80': 0.0312, 'iprec_at_recall_0.90': 0.0312, 'iprec_at_recall_1.00': 0.0312, 'P_5': 0.2667,
    'P_10': 0.3, 'P_15': 0.3111, 'P_20': 0.3667, 'P_30': 0.3333, 'P_100': 0.2467, 'P_200': 0.16, 'P_500': 0.0873,
    'P_1000': 0.0437}
OUT_TEST_AQL = {'infAP': 0.1792, 'binG': 0.1367, 'G': 0.1206, 'ndcg_rel': 0.357, 'Rndcg': 0.2964,
    'num_q': 3, 'num_ret': 1500, 'num_rel': 97, 'num_rel_ret': 59, 'map': 0.1667, 'gm_map': 0.021, 'Rprec': 0.1688,
    'bpref': 0.1571, 'recip_rank': 0.352, 'iprec_at_recall_0.00': 0.3723, 'iprec_at_recall_0.10': 0.3197,
    'iprec_at_recall_0.20': 0.3186, 'iprec_at_recall_0.30': 0.2852, 'iprec_at_recall_0.40': 0.2666,
    'iprec_at_recall_0.50': 0.2184, 'iprec_at_recall_0.60': 0.0888, 'iprec_at_recall_0.70': 0.0348,
    'iprec_at_recall_0.80': 0.0348, 'iprec_at_recall_0.90': 0.0348, 'iprec_at_recall_1.00': 0.0249, 'P_5': 0.2667,
    'P_10': 0.2333, 'P_15': 0.2667, 'P_20': 0.2833, 'P_30': 0.2556, 'P_100': 0.1633, 'P_200': 0.0867, 'P_500':
    0.0393, 'P_1000': 0.0197, 'recall_5': 0.0173, 'recall_10': 0.0303, 'recall_15': 0.0519, 'recall_20': 0.1109,
    'recall_30': 0.1369, 'recall_100': 0.4735, 'recall_200': 0.5238, 'recall_500': 0.5776, 'recall_1000': 0.5776,
    'gm_bpref': 0.0004, 'Rprec_mult_0.20': 0.2708, 'Rprec_mult_0.40': 0.2473, 'Rprec_mult_0.60': 0.2199,
    'Rprec_mult_0.80': 0.2043, 'Rprec_mult_1.00': 0.1688, 'Rprec_mult_1.20': 0.1505, 'Rprec_mult_1.40': 0.1296,
    'Rprec_mult_1.60': 0.1156, 'Rprec_mult_1.80': 0.1031, 'Rprec_mult_2.00': 0.0952, 'utility': -460.6667,
    '11pt_avg': 0.1817, 'ndcg': 0.3894, 'ndcg_cut_5': 0.2768, 'ndcg_cut_10': 0.2656, 'ndcg_cut_15': 0.2826,
    'ndcg_cut_20': 0.3138, 'ndcg_cut_30': 0.3019, 'ndcg_cut_100': 0.3577, 'ndcg_cut_200': 0.3807, 'ndcg_cut_500':
    0.3894, 'ndcg_cut_1000': 0.3894, 'map_cut_5': 0.0154, 'map_cut_10': 0.0256, 'map_cut_15': 0.0422, 'map_cut_20':
    0.0587, 'map_cut_30': 0.0788, 'map_cut_100': 0.1571, 'map_cut_200': 0.163, 'map_cut_500': 0.1667,
    'map_cut_1000': 0.1667, 'relative_P_5': 0.2667, 'relative_P_10': 0.2333, 'relative_P_15': 0.2667,
    'relative_P_20': 0.3083, 'relative_P_30': 0.2861, 'relative_P_100': 0.4735, 'relative_P_200': 0.5238,
    'relative_P_500': 0.5776, 'relative_P_1000': 0.5776, 'success_1': 0.3333, 'success_5': 0.3333, 'success_10':
    0.3333, 'set_P': 0.0393, 'set_relative_P': 0.5776, 'set_recall': 0.5776, 'set_map': 0.027, 'set_F': 0.0696,
    'num_nonrel_judged_ret': 610}
#: pytrec_eval's test_nicknames expects these of all_trec/official; evalcore does not compute them
NOT_COMPUTED = {"relstring", "runid"}
ALL_TREC_PUBLISHED = {
    "11pt_avg", "binG", "bpref", "G", "gm_bpref", "gm_map", "infAP", "iprec_at_recall_0.00", "iprec_at_recall_0.10",
    "iprec_at_recall_0.20", "iprec_at_recall_0.30", "iprec_at_recall_0.40", "iprec_at_recall_0.50",
    "iprec_at_recall_0.60", "iprec_at_recall_0.70", "iprec_at_recall_0.80", "iprec_at_recall_0.90",
    "iprec_at_recall_1.00", "map", "map_cut_10", "map_cut_100", "map_cut_1000", "map_cut_15", "map_cut_20",
    "map_cut_200", "map_cut_30", "map_cut_5", "map_cut_500", "ndcg", "ndcg_cut_10", "ndcg_cut_100", "ndcg_cut_1000",
    "ndcg_cut_15", "ndcg_cut_20", "ndcg_cut_200", "ndcg_cut_30", "ndcg_cut_5", "ndcg_cut_500", "ndcg_rel",
    "num_nonrel_judged_ret", "num_q", "num_rel", "num_rel_ret", "num_ret", "P_10", "P_100", "P_1000", "P_15", "P_20",
    "P_200", "P_30", "P_5", "P_500", "recall_10", "recall_100", "recall_1000", "recall_15", "recall_20", "recall_200",
    "recall_30", "recall_5", "recall_500", "recip_rank", "relative_P_10", "relative_P_100", "relative_P_1000",
    "relative_P_15", "relative_P_20", "relative_P_200", "relative_P_30", "relative_P_5", "relative_P_500",
    "relstring", "Rndcg", "Rprec", "Rprec_mult_0.20", "Rprec_mult_0.40", "Rprec_mult_0.60", "Rprec_mult_0.80",
    "Rprec_mult_1.00", "Rprec_mult_1.20", "Rprec_mult_1.40", "Rprec_mult_1.60", "Rprec_mult_1.80",
    "Rprec_mult_2.00", "runid", "set_F", "set_map", "set_P", "set_recall", "set_relative_P", "success_1",
    "success_10", "success_5", "utility"}
OFFICIAL_PUBLISHED = {
    "iprec_at_recall_0.80", "P_500", "num_q", "iprec_at_recall_0.20", "iprec_at_recall_0.50", "map",
    "iprec_at_recall_0.70", "iprec_at_recall_1.00", "iprec_at_recall_0.40", "iprec_at_recall_0.60", "num_rel",
    "iprec_at_recall_0.90", "bpref", "P_200", "gm_map", "P_30", "iprec_at_recall_0.30", "P_100", "P_10", "P_20",
    "Rprec", "iprec_at_recall_0.10", "P_1000", "num_ret", "P_5", "num_rel_ret", "recip_rank", "P_15", "runid",
    "iprec_at_recall_0.00"}


def computed(names: set) -> set:
    """Less iprec_at_recall_* and 11pt_avg too: pytrec_eval's trec_eval 9 truncates their recall levels, where
    trec_eval 10 (whose definition evalcore computes) rounds them, so the compat module refuses them."""
    return {n for n in names if n not in NOT_COMPUTED and n != "11pt_avg" and not n.startswith("iprec_at_recall_")}


@pytest.mark.parametrize(("scores", "ndcg"), [
    ({"d1": 1.0, "d2": 0.0, "d3": 1.5}, 0.5),        # d2 at rank 3
    ({"d1": 1.0, "d2": 2.0, "d3": 1.5}, 1.0),        # rank 1
    ({"d1": 4.0, "d2": 2.0, "d3": 1.5}, 0.6309297535714575),   # rank 2
])
def test_ndcg_as_pytrec_eval_s_test_ndcg(scores, ndcg):
    evaluator = pytrec_eval.RelevanceEvaluator(QREL, {"map", "ndcg"})
    assert evaluator.evaluate({"q1": scores, "q2": {}})["q1"]["ndcg"] == pytest.approx(ndcg, abs=1e-7)
    assert evaluator.evaluate({"q1": scores})["q1"]["ndcg"] == pytest.approx(ndcg, abs=1e-7)


def test_ndcg_cut_as_pytrec_eval_s_test_ndcg_cut():
    run = {"q1": {"d1": 1.0, "d2": 0.0, "d3": 1.5}, "q2": {}}
    assert pytrec_eval.RelevanceEvaluator(QREL, {"ndcg_cut.3"}).evaluate(run)["q1"]["ndcg_cut_3"] == \
        pytest.approx(0.5, abs=1e-7)
    top = {"q1": {"d1": 1.0, "d2": 2.0, "d3": 1.5}, "q2": {}}
    assert pytrec_eval.RelevanceEvaluator(QREL, {"ndcg_cut.1"}).evaluate(top)["q1"]["ndcg_cut_1"] == \
        pytest.approx(1.0, abs=1e-7)
    result = pytrec_eval.RelevanceEvaluator(QREL, {"ndcg_cut.1,2,3,1000"}).evaluate(run)["q1"]
    assert result == pytest.approx({"ndcg_cut_1": 0.0, "ndcg_cut_2": 0.0, "ndcg_cut_3": 0.5, "ndcg_cut_1000": 0.5},
                                   abs=1e-7)


def test_empty_inputs_as_pytrec_eval_s_test_empty():
    run = {"q1": {"d1": 1.0, "d2": 0.0, "d3": 1.5}, "q2": {}}
    assert pytrec_eval.RelevanceEvaluator(QREL, {"map", "ndcg"}).evaluate({}) == {}
    assert pytrec_eval.RelevanceEvaluator(QREL, set()).evaluate(run) == {"q1": {}, "q2": {}}
    assert pytrec_eval.RelevanceEvaluator({}, {"map", "ndcg"}).evaluate(run) == {}
    assert pytrec_eval.RelevanceEvaluator({}, {"map", "ndcg"}).evaluate({}) == {}
    assert pytrec_eval.RelevanceEvaluator(QREL, set()).evaluate({}) == {}
    assert pytrec_eval.RelevanceEvaluator({}, set()).evaluate(run) == {}
    assert pytrec_eval.RelevanceEvaluator({}, {}).evaluate({}) == {}


def test_measure_params_as_pytrec_eval_s_test_measure_params():
    run = {"q1": {"d1": 1.0, "d2": 0.0, "d3": 1.5}, "q2": {}}
    evaluator = pytrec_eval.RelevanceEvaluator(QREL, ["ndcg_cut", "ndcg_cut.1,4", "ndcg_cut_20,4", "ndcg_cut_15",
                                                      "recall.1000", "P"])
    assert set(evaluator.evaluate(run)["q1"]) == {
        "ndcg_cut_1", "ndcg_cut_4", "ndcg_cut_15", "ndcg_cut_20", "recall_1000", "P_200", "P_15", "P_10", "P_5",
        "P_30", "P_100", "P_20", "P_500", "P_1000"}


def test_nicknames_as_pytrec_eval_s_test_nicknames_less_what_evalcore_does_not_compute():
    empty = {"q1": {}, "q2": {}}
    assert set(pytrec_eval.RelevanceEvaluator(QREL, {"all_trec"}).evaluate(empty)["q1"]) == \
        computed(ALL_TREC_PUBLISHED)
    assert set(pytrec_eval.RelevanceEvaluator(QREL, {"official"}).evaluate(empty)["q1"]) == \
        computed(OFFICIAL_PUBLISHED)
    assert set(pytrec_eval.RelevanceEvaluator(QREL, {"official", "ndcg"}).evaluate(empty)["q1"]) == \
        computed(OFFICIAL_PUBLISHED) | {"ndcg"}


@pytest.mark.parametrize(("qrels", "measures", "level", "expected"), [
    ("qrels.test", {"official"}, 1, OUT_TEST),
    ("qrels.rel_level", {"all_trec"}, 2, OUT_TEST_AQL),
])
def test_aggregates_equal_trec_eval_s_published_output(qrels, measures, level, expected):
    with open(os.path.join(FIXTURES, qrels)) as f_qrel:
        qrel = pytrec_eval.parse_qrel(f_qrel)
    with open(os.path.join(FIXTURES, "results.test")) as f_run:
        run = pytrec_eval.parse_run(f_run)
    results = pytrec_eval.RelevanceEvaluator(qrel, measures, relevance_level=level).evaluate(run)
    expected = {m: v for m, v in expected.items() if m in computed({m})}
    got = {m: pytrec_eval.compute_aggregated_measure(m, [values[m] for values in results.values()])
           for m in expected}
    assert {m: round(v, 4) for m, v in got.items()} == expected
    assert set(next(iter(results.values()))) == set(expected)


def test_unsupported_measures_and_non_finite_scores_are_value_errors_naming_them():
    with pytest.raises(ValueError, match=r"^measures: unsupported measure bogus$"):
        pytrec_eval.RelevanceEvaluator(QREL, {"bogus"})
    with pytest.raises(ValueError, match=r"^measures: unsupported measure relstring \(a trec_eval measure evalcore"):
        pytrec_eval.RelevanceEvaluator(QREL, {"relstring"})
    with pytest.raises(ValueError, match=r"^measures: unsupported measure iprec_at_recall \(pytrec_eval's trec_eval 9"):
        pytrec_eval.RelevanceEvaluator(QREL, {"iprec_at_recall"})
    with pytest.raises(InputError, match=r"^scores: score nan of query 'q1', document 'd1' is not a finite number$"):
        pytrec_eval.RelevanceEvaluator(QREL, {"map"}).evaluate({"q1": {"d1": float("nan"), "d2": 1.0}})
    with pytest.raises(InputError, match=r"^query_relevance: grade 0.5 of query 'q1', document 'd1' is not an "):
        pytrec_eval.RelevanceEvaluator({"q1": {"d1": 0.5}}, {"map"})


def random_graded(seed: int):
    """Qrels with grades -1..3 over 12 of 40 documents, runs of 0..25 documents scored from four values (ties),
    a judged query the run lacks, a run query never judged."""
    rng = random.Random(seed)
    docs = [f"d{i}" for i in range(40)]
    qrels, run = {}, {}
    for qi in range(40):
        qrels[f"q{qi}"] = {d: rng.choice([-1, 0, 0, 1, 2, 3]) for d in rng.sample(docs, 12)}
        run[f"q{qi}"] = {d: rng.choice([0.1, 0.2, 0.25, 0.3]) for d in rng.sample(docs, rng.randint(0, 25))}
    del run["q3"]
    run["unjudged"] = {"d1": 1.0}
    return qrels, run


@pytest.mark.parametrize("options", [{}, {"relevance_level": 2}, {"judged_docs_only_flag": True}])
def test_equal_to_pytrec_eval_itself_on_random_graded_runs_with_ties(options):
    reference = pytest.importorskip("pytrec_eval")
    qrels, run = random_graded(37)
    want = reference.RelevanceEvaluator(qrels, {"all_trec"}, **options).evaluate(run)
    got = pytrec_eval.RelevanceEvaluator(qrels, {"all_trec"}, **options).evaluate(run)
    assert set(got) == set(want)
    wrong = [(q, m, v, want[q][m]) for q in got for m, v in got[q].items()
             if not math.isclose(v, want[q][m], rel_tol=1e-12, abs_tol=1e-14)]
    assert wrong == []
    assert set(got["q0"]) == computed(set(want["q0"]))
