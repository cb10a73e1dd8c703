"""Comparing runs (README, Compare): pair the known queries of two runs by key, then compare every metric.

Pure compute on the per-query tables of reports (pyarrow); reading and
writing the folders is the caller's (``evalcore.api.compare``). The
statistics are ``core.intervals``; a metric's direction is its registration
(``core.registry``).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import pyarrow as pa

from evalcore.core import intervals, registry
from evalcore.declarations import number_options, recorded_value
from evalcore.errors import OptionError, input_error, mention

#: run options that change the numbers: runs compared across them get a warning naming them (those declared so)
NUMBER_OPTIONS = number_options()
#: run options that decide a query's relevant items (its n_relevant): equal in both runs, the same query has the
#: same count whatever the embeddings or rankings
RELEVANCE_OPTIONS = ("protocol", "rel_level", "radius", "judged_only")
#: comparison.parquet's columns, in order
COLUMNS = ("baseline", "run", "group", "metric", "n", "mean_baseline", "mean_run", "diff", "ci_low", "ci_high",
           "p_randomization", "p_ttest", "p_holm", "wins", "ties", "losses")


@dataclass(frozen=True)
class RunTable:
    """One run to compare: its name, per-query table and the options run.json records."""

    name: str
    per_query: pa.Table
    options: Mapping = field(default_factory=dict)
    #: run.json's ``fingerprint`` of the dataset (its arrays' names, shapes, dtypes, chunks), when recorded
    fingerprint: str | None = None


@dataclass(frozen=True)
class Pairing:
    """Rows of the baseline's and the run's per-query tables holding the same known query, in key order
    of the baseline."""

    baseline_rows: np.ndarray
    run_rows: np.ndarray
    keys: list[str]


@dataclass(frozen=True)
class Row:
    """One row of comparison.parquet: a metric of one run against the baseline on one query/group row."""

    baseline: str
    run: str
    group: str
    metric: str
    result: intervals.PairedResult
    p_holm: float = float("nan")

    def record(self) -> dict:
        out: dict = {"baseline": self.baseline, "run": self.run, "group": self.group, "metric": self.metric}
        out.update(asdict(self.result))
        out["p_holm"] = self.p_holm
        return {c: out[c] for c in COLUMNS}


@dataclass(frozen=True)
class Comparison:
    """Every run after the first compared with the first (the baseline)."""

    runs: list[str]
    rows: list[Row]
    per_query_diff: pa.Table
    method: intervals.Method
    warnings: list[str]
    #: (run, k, cmc, ci_low, ci_high) of every run on its paired queries at ``cmc_ks`` (compare.html), or None
    cmc: pa.Table | None = None

    def table(self) -> pa.Table:
        """comparison.parquet."""
        records = [r.record() for r in self.rows]
        types = {"baseline": pa.string(), "run": pa.string(), "group": pa.string(), "metric": pa.string(),
                 "n": pa.int64(), "wins": pa.int64(), "ties": pa.int64(), "losses": pa.int64()}
        return pa.table({c: pa.array([r[c] for r in records], types.get(c, pa.float64())) for c in COLUMNS})

    def means(self, group: str = "all") -> MeanTable:
        """Every run's mean of every metric on its paired queries (``group``'s rows), the baseline first."""
        return mean_table(self, group)

    def __str__(self) -> str:
        """A table like ranx's Report: one row per run, one column per metric, the mean with its marks."""
        return format_means(self)

    def __repr__(self) -> str:
        # short: the dataclass's own repr prints every row and both pyarrow tables (kilobytes)
        groups = len(dict.fromkeys(r.group for r in self.rows))
        n = sorted({r.result.n for r in self.rows if r.group == "all"})
        return (f"<Comparison baseline {self.runs[0]!r}, runs {self.runs[1:]!r}, "
                f"{len(dict.fromkeys(r.metric for r in self.rows))} metrics, {groups} query/group rows, "
                f"{_span(n)} paired queries>")

    def _repr_html_(self) -> str:
        """The same table as ``str()`` for a notebook, the best value of each metric in bold."""
        return means_html(self)


def known_queries(per_query: pa.Table, options: Mapping) -> np.ndarray:
    """The queries a run's means count (README, Metrics): R > 0, and judged ones under empty_queries zero."""
    known = per_query.column("n_relevant").to_numpy() > 0
    if options.get("empty_queries") == "zero" and "n_judged" in per_query.column_names:
        known |= per_query.column("n_judged").to_numpy() > 0
    return known


