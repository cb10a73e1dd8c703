"""``evalcore.compat.torchmetrics``: torchmetrics' retrieval metrics, signatures and definitions (issue 37, "Coming
from torchmetrics").

References, none of them evalcore:

* torchmetrics' own published examples: the ``Example:`` doctests of Lightning-AI/torchmetrics (commit
  dab033394560ab3ce05e3d14c13f32e4cde6b351), src/torchmetrics/functional/retrieval/*.py and
  src/torchmetrics/retrieval/*.py, inputs and printed outputs (4 places) copied below;
* a brute force written here from the definitions (per query: sort, take the top k, count), with equal preds
  ordered non-relevant first (the module's stated rule where torchmetrics' order is unspecified) and nDCG's
  ties averaged;
* scikit-learn's ``ndcg_score`` for nDCG with ties;
* torchmetrics itself on random data (skipped where torch or torchmetrics is not installed): without equal
  preds, except for nDCG (tie-averaged in both).
"""
from __future__ import annotations

import doctest

import numpy as np
import pytest

from evalcore.compat import torchmetrics as tm
from evalcore.errors import InputError, OptionError

FUNCTIONAL = {
    "average_precision": tm.retrieval_average_precision, "reciprocal_rank": tm.retrieval_reciprocal_rank,
    "normalized_dcg": tm.retrieval_normalized_dcg, "precision": tm.retrieval_precision,
    "recall": tm.retrieval_recall, "hit_rate": tm.retrieval_hit_rate, "r_precision": tm.retrieval_r_precision,
    "fall_out": tm.retrieval_fall_out,
}
CLASSES = {
    "average_precision": tm.RetrievalMAP, "reciprocal_rank": tm.RetrievalMRR,
    "normalized_dcg": tm.RetrievalNormalizedDCG, "precision": tm.RetrievalPrecision, "recall": tm.RetrievalRecall,
    "hit_rate": tm.RetrievalHitRate, "r_precision": tm.RetrievalRPrecision, "fall_out": tm.RetrievalFallOut,
}
#: torchmetrics 1.8: a relevant row with pred <= 0 is not relevant for these (recall's R still counts it)
POSITIVE_ONLY = ("average_precision", "reciprocal_rank", "precision", "recall")


# --------------------------------------------------------------------------- the brute-force reference


def reference(metric: str, preds, target, top_k=None, adaptive_k=False) -> float:
    """One query's value from the definition: rank by pred (float32, as torchmetrics casts), equal preds
    non-relevant first, take the top k, count."""
    p = np.asarray(preds, dtype=np.float32).astype(np.float64).ravel()
    t = np.asarray(target, dtype=np.int64).ravel()
    n, k = p.size, top_k or p.size
    if metric == "normalized_dcg":
        return reference_ndcg(p, t, k)
    relevant = (t > 0) & (p > 0) if metric in POSITIVE_ONLY else t > 0
    order = sorted(range(n), key=lambda i: (-p[i], bool(relevant[i])))
    ranked = relevant[order]
    top = ranked[:k]
    hits = int(top.sum())
    n_rel = int((t > 0).sum())
    if metric == "average_precision":
        places = np.flatnonzero(top) + 1
        return float(np.mean(np.arange(1, hits + 1) / places)) if hits else 0.0
    if metric == "reciprocal_rank":
        return 1.0 / (np.flatnonzero(top)[0] + 1) if hits else 0.0
    if metric == "precision":
        return hits / (n if top_k is None else min(k, n) if adaptive_k else k)
    if metric == "recall":
        return hits / n_rel if n_rel else 0.0
    if metric == "hit_rate":
        return float(hits > 0)
    if metric == "r_precision":
        return int(ranked[:n_rel].sum()) / n_rel if n_rel else 0.0
    assert metric == "fall_out"
    return int((~top).sum()) / (n - n_rel) if n > n_rel else 0.0


