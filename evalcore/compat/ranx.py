"""ranx's ``evaluate``, computed by evalcore: ``from evalcore.compat.ranx import evaluate``.

Same signature and return value as ``ranx.evaluate(qrels, run, metrics,
return_mean=True, return_std=False, ...)``: one metric -> its mean (float),
several -> ``{metric: mean}``; ``return_mean=False`` -> each metric's
per-query values (numpy, in the qrels' query order); ``return_std=True`` ->
``{"mean": ..., "std": ...}`` each. ``qrels``/``run``: ranx ``Qrels``/``Run``
(any object with ``to_dict()``) or ``{qid: {docid: value}}``. Metric names
are ranx's: ``hits``, ``hit_rate``, ``precision``, ``recall``, ``f1``,
``r-precision``, ``mrr``, ``map``, ``ndcg``, ``ndcg_burges``, each with
``@k`` (no ``@k``: the whole run) and ``-lL`` (relevant from grade L).

ranx's definitions, which are trec_eval's where both have the measure
(``precision@k`` = P_k, hits over k also past the run's end; ``recall@k``,
``map@k`` = map_cut_k with the number of relevant documents as denominator,
``mrr@k`` 1/rank of the first relevant document within k, ``hit_rate@k`` =
success_k, ``r-precision`` = Rprec, ``ndcg@k`` = ndcg_cut_k with the grade
as gain, ``ndcg_burges`` gain 2^grade - 1); every query of the qrels counts
in the mean, one with no relevant document (or no results) as 0; a
negative grade is never relevant. What differs: equal scores are ranked by
document id, descending (trec_eval's order), where ranx leaves them to an
unstable sort of hashed ids (an order that may change from process to
process); ``ndcg`` with ``-lL`` above 1 and ranx's ``bpref`` (whose
judged non-relevant count takes in negative grades), ``dcg`` and ``rbp``
are refused, naming the metric; a NaN or infinite score is an error.
``threads``, ``save_results_in_run`` have no effect.
"""
from __future__ import annotations

import re
import warnings
from collections.abc import Mapping

import numpy as np

from evalcore import trec_api
from evalcore.errors import EvalcoreWarning, OptionError, input_error
from evalcore.io import trec_tables

__all__ = ["evaluate"]

#: ranx metric -> the trec_eval measures its per-query value is made of (``{k}``: the metric's cut-off)
_NEEDS = {
    "hits": ("P.{k}",), "hit_rate": ("success.{k}",), "precision": ("P.{k}",), "recall": ("recall.{k}",),
    "f1": ("P.{k}", "recall.{k}"), "r-precision": ("Rprec",), "mrr": ("recip_rank",), "map": ("map_cut.{k}",),
    "ndcg": ("ndcg_cut.{k}",), "ndcg_burges": ("ndcg_cut.{k}",),
}
#: the same without a cut-off: the whole run
_NEEDS_ALL = {
    "hits": ("num_rel_ret",), "hit_rate": ("num_rel_ret",), "precision": ("num_rel_ret", "num_ret"),
    "recall": ("num_rel_ret", "num_rel"), "f1": ("num_rel_ret", "num_ret", "num_rel"), "r-precision": ("Rprec",),
    "mrr": ("recip_rank",), "map": ("map",), "ndcg": ("ndcg",), "ndcg_burges": ("ndcg",),
}
_METRIC = re.compile(r"(?P<name>[a-z0-9_-]+?)(?:@(?P<k>[0-9]+))?(?:-l(?P<level>[0-9]+))?")
#: the largest grade ndcg_burges takes: its gain 2^g - 1 is held as a grade (at most 127)
BURGES_MAX_GRADE = 6


def parse_metric(metric) -> tuple[str, int, int]:
    """A ranx metric name as (name, k, level); k = 0: the whole run."""
    if not isinstance(metric, str):
        raise OptionError("metrics", f"{metric!r} is not a metric name")
    found = _METRIC.fullmatch(metric.strip())
    name = found.group("name") if found else metric
    if not found or name not in _NEEDS:
        why = " (ranx's, not computed by evalcore: its bpref counts negative grades as judged non-relevant; " \
              "evalcore.trec has trec_eval's)" if name in ("bpref", "dcg", "dcg_burges", "rbp") else ""
        raise OptionError("metrics", f"{metric!r} is not supported{why} (supported: {', '.join(_NEEDS)}, "
                         "each with @k and -lL)")
    k, level = int(found.group("k") or 0), int(found.group("level") or 1)
    if found.group("k") is not None and k == 0:
        raise OptionError("metrics", f"{metric!r}: k must be at least 1")
    if not 1 <= level <= trec_api.MAX_CUTOFF or k > trec_api.MAX_CUTOFF:
        raise OptionError("metrics", f"{metric!r}: k and the level must lie in 0..{trec_api.MAX_CUTOFF}")
    if name in ("ndcg", "ndcg_burges") and level > 1:
        raise OptionError("metrics", f"{metric!r}: ranx's nDCG with a relevance level counts only grades >= L as "
                         "gains, which evalcore does not compute (trec_eval's ignores the level)")
    return name, k, level