def check_counts(run: RunTable) -> None:
    """``n_relevant`` (and ``n_judged``) decide which queries count: whole numbers >= 0 for every query, else an
    InputError naming the first bad query (a null count would make a query look unknown and drop it)."""
    for column in ("n_relevant", "n_judged"):
        if column not in run.per_query.column_names:
            if column == "n_relevant":
                raise input_error(run.name, "its per-query table has no n_relevant column, so its known "
                                 "queries cannot be told")
            continue
        values = run.per_query.column(column)
        if not pa.types.is_integer(values.type):
            raise input_error(run.name, f"column {column} holds {values.type}, not whole numbers")
        counts = values.to_numpy(zero_copy_only=False)
        bad = np.flatnonzero(np.asarray(values.is_null()) | (np.nan_to_num(counts, nan=-1) < 0))
        if bad.size:
            raise input_error(run.name, f"column {column}, query {_key(run, bad[0])!r}: "
                             f"{'null' if values[int(bad[0])].as_py() is None else values[int(bad[0])].as_py()}, "
                             "not a count (>= 0)")


def _key(run: RunTable, row) -> str:
    keys = run.per_query.column("key") if "key" in run.per_query.column_names else None
    return str(keys[int(row)].as_py()) if keys is not None else f"row {int(row)}"


def _keys(run: RunTable) -> tuple[np.ndarray, np.ndarray]:
    """(keys, rows) of the known queries of a run."""
    if "key" not in run.per_query.column_names:
        raise input_error(run.name, "its per-query table has no key column, so its queries cannot be paired")
    check_counts(run)
    rows = np.flatnonzero(known_queries(run.per_query, run.options))
    keys = np.asarray(run.per_query.column("key").to_pylist(), dtype=object)[rows]
    return keys, rows


def pair_queries(baseline: RunTable, run: RunTable, intersect: bool = False) -> Pairing:
    """Match the known queries of ``run`` to the baseline's by key.

    Different sets are an InputError naming both counts and the first key in
    one and not the other, unless ``intersect`` (then the common ones).
    """
    keys_a, rows_a = _keys(baseline)
    keys_b, rows_b = _keys(run)
    for name, keys in ((baseline.name, keys_a), (run.name, keys_b)):
        if len(set(keys.tolist())) != len(keys):
            raise input_error(name, "query keys repeat, so queries cannot be paired by key")
    where_b = {k: i for i, k in zip(rows_b.tolist(), keys_b.tolist())}
    set_a = set(keys_a.tolist())
    only_a = [k for k in keys_a.tolist() if k not in where_b]
    only_b = [k for k in keys_b.tolist() if k not in set_a]
    if (only_a or only_b) and not intersect:
        first = f"{only_a[0]!r} is in {baseline.name} only" if only_a else f"{only_b[0]!r} is in {run.name} only"
        raise input_error(run.name, f"its known queries are not those of {baseline.name} ({len(keys_b)} and "
                         f"{len(keys_a)} known queries; {first}); pass " + mention("--intersect")
                          + " (intersect=True) to compare the common ones")
    keep = [(i, where_b[k], k) for i, k in zip(rows_a.tolist(), keys_a.tolist()) if k in where_b]
    if not keep:
        raise input_error(run.name, f"no known query in common with {baseline.name}")
    return Pairing(np.asarray([x[0] for x in keep], np.int64), np.asarray([x[1] for x in keep], np.int64),
                   [x[2] for x in keep])


def positional_keys(run: RunTable) -> bool:
    """Every key is ``q<i>``, i the query's index: the default keys of a dataset without ``query/key``. Such keys
    pair queries by position only, which says nothing about whether two datasets hold the same queries."""
    table = run.per_query
    index = table.column("query").to_pylist() if "query" in table.column_names else range(table.num_rows)
    return all(k == f"q{i}" for k, i in zip(table.column("key").to_pylist(), index))


