"""Ranks -> per-query metrics -> summary (README, Metrics).

Every per-query metric is a function of one query's sorted relevant ranks
r_1 < r_2 < ... (a CSR list ``indptr, ranks``), R = ``n_relevant`` and, for a
metric with a cut-off, k; the first line of its docstring is its definition.
Each one is registered once in ``core.registry`` (names, cut-off option,
labels, direction, dtype), which everything else reads. The functions here
never see embeddings. A query with R = 0 is unknown: its metrics are NaN here
(-1 for ranks) and null in the report, and it is left out of every mean;
except that a query named in ``zero_empty`` (a judged query with no relevant
item, under ``--empty-queries zero``) scores 0 on every metric and counts,
which is trec_eval's rule (``registry.compute`` applies it).
"""
from __future__ import annotations

import math

import numpy as np

from evalcore.core import openset
from evalcore.core.lists import RankLists, positions
from evalcore.core.protocols import segment_ids


def _positions(indptr: np.ndarray) -> np.ndarray:
    """i for every rank r_i: its 1-based position within its query."""
    seg = segment_ids(indptr)
    return np.arange(len(seg), dtype=np.int64) - indptr[seg] + 1


def _segment_sum(indptr: np.ndarray, values: np.ndarray) -> np.ndarray:
    return np.bincount(segment_ids(indptr), weights=values, minlength=len(indptr) - 1)


def _known(n_relevant: np.ndarray, values: np.ndarray) -> np.ndarray:
    """NaN where R = 0 (an unknown query has no metric)."""
    return np.where(n_relevant > 0, values, np.nan)


def first_rank(indptr, ranks, n_relevant) -> np.ndarray:
    """first_rank = r_1 (null when no relevant item is ranked).

    Returned as -1 where null.
    """
    out = np.full(len(indptr) - 1, -1, dtype=np.int64)
    has = np.diff(indptr) > 0
    out[has] = ranks[indptr[:-1][has]]
    return out


def last_rank(indptr, ranks, n_relevant) -> np.ndarray:
    """last_rank = r_R (null unless every relevant item is ranked).

    Returned as -1 where null.
    """
    out = np.full(len(indptr) - 1, -1, dtype=np.int64)
    counts = np.diff(indptr)
    complete = (counts == n_relevant) & (counts > 0)
    out[complete] = ranks[indptr[1:][complete] - 1]
    return out


def average_precision(indptr, ranks, n_relevant) -> np.ndarray:
    """ap = (1/R) * sum_i i / r_i."""
    total = _segment_sum(indptr, _positions(indptr) / ranks)
    return _known(n_relevant, total / np.maximum(n_relevant, 1))


def average_precision_trapezoid(indptr, ranks, n_relevant) -> np.ndarray:
    """ap_trapz = (1/R) * sum_i (i/r_i + p_i)/2, p_i = (i-1)/(r_i-1), p_i = 1 when r_i = 1.

    The trapezoid rule of Person_reID_baseline_pytorch's evaluate script.
    """
    i = _positions(indptr).astype(np.float64)
    r = ranks.astype(np.float64)
    before = np.where(r > 1, (i - 1) / np.maximum(r - 1, 1), 1.0)
    total = _segment_sum(indptr, (i / r + before) / 2)
    return _known(n_relevant, total / np.maximum(n_relevant, 1))


def inverse_negative_penalty(indptr, ranks, n_relevant) -> np.ndarray:
    """inp = R / r_R (mINP's per-query term); 0 when r_R is missing."""
    last = last_rank(indptr, ranks, n_relevant)
    return _known(n_relevant, np.where(last > 0, n_relevant / np.maximum(last, 1), 0.0))


def reciprocal_rank(indptr, ranks, n_relevant) -> np.ndarray:
    """rr = 1 / r_1; 0 when no relevant item is ranked."""
    first = first_rank(indptr, ranks, n_relevant)
    return _known(n_relevant, np.where(first > 0, 1.0 / np.maximum(first, 1), 0.0))


def count_at(indptr, ranks, k: int) -> np.ndarray:
    """#{i : r_i <= k}."""
    return np.bincount(segment_ids(indptr), weights=(ranks <= k), minlength=len(indptr) - 1)


