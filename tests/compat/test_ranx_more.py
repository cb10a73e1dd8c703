"""``evalcore.compat.ranx.evaluate``: ranx's dcg, dcg_burges, rbp.P, bpref, ndcg with -lL above 1, -l0, @0 and
its spellings (issues 37/38).

Three references: a brute-force one written here from ranx's definitions (AmenRa/ranx, ranx/metrics/*.py at
commit 2cae52f00c2c15136a07d573027744109792604d: documents graded below L dropped from the qrels; dcg's gain the
grade or 2^grade - 1 over log2(rank + 1), the ideal from the qrels' highest grades; rbp's gain the grade itself;
bpref over the judged documents, every grade below L judged non-relevant), on random graded runs without equal
scores; ranx's own published cases (inputs and expected values copied, the file named at each); and ranx itself
on random data when it is installed.
"""
import math
import random

import numpy as np
import pytest

from evalcore.compat import ranx
from evalcore.errors import InputError

KS = ["", "@1", "@3", "@10", "@0"]
LEVELS = ["", "-l0", "-l2", "-l3"]
CUT = ["hits", "hit_rate", "precision", "recall", "f1", "mrr", "map", "ndcg", "ndcg_burges", "dcg", "dcg_burges"]
METRICS = [n + k + lv for n in CUT for k in KS for lv in LEVELS]
METRICS += ["r-precision" + lv for lv in LEVELS] + ["bpref" + lv for lv in LEVELS] + ["bpref@5"]
METRICS += [f"rbp{p}{lv}" for p in (".5", ".8", ".95", ".05", "@9") for lv in LEVELS]


def parse(metric: str) -> tuple[str, int, int, float]:
    """(name, k, level, p) of the names above, read as ranx's meta/evaluate.py reads them."""
    metric, _, level = metric.partition("-l")
    if metric.startswith("rbp"):
        return "rbp", 0, int(level or 1), float("0." + metric[4:])
    name, _, k = metric.partition("@")
    return name, int(k or 0), int(level or 1), 0.0


def brute(metric: str, grades: dict, scores: dict) -> float:
    """One query's value by ranx's definition (ranx's documents hashed aside: no equal scores here)."""
    name, k, level, p = parse(metric)
    ranking = sorted(scores, key=scores.get, reverse=True)
    rel = {d: g for d, g in grades.items() if g >= level}
    big_r, n = len(rel), len(ranking)
    if big_r == 0:
        return 0.0
    top = ranking[:k] if k else ranking
    hit = [d in rel for d in top]

    def dcg(docs, burges):
        return sum((2 ** rel[d] - 1 if burges else rel[d]) / math.log2(i + 2) for i, d in enumerate(docs) if d in rel)

    if name == "hits":
        return float(sum(hit))
    if name == "hit_rate":
        return float(any(hit))
    if name in ("precision", "f1"):
        precision = sum(hit) / (k or n) if (k or n) else 0.0
        if name == "precision":
            return precision
        recall = sum(hit) / big_r
        return 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    if name == "recall":
        return sum(hit) / big_r
    if name == "r-precision":
        return sum(d in rel for d in ranking[:big_r]) / big_r
    if name == "mrr":
        return next((1 / (i + 1) for i, h in enumerate(hit) if h), 0.0)
    if name == "map":
        return sum(sum(hit[:i + 1]) / (i + 1) for i, h in enumerate(hit) if h) / big_r
    if name in ("dcg", "dcg_burges", "ndcg", "ndcg_burges"):
        burges = name.endswith("burges")
        value = dcg(top, burges)
        if name.startswith("dcg"):
            return value
        ideal = sorted(rel, key=rel.get, reverse=True)
        return value / (dcg(ideal[:k] if k else ideal, burges) or 1.0)   # -l0: grade-0 documents gain 0
    if name == "rbp":
        return (1 - p) * sum(rel[d] * p ** i for i, d in enumerate(ranking) if d in rel)
    assert name == "bpref"
    non_rel = sum(1 for g in grades.values() if g < level)   # negative grades too
    seen, total, retrieved = 0, 0.0, 0
    for d in ranking:
        if d in rel:
            retrieved += 1
            total += 1 - min(seen, big_r) / min(big_r, non_rel) if non_rel else math.nan   # ranx: 0 / 0
        elif d in grades:
            seen += 1
    return total / big_r


