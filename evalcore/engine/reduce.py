"""The reduce: per-query rows of every chunk -> summary, CMC and what a reader should know.

Every mean is a correctly rounded sum over the per-query rows (``core.metrics``),
so the result is the same for any chunking or worker count.
"""
from __future__ import annotations

import math

import numpy as np
import pyarrow as pa

from evalcore.core import metrics as m
from evalcore.core import openset
from evalcore.core.ranking import TILE_COLS, TILE_ROWS
from evalcore.engine.options import Options
from evalcore.engine.plan import DatasetShape
from evalcore.engine.tasks import keys_of
from evalcore.io import kinds


def add_top1_keys(group, per_query: pa.Table, gallery_keys: np.ndarray | None = None) -> pa.Table:
    """Insert ``top1_key`` after ``top1``: one read of the gallery keys for the whole run, none when
    ``gallery_keys`` (the whole ``gallery/key``, e.g. as the checks read it) is given."""
    top1 = per_query.column("top1").fill_null(-1).to_numpy()
    if gallery_keys is None:
        keys = pa.array(keys_of(group, "gallery", top1), pa.string())
    else:
        found = top1 >= 0
        keys = pa.array(gallery_keys[np.where(found, top1, 0)], pa.string(), mask=~found)
    return per_query.add_column(per_query.column_names.index("top1") + 1, "top1_key", keys)


def metric_columns(per_query: pa.Table, options: Options) -> dict[str, str]:
    """The run's per-query metric columns that have a summary column (core.registry), each with its summary name."""
    out = {}
    for c in options.columns():
        if c.summary is not None and c.name in per_query.column_names:
            out[c.name] = c.summary
    return out


def aggregates(options: Options) -> dict[str, str]:
    """The run's per-query columns whose summary is not the mean (core.registry's ``aggregate``): geometric, sum."""
    return {c.name: c.metric.aggregate for c in options.columns() if c.metric.aggregate != "mean"}


def summarize(per_query: pa.Table, options: Options) -> tuple[pa.Table, pa.Table]:
    """summary.parquet (group "all", then one row per query/group) and cmc.parquet (no rows unless the run
    has a metric that enters the CMC)."""
    names = metric_columns(per_query, options)
    combine = aggregates(options)
    columns = {c: per_query.column(c).to_numpy(zero_copy_only=False).astype(np.float64) for c in names}
    with_cmc = any(c.metric.cmc for c in options.columns())
    n_relevant = per_query.column("n_relevant").to_numpy()
    counted = counted_queries(per_query, options)
    first = per_query.column("first_rank").fill_null(-1).to_numpy()
    outcome = (np.asarray(per_query.column("outcome").to_pylist(), dtype=object)
               if "outcome" in per_query.column_names else None)
    groups = [("all", np.ones(len(n_relevant), dtype=bool))]
    if "group" in per_query.column_names:
        labels = np.asarray(per_query.column("group").to_pylist(), dtype=object)
        groups += [(g, labels == g) for g in sorted(set(labels.tolist()))]
    rows: list[dict] = []
    cmc_rows: dict[str, list] = {"group": [], "k": [], "cmc": [], "ci_low": [], "ci_high": []}
    for name, sel in groups:
        row = {"group": name}
        row.update(m.summary_row({c: v[sel] for c, v in columns.items()}, n_relevant[sel], names,
                                 None if outcome is None else outcome[sel], options.threshold, counted[sel],
                                 combine))
        bands = None
        if options.ci is not None:
            row_intervals, bands = mean_intervals(columns, names, first, sel & counted, options, with_cmc, combine)
            row.update(row_intervals)
        rows.append(row)
        if not with_cmc:
            continue
        curve = m.cmc_curve(first[sel], n_relevant[sel], options.max_rank, counted[sel])
        cmc_rows["group"] += [name] * options.max_rank
        cmc_rows["k"] += list(range(1, options.max_rank + 1))
        cmc_rows["cmc"] += [None if math.isnan(x) else float(x) for x in curve]
        if bands is not None:
            cmc_rows["ci_low"] += [_none(x) for x in bands[0]]
            cmc_rows["ci_high"] += [_none(x) for x in bands[1]]
    summary = pa.Table.from_pylist(rows, schema=_summary_schema(rows))
    cmc = pa.table({"group": pa.array(cmc_rows["group"], pa.string()), "k": pa.array(cmc_rows["k"], pa.int64()),
                    "cmc": pa.array(cmc_rows["cmc"], pa.float64()),
                    **({"ci_low": pa.array(cmc_rows["ci_low"], pa.float64()),
                        "ci_high": pa.array(cmc_rows["ci_high"], pa.float64())} if options.ci is not None else {})})
    return summary, cmc


