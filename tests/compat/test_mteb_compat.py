"""evalcore.compat.mteb: MTEB's and sentence-transformers' retrieval scores under their names and definitions.

References: MTEB's own published test case (expected values copied, source
named below) and, on random data with string ids and graded qrels, brute
forces written here from each tool's definitions (MTEB: pytrec_eval's
ndcg_cut, map_cut, recall, P and MTEB's MRR@k; sentence-transformers:
InformationRetrievalEvaluator.compute_metrics, binary relevance, MAP@k over
min(R, k)), on a float64 numpy ranking of the whole corpus.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from evalcore.compat import mteb
from evalcore.errors import InputError

# embeddings-benchmark/mteb, tests/test_evaluators/test_RetrievalEvaluator.py, test_metrics_at_k (values as
# published, rounded by MTEB to 5 digits): qrels, results (a whole corpus of 3 documents), expected scores
MTEB_QRELS = {"0": {"0": 1, "1": 1}, "1": {"1": 1}}
MTEB_RESULTS = {"0": {"0": 1.0, "1": 0.9, "2": 0.8}, "1": {"0": 0.0, "1": 1.0, "2": 0.0}}
MTEB_EXPECTED = {
    False: {"ndcg": {1: 1.0, 2: 1.0, 3: 1.0}, "map": {1: 0.75, 2: 1.0, 3: 1.0},
            "recall": {1: 0.75, 2: 1.0, 3: 1.0}, "precision": {1: 1.0, 2: 0.75, 3: 0.5}},
    True: {"ndcg": {1: 0.5, 2: 0.30657, 3: 0.30657}, "map": {1: 0.25, 2: 0.25, 3: 0.25},
           "recall": {1: 0.25, 2: 0.25, 3: 0.25}, "precision": {1: 0.5, 2: 0.25, 3: 0.16667}},
}


def mteb_scores_matrix():
    ids = ["0", "1", "2"]
    return np.array([[MTEB_RESULTS[q][d] for d in ids] for q in ["0", "1"]]), ["0", "1"], ids


@pytest.mark.parametrize("ignore_identical_ids", [False, True])
def test_mtebs_published_retrieval_evaluator_case(ignore_identical_ids):
    scores, query_ids, corpus_ids = mteb_scores_matrix()
    ks = [1, 2] if ignore_identical_ids else [1, 2, 3]  # with identical ids removed, k must stay below the corpus
    got = mteb.evaluate(MTEB_QRELS, scores=scores, query_ids=query_ids, corpus_ids=corpus_ids, k_values=ks,
                        ignore_identical_ids=ignore_identical_ids)
    expected = MTEB_EXPECTED[ignore_identical_ids]
    for name in ("ndcg", "map", "recall", "precision"):
        for k in ks:
            assert got[f"{name}_at_{k}"] == pytest.approx(expected[name][k], abs=5e-6), (name, k)
    assert set(got) == {f"{n}_at_{k}" for n in ("ndcg", "map", "recall", "precision", "mrr") for k in ks}


def test_identical_ids_with_a_cut_off_at_the_corpus_size_are_refused():
    scores, query_ids, corpus_ids = mteb_scores_matrix()
    with pytest.raises(InputError, match="^k_values: 3 is not below the corpus size 3"):
        mteb.evaluate(MTEB_QRELS, scores=scores, query_ids=query_ids, corpus_ids=corpus_ids, k_values=[1, 3],
                      ignore_identical_ids=True)


def random_task(seed=0, n_query=15, n_corpus=300, dims=12):
    rng = np.random.default_rng(seed)
    query = rng.normal(size=(n_query, dims)).astype(np.float32)
    corpus = rng.normal(size=(n_corpus, dims)).astype(np.float32)
    query_ids = [f"q-{i}" for i in rng.permutation(n_query)]
    corpus_ids = [f"doc{i}" for i in rng.permutation(n_corpus)]
    qrels = {}
    for qid in query_ids[:-1]:  # the last query is not judged
        docs = rng.choice(corpus_ids, size=12, replace=False)
        qrels[qid] = {str(d): int(g) for d, g in zip(docs, rng.choice([-1, 0, 0, 1, 2, 3], size=12))}
    qrels[query_ids[1]] = {corpus_ids[0]: 0, corpus_ids[1]: 0}  # judged, nothing relevant: 0 in MTEB's means
    qrels[query_ids[2]]["not-in-corpus"] = 2
    return query, corpus, query_ids, corpus_ids, qrels


def ranked_ids(query, corpus, corpus_ids):
    q = query.astype(np.float64) / np.linalg.norm(query, axis=1, keepdims=True)
    c = corpus.astype(np.float64) / np.linalg.norm(corpus, axis=1, keepdims=True)
    return [[corpus_ids[i] for i in np.argsort(-row, kind="stable")] for row in q @ c.T]


def mteb_brute_force(query, corpus, query_ids, corpus_ids, qrels, ks):
    """MTEB's scores: pytrec_eval over the judged queries of the run, MRR@k as MTEB computes it."""
    per = {f"{n}_at_{k}": [] for n in ("ndcg", "map", "recall", "precision", "mrr") for k in ks}
    for qid, ranked in zip(query_ids, ranked_ids(query, corpus, corpus_ids)):
        if qid not in qrels:
            continue
        rel = {d: g for d, g in qrels[qid].items() if g >= 1}
        ideal = sorted(rel.values(), reverse=True)
        for k in ks:
            top = ranked[:k]
            hits = [r + 1 for r, d in enumerate(top) if d in rel]
            dcg = sum(rel[top[r - 1]] / math.log2(r + 1) for r in hits)
            idcg = sum(g / math.log2(j + 2) for j, g in enumerate(ideal[:k]))
            per[f"ndcg_at_{k}"].append(dcg / idcg if idcg else 0.0)
            per[f"map_at_{k}"].append(sum((i + 1) / r for i, r in enumerate(hits)) / len(rel) if rel else 0.0)
            per[f"recall_at_{k}"].append(len(hits) / len(rel) if rel else 0.0)
            per[f"precision_at_{k}"].append(len(hits) / k)
            per[f"mrr_at_{k}"].append(1 / hits[0] if hits else 0.0)
    return {name: float(np.mean(values)) for name, values in per.items()}