def first_difference(baseline: RunTable, run: RunTable) -> str | None:
    """The first query (by key, over every query both runs have) whose ``label`` differs between the runs, or
    whose ``n_relevant`` does though the runs decide relevance alike (``RELEVANCE_OPTIONS``): proof that the key
    names a different query in each run (both are data of the dataset, not of the model). None when none does."""
    same_relevance = "protocol" in baseline.options and \
        all(baseline.options.get(o) == run.options.get(o) for o in RELEVANCE_OPTIONS)
    columns = [c for c in ("label", "n_relevant") if c in baseline.per_query.column_names
               and c in run.per_query.column_names and (c == "label" or same_relevance)]
    if not columns:
        return None
    where_b = {k: i for i, k in enumerate(run.per_query.column("key").to_pylist())}
    values = {c: (baseline.per_query.column(c).to_pylist(), run.per_query.column(c).to_pylist()) for c in columns}
    for i, key in enumerate(baseline.per_query.column("key").to_pylist()):
        j = where_b.get(key)
        if j is None:
            continue
        for c in columns:
            va, vb = values[c][0][i], values[c][1][j]
            if va is not None and vb is not None and va == va and vb == vb and va != vb:  # NaN: undefined
                return f"query {key!r} has {c} {va!r} in {baseline.name} and {vb!r} in {run.name}"
    return None


def dataset_check(baseline: RunTable, run: RunTable) -> list[str]:
    """Whether the two runs' queries are the same queries (README, Compare: which runs are refused).

    Keys ``q<i>`` on both sides pair by position: if a paired query's label or
    relevant count differs, the runs are of different data and the pairing is
    meaningless (InputError). Datasets whose fingerprints differ (array shapes,
    dtypes, chunking or attributes: two models of different widths on one
    benchmark, or two benchmarks) are compared with a warning saying how the
    queries were paired; with real keys a differing label or count is named in it.
    """
    if any("key" not in r.per_query.column_names for r in (baseline, run)):
        return []  # pair_queries names the run without keys
    positional = positional_keys(baseline) and positional_keys(run)
    difference = first_difference(baseline, run)
    prints = (f" (dataset fingerprints {baseline.fingerprint} and {run.fingerprint}: their arrays' shapes, dtypes, "
              "chunking or attributes differ)"
              if baseline.fingerprint and run.fingerprint and baseline.fingerprint != run.fingerprint else "")
    if positional and difference:
        raise input_error(run.name, f"its queries have the default keys q0, q1, ... as {baseline.name}'s do, so they "
                         f"pair by position, and {difference}: they are different queries{prints}; give the "
                         "datasets " + mention("query/key") + " to pair queries by name")
    if prints:
        how = ("by position (the default keys q0, q1, ...); their labels and relevant counts agree" if positional
               else f"by key{'; ' + difference if difference else ''}")
        return [f"{run.name} and {baseline.name} were evaluated on datasets that differ{prints}; queries paired {how}"]
    if difference:
        return [f"{run.name} and {baseline.name}: {difference}: the same key names queries whose truth differs"]
    return []


def check_finite(run: RunTable, columns, rows: np.ndarray) -> None:
    """Every compared value of a paired (known) query is a finite number: evalcore writes one for every query
    with relevant items, so a null, NaN or infinite value there is an altered or damaged report, and leaving it
    out (or averaging it) would change the result unseen. InputError naming the run, column and query."""
    for column, _ in columns:
        values = run.per_query.column(column)
        numbers = values.to_numpy(zero_copy_only=False).astype(np.float64)[rows]
        bad = np.flatnonzero(~np.isfinite(numbers))
        if bad.size:
            row = int(rows[bad[0]])
            v = numbers[bad[0]]
            what = "null" if values[row].as_py() is None else "NaN" if v != v else "inf" if v > 0 else "-inf"
            raise input_error(run.name, f"column {column}, query {_key(run, row)!r}: {what}; a query with relevant "
                             "items has a finite value in every report evalcore writes, so this report was "
                             "altered or damaged")


def metric_columns(runs: Sequence[RunTable], metrics: Sequence[str] | None = None) -> list[tuple[str, str]]:
    """(per-query column, summary column) of every metric with a mean that every run has, in report order;
    ``metrics`` (names ``metrics=`` takes) keeps only those."""
    common = set.intersection(*(set(r.per_query.column_names) for r in runs))
    out = []
    for name in runs[0].per_query.column_names:
        column = registry.lookup(name)
        # paired differences of means: a summary that is not a mean (gm_map's geometric mean, num_ret's sum) is not
        # what the mean of d_q estimates, so those are left out rather than shown under their summary's name
        if name in common and column is not None and column.name == name and column.summary is not None \
                and column.metric.aggregate == "mean":
            out.append((name, column.summary))
    if metrics is not None:
        wanted = registry.select(metrics)
        # a column is wanted by its own spelling (ndcg@10) or by its metric at every cut-off (ndcg@k, recall),
        # as select spells them: ndcg alone is the uncut measure, not ndcg@k's columns too
        chosen = [(c, s) for c, s in out for column in [registry.lookup(c)] if column is not None and (
            column.spec in wanted or registry.canonical(column.metric, None) in wanted)]
        if not chosen:
            raise OptionError("--metrics", f"none of {', '.join(wanted)} is in every run "
                             f"(they have {', '.join(s for _, s in out)})")
        out = chosen
    if not out:
        raise OptionError("runs", "they have no metric column in common")
    return out


