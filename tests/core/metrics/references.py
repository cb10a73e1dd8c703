"""Brute-force references of every registered metric, computed from a full sorted ranking.

Written the way a per-project evaluation script does it, not from evalcore's
rank lists: ``relevant`` is the 0/1 relevance of the whole ranking, best first
(``relevant[j]`` is rank j + 1), and ``n_relevant`` is R, which may exceed
``relevant.sum()`` when relevant items are missing from a precomputed list.
Each returns a Python number, or None where the metric is undefined (R = 0,
or a rank that does not exist).

``REFERENCES`` maps each registered metric's name (``core.registry``) to its
reference; ``test_common.py`` checks that every registered metric has one.
"""
from __future__ import annotations

import functools
import math

import numpy as np


def _hits(relevant) -> np.ndarray:
    """0-based positions of the relevant items in the ranking."""
    return np.flatnonzero(np.asarray(relevant, dtype=bool))


def first_rank(relevant, n_relevant, k=None):
    hits = _hits(relevant)
    return int(hits[0]) + 1 if n_relevant and hits.size else None


def last_rank(relevant, n_relevant, k=None):
    hits = _hits(relevant)
    return int(hits[-1]) + 1 if n_relevant and hits.size == n_relevant else None


def average_precision(relevant, n_relevant, k=None):
    """Precision at each relevant position, summed, over R (TREC's AP)."""
    if not n_relevant:
        return None
    rel = np.asarray(relevant, dtype=float)
    precision = np.cumsum(rel) / np.arange(1, len(rel) + 1)
    return float((precision * rel).sum() / n_relevant)


def average_precision_trapezoid(relevant, n_relevant, k=None):
    """Person_reID_baseline_pytorch's loop: the mean of the precisions just before and at each hit, over R."""
    if not n_relevant:
        return None
    total = 0.0
    for i, row in enumerate(_hits(relevant)):
        before = i / row if row else 1.0
        total += (before + (i + 1) / (row + 1)) / 2 / n_relevant
    return total


def inverse_negative_penalty(relevant, n_relevant, k=None):
    """Ye et al.: (relevant items up to the hardest one) / (its position); 0 when one is never ranked."""
    if not n_relevant:
        return None
    hits = _hits(relevant)
    if hits.size < n_relevant:
        return 0.0
    hardest = int(hits[-1])
    return float(np.asarray(relevant, dtype=int)[:hardest + 1].sum() / (hardest + 1))


def reciprocal_rank(relevant, n_relevant, k=None):
    if not n_relevant:
        return None
    hits = _hits(relevant)
    return 1.0 / (hits[0] + 1) if hits.size else 0.0


def r_precision(relevant, n_relevant, k=None):
    """The share of the top R that is relevant (trec_eval's Rprec)."""
    if not n_relevant:
        return None
    top = np.asarray(relevant, dtype=int)[:n_relevant]
    return float(top.sum() / n_relevant)


def average_precision_at(relevant, n_relevant, k):
    """GLDv2 (Kaggle) mAP@K term: sum of precision@j * rel(j) over the top K, over min(R, K)."""
    if not n_relevant:
        return None
    rel = np.zeros(k)
    top = np.asarray(relevant, dtype=float)[:k]
    rel[:len(top)] = top
    precision = np.cumsum(rel) / np.arange(1, k + 1)
    return float((precision * rel).sum() / min(n_relevant, k))


def hit_at(relevant, n_relevant, k):
    if not n_relevant:
        return None
    return 1.0 if np.asarray(relevant, dtype=bool)[:k].any() else 0.0


def recall_at(relevant, n_relevant, k):
    if not n_relevant:
        return None
    return float(np.asarray(relevant, dtype=int)[:k].sum() / n_relevant)


def precision_at(relevant, n_relevant, k):
    if not n_relevant:
        return None
    return float(np.asarray(relevant, dtype=int)[:k].sum() / k)


def _dcg(gains, k):
    return sum(g / math.log2(j + 2) for j, g in enumerate(list(gains)[:k]))