def _none(x: float) -> float | None:
    return None if math.isnan(x) else float(x)


def mean_intervals(columns: dict[str, np.ndarray], names: dict[str, str], first: np.ndarray, counted: np.ndarray,
                   options: Options, with_cmc: bool, combine: dict[str, str] | None = None,
                   ) -> tuple[dict, tuple[np.ndarray, np.ndarray] | None]:
    """``<summary>_ci_low`` / ``_ci_high`` of every mean over the ``counted`` queries of a row (one bootstrap:
    the same resamples for every metric and every CMC point, core.intervals), and the CMC's (low, high) per k.

    CMC(k) is the mean of [0 < r_1 <= k]: per resample, the running sum of the shares of first ranks
    1..k among the drawn queries (``intervals.bootstrap_code_shares``, one pass, not max_rank columns).
    A geometric summary (``combine``) is exp of the mean of log max(v, 0.00001) and a sum is n times the
    mean, both increasing functions of a mean: its interval is that function of the mean's interval.
    """
    from evalcore.core import intervals  # deferred: only runs with --ci draw resamples

    combine = combine or {}
    method = options.interval_method()
    matrix = [np.log(np.maximum(columns[c][counted], m.MIN_GEO_MEAN)) if combine.get(c) == "geometric"
              else columns[c][counted] for c in names]
    values = np.column_stack(matrix) if matrix else np.empty((int(counted.sum()), 0))
    # code r - 1 for a first rank r in 1..max_rank; no rank (-1 or 0) or a later one: outside the codes
    codes = np.where(first[counted] > 0, first[counted] - 1, options.max_rank)
    means, curves = intervals.bootstrap_means(values, method.resamples, method.seed, codes,
                                              options.max_rank if with_cmc else 0, cumulative=True)
    low, high = intervals.percentile_interval(means, method.level)
    for j, c in enumerate(names):
        if combine.get(c) == "geometric":
            low[j], high[j] = np.exp(low[j]), np.exp(high[j])
        elif combine.get(c) == "sum":
            n = np.count_nonzero(~np.isnan(columns[c][counted]))
            low[j], high[j] = low[j] * n, high[j] * n
    out: dict = {}
    for j, summary in enumerate(names.values()):
        out[f"{summary}_ci_low"] = _none(low[j])
        out[f"{summary}_ci_high"] = _none(high[j])
    return out, intervals.percentile_interval(curves, method.level) if with_cmc else None


def counted_queries(per_query: pa.Table, options: Options) -> np.ndarray:
    """Queries in the means: R > 0, and under ``--empty-queries zero`` a judged query with R = 0 too."""
    counted = per_query.column("n_relevant").to_numpy() > 0
    if options.empty_queries == "zero" and "n_judged" in per_query.column_names:
        counted |= per_query.column("n_judged").to_numpy() > 0
    return counted


def _summary_schema(rows: list[dict]) -> pa.Schema:
    fields = []
    for name in rows[0]:
        if name == "group":
            fields.append(pa.field(name, pa.string()))
        elif name in ("n_queries", "n_evaluated", "n_unknown", *openset.COUNT_COLUMNS):
            fields.append(pa.field(name, pa.int64()))
        else:
            fields.append(pa.field(name, pa.float64()))
    return pa.schema(fields)


def run_warnings(per_query: pa.Table, options: Options) -> list[str]:
    """What a reader of the summary should know: queries left out of the means, and why."""
    out = []
    n_relevant = per_query.column("n_relevant").to_numpy()
    unknown = int((n_relevant == 0).sum())
    zeroed = int(((n_relevant == 0) & counted_queries(per_query, options)).sum())
    if zeroed:
        out.append(f"{zeroed} judged queries have no relevant item: they count with every metric 0 "
                   "(--empty-queries zero)")
        unknown -= zeroed
    if unknown:
        out.append(f"{unknown} of {len(n_relevant)} queries have no relevant gallery item (unknown, open set): "
                   "their metrics are null and they are left out of every mean"
                   + ("" if options.threshold is not None or options.ties == "average"
                      else "; pass --threshold to score them as open-set queries")
                   + _judged_empty_note(per_query, options))
    if "first_rank" in per_query.column_names:
        unranked = int(((n_relevant > 0) & per_query.column("first_rank").is_null().to_numpy(zero_copy_only=False)).sum())
        if unranked:
            out.append(f"{unranked} known queries have no relevant item in their ranking lists: "
                       + ("rr, hit and ap are 0" if options.ties != "average" else "their measures count none"))
    if options.ties == "average" and options.metrics is None:
        from evalcore.core import registry

        left_out = registry.undefined_under_average(None)
        out.append(f"--ties average: the default metrics {', '.join(left_out)} are left out: {registry.AVERAGE_WHY}")
    return out


