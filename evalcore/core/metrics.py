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


def _discount(ranks: np.ndarray, base: float = 2.0) -> np.ndarray:
    """1 / log_b(r + 1) for every rank r (the gain of one relevant item at rank r), b = ``base``: 1 / log2(r + 1)
    for the default 2; ln(b) / ln(r + 1) for another base (scikit-learn's ``dcg_score(log_base=b)``)."""
    if base == 2.0:
        return 1.0 / np.log2(ranks.astype(np.float64) + 1.0)
    return math.log(base) / np.log(ranks.astype(np.float64) + 1.0)


def _dcg(indptr: np.ndarray, ranks: np.ndarray, gains: np.ndarray, k: int | None, base: float = 2.0) -> np.ndarray:
    """sum over a query's items with rank r (<= k) of gain / log_b(r + 1), b = ``base``."""
    terms = gains * _discount(ranks, base)
    if k is not None:
        terms = np.where(ranks <= k, terms, 0.0)
    return _segment_sum(indptr, terms)


def _exponential(gains: np.ndarray) -> np.ndarray:
    """2^g - 1 for every gain g (Burges et al.'s gain)."""
    return np.exp2(gains) - 1.0


def _ndcg(lists: RankLists, k: int | None, exponential: bool = False) -> np.ndarray:
    """DCG / IDCG, known wherever the query has an item of grade >= 1: nDCG ignores --rel-level (as
    trec_eval's does), so a query whose grades all lie below the level still has one. ``exponential``:
    gain 2^g - 1 instead of g (the ideal order is the same: the map is increasing)."""
    gains, ideal = lists.gains, lists.ideal_gains
    if exponential:
        gains, ideal = _exponential(gains), _exponential(ideal)
    dcg = _dcg(lists.gain_indptr, lists.gain_ranks, gains, k)
    idcg = _dcg(lists.ideal_indptr, positions(lists.ideal_indptr), ideal, k)
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


def ndcg_exponential(lists: RankLists) -> np.ndarray:
    """ndcg_exp = sum_i (2^g_i - 1)/log2(r_i + 1) / sum_{j=1..R} (2^g*_j - 1)/log2(j + 1) (Burges et al.'s gain).

    nDCG with exponential gain: ir_measures' nDCG(gains={g: 2^g - 1}), ranx's ndcg_burges; grade >= 1, whatever
    --rel-level.
    """
    return _ndcg(lists, None, exponential=True)


def ndcg_exponential_at(lists: RankLists, k: int) -> np.ndarray:
    """ndcg_exp_at_k = sum_{r_i <= k} (2^g_i - 1)/log2(r_i + 1) / sum_{j=1..min(R, k)} (2^g*_j - 1)/log2(j + 1)."""
    return _ndcg(lists, k, exponential=True)


def dcg(lists: RankLists) -> np.ndarray:
    """dcg = sum_i g_i / log2(r_i + 1): the discounted cumulative gain, not normalised (ranx's dcg).

    g_i the grade of the ranked item at r_i (grade >= 1, whatever --rel-level, as ndcg); null where the query has
    no item of grade >= 1 (as ndcg).
    """
    return _known(np.diff(lists.ideal_indptr), _dcg(lists.gain_indptr, lists.gain_ranks, lists.gains, None))


def dcg_at(lists: RankLists, k: int) -> np.ndarray:
    """dcg_at_k = sum_{r_i <= k} g_i / log2(r_i + 1): DCG of the top k, not normalised (ranx's dcg@k)."""
    return _known(np.diff(lists.ideal_indptr), _dcg(lists.gain_indptr, lists.gain_ranks, lists.gains, k))


