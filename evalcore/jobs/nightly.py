"""``evalcore nightly JOB.toml [--date YYYY-MM-DD]``: scheduled evaluations, history, regression gates.

Before any evaluation the history is read back whole and checked
(``check_history``: every summary file, and the per-query values a
significance gate will read), and a ``scheduler`` is checked to be a Dask
scheduler: a bad file or address is exit 2 and nothing is written, so an
ungated run never becomes the next night's "previous".

For each ``[[evaluation]]`` of the job file: evaluate into
``REPORTS/<date>/<name>/`` (an atomic report folder, replaced on a rerun of
the same date), then, holding ``HISTORY/.lock``, write the run's summary rows
to ``HISTORY/<name>/<date>.parquet`` (temporary file + os.replace) and read
the whole history back. The gates are checked against that snapshot and
``REPORTS/<date>/trend.html`` and ``REPORTS/<date>/gates.json`` are written.

Exit status: 0 every gate holds; 3 a gate failed (one line per failure on
stderr naming evaluation, metric, old and new value and the reference);
2 a bad job file or an evaluation with bad input; 1 anything else. An
evaluation that fails does not stop the others; its history is not written.

The job file format is documented in ``jobs/nightly.example.toml``. Relative
paths in it are relative to the current directory. ``load_job`` checks the
whole file before any work, so a bad one writes nothing: unknown keys and
wrong types; a table under a key that takes one value; every metric a gate,
a baseline or ``trend_metrics`` names against the summary columns the
evaluation will write (``evaluation_metrics``); ``memory_limit`` parsed and
held to the engine's worker memory floor; ``storage_options`` checked as the
mapping it is and passed to the evaluation as written.
"""
from __future__ import annotations

import datetime as _dt
import difflib
import json
import math
import os
import sys
import tomllib
from collections.abc import Set
from typing import Any, cast

import fsspec

from evalcore import declarations
from evalcore.core import comparison, intervals, protocols, registry
from evalcore.declarations import MAX_INTEGER_OPTION
from evalcore.engine.faults import check_stall_timeout
from evalcore.engine.options import (
    Options,
    check_expansion,
    check_rerank,
    parse_expansion,
    parse_rerank,
)
from evalcore.errors import ClusterError, ClusterUnreachable, InputError, OptionError, foreign_reason, input_error
from evalcore.io import history as h
from evalcore.io import report
from evalcore.io.dataset import is_url, local_path
from evalcore.jobs.common import (
    ENGINE_FIELDS,
    EXIT_FAILED,
    EXIT_GATE,
    EXIT_INPUT,
    EXIT_OK,
    EvaluationSpec,
    RunSettings,
    check_memory_limit,
    check_storage_options,
    check_workers,
    parse_number,
    run_evaluation,
)
from evalcore.jobs.gates import gate_checks
from evalcore.render import pages

#: the job file's own keys and the options it takes at the top and in each evaluation (evalcore.declarations)
TOP_KEYS = {"reports", "history", "trend_metrics", "evaluation", "gates", "baseline"} | declarations.job_keys("top")
EVALUATION_KEYS = {"name", "dataset", "gates"} | declarations.job_keys("evaluation")
GATE_KEYS = {"max_drop_previous", "max_drop_baseline", "higher_is_better", "significance"}
#: keys whose value is a table; every other key takes one value (or, for ks and trend_metrics, an array)
TABLE_KEYS = {"evaluation", "gates", "baseline", "storage_options"}
#: the cut-offs of an evaluation that gives no ks (evaluate's default)
DEFAULT_KS = cast(tuple[int, ...], declarations.declared("ks").default)


# --------------------------------------------------------------------------- the job file


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _unknown(where: str, table: dict, allowed: set) -> None:
    extra = sorted(set(table) - allowed)
    if extra:
        raise input_error(where, f"unknown key(s) {', '.join(map(repr, extra))} "
                         f"(allowed: {', '.join(sorted(allowed))})")