def evaluate(qrels, run, metrics, return_mean: bool = True, return_std: bool = False, threads: int = 0,
             save_results_in_run: bool = True, make_comparable: bool = False):
    """ranx's ``evaluate``: every query of ``qrels`` (which ``run`` must hold, unless ``make_comparable``)."""
    judged = _mapping(qrels, "qrels")
    ranked = _mapping(run, "run")
    if make_comparable:   # ranx: empty results for the queries the run lacks, the others dropped
        ranked = {q: ranked.get(q, {}) for q in judged}
    elif set(judged) != set(ranked):
        raise OptionError("run", "Qrels and Run query ids do not match. Pass `make_comparable=True` to add empty "
                         "results for queries missing from the run and remove those not appearing in qrels.")
    names = [metrics] if isinstance(metrics, str) else list(metrics)
    if not names:
        raise OptionError("metrics", "give at least one metric name")
    parsed = {m: parse_metric(m) for m in names}
    order = list(judged)
    # one evaluation for every metric of a relevance level (and gain): ranx's metrics are its measures' columns
    groups: dict[tuple[int, bool], list[str]] = {}
    for name, k, level in parsed.values():
        groups.setdefault((level, name == "ndcg_burges"), []).extend(_needs(name, k))
    values = {key: _trec_values(_burges(judged) if burges else judged, ranked, list(dict.fromkeys(needs)), key[0])
              for key, needs in groups.items() for burges in [key[1]]}
    scores = {metric: _per_query(values[(level, name == "ndcg_burges")], order, name, k)
              for metric, (name, k, level) in parsed.items()}
    out: dict
    if not return_mean:
        out = scores
    elif return_std:
        out = {m: {"mean": float(np.mean(v)), "std": float(np.std(v))} for m, v in scores.items()}
    else:
        out = {m: float(np.mean(v)) for m, v in scores.items()}
    return out[names[0]] if len(names) == 1 else out


def _mapping(value, name: str) -> Mapping:
    found = trec_tables.as_mapping(value, name)
    if not isinstance(found, Mapping):
        raise input_error(name, f"give a ranx {'Qrels' if name == 'qrels' else 'Run'} or a mapping "
                         "{query id: {document id: value}}")
    return found


def _needs(name: str, k: int) -> list[str]:
    return [m.format(k=k) for m in (_NEEDS if k else _NEEDS_ALL)[name]]


def _burges(judged: Mapping) -> dict:
    """The qrels with each grade g >= 1 replaced by ndcg_burges' gain 2^g - 1 (evalcore's nDCG: gain = grade)."""
    return {q: {d: _burges_gain(g, q, d) for d, g in docs.items()} for q, docs in judged.items()}


def _per_query(values: Mapping, order: list, name: str, k: int) -> np.ndarray:
    """One ranx metric's value for each query of ``order`` (every judged query, those without results 0)."""
    needs = _needs(name, k)
    row = [values.get(q) for q in order]
    field = [m.replace(".", "_") for m in needs]

    def column(i: int) -> np.ndarray:
        return np.array([0.0 if r is None else float(r[field[i]]) for r in row])

    if name in ("hits", "precision", "recall", "hit_rate", "r-precision", "map", "ndcg", "ndcg_burges") and k:
        first = column(0)
        return np.round(first * k) if name == "hits" else first
    if name in ("r-precision", "map", "ndcg", "ndcg_burges", "hits"):
        return column(0)
    if name == "mrr":   # 1/r_1, cut at k: r_1 = 1/rr exactly for any rank a float can tell apart
        rr = column(0)
        return np.where((rr > 0) & (np.round(1 / np.where(rr > 0, rr, 1)) <= k), rr, 0.0) if k else rr
    if name == "hit_rate":
        return (column(0) > 0).astype(np.float64)
    if name == "precision":   # hits over the run's length (0 for an empty run)
        return _ratio(column(0), column(1))
    if name == "recall":
        return _ratio(column(0), column(1))
    # f1: 2PR / (P + R), 0 when both are 0
    if k:
        p, r = column(0), column(1)
    else:
        p, r = _ratio(column(0), column(1)), _ratio(column(0), column(2))
    return _ratio(2 * p * r, p + r)


def _ratio(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.divide(a, b, out=np.zeros_like(a, dtype=np.float64), where=b > 0)


def _burges_gain(grade, qid, docid):
    if isinstance(grade, (int, np.integer)) and not isinstance(grade, bool) and grade > BURGES_MAX_GRADE:
        raise OptionError("qrels", f"grade {grade} of query {qid!r}, document {docid!r} is above {BURGES_MAX_GRADE}, "
                         "the most ndcg_burges takes (its gain 2^grade - 1 is held as a grade of at most 127)")
    return 2 ** grade - 1 if isinstance(grade, (int, np.integer)) and grade > 0 else grade


def _trec_values(judged: Mapping, ranked: Mapping, measures: list[str], level: int) -> dict:
    """{qid: {trec_eval measure: value}} for every judged query (-c: those without results too)."""
    judged = {q: docs for q, docs in judged.items() if docs}
    if not judged:
        return {}
    if not any(ranked.get(q) for q in judged):   # nothing retrieved: the counts alone are not all 0
        return {q: {m.replace(".", "_"): (sum(1 for g in docs.values() if g >= level) if m == "num_rel" else 0.0)
                    for m in measures} for q, docs in judged.items()}
    with warnings.catch_warnings():   # ranx says nothing of the queries it leaves out: nor does this
        warnings.simplefilter("ignore", EvalcoreWarning)
        result = trec_api.trec(judged, {q: ranked[q] for q in judged if ranked.get(q)}, measures, complete=True,
                               rel_level=level)
    return result.per_query
