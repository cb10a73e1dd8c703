"""pytrec_eval's ``RelevanceEvaluator``, computed by evalcore: ``from evalcore.compat import pytrec_eval``.

Same signature and return value as pytrec_eval (``pytrec-eval-terrier``):
``RelevanceEvaluator(query_relevance, measures, relevance_level=1,
judged_docs_only_flag=False).evaluate(scores)`` returns ``{qid: {measure:
value}}`` with pytrec_eval's measure names (``P_5``, ``ndcg_cut_10``), every
value a float, and the same rules, which are trec_eval's: equal scores ranked
by docno descending, a negative grade "in the pool, not judged", a judged
query with no relevant document scoring 0. As in pytrec_eval, the queries
evaluated are those judged and present in ``scores``, also with no results
(``{"q2": {}}`` scores 0); per query ``num_q`` is 1 and ``gm_map`` is
log(max(AP, 0.00001)), which ``compute_aggregated_measure`` turns into the
geometric mean. Measures are named as pytrec_eval names them (``map``,
``P``, ``P.5,10``, ``P_5``, ``ndcg_cut.10``, nicknames ``official`` and
``all_trec``). What differs: ``supported_measures`` holds only the measures
evalcore computes (a measure of pytrec_eval's outside it is a ``ValueError``
naming it: ``InputError`` is one), and a NaN or infinite score or a
non-integer grade is an error (pytrec_eval ranks a NaN somewhere).
"""
from __future__ import annotations

import math
import re
import warnings
from collections.abc import Iterable, Mapping

import numpy as np

from evalcore import trec_api
from evalcore.errors import EvalcoreWarning, OptionError, input_error
from evalcore.io import trec_tables

__all__ = ["RelevanceEvaluator", "compute_aggregated_measure", "parse_qrel", "parse_run", "supported_measures",
           "supported_nicknames"]

#: pytrec_eval's (pytrec-eval-terrier 0.5) measures of trec_eval 9's ``all_trec`` (no rbp: trec_eval 10 added it)
_PYTREC_ALL_TREC = frozenset({"num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref",
                              "recip_rank", "iprec_at_recall", "P", "recall", "infAP", "gm_bpref", "Rprec_mult",
                              "utility", "11pt_avg", "binG", "G", "ndcg", "ndcg_rel", "Rndcg", "ndcg_cut", "map_cut",
                              "relative_P", "success", "set_P", "set_relative_P", "set_recall", "set_map", "set_F",
                              "num_nonrel_judged_ret", "runid", "relstring"})
#: pytrec_eval's trec_eval (9) finds the recall levels of these by truncation, trec_eval 10 (and evalcore) rounds
DIFFERENT_DEFINITION = frozenset({"iprec_at_recall", "11pt_avg"})
#: the measures of pytrec_eval's ``supported_measures`` that evalcore computes as pytrec_eval does
supported_measures = frozenset(m for m in trec_api.MEASURE_ORDER
                               if m in _PYTREC_ALL_TREC and m not in DIFFERENT_DEFINITION)
#: pytrec_eval's nicknames, each with the measures of it evalcore computes
supported_nicknames = {"official": set(trec_api.OFFICIAL) & supported_measures, "all_trec": set(supported_measures)}
#: pytrec_eval's spelling of a measure with parameters: ``meas.p1,p2`` or ``meas_p1,p2``
_PARAMETERS = r"{}[\._]([0-9]+(\.[0-9]+)?(,[0-9]+(\.[0-9]+)?)*)"


def trec_eval_names(measures: Iterable[str]) -> list[str]:
    """pytrec_eval's measure names as ``evalcore.trec`` takes them (nicknames expanded, ``P_5,10`` -> ``P.5,10``);
    ``ValueError`` (``InputError``) ``unsupported measure X`` as pytrec_eval says it."""
    if isinstance(measures, str) or not isinstance(measures, Iterable):
        raise OptionError("measures", f"give a set of measure names, not {type(measures).__name__}")
    out = []
    for measure in measures:
        if not isinstance(measure, str):
            raise OptionError("measures", f"{measure!r} is not a measure name")
        if measure.split(".")[0] in DIFFERENT_DEFINITION:
            raise OptionError("measures", f"unsupported measure {measure} (pytrec_eval's trec_eval 9 truncates its "
                             "recall levels, trec_eval 10 and evalcore.trec round them)")
        if measure in supported_nicknames:
            out.extend(sorted(supported_nicknames[measure]))
        elif measure in supported_measures:
            out.append(measure)
        else:
            found = next(((base, m) for base in sorted(supported_measures, key=len, reverse=True)
                          if (m := re.fullmatch(_PARAMETERS.format(re.escape(base)), measure))), None)
            if found is None:
                why = " (a trec_eval measure evalcore does not compute)" \
                    if measure.split(".")[0].rstrip("_0123456789") in trec_api.NOT_COMPUTED else ""
                raise OptionError("measures", f"unsupported measure {measure}{why}")
            out.append(f"{found[0]}.{found[1].group(1)}")
    return out