def _groups(lists: RankLists) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(indptr, first place, last place counted, size, grade) of each ranked relevant item's tie group
    (``RankLists.tie_groups``): the last place is the group's, or --depth where the group reaches past it
    (the places below the cut are not retrieved)."""
    indptr, start, size, gains = lists.tie_groups   # type: ignore[misc]
    end = start + size - 1
    if lists.depth is not None:
        end = np.minimum(end, lists.depth)
    return indptr, start, end, size, gains


def _shared_dcg(lists: RankLists, k: int | None, gains: np.ndarray, base: float = 2.0) -> np.ndarray:
    """sum_i (gains_i / t_i) * sum_{p = s_i..e_i, p <= k} 1/log_b(p + 1) per query: DCG with each tie group's
    gain shared over its places (``_groups``: s_i, e_i, t_i), b = ``base``."""
    indptr, start, end, size, _ = _groups(lists)
    top = int(end.max(initial=0)) if k is None else min(int(k), int(end.max(initial=0)))
    # D[m] = sum_{p=1..m} 1/log2(p + 1): a group's discounts are D[min(end, k)] - D[start - 1] (scikit-learn's
    # running sum, as its _tie_averaged_dcg takes them)
    running = np.concatenate([[0.0], np.cumsum(_discount(np.arange(1, top + 1), base))])
    last = np.minimum(end, top)
    spread = np.where(start <= last, running[last] - running[np.minimum(start - 1, top)], 0.0)
    # a place alone (an item tied with nothing): its own discount, as the plain DCG takes it
    alone = (start == last) & (start <= top)
    spread[alone] = _discount(start[alone], base)
    return _segment_sum(indptr, gains / size * spread)


def _tie_averaged(lists: RankLists, k: int | None, exponential: bool = False) -> np.ndarray:
    """DCG with tied items sharing their gains over the tie group's places, over the usual IDCG (cut at k);
    ``exponential``: gains 2^g - 1 on both sides."""
    n = len(lists.ideal_indptr) - 1
    if lists.tie_groups is None:
        return np.full(n, np.nan)
    gains, ideal = lists.tie_groups[3], lists.ideal_gains
    if exponential:
        gains, ideal = _exponential(gains), _exponential(ideal)
    dcg = _shared_dcg(lists, k, gains)
    idcg = _dcg(lists.ideal_indptr, positions(lists.ideal_indptr), ideal, k)
    return _known(np.diff(lists.ideal_indptr), dcg / np.where(idcg > 0, idcg, 1.0))


def ndcg_tie_average(lists: RankLists) -> np.ndarray:
    """ndcg_avg = sum_i (g_i / t_i) * sum_{p = s_i..s_i+t_i-1} 1/log2(p + 1) / IDCG: tied items share their gains.

    s_i, t_i: the first place and the size of the group of equal scores holding the relevant item i (McSherry and
    Najork); the expected nDCG over every order of the ties. scikit-learn's ndcg_score, torchmetrics' nDCG.
    Precomputed rankings with scores (a list without scores has no visible ties: the plain nDCG).
    """
    return _tie_averaged(lists, None)


def ndcg_tie_average_at(lists: RankLists, k: int) -> np.ndarray:
    """ndcg_avg_at_k = sum_i (g_i / t_i) * sum_{p = s_i..s_i+t_i-1, p <= k} 1/log2(p + 1) / IDCG@k (tie-averaged)."""
    return _tie_averaged(lists, k)


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


# --------------------------------------------------------------------------- trec_eval's counts and sets
# trec_eval's -m all_trec measures of the relevant ranks alone (README, Metrics); its names, lower-cased.

#: trec_eval's MIN_GEO_MEAN: gm_map and gm_bpref floor each query's value here before the log
MIN_GEO_MEAN = 0.00001
#: the recall levels of iprec_at_recall_x and 11pt_avg, and the multiples of R of Rprec_mult_x (trec_eval's)
RECALL_LEVELS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
R_MULTIPLES = (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)


def num_rel(indptr, ranks, n_relevant) -> np.ndarray:
    """num_rel = R (summed over queries in the summary, as trec_eval's num_rel)."""
    r = np.asarray(n_relevant, dtype=np.int64)
    return _known(r, r.astype(np.float64))


def num_rel_ret(indptr, ranks, n_relevant) -> np.ndarray:
    """num_rel_ret = #{i : r_i ranked} (relevant items retrieved, after --depth; summed in the summary)."""
    return _known(n_relevant, np.diff(indptr).astype(np.float64))


def _interpolated_precision(indptr, ranks, n_relevant, level: float) -> np.ndarray:
    """max{i / r_i : c <= i <= n}, c = max(1, round(level * R)) half away from zero, n the ranked relevant
    items; 0 when c > n (trec_eval's iprec_at_recall: precision interpolated to the right)."""
    r = np.asarray(n_relevant, dtype=np.int64)
    n = len(indptr) - 1
    # C's lround(level * R): the same double product, halves away from zero
    cut = np.floor(np.float64(level) * r + 0.5).astype(np.int64)
    rows = segment_ids(indptr)
    i = _positions(indptr)
    precision = np.where(i >= np.maximum(cut, 1)[rows], i / np.maximum(ranks, 1), 0.0)
    best = np.zeros(n)
    np.maximum.at(best, rows, precision)
    return _known(r, np.where(cut <= np.diff(indptr), best, 0.0))


def _iprec(level: float):
    def iprec_at_recall(indptr, ranks, n_relevant) -> np.ndarray:
        return _interpolated_precision(indptr, ranks, n_relevant, level)
    iprec_at_recall.__doc__ = (
        f"iprec_at_recall_{level:.2f} = max{{i / r_i : i >= max(1, c)}}, c = round({level:.2f} * R); 0 when fewer "
        "than c relevant items are ranked.\n\n        trec_eval's interpolated precision at recall "
        f"{level:.2f} (round: half away from zero).")
    iprec_at_recall.__name__ = f"iprec_at_recall_{level:.2f}".replace(".", "_")
    return iprec_at_recall


def eleven_point_average(indptr, ranks, n_relevant) -> np.ndarray:
    """11pt_avg = (1/11) * sum over x = 0.0, 0.1, ..., 1.0 of iprec_at_recall_x (trec_eval's 11pt_avg)."""
    total = np.zeros(len(indptr) - 1)
    for x in RECALL_LEVELS:
        total = total + _interpolated_precision(indptr, ranks, n_relevant, x)
    return total / len(RECALL_LEVELS)


def _precision_at_multiple(multiple: float):
    def r_precision_multiple(indptr, ranks, n_relevant) -> np.ndarray:
        r = np.asarray(n_relevant, dtype=np.int64)
        # trec_eval's cut: (long)(x * R + 0.9), the same double sum truncated
        cut = np.floor(np.float64(multiple) * r + 0.9).astype(np.int64)
        within = np.bincount(segment_ids(indptr), weights=ranks <= np.repeat(cut, np.diff(indptr)),
                             minlength=len(indptr) - 1)
        return _known(r, within / np.maximum(cut, 1))
    r_precision_multiple.__doc__ = (
        f"rprec_mult_{multiple:.2f} = #{{i : r_i <= c}} / c, c = floor({multiple:.2f} * R + 0.9) (trec_eval's "
        f"Rprec_mult_{multiple:.2f}: precision at {multiple:.2f} R).")
    r_precision_multiple.__name__ = f"rprec_mult_{multiple:.2f}".replace(".", "_")
    return r_precision_multiple


#: one function per recall level / multiple of R: iprec_at_recall_0.00 .. _1.00, Rprec_mult_0.20 .. _2.00
IPREC_AT_RECALL = {x: _iprec(x) for x in RECALL_LEVELS}
RPREC_MULT = {x: _precision_at_multiple(x) for x in R_MULTIPLES}


def relative_precision_at(indptr, ranks, n_relevant, k: int) -> np.ndarray:
    """relative_p_at_k = #{i : r_i <= k} / min(R, k) (trec_eval's relative_P_k: P@k over the most it can be)."""
    r = np.asarray(n_relevant, dtype=np.int64)
    return _known(r, count_at(indptr, ranks, k) / np.maximum(np.minimum(r, k), 1))


def floored_average_precision(indptr, ranks, n_relevant) -> np.ndarray:
    """gm_ap = max(ap, 0.00001); its summary gm_map is the geometric mean exp(mean log gm_ap) (trec_eval's gm_map)."""
    return np.maximum(average_precision(indptr, ranks, n_relevant), MIN_GEO_MEAN)


def floored_bpref(lists: RankLists) -> np.ndarray:
    """gm_bpref = max(bpref, 0.00001); its summary is the geometric mean exp(mean log gm_bpref) (trec_eval's gm_bpref)."""
    return np.maximum(bpref(lists), MIN_GEO_MEAN)


# --------------------------------------------------------------------------- the retrieved set
# Measures of the set a ranking holds (within --depth): n = num_ret, its list length; they read ``lists``.


def _retrieved(lists: RankLists) -> np.ndarray:
    """n per query (float64); NaN everywhere when the ranking does not say (a scan of the whole gallery:
    ``registry.compute`` refuses such a metric before it gets here)."""
    if lists.n_retrieved is None:
        return np.full(len(lists.n_relevant), np.nan)
    return np.asarray(lists.n_retrieved, dtype=np.float64)


def num_ret(lists: RankLists) -> np.ndarray:
    """num_ret = n, the items retrieved (the list within --depth; summed in the summary, as trec_eval's num_ret).

    Defined for a query with no relevant item too (trec_eval prints it).
    """
    return _retrieved(lists)


def _set_counts(lists: RankLists) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(n, relevant retrieved, R) per query, float64."""
    return (_retrieved(lists), np.diff(lists.indptr).astype(np.float64),
            np.asarray(lists.n_relevant, dtype=np.float64))


def _unless_unknown(n: np.ndarray, r: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The values; NaN where R = 0 or n is unknown."""
    return _known(r, np.where(np.isnan(n), np.nan, values))


def set_precision(lists: RankLists) -> np.ndarray:
    """set_p = #{i : r_i ranked} / n (trec_eval's set_P); 0 when nothing is retrieved."""
    n, hits, r = _set_counts(lists)
    return _unless_unknown(n, r, np.where(n > 0, hits / np.maximum(n, 1), 0.0))


def set_recall(lists: RankLists) -> np.ndarray:
    """set_recall = #{i : r_i ranked} / R (trec_eval's set_recall)."""
    n, hits, r = _set_counts(lists)
    return _unless_unknown(n, r, hits / np.maximum(r, 1))


def set_f(lists: RankLists) -> np.ndarray:
    """set_f = 2 P R / (P + R), P = set_p, R = set_recall (trec_eval's set_F, beta 1); 0 when no relevant item is ranked."""
    n, hits, r = _set_counts(lists)
    p, rec = hits / np.maximum(n, 1), hits / np.maximum(r, 1)
    return _unless_unknown(n, r, np.where(hits > 0, 2 * p * rec / np.where(hits > 0, p + rec, 1.0), 0.0))


def set_map(lists: RankLists) -> np.ndarray:
    """set_map = #{i : r_i ranked}^2 / (n R) (trec_eval's set_map: set_p times set_recall); 0 when n = 0."""
    n, hits, r = _set_counts(lists)
    return _unless_unknown(n, r, np.where(n > 0, hits * hits / (np.maximum(n, 1) * np.maximum(r, 1)), 0.0))


def set_relative_precision(lists: RankLists) -> np.ndarray:
    """set_relative_p = #{i : r_i ranked} / min(n, R) (trec_eval's set_relative_P); 0 when n = 0."""
    n, hits, r = _set_counts(lists)
    most = np.minimum(n, r)
    return _unless_unknown(n, r, np.where(most > 0, hits / np.maximum(most, 1), 0.0))


def num_nonrel_judged_ret(lists: RankLists) -> np.ndarray:
    """num_nonrel_judged_ret = #{retrieved items judged not relevant: grade 0, or 1 <= grade < --rel-level} (summed).

    trec_eval's num_nonrel_judged_ret; an unjudged or in-the-pool (negative grade) item is not one. Defined for a
    query with no relevant item too.
    """
    if not lists.has("judged"):
        return np.full(len(lists.n_relevant), np.nan)
    if lists.all_judged or lists.nonrel_ranks is None:   # every retrieved item that is not relevant
        return _retrieved(lists) - np.diff(lists.indptr)
    return np.diff(lists.nonrel_ranks[0]).astype(np.float64)


def judged_at(lists: RankLists, k: int) -> np.ndarray:
    """judged_at_k = #{judged items among the top min(k, n)} / min(k, n), judged: a grade >= 0 (ir_measures' Judged@k).

    0 when nothing is retrieved; a negative TREC grade (in the pool, not judged) is not judged. Defined for a
    query with no relevant item too.
    """
    if not lists.has("judged"):
        return np.full(len(lists.n_relevant), np.nan)
    top = np.minimum(_retrieved(lists), k)
    if lists.all_judged or lists.nonrel_ranks is None:
        return np.where(top > 0, 1.0, 0.0)
    judged = count_at(lists.indptr, lists.ranks, k) + count_at(lists.nonrel_ranks[0], lists.nonrel_ranks[1], k)
    return np.where(top > 0, judged / np.maximum(top, 1), 0.0)


def unjudged_at(lists: RankLists, k: int) -> np.ndarray:
    """unj_at_k = #{unjudged items among the top min(k, n)} / k, unjudged: not in the qrels or a negative grade.

    trec_eval's unj: a list shorter than k counts as filled up with judged items, so the share is of k (judged@k's
    is of min(k, n)). Defined for a query with no relevant item too.
    """
    if not lists.has("judged"):
        return np.full(len(lists.n_relevant), np.nan)
    if lists.all_judged or lists.nonrel_ranks is None:
        return np.zeros(len(lists.n_relevant))
    judged = count_at(lists.indptr, lists.ranks, k) + count_at(lists.nonrel_ranks[0], lists.nonrel_ranks[1], k)
    return (np.minimum(_retrieved(lists), k) - judged) / k


#: ERR's g_max floor: the TREC Web track's top grade, 4 (gdeval's MAX_JUDGMENT, ir_measures' ERR@k)
ERR_TOP_GRADE = 4


def expected_reciprocal_rank_at(lists: RankLists, k: int) -> np.ndarray:
    """err_at_k = sum_{r_i <= k} (R_i / r_i) prod_{j < i} (1 - R_j), R_i = (2^g_i - 1) / 2^g_max (Chapelle et al.).

    g_i: the grade of the ranked relevant item at r_i (grade >= 1, whatever --rel-level); other items have R = 0.
    g_max = max(4, the query's highest grade): 4 is gdeval's (ir_measures' ERR@k) top grade.
    """
    n = len(lists.ideal_indptr) - 1
    top = np.full(n, float(ERR_TOP_GRADE))
    has = np.diff(lists.ideal_indptr) > 0
    top[has] = np.maximum(lists.ideal_gains[lists.ideal_indptr[:-1][has]], ERR_TOP_GRADE)
    rows = segment_ids(lists.gain_indptr)
    stop = _exponential(lists.gains) / np.exp2(top[rows])   # R_i: the chance the user stops at item i
    # decay_i = prod_{j < i} (1 - R_j) within each query, multiplied in rank order as the cascade walks it (the
    # same rounding whatever the other queries): one step per place i, over every query with an i-th item
    place = positions(lists.gain_indptr)
    decay = np.ones(len(stop))
    by_place = np.argsort(place, kind="stable")
    bounds = np.searchsorted(place[by_place], np.arange(2, int(place.max(initial=1)) + 2))
    for a, b in zip(bounds[:-1], bounds[1:]):
        at = by_place[a:b]
        decay[at] = decay[at - 1] * (1.0 - stop[at - 1])
    terms = np.where(lists.gain_ranks <= k, stop * decay / lists.gain_ranks, 0.0)
    return _known(np.diff(lists.ideal_indptr), _segment_sum(lists.gain_indptr, terms))


#: RBP's persistence p: trec_eval's default (its rbp and rbp_resid), and the other values registered
RBP_PERSISTENCE = 0.9
RBP_OTHER_PERSISTENCES = (0.5, 0.8, 0.95, 0.98)


def _highest_grade(lists: RankLists) -> np.ndarray:
    """g_max per query: its highest grade (the ideal gains run highest first); 0 without a relevant item."""
    top = np.zeros(len(lists.ideal_indptr) - 1)
    has = np.diff(lists.ideal_indptr) > 0
    top[has] = lists.ideal_gains[lists.ideal_indptr[:-1][has]]
    return top


def _rbp(lists: RankLists, p: float) -> np.ndarray:
    top = _highest_grade(lists)
    rows = segment_ids(lists.gain_indptr)
    terms = lists.gains / np.maximum(top[rows], 1.0) * np.power(p, lists.gain_ranks - 1.0)
    return _known(np.diff(lists.ideal_indptr), (1.0 - p) * _segment_sum(lists.gain_indptr, terms))


def _rbp_residual(lists: RankLists, p: float) -> np.ndarray:
    if not lists.has("judged"):
        return np.full(len(lists.n_relevant), np.nan)
    if lists.all_judged or lists.nonrel_ranks is None:   # every place judged: only the weight below the list
        return np.power(p, _retrieved(lists))
    rows = np.concatenate([segment_ids(lists.indptr), segment_ids(lists.nonrel_ranks[0])])
    places = np.concatenate([lists.ranks, lists.nonrel_ranks[1]])
    order = np.lexsort((places, rows))   # summed place by place: the same sum whichever places are relevant
    judged = np.bincount(rows[order], weights=np.power(p, places[order] - 1.0), minlength=len(lists.n_relevant))
    return 1.0 - (1.0 - p) * judged


def rank_biased_precision(lists: RankLists) -> np.ndarray:
    """rbp = (1 - p) * sum_i (g_i / g_max) * p^(r_i - 1), p = 0.9 (Moffat and Zobel; trec_eval's rbp).

    g_i: the grade of the ranked relevant item at r_i (grade >= 1, whatever --rel-level, as trec_eval's gains);
    g_max: the query's highest grade, at least 1, so gains lie in [0, 1] (binary relevance: 1 each).
    """
    return _rbp(lists, RBP_PERSISTENCE)


def rank_biased_precision_residual(lists: RankLists) -> np.ndarray:
    """rbp_resid = 1 - (1 - p) * sum over judged places u of p^(u - 1), p = 0.9 (Moffat and Zobel's RBP residual).

    The weight RBP has not judged: the unjudged places of the list, p^(u-1) (1 - p) each, and everything below
    it, p^n. Defined for a query with no relevant item too. trec_eval's rbp_resid gives the same, except 0 where
    the list has no unjudged item (it leaves the p^n below the list out there).
    """
    return _rbp_residual(lists, RBP_PERSISTENCE)


def number_text(x: float, decimals: int | None = None) -> str:
    """How a number is written in a name: ``decimals`` of them where they say it exactly (0.80), else an integer
    as one (10), else Python's shortest repr (2.5, 0.735): the text reads back as the same float."""
    x = float(x)
    if decimals is not None and float(f"{x:.{decimals}f}") == x:
        return f"{x:.{decimals}f}"
    if x.is_integer() and abs(x) < 2.0 ** 53:
        return str(int(x))
    return repr(x)


def persistence_text(p: float) -> str:
    """How a persistence is written in a name: two decimals where they say it exactly (0.73), else Python's
    shortest repr (0.735); ``number_text``'s rule."""
    return number_text(p, 2)


class RBPAt:
    """rbp or rbp_resid at any persistence 0 < p < 1 (``RBP(p=0.73)``): one callable per (measure, p), equal and
    hashed by them, so the same metric whichever process builds it. Its docstring is its definition. ``shared``:
    rbp with tied items sharing their gains (its form under --ties average, ``tied``)."""

    def __init__(self, measure: str, p: float, shared: bool = False) -> None:
        if measure not in ("rbp", "rbp_resid") or not 0.0 < p < 1.0 or (shared and measure != "rbp"):
            raise ValueError(f"RBPAt({measure!r}, {p!r}, {shared!r})")
        self.measure, self.p, self.shared = measure, float(p), bool(shared)
        name = f"{measure}_{persistence_text(self.p)}"
        text = f"{self.p:g}" if float(f"{self.p:g}") == self.p else repr(self.p)
        self.__doc__ = (f"{name} = (1 - p) * sum over places u of (g(u) / g_max) * p^(u - 1), p = {text}, g(u) the "
                        "gain u's tie group shares (ties averaged)." if self.shared else
                        f"{name} = (1 - p) * sum_i (g_i / g_max) * p^(r_i - 1), p = {text} (as rbp; trec_eval's "
                        f"rbp.p={text})." if measure == "rbp" else
                        f"{name} = 1 - (1 - p) * sum over judged places u of p^(u - 1), p = {text} (as rbp_resid; "
                        f"trec_eval's rbp_resid.p={text}).")

    def __call__(self, lists: RankLists) -> np.ndarray:
        if self.shared:
            return _rbp_tied(lists, self.p)
        return _rbp(lists, self.p) if self.measure == "rbp" else _rbp_residual(lists, self.p)

    def tied(self) -> RBPAt | None:
        """Its form under --ties average: rbp with tied items sharing their gains; None for rbp_resid (which counts
        judged places: not defined there)."""
        return RBPAt(self.measure, self.p, True) if self.measure == "rbp" else None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RBPAt) and (other.measure, other.p, other.shared) == (self.measure, self.p,
                                                                                        self.shared)

    def __hash__(self) -> int:
        return hash(("RBPAt", self.measure, self.p, self.shared))

    def __repr__(self) -> str:
        return f"RBPAt({self.measure!r}, {self.p!r}{', True' if self.shared else ''})"