def ndcg_at(relevant, n_relevant, k):
    """DCG of the top k over the DCG of the ideal ranking (all R relevant items first), gains 0/1."""
    if not n_relevant:
        return None
    ideal = [1] * n_relevant
    return _dcg(np.asarray(relevant, dtype=int), k) / _dcg(ideal, k)


def ndcg(relevant, n_relevant, k=None):
    """DCG of the whole ranking over the DCG of all R relevant items first, gains 0/1."""
    return ndcg_at(relevant, n_relevant, max(len(relevant), n_relevant, 1))


def bpref(relevant, n_relevant, k=None):
    """Buckley and Voorhees' bpref as trec_eval sums it, every listed non-relevant item judged and the judged
    non-relevant pool at least R: each retrieved relevant item scores 1 - min(#non-relevant above, R) / R."""
    if not n_relevant:
        return None
    total, above = 0.0, 0
    for rel in np.asarray(relevant, dtype=bool):
        if rel:
            total += 1.0 - min(above, n_relevant) / n_relevant
        else:
            above += 1
    return total / n_relevant


def average_precision_cut(relevant, n_relevant, k):
    """trec_eval's map_cut_k: precision at each relevant rank within the top k, summed, over R."""
    if not n_relevant:
        return None
    top = np.asarray(relevant, dtype=int)[:k]
    precision = np.cumsum(top) / np.arange(1, len(top) + 1)
    return float((precision * top).sum() / n_relevant)


def reciprocal_rank_at(relevant, n_relevant, k):
    if not n_relevant:
        return None
    hits = _hits(relevant)
    return 1.0 / (hits[0] + 1) if hits.size and hits[0] < k else 0.0


def num_rel(relevant, n_relevant, k=None):
    return float(n_relevant) if n_relevant else None


def num_rel_ret(relevant, n_relevant, k=None):
    return float(np.asarray(relevant, dtype=int).sum()) if n_relevant else None


def gm_map(relevant, n_relevant, k=None):
    """trec_eval's gm_map term: AP floored at its MIN_GEO_MEAN, 0.00001."""
    ap = average_precision(relevant, n_relevant)
    return None if ap is None else max(ap, 0.00001)


def gm_bpref(relevant, n_relevant, k=None):
    value = bpref(relevant, n_relevant)
    return None if value is None else max(value, 0.00001)


def iprec_at_recall(level):
    """Interpolated precision at a recall level, from the precision-recall points of the whole ranking: the best
    precision at any position whose recall reaches the level, the level read as a count of relevant items rounded
    half up (trec_eval 10's lround(level * R)); 0 when no position reaches it."""
    def reference(relevant, n_relevant, k=None):
        if not n_relevant:
            return None
        need = math.floor(level * n_relevant + 0.5)
        hits = np.cumsum(np.asarray(relevant, dtype=int))
        precision = hits / np.arange(1, len(hits) + 1)
        reached = precision[hits >= need]
        return float(reached.max()) if reached.size else 0.0
    return reference


LEVELS = [i / 10 for i in range(11)]


def eleven_point_average(relevant, n_relevant, k=None):
    values = [iprec_at_recall(x)(relevant, n_relevant) for x in LEVELS]
    return None if values[0] is None else sum(values) / 11


def rprec_mult(multiple):
    """Precision at trec_eval's (long)(multiple * R + 0.9) places, missing places counting as not relevant."""
    def reference(relevant, n_relevant, k=None):
        if not n_relevant:
            return None
        cut = int(multiple * n_relevant + 0.9)
        return float(np.asarray(relevant, dtype=int)[:cut].sum() / cut)
    return reference


def relative_precision_at(relevant, n_relevant, k):
    """Relevant items in the top k over the most the top k can hold, min(R, k)."""
    if not n_relevant:
        return None
    return float(np.asarray(relevant, dtype=int)[:k].sum() / min(n_relevant, k))