class RelevanceEvaluator:
    """pytrec_eval's evaluator: the qrels and measures once, then ``evaluate(run)`` for each run."""

    def __init__(self, query_relevance: Mapping[str, Mapping[str, int]], measures: Iterable[str],
                 relevance_level: int = 1, judged_docs_only_flag: bool = False) -> None:
        relevance = trec_tables.as_mapping(query_relevance, "query_relevance")
        if not isinstance(relevance, Mapping):
            raise OptionError("query_relevance", "give a mapping {query id: {document id: grade}}")
        self.query_relevance = {q: docs for q, docs in relevance.items() if not isinstance(docs, Mapping) or docs}
        if self.query_relevance:   # its problems now, as pytrec_eval reports them on construction
            trec_tables.mapping_lines(self.query_relevance, "query_relevance", "qrels")
        names = trec_eval_names(measures)
        self.measures = trec_api.parse_measures(names, option="measures") if names else {}
        if isinstance(relevance_level, bool) or not isinstance(relevance_level, (int, np.integer)):
            raise OptionError("relevance_level", f"{relevance_level!r} is not an integer")
        self.relevance_level = int(relevance_level)
        self.judged_docs_only_flag = bool(judged_docs_only_flag)

    def evaluate(self, scores: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float]]:
        """``{qid: {measure: value}}`` for every judged query of ``scores`` (one with no results scores 0)."""
        run = trec_tables.as_mapping(scores, "scores")
        if not isinstance(run, Mapping):
            raise OptionError("scores", "give a mapping {query id: {document id: score}}")
        judged = {q: self.query_relevance[q] for q in run if q in self.query_relevance}
        if not judged:
            return {}
        if not self.measures:
            return {q: {} for q in sorted(judged)}
        names = trec_api.measure_names(self.measures)
        if not any(docs for q, docs in run.items() if q in judged):   # nothing retrieved: every value is 0
            return {q: self._nothing_retrieved(docs, names) for q, docs in sorted(judged.items())}
        # judged queries of the run, also those with no results (-c over the run's queries), as pytrec_eval
        with warnings.catch_warnings():   # pytrec_eval says nothing of the queries it leaves out: nor does this
            warnings.simplefilter("ignore", EvalcoreWarning)
            result = trec_api.trec(judged, run, [_spelled(m, c) for m, c in self.measures.items()], complete=True,
                                   rel_level=self.relevance_level, judged_only=self.judged_docs_only_flag,
                                   run_name="scores", qrels_name="query_relevance")
        table = result.result.per_query   # type: ignore[attr-defined]
        logged = {m: dict(zip(table.column("key").to_pylist(), table.column(column).to_pylist()))
                  for m, column in (("gm_map", "ap"), ("gm_bpref", "bpref")) if m in self.measures}
        out = {}
        for qid, values in result.per_query.items():
            row = {name: float(values[name]) for name in names if name in values}
            if "num_q" in self.measures:
                row["num_q"] = 1.0
            for m, values_of in logged.items():   # pytrec_eval's per-query gm_*: the log of the floored value
                row[m] = math.log(max(float(values_of[qid] or 0.0), trec_api.MIN_GEO_MEAN))
            out[qid] = {name: row[name] for name in names}
        return out

    def _nothing_retrieved(self, docs: Mapping, names: list[str]) -> dict[str, float]:
        rel = sum(1 for g in docs.values() if g >= self.relevance_level)
        special = {"num_q": 1.0, "num_rel": float(rel), "gm_map": math.log(trec_api.MIN_GEO_MEAN),
                   "gm_bpref": math.log(trec_api.MIN_GEO_MEAN)}
        return {name: special.get(name, 0.0) for name in names}


def _spelled(measure: str, cutoffs) -> str:
    return measure if cutoffs is None else f"{measure}.{','.join(map(str, cutoffs))}"


def compute_aggregated_measure(measure: str, values: list[float]) -> float:
    """pytrec_eval's aggregate of per-query values: sum for ``num_*``, exp(mean) for ``gm_*`` (whose per-query
    values are logs), else the mean."""
    if measure.startswith("num_"):
        return float(np.sum(values))
    if measure.startswith("gm_"):
        return float(np.exp(np.sum(values) / len(values)))
    return float(np.mean(values))


def parse_run(f_run: Iterable[str]) -> dict[str, dict[str, float]]:
    """A TREC run's lines as ``{qid: {docid: score}}`` (pytrec_eval's ``parse_run``; a repeated pair is an
    error naming the line)."""
    return _parse(f_run, 6, 4, float, "f_run")


def parse_qrel(f_qrel: Iterable[str]) -> dict[str, dict[str, int]]:
    """TREC qrels lines as ``{qid: {docid: grade}}`` (pytrec_eval's ``parse_qrel``)."""
    return _parse(f_qrel, 4, 3, int, "f_qrel")


def _parse(lines: Iterable[str], fields: int, value: int, kind, name: str) -> dict:
    out: dict[str, dict] = {}
    for number, line in enumerate(lines, start=1):
        words = line.split()
        if len(words) != fields:
            raise input_error(name, f"line {number}: {len(words)} fields, expected {fields}")
        docs = out.setdefault(words[0], {})
        if words[2] in docs:
            raise input_error(name, f"line {number}: {words[2]!r} listed twice for query {words[0]!r}")
        try:
            docs[words[2]] = kind(words[value])
        except ValueError:
            raise input_error(name, f"line {number}: {words[value]!r} is not a{'n integer' if kind is int else ' number'}") from None
    return out