#: persistence -> (rbp, rbp_resid) at it, for the values other than trec_eval's default that the registry registers
RBP_AT = {p: (RBPAt("rbp", p), RBPAt("rbp_resid", p)) for p in RBP_OTHER_PERSISTENCES}


def rank_biased(column: str, *, measure: str, p: float = RBP_PERSISTENCE) -> RBPAt:
    """rbp or rbp_resid (``measure``) at the persistence ``p``: the function of ``RBP(p=...)``'s record
    (``core.registry``, the parameter ``p``); ``column`` is the record's, which ``RBPAt`` spells itself."""
    function = RBPAt(measure, p)
    if column != f"{measure}_{persistence_text(function.p)}":
        raise ValueError(f"rank_biased({column!r}, measure={measure!r}, p={p!r})")
    return function


#: trec_eval's INFAP_EPSILON: keeps infAP's estimate of the precision above a relevant item defined with none judged
INFAP_EPSILON = 0.00001


def inferred_average_precision(lists: RankLists) -> np.ndarray:
    """infap = (1/R) * sum_i [1 if r_i = 1 else 1/r_i + ((r_i-1)/r_i) * (P_i/(r_i-1)) * ((i-1+e)/(i-1+J_i+2e))], e = 0.00001.

    Yilmaz and Aslam's inferred AP, as trec_eval's infAP: above the i-th relevant item (rank r_i) there are i-1
    relevant items, J_i judged non-relevant ones (grade 0, or 1 <= grade < --rel-level), U_i in the pool but not
    judged (a negative TREC grade) and the rest outside the pool (not in the qrels); P_i = i-1 + J_i + U_i. With
    every retrieved item judged it is AP but for e. Needs the judged items above each relevant one (as bpref).
    """
    r = np.asarray(lists.n_relevant, dtype=np.int64)
    if lists.judged_before is None:
        return np.full(len(r), np.nan)
    above = (_positions(lists.indptr) - 1).astype(np.float64)   # the relevant items above, i - 1
    judged = lists.judged_before.astype(np.float64)
    pool = above + judged
    pool_before = getattr(lists, "pool_before", None)
    if pool_before is not None:
        pool = pool + pool_before
    place = lists.ranks.astype(np.float64) - 1.0   # r_i - 1: trec_eval's 0-based place
    lower = np.maximum(place, 1.0)
    terms = 1.0 / (place + 1.0) + (place / (place + 1.0)) * (pool / lower) * \
        ((above + INFAP_EPSILON) / (above + judged + 2 * INFAP_EPSILON))
    terms = np.where(place == 0, 1.0, terms)
    return _known(r, _segment_sum(lists.indptr, terms) / np.maximum(r, 1))