def num_ret(relevant, n_relevant, k=None):
    """The ranking's length: defined with or without relevant items (trec_eval prints it for every query)."""
    return float(len(relevant))


def _set(relevant, n_relevant):
    """(retrieved, relevant retrieved) of the whole ranking as a set."""
    return len(relevant), int(np.asarray(relevant, dtype=int).sum())


def set_p(relevant, n_relevant, k=None):
    if not n_relevant:
        return None
    n, hits = _set(relevant, n_relevant)
    return hits / n if n else 0.0


def set_recall(relevant, n_relevant, k=None):
    if not n_relevant:
        return None
    return _set(relevant, n_relevant)[1] / n_relevant


def set_f(relevant, n_relevant, k=None):
    """The harmonic mean of set precision and set recall (F1)."""
    if not n_relevant:
        return None
    p, r = set_p(relevant, n_relevant), set_recall(relevant, n_relevant)
    return 2 * p * r / (p + r) if p + r else 0.0


def set_map(relevant, n_relevant, k=None):
    if not n_relevant:
        return None
    return set_p(relevant, n_relevant) * set_recall(relevant, n_relevant)


def set_relative_p(relevant, n_relevant, k=None):
    """Relevant retrieved over the most the set can hold, min(retrieved, R)."""
    if not n_relevant:
        return None
    n, hits = _set(relevant, n_relevant)
    return hits / min(n, n_relevant) if n else 0.0


def utility(relevant, n_relevant, k=None):
    """+1 for each relevant item retrieved, -1 for each other one."""
    n, hits = _set(relevant, n_relevant)
    return float(hits - (n - hits))


def num_nonrel_judged_ret(relevant, n_relevant, k=None):
    """The ranking's non-relevant items, every one judged here (as bpref's reference takes them)."""
    n, hits = _set(relevant, n_relevant)
    return float(n - hits)


def ndcg_exp_at(relevant, n_relevant, k):
    """Burges' gain 2^g - 1: with 0/1 grades the gains are 0/1 again, so the binary nDCG@k."""
    if not n_relevant:
        return None
    gains = [2 ** int(g) - 1 for g in np.asarray(relevant, dtype=int)]
    return _dcg(gains, k) / _dcg([2 ** 1 - 1] * n_relevant, k)


def ndcg_exp(relevant, n_relevant, k=None):
    return ndcg_exp_at(relevant, n_relevant, max(len(relevant), n_relevant, 1))


def judged_at(relevant, n_relevant, k):
    """The share of the top k (or of the whole list when shorter) with a judgement: here every listed item."""
    top = np.asarray(relevant)[:k]
    return 1.0 if top.size else 0.0


def unjudged_at(relevant, n_relevant, k):
    """trec_eval's unj: the share of k places (a short list filled up with judged ones) holding an unjudged item:
    every listed item is judged here, so 0."""
    return 0.0


def rbp(relevant, n_relevant, k=None, p=0.9):
    """Moffat and Zobel: a user goes on to the next item with probability p; (1 - p) sum of rel_i p^(i-1)."""
    if not n_relevant:
        return None
    return (1 - p) * sum(p ** i for i, rel in enumerate(np.asarray(relevant, dtype=bool)) if rel)


def rbp_resid(relevant, n_relevant, k=None, p=0.9):
    """Moffat and Zobel's residual: the weight of unjudged places and of everything below the list; every listed
    item is judged here, so p^n."""
    return p ** len(relevant)


def err_at(relevant, n_relevant, k, top_grade=4):
    """Chapelle et al.'s cascade, walked down the top k as gdeval's err() does: stop at item i with probability
    (2^g - 1) / 2^top_grade (g = 1 for a relevant item here), scoring 1/i."""
    if not n_relevant:
        return None
    score, decay = 0.0, 1.0
    for i, rel in enumerate(np.asarray(relevant, dtype=int)[:k]):
        stop = (2 ** int(rel) - 1) / 2 ** top_grade
        score += stop * decay / (i + 1)
        decay *= 1 - stop
    return score


