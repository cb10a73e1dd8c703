"""``evalcore.trec``: trec_eval's evaluation in one call, in trec_eval's words and rules, nothing written.

    import evalcore
    r = evalcore.trec("qrels.txt", "run.txt", measures=("map", "ndcg_cut.10", "P.5,10"))
    r.aggregate["map"], r.per_query["301"]["P_5"], print(r.format(per_query=True)), r.save("report")

trec_eval's rules throughout: equal scores ranked by docno, descending
(its sort); queries with results but no judgements left out; a judged
query with no relevant document counted with every measure 0; a negative
grade "in the pool, not judged" (never relevant, not a judged non-relevant
document); ``complete`` (-c), ``depth`` (-M), ``rel_level`` (-l) and
``judged_only`` (-J) as trec_eval's flags. The qrels and the run may be TREC
files, mappings ``{qid: {docid: grade or score}}``, pyarrow/pandas tables or
ranx objects (``evalcore.io.trec_tables``); the dataset is built in memory.
"""
from __future__ import annotations

import functools
import itertools
import math
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from evalcore.core import spellings
from evalcore.errors import OptionError, input_error
from evalcore.io import progress

#: trec_eval measure -> (evalcore metric, its per-query column): one table, the metric registry's spellings
ENGINE_MEASURES = spellings.TREC_EVAL
#: the measures evalcore computes, in the order trec_eval prints them (its measure table's order)
MEASURE_ORDER = ("num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref", "recip_rank",
                 "iprec_at_recall", "P", "recall", "infAP", "gm_bpref", "Rprec_mult", "utility", "11pt_avg", "binG",
                 "G", "ndcg", "ndcg_rel", "Rndcg", "ndcg_cut", "map_cut", "relative_P", "success", "set_P",
                 "set_relative_P", "set_recall", "set_map", "set_F", "num_nonrel_judged_ret", "rbp", "rbp_resid",
                 "unj")
_CUTS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
#: trec_eval's default cut-offs of each cut-off measure
DEFAULT_CUTOFFS = {"P": _CUTS, "recall": _CUTS, "ndcg_cut": _CUTS, "map_cut": _CUTS, "relative_P": _CUTS,
                   "success": (1, 5, 10), "unj": (5, 10, 20)}
#: measures that take trec_eval's name=value pairs: evalcore takes the persistence, ``rbp.p=0.8`` (printed
#: ``rbp_p=0.8``), not rbp's gain pairs (``2=5``)
PERSISTENCE = ("rbp", "rbp_resid")
#: measures with trec_eval's default levels only (evalcore computes those; other levels are refused)
FIXED_LEVELS = {"iprec_at_recall": tuple(f"{x / 10:.2f}" for x in range(11)),
                "Rprec_mult": tuple(f"{x / 10:.2f}" for x in range(2, 21, 2))}
#: trec_eval's default set (``official``) less what evalcore does not compute (runid)
OFFICIAL = ("num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref", "recip_rank",
            "iprec_at_recall", "P")
#: counts, printed as integers and summed in ``all``
COUNTS = ("num_q", "num_ret", "num_rel", "num_rel_ret", "num_nonrel_judged_ret")
#: printed for ``all`` only, as trec_eval prints them
AGGREGATE_ONLY = ("num_q", "gm_map", "gm_bpref")
#: trec_eval measures evalcore does not compute: named in the error, so a user knows it is not a typo
NOT_COMPUTED = ("runid", "relstring", "ndcg_p",
                "prefs_num_prefs_poss", "P_avgjg", "map_avgjg", "Rprec_mult_avgjg", "yaap", "success_avgjg")
#: the engine's counts whose difference is the retrieved documents not judged (not in the qrels, or graded < 0)
UNJUDGED_PARTS = ("num_ret", "num_rel_ret", "num_nonrel_judged_ret")
#: trec_eval's MIN_GEO_MEAN: gm_map's floor on each query's AP
MIN_GEO_MEAN = 0.00001
#: cut-offs are held as int32 in the engine
MAX_CUTOFF = (1 << 31) - 1
#: cut-offs of one measure: each is a column of every query (trec_eval's defaults have 9)
MAX_CUTOFFS = 1000
_UNDERSCORED = re.compile(r"([A-Za-z_]+?)_([0-9]+)")