def reference_ndcg(p: np.ndarray, t: np.ndarray, k: int) -> float:
    """Tie-averaged DCG@k over the ideal DCG@k: each group of equal preds spreads its mean gain over its places."""
    discount = np.where(np.arange(1, p.size + 1) <= k, 1 / np.log2(np.arange(1, p.size + 1) + 1), 0.0)
    dcg, place = 0.0, 0
    for value in sorted(set(p.tolist()), reverse=True):
        members = p == value
        size = int(members.sum())
        dcg += t[members].mean() * discount[place:place + size].sum()
        place += size
    ideal = float((np.sort(t)[::-1] * discount).sum())
    return dcg / ideal if ideal else 0.0


def class_reference(metric: str, preds, target, indexes, *, top_k=None, adaptive_k=False, empty_target_action=None,
                    ignore_index=None, aggregation="mean") -> float:
    """torchmetrics' RetrievalMetric.compute from its documentation: rows of ignore_index dropped, grouped by
    indexes, empty queries (no relevant row; fall-out: no non-relevant row) per the action, then aggregated
    (median: the lower middle value, as torch.median)."""
    action = empty_target_action or ("pos" if metric == "fall_out" else "neg")
    p, t, q = (np.asarray(a).ravel() for a in (preds, target, indexes))
    if ignore_index is not None:
        kept = t != ignore_index
        p, t, q = p[kept], t[kept], q[kept]
    values = []
    for query in np.unique(q):
        tq = t[q == query]
        empty = bool((tq == 1).all()) if metric == "fall_out" else not tq.sum()
        if empty:
            assert action != "error"
            if action != "skip":
                values.append(1.0 if action == "pos" else 0.0)
        else:
            values.append(reference(metric, p[q == query], tq, top_k, adaptive_k))
    if not values:
        return 0.0
    v = np.sort(np.array(values))
    return float({"mean": v.mean(), "median": v[(v.size - 1) // 2], "min": v[0], "max": v[-1]}[aggregation])


def random_rows(rng, n_queries=30, *, graded=False, ties=True, empty=True):
    """Flat rows of random queries (1..12 rows each, shuffled across queries): preds on a coarse grid (ties, some
    <= 0) or all distinct; a few queries with no relevant row and a few with nothing else."""
    sizes = rng.integers(1, 13, n_queries)
    indexes = np.repeat(rng.permutation(1000)[:n_queries] - 300, sizes)
    n = indexes.size
    preds = (rng.integers(-2, 6, n) / 4.0) if ties else (rng.permutation(n) + 1.0) / n - 0.2
    target = rng.integers(0, 4, n) if graded else (rng.random(n) < 0.35).astype(np.int64)
    if empty:
        queries = np.unique(indexes)
        target[np.isin(indexes, queries[:3])] = 0      # no relevant row
        target[np.isin(indexes, queries[3:5])] = 1     # nothing but relevant rows (fall-out's empty query)
    shuffle = rng.permutation(n)
    return preds[shuffle].astype(np.float32), target[shuffle], indexes[shuffle]


# --------------------------------------------------------------------------- torchmetrics' published examples

#: functional examples: (metric, preds, target, keywords, printed value); src/torchmetrics/functional/retrieval/
FUNCTIONAL_EXAMPLES = [
    ("average_precision", [0.2, 0.3, 0.5], [True, False, True], {}, 0.8333),       # average_precision.py
    ("reciprocal_rank", [0.2, 0.3, 0.5], [False, True, False], {}, 0.5),            # reciprocal_rank.py
    ("normalized_dcg", [.1, .2, .3, 4, 70], [10, 0, 0, 1, 5], {}, 0.6957),          # ndcg.py
    ("precision", [0.2, 0.3, 0.5], [True, False, True], {"top_k": 2}, 0.5),          # precision.py
    ("recall", [0.2, 0.3, 0.5], [True, False, True], {"top_k": 2}, 0.5),             # recall.py
    ("hit_rate", [0.2, 0.3, 0.5], [True, False, True], {"top_k": 2}, 1.0),           # hit_rate.py
    ("r_precision", [0.2, 0.3, 0.5], [True, False, True], {}, 0.5),                  # r_precision.py
    ("fall_out", [0.2, 0.3, 0.5], [True, False, True], {"top_k": 2}, 1.0),           # fall_out.py
]
EXAMPLE_INDEXES = [0, 0, 0, 1, 1, 1, 1]
EXAMPLE_PREDS = [0.2, 0.3, 0.5, 0.1, 0.3, 0.5, 0.2]
EXAMPLE_TARGET = [False, False, True, False, True, False, True]
#: module examples: (metric, constructor keywords, target, printed value); src/torchmetrics/retrieval/<file>.py,
#: each with EXAMPLE_INDEXES and EXAMPLE_PREDS
CLASS_EXAMPLES = [
    ("average_precision", {}, EXAMPLE_TARGET, 0.7917),                                          # average_precision.py
    ("reciprocal_rank", {}, EXAMPLE_TARGET, 0.75),                                              # reciprocal_rank.py
    ("normalized_dcg", {}, EXAMPLE_TARGET, 0.8467),                                             # ndcg.py
    ("precision", {"top_k": 2}, EXAMPLE_TARGET, 0.5),                                           # precision.py
    ("recall", {"top_k": 2}, EXAMPLE_TARGET, 0.75),                                             # recall.py
    ("hit_rate", {"top_k": 2}, [True, False, False, False, True, False, True], 0.5),            # hit_rate.py
    ("r_precision", {}, EXAMPLE_TARGET, 0.75),                                                  # r_precision.py
    ("fall_out", {"top_k": 2}, EXAMPLE_TARGET, 0.5),                                            # fall_out.py
]


@pytest.mark.parametrize("metric, preds, target, keywords, printed", FUNCTIONAL_EXAMPLES)
def test_torchmetrics_functional_examples(metric, preds, target, keywords, printed):
    value = FUNCTIONAL[metric](preds, target, **keywords)
    assert isinstance(value, np.float64)
    assert round(float(value), 4) == printed


@pytest.mark.parametrize("metric, keywords, target, printed", CLASS_EXAMPLES)
def test_torchmetrics_module_examples(metric, keywords, target, printed):
    m = CLASSES[metric](**keywords)
    assert round(float(m(EXAMPLE_PREDS, target, indexes=EXAMPLE_INDEXES)), 4) == printed
    assert round(float(m.compute()), 4) == printed   # forward kept the batch


def test_the_docstring_examples_run():
    failed, attempted = doctest.testmod(tm)
    assert attempted > 0 and failed == 0


# --------------------------------------------------------------------------- against the brute force


@pytest.mark.parametrize("metric", sorted(FUNCTIONAL))
def test_functional_matches_the_definition_with_ties(metric):
    rng = np.random.default_rng(7)
    for trial in range(40):
        n = int(rng.integers(1, 15))
        preds = rng.integers(-2, 5, n) / 4.0            # equal preds, and some <= 0
        target = rng.integers(0, 4, n) if metric == "normalized_dcg" else rng.integers(0, 2, n)
        for top_k in (None, 1, 3, n, n + 5):           # n + 5: past the query's rows
            keywords = {} if metric == "r_precision" else {"top_k": top_k}
            for adaptive_k in ((False, True) if metric == "precision" else (False,)):
                if metric == "precision":
                    keywords["adaptive_k"] = adaptive_k
                got = FUNCTIONAL[metric](preds, target, **keywords)
                want = reference(metric, preds, target, keywords.get("top_k"), adaptive_k)
                assert got == pytest.approx(want, abs=1e-12), (trial, top_k, adaptive_k, preds, target)


@pytest.mark.parametrize("metric", sorted(CLASSES))
@pytest.mark.parametrize("empty_target_action", ["neg", "pos", "skip"])
def test_classes_match_the_definition(metric, empty_target_action):
    rng = np.random.default_rng(11)
    for trial in range(4):
        preds, target, indexes = random_rows(rng, graded=metric == "normalized_dcg")
        if metric == "normalized_dcg":   # a graded query with nothing relevant
            target[indexes == indexes[0]] = 0
        for top_k in ((None,) if metric == "r_precision" else (None, 2, 50)):
            keywords = {} if metric == "r_precision" else {"top_k": top_k}
            for aggregation in ("mean", "median", "min", "max"):
                m = CLASSES[metric](empty_target_action=empty_target_action, aggregation=aggregation, **keywords)
                m.update(preds, target, indexes)
                want = class_reference(metric, preds, target, indexes, top_k=top_k, aggregation=aggregation,
                                       empty_target_action=empty_target_action)
                assert m.compute() == pytest.approx(want, abs=1e-12), (trial, top_k, aggregation)


def test_precision_adaptive_k_and_ignore_index():
    rng = np.random.default_rng(3)
    preds, target, indexes = random_rows(rng)
    target = np.where(rng.random(target.size) < 0.2, -100, target)   # rows to ignore
    for adaptive_k in (False, True):
        m = tm.RetrievalPrecision(top_k=8, adaptive_k=adaptive_k, ignore_index=-100)
        m.update(preds, target, indexes)
        want = class_reference("precision", preds, target, indexes, top_k=8, adaptive_k=adaptive_k,
                               ignore_index=-100)
        assert m.compute() == pytest.approx(want, abs=1e-12)


@pytest.mark.parametrize("metric", sorted(CLASSES))
def test_ignore_index_drops_the_rows(metric):
    rng = np.random.default_rng(5)
    preds, target, indexes = random_rows(rng, graded=metric == "normalized_dcg")
    target = np.where(rng.random(target.size) < 0.25, -1, target)
    m = CLASSES[metric](ignore_index=-1)
    m.update(preds, target, indexes)
    assert m.compute() == pytest.approx(class_reference(metric, preds, target, indexes, ignore_index=-1), abs=1e-12)


def test_a_query_of_one_ignored_row_is_gone():
    m = tm.RetrievalMRR(empty_target_action="pos", ignore_index=9)
    m.update([0.5, 0.4, 0.9], [1, 0, 9], [0, 0, 1])
    assert m.compute() == 1.0   # query 1 is gone, not an empty query scoring 1 by itself


def test_empty_target_action_error_names_the_queries():
    m = tm.RetrievalMAP(empty_target_action="error")
    m.update([0.1, 0.2, 0.3, 0.4], [0, 0, 1, 0], [5, 5, 6, 6])
    with pytest.raises(InputError, match=r"^target: queries 5 \(indexes\) have no relevant row"):
        m.compute()
    fallout = tm.RetrievalFallOut(empty_target_action="error")
    fallout.update([0.1, 0.2, 0.3, 0.4], [1, 1, 1, 0], [5, 5, 6, 6])
    with pytest.raises(InputError, match="queries 5 .* no non-relevant row"):
        fallout.compute()


def test_every_query_skipped_gives_zero_and_defaults_are_torchmetrics():
    m = tm.RetrievalMAP(empty_target_action="skip")
    m.update([0.1, 0.2], [0, 0], [0, 0])
    assert m.compute() == 0.0
    assert tm.RetrievalMAP().empty_target_action == "neg" and tm.RetrievalFallOut().empty_target_action == "pos"
    assert tm.RetrievalFallOut().higher_is_better is False and tm.RetrievalMAP().higher_is_better is True
    assert tm.RetrievalFallOut()([0.3, 0.2], [1, 1], indexes=[0, 0]) == 1.0   # no non-relevant row: pos


def test_ndcg_with_ties_matches_scikit_learn():
    ndcg_score = pytest.importorskip("sklearn.metrics").ndcg_score   # an optional peer: CI's venv has it not

    rng = np.random.default_rng(2)
    for _ in range(60):
        n = int(rng.integers(2, 20))
        preds = (rng.integers(0, 4, n) / 3.0).astype(np.float32)
        target = rng.integers(0, 5, n)
        for top_k in (None, 1, 4, n + 3):
            want = ndcg_score(target[None, :], preds.astype(np.float64)[None, :], k=top_k)
            assert tm.retrieval_normalized_dcg(preds, target, top_k=top_k) == pytest.approx(want, abs=1e-12)


def test_positive_only_rule_and_the_float32_cast():
    # torchmetrics 1.8: the relevant row with pred 0 is not found by AP, RR, precision, recall; recall's R keeps it
    preds, target = [0.5, 0.0, 0.2], [0, 1, 1]
    assert tm.retrieval_average_precision(preds, target) == pytest.approx(1 / 2)
    assert tm.retrieval_recall(preds, target) == pytest.approx(1 / 2)
    assert tm.retrieval_precision(preds, target) == pytest.approx(1 / 3)
    assert tm.retrieval_hit_rate([0.5, 0.0], [0, 1]) == 1.0      # hit rate has no such rule
    assert tm.retrieval_reciprocal_rank([0.0, 0.0, 0.0], [1, 0, 1]) == 0.0
    # 1 + 1e-9 is 1 in float32: a tie, the relevant row after the other (float64 would put it first)
    assert tm.retrieval_reciprocal_rank(np.array([1.0, 1.0 + 1e-9]), [0, 1]) == 0.5


# --------------------------------------------------------------------------- calls, inputs, errors


class FakeTensor:
    """What the module reads of a torch tensor: ``.detach().cpu().numpy()``."""

    def __init__(self, values):
        self.values = np.asarray(values)

    def detach(self):
        return self

    def cpu(self):
        return self

    def numpy(self):
        return self.values


def test_inputs_as_lists_arrays_tensors_and_any_shape():
    want = tm.RetrievalMAP()(EXAMPLE_PREDS, EXAMPLE_TARGET, indexes=EXAMPLE_INDEXES)
    as_tensors = tm.RetrievalMAP()(FakeTensor(EXAMPLE_PREDS), FakeTensor(EXAMPLE_TARGET),
                                   indexes=FakeTensor(EXAMPLE_INDEXES))
    preds2 = np.array([0.2, 0.3, 0.5, 0.1, 0.3, 0.5, 0.2, 0.9]).reshape(2, 4)   # (N, ...) is flattened
    target2 = np.array([0, 0, 1, 0, 1, 0, 1, 0]).reshape(2, 4)
    indexes2 = np.array([0, 0, 0, 1, 1, 1, 1, 2]).reshape(2, 4)
    assert as_tensors == want
    assert tm.RetrievalMAP(empty_target_action="skip")(preds2, target2, indexes=indexes2) == want
    assert tm.retrieval_average_precision(FakeTensor([0.2, 0.3, 0.5]), FakeTensor([1, 0, 1])) == \
        pytest.approx(5 / 6)


def test_update_compute_reset_and_call():
    m = tm.RetrievalRecall(top_k=1)
    # query 7 spans both batches; the call returns its batch's value alone
    assert m([0.9, 0.1, 0.5], [0, 1, 1], indexes=[7, 7, 8]) == pytest.approx((0 + 1) / 2)
    assert m([0.95, 0.2], [1, 0], indexes=[7, 9]) == pytest.approx((1 + 0) / 2)   # 9 has no relevant row: 0
    m.update(np.array([0.3]), np.array([1]), np.array([10]))
    # query 7: rows 0.95 (1), 0.9 (0), 0.1 (1): recall@1 = 1/2; 8: 1; 9: 0; 10: 1
    assert m.compute() == pytest.approx((0.5 + 1 + 0 + 1) / 4)
    m.reset()
    with pytest.raises(InputError, match=r"^compute\(\): nothing to compute"):
        m.compute()


@pytest.mark.parametrize("call, subject", [
    (lambda: tm.retrieval_precision([0.1, 0.2], [1, 0, 1]), "target"),
    (lambda: tm.RetrievalMAP().update([0.1, 0.2], [1, 0], [0, 0, 1]), "indexes"),
    (lambda: tm.RetrievalMAP().update([0.1, 0.2], [1, 0], None), "indexes"),
    (lambda: tm.RetrievalMAP()([0.1, 0.2], [1, 0]), "indexes"),
    (lambda: tm.RetrievalMAP().update([0.1, 0.2], [1, 0], [0.0, 1.0]), "indexes"),
    (lambda: tm.retrieval_recall([0.1, 0.2], [1, 2]), "target"),
    (lambda: tm.retrieval_recall([0.1, 0.2], [1.0, 0.5]), "target"),
    (lambda: tm.retrieval_normalized_dcg([0.1, 0.2], [1, 128]), "target"),
    (lambda: tm.retrieval_normalized_dcg([0.1, 0.2], [1.5, 0]), "target"),
    (lambda: tm.retrieval_normalized_dcg([0.1, 0.2], [-1, 0]), "target"),
    (lambda: tm.retrieval_hit_rate([0.1, np.nan], [1, 0]), "preds"),
    (lambda: tm.retrieval_hit_rate([True, False], [1, 0]), "preds"),
    (lambda: tm.retrieval_hit_rate(["a", "b"], [1, 0]), "preds"),
    (lambda: tm.retrieval_hit_rate(0.5, 1), "preds"),
    (lambda: tm.retrieval_hit_rate([], []), "preds"),
    (lambda: tm.retrieval_hit_rate([0.1], [1], top_k=0), "top_k"),
    (lambda: tm.retrieval_average_precision([0.1], [1], top_k=-1), "top_k"),
    (lambda: tm.retrieval_fall_out([0.1], [1], top_k=1.5), "top_k"),
    (lambda: tm.retrieval_fall_out([0.1], [1], top_k=True), "top_k"),
    (lambda: tm.RetrievalNormalizedDCG(top_k=0), "top_k"),
    (lambda: tm.retrieval_precision([0.1], [1], adaptive_k="yes"), "adaptive_k"),
    (lambda: tm.RetrievalPrecision(adaptive_k=1), "adaptive_k"),
    (lambda: tm.RetrievalMAP(empty_target_action="zero"), "empty_target_action"),
    (lambda: tm.RetrievalMAP(aggregation="sum"), "aggregation"),
    (lambda: tm.RetrievalMAP(ignore_index=0.5), "ignore_index"),
    (lambda: tm.RetrievalMAP(foo=1), "foo"),
    (lambda: tm.RetrievalMRR(ignore_index=0)([0.1, 0.2], [0, 0], indexes=[0, 0]), "target"),
])
def test_errors_name_the_parameter(call, subject):
    with pytest.raises(InputError) as caught:
        call()
    assert str(caught.value).startswith(f"{subject}: "), str(caught.value)
    assert isinstance(caught.value, ValueError)   # torchmetrics raises ValueError


def test_metric_keywords_are_accepted_and_a_callable_aggregates():
    m = tm.RetrievalMRR(dist_sync_on_step=True, compute_on_cpu=True, aggregation=lambda x, dim=None: x.sum())
    assert m(EXAMPLE_PREDS, EXAMPLE_TARGET, indexes=EXAMPLE_INDEXES) == pytest.approx(1 + 0.5)
    with pytest.raises(OptionError):
        tm.RetrievalMRR(unknown=True)


# --------------------------------------------------------------------------- torchmetrics itself


def _torchmetrics():
    torch = pytest.importorskip("torch")
    torchmetrics = pytest.importorskip("torchmetrics")
    from torchmetrics import retrieval
    from torchmetrics.functional import retrieval as functional  # torchmetrics.functional's own are deprecated

    return torch, torchmetrics, functional, retrieval


@pytest.mark.parametrize("metric", sorted(CLASSES))
def test_against_torchmetrics_itself(metric):
    torch, torchmetrics, functional, retrieval = _torchmetrics()
    version = tuple(int(x) for x in torchmetrics.__version__.split(".")[:2] if x.isdigit())
    peer_class = getattr(retrieval, CLASSES[metric].__name__)
    peer_function = getattr(functional, FUNCTIONAL[metric].__name__)
    rng = np.random.default_rng(17)
    for _ in range(3):
        # distinct preds (torchmetrics' order of equal preds is unspecified), except for nDCG (tie-averaged)
        preds, target, indexes = random_rows(rng, graded=metric == "normalized_dcg", ties=metric == "normalized_dcg")
        if version < (1, 8):   # before 1.8 a relevant row with pred <= 0 counted: compare on positive preds
            preds = preds - preds.min() + 0.01
        tensors = torch.tensor(preds), torch.tensor(target), torch.tensor(indexes, dtype=torch.long)
        for top_k in ((None,) if metric == "r_precision" else (None, 1, 3, 50)):
            keywords = {} if metric == "r_precision" else {"top_k": top_k}
            for action in ("neg", "pos", "skip"):
                for aggregation in ("mean", "median", "max"):
                    ours = CLASSES[metric](empty_target_action=action, aggregation=aggregation, **keywords)
                    theirs = peer_class(empty_target_action=action, aggregation=aggregation, **keywords)
                    assert float(ours(preds, target, indexes=indexes)) == pytest.approx(
                        float(theirs(*tensors[:2], indexes=tensors[2])), abs=1e-6), (top_k, action, aggregation)
            query = indexes == indexes[0]
            assert float(FUNCTIONAL[metric](preds[query], target[query], **keywords)) == pytest.approx(
                float(peer_function(tensors[0][query], tensors[1][query], **keywords)), abs=1e-6)


def test_against_torchmetrics_with_ignore_index_adaptive_k_and_ties():
    torch, _, functional, retrieval = _torchmetrics()
    rng = np.random.default_rng(23)
    preds, target, indexes = random_rows(rng, ties=False)
    target = np.where(rng.random(target.size) < 0.2, -100, target)
    tensors = torch.tensor(preds), torch.tensor(target), torch.tensor(indexes, dtype=torch.long)
    for adaptive_k in (False, True):
        ours = tm.RetrievalPrecision(top_k=8, adaptive_k=adaptive_k, ignore_index=-100)
        theirs = retrieval.RetrievalPrecision(top_k=8, adaptive_k=adaptive_k, ignore_index=-100)
        ours.update(preds, target, indexes)
        theirs.update(*tensors)
        assert float(ours.compute()) == pytest.approx(float(theirs.compute()), abs=1e-6)
    assert tm.retrieval_hit_rate(torch.tensor([0.1, 0.2], dtype=torch.bfloat16), torch.tensor([0, 1]), top_k=1) == 1
    # equal preds: evalcore's order is the pessimistic one, so no value is above torchmetrics' (fall-out: below)
    for _ in range(200):
        n = int(rng.integers(1, 12))
        p, t = (rng.integers(0, 3, n) / 2).astype(np.float32), rng.integers(0, 2, n)
        for metric in ("average_precision", "reciprocal_rank", "precision", "recall", "hit_rate", "r_precision"):
            peer = getattr(functional, FUNCTIONAL[metric].__name__)
            assert FUNCTIONAL[metric](p, t) <= float(peer(torch.tensor(p), torch.tensor(t))) + 1e-6
        assert tm.retrieval_fall_out(p, t, top_k=2) >= float(functional.retrieval_fall_out(
            torch.tensor(p), torch.tensor(t), top_k=2)) - 1e-6