# --------------------------------------------------------------------------- trec_eval's infAP, binG, G, ndcg_rel, Rndcg
# Graded and with trec_eval's pool: ``ranking`` holds each retrieved document's qrels grade, best first (None: not
# in the qrels; a negative grade: in the pool, not judged), ``judged`` every grade the qrels give the query.
# Written from the measures' definitions (trec_eval's m_infap.c, m_binG.c, m_G.c, m_ndcg_rel.c, m_Rndcg.c
# describe them), each sum taken afresh at every place rather than run down the list.

INFAP_EPSILON = 0.00001


def trec_infap(ranking, judged, level=1):
    """Yilmaz and Aslam's inferred AP: at the i-th relevant document, at 0-based place j > 0, 1/(j+1) plus
    j/(j+1) times the share of the j places above that are in the pool times the smoothed share of the judged
    ones above that are relevant; 1 at place 0; summed over R."""
    n_rel = sum(1 for g in judged if g >= level)
    if not n_rel:
        return None
    total = 0.0
    for j, grade in enumerate(ranking):
        if grade is None or grade < level:
            continue
        above = ranking[:j]
        rel = sum(1 for g in above if g is not None and g >= level)
        nonrel = sum(1 for g in above if g is not None and 0 <= g < level)
        pooled = sum(1 for g in above if g is not None)
        total += 1.0 if j == 0 else \
            1 / (j + 1) + j / (j + 1) * (pooled / j) * ((rel + INFAP_EPSILON) / (rel + nonrel + 2 * INFAP_EPSILON))
    return total / n_rel


def trec_bing(ranking, judged, level=1):
    """Each relevant document scores 1 / log2(2 + the documents above it that are not relevant); over R."""
    n_rel = sum(1 for g in judged if g >= level)
    if not n_rel:
        return None
    total = 0.0
    for j, grade in enumerate(ranking):
        if grade is not None and grade >= level:
            total += 1 / math.log2(2 + sum(1 for g in ranking[:j] if g is None or g < level))
    return total / n_rel


def _gain(grade):
    return max(grade, 0) if grade is not None else 0


def _ideal(judged):
    return sorted((g for g in judged if g > 0), reverse=True)


def trec_g(ranking, judged, level=1):
    """G: each document's gain over log2(2 + cost - gain so far), cost the ideal gain so far with every place
    worth at least 1; over the ideal's total gain. None without a document of grade >= 1."""
    ideal = _ideal(judged)
    if not ideal:
        return None
    total = 0.0
    for j, grade in enumerate(ranking):
        if _gain(grade) > 0:
            cost = sum(max(ideal[p] if p < len(ideal) else 0, 1) for p in range(j + 1))
            so_far = sum(_gain(g) for g in ranking[:j + 1])
            total += _gain(grade) / math.log2(2 + cost - so_far)
    return total / sum(ideal)


def _dcg_to(gains, places):
    return sum(g / math.log2(p + 2) for p, g in enumerate(gains[:places]))


def trec_ndcg_rel(ranking, judged, level=1):
    """nDCG at each relevant (grade >= 1) document's rank, averaged over the R' of them, each one not retrieved
    taking the nDCG of the whole list."""
    ideal = _ideal(judged)
    if not ideal:
        return None
    gains = [_gain(g) for g in ranking]
    at = [_dcg_to(gains, j + 1) / _dcg_to(ideal, j + 1) for j, g in enumerate(gains) if g > 0]
    whole = _dcg_to(gains, len(gains)) / _dcg_to(ideal, len(ideal))
    return (sum(at) + (len(ideal) - len(at)) * whole) / len(ideal)


def trec_rndcg(ranking, judged, level=1):
    """nDCG at the R of each grade (the documents of that grade or higher), and at the list's end when it is
    two or more places past R' (trec_eval's loop takes it there only), averaged. None when R = 0 at level."""
    ideal = _ideal(judged)
    if not sum(1 for g in judged if g >= level) or not ideal:
        return None
    cuts = sorted({sum(1 for g in ideal if g >= grade) for grade in set(ideal)})
    if len(ranking) >= len(ideal) + 2:
        cuts.append(len(ranking))
    gains = [_gain(g) for g in ranking]
    return sum(_dcg_to(gains, c) / _dcg_to(ideal, c) for c in cuts) / len(cuts)


