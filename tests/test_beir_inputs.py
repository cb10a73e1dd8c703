"""BEIR's layout in ``evalcore.evaluate``: embeddings, string ids and qrels as ``{qid: {docid: grade}}``.

Every value is checked against an independent brute force written here: the
whole corpus ranked by cosine in float64 with numpy, and the measures from
their definitions with pytrec_eval's (trec_eval's) conventions: a grade >= 1
is relevant with that gain, a negative grade is never relevant, a judged
document missing from the corpus is never retrieved but counts in R (recall's
denominator, nDCG's ideal), and a judged query missing from the queries is
left out.
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import pyarrow as pa
import pytest

import evalcore
from evalcore.errors import EvalcoreWarning, InputError


def unit(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def brute_force(query, corpus, query_ids, corpus_ids, qrels, k_ndcg=10, k_recall=100, k_rr=10):
    """{qid: {measure: value}} for the queries in both query_ids and qrels with a relevant document."""
    scores = unit(query) @ unit(corpus).T
    out = {}
    for row, qid in enumerate(query_ids):
        judged = qrels.get(qid, {})
        relevant = {d: g for d, g in judged.items() if g >= 1}
        if not relevant:
            continue
        order = np.argsort(-scores[row], kind="stable")
        ranked = [corpus_ids[i] for i in order]
        ranks = sorted(r + 1 for r, d in enumerate(ranked) if d in relevant)
        big_r = len(relevant)
        ideal = sorted(relevant.values(), reverse=True)
        dcg = sum(relevant[ranked[r - 1]] / math.log2(r + 1) for r in ranks if r <= k_ndcg)
        idcg = sum(g / math.log2(j + 2) for j, g in enumerate(ideal[:k_ndcg]))
        out[qid] = {
            "ndcg_at_10": dcg / idcg,
            "recall_at_100": sum(r <= k_recall for r in ranks) / big_r,
            "ap": sum((i + 1) / r for i, r in enumerate(ranks)) / big_r,
            "rr_at_10": 1 / ranks[0] if ranks and ranks[0] <= k_rr else 0.0,
        }
    return out


def beir_data(seed=0, n_query=12, n_corpus=400, dims=16):
    rng = np.random.default_rng(seed)
    query = rng.normal(size=(n_query, dims)).astype(np.float32)
    corpus = rng.normal(size=(n_corpus, dims)).astype(np.float32)
    query_ids = [f"query-{i:03d}" for i in rng.permutation(n_query)]
    corpus_ids = [f"doc/{i}" for i in rng.permutation(n_corpus)]  # not sorted: ids, not positions, match
    qrels = {}
    for qid in query_ids[:-2]:  # the last two queries have no judgements
        docs = rng.choice(corpus_ids, size=15, replace=False)
        grades = rng.choice([-1, 0, 1, 2, 3], size=15)
        qrels[qid] = {str(d): int(g) for d, g in zip(docs, grades)}
        qrels[qid]["missing-doc-" + qid] = 2      # judged relevant, not in the corpus
        qrels[qid]["missing-nonrel"] = 0          # judged not relevant, not in the corpus
    qrels[query_ids[0]]["only-missing"] = 3
    qrels["query-not-given"] = {corpus_ids[0]: 1}  # a judged query missing from the queries
    return query, corpus, query_ids, corpus_ids, qrels


METRICS = ["ndcg@10", "recall@100", "map", "mrr@10"]
COLUMNS = ["ndcg_at_10", "recall_at_100", "ap", "rr_at_10"]


def per_query(result) -> dict:
    table = result.per_query
    keys = table.column("key").to_pylist()
    return {k: {c: table.column(c)[i].as_py() for c in COLUMNS} for i, k in enumerate(keys)
            if table.column("n_relevant")[i].as_py()}


def test_embeddings_string_ids_and_qrels_dicts_equal_a_brute_force_ranking_of_the_whole_corpus():
    query, corpus, query_ids, corpus_ids, qrels = beir_data()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = evalcore.evaluate(query=query, gallery=corpus, query_ids=query_ids, gallery_ids=corpus_ids,
                                   qrels=qrels, metrics=METRICS)
    expected = brute_force(query, corpus, query_ids, corpus_ids, qrels)
    got = per_query(result)
    assert set(got) == set(expected)
    for qid in expected:
        assert got[qid] == pytest.approx(expected[qid], abs=1e-12), qid
    means = {c: np.mean([v[c] for v in expected.values()]) for c in COLUMNS}
    assert result.metrics["ndcg_at_10"] == pytest.approx(means["ndcg_at_10"], abs=1e-12)
    assert result.metrics["map"] == pytest.approx(means["ap"], abs=1e-12)
    assert result.metrics["mrr_at_10"] == pytest.approx(means["rr_at_10"], abs=1e-12)
    assert result.metrics["recall_at_100"] == pytest.approx(means["recall_at_100"], abs=1e-12)
    # the judged documents missing from the corpus count in R, and rank nowhere
    n_relevant = dict(zip(result.per_query.column("key").to_pylist(), result.per_query.column("n_relevant").to_pylist()))
    for qid in expected:
        assert n_relevant[qid] == sum(g >= 1 for g in qrels[qid].values())
    assert result.per_query.column("top1_key").to_pylist() == [
        corpus_ids[int(np.argmax(unit(query[i:i + 1]) @ unit(corpus).T))] for i in range(len(query_ids))]
    messages = [str(w.message) for w in caught if issubclass(w.category, EvalcoreWarning)]
    assert any("query-not-given" in m and "query_ids" in m for m in messages)
    assert any("not among gallery_ids" in m for m in messages)
    assert result.run["options"]["similarity"] == "cosine" and "depth" not in result.run["options"]
    absent = {d for docs in qrels.values() for d in docs} - set(corpus_ids)
    assert result.run["judged_by_id"] == {"queries_not_in_query_ids": 1, "documents_not_in_gallery_ids": len(absent),
                                          "stand_in_gallery_rows": len(absent)}


def test_a_query_whose_only_relevant_document_is_missing_from_the_corpus_scores_zero_with_no_relevant_score():
    query, corpus, query_ids, corpus_ids, _ = beir_data(seed=1)
    qrels = {query_ids[0]: {"absent": 1}, query_ids[1]: {corpus_ids[5]: 1, "absent": 1}}
    result = evalcore.evaluate(query=query, gallery=corpus, query_ids=query_ids, gallery_ids=corpus_ids,
                               qrels=qrels, metrics=METRICS)
    row = result.per_query.column("key").to_pylist().index(query_ids[0])
    assert [result.per_query.column(c)[row].as_py() for c in COLUMNS] == [0.0, 0.0, 0.0, 0.0]
    assert result.per_query.column("relevant_score")[row].as_py() is None
    expected = brute_force(query, corpus, query_ids, corpus_ids, qrels)
    assert per_query(result)[query_ids[1]] == pytest.approx(expected[query_ids[1]], abs=1e-12)


def test_qrels_as_a_table_and_as_a_trec_file_give_what_the_dicts_give(tmp_path):
    query, corpus, query_ids, corpus_ids, qrels = beir_data(seed=2)
    rows = [(q, d, g) for q, docs in qrels.items() for d, g in docs.items()]
    table = pa.table({"query-id": [r[0] for r in rows], "corpus-id": [r[1] for r in rows],
                      "score": [r[2] for r in rows]})  # BEIR's qrels/test.tsv columns
    path = tmp_path / "qrels.txt"
    path.write_text("".join(f"{q} 0 {d} {g}\n" for q, d, g in rows))
    expected = brute_force(query, corpus, query_ids, corpus_ids, qrels)
    class RanxQrels:  # ranx's Qrels: evalcore reads any object through its to_dict()
        def to_dict(self):
            return qrels

    for given in (table, str(path), RanxQrels()):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", EvalcoreWarning)
            result = evalcore.evaluate(query=query, gallery=corpus, query_ids=query_ids, gallery_ids=corpus_ids,
                                       qrels=given, metrics=METRICS)
        got = per_query(result)
        assert set(got) == set(expected)
        for qid in expected:
            assert got[qid] == pytest.approx(expected[qid], abs=1e-12)


def test_dot_similarity_with_missing_documents_keeps_the_given_inner_products():
    query, corpus, query_ids, corpus_ids, qrels = beir_data(seed=3)
    corpus = corpus * np.linspace(0.5, 3.0, len(corpus), dtype=np.float32)[:, None]  # norms matter under dot
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EvalcoreWarning)
        result = evalcore.evaluate(query=query, gallery=corpus, query_ids=query_ids, gallery_ids=corpus_ids,
                                   qrels=qrels, metrics=METRICS, similarity="dot")
    scores = query.astype(np.float64) @ corpus.astype(np.float64).T
    for row, qid in enumerate(query_ids):
        if qid not in qrels:
            continue
        relevant = {d for d, g in qrels[qid].items() if g >= 1}
        ranked = [corpus_ids[i] for i in np.argsort(-scores[row], kind="stable")]
        ranks = [r + 1 for r, d in enumerate(ranked) if d in relevant]
        expected_ap = sum((i + 1) / r for i, r in enumerate(ranks)) / len(relevant)
        got = per_query(result)[qid]["ap"]
        assert got == pytest.approx(expected_ap, abs=1e-12)
    assert result.run["options"]["similarity"] == "dot"
    top1 = result.per_query.column("top1_score").to_pylist()
    assert top1 == pytest.approx(scores.max(axis=1), rel=1e-6)


@pytest.mark.parametrize(("kwargs", "start"), [
    ({"query_ids": None}, "query_ids:"),
    ({"gallery_ids": ["d0", "d1", "d0"]}, "gallery_ids: id 'd0' appears twice"),
    ({"query_ids": ["q0", "q1"]}, "query_ids: 2 ids, but query has 3 rows"),
    ({"qrels": {"q0": {"d0": 2.5}}}, "qrels: grade 2.5"),
    ({"qrels": None}, "qrels:"),
    ({"query_keys": ["a", "b", "c"]}, "query_keys: give query_keys or query_ids"),
    ({"protocol": "class"}, "protocol: 'class' does not read qrels="),
    ({"qrels": {"q0": {"absent": 1}}, "rerank": True}, "rerank: not with judged documents missing"),
    ({"qrels": {"q0": {"absent": 1}}, "gallery": [[1.0, 0, 0, 0], [0, 0, 0, 0], [0, 1.0, 0, 0]]},
     "gallery: row 1 is an all-zero vector"),
    ({"qrels": {"q0": {"absent": 1}}, "query": [[1.0, 0, 0, 0], [0, np.inf, 0, 0], [0, 1.0, 0, 0]],
      "similarity": "dot"}, "query: row 1 contains NaN or Inf"),
])
def test_bad_ids_and_qrels_are_one_input_error_naming_the_parameter(kwargs, start):
    rng = np.random.default_rng(0)
    given = dict(query=rng.normal(size=(3, 4)), gallery=rng.normal(size=(3, 4)), query_ids=["q0", "q1", "q2"],
                 gallery_ids=["d0", "d1", "d2"], qrels={"q0": {"d0": 1}})
    given.update(kwargs)
    with pytest.raises(InputError) as caught:
        evalcore.evaluate(**given)
    assert str(caught.value).startswith(start), str(caught.value)
    assert "\n" not in str(caught.value)


def top_k_heap(query, corpus, k):
    """The pipeline BEIR, MTEB and sentence-transformers run: scores by a chunked matrix product, a top-k per
    query kept (argpartition), the rest thrown away; what pytrec_eval then sees."""
    kept = []
    scores = unit(query) @ unit(corpus).T
    for row in scores:
        top = np.argpartition(-row, k)[:k]
        kept.append(top[np.argsort(-row[top], kind="stable")])
    return kept


def test_a_top_100_heap_loses_relevant_documents_that_exact_recall_at_1000_counts():
    rng = np.random.default_rng(7)
    query = rng.normal(size=(20, 8)).astype(np.float32)
    corpus = rng.normal(size=(3000, 8)).astype(np.float32)
    query_ids = [f"q{i}" for i in range(20)]
    corpus_ids = [f"d{i}" for i in range(3000)]
    qrels = {q: {f"d{j}": 1 for j in rng.choice(3000, size=40, replace=False)} for q in query_ids}
    heap = top_k_heap(query, corpus, 100)
    heap_recall = [sum(corpus_ids[i] in qrels[q] for i in heap[row]) / 40 for row, q in enumerate(query_ids)]
    scores = unit(query) @ unit(corpus).T
    exact_recall = [sum(corpus_ids[i] in qrels[q] for i in np.argsort(-scores[row])[:1000]) / 40
                    for row, q in enumerate(query_ids)]
    result = evalcore.evaluate(query=query, gallery=corpus, query_ids=query_ids, gallery_ids=corpus_ids,
                               qrels=qrels, metrics=["recall@1000"])
    got = result.per_query.column("recall_at_1000").to_pylist()
    assert got == pytest.approx(exact_recall, abs=1e-12)
    lost = round(sum(e - h for e, h in zip(exact_recall, heap_recall)) * 40)
    assert lost > 100  # relevant documents between rank 101 and 1000, all lost by the heap
    assert result.metrics["recall_at_1000"] > np.mean(heap_recall) + 0.1


def test_qrels_naming_too_many_documents_missing_from_the_corpus_are_refused_before_any_copy(monkeypatch):
    from evalcore import api

    monkeypatch.setattr(api, "total_memory", lambda: 64 * 1024)  # a 16 KiB share: 1,000 stand-in rows need 20 KB
    rng = np.random.default_rng(0)
    qrels = {"q0": {f"absent-{i}": 1 for i in range(1000)}}
    with pytest.raises(InputError, match=r"^qrels: 1000 judged documents are not among gallery_ids"):
        evalcore.evaluate(query=rng.normal(size=(2, 4)), gallery=rng.normal(size=(3, 4)), query_ids=["q0", "q1"],
                          gallery_ids=["d0", "d1", "d2"], qrels=qrels, workers=None)