def parse_measures(measures, option: str = "measures") -> dict[str, tuple | None]:
    """trec_eval measure names -> {measure: its cut-offs (None: its defaults, or no parameters)}, in trec_eval's order.

    Names as ``-m`` takes them: ``map``, ``P`` (its default cut-offs), ``P.5,10``, ``ndcg_cut.10``,
    ``rbp.p=0.8`` (its parameters' text kept: ``("p=0.8",)``), ``official``, ``all_trec``; also ``P_5`` as
    trec_eval prints it (and pytrec_eval names it). A measure given again with cut-offs (or a persistence) adds
    them (trec_eval keeps the first given and drops the rest unseen); cut-offs given anywhere replace the
    default ones, as in trec_eval.
    """
    if isinstance(measures, str):
        measures = [measures]
    if not isinstance(measures, Iterable) or isinstance(measures, (bytes, Mapping)):
        raise input_error(option, "give trec_eval measure names as a list of strings")
    named = list(measures)
    if not named or any(not isinstance(m, str) for m in named):
        raise input_error(option, "give trec_eval measure names as a list of strings (such as map, P.5,10)")
    given: dict[str, set[int]] = {}
    pairs: dict[str, dict[str, float]] = {}
    defaults: set[str] = set()
    for raw in named:
        name = raw.strip()
        if name in ("official", "all_trec"):
            defaults.update(OFFICIAL if name == "official" else MEASURE_ORDER)
            continue
        base, _, params = name.partition(".")
        under = _UNDERSCORED.fullmatch(base) if not params else None
        if under and under.group(1) in DEFAULT_CUTOFFS:
            base, params = under.group(1), under.group(2)
        if base not in MEASURE_ORDER:
            known = base in NOT_COMPUTED or base.split("_")[0] in NOT_COMPUTED
            why = "is a trec_eval measure evalcore does not compute" if known else "is not a trec_eval measure"
            raise input_error(option, f"{raw!r} {why} (it computes: {', '.join(MEASURE_ORDER)}, official, all_trec)")
        if not params:
            defaults.add(base)
            continue
        if base in FIXED_LEVELS:
            raise input_error(option, f"{raw!r}: evalcore computes {base} at trec_eval's default levels only "
                             f"({', '.join(FIXED_LEVELS[base])}): give {base}")
        if base in PERSISTENCE:
            pairs.setdefault(base, {})[params] = _persistence(base, params, raw, option)
            continue
        if base not in DEFAULT_CUTOFFS:
            raise input_error(option, f"{raw!r}: {base} takes no parameters")
        given.setdefault(base, set()).update(_cutoffs(params, raw, option))
        if len(given[base]) > MAX_CUTOFFS:
            raise input_error(option, f"{base} given more than {MAX_CUTOFFS} cut-offs")
    chosen: dict[str, tuple | None] = {**{m: DEFAULT_CUTOFFS.get(m) for m in defaults},
                                       **{m: tuple(sorted(cuts)) for m, cuts in given.items()},
                                       **{m: tuple(texts) for m, texts in pairs.items()}}
    return {m: chosen[m] for m in MEASURE_ORDER if m in chosen}


def _persistence(base: str, params: str, raw: str, option: str) -> float:
    """p of ``rbp.p=0.8`` (trec_eval's pair, as it prints it after the name); 0 < p < 1."""
    name, _, text = params.partition("=")
    if name != "p" or "," in text:
        raise input_error(option, f"{raw!r}: evalcore takes {base}'s persistence alone, as {base}.p=0.8 "
                                  "(not trec_eval's gain pairs)")
    try:
        p = float(text)
    except ValueError:
        p = math.nan
    if not 0 < p < 1:
        raise input_error(option, f"{raw!r}: the persistence p must be a number between 0 and 1")
    return p


def _cutoffs(params: str, raw: str, option: str) -> set[int]:
    words = params.split(",")
    if len(words) > MAX_CUTOFFS:   # before any parsing: each cut-off costs a column of every query
        raise input_error(option, f"{raw[:40]!r}...: {len(words)} cut-offs, more than {MAX_CUTOFFS}")
    out = set()
    for word in words:
        if not word.isdigit() or not 0 < int(word) <= MAX_CUTOFF:
            raise input_error(option, f"{raw!r}: cut-off {word!r} is not an integer in 1..{MAX_CUTOFF}")
        out.add(int(word))
    return out