def hit_at(indptr, ranks, n_relevant, k: int) -> np.ndarray:
    """hit_at_k = 1 if r_1 <= k else 0 (Rank-k accuracy, CMC@k)."""
    first = first_rank(indptr, ranks, n_relevant)
    return _known(n_relevant, ((first > 0) & (first <= k)).astype(np.float64))


def recall_at(indptr, ranks, n_relevant, k: int) -> np.ndarray:
    """recall_at_k = #{i : r_i <= k} / R."""
    return _known(n_relevant, count_at(indptr, ranks, k) / np.maximum(n_relevant, 1))


def precision_at(indptr, ranks, n_relevant, k: int) -> np.ndarray:
    """precision_at_k = #{i : r_i <= k} / k."""
    return _known(n_relevant, count_at(indptr, ranks, k) / k)


def average_precision_at(indptr, ranks, n_relevant, k: int) -> np.ndarray:
    """ap_at_K = (1/min(R, K)) * sum_{i : r_i <= K} i / r_i (mAP@K of landmark retrieval)."""
    terms = np.where(ranks <= k, _positions(indptr) / ranks, 0.0)
    total = _segment_sum(indptr, terms)
    return _known(n_relevant, total / np.maximum(np.minimum(n_relevant, k), 1))


def r_precision(indptr, ranks, n_relevant) -> np.ndarray:
    """rprec = #{i : r_i <= R} / R (R-precision: precision at rank R, which equals recall at rank R)."""
    r = np.asarray(n_relevant, dtype=np.int64)
    within = np.bincount(segment_ids(indptr), weights=ranks <= np.repeat(r, np.diff(indptr)),
                         minlength=len(indptr) - 1)
    return _known(r, within / np.maximum(r, 1))


def _discount(ranks: np.ndarray) -> np.ndarray:
    """1 / log2(r + 1) for every rank r (the gain of one relevant item at rank r)."""
    return 1.0 / np.log2(ranks.astype(np.float64) + 1.0)


def _dcg(indptr: np.ndarray, ranks: np.ndarray, gains: np.ndarray, k: int | None) -> np.ndarray:
    """sum over a query's items with rank r (<= k) of gain / log2(r + 1)."""
    terms = gains * _discount(ranks)
    if k is not None:
        terms = np.where(ranks <= k, terms, 0.0)
    return _segment_sum(indptr, terms)


def _ndcg(lists: RankLists, k: int | None) -> np.ndarray:
    """DCG / IDCG, known wherever the query has an item of grade >= 1: nDCG ignores --rel-level (as
    trec_eval's does), so a query whose grades all lie below the level still has one."""
    dcg = _dcg(lists.gain_indptr, lists.gain_ranks, lists.gains, k)
    idcg = _dcg(lists.ideal_indptr, positions(lists.ideal_indptr), lists.ideal_gains, k)
    return _known(np.diff(lists.ideal_indptr), dcg / np.where(idcg > 0, idcg, 1.0))


def ndcg(lists: RankLists) -> np.ndarray:
    """ndcg = sum_i g_i/log2(r_i + 1) / sum_{j=1..R} g*_j/log2(j + 1), g*: every relevant gain, highest first.

    The sums run over relevant items (grade >= 1) with gain = grade, whatever --rel-level; trec_eval's ``ndcg``.
    """
    return _ndcg(lists, None)


def ndcg_at(lists: RankLists, k: int) -> np.ndarray:
    """ndcg_at_k = sum_{r_i <= k} g_i/log2(r_i + 1) / sum_{j=1..min(R, k)} g*_j/log2(j + 1) (trec_eval ndcg_cut_k).

    With binary relevance the ideal ranking puts min(R, k) relevant items at ranks 1..min(R, k).
    """
    return _ndcg(lists, k)


