"""``evalcore.compat.ranx.evaluate``: ranx's signature, return values, metric names and definitions (issue 37,
item 3).

Expected values are ranx's own (AmenRa/ranx, commit 2cae52f00c2c15136a07d573027744109792604d): the README's
example (``evaluate(qrels, run, "ndcg@5") >>> 0.7861``, ``["map@5", "mrr"] >>> {"map@5": 0.6416, "mrr": 0.75}``,
printed to 4 places), and the cases of tests/unit/ranx/meta/evaluate_test.py and
tests/unit/ranx/metrics/zero_division_error_test.py. ranx's tests give runs as arrays already in rank order
([doc id, score] rows, equal scores); here each becomes a mapping whose scores fall with the rank, which is the
same ranking. The last test compares with ranx itself on random graded runs without ties (ranx ranks equal
scores in an order of hashed ids), skipped when ranx is not installed. ranx's dcg, rbp, bpref, ndcg with -lL
above 1 and the names refused: tests/compat/test_ranx_more.py.
"""
import math
import random

import numpy as np
import pytest

from evalcore.compat import ranx
from evalcore.errors import InputError

README_QRELS = {"q_1": {"d_12": 5, "d_25": 3}, "q_2": {"d_11": 6, "d_22": 1}}
README_RUN = {"q_1": {"d_12": 0.9, "d_23": 0.8, "d_25": 0.7, "d_36": 0.6, "d_32": 0.5, "d_35": 0.4},
              "q_2": {"d_12": 0.9, "d_11": 0.8, "d_25": 0.7, "d_36": 0.6, "d_22": 0.5, "d_35": 0.4}}


def ranked(*lists) -> tuple[dict, dict]:
    """ranx's test arrays as mappings: a list of (qrels rows, run ids in rank order) per query."""
    qrels, run = {}, {}
    for i, (judged, ids) in enumerate(lists):
        qrels[f"q{i}"] = {str(d): int(g) for d, g in judged}
        run[f"q{i}"] = {str(d): float(len(ids) - r) for r, d in enumerate(ids)}
    return qrels, run


ONES = [[1, 1], [4, 1], [5, 1], [6, 1]]
GRADED = [[2, 5], [4, 4], [5, 3], [10, 2]]
IDCG = 5 / np.log2(2) + 4 / np.log2(3) + 3 / np.log2(4) + 2 / np.log2(5)
IDCG_BURGES = (2**5 - 1) / np.log2(2) + (2**4 - 1) / np.log2(3) + (2**3 - 1) / np.log2(4) + (2**2 - 1) / np.log2(5)
SEVEN = [4, 5, 6, 2, 1, 7, 3]
CASES = [  # (metric, queries as (qrels rows, run ids), expected mean): ranx's evaluate_test.py
    ("hits@5", [(ONES, [1, 2, 3, 4, 5, 7])], 3),
    ("hits@5", [(ONES, [1, 2, 3, 4, 5, 7]), ([[1, 1], [4, 1], [6, 1]], [1, 2, 4, 3, 5, 7])], 2.5),
    ("hit_rate@5", [([[1, 1], [2, 1], [4, 1]], [1, 2, 4, 3, 5, 7])], 1),
    ("hit_rate@5", [([[9, 1], [6, 1], [8, 1]], [1, 2, 3, 4, 5, 7]), ([[1, 1], [2, 1], [4, 1]], [1, 2, 4, 3, 5, 7])],
     0.5),
    ("precision@5", [(ONES, [1, 2, 3, 4, 5, 7])], 3 / 5),
    ("precision@5", [([[1, 1], [2, 1], [3, 1]], SEVEN), ([[4, 1], [5, 1], [6, 1], [7, 1]], SEVEN),
                     ([[8, 1], [9, 1]], SEVEN)], (2 / 5 + 3 / 5 + 0) / 3),
    ("map@6", [(ONES, [1, 2, 3, 4, 5, 7])], 0.525),
    ("mrr@5", [([[3, 1]], [2, 3, 1, 4, 5])], 0.5),
    ("mrr@5", [([[3, 1]], [2, 1, 4, 5])], 0.0),
    ("r-precision", [([[1, 1], [2, 1], [3, 1]], [2, 4, 3, 1, 5, 6, 7])], 2 / 3),
    ("r-precision", [([[1, 1], [2, 1], [3, 1]], [2, 4, 3, 1, 5, 6, 7]), ([[1, 1], [2, 1]], [2, 4, 3, 1, 5, 6, 7])],
     (2 / 3 + 1 / 2) / 2),
    ("recall@2", [([[1, 1], [2, 1], [3, 1]], [2, 4, 3, 1, 5, 6, 7])], 1 / 3),
    ("recall@2", [([[1, 1], [2, 1], [3, 1]], [2, 4, 3, 1, 5, 6, 7]), ([[1, 1], [2, 1]], [2, 4, 3, 1, 5, 6, 7])],
     (1 / 3 + 1 / 2) / 2),
    ("ndcg@10", [(GRADED, [1, 2, 3, 4, 5])], (5 / np.log2(3) + 4 / np.log2(5) + 3 / np.log2(6)) / IDCG),
    ("ndcg@10", [(GRADED, [10, 5, 2, 4, 3])],
     (2 / np.log2(2) + 3 / np.log2(3) + 5 / np.log2(4) + 4 / np.log2(5)) / IDCG),
    ("ndcg@10", [(GRADED, [1, 3, 6, 7, 8])], 0.0),
    ("ndcg_burges@10", [(GRADED, [1, 2, 3, 4, 5])],
     ((2**5 - 1) / np.log2(3) + (2**4 - 1) / np.log2(5) + (2**3 - 1) / np.log2(6)) / IDCG_BURGES),
    ("ndcg_burges@10", [(GRADED, [10, 5, 2, 4, 3])],
     ((2**2 - 1) / np.log2(2) + (2**3 - 1) / np.log2(3) + (2**5 - 1) / np.log2(4) + (2**4 - 1) / np.log2(5))
     / IDCG_BURGES),
]