def printed(measure: str, cuts) -> list[tuple[str, dict]]:
    """(printed name, the format fields of its metric and column) of one chosen measure: ``P_5`` ({k: 5}),
    ``iprec_at_recall_0.10`` ({level: "0.10"}), ``rbp_p=0.8`` ({p: 0.8}), ``map`` ({})."""
    if measure in FIXED_LEVELS:
        return [(f"{measure}_{level}", {"level": level}) for level in FIXED_LEVELS[measure]]
    if cuts is None:
        return [(measure, {})]
    if measure in PERSISTENCE:
        return [(f"{measure}_{text}", {"p": float(text.partition("=")[2])}) for text in cuts]
    return [(f"{measure}_{k}", {"k": k}) for k in cuts]


def engine_names(measure: str, fields: Mapping) -> tuple[str, str]:
    """(evalcore metric, its per-query column) of one printed measure (``printed``'s fields)."""
    if "p" in fields:   # rbp at a persistence: evalcore's RBP(p=...), registered (0.8: rbp_0.80) or made for it
        from evalcore.core import registry

        rbp = registry.parse(f"{measure}(p={fields['p']!r})")[0]
        return rbp.name, rbp.column
    metric, column = ENGINE_MEASURES[measure]
    return metric.format(**fields), column.format(**fields)


def measure_names(chosen: Mapping[str, tuple | None]) -> list[str]:
    """The printed names (``P_5``), in trec_eval's order."""
    return [name for m, cuts in chosen.items() for name, _ in printed(m, cuts)]


def engine_metrics(chosen: Mapping[str, tuple | None]) -> tuple[list[str], list[int]]:
    """(evalcore metric names, the cut-offs they use) for the chosen measures; map stands in when none is
    the engine's (the counts alone: the engine still gives the evaluated queries)."""
    names, ks = [], set()
    for measure, cuts in chosen.items():
        measure = {"gm_map": "map", "gm_bpref": "bpref"}.get(measure, measure)
        if measure not in ENGINE_MEASURES:
            continue
        for _, fields in printed(measure, cuts):
            names.append(engine_names(measure, fields)[0])
            if "k" in fields:
                ks.add(fields["k"])
    if "rbp_resid" in chosen:   # its documents not judged: the retrieved ones less the judged (trec_values)
        names += UNJUDGED_PARTS
    return list(dict.fromkeys(names or ["map"])), sorted(ks)


@dataclass
class TrecResult:
    """What ``evalcore.trec`` returns.

    ``per_query``: ``{qid: {measure: value}}`` (pytrec_eval's layout), the
    measures trec_eval prints per query, made from ``columns`` when first read
    (a printout without ``-q`` never makes its 100,000 x 94 values); ``aggregate``: ``{measure: value}``,
    trec_eval's ``all`` line (counts as int). ``result``: the evaluation as
    ``evalcore.evaluate`` returns it (``result.save(DIR)`` or ``save`` here
    writes the usual report folder); ``warnings``: the queries left out.
    """

    #: the queries, in trec_eval's order, and each printed measure's per-query values (an array in that order)
    keys: list[str] = field(repr=False)
    columns: dict[str, np.ndarray] = field(repr=False)
    aggregate: dict[str, float]
    measures: list[str]
    result: object = field(repr=False)
    warnings: list[str] = field(default_factory=list)
    #: trec_eval's flags as given: complete (-c), depth (-M), rel_level (-l), judged_only (-J)
    flags: dict = field(default_factory=dict)

    @functools.cached_property
    def per_query(self) -> dict[str, dict[str, float]]:
        return query_rows(self.keys, self.columns)

    def lines(self, per_query: bool = False) -> list[str]:
        """trec_eval's printout (``-q``: every query's lines first, then ``all``), one string a line."""
        out: list[str] = []
        if per_query:   # trec_line's layout, its name column and kind worked out once a measure, not once a line
            shown = [(name, f"{name:<22}\t", name in COUNTS) for name in self.measures]
            append = out.append
            for qid, values in self.per_query.items():
                for name, head, count in shown:
                    if name in values:
                        value = values[name]
                        append(f"{head}{qid}\t{int(value)}" if count else f"{head}{qid}\t{value:6.4f}")
        out.extend(trec_line(name, "all", self.aggregate[name]) for name in self.measures)
        return out

    def format(self, per_query: bool = False) -> str:
        return "".join(line + "\n" for line in self.lines(per_query))

    def save(self, out, overwrite: bool = False, storage_options: Mapping | None = None) -> str:
        """The report folder of ``evalcore evaluate --out`` (per_query.parquet, summary, run.json, report.html)."""
        return self.result.save(out, overwrite=overwrite, storage_options=storage_options,  # type: ignore[attr-defined]
                                run={"trec": {"measures": self.measures, "aggregate": self.aggregate,
                                              **self.flags}})