def _flat(where: str, table: dict, tables: Set[str] = frozenset()) -> None:
    """A nested table under a key that takes one value (``ks = { a = 1 }``, ``[gates.map.x]``) is refused."""
    nested = [k for k, v in table.items() if isinstance(v, dict) and k not in tables]
    if nested:
        raise InputError(f"{where}: {nested[0]} is a table, but it takes a single value"
                         + (f" ({', '.join(sorted(tables))} are the tables here)" if tables else ""))


def evaluation_metrics(ev: dict) -> list[str]:
    """The summary columns the evaluation ``ev`` will write: what its gates, baseline and trend may name.

    From its options (metrics, ks, map_at, threshold, target_fpir, ties) through the
    registry and the code that builds the summary (``registry.summary_columns``).
    """
    return registry.summary_columns(ev.get("metrics"), ev.get("ks", DEFAULT_KS), ev.get("map_at"),
                                    ev.get("threshold"), ev.get("target_fpir"), ev.get("ties", "pessimistic"))


def _check_metric(where: str, metric: str, known: list[str], whose: str) -> None:
    """InputError naming ``metric`` and listing ``known`` (with the likely one first) unless it is known."""
    if metric in known:
        return
    close = [k for k in known if k.lower() == str(metric).lower()] or difflib.get_close_matches(str(metric), known, 1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise input_error(where, f"{metric!r} is not a metric {whose} writes{hint} (known: {', '.join(known)})")


def _gates(where: str, table) -> dict:
    if not isinstance(table, dict):
        raise input_error(where, "must be a table of [gates.METRIC] tables")
    out = {}
    for metric, gate in table.items():
        if not isinstance(gate, dict):
            raise InputError(f"{where}.{metric}: must be a table like {{ max_drop_previous = 0.01 }}")
        _unknown(f"{where}.{metric}", gate, GATE_KEYS)
        _flat(f"{where}.{metric}", gate)
        for key in ("max_drop_previous", "max_drop_baseline"):
            if key in gate and not (_is_number(gate[key]) and gate[key] >= 0):
                raise InputError(f"{where}.{metric}.{key}: {gate[key]!r} must be a number >= 0")
        if "significance" in gate and not (_is_number(gate["significance"]) and 0 < gate["significance"] < 1):
            raise InputError(f"{where}.{metric}.significance: {gate['significance']!r} must be a level "
                             "strictly between 0 and 1 (0.05)")
        if "significance" in gate and "max_drop_previous" not in gate:
            raise InputError(f"{where}.{metric}.significance: applies to max_drop_previous (a paired test against "
                             "the previous run's queries); give max_drop_previous too")
        if "significance" in gate and registry.lookup(metric) is None:
            raise InputError(f"{where}.{metric}.significance: {metric} is not a mean over queries, so it has no "
                             "paired test")
        if "higher_is_better" in gate and not isinstance(gate["higher_is_better"], bool):
            raise InputError(f"{where}.{metric}.higher_is_better: must be true or false")
        if not ({"max_drop_previous", "max_drop_baseline"} & set(gate)):
            raise InputError(f"{where}.{metric}: give max_drop_previous and/or max_drop_baseline")
        out[metric] = dict(gate)
    return out


def _evaluation(i: int, ev, where: str) -> dict:
    if not isinstance(ev, dict):
        raise input_error(where, f"evaluation {i + 1} must be a table")
    label = f"{where}: evaluation {ev.get('name', i + 1)!r}"
    _unknown(label, ev, EVALUATION_KEYS)
    _flat(label, ev, TABLE_KEYS & EVALUATION_KEYS)
    for key in ("name", "dataset"):
        if not isinstance(ev.get(key), str) or not ev[key]:
            raise input_error(label, f"{key} must be given as a string")
    try:
        h.check_name(ev["name"])
    except InputError as exc:
        raise input_error(where, exc.message, exc.rows) from None
    declared = [d for d in declarations.DECLARATIONS if d.job == "evaluation" and d.name in ev]
    for d in declared:
        if isinstance(d.constraint, declarations.Choice):  # protocols: the registry's, also those a test adds
            allowed = protocols.names() if d.name == "protocol" else d.constraint.values
            if ev[d.name] not in allowed:
                raise input_error(label, f"{d.name} {ev[d.name]!r} is not one of {', '.join(allowed)}")
    if "ks" in ev:
        ks = ev["ks"]
        if isinstance(ks, str):
            ks = [x for x in ks.split(",") if x.strip()]
            try:
                ks = [int(x) for x in ks]
            except ValueError:
                raise input_error(label, f"ks {ev['ks']!r} must list positive integers") from None
        if not isinstance(ks, list) or not ks or not all(isinstance(k, int) and not isinstance(k, bool) and k > 0
                                                          for k in ks):
            raise input_error(label, f"ks {ev['ks']!r} must be a list of positive integers")
        if max(ks) > MAX_INTEGER_OPTION:
            raise input_error(label, f"ks {max(ks)} is too large: at most {MAX_INTEGER_OPTION:,}")
        ev["ks"] = ks
    # each value as its declaration says, a TOML value of that type (a job file writes 5, not "5" or 5.0)
    for d in declared:
        key, value, constraint = d.name, ev[d.name], d.constraint
        if isinstance(constraint, declarations.PositiveInteger):
            if not (isinstance(value, int) and not isinstance(value, bool) and value > 0):
                raise input_error(label, f"{key} {value!r} must be a positive integer")
            if value > constraint.high:
                raise input_error(label, f"{key} {value!r} is too large: at most {constraint.high:,}")
    for d in declared:
        if isinstance(d.constraint, (declarations.Number, declarations.Fraction)) and not _is_number(ev[d.name]):
            raise input_error(label, f"{d.name} {ev[d.name]!r} must be a number")
    for d in declared:
        if isinstance(d.constraint, declarations.Switch) and not isinstance(ev[d.name], bool):
            raise input_error(label, f"{d.name} must be true or false")
    _ranking_options(label, ev)
    if "metrics" in ev:  # names the registry knows (core.registry), as a list or "map,recall@5"
        ev["metrics"] = list(registry.select(ev["metrics"], f"{label}: metrics"))
    if "storage_options" in ev:
        ev["storage_options"] = check_storage_options(ev["storage_options"], f"{label}: storage_options")
    ev["gates"] = _gates(f"{label}: gates", ev.get("gates", {}))
    return ev


def _ranking_options(label: str, ev: dict) -> None:
    """``rerank`` (true, "k1,k2,lambda" or [k1, k2, lambda]; false: none), ``query_expansion`` and
    ``database_augmentation`` ("K,ALPHA" or [K, ALPHA]), checked as the command line checks them, in place."""
    try:
        if "rerank" in ev:
            value = ev.pop("rerank")
            if value is True or isinstance(value, str):
                ev["rerank"] = parse_rerank("" if value is True else value)
            elif isinstance(value, list):
                ev["rerank"] = check_rerank(value)
            elif value is not False:
                raise OptionError("--rerank", f"{value!r} is not true, false, \"k1,k2,lambda\" or [k1, k2, lambda]")
        for key in ("query_expansion", "database_augmentation"):
            option = "--" + key.replace("_", "-")
            if key in ev:
                value = ev[key]
                if isinstance(value, str):
                    ev[key] = parse_expansion(option, value)
                elif isinstance(value, list):
                    ev[key] = check_expansion(option, value)
                else:
                    raise input_error(option, f"{value!r} is not \"K,ALPHA\" or [K, ALPHA]")
    except InputError as exc:  # the file's key, not the command line's flag
        keys = {"--" + key.replace("_", "-"): key for key in ("rerank", "query_expansion", "database_augmentation")}
        raise input_error(label, exc.reworded(lambda text: keys.get(text, text)).message, exc.rows) from None


def load_job(path) -> dict:
    """The job file, checked: every problem is an InputError naming the file and the key."""
    where = str(path)
    try:
        with open(path, "rb") as fh:
            job = tomllib.load(fh)
    except FileNotFoundError:
        raise input_error(where, "no such job file") from None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise input_error(where, f"not a readable TOML file ({foreign_reason(exc)})") from None
    _unknown(where, job, TOP_KEYS)
    _flat(where, job, TABLE_KEYS & TOP_KEYS)
    for key in ("reports", "history"):
        if not isinstance(job.get(key), str) or not job[key]:
            raise input_error(where, f"{key} = \"DIR\" must be given")
    if is_url(job["history"]):
        raise input_error(where, f"history {job['history']!r} must be a local (or shared) folder: "
                         "it is locked with fcntl")
    evaluations = job.get("evaluation")
    if not isinstance(evaluations, list) or not evaluations:
        raise input_error(where, "give at least one [[evaluation]] with name and dataset")
    job["evaluation"] = [_evaluation(i, ev, where) for i, ev in enumerate(evaluations)]
    names = [ev["name"] for ev in job["evaluation"]]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise input_error(where, f"evaluation name(s) {', '.join(map(repr, dup))} given more than once")
    job["gates"] = _gates(f"{where}: gates", job.get("gates", {}))
    # every metric a gate, a baseline or the trend names must be one the evaluation writes
    known = {ev["name"]: evaluation_metrics(ev) for ev in job["evaluation"]}
    for ev in job["evaluation"]:
        whose = f"evaluation {ev['name']!r}"
        for metric in job["gates"]:
            _check_metric(f"{where}: gates.{metric}", metric, known[ev["name"]], whose)
        for metric in ev["gates"]:
            _check_metric(f"{where}: {whose}: gates.{metric}", metric, known[ev["name"]], whose)
    baseline = job.get("baseline", {})
    if not isinstance(baseline, dict):
        raise input_error(where, "baseline must be a table: [baseline.NAME] METRIC = VALUE, or NAME = \"DATE\"")
    for name, value in baseline.items():
        if name not in names:
            raise input_error(where, f"baseline.{name}: no [[evaluation]] is named {name!r}")
        if isinstance(value, str):
            baseline[name] = h.check_date(value, f"{where}: baseline.{name}")
        elif isinstance(value, dict):
            bad = [k for k, v in value.items() if not _is_number(v)]
            if bad:
                raise input_error(where, f"baseline.{name}.{bad[0]}: {value[bad[0]]!r} must be a number")
            for metric in value:
                _check_metric(f"{where}: baseline.{name}.{metric}", metric, known[name], f"evaluation {name!r}")
            gates = {**job["gates"], **next(ev for ev in job["evaluation"] if ev["name"] == name)["gates"]}
            missing = [m for m, g in gates.items() if g.get("max_drop_baseline") is not None and m not in value]
            if missing:
                raise input_error(where, f"baseline.{name}: no value for gated metric(s) {', '.join(missing)} "
                                 "(give them, or a baseline date)")
        else:
            raise input_error(where, f"baseline.{name}: give metric values ([baseline.{name}] map = 0.8) "
                             "or a history date (\"YYYY-MM-DD\")")
    job["baseline"] = baseline
    trend = job.get("trend_metrics")
    if trend is not None and not (isinstance(trend, list) and all(isinstance(m, str) for m in trend)):
        raise input_error(where, "trend_metrics must be a list of metric names")
    written = list(dict.fromkeys(m for ev in job["evaluation"] for m in known[ev["name"]]))
    for metric in trend or []:
        _check_metric(f"{where}: trend_metrics", metric, written, "any evaluation")
    if "scheduler" in job and not isinstance(job["scheduler"], str):
        raise input_error(where, "scheduler must be an address string like \"tcp://HOST:8786\"")
    # the run settings: the command line's checks (RunSettings), naming the file and the key
    if "workers" in job:
        check_workers(job["workers"], f"{where}: workers")
    if "memory_limit" in job:
        limit = job["memory_limit"]
        if isinstance(limit, bool) or not isinstance(limit, (str, int)):
            raise input_error(where, f"memory_limit must be a size like \"4GiB\" (or \"auto\"), not {limit!r}")
        # a number is bytes, as dask reads it; parsed and held to the workers' memory floor here, before any work
        job["memory_limit"] = check_memory_limit(str(limit), f"{where}: memory_limit")
    if "stall_timeout" in job:
        job["stall_timeout"] = check_stall_timeout(job["stall_timeout"], f"{where}: stall_timeout")
    return job


def evaluation_spec(ev: dict) -> EvaluationSpec:
    """What the job file's evaluation ``ev`` (checked by ``load_job``) computes, its TOML values as they are."""
    # the engine's options the job file gives (protocol and similarity: the spec's, None the dataset's); the
    # others keep Options' defaults, the declared ones
    given = {d.name: ev[d.name] for d in declarations.DECLARATIONS
             if d.job == "evaluation" and d.name in ev and d.name in ENGINE_FIELDS}
    for name in ("ks", "metrics"):  # lists in TOML, tuples in Options
        if name in given:
            given[name] = tuple(given[name])
    options = Options(**given)
    return EvaluationSpec(options, protocol=ev.get("protocol"), similarity=ev.get("similarity"),
                          sweep=bool(ev.get("sweep", False)), target_fpir=ev.get("target_fpir"))


def run_settings(ev: dict, args: Any, job: dict) -> RunSettings:
    """How the evaluation ``ev`` runs: the command line's cluster options, else the job file's, checked.

    ``--scheduler``/``--workers`` given replace both of the job file's;
    ``--memory-limit`` and ``--stall-timeout`` each replace the job file's.
    """
    scheduler, workers = getattr(args, "scheduler", None), getattr(args, "workers", None)
    if workers is not None:  # the command line's text
        workers = parse_number("--workers", str(workers), int)
    if scheduler is None and workers is None:
        scheduler, workers = job.get("scheduler"), job.get("workers")
    stall = getattr(args, "stall_timeout", None)
    stall = parse_number("--stall-timeout", str(stall)) if stall is not None else job.get("stall_timeout")
    return RunSettings(
        scheduler=scheduler, workers=workers,
        memory_limit=getattr(args, "memory_limit", None) or job.get("memory_limit", "auto"),
        storage_options=dict(ev.get("storage_options", {})),  # the checked table, typed as written
        chunk_rows=ev.get("chunk_rows"), stall_timeout=stall, overwrite=True).checked()


# --------------------------------------------------------------------------- output


def _join(base: str, *parts: str) -> str:
    if is_url(base):
        return "/".join([base.rstrip("/"), *parts])
    return os.path.join(base, *parts)


def write_text(path: str, text: str, storage_options: dict | None = None) -> None:
    """A small file, atomically on a local disk (object stores write whole objects anyway)."""
    if is_url(path):
        with fsspec.open(path, "wb", **(storage_options or {})) as fh:
            fh.write(text.encode())
    else:
        h.atomic_write(path, text.encode())


def today() -> str:
    return _dt.datetime.now(_dt.UTC).date().isoformat()


# --------------------------------------------------------------------------- the command


def check_history(history_dir: str, run_date: str, job: dict):
    """``history.check_history`` of everything this run will read (the per-query values of the previous run
    of each evaluation with a significance gate too), under the history's lock; an empty history when the
    folder does not exist yet (nothing is created here)."""
    significance = [ev["name"] for ev in job["evaluation"]
                    if any("significance" in g for g in {**job["gates"], **ev["gates"]}.values())]
    if not os.path.isdir(history_dir):
        return h.read_history(history_dir)
    with h.history_lock(history_dir):
        return h.check_history(history_dir, run_date, significance)


def cmd_nightly(args) -> int:
    job = load_job(args.job)
    run_date = h.check_date(args.date) if args.date else today()
    reports, history_dir = job["reports"], local_path(job["history"])
    day = _join(reports, run_date)
    # the command line and the job file's cluster options and folders, before any evaluation starts
    settings = run_settings(job["evaluation"][0], args, job)
    if not is_url(reports):
        report.check_creatable(f"{args.job}: reports", _join(day, job["evaluation"][0]["name"]))
    report.check_creatable(f"{args.job}: history", _join(history_dir, job["evaluation"][0]["name"]))
    # the history, read whole before anything is written: a bad file found after the reports and this run's
    # entry were written would leave an ungated run as the next night's "previous"
    history = check_history(history_dir, run_date, job)
    if settings.scheduler:  # an address that is not a Dask scheduler: one line now, not one per evaluation
        from evalcore.engine.cluster import check_scheduler_answers  # deferred: distributed

        check_scheduler_answers(settings.scheduler, "--scheduler" if getattr(args, "scheduler", None)
                                else f"{args.job}: scheduler")
    done, errors, per_query = {}, {}, {}
    for ev in job["evaluation"]:
        name = ev["name"]
        out = _join(day, name)
        settings = run_settings(ev, args, job)
        try:
            run_evaluation(ev["dataset"], out, evaluation_spec(ev), settings, quiet=args.quiet,
                           extra_run={"nightly": {"job": str(args.job), "run_date": run_date, "evaluation": name}})
            storage = dict(settings.storage_options)
            if not report.is_complete(out, storage):
                raise InputError(f"report {out}: incomplete after the run (no manifest)")
            tables = report.read_report(out, storage)
            done[name] = tables["summary"]
            per_query[name] = tables["per_query"]
        except ClusterUnreachable:
            raise
        except InputError as exc:
            errors[name] = (EXIT_INPUT, exc.message)
        except ClusterError as exc:  # a worker that kept dying or stalled: its message is the whole story
            errors[name] = (EXIT_FAILED, f"{exc.__class__.__name__}: {exc}")
        except Exception as exc:  # noqa: BLE001 - one evaluation failing must not stop the others
            errors[name] = (EXIT_FAILED, foreign_reason(exc, named=True))
        if name in errors:
            print(f"evalcore: error: nightly {run_date}: evaluation {name!r} failed: {errors[name][1]}",
                  file=sys.stderr, flush=True)

    for name, summary in done.items():  # a summary whose columns clash with the history's is not written
        try:
            h.check_joins(history, run_date, name, summary, f"history {history_dir}")
        except InputError as exc:
            errors[name] = (EXIT_INPUT, f"{exc.message}; its report was written, its history entry was not")
            print(f"evalcore: error: nightly {run_date}: evaluation {name!r}: {errors[name][1]}", file=sys.stderr)
    done = {name: summary for name, summary in done.items() if name not in errors}
    with h.history_lock(history_dir):
        for name, summary in done.items():
            h.write_run(history_dir, run_date, name, summary)
            kept = kept_per_query(per_query[name], {**job["gates"], **next(
                ev for ev in job["evaluation"] if ev["name"] == name)["gates"]})
            if kept is not None:
                h.write_per_query(history_dir, run_date, name, kept)
        snapshot = h.read_history(history_dir)

    checks = []
    for ev in job["evaluation"]:
        if ev["name"] in done:
            gates = {**job["gates"], **ev["gates"]}
            found = gate_checks(snapshot, ev["name"], run_date, gates, job["baseline"].get(ev["name"]))
            checks += [with_significance(c, gates[c["metric"]], per_query[ev["name"]], history_dir)
                       for c in found]
    failures = [c for c in checks if c["passed"] is False]

    metrics = job.get("trend_metrics")
    if metrics is not None:  # every name is one an evaluation writes (load_job); a history may not have it yet
        metrics = [m for m in metrics if m in snapshot.column_names]
    write_text(_join(day, "trend.html"), pages.render_trend_html(snapshot, metrics,
                                                                 title=f"Nightly evaluation trends ({run_date})"))
    write_text(_join(day, "gates.json"), json.dumps(
        {"run_date": run_date, "job": str(args.job), "evaluated": sorted(done), "errors": {k: v[1] for k, v in
                                                                                           errors.items()},
         "checks": checks, "failed": len(failures)}, indent=2, default=str) + "\n")

    for name, summary in done.items():
        row: dict[str, Any] = next((r for r in summary.to_pylist() if r.get("group") == "all"), {})
        # map and hit@1, or the first two of the evaluation's own metrics (--metrics ndcg@k,bpref)
        names = [m for m in ("map", "hit_at_1") if m in row] or registry.display_order(row, terminal=True)[:2]
        shown = ", ".join(f"{m} {row[m]:.4f}" for m in names if row.get(m) is not None)
        print(f"nightly {run_date}: {name}: {shown or 'no known queries'} -> {_join(day, name)}")
    for c in checks:
        if c["passed"] is None:
            print(f"nightly {run_date}: note: {c['message']}")
    for c in failures:
        print(f"evalcore: gate failed: {c['message']}", file=sys.stderr)
    print(f"nightly {run_date}: {len(done)} evaluation(s) done, {len(errors)} failed, "
          f"{len(failures)} gate failure(s); trend: {_join(day, 'trend.html')}", flush=True)
    if errors:
        return EXIT_INPUT if all(code == EXIT_INPUT for code, _ in errors.values()) else EXIT_FAILED
    return EXIT_GATE if failures else EXIT_OK


# --------------------------------------------------------------------------- gates that know noise


def kept_per_query(per_query, gates: dict):
    """What the next night's significance gates need of this run: the key and the per-query column of
    every metric gated with ``significance``, over the known queries; None when no gate has one."""
    columns = [registry.lookup(m).name for m, g in gates.items()  # type: ignore[union-attr]
               if "significance" in g and registry.lookup(m) is not None]
    columns = [c for c in dict.fromkeys(columns) if c in per_query.column_names]
    if not columns:
        return None
    keep = [c for c in ("key", "n_relevant", "n_judged") if c in per_query.column_names]
    return per_query.select(keep + columns)


def with_significance(check: dict, gate: dict, per_query, history_dir) -> dict:
    """A previous-run check of a gate with ``significance``: the paired test of the metric's per-query values
    against those the history kept of that run; the gate fails only when the drop exceeds its limit and
    the test rejects at that level. Records n, diff (new − old), its interval and the p-values."""
    if "significance" not in gate or check["reference"] != "previous" or check["reference_date"] is None:
        return check
    alpha = float(gate["significance"])
    column = registry.lookup(check["metric"])
    previous = h.read_per_query(history_dir, check["reference_date"], check["evaluation"])
    out = {**check, "significance": alpha}
    if column is None or previous is None or column.name not in previous.column_names \
            or column.name not in per_query.column_names:
        out["message"] += ("; the previous run's per-query values are not in the history, so the drop was not "
                           "tested for significance")
        return out
    old = comparison.RunTable("previous", previous)
    new = comparison.RunTable("run", per_query)
    pairing = comparison.pair_queries(old, new, intersect=True)
    a = previous.column(column.name).to_numpy(zero_copy_only=False).astype(float)[pairing.baseline_rows]
    b = per_query.column(column.name).to_numpy(zero_copy_only=False).astype(float)[pairing.run_rows]
    result = intervals.compare_paired(a, b, intervals.Method(), bool(check["higher_is_better"]))[0]
    rejects = intervals.significant(result.p_randomization, alpha)
    out.update({"n": result.n, "diff": result.diff, "ci_low": result.ci_low, "ci_high": result.ci_high,
                "ci_level": intervals.Method().level, "p_randomization": result.p_randomization,
                "p_ttest": result.p_ttest})
    test = (f"paired sign-flip test on {result.n} queries p = {result.p_randomization:.4g} "
            f"({'<' if rejects else '>='} {alpha:g}); 95% interval of the difference "
            f"[{result.ci_low:+.4g}, {result.ci_high:+.4g}]")
    if check["passed"] is False and not rejects:
        out["passed"] = True
        out["message"] += f"; not significant, so the gate holds: {test}"
    else:
        out["message"] += f"; {test}"
    return out