def binary_gain(indptr, ranks, n_relevant) -> np.ndarray:
    """bing = (1/R) * sum_i 1 / log2(2 + r_i - i): each relevant item discounted by the items not relevant above it.

    trec_eval's binG (Buckley's experimental measure of 2008).
    """
    others_above = (ranks - _positions(indptr)).astype(np.float64)
    return _known(n_relevant, _segment_sum(indptr, 1.0 / np.log2(2.0 + others_above)) / np.maximum(n_relevant, 1))


def _graded_walk(kernel, lists: RankLists, *extra) -> np.ndarray:
    from evalcore.core import list_kernels  # numba: loaded when one of these measures is asked for

    out = np.empty(len(lists.ideal_indptr) - 1, dtype=np.float64)
    kernel = getattr(list_kernels, kernel)
    kernel(*(np.ascontiguousarray(a, dtype=np.int64) for a in (lists.gain_indptr, lists.gain_ranks, lists.gains,
                                                                 lists.ideal_indptr, lists.ideal_gains, *extra)),
           out)
    return out


def normalized_gain(lists: RankLists) -> np.ndarray:
    """g = sum_i g_i / log2(2 + cost(r_i) - CG(r_i)) / sum_j g*_j, cost(r) = sum_{p <= r} max(g*_p, 1), CG(r) = sum_{r_j <= r} g_j.

    trec_eval's G (Buckley's experimental measure of 2008): g_i the grade of the ranked item at r_i (grade >= 1,
    whatever --rel-level), g*_p the ideal ranking's gains, highest first (0 past its end). With binary relevance
    cost(r) - CG(r_i) = r_i - i and G is binG.
    """
    return _graded_walk("normalized_gain_rows", lists)