def trec_line(name: str, qid: str, value) -> str:
    """One line as trec_eval prints it: ``%-22s\\t%s\\t%6.4f`` (``%ld`` for a count)."""
    if name in COUNTS:
        return f"{name:<22}\t{qid}\t{int(value)}"
    return f"{name:<22}\t{qid}\t{value:6.4f}"


def trec(qrels, run, measures=("official",), *, complete: bool = False, depth: int | None = None,
         rel_level: int = 1, judged_only: bool = False, qrels_name: str = "qrels", run_name: str = "run",
         on_progress: Callable[[int, int, str], None] | None = None) -> TrecResult:
    """Evaluate a run against qrels as ``trec_eval [-c] [-M depth] [-l rel_level] [-J] -m MEASURE ...`` does.

    ``qrels``/``run``: TREC file paths, ``{qid: {docid: grade}}`` / ``{qid: {docid: score}}``, pyarrow or
    pandas tables (columns such as qid, docno, rel / score) or ranx ``Qrels``/``Run``. ``measures``:
    trec_eval's names (``map``, ``P.5,10``, ``ndcg_cut.10``, ``rbp.p=0.8``, ``official``, ``all_trec``;
    ``parse_measures``).
    Raises ``InputError`` naming the parameter (``qrels_name``/``run_name``: the words for them in messages).
    ``on_progress(done, total, phase)`` as ``evalcore.evaluate``'s, with the bytes of TREC files read (phase
    "reading") before the ranking.

    >>> import evalcore
    >>> qrels = {"q1": {"d1": 1, "d2": 0, "d3": 2}, "q2": {"d1": 1}}
    >>> run = {"q1": {"d1": 0.9, "d2": 0.8, "d3": 0.8}, "q2": {"d2": 0.5, "d1": 0.4}}
    >>> r = evalcore.trec(qrels, run, measures=["map", "P.1"])
    >>> r.per_query["q1"]["map"], r.aggregate["P_1"]   # d3 before d2: equal scores by docno, descending
    (1.0, 0.5)
    """
    from evalcore.io import trec_tables

    chosen = parse_measures(measures)
    for name, value in (("complete", complete), ("judged_only", judged_only)):
        if not isinstance(value, (bool, np.bool_)):
            raise input_error(name, f"{value!r} is not True or False")
    with progress.reporting(on_progress):   # the files' bytes as they are read
        if "evalcore.api" in sys.modules:
            arrays, attrs = trec_tables.trec_arrays(qrels, run, complete=bool(complete), qrels_name=qrels_name,
                                                    run_name=run_name)
        else:   # a first call (the command's): the inputs are read while the engine is imported (~1 s, numba, zarr)
            with ThreadPoolExecutor(1) as pool:
                reading = pool.submit(trec_tables.trec_arrays, qrels, run, complete=bool(complete),
                                      qrels_name=qrels_name, run_name=run_name)
                from evalcore import api  # noqa: F401  (imported here, used below)
                arrays, attrs = reading.result()
    from evalcore import api
    if depth is not None:   # trec_eval cuts at -M first, then -J drops the unjudged: the cut is made here
        _checked_depth(depth)
        from evalcore.io import kinds

        lists = kinds.LISTS.query_array
        arrays[lists] = np.ascontiguousarray(arrays[lists][:, :depth])
    warnings = list(attrs.pop(trec_tables.WARNINGS, []))
    group = _memory_dataset(arrays, attrs)
    metrics, ks = engine_metrics(chosen)
    with api.parameter_names(False):
        result = api.evaluate(group, protocol="qrels", metrics=metrics, ks=ks or (1,), max_rank=max([*ks, 1]),
                              empty_queries="zero", rel_level=rel_level, judged_only=bool(judged_only),
                              on_progress=on_progress)
    # the queries left out are trec_eval's rule, said here; the engine's warnings speak of evalcore's own options
    # (a cut-off past the lists' end, queries with no relevant item ranked), which trec_eval's rules settle:
    # they stay in the report's run.json
    result.run["warnings"] = [*warnings, *result.run.get("warnings", [])]
    result.run["options"] = {**result.run.get("options", {}), "depth": depth}
    keys, columns, aggregate = trec_columns(chosen, result, arrays, complete=bool(complete))
    flags = {"complete": bool(complete), "depth": depth, "rel_level": rel_level, "judged_only": bool(judged_only)}
    api.issue_warnings(warnings)   # a Python caller sees them as EvalcoreWarning; the command prints its own lines
    return TrecResult(keys, columns, aggregate, measure_names(chosen), result, warnings, flags)