def random_data(seed: int, queries: int = 30, relevant_everywhere: bool = False) -> tuple[dict, dict]:
    rng = random.Random(seed)
    docs = [f"d{i}" for i in range(40)]
    qrels, run = {}, {}
    for qi in range(queries):
        judged = rng.sample(docs, rng.randint(1, 12))
        qrels[f"q{qi}"] = {d: rng.choice([-1, 0, 0, 1, 2, 3, 4]) for d in judged}
        if relevant_everywhere:
            qrels[f"q{qi}"][judged[0]] = 4
        ranked = rng.sample(docs, rng.randint(0, 25))
        run[f"q{qi}"] = {d: float(len(ranked) - i) + rng.random() / 2 for i, d in enumerate(ranked)}   # no ties
    return qrels, run


def close(got, want) -> bool:
    return (math.isnan(got) and math.isnan(want)) or math.isclose(got, want, rel_tol=1e-12, abs_tol=1e-13)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_equal_to_a_brute_force_reference_of_ranx_s_definitions(seed):
    qrels, run = random_data(seed)
    got = ranx.evaluate(qrels, run, METRICS, return_mean=False)
    wrong = [(m, q, g, w) for m in METRICS for q, g in zip(qrels, got[m])
             for w in [brute(m, qrels[q], run[q])] if not close(g, w)]
    assert wrong == []


# ranx's tests/unit/ranx/metrics_test.py, test_dcg_jarvelin and test_dcg_burges: the qrels [[2, 5], [4, 4], [5, 3],
# [10, 2]] (document, grade), three runs in rank order, k = 10
DCG_QRELS = {"2": 5, "4": 4, "5": 3, "10": 2}
DCG_RUNS = [["1", "2", "3", "4", "5"], ["10", "5", "2", "4", "3"], ["1", "3", "6", "7", "8"]]
DCG_CASES = [
    ("dcg@10", [5 / np.log2(3) + 4 / np.log2(5) + 3 / np.log2(6),
                2 / np.log2(2) + 3 / np.log2(3) + 5 / np.log2(4) + 4 / np.log2(5), 0.0]),
    ("dcg_burges@10", [(2**5 - 1) / np.log2(3) + (2**4 - 1) / np.log2(5) + (2**3 - 1) / np.log2(6),
                       (2**2 - 1) / np.log2(2) + (2**3 - 1) / np.log2(3) + (2**5 - 1) / np.log2(4)
                       + (2**4 - 1) / np.log2(5), 0.0]),
]


def in_order(ids: list) -> dict:
    return {d: float(len(ids) - r) for r, d in enumerate(ids)}


@pytest.mark.parametrize(("metric", "expected"), DCG_CASES)
def test_ranx_s_dcg_test_cases(metric, expected):
    qrels = {f"q{i}": DCG_QRELS for i in range(3)}
    run = {f"q{i}": in_order(ids) for i, ids in enumerate(DCG_RUNS)}
    assert ranx.evaluate(qrels, run, metric, return_mean=False).tolist() == pytest.approx(expected, rel=1e-12)


def test_ranx_s_rbp_test_case():
    """ranx's tests/unit/ranx/metrics/rank_biased_precision_test.py: d1, d2, d6, d11, d17 relevant in d1..d20;
    p = 0.5, 0.8, 0.95 -> 0.7661, 0.4526, 0.1881 (to 4 places)."""
    qrels = {"q1": {d: 1 for d in ("d1", "d2", "d6", "d11", "d17")}}
    run = {"q1": in_order([f"d{i}" for i in range(1, 21)])}
    got = ranx.evaluate(qrels, run, ["rbp.5", "rbp.8", "rbp.95"])
    assert {m: round(v, 4) for m, v in got.items()} == {"rbp.5": 0.7661, "rbp.8": 0.4526, "rbp.95": 0.1881}


def test_ranx_s_bpref_test_case():
    """ranx's tests/unit/ranx/metrics/bpref_test.py: four queries with unjudged documents retrieved."""
    qrels = {"q1": {"d2": 1, "d5": 1, "d1": 0, "d4": 0}, "q2": {"d2": 1, "d5": 1, "d1": 0, "d6": 0},
             "q3": {"d2": 1, "d5": 1, "d7": 1, "d1": 0, "d6": 0, "d8": 0},
             "q4": {"d2": 1, "d4": 1, "d6": 1, "d9": 1, "d1": 0, "d3": 0, "d7": 0, "d8": 0}}
    run = {"q1": {"d1": 10, "d2": 9, "d3": 8, "d4": 7}, "q2": {"d1": 10, "d2": 9, "d3": 8, "d4": 7, "d5": 6, "d6": 5},
           "q3": {"d1": 10, "d2": 9, "d3": 8, "d4": 7, "d5": 6, "d6": 5, "d7": 4, "d8": 3},
           "q4": {"d1": 10, "d2": 9, "d3": 8, "d4": 7, "d6": 5, "d7": 4, "d8": 3}}
    want = [1 / 2 * (1 - (1 / 2)), 1 / 2 * ((1 - (1 / 2)) + (1 - (1 / 2))),
            1 / 3 * ((1 - (1 / 3)) + (1 - (1 / 3)) + (1 - (2 / 3))),
            1 / 4 * ((1 - (1 / 4)) + (1 - (2 / 4)) + (1 - (2 / 4)))]
    assert ranx.evaluate(qrels, run, "bpref", return_mean=False).tolist() == pytest.approx(want, rel=1e-12)