def option_warnings(baseline: RunTable, run: RunTable) -> list[str]:
    """A warning naming the options (of ``NUMBER_OPTIONS``) in which run and baseline differ."""
    values = {}
    for o in NUMBER_OPTIONS:  # run.json leaves some out when not given (no --rerank): their default, then
        try:
            values[o] = _plain(recorded_value(baseline.options, o)), _plain(recorded_value(run.options, o))
        except KeyError:  # not recorded by one of them (an older run): not compared
            continue
    differ = [o for o, (a, b) in values.items() if a != b]
    if not differ:
        return []
    shown = "; ".join(f"{o} {values[o][0]} vs {values[o][1]}" for o in differ)
    return [f"{run.name} and {baseline.name} were evaluated with different options ({shown}): their metrics "
            "may differ for that reason alone"]


def _plain(value):
    return list(value) if isinstance(value, (list, tuple)) else value


def _values(table: pa.Table, column: str, rows: np.ndarray) -> np.ndarray:
    return table.column(column).to_numpy(zero_copy_only=False).astype(np.float64)[rows]


def _strings(table: pa.Table, column: str, rows: np.ndarray) -> list:
    if column not in table.column_names:
        return [None] * len(rows)
    values = table.column(column).to_pylist()
    return [values[i] for i in rows.tolist()]


def compare_runs(runs: Sequence[RunTable], method: intervals.Method, metrics: Sequence[str] | None = None,
                 intersect: bool = False, cmc_ks: Sequence[int] = ()) -> Comparison:
    """Every run after the first against the first, for every common metric and every query/group row
    (group ``all`` first; the groups are the baseline's ``group`` column), Holm over all rows.

    ``cmc_ks``: also the CMC of both runs of each pair at these k with their intervals (when every run has
    ``first_rank``), from the same resamples as the ``all`` row's differences: one bootstrap, not three."""
    if len(runs) < 2:
        raise OptionError("runs", "give at least two runs to compare (the first is the baseline)")
    names = [r.name for r in runs]
    if len(set(names)) != len(names):
        raise OptionError("runs", f"two runs have the same name {next(n for n in names if names.count(n) > 1)!r}")
    method = method.checked()
    baseline = runs[0]
    columns = metric_columns(runs, metrics)
    higher = [registry.direction(s) != "lower" for _, s in columns]
    rows: list[Row] = []
    warnings: list[str] = []
    diffs = []
    with_cmc = bool(cmc_ks) and all("first_rank" in r.per_query.column_names for r in runs)
    bands: dict[str, tuple] = {}
    for run in runs[1:]:
        warnings += dataset_check(baseline, run)  # before the key sets: different data is the first thing to say
        pairing = pair_queries(baseline, run, intersect)
        check_finite(baseline, columns, pairing.baseline_rows)
        check_finite(run, columns, pairing.run_rows)
        warnings += option_warnings(baseline, run)
        a = np.column_stack([_values(baseline.per_query, c, pairing.baseline_rows) for c, _ in columns])
        b = np.column_stack([_values(run.per_query, c, pairing.run_rows) for c, _ in columns])
        groups = _strings(baseline.per_query, "group", pairing.baseline_rows)
        selections = [("all", np.ones(len(pairing.keys), bool))]
        if "group" in baseline.per_query.column_names:
            labels = np.asarray(groups, dtype=object)
            selections += [(g, labels == g) for g in sorted({g for g in groups if g is not None})]
        for group, sel in selections:
            if group == "all" and with_cmc:
                hits = [_hits(t.per_query, r, cmc_ks) for t, r in ((baseline, pairing.baseline_rows),
                                                                   (run, pairing.run_rows))]
                d = intervals.defined_differences(a, b)
                low, high = intervals.mean_interval(np.column_stack([d, *hits]), method.level, method.resamples,
                                                    method.seed)
                width, k = d.shape[1], len(cmc_ks)
                results = intervals.compare_paired(a, b, method, higher, (low[:width], high[:width]))
                for i, (name, h) in enumerate(((baseline.name, hits[0]), (run.name, hits[1]))):
                    part = slice(width + i * k, width + (i + 1) * k)
                    bands.setdefault(name, (h.mean(axis=0), low[part], high[part]))
            else:
                results = intervals.compare_paired(a[sel], b[sel], method, higher)
            for (_, summary), result in zip(columns, results):
                rows.append(Row(baseline.name, run.name, group, summary, result))
        diffs.append(_diff_table(baseline, run, pairing, columns, a, b, groups))
    adjusted = intervals.holm([r.result.p_randomization for r in rows])
    rows = [Row(r.baseline, r.run, r.group, r.metric, r.result, float(p)) for r, p in zip(rows, adjusted)]
    return Comparison(names, rows, pa.concat_tables(diffs), method, warnings,
                      _bands_table(bands, cmc_ks) if with_cmc else None)


