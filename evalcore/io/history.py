"""The nightly history store: reading and writing it (its regression gates are ``jobs.gates``).

The history is a folder of Parquet files, one per (evaluation, run date)::

    HISTORY/<evaluation>/<YYYY-MM-DD>.parquet     that run's summary rows + run_date, evaluation
    HISTORY/.lock                                 fcntl lock of writers and readers

Every file is written to a hidden temporary file in its own folder and then
``os.replace``d into place, so a reader sees the old file or the new one,
never half of one; rerunning a date replaces that date's file and nothing
else. Writers that read and write take ``locked(HISTORY)`` (an exclusive
``fcntl.flock`` on ``HISTORY/.lock``), so two nightly runs at once never lose
each other's rows.

``all_rows`` and ``previous_run`` read a run's ``group == "all"`` row and
the previous run (the latest earlier date of the same evaluation), which
the gates (``evalcore.jobs.gates``) compare.
"""
from __future__ import annotations

import datetime as _dt
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from evalcore.errors import InputError, foreign_reason, input_error
from evalcore.io.files import atomic_write, locked

LOCK = ".lock"
#: evaluation names become folder names: letters, digits, ``._-``, not starting with a dot
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


# --------------------------------------------------------------------------- names, dates, files


def check_name(name) -> str:
    if not isinstance(name, str) or not NAME.match(name):
        raise InputError(f"evaluation name {name!r}: use letters, digits, '.', '_' and '-' "
                         "(at most 128, not starting with '.')")
    return name


def check_date(text, what: str = "--date") -> str:
    """``YYYY-MM-DD`` (a real date), else an InputError naming ``what``."""
    if isinstance(text, _dt.date):
        return text.isoformat()
    try:
        if not DATE.match(str(text)):
            raise ValueError
        return _dt.date.fromisoformat(str(text)).isoformat()
    except ValueError:
        raise input_error(what, f"{text!r} is not a date YYYY-MM-DD") from None


def history_lock(history_dir):
    """``locked(HISTORY/.lock)``: hold it around reading and writing the history."""
    return locked(Path(history_dir) / LOCK)


def run_path(history_dir, run_date: str, evaluation: str) -> Path:
    return Path(history_dir) / check_name(evaluation) / f"{check_date(run_date, 'run_date')}.parquet"


# --------------------------------------------------------------------------- read and write


def _empty() -> pa.Table:
    return pa.table({"run_date": pa.array([], pa.string()), "evaluation": pa.array([], pa.string())})


def read_history(history_dir) -> pa.Table:
    """Every run of the history as one table (columns of all runs; missing ones null), by date then name.

    Hidden files (temporaries of writers) are skipped; a file that is not
    readable Parquet is an InputError naming it.
    """
    root = Path(history_dir)
    if not root.is_dir():
        return _empty()
    tables = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for path in sorted(folder.glob("*.parquet")):
            if path.name.startswith("."):
                continue
            try:
                table = pq.read_table(path)
            except (OSError, pa.ArrowException) as exc:
                raise InputError(f"history {path}: not a readable Parquet file ({foreign_reason(exc)})") from None
            missing = [c for c in ("run_date", "evaluation") if c not in table.column_names]
            if missing:
                raise InputError(f"history {path}: no {missing[0]} column (not a run that evalcore nightly wrote)")
            tables.append(table)
    if not tables:
        return _empty()
    return _joined(tables, f"history {root}")


def _joined(tables: list[pa.Table], where: str) -> pa.Table:
    """The runs as one table, by date then name; runs whose columns cannot be joined are an InputError."""
    try:
        table = pa.concat_tables(tables, promote_options="permissive")
    except pa.ArrowException as exc:
        raise input_error(where, f"runs whose columns do not join ({foreign_reason(exc)})") from None
    return table.sort_by([("run_date", "ascending"), ("evaluation", "ascending")])  # stable: groups keep order


