"""Regression gates of nightly runs: what decides whether a run passes.

A gate compares a run's ``group == "all"`` summary row with the previous run
(the latest earlier date of the same evaluation in the history) and with a
pinned baseline (metric values, or a history date)::

    drop = old - new          (new - old where lower is better)
    a check fails when drop > max_drop, or when the run has no value for the metric

``gate_checks`` returns one dict per check; ``check_gates`` only the failed
ones. Reading and writing the history is ``evalcore.io.history``.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from evalcore.core import registry
from evalcore.io.history import all_rows, check_date, previous_run

#: slack for comparing a drop with its limit (values are correctly rounded means)
EPS = 1e-12


def _number(value) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(value) else value


# --------------------------------------------------------------------------- gates


def gate_checks(history: pa.Table, evaluation: str, run_date: str, gates: Mapping[str, Mapping],
                baseline: Mapping | str | None = None) -> list[dict]:
    """Every gate check of one run, each a dict with ``passed`` True / False / None (not checkable).

    ``gates``: ``{metric: {"max_drop_previous": x, "max_drop_baseline": y, "higher_is_better": bool}}``
    (either limit may be missing; ``higher_is_better`` defaults to the metric's direction in core.registry,
    else true). ``baseline``: metric values ``{metric: value}``, a history
    date ``"YYYY-MM-DD"``, or None. drop = old - new (new - old where lower is better);
    a check fails when drop > max_drop, or when the run has no value for the metric.
    """
    rows = all_rows(history, evaluation)
    current = rows.get(run_date)
    previous = previous_run(history, evaluation, run_date, rows)
    if isinstance(baseline, str):
        base_date = check_date(baseline, f"baseline.{evaluation}")
        base_row = rows.get(base_date)
        base_label = f"baseline run {base_date}"
    elif baseline is not None:
        base_date, base_row, base_label = None, dict(baseline), "pinned baseline"
    else:
        base_date, base_row, base_label = None, None, None
    checks = []
    for metric, gate in gates.items():
        higher = gate.get("higher_is_better", registry.direction(metric) != "lower")  # unknown: higher
        new = _number(current.get(metric)) if current else None
        refs: list[tuple[str, str | None, Any, str | None, Any]] = []  # (reference, date, old, label, limit)
        if gate.get("max_drop_previous") is not None:
            if previous is None:
                refs.append(("previous", None, None, "no previous run", gate["max_drop_previous"]))
            else:
                refs.append(("previous", previous[0], (previous[1] or {}).get(metric),
                             f"previous run {previous[0]}", gate["max_drop_previous"]))
        if gate.get("max_drop_baseline") is not None and baseline is not None:
            if base_row is None:
                refs.append(("baseline", base_date, "missing", base_label, gate["max_drop_baseline"]))
            else:
                refs.append(("baseline", base_date, base_row.get(metric), base_label, gate["max_drop_baseline"]))
        for reference, ref_date, old_raw, label, limit in refs:
            check = {"evaluation": evaluation, "run_date": run_date, "metric": metric, "reference": reference,
                     "reference_date": ref_date, "old": None, "new": new, "drop": None,
                     "max_drop": float(limit), "higher_is_better": bool(higher), "passed": None, "message": ""}
            old = None if old_raw == "missing" else _number(old_raw)
            check["old"] = old
            if reference == "previous" and ref_date is None:
                check["message"] = f"{evaluation}: {metric}: no previous run before {run_date} (not checked)"
            elif old_raw == "missing":
                check["passed"] = False
                check["message"] = (f"{evaluation}: {metric}: {label} is not in the history, so the baseline "
                                    f"gate cannot be checked (new value {_fmt(new)})")
            elif new is None:
                check["passed"] = False
                check["message"] = (f"{evaluation}: {metric}: the run of {run_date} has no value "
                                    f"(old value {_fmt(old)}, {label})")
            elif old is None:
                check["message"] = f"{evaluation}: {metric}: {label} has no value (not checked)"
            else:
                drop = (old - new) if higher else (new - old)
                check["drop"] = drop
                check["passed"] = not drop > limit + EPS
                how = (("fell" if higher else "rose") + f" by {_fmt(abs(drop))}") if drop > 0 else "did not get worse"
                check["message"] = (f"{evaluation}: {metric} {how}: old {_fmt(old)} ({label}), new {_fmt(new)} "
                                    f"({run_date}); allowed drop {_fmt(limit)} (max_drop_{reference})")
            checks.append(check)
    return checks


def check_gates(history: pa.Table, evaluation: str, run_date: str, gates: Mapping[str, Mapping],
                baseline: Mapping | str | None = None) -> list[dict]:
    """The failed checks of ``gate_checks`` (an empty list when every gate holds)."""
    return [c for c in gate_checks(history, evaluation, run_date, gates, baseline) if c["passed"] is False]


def _fmt(value) -> str:
    return "none" if value is None else f"{value:.6g}"