def _hits(table: pa.Table, rows: np.ndarray, ks: Sequence[int]) -> np.ndarray:
    """[0 < r_1 <= k] per paired query and k: the CMC's per-query values."""
    first = table.column("first_rank").fill_null(0).to_numpy()[rows]
    k = np.asarray(ks, np.int64)
    return ((first[:, None] > 0) & (first[:, None] <= k[None, :])).astype(np.float64)


def _bands_table(bands: Mapping[str, tuple], ks: Sequence[int]) -> pa.Table:
    names = [n for n in bands for _ in ks]

    def column(i: int) -> pa.Array:
        return pa.array(np.concatenate([bands[n][i] for n in bands]) if bands else [], pa.float64())

    return pa.table({"run": pa.array(names, pa.string()), "k": pa.array(list(ks) * len(bands), pa.int64()),
                     "cmc": column(0), "ci_low": column(1), "ci_high": column(2)})


def _diff_table(baseline: RunTable, run: RunTable, pairing: Pairing, columns, a, b, groups) -> pa.Table:
    """per_query_diff.parquet's rows of one run: the pair's key, group, rank-1 keys, then per metric
    the baseline's value, the run's and d = run − baseline."""
    n = len(pairing.keys)
    out: dict[str, pa.Array] = {
        "baseline": pa.array([baseline.name] * n, pa.string()), "run": pa.array([run.name] * n, pa.string()),
        "key": pa.array(pairing.keys, pa.string()), "group": pa.array(groups, pa.string()),
        "top1_key_baseline": pa.array(_strings(baseline.per_query, "top1_key", pairing.baseline_rows), pa.string()),
        "top1_key_run": pa.array(_strings(run.per_query, "top1_key", pairing.run_rows), pa.string())}
    for j, (column, _) in enumerate(columns):
        out[f"{column}_baseline"] = pa.array(a[:, j], pa.float64(), from_pandas=True)
        out[f"{column}_run"] = pa.array(b[:, j], pa.float64(), from_pandas=True)
        out[f"{column}_diff"] = pa.array(b[:, j] - a[:, j], pa.float64(), from_pandas=True)
    return pa.table(out)



# --------------------------------------------------------------------------- printing (str, notebooks, LaTeX)

#: decimals a mean is shown with (the terminal table's, the LaTeX table's)
DIGITS = 4
MARKS_NOTE = "* ** ***: Holm-adjusted two-sided sign-flip p < 0.05, 0.01, 0.001"


@dataclass(frozen=True)
class MeanTable:
    """The mean of every metric of every run on its paired queries, one query/group row of a comparison: what
    ``print``, a notebook and the LaTeX table show. Row 0 is the baseline, its means over the queries paired
    with the first run (``baseline_varies``: another pair paired other queries, which only ``intersect`` allows,
    so the baseline's means there differ)."""

    runs: list[str]
    #: summary columns (``map``), in the comparison's order
    metrics: list[str]
    #: runs x metrics; NaN where a pair has no row of this group
    means: np.ndarray
    #: runs x metrics Holm-adjusted p against the baseline; NaN on the baseline's row
    p_holm: np.ndarray
    #: paired queries of each pair
    n: list[int]
    baseline_varies: bool