def test_mteb_scores_equal_their_definitions_on_random_graded_data():
    query, corpus, query_ids, corpus_ids, qrels = random_task()
    ks = [1, 3, 10, 100]
    got = mteb.evaluate(qrels, query=query, corpus=corpus, query_ids=query_ids, corpus_ids=corpus_ids, k_values=ks)
    expected = mteb_brute_force(query, corpus, query_ids, corpus_ids, qrels, ks)
    assert set(got) == set(expected)
    for name in expected:
        assert got[name] == pytest.approx(expected[name], abs=1e-12), name


def sentence_transformers_brute_force(query, corpus, query_ids, corpus_ids, relevant, acc, pr, mrr, ndcg, maps):
    """InformationRetrievalEvaluator.compute_metrics, on the whole corpus ranked."""
    out: dict[str, list[float]] = {}
    kept = [(q, r) for q, r in zip(query_ids, ranked_ids(query, corpus, corpus_ids)) if relevant.get(q)]
    for qid, ranked in kept:
        rel = relevant[qid]

        def add(name, value):
            out.setdefault(name, []).append(value)

        for k in acc:
            add(f"cosine_accuracy@{k}", float(any(d in rel for d in ranked[:k])))
        for k in pr:
            n = sum(d in rel for d in ranked[:k])
            add(f"cosine_precision@{k}", n / k)
            add(f"cosine_recall@{k}", n / len(rel))
        for k in mrr:
            first = next((r + 1 for r, d in enumerate(ranked[:k]) if d in rel), None)
            add(f"cosine_mrr@{k}", 1 / first if first else 0.0)
        for k in ndcg:
            dcg = sum(1 / math.log2(r + 2) for r, d in enumerate(ranked[:k]) if d in rel)
            idcg = sum(1 / math.log2(r + 2) for r in range(min(len(rel), k)))
            add(f"cosine_ndcg@{k}", dcg / idcg)
        for k in maps:
            n, total = 0, 0.0
            for r, d in enumerate(ranked[:k]):
                if d in rel:
                    n += 1
                    total += n / (r + 1)
            add(f"cosine_map@{k}", total / min(k, len(rel)))
    return {name: float(np.mean(v)) for name, v in out.items()}


