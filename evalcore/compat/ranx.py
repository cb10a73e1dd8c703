"""ranx's ``evaluate``, computed by evalcore: ``from evalcore.compat.ranx import evaluate``.

Same signature and return value as ``ranx.evaluate(qrels, run, metrics,
return_mean=True, return_std=False, ...)``: one metric -> its mean (float),
several -> ``{metric: mean}``; ``return_mean=False`` -> each metric's
per-query values (numpy, in the qrels' query order); ``return_std=True`` ->
``{"mean": ..., "std": ...}`` each. ``qrels``/``run``: ranx ``Qrels``/``Run``
(any object with ``to_dict()``) or ``{qid: {docid: value}}``. Metric names
are ranx's: ``hits``, ``hit_rate``, ``precision``, ``recall``, ``f1``,
``r-precision``, ``mrr``, ``map``, ``ndcg``, ``ndcg_burges``, ``dcg``,
``dcg_burges``, ``bpref``, each with ``@k`` (no ``@k`` or ``@0``: the whole
run; bpref ignores k, as ranx's does) and ``-lL`` (relevant from grade L,
0 included); ``rbp.P`` or ``rbp@P`` (persistence 0.P: ``rbp.95`` is 0.95),
with ``-lL``.

ranx's definitions, which are trec_eval's where both have the measure
(``precision@k`` = P_k, hits over k also past the run's end; ``recall@k``,
``map@k`` = map_cut_k with the number of relevant documents as denominator,
``mrr@k`` 1/rank of the first relevant document within k, ``hit_rate@k`` =
success_k, ``r-precision`` = Rprec); every query of the qrels counts in the
mean, one with no relevant document (or no results) as 0; a grade below L
(negative ones too) is never relevant and, for the metrics with gains,
gains nothing:

- ``dcg@k`` = sum_{i <= k} g_i / log2(i + 1), ``ndcg@k`` = dcg@k / the
  ideal's (the grades >= L, highest first), g = the grade (Järvelin) or
  2^grade - 1 (``_burges``): evalcore's dcg and nDCG (trec_eval's ndcg_cut)
  on the qrels with the grades below L set to 0;
- ``rbp.P`` = (1 - p) sum_i g_i p^(i-1) over the whole run, g the grade
  itself (not binary, not scaled to [0, 1]): evalcore's rbp (trec_eval's
  rbp.p=, gains g / g_max) times the query's highest grade g_max;
- ``bpref`` = (1/R) sum over retrieved relevant d of (1 - min(n_d, R) /
  min(R, N)), N the judged documents graded below L (negative grades
  included, where trec_eval takes them as unjudged), n_d those ranked above
  d: evalcore's bpref (trec_eval's) on the qrels with those grades set to
  0. NaN where ranx's is: a query with N = 0 and a relevant document
  retrieved (ranx divides 0 by min(R, N) = 0).

What differs: equal scores are ranked by document id, descending
(trec_eval's order), where ranx leaves them to an unstable sort of hashed
ids (an order that may change from process to process); ranx's bpref
stops at a query with no relevant document (a division by zero in its
loop), leaving that query and the next ones of its thread's share at 0,
where evalcore gives each query its own value (that one 0); ``_burges``
takes grades up to 6; a NaN or infinite score is an error. ``threads``,
``save_results_in_run`` have no effect.
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

#: ranx metric -> the measures its per-query value is made of (``{k}``: the metric's cut-off, ``{p}``: rbp's
#: persistence): trec_eval's, and ``dcg.{k}``, evalcore's dcg@k (not a trec_eval measure)
_NEEDS = {
    "hits": ("P.{k}",), "hit_rate": ("success.{k}",), "precision": ("P.{k}",), "recall": ("recall.{k}",),
    "f1": ("P.{k}", "recall.{k}"), "r-precision": ("Rprec",), "mrr": ("recip_rank",), "map": ("map_cut.{k}",),
    "ndcg": ("ndcg_cut.{k}",), "ndcg_burges": ("ndcg_cut.{k}",), "dcg": ("dcg.{k}",), "dcg_burges": ("dcg.{k}",),
    "bpref": ("bpref", "num_rel_ret"), "rbp": ("rbp.p={p}",),
}
#: the same without a cut-off: the whole run
_NEEDS_ALL = {
    **_NEEDS, "hits": ("num_rel_ret",), "hit_rate": ("num_rel_ret",), "precision": ("num_rel_ret", "num_ret"),
    "recall": ("num_rel_ret", "num_rel"), "f1": ("num_rel_ret", "num_ret", "num_rel"), "map": ("map",),
    "ndcg": ("ndcg",), "ndcg_burges": ("ndcg",), "dcg": ("dcg",), "dcg_burges": ("dcg",),
}
#: the metrics whose documents gain their grade (a grade below L, or 0, gains nothing: -l0 is -l1 for them)
_GAINS = ("ndcg", "ndcg_burges", "dcg", "dcg_burges", "rbp")
_METRIC = re.compile(r"(?P<name>[a-z0-9_-]+?)(?:@(?P<k>[0-9]+))?(?:-l(?P<level>[0-9]+))?")
#: ranx's rbp: the persistence's decimals after "." or "@" (ranx reads "0." + them)
_RBP = re.compile(r"rbp[.@](?P<p>[0-9]+)(?:-l(?P<level>[0-9]+))?")
#: the largest grade ndcg_burges takes: its gain 2^g - 1 is held as a grade (at most 127)
BURGES_MAX_GRADE = 6


def parse_metric(metric) -> tuple[str, int | float, int]:
    """A ranx metric name as (name, k, level); k = 0: the whole run; rbp: (rbp, p, level)."""
    if not isinstance(metric, str):
        raise OptionError("metrics", f"{metric!r} is not a metric name")
    text = metric.strip()
    if "rbp" in text:   # ranx's rule: rbp needs its persistence
        rbp = _RBP.fullmatch(text)
        p = float(f"0.{rbp.group('p')}") if rbp else 0.0
        if not 0 < p < 1:
            raise OptionError("metrics", f"{metric!r}: rbp is spelt with its persistence p (0 < p < 1), as ranx "
                              "spells it: rbp.95 or rbp@95 (p = 0.95), -lL after it")
        return "rbp", p, int(rbp.group("level") or 1) if rbp else 1
    found = _METRIC.fullmatch(text)
    name = found.group("name") if found else metric
    if not found or name not in _NEEDS:
        hint = " (ranx spells it r-precision)" if name in ("r_precision", "rprec") else ""
        raise OptionError("metrics", f"{metric!r} is not supported{hint} (supported: {', '.join(_NEEDS)}, "
                         "each with @k and -lL; rbp as rbp.95)")
    k, level = int(found.group("k") or 0), int(found.group("level") or 1)
    if k > trec_api.MAX_CUTOFF:
        raise OptionError("metrics", f"{metric!r}: k must lie in 0..{trec_api.MAX_CUTOFF}")
    return name, (0 if name == "bpref" else k), level


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
        groups.setdefault(_group(name, level), []).extend(_needs(name, k))
    values = {key: _values(_graded(judged, *key), ranked, list(dict.fromkeys(needs))) for key, needs in groups.items()}
    scores = {metric: _per_query(values[_group(name, level)], order, name, k)
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


def _group(name: str, level: int) -> tuple[int, bool]:
    """(relevance level, Burges' gain) of the evaluation a metric is read from; a grade 0 gains nothing, so the
    metrics with gains read -l0 from -l1's."""
    return (max(level, 1) if name in _GAINS else level), name in ("ndcg_burges", "dcg_burges")


def _needs(name: str, k: int | float) -> list[str]:
    return [m.format(k=k, p=k) for m in (_NEEDS if k else _NEEDS_ALL)[name]]


def _key(measure: str) -> str:
    """Where a measure's value lies in a query's row: trec_eval's printed name (``P_5``, ``rbp_p=0.95``)."""
    return measure.replace(".", "_", 1)


def _graded(judged: Mapping, level: int, burges: bool) -> dict:
    """The qrels as ranx grades them at level L, for evalcore at level 1: each grade g >= L kept (L = 0: 1), any
    other 0 (judged, not relevant, no gain); ``burges``: g >= 1 replaced by the gain 2^g - 1."""
    return {q: {d: _grade(g, level, burges, q, d) for d, g in docs.items()} for q, docs in judged.items()}


def _grade(grade, level: int, burges: bool, qid, docid):
    if isinstance(grade, (float, np.floating)) and float(grade).is_integer():
        grade = int(grade)
    if not isinstance(grade, (int, np.integer)):
        return grade   # not a grade: evalcore's error names it
    if grade < level:
        return 0
    if level == 0:
        return 1
    if burges and grade > BURGES_MAX_GRADE:
        raise OptionError("qrels", f"grade {grade} of query {qid!r}, document {docid!r} is above {BURGES_MAX_GRADE}, "
                         "the most ndcg_burges takes (its gain 2^grade - 1 is held as a grade of at most 127)")
    return 2 ** int(grade) - 1 if burges else int(grade)


def _per_query(values: Mapping, order: list, name: str, k: int | float) -> np.ndarray:
    """One ranx metric's value for each query of ``order`` (every judged query, those without results 0)."""
    needs = _needs(name, k)
    row = [values.get(q) for q in order]
    field = [_key(m) for m in needs]

    def column(i: int | str) -> np.ndarray:
        key = field[i] if isinstance(i, int) else i
        return np.array([0.0 if r is None else float(r[key]) for r in row])

    if name == "rbp":   # evalcore's gains are g / g_max, ranx's g
        return column(0) * column(_TOP)
    if name == "bpref":   # ranx's 0 / min(R, N) where N = 0: NaN once a relevant document is retrieved
        return np.where((column(_NONREL) == 0) & (column(1) > 0), np.nan, column(0))
    if name in ("hits", "precision", "recall", "hit_rate", "r-precision", "map", "ndcg", "ndcg_burges") and k:
        first = column(0)
        return np.round(first * k) if name == "hits" else first
    if name in ("r-precision", "map", "ndcg", "ndcg_burges", "hits", "dcg", "dcg_burges"):
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


#: a query's row also holds its highest grade (rbp's g_max, at least 1) and its judged non-relevant documents
_TOP, _NONREL = "_top", "_nonrel"


def _values(judged: Mapping, ranked: Mapping, measures: list[str]) -> dict:
    """{qid: {measure's key: value}} for every judged query (-c: those without results too), at level 1; with
    each query's ``_TOP`` and ``_NONREL``."""
    judged = {q: docs for q, docs in judged.items() if docs}
    if not judged:
        return {}
    own = [m for m in measures if m.startswith("dcg")]   # evalcore's metrics, not trec_eval's measures
    trec = [m for m in measures if m not in own]
    if not any(ranked.get(q) for q in judged):   # nothing retrieved: the counts alone are not all 0
        rows = {q: {_key(m): (sum(1 for g in docs.values() if _relevant(g)) if m == "num_rel" else 0.0)
                    for m in measures} for q, docs in judged.items()}
    else:
        rows = _evaluated(judged, {q: ranked[q] for q in judged if ranked.get(q)}, trec, own)
    for q, docs in judged.items():
        grades = [int(g) for g in docs.values() if isinstance(g, (int, np.integer))]
        rows[q][_TOP] = max([1, *grades])
        rows[q][_NONREL] = sum(1 for g in grades if g == 0)
    return rows


def _relevant(grade) -> bool:
    return isinstance(grade, (int, np.integer)) and bool(grade >= 1)


def _evaluated(judged: Mapping, ranked: Mapping, trec: list[str], own: list[str]) -> dict:
    """trec_eval's measures (``evalcore.trec``'s evaluation, -c) and evalcore's ``dcg.{k}``/``dcg`` in one run
    of the engine, keyed by ``_key``."""
    import zarr

    from evalcore import api
    from evalcore.io import dataset

    chosen = trec_api.parse_measures(trec or ["num_ret"])
    metrics, ks = trec_api.engine_metrics(chosen)
    extra = {m: (f"dcg@{m[4:]}", f"dcg_at_{m[4:]}") if "." in m else ("dcg", "dcg") for m in own}
    ks = sorted({*ks, *(int(m[4:]) for m in own if "." in m)})
    arrays, attrs = trec_tables.trec_arrays(judged, ranked, complete=True)
    attrs.pop(trec_tables.WARNINGS, None)   # ranx says nothing of the queries it leaves out: nor does this
    group = dataset.write_dataset(zarr.storage.MemoryStore(), arrays, attrs,
                                  chunk_rows=max(1, *(a.shape[0] for a in arrays.values())))
    with warnings.catch_warnings(), api.parameter_names(False):
        warnings.simplefilter("ignore", EvalcoreWarning)
        result = api.evaluate(group, protocol="qrels", metrics=[*metrics, *(e[0] for e in extra.values())],
                              ks=ks or (1,), max_rank=max([*ks, 1]), empty_queries="zero", rel_level=1)
    rows, _ = trec_api.trec_values(chosen, result, arrays, complete=True)
    table = result.per_query
    for m, (_, column) in extra.items():   # null where no document is relevant: 0, as ranx's
        own_values = np.nan_to_num(np.asarray(table.column(column).to_numpy(zero_copy_only=False), dtype=np.float64))
        for row, value in zip(rows.values(), own_values.tolist()):
            row[_key(m)] = value
    return rows