def dcg_at(relevant, n_relevant, k):
    """The DCG of the top k, gains 0/1, not divided by the ideal's."""
    return _dcg(np.asarray(relevant, dtype=int), k) if n_relevant else None


def dcg(relevant, n_relevant, k=None):
    return dcg_at(relevant, n_relevant, len(relevant))


def _as_trec(reference):
    """The binary reference: every listed document judged (relevant 1, else 0), R relevant in the qrels."""
    def binary(relevant, n_relevant, k=None):
        listed = [int(x) for x in np.asarray(relevant, dtype=bool)]
        return reference(listed, [1] * int(n_relevant) + [0] * (len(listed) - sum(listed)))
    return binary


#: registered metric name -> brute-force reference (relevant, n_relevant, k)
REFERENCES = {
    "first_rank": first_rank,
    "last_rank": last_rank,
    "map": average_precision,
    "map_trapz": average_precision_trapezoid,
    "minp": inverse_negative_penalty,
    "mrr": reciprocal_rank,
    "rprec": r_precision,
    "map@k": average_precision_at,
    "hit@k": hit_at,
    "recall@k": recall_at,
    "precision@k": precision_at,
    "ndcg@k": ndcg_at,
    "ndcg": ndcg,
    "bpref": bpref,
    "map_cut@k": average_precision_cut,
    "mrr@k": reciprocal_rank_at,
    "num_rel": num_rel,
    "num_rel_ret": num_rel_ret,
    "gm_map": gm_map,
    "gm_bpref": gm_bpref,
    **{f"iprec_at_recall_{x:.2f}": iprec_at_recall(x) for x in LEVELS},
    "11pt_avg": eleven_point_average,
    **{f"rprec_mult_{x:.2f}": rprec_mult(x) for x in [i / 5 for i in range(1, 11)]},
    "relative_p@k": relative_precision_at,
    "num_ret": num_ret,
    "set_p": set_p,
    "set_recall": set_recall,
    "set_f": set_f,
    "set_map": set_map,
    "set_relative_p": set_relative_p,
    "utility": utility,
    "num_nonrel_judged_ret": num_nonrel_judged_ret,
    "ndcg_exp": ndcg_exp,
    "ndcg_exp@k": ndcg_exp_at,
    "judged@k": judged_at,
    "unj@k": unjudged_at,
    "rbp": rbp,
    "err@k": err_at,
    "ndcg_avg": ndcg,          # a 0/1 ranking shows no ties: the tie-averaged nDCG is the nDCG
    "ndcg_avg@k": ndcg_at,
    "rbp_resid": rbp_resid,
    **{f"rbp_{p:.2f}": functools.partial(rbp, p=p) for p in (0.5, 0.8, 0.95, 0.98)},
    **{f"rbp_resid_{p:.2f}": functools.partial(rbp_resid, p=p) for p in (0.5, 0.8, 0.95, 0.98)},
    "infap": _as_trec(trec_infap),
    "bing": _as_trec(trec_bing),
    "g": _as_trec(trec_g),
    "ndcg_rel": _as_trec(trec_ndcg_rel),
    "rndcg": _as_trec(trec_rndcg),
    "dcg": dcg,
    "dcg@k": dcg_at,
}
#: (lowest, highest) of a float metric that is not a share in [0, 1]: the counts
RANGES = {"num_rel": (0.0, math.inf), "num_rel_ret": (0.0, math.inf), "num_ret": (0.0, math.inf),
          "num_nonrel_judged_ret": (0.0, math.inf), "dcg": (0.0, math.inf), "dcg@k": (0.0, math.inf),
          "utility": (-math.inf, math.inf)}
