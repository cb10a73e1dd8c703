"""MTEB's and sentence-transformers' retrieval scores, under their names, exact over the whole corpus.

``from evalcore.compat.mteb import evaluate, information_retrieval_scores``.

Both tools score a query against the corpus with a chunked matrix product,
keep a top-k heap per query (k = the largest cut-off asked for, 1,000 or 100)
and compute the measures on what the heap kept. evalcore ranks the whole
corpus exactly (canonical float32 scores, README, Ranking), so every cut-off
has every document behind it; within the heap the numbers agree, except
where scores tie (below).

``evaluate(qrels, query=, corpus=, query_ids=, corpus_ids=, k_values=)`` ->
MTEB's score dict (``mteb``'s ``RetrievalEvaluator``, which hands the heap to
pytrec_eval, and BEIR's ``EvaluateRetrieval.evaluate``): for each k in
``k_values``

- ``ndcg_at_{k}``: pytrec_eval's ``ndcg_cut_k``: DCG@k / IDCG@k, the grade as
  the gain, DCG = sum over relevant documents ranked r <= k of grade /
  log2(r + 1), IDCG the same over every judged grade >= 1 sorted descending;
- ``map_at_{k}``: pytrec_eval's ``map_cut_k``: (1/R) * sum over relevant
  documents ranked r_i <= k of i / r_i (R = all relevant documents; not
  sentence-transformers' 1/min(R, k));
- ``recall_at_{k}``: #{relevant in the top k} / R; ``precision_at_{k}``:
  #{relevant in the top k} / k;
- ``mrr_at_{k}``: 1 / r_1 when the first relevant document ranks r_1 <= k,
  else 0.

Queries: as pytrec_eval, those of ``query_ids`` that the qrels judge; a
judged query with no relevant document counts 0 in every mean
(``empty_queries="zero"``), an unjudged one is left out. A grade >= 1 is
relevant; 0 and negative grades are not. A judged document missing from
``corpus_ids`` is never retrieved but counts in R (pytrec_eval's qrels-only
ideal). MTEB's ``naucs`` and ``task_specific`` scores are not computed.

``information_retrieval_scores(relevant_docs, query=, corpus=, query_ids=,
corpus_ids=, ...)`` -> sentence-transformers' ``InformationRetrievalEvaluator``
dict, ``{"cosine_accuracy@1": ..., "cosine_ndcg@10": ..., "cosine_map@100": ...}``,
with its definitions where they differ from MTEB's: relevance is binary
(every listed document relevant, or a grade >= 1 when grades are given), so
``ndcg@k`` has gain 1; ``map@k`` = (1/min(R, k)) * sum over r_i <= k of i /
r_i (evalcore's ``map@k``, not ``map_cut``); ``accuracy@k`` = 1 when a
relevant document ranks within k (evalcore's ``hit@k``); queries without a
relevant document are left out (the evaluator drops them when built).

Ties: both tools break equal scores by whatever order ``torch.topk`` and
Python's sort leave; evalcore puts non-relevant documents first
(``ties="pessimistic"``, README, Ranking), so a score computed here is never
above theirs on tied scores and does not depend on the corpus order.
``scores=`` (Q, G) may replace ``query``/``corpus`` (MTEB's ``results`` of
a whole corpus, as a matrix). ``ignore_identical_ids=True`` (BEIR's and
MTEB's option: a document whose id is the query's own is removed from that
query's results, still judged) needs ``scores=``: the pair's score is put
below the row's lowest, so it ranks after every other document; that is the
same as removing it for every cut-off k below the corpus size, and larger
ones are refused.
"""
from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from evalcore.api import evaluate as evalcore_evaluate
from evalcore.errors import EvalcoreWarning, OptionError, input_error
from evalcore.types import EmptyQueries

__all__ = ["MTEB_K_VALUES", "evaluate", "information_retrieval_scores", "mteb_metric_names"]