@pytest.mark.parametrize(("metric", "queries", "expected"), CASES)
def test_ranx_s_own_test_cases(metric, queries, expected):
    qrels, run = ranked(*queries)
    assert ranx.evaluate(qrels, run, metric) == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_ranx_s_readme_example_and_return_shapes():
    assert round(ranx.evaluate(README_QRELS, README_RUN, "ndcg@5"), 4) == 0.7861
    both = ranx.evaluate(README_QRELS, README_RUN, ["map@5", "mrr"])
    assert list(both) == ["map@5", "mrr"] and {m: math.floor(v * 1e4) / 1e4 for m, v in both.items()} == \
        {"map@5": 0.6416, "mrr": 0.75}
    per_query = ranx.evaluate(README_QRELS, README_RUN, ["map@5", "mrr"], return_mean=False)
    assert isinstance(per_query["mrr"], np.ndarray) and per_query["mrr"].tolist() == [1.0, 0.5]
    spread = ranx.evaluate(README_QRELS, README_RUN, "mrr", return_std=True)
    assert spread == {"mean": 0.75, "std": 0.25}


def test_an_empty_run_counts_zero_as_ranx_s_zero_division_test():
    qrels = {"q_1": {"doc_a": 1}, "q_2": {"doc_b": 1}, "q_3": {"doc_c": 1}, "q_4": {"doc_d": 1}}
    run = {"q_1": {"doc_a": 1.0}, "q_2": {"doc_b": 1.0}, "q_3": {}, "q_4": {"doc_d": 1.0}}
    assert ranx.evaluate(qrels, run, ["precision", "recall", "f1"]) == {"precision": 0.75, "recall": 0.75, "f1": 0.75}


class Like:
    """A ranx Qrels/Run as evalcore sees it: an object with ``to_dict()``."""

    def __init__(self, mapping):
        self.mapping = mapping

    def to_dict(self):
        return self.mapping


def test_ranx_objects_and_make_comparable():
    assert ranx.evaluate(Like(README_QRELS), Like(README_RUN), "ndcg@5") == \
        ranx.evaluate(README_QRELS, README_RUN, "ndcg@5")
    fewer = {"q_1": README_RUN["q_1"], "q_9": {"d_1": 1.0}}
    with pytest.raises(InputError, match=r"^run: Qrels and Run query ids do not match"):
        ranx.evaluate(README_QRELS, fewer, "mrr")
    assert ranx.evaluate(README_QRELS, fewer, "mrr", make_comparable=True) == 0.5   # q_2: no results, 0


METRICS = ["hits@5", "hits", "hit_rate@3", "hit_rate", "precision@5", "precision", "recall@10", "recall", "f1@5",
           "f1", "r-precision", "mrr", "mrr@3", "map", "map@10", "ndcg", "ndcg@10", "ndcg_burges@5", "precision@5-l2",
           "recall@10-l2", "map@10-l2", "mrr-l2", "r-precision-l3"]


def test_equal_to_ranx_itself_on_random_graded_runs():
    reference = pytest.importorskip("ranx")
    rng = random.Random(37)
    docs = [f"d{i}" for i in range(50)]
    qrels, run = {}, {}
    for qi in range(30):
        qrels[f"q{qi}"] = {d: rng.choice([0, 0, 1, 2, 3]) for d in rng.sample(docs, 10)}
        run[f"q{qi}"] = {d: rng.random() for d in rng.sample(docs, rng.randint(0, 30))}   # no ties
    want = reference.evaluate(reference.Qrels(qrels), reference.Run(run), METRICS, return_mean=False)
    got = ranx.evaluate(qrels, run, METRICS, return_mean=False)
    order = sorted(qrels)   # ranx's Qrels hold their queries sorted
    wrong = [(m, q, g, w) for m in METRICS for q, g, w in zip(order, got[m][np.argsort(list(qrels))], want[m])
             if not math.isclose(g, w, rel_tol=1e-12, abs_tol=1e-14)]
    assert wrong == []