def ndcg_at_relevant(lists: RankLists) -> np.ndarray:
    """ndcg_rel = (1/R') * [sum_i DCG(r_i) / IDCG(r_i) + (R' - m) * DCG(n) / IDCG(R')]: nDCG averaged over the relevant items.

    trec_eval's ndcg_rel: DCG(r) = sum_{r_j <= r} g_j / log2(r_j + 1) over the ranked items of grade >= 1 (gain =
    grade, whatever --rel-level), IDCG(r) the same over the ideal ranking (cut at its R' items); m of the R' items
    are ranked, and each of the others takes the nDCG of the whole list.
    """
    return _graded_walk("ndcg_at_relevant_rows", lists)


def ndcg_at_r_levels(lists: RankLists) -> np.ndarray:
    """rndcg = mean over c in C of DCG(c) / IDCG(c); C = {#ideal gains >= g : each grade g >= 1 judged} plus n when n >= R' + 2.

    trec_eval's Rndcg: nDCG at the R of each grade (the places where the ideal ranking's gain drops, the last at
    R', the items of grade >= 1) and at the list's end n (trec_eval takes it only past R' + 1). Gains = grades,
    whatever --rel-level; null where R = 0 at --rel-level (trec_eval's 0).
    """
    if lists.n_retrieved is None:
        return np.full(len(lists.n_relevant), np.nan)
    return _graded_walk("ndcg_at_r_levels_rows", lists, lists.n_relevant, lists.n_retrieved)


def utility(lists: RankLists) -> np.ndarray:
    """utility = #{i : r_i ranked} - (n - #{i : r_i ranked}) (trec_eval's utility, its default coefficients 1, -1, 0, 0).

    Relevant retrieved count +1 each, non-relevant retrieved -1 each; defined for a query with no relevant item too.
    """
    n, hits, _ = _set_counts(lists)
    return hits - (n - hits)


# --------------------------------------------------------------------------- --ties average
# McSherry and Najork (2008): a tie group of t items at places s .. s+t-1 holding relevant items of total gain G
# gives each of its places the gain G/t. A measure that is a sum over places of gain(place) * weight(place), with
# weights that do not depend on the order (a cut-off, R, n, the ideal ranking), then equals its expected value
# over every order of the ties. Below, each such measure computed so from ``RankLists.tie_groups`` (every ranked
# relevant item with its group's first place, size and grade: ``_groups``); a place past --depth is not
# retrieved and has weight 0. The registry names each one as its metric's ``average``; a metric without one (AP,
# RR, hit@k, bpref, ERR, ...: not a sum of gains times fixed weights) is refused under --ties average.