def test_sentence_transformers_scores_equal_its_definitions_on_random_data():
    query, corpus, query_ids, corpus_ids, qrels = random_task(seed=1)
    relevant = {q: {d for d, g in docs.items() if g >= 1} for q, docs in qrels.items()}
    relevant = {q: docs for q, docs in relevant.items() if docs}
    kwargs = dict(accuracy_at_k=[1, 3, 5, 10], precision_recall_at_k=[1, 3, 5, 10], mrr_at_k=[10],
                  ndcg_at_k=[10], map_at_k=[5, 100])
    got = mteb.information_retrieval_scores(relevant, query=query, corpus=corpus, query_ids=query_ids,
                                            corpus_ids=corpus_ids, **kwargs)
    expected = sentence_transformers_brute_force(query, corpus, query_ids, corpus_ids, relevant,
                                                 *kwargs.values())
    assert set(got) == set(expected)
    for name in expected:
        assert got[name] == pytest.approx(expected[name], abs=1e-12), name
    # graded qrels read as sentence-transformers reads its sets: every grade >= 1 relevant, gain 1
    graded = mteb.information_retrieval_scores(qrels, query=query, corpus=corpus, query_ids=query_ids,
                                               corpus_ids=corpus_ids, **kwargs)
    assert graded == pytest.approx(got, abs=1e-15)


def test_map_at_k_differs_between_the_two_tools_as_their_denominators_say():
    # one query, 3 relevant documents, one of them ranked 1st: MTEB's map@1 = 1/3 (over R), s-t's = 1 (over min(R, 1))
    scores = np.array([[0.9, 0.1, 0.2, 0.3, 0.05]])
    qrels = {"q": {"a": 1, "b": 1, "c": 1}}
    ids = ["a", "b", "c", "d", "e"]
    m = mteb.evaluate(qrels, scores=scores, query_ids=["q"], corpus_ids=ids, k_values=[1])
    s = mteb.information_retrieval_scores(qrels, scores=scores, query_ids=["q"], corpus_ids=ids, accuracy_at_k=[1],
                                          precision_recall_at_k=[1], mrr_at_k=[1], ndcg_at_k=[1], map_at_k=[1])
    assert m["map_at_1"] == pytest.approx(1 / 3) and s["cosine_map@1"] == pytest.approx(1.0)


def test_metric_names_map_mtebs_to_evalcores():
    assert mteb.mteb_metric_names([10]) == {"ndcg_at_10": "ndcg@10", "map_at_10": "map_cut@10",
                                            "recall_at_10": "recall@10", "precision_at_10": "precision@10",
                                            "mrr_at_10": "mrr@10"}


@pytest.mark.parametrize(("kwargs", "start"), [
    ({"k_values": [0, 10]}, "k_values:"),
    ({"ignore_identical_ids": True}, "ignore_identical_ids:"),
    ({"scores": np.zeros((2, 3))}, "scores: give scores or the query and corpus embeddings"),
])
def test_bad_arguments_are_one_input_error_naming_the_parameter(kwargs, start):
    rng = np.random.default_rng(0)
    given = dict(query=rng.normal(size=(2, 4)), corpus=rng.normal(size=(3, 4)), query_ids=["0", "1"],
                 corpus_ids=["0", "1", "2"], **kwargs)
    with pytest.raises(InputError) as caught:
        mteb.evaluate(MTEB_QRELS, **given)
    assert str(caught.value).startswith(start)