def check_history(history_dir, run_date: str, significance=()) -> pa.Table:
    """Everything a run of ``run_date`` will read from the history, read now, before it writes anything.

    Every summary file (``read_history``: readable Parquet, with run_date and
    evaluation columns, whose columns join), and the per-query file of the
    previous run of each evaluation in ``significance`` (those with a
    significance gate). A bad file is an InputError naming it. Returns the
    history as read.
    """
    snapshot = read_history(history_dir)
    for evaluation in significance:
        previous = previous_run(snapshot, evaluation, run_date)
        if previous is not None:
            read_per_query(history_dir, previous[0], evaluation)
    return snapshot


def check_joins(history: pa.Table, run_date: str, evaluation: str, summary: pa.Table, where: str) -> None:
    """The run's summary rows join the history's columns (else writing them would break every later read)."""
    _joined([history, run_table(run_date, evaluation, summary)], where)


def run_table(run_date: str, evaluation: str, summary: pa.Table) -> pa.Table:
    """The summary rows with run_date and evaluation as the first columns."""
    run_date, evaluation = check_date(run_date, "run_date"), check_name(evaluation)
    rest = summary.drop_columns([c for c in ("run_date", "evaluation") if c in summary.column_names])
    n = summary.num_rows
    cols = {"run_date": pa.array([run_date] * n, pa.string()), "evaluation": pa.array([evaluation] * n, pa.string())}
    cols.update({name: rest.column(name) for name in rest.column_names})
    return pa.table(cols)


def write_run(history_dir, run_date: str, evaluation: str, summary: pa.Table) -> Path:
    """Write (or replace) ``history/<evaluation>/<run_date>.parquet`` atomically; nothing else changes."""
    path = run_path(history_dir, run_date, evaluation)
    atomic_write(path, run_table(run_date, evaluation, summary))
    return path


#: the sub-folder of an evaluation's history holding what significance gates need of each run
PER_QUERY = "per_query"


def per_query_path(history_dir, run_date: str, evaluation: str) -> Path:
    """``history/<evaluation>/per_query/<run_date>.parquet`` (not a summary: read_history does not read it)."""
    return Path(history_dir) / check_name(evaluation) / PER_QUERY / f"{check_date(run_date, 'run_date')}.parquet"


def write_per_query(history_dir, run_date: str, evaluation: str, table: pa.Table) -> Path:
    """Keep a run's per-query values (key and gated metrics) for the next run's significance gates."""
    path = per_query_path(history_dir, run_date, evaluation)
    atomic_write(path, table)
    return path


def read_per_query(history_dir, run_date: str, evaluation: str) -> pa.Table | None:
    """The per-query values kept of a run, or None when the history has none (an older run)."""
    path = per_query_path(history_dir, run_date, evaluation)
    if not path.is_file():
        return None
    try:
        return pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        raise InputError(f"history {path}: not a readable Parquet file ({foreign_reason(exc)})") from None


# --------------------------------------------------------------------------- queries


def all_rows(history: pa.Table, evaluation: str) -> dict[str, dict]:
    """``{run_date: the run's group "all" row}`` of one evaluation (every row when there are no groups)."""
    out: dict[str, dict] = {}
    for row in history.to_pylist():
        if row.get("evaluation") == evaluation and row.get("group", "all") in ("all", None):
            out.setdefault(str(row["run_date"]), row)
    return out


def run_dates(history: pa.Table, evaluation: str) -> list[str]:
    return sorted(all_rows(history, evaluation))


def previous_run(history: pa.Table, evaluation: str, run_date: str, rows: dict | None = None):
    """(date, summary row "all") of the latest run of ``evaluation`` before ``run_date``, or None."""
    rows = all_rows(history, evaluation) if rows is None else rows
    earlier = sorted(d for d in rows if d < run_date)
    return (earlier[-1], rows[earlier[-1]]) if earlier else None