def _shared_count(lists: RankLists, cut: int | np.ndarray | None = None) -> np.ndarray:
    """sum_i b_i * #{p = s_i..e_i : p <= cut} / t_i per query, b_i = 1 when the grade is >= --rel-level else 0:
    the expected number of relevant items in the top ``cut`` (one per query, or one for all; None: no cut)."""
    indptr, start, end, size, gains = _groups(lists)
    if cut is not None:
        c = np.asarray(cut, dtype=np.int64)
        end = np.minimum(end, np.repeat(c, np.diff(indptr)) if c.ndim else c)
    places = np.maximum(end - start + 1, 0)
    binary = (gains >= lists.rel_level).astype(np.float64)
    return _segment_sum(indptr, binary * places / size)   # places / t exactly 1 for a group wholly counted


def _tied(lists: RankLists, values) -> np.ndarray:
    """``values()`` where the lists give tie groups (every ranking does under --ties average), else NaN."""
    if lists.tie_groups is None:
        return np.full(len(lists.n_relevant), np.nan)
    return values()


def precision_at_tied(lists: RankLists, k: int) -> np.ndarray:
    """precision_at_k = sum over places p <= k of the relevant share of p's tie group / k (ties averaged)."""
    return _tied(lists, lambda: _known(lists.n_relevant, _shared_count(lists, k) / k))


def recall_at_tied(lists: RankLists, k: int) -> np.ndarray:
    """recall_at_k = sum over places p <= k of the relevant share of p's tie group / R (ties averaged)."""
    r = lists.n_relevant
    return _tied(lists, lambda: _known(r, _shared_count(lists, k) / np.maximum(r, 1)))


def r_precision_tied(lists: RankLists) -> np.ndarray:
    """rprec = sum over places p <= R of the relevant share of p's tie group / R (ties averaged)."""
    r = np.asarray(lists.n_relevant, dtype=np.int64)
    return _tied(lists, lambda: _known(r, _shared_count(lists, r) / np.maximum(r, 1)))


def _precision_at_multiple_tied(multiple: float):
    def r_precision_multiple(lists: RankLists) -> np.ndarray:
        r = np.asarray(lists.n_relevant, dtype=np.int64)
        cut = np.floor(np.float64(multiple) * r + 0.9).astype(np.int64)   # as trec_eval's, ``RPREC_MULT``
        return _tied(lists, lambda: _known(r, _shared_count(lists, cut) / np.maximum(cut, 1)))
    r_precision_multiple.__doc__ = (
        f"rprec_mult_{multiple:.2f} = sum over places p <= c of the relevant share of p's tie group / c, c = "
        f"floor({multiple:.2f} * R + 0.9) (ties averaged).")
    r_precision_multiple.__name__ = f"rprec_mult_{multiple:.2f}_tied".replace(".", "_")
    return r_precision_multiple


RPREC_MULT_TIED = {x: _precision_at_multiple_tied(x) for x in R_MULTIPLES}


def relative_precision_at_tied(lists: RankLists, k: int) -> np.ndarray:
    """relative_p_at_k = sum over places p <= k of the relevant share of p's tie group / min(R, k) (ties averaged)."""
    r = np.asarray(lists.n_relevant, dtype=np.int64)
    return _tied(lists, lambda: _known(r, _shared_count(lists, k) / np.maximum(np.minimum(r, k), 1)))


def num_rel_tied(lists: RankLists) -> np.ndarray:
    """num_rel = R (the order does not change it)."""
    return num_rel(lists.indptr, lists.ranks, lists.n_relevant)


def num_rel_ret_tied(lists: RankLists) -> np.ndarray:
    """num_rel_ret = sum over retrieved places of the relevant share of their tie groups (ties averaged; summed)."""
    return _tied(lists, lambda: _known(lists.n_relevant, _shared_count(lists)))