def mean_table(comparison: Comparison, group: str = "all") -> MeanTable:
    """The means of ``group``'s rows: mean_baseline (of the first pair) for the baseline, mean_run for the others."""
    metrics = list(dict.fromkeys(r.metric for r in comparison.rows))
    by = {(r.run, r.metric): r for r in comparison.rows if r.group == group}
    means = np.full((len(comparison.runs), len(metrics)), np.nan)
    p = np.full_like(means, np.nan)
    varies = False
    for j, metric in enumerate(metrics):
        baselines = [by[(run, metric)].result.mean_baseline for run in comparison.runs[1:] if (run, metric) in by]
        if baselines:
            means[0, j] = baselines[0]
            varies |= any(b != baselines[0] and b == b for b in baselines)
        for i, run in enumerate(comparison.runs[1:], start=1):
            if (run, metric) in by:
                means[i, j], p[i, j] = by[(run, metric)].result.mean_run, by[(run, metric)].p_holm
    n = sorted({r.result.n for r in by.values()})
    return MeanTable(list(comparison.runs), metrics, means, p, n, varies)


def best_cells(table: MeanTable, digits: int = DIGITS) -> np.ndarray:
    """runs x metrics: True where a mean is its column's best by the metric's direction (registry: the highest,
    or the lowest where lower is better), compared as shown at ``digits`` decimals (values that print alike are
    alike best). None in a column without a direction or without a defined mean."""
    shown = np.round(table.means, digits)
    out = np.zeros(shown.shape, bool)
    for j, metric in enumerate(table.metrics):
        direction = registry.direction(metric)
        column = shown[:, j]
        if direction is None or not np.isfinite(column).any():
            continue
        best = np.nanmin(column) if direction == "lower" else np.nanmax(column)
        out[:, j] = column == best
    return out


def _span(n: Sequence[int]) -> str:
    return "no" if not n else str(n[0]) if len(n) == 1 else f"{n[0]}-{n[-1]}"


def _mean_text(value: float) -> str:
    return "–" if not value == value else f"{value:.{DIGITS}f}"


def _about(comparison: Comparison, table: MeanTable) -> list[str]:
    """The lines under the table: what was paired, what the marks mean, where the rest is."""
    m = comparison.method
    lines = [f"baseline {table.runs[0]}; {_span(table.n)} paired queries; {MARKS_NOTE} against the baseline "
             f"({m.permutations} sign flips); {100 * m.level:g}% intervals ({m.resamples} resamples): .table()"]
    if table.baseline_varies:
        lines.append(f"{table.runs[0]}'s means: on the queries paired with {table.runs[1]} (each pair has its own)")
    if comparison.warnings:
        lines.append(f"{len(comparison.warnings)} warning{'s' if len(comparison.warnings) > 1 else ''}: .warnings")
    return lines


def format_means(comparison: Comparison, group: str = "all") -> str:
    """The text table: a run per line (the baseline first), a metric per column, the mean and its marks."""
    table = mean_table(comparison, group)
    labels = [registry.label(m) or m for m in table.metrics]
    marks = [[intervals.marks(p) for p in ps] for ps in table.p_holm]
    columns = [list(table.runs)]  # the numbers right-aligned, their marks after them: labels align
    head = ["run"]
    for j, label in enumerate(labels):
        numbers = [_mean_text(v) for v in table.means[:, j]]
        width, room = max(len(label), *map(len, numbers)), max(len(m[j]) for m in marks)
        head.append(label.rjust(width) + " " * room)
        columns.append([x.rjust(width) + m[j].ljust(room) for x, m in zip(numbers, marks)])
    rows = [list(r) for r in zip(*columns)]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in [head, *rows]]
    return "\n".join([lines[0], "  ".join("-" * w for w in widths), *lines[1:], *_about(comparison, table)])


def means_html(comparison: Comparison, group: str = "all") -> str:
    """The same table as :func:`format_means` as HTML, the best mean of each column in bold."""
    from html import escape  # only a notebook asks for it

    table = mean_table(comparison, group)
    best = best_cells(table)
    head = "".join(f"<th>{escape(registry.label(m) or m)}</th>" for m in table.metrics)
    body = []
    for i, run in enumerate(table.runs):
        cells = []
        for j in range(len(table.metrics)):
            text = _mean_text(table.means[i, j])
            cells.append(f'<td style="text-align:right">{f"<b>{text}</b>" if best[i, j] else text}'
                         f"{intervals.marks(table.p_holm[i, j])}</td>")
        body.append(f"<tr><th>{escape(run)}</th>{''.join(cells)}</tr>")
    note = escape("; ".join(_about(comparison, table)))
    return (f'<table><caption style="caption-side:bottom">{note}; bold: the best of each column</caption>'
            f"<thead><tr><th>run</th>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>")