#: MTEB's retrieval cut-offs
MTEB_K_VALUES = (1, 3, 5, 10, 20, 100, 1000)
#: MTEB's score name -> evalcore's metric (k filled in) and its summary column
MTEB_METRICS = {"ndcg_at": ("ndcg@{k}", "ndcg_at_{k}"), "map_at": ("map_cut@{k}", "map_cut_{k}"),
                "recall_at": ("recall@{k}", "recall_at_{k}"), "precision_at": ("precision@{k}", "precision_at_{k}"),
                "mrr_at": ("mrr@{k}", "mrr_at_{k}")}
#: sentence-transformers' score name -> evalcore's metric and its summary column
ST_METRICS = {"accuracy": ("hit@{k}", "hit_at_{k}"), "precision": ("precision@{k}", "precision_at_{k}"),
              "recall": ("recall@{k}", "recall_at_{k}"), "mrr": ("mrr@{k}", "mrr_at_{k}"),
              "ndcg": ("ndcg@{k}", "ndcg_at_{k}"), "map": ("map@{k}", "map_at_{k}")}


def mteb_metric_names(k_values: Iterable[int] = MTEB_K_VALUES) -> dict[str, str]:
    """MTEB's score names -> evalcore's metric names (``ndcg_at_10`` -> ``ndcg@10``, ``map_at_100`` ->
    ``map_cut@100``), for ``evalcore.evaluate(metrics=...)``."""
    return {f"{name}_{k}": metric.format(k=k) for k in _cutoffs(k_values, "k_values")
            for name, (metric, _) in MTEB_METRICS.items()}


def evaluate(qrels, *, query=None, corpus=None, query_ids: Sequence[str], corpus_ids: Sequence[str],
             scores=None, k_values: Iterable[int] = MTEB_K_VALUES, similarity: str = "cosine",
             ignore_identical_ids: bool = False) -> dict[str, float]:
    """MTEB's retrieval scores (module docstring): ``{"ndcg_at_10": ..., "map_at_100": ..., ...}``.

    ``qrels``: ``{qid: {docid: grade}}`` (or a table, TREC file, ranx Qrels); ``query``/``corpus``: the
    embeddings, rows named by ``query_ids``/``corpus_ids``; ``similarity``: ``cosine`` (MTEB's default) or
    ``dot``.
    """
    ks = _cutoffs(k_values, "k_values")
    metrics = [metric.format(k=k) for k in ks for metric, _ in MTEB_METRICS.values()]
    summary = _summary(qrels, query, corpus, query_ids, corpus_ids, scores, metrics, similarity,
                       ignore_identical_ids, max(ks), empty_queries="zero")
    return {f"{name}_{k}": summary[column.format(k=k)] for name, (_, column) in MTEB_METRICS.items() for k in ks}


def information_retrieval_scores(relevant_docs: Mapping, *, query=None, corpus=None, query_ids: Sequence[str],
                                 corpus_ids: Sequence[str], scores=None,
                                 accuracy_at_k: Iterable[int] = (1, 3, 5, 10),
                                 precision_recall_at_k: Iterable[int] = (1, 3, 5, 10),
                                 mrr_at_k: Iterable[int] = (10,), ndcg_at_k: Iterable[int] = (10,),
                                 map_at_k: Iterable[int] = (100,),
                                 score_function: str = "cosine") -> dict[str, float]:
    """sentence-transformers' ``InformationRetrievalEvaluator`` scores (module docstring), keyed
    ``f"{score_function}_{metric}@{k}"``. ``relevant_docs``: ``{qid: set of docids}`` as the evaluator takes
    it, or ``{qid: {docid: grade}}`` (grade >= 1 relevant). ``score_function``: ``cosine`` or ``dot``."""
    if score_function not in ("cosine", "dot"):
        raise OptionError("score_function", f"{score_function!r} is not cosine or dot")
    asked = {"accuracy": _cutoffs(accuracy_at_k, "accuracy_at_k"),
             "precision": _cutoffs(precision_recall_at_k, "precision_recall_at_k"),
             "recall": _cutoffs(precision_recall_at_k, "precision_recall_at_k"),
             "mrr": _cutoffs(mrr_at_k, "mrr_at_k"), "ndcg": _cutoffs(ndcg_at_k, "ndcg_at_k"),
             "map": _cutoffs(map_at_k, "map_at_k")}
    metrics = list(dict.fromkeys(ST_METRICS[name][0].format(k=k) for name, ks in asked.items() for k in ks))
    binary = binary_qrels(relevant_docs)
    summary = _summary(binary, query, corpus, query_ids, corpus_ids, scores, metrics, score_function, False,
                       max(max(ks) for ks in asked.values()), empty_queries="skip")
    return {f"{score_function}_{name}@{k}": summary[ST_METRICS[name][1].format(k=k)]
            for name, ks in asked.items() for k in ks}