def _set_counts_tied(lists: RankLists) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(n, expected relevant retrieved, R) per query, float64 (``_set_counts`` with ties averaged)."""
    return _retrieved(lists), _shared_count(lists), np.asarray(lists.n_relevant, dtype=np.float64)


def set_precision_tied(lists: RankLists) -> np.ndarray:
    """set_p = h / n, h the expected relevant retrieved (the relevant shares of the retrieved places); 0 when n = 0."""
    def values():
        n, hits, r = _set_counts_tied(lists)
        return _unless_unknown(n, r, np.where(n > 0, hits / np.maximum(n, 1), 0.0))
    return _tied(lists, values)


def set_recall_tied(lists: RankLists) -> np.ndarray:
    """set_recall = h / R, h the expected relevant retrieved (ties averaged)."""
    def values():
        n, hits, r = _set_counts_tied(lists)
        return _unless_unknown(n, r, hits / np.maximum(r, 1))
    return _tied(lists, values)


def set_f_tied(lists: RankLists) -> np.ndarray:
    """set_f = 2 h / (n + R), h the expected relevant retrieved: set_F (2 P R / (P + R) = 2 h / (n + R)) is linear in h."""
    def values():
        n, hits, r = _set_counts_tied(lists)
        return _unless_unknown(n, r, 2 * hits / np.maximum(n + r, 1))
    return _tied(lists, values)


def set_relative_precision_tied(lists: RankLists) -> np.ndarray:
    """set_relative_p = h / min(n, R), h the expected relevant retrieved (ties averaged); 0 when n = 0."""
    def values():
        n, hits, r = _set_counts_tied(lists)
        most = np.minimum(n, r)
        return _unless_unknown(n, r, np.where(most > 0, hits / np.maximum(most, 1), 0.0))
    return _tied(lists, values)


def utility_tied(lists: RankLists) -> np.ndarray:
    """utility = 2 h - n, h the expected relevant retrieved (ties averaged); defined without relevant items too."""
    def values():
        n, hits, _ = _set_counts_tied(lists)
        return 2 * hits - n
    return _tied(lists, values)


def ndcg_tied(lists: RankLists) -> np.ndarray:
    """ndcg = sum_i (g_i / t_i) * sum_{p = s_i..s_i+t_i-1} 1/log2(p + 1) / IDCG: tied items share their gains (= ndcg_avg)."""
    return _tie_averaged(lists, None)


def ndcg_at_tied(lists: RankLists, k: int) -> np.ndarray:
    """ndcg_at_k = sum_i (g_i / t_i) * sum_{p = s_i..s_i+t_i-1, p <= k} 1/log2(p + 1) / IDCG@k (= ndcg_avg_at_k)."""
    return _tie_averaged(lists, k)


def dcg_tied(lists: RankLists) -> np.ndarray:
    """dcg = sum_i (g_i / t_i) * sum_{p = s_i..s_i+t_i-1} 1/log2(p + 1): DCG with tied items sharing their gains."""
    return _tied(lists, lambda: _known(np.diff(lists.ideal_indptr), _shared_dcg(lists, None, _groups(lists)[4])))


def dcg_at_tied(lists: RankLists, k: int) -> np.ndarray:
    """dcg_at_k = sum_i (g_i / t_i) * sum_{p = s_i..s_i+t_i-1, p <= k} 1/log2(p + 1) (ties averaged)."""
    return _tied(lists, lambda: _known(np.diff(lists.ideal_indptr), _shared_dcg(lists, k, _groups(lists)[4])))


def ndcg_exponential_tied(lists: RankLists) -> np.ndarray:
    """ndcg_exp = sum_i ((2^g_i - 1) / t_i) * sum_{p = s_i..s_i+t_i-1} 1/log2(p + 1) / IDCG (exp gain; ties averaged)."""
    return _tie_averaged(lists, None, exponential=True)


def ndcg_exponential_at_tied(lists: RankLists, k: int) -> np.ndarray:
    """ndcg_exp_at_k = sum_i ((2^g_i - 1) / t_i) * sum_{p = s_i..s_i+t_i-1, p <= k} 1/log2(p + 1) / IDCG@k (ties averaged)."""
    return _tie_averaged(lists, k, exponential=True)


def _rbp_tied(lists: RankLists, p: float) -> np.ndarray:
    """(1 - p) * sum over places u of (the group's shared gain at u / g_max) * p^(u - 1) = sum_i (g_i / g_max / t_i)
    * (p^(s_i - 1) - p^(e_i)): RBP with tied items sharing their gains (``_rbp``'s g_max)."""
    def values():
        indptr, start, end, size, gains = _groups(lists)
        top = _highest_grade(lists)
        rows = segment_ids(indptr)
        weights = np.where(start <= end, np.power(p, start - 1.0) - np.power(p, end * 1.0), 0.0)
        terms = gains / np.maximum(top[rows], 1.0) / size * weights
        return _known(np.diff(lists.ideal_indptr), _segment_sum(indptr, terms))
    return _tied(lists, values)


def rank_biased_precision_tied(lists: RankLists) -> np.ndarray:
    """rbp = (1 - p) * sum over places u of (g(u) / g_max) * p^(u - 1), p = 0.9, g(u) the gain u's tie group shares."""
    return _rbp_tied(lists, RBP_PERSISTENCE)


def ndcg_at_r_levels_tied(lists: RankLists) -> np.ndarray:
    """rndcg = mean over c in C of DCG(c) / IDCG(c) (C as rndcg's), DCG(c) with tied items sharing their gains.

    Each DCG(c) is a sum over places p <= c of the shared gain at p over log2(p + 1), and C depends on the
    grades and n alone, so the mean is linear in the places' gains.
    """
    n = len(lists.ideal_indptr) - 1
    if lists.tie_groups is None or lists.n_retrieved is None:
        return np.full(n, np.nan)
    ideal_indptr, ideal = lists.ideal_indptr, lists.ideal_gains.astype(np.float64)
    n_ideal = np.diff(ideal_indptr)
    # the cut-offs of each query: where its ideal gain drops (its last place included), then n when n >= R' + 2
    place = positions(ideal_indptr)
    seg = segment_ids(ideal_indptr)
    drops = np.ones(len(ideal), dtype=bool)
    drops[:-1] = (ideal[1:] != ideal[:-1]) | (seg[1:] != seg[:-1])
    running_ideal = np.cumsum(ideal / np.log2(place + 1.0))
    idcg_at = running_ideal - np.concatenate([[0.0], running_ideal])[ideal_indptr[:-1]][seg]
    n_ret = np.asarray(lists.n_retrieved, dtype=np.int64)
    tail = np.flatnonzero((n_ideal > 0) & (n_ret >= n_ideal + 2))
    point_row = np.concatenate([seg[drops], tail])
    point_cut = np.concatenate([place[drops], n_ret[tail]])
    point_idcg = np.concatenate([idcg_at[drops], idcg_at[ideal_indptr[1:][tail] - 1]])
    # every (cut-off, ranked relevant item) of a query: the item's shared discounts down to the cut-off
    indptr, start, end, size, gains = _groups(lists)
    per_row = np.diff(indptr)
    pair_point = np.repeat(np.arange(len(point_row)), per_row[point_row])
    offsets = np.arange(len(pair_point)) - np.repeat(np.cumsum(per_row[point_row]) - per_row[point_row],
                                                     per_row[point_row])
    item = indptr[:-1][point_row][pair_point] + offsets
    last = np.minimum(end[item], point_cut[pair_point])
    top = int(last.max(initial=0))
    running = np.concatenate([[0.0], np.cumsum(_discount(np.arange(1, top + 1)))])
    spread = np.where(start[item] <= last, running[np.maximum(last, 0)] - running[np.minimum(start[item] - 1, top)],
                      0.0)
    dcg = np.bincount(pair_point, weights=gains[item] / size[item] * spread, minlength=len(point_row))
    ratio = np.bincount(point_row, weights=dcg / point_idcg, minlength=n)
    points = np.bincount(point_row, minlength=n)
    known = (np.asarray(lists.n_relevant) > 0) & (n_ideal > 0)
    return np.where(known, ratio / np.maximum(points, 1), np.nan)



# --------------------------------------------------------------------------- DCG and nDCG at a setting
# The parameters the registry declares on dcg, dcg@k, ndcg and ndcg@k (README, Choosing metrics): the gain
# (linear g, or exponential 2^g - 1), the logarithm's base b of the discount 1/log_b(r + 1), and, for nDCG, ties
# averaged whatever --ties. ``Discounted`` is one such metric; the plain settings keep their own functions above
# (``dcg``, ``ndcg``, ``ndcg_exponential``, ``ndcg_tie_average``, ...), which it computes through the same code.


class Discounted:
    """DCG or nDCG, cut at k or not, at one setting of its gain (``"linear"``: g; ``"exp"``: 2^g - 1), its log base
    b > 1 and (``shared``) ties averaged: one callable per setting, equal and hashed by it, so the same metric
    whichever process builds it. ``column`` (its per-query column, ``k`` for the cut-off) names it in its docstring,
    whose first line is its definition. nDCG's value does not depend on b, which cancels in the ratio: it is
    computed at base 2, so equal to the base-2 nDCG to the last bit."""

    def __init__(self, column: str, normalised: bool, cut: bool, gain: str = "linear", base: float = 2.0,
                 shared: bool = False) -> None:
        base = float(base)
        if gain not in ("linear", "exp") or not (math.isfinite(base) and base > 1.0):
            raise ValueError(f"Discounted({column!r}, gain={gain!r}, base={base!r})")
        self.column, self.normalised, self.cut = column.replace("{k}", "k"), bool(normalised), bool(cut)
        self.gain, self.base, self.shared = gain, base, bool(shared)
        self.__doc__ = self._definition()

    def _definition(self) -> str:
        g, ideal = ("(2^g_i - 1)", "(2^g*_j - 1)") if self.gain == "exp" else ("g_i", "g*_j")
        log = "log2" if self.base == 2.0 else f"log_{number_text(self.base)}"
        cut = ", p <= k" if self.cut else ""
        if self.shared:
            dcg = f"sum_i ({g} / t_i) * sum_{{p = s_i..s_i+t_i-1{cut}}} 1/{log}(p + 1)"
        else:
            dcg = f"sum_{{r_i <= k}} {g} / {log}(r_i + 1)" if self.cut else f"sum_i {g} / {log}(r_i + 1)"
        lines = [f"{self.column} = {dcg}"]
        if self.normalised:
            lines[0] += f" / sum_{{j=1..{'min(R, k)' if self.cut else 'R'}}} {ideal} / {log}(j + 1)"
        details = ["gain " + ("2^g - 1 (Burges et al.)" if self.gain == "exp" else "the grade g"),
                   "grade >= 1 whatever --rel-level"]
        if self.shared:
            details.append("s_i, t_i: the first place and size of item i's group of equal scores (ties averaged)")
        if self.normalised and self.base != 2.0:
            details.append("the base cancels in the ratio (log_b x = log2 x / log2 b above and below): the base-2 "
                           "nDCG's value, computed at base 2, to the last bit")
        elif not self.normalised:
            details.append("not normalised; null where the query has no item of grade >= 1 (as dcg)")
        return lines[0] + "\n\n" + "; ".join(details) + "."

    def __call__(self, lists: RankLists, k: int | None = None) -> np.ndarray:
        exponential = self.gain == "exp"
        k = k if self.cut else None
        if self.normalised:   # the base cancels: nDCG at base 2
            return _tie_averaged(lists, k, exponential) if self.shared else _ndcg(lists, k, exponential)
        known = np.diff(lists.ideal_indptr)
        if self.shared:
            def values() -> np.ndarray:
                grades = _groups(lists)[4]
                return _known(known, _shared_dcg(lists, k, _exponential(grades) if exponential else grades,
                                                 self.base))
            return _tied(lists, values)
        gains = _exponential(lists.gains) if exponential else lists.gains
        return _known(known, _dcg(lists.gain_indptr, lists.gain_ranks, gains, k, self.base))

    @property
    def needs(self) -> tuple[str, ...]:
        """What its record needs of the lists (``Metric.needs``): the tie groups where it averages ties."""
        return ("tie_groups",) if self.shared else ()

    def tied(self) -> Discounted:
        """Its form under --ties average: the same setting with tied items sharing their gains."""
        return self if self.shared else Discounted(self.column, self.normalised, self.cut, self.gain, self.base, True)

    def _key(self) -> tuple:
        return self.column, self.normalised, self.cut, self.gain, self.base, self.shared

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Discounted) and other._key() == self._key()

    def __hash__(self) -> int:
        return hash(("Discounted", *self._key()))

    def __repr__(self) -> str:
        return (f"Discounted({self.column!r}, normalised={self.normalised}, cut={self.cut}, gain={self.gain!r}, "
                f"base={self.base!r}, shared={self.shared})")


def discounted(column: str, *, normalised: bool, cut: bool, gain: str = "linear", base: float = 2.0,
               ties: str = "run") -> Discounted:
    """DCG / nDCG at the parameters ``dcg(gain=exp, base=10)``, ``ndcg(ties=average)@k`` bind (``core.registry``):
    ``ties="average"`` shares tied items' gains whatever --ties."""
    return Discounted(column, normalised, cut, gain, base, ties == "average")


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


def geometric_mean(values: np.ndarray) -> float | None:
    """exp((1/n) * sum log max(v, 0.00001)): trec_eval's gm_map / gm_bpref over the values (correctly rounded sum)."""
    values = values[~np.isnan(values)]
    if not values.size:
        return None
    return math.exp(math.fsum(np.log(np.maximum(values, MIN_GEO_MEAN)).tolist()) / values.size)


def exact_sum(values: np.ndarray) -> float | None:
    """Correctly rounded sum (trec_eval's summary of its counts: num_rel, num_rel_ret)."""
    values = values[~np.isnan(values)]
    return math.fsum(values.tolist()) if values.size else None


#: a Metric's ``aggregate`` -> how the summary combines its per-query values
AGGREGATES = {"mean": exact_mean, "geometric": geometric_mean, "sum": exact_sum}


def summary_row(columns: dict[str, np.ndarray], n_relevant: np.ndarray, summaries: dict[str, str],
                outcome: np.ndarray | None = None, threshold: float | None = None,
                counted: np.ndarray | None = None, aggregates: dict[str, str] | None = None) -> dict:
    """One summary row over the given queries: ``summaries`` maps per-query columns to their summary names.

    Means are over the ``counted`` queries: those with R > 0, plus any R = 0
    query scored 0 under ``--empty-queries zero``. n_evaluated counts them and
    n_unknown the rest. The open-set figures always split on R > 0.
    ``aggregates``: per-query column -> ``geometric`` or ``sum`` where the
    summary is not the mean (``AGGREGATES``).
    """
    known = n_relevant > 0
    counted = known if counted is None else (np.asarray(counted, dtype=bool) | known)
    row: dict[str, float | int | None] = {"n_queries": int(len(n_relevant)), "n_evaluated": int(counted.sum()),
           "n_unknown": int((~counted).sum())}
    for name, summary in summaries.items():
        combine = AGGREGATES[(aggregates or {}).get(name, "mean")]
        row[summary] = combine(np.asarray(columns[name], dtype=np.float64)[counted])
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