def bpref(lists: RankLists) -> np.ndarray:
    """bpref = (1/R) * sum_{ranked i} (1 - min(n_i, R) / min(N, R)), 1 when n_i = 0; n_i judged non-relevant above i.

    N = the judged non-relevant items of the query (taken as >= R where unknown); trec_eval's ``bpref``.
    """
    r = np.asarray(lists.n_relevant, dtype=np.int64)
    if lists.judged_before is None:
        return np.full(len(r), np.nan)
    rows = segment_ids(lists.indptr)
    pool = r if lists.n_judged_nonrel is None else np.minimum(lists.n_judged_nonrel, r)
    above = lists.judged_before
    terms = np.where(above > 0, 1.0 - np.minimum(above, r[rows]) / np.maximum(pool[rows], 1), 1.0)
    return _known(r, _segment_sum(lists.indptr, terms) / np.maximum(r, 1))


def average_precision_cut(indptr, ranks, n_relevant, k: int) -> np.ndarray:
    """ap_cut_k = (1/R) * sum_{i : r_i <= k} i / r_i (trec_eval map_cut_k)."""
    terms = np.where(ranks <= k, _positions(indptr) / ranks, 0.0)
    return _known(n_relevant, _segment_sum(indptr, terms) / np.maximum(n_relevant, 1))


def reciprocal_rank_at(indptr, ranks, n_relevant, k: int) -> np.ndarray:
    """rr_at_k = 1 / r_1 if r_1 <= k else 0 (MRR@k)."""
    first = first_rank(indptr, ranks, n_relevant)
    return _known(n_relevant, np.where((first > 0) & (first <= k), 1.0 / np.maximum(first, 1), 0.0))


# --------------------------------------------------------------------------- open set


def open_set_outcome(top1_score: np.ndarray, correct: np.ndarray, threshold: float):
    """accepted = top1_score >= T; outcome TP/FP/FN/TN from (accepted, correct)."""
    accepted = np.nan_to_num(top1_score, nan=-np.inf) >= threshold
    outcome = np.where(accepted, np.where(correct, "TP", "FP"), np.where(correct, "FN", "TN"))
    return accepted, outcome.astype(object)


# --------------------------------------------------------------------------- summary

def exact_mean(values: np.ndarray) -> float | None:
    """Correctly rounded mean (math.fsum): the same whatever the chunking or order."""
    values = values[~np.isnan(values)]
    if not values.size:
        return None
    return math.fsum(values.tolist()) / values.size


def summary_row(columns: dict[str, np.ndarray], n_relevant: np.ndarray, summaries: dict[str, str],
                outcome: np.ndarray | None = None, threshold: float | None = None,
                counted: np.ndarray | None = None) -> dict:
    """One summary row over the given queries: ``summaries`` maps per-query columns to their summary names.

    Means are over the ``counted`` queries: those with R > 0, plus any R = 0
    query scored 0 under ``--empty-queries zero``. n_evaluated counts them and
    n_unknown the rest. The open-set figures always split on R > 0.
    """
    known = n_relevant > 0
    counted = known if counted is None else (np.asarray(counted, dtype=bool) | known)
    row: dict[str, float | int | None] = {"n_queries": int(len(n_relevant)), "n_evaluated": int(counted.sum()),
           "n_unknown": int((~counted).sum())}
    for name, summary in summaries.items():
        row[summary] = exact_mean(np.asarray(columns[name], dtype=np.float64)[counted])
    if outcome is not None:
        # the rates and the counts they come from: core.openset
        row.update(openset.threshold_figures(outcome, known, threshold))
    return row


#: summary columns ``--target-fpir`` adds (``core.openset.sweep_tables``)
TARGET_FPIR_COLUMNS = openset.TARGET_FPIR_COLUMNS


def cmc_curve(first: np.ndarray, n_relevant: np.ndarray, max_rank: int,
              counted: np.ndarray | None = None) -> np.ndarray:
    """cmc[k-1] = fraction of counted queries with r_1 <= k, k = 1..max_rank (counted as in summary_row)."""
    known = (n_relevant > 0) if counted is None else (np.asarray(counted, dtype=bool) | (n_relevant > 0))
    n_known = int(known.sum())
    if not n_known:
        return np.full(max_rank, np.nan)
    f = first[known]
    f = f[(f > 0) & (f <= max_rank)]
    hist = np.bincount(f, minlength=max_rank + 1)[1:max_rank + 1]
    return np.cumsum(hist) / n_known