def binary_qrels(relevant_docs: Mapping) -> dict[str, dict[str, int]]:
    """sentence-transformers' relevance: ``{qid: {docid: 1}}`` for every listed document (a set or list) or
    every document graded >= 1 (a mapping of grades)."""
    if not isinstance(relevant_docs, Mapping):
        raise OptionError("relevant_docs", f"{type(relevant_docs).__name__} is not a mapping {{query id: document ids}}")
    out: dict[str, dict[str, int]] = {}
    for qid, docs in relevant_docs.items():
        if isinstance(docs, Mapping):
            kept = [d for d, g in docs.items() if isinstance(g, (int, float, np.number)) and g >= 1]
        elif isinstance(docs, (set, frozenset, list, tuple)):
            kept = list(docs)
        else:
            raise OptionError("relevant_docs", f"query {qid!r} holds {type(docs).__name__}, not a set of document ids")
        if kept:
            out[qid] = {d: 1 for d in kept}
    if not out:
        raise OptionError("relevant_docs", "no query has a relevant document")
    return out


def _cutoffs(values: Iterable[int], name: str) -> list[int]:
    try:
        ks = list(values)
    except TypeError:
        raise input_error(name, f"{values!r} is not a list of cut-offs") from None
    if not ks or any(isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1 for k in ks):
        raise input_error(name, f"{ks!r} must be positive integers")
    return [int(k) for k in dict.fromkeys(ks)]


def _summary(qrels, query, corpus, query_ids, corpus_ids, scores, metrics: list[str], similarity: str,
             ignore_identical_ids: bool, largest_k: int, empty_queries: EmptyQueries) -> dict:
    """The "all" row of one exact evaluation of the whole corpus (peer warnings silenced: the peers say
    nothing of queries left out either)."""
    if scores is not None and (query is not None or corpus is not None):
        raise OptionError("scores", "give scores or the query and corpus embeddings, not both")
    if ignore_identical_ids:
        if scores is None:
            raise OptionError("ignore_identical_ids", "needs scores= (with embeddings every query ranks the "
                             "whole corpus; drop the identical ids from corpus_ids instead)")
        scores = identical_ids_last(scores, query_ids, corpus_ids, largest_k)
    data = {"scores": scores} if scores is not None else {"query": query, "gallery": corpus,
                                                          "similarity": similarity}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EvalcoreWarning)
        result = evalcore_evaluate(**data, query_ids=query_ids, gallery_ids=corpus_ids, qrels=qrels,
                                   metrics=metrics, empty_queries=empty_queries)
    return result.metrics


def identical_ids_last(scores, query_ids: Sequence[str], corpus_ids: Sequence[str], largest_k: int) -> np.ndarray:
    """``scores`` with each (query, document of the same id) pair below the row's lowest score: ranked after
    every other document, which equals its removal for every cut-off below the corpus size."""
    matrix = np.array(scores, dtype=np.float64)
    if matrix.ndim != 2:
        raise OptionError("scores", f"must be 2-D (queries, corpus documents), got shape {matrix.shape}")
    if largest_k >= matrix.shape[1]:
        raise OptionError("k_values", f"{largest_k} is not below the corpus size {matrix.shape[1]}, where "
                         "ignore_identical_ids would count the identical document as retrieved")
    column = {str(d): j for j, d in enumerate(corpus_ids)}
    for row, qid in enumerate(query_ids):
        j = column.get(str(qid))
        if j is not None and row < matrix.shape[0]:
            others = np.delete(matrix[row], j)
            low = float(others.min()) if others.size else 0.0
            matrix[row, j] = low - max(1.0, abs(low))  # strictly below: low - 1 would round to low past 2^53
    return matrix