def test_bpref_counts_negative_grades_as_judged_non_relevant_and_is_nan_as_ranx_s_without_any():
    qrels = {"q1": {"d1": 1, "d2": -1, "d3": 0}, "q2": {"d1": 1, "d2": 2}, "q3": {"d1": 1, "d2": 1}}
    run = {"q1": {"d2": 0.9, "d1": 0.8}, "q2": {"d1": 0.9}, "q3": {"d9": 0.9}}
    # q1: d2 (grade -1) judged non-relevant above d1: 1 - 1/min(1, 2); q2: no judged non-relevant, a relevant
    # document retrieved: ranx's 0 / min(2, 0); q3: none retrieved, 0
    got = ranx.evaluate(qrels, run, "bpref", return_mean=False)
    assert got[0] == 0.0 and math.isnan(got[1]) and got[2] == 0.0


def test_spellings_ranx_takes():
    qrels, run = random_data(7)
    same = [("precision@0", "precision"), ("mrr@0", "mrr"), ("bpref@5", "bpref"), ("ndcg-l0", "ndcg"),
            ("rbp@95", "rbp.95"), ("dcg_burges-l0", "dcg_burges"), ("rbp.95-l0", "rbp.95")]
    got = ranx.evaluate(qrels, run, [m for pair in same for m in pair], return_mean=False)
    assert [a for a, b in same if not np.array_equal(got[a], got[b], equal_nan=True)] == []


@pytest.mark.parametrize(("metric", "words"), [
    ("r_precision", "metrics: 'r_precision' is not supported (ranx spells it r-precision)"),
    ("NDCG@5", "metrics: 'NDCG@5' is not supported"),
    ("rbp", "metrics: 'rbp': rbp is spelt with its persistence p"),
    ("rbp.0", "metrics: 'rbp.0': rbp is spelt with its persistence p"),
    ("rbp.95@3", "metrics: 'rbp.95@3': rbp is spelt with its persistence p"),
    ("ndcg@5-l-1", "metrics: 'ndcg@5-l-1' is not supported"),
])
def test_names_ranx_refuses_are_refused(metric, words):
    with pytest.raises(InputError) as error:
        ranx.evaluate({"q": {"d": 1}}, {"q": {"d": 1.0}}, metric)
    assert str(error.value).startswith(words), str(error.value)


def test_burges_grades_above_six_are_refused_but_not_below_the_level():
    qrels, run = {"q": {"d1": 7, "d2": 1}}, {"q": {"d1": 0.5, "d2": 0.9}}
    with pytest.raises(InputError, match=r"^qrels: grade 7 of query 'q', document 'd1' is above 6"):
        ranx.evaluate(qrels, run, "ndcg_burges")
    assert ranx.evaluate(qrels, run, "dcg_burges-l8") == 0.0


def test_equal_to_ranx_itself_on_random_graded_runs():
    reference = pytest.importorskip("ranx")
    # every query has a relevant document at each level tested: ranx's bpref stops its loop at a query without one
    # (a division by zero), leaving that query's and the next ones' values 0
    for seed in (11, 12):
        qrels, run = random_data(seed, queries=40, relevant_everywhere=True)
        judged = reference.Qrels(qrels)
        want = reference.evaluate(judged, reference.Run(run), METRICS, return_mean=False)
        got = ranx.evaluate(qrels, run, METRICS, return_mean=False)
        place = {q: i for i, q in enumerate(qrels)}
        order = [place[q] for q in judged.get_query_ids()]   # ranx's Qrels hold their queries sorted
        wrong = [(m, g, w) for m in METRICS for g, w in zip(got[m][order], want[m]) if not close(g, w)]
        assert wrong == []