def _checked_depth(depth) -> None:
    if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or not 1 <= depth <= MAX_CUTOFF:
        raise OptionError("depth", f"{depth!r} is not an integer from 1 to {MAX_CUTOFF}")


def _memory_dataset(arrays, attrs):
    import zarr

    from evalcore.io import dataset as ds

    rows = max(1, *(a.shape[0] for a in arrays.values()))
    return ds.write_dataset(zarr.storage.MemoryStore(), arrays, attrs, chunk_rows=rows)


def trec_values(chosen, result, arrays, *, complete: bool = False):
    """({qid: {measure: value}}, {measure: value}) of the chosen measures (``trec_columns``, as rows)."""
    keys, columns, aggregate = trec_columns(chosen, result, arrays, complete=complete)
    return query_rows(keys, columns), aggregate


def query_rows(keys: list[str], columns: Mapping[str, np.ndarray]) -> dict[str, dict[str, float]]:
    """``{qid: {measure: value}}`` of per-query columns: Python floats, ints for the counts."""
    # a row of Python values a query, zipped with the names: 100,000 queries x 29 measures in ~0.3 s, not ~1.5 s
    names = list(columns)
    lists = [values.tolist() for values in columns.values()]
    rows = zip(*lists) if lists else itertools.repeat(())
    return {qid: dict(zip(names, row)) for qid, row in zip(keys, rows)}


def trec_columns(chosen, result, arrays, *, complete: bool = False):
    """(queries, {printed measure: per-query values}, {measure: value}) of the chosen measures from the engine's tables (its
    rankings already cut at the depth, and with -J the documents without a grade >= 0 dropped, as trec_eval's
    form_res_rels.c); ``arrays``: the qrels, for num_rel's ``all`` under -c.

    rbp_resid is evalcore's (the weight of the unjudged places and of everything below the list) where the
    list has an unjudged document, and 0 where it has none, as trec_eval's m_rbp_resid.c leaves it."""
    table = result.per_query
    keys = [str(k) for k in table.column("key").to_pylist()]
    columns: dict[str, np.ndarray] = {}
    aggregate: dict[str, float] = {}

    def column(name: str) -> np.ndarray:
        return np.nan_to_num(np.asarray(table.column(name).to_numpy(zero_copy_only=False), dtype=np.float64))

    for measure, cuts in chosen.items():
        if measure == "num_q":
            aggregate["num_q"] = len(keys)
        elif measure in ("gm_map", "gm_bpref"):   # exp of the mean log of each query's value, floored
            value = column("ap" if measure == "gm_map" else "bpref")
            aggregate[measure] = math.exp(trec_mean(np.log(np.maximum(value, MIN_GEO_MEAN)))) if value.size else 0.0
        else:
            for name, fields in printed(measure, cuts):
                values = column(engine_names(measure, fields)[1])
                if measure == "rbp_resid":
                    retrieved, relevant, judged = (column(part) for part in UNJUDGED_PARTS)
                    values = np.where(retrieved - relevant - judged > 0, values, 0.0)
                # + 0.0: a -0.0 printed and returned as 0.0
                columns[name] = values.astype(np.int64) if measure in COUNTS else values + 0.0
                aggregate[name] = int(values.sum()) if measure in COUNTS else trec_mean(values)
        if measure == "num_rel" and complete:
            # trec_eval -c (m_num_rel.c's te_calc_avg_num_rel): every judgement > 0 of the qrels, -l aside
            aggregate[measure] = int((arrays["qrels/rel"] > 0).sum())
    return keys, columns, aggregate


def trec_mean(values: np.ndarray) -> float:
    """trec_eval's ``all``: the per-query values added one by one in qid order, then divided by their number.

    Summed in another order (numpy's pairwise sum, an exact mean) the last bit can differ, and a mean such
    as 0.00005 then prints 0.0001 where trec_eval prints 0.0000 (4.9999999999999996e-05).
    """
    return float(np.cumsum(values)[-1] / values.size) if values.size else 0.0