def _judged_empty_note(per_query: pa.Table, options: Options) -> str:
    """Under qrels/skip: how many left-out queries trec_eval would count as 0."""
    if options.empty_queries != "skip" or "n_judged" not in per_query.column_names:
        return ""
    judged = int(((per_query.column("n_relevant").to_numpy() == 0) & (per_query.column("n_judged").to_numpy() > 0)).sum())
    return f"; {judged} of them are judged, which trec_eval counts as 0 (--empty-queries zero)" if judged else ""


def score_note(shape: DatasetShape, options: Options) -> str:
    """How scores were computed, for run.json (README, How it works: the canonical score)."""
    if shape.kind is kinds.SCORES:
        what = "scores" if shape.higher_is_better else \
            "distances (higher_is_better false: ranked by the exact negation)"
        return (f"given: scores/value ({shape.score_dtype} {what}), compared exactly as stored (float16 and float32 "
                f"widened to float64, never rounded to float32); equal values are ties, {_tie_policy(options)}; "
                "top1_score and relevant_score are the values as given")
    if shape.kind is kinds.LISTS:
        if shape.list_scores:
            return (f"given: ranking/item order; items of equal ranking/score (compared in the precision "
                    f"stored, float32 or float64) form tie groups, each {_tie_policy(options)} whatever order "
                    "the list gives")
        return "given: ranking/item order as it stands (no ranking/score, so ties cannot be seen; --ties does not apply)"
    if options.similarity == "euclidean":
        where = "per (query, judged item) pair (judged-only)" if options.judged_only else \
            (f"on a {TILE_ROWS}x{TILE_COLS} tile grid of float32 estimates within a proven error bound")
        return ("euclidean: squared L2 distance of the float32 rows as given, lower is better; every comparison "
                "that decides a rank, a tie or rank 1 is made on the float32 nearest to the exact squared "
                f"distance, so results depend on no chunking, gallery order, BLAS library or device; compared "
                f"{where}; top1_score and relevant_score are those squared distances" + _average_note(options))
    if options.judged_only:
        return ("judged-only: canonical scores per (query, judged item) pair: the float32 nearest to the exact "
                "dot product of the normalised float32 rows" + _average_note(options))
    how = "cosine: rows L2-normalised in float64, stored as float32" if options.similarity == "cosine" \
        else "dot: raw inner product of float32 rows"
    return (f"{how}; canonical scores: every comparison that decides a rank, a tie or rank 1 is made on the float32 "
            "nearest to the exact dot product of the two rows, so results depend on no chunking, gallery order, "
            f"BLAS library or device; float32 BLAS products on a {TILE_ROWS}x{TILE_COLS} tile grid only find the "
            "candidates, within a proven error bound" + _average_note(options))


def _tie_policy(options: Options) -> str:
    """How a run orders a tie group, for its score note: ``ordered pessimistic (--ties)``, or under average
    ``sharing its gains over its places (--ties average)``."""
    if options.ties == "average":
        return "sharing its gains over its places (--ties average: the expected value over every order of the ties)"
    return f"ordered {options.ties} (--ties)"


def _average_note(options: Options) -> str:
    """The embeddings' score note's words on --ties average (none under the other policies)."""
    if options.ties != "average":
        return ""
    return ("; items of equal canonical score form tie groups, each sharing its gains over its places (--ties "
            "average: the expected value over every order of the ties)")


def empty_per_query(options: Options) -> pa.Table:
    """The per-query table of a dataset without queries: the columns, no rows."""
    cols = {"query": pa.array([], pa.int64()), "key": pa.array([], pa.string()),
            "n_relevant": pa.array([], pa.int64()), "n_junk": pa.array([], pa.int64())}
    for c in options.columns(first_rank=True):
        cols[c.name] = pa.array([], c.metric.dtype)
    cols["top1_score"] = pa.array([], pa.float64())
    return pa.table(cols)
