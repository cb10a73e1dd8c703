"""Open-set threshold sweep (NIST FRVT-style FPIR/FNIR trade-off).

For a threshold T a query accepts its rank-1 item when top1_score >= T; the
item is correct when it is relevant (first_rank == 1). Over the known
queries FNIR(T) = #(not accepted-and-correct) / #known; over the unknown
queries FPIR(T) = #accepted / #unknown. Both only change at the distinct
rank-1 scores, so those (plus +inf, accepting nothing) are every decision
point there is.
"""
from __future__ import annotations

import math

import numpy as np
import pyarrow as pa

from evalcore.core.metrics import TARGET_FPIR_COLUMNS


def sweep(top1_score: np.ndarray, correct: np.ndarray, known: np.ndarray) -> dict[str, np.ndarray]:
    """tp, fp, fn, tn, fpir, fnir at every distinct threshold, ascending.

    One sort of the Q rank-1 scores; counts are cumulative sums from the top.
    """
    score = np.nan_to_num(np.asarray(top1_score, dtype=np.float64), nan=-np.inf)
    correct = np.asarray(correct, dtype=bool)
    known = np.asarray(known, dtype=bool)
    thresholds = np.unique(score[np.isfinite(score)])
    thresholds = np.append(thresholds, np.inf)
    order = np.argsort(-score, kind="stable")
    s = score[order]
    # accepted at T = rows with score >= T: a prefix of the descending order
    n_accepted = np.searchsorted(-s, -thresholds, side="right")
    acc_correct = np.concatenate([[0], np.cumsum(correct[order])])[n_accepted]
    acc_unknown = np.concatenate([[0], np.cumsum(~known[order])])[n_accepted]
    n_correct, n_known, n_unknown = int(correct.sum()), int(known.sum()), int((~known).sum())
    tp = acc_correct
    fp = n_accepted - acc_correct
    fn = n_correct - acc_correct
    tn = len(s) - n_accepted - fn
    with np.errstate(invalid="ignore", divide="ignore"):
        fpir = acc_unknown / n_unknown if n_unknown else np.full(len(thresholds), np.nan)
        fnir = (n_known - (acc_correct)) / n_known if n_known else np.full(len(thresholds), np.nan)
    return {"threshold": thresholds, "tp": tp, "fp": fp, "fn": fn, "tn": tn,
            "fpir": np.asarray(fpir, dtype=np.float64), "fnir": np.asarray(fnir, dtype=np.float64)}


def at_target_fpir(points: dict[str, np.ndarray], target: float) -> tuple[float | None, float | None]:
    """(lowest threshold with FPIR <= target, its FNIR); (None, None) without unknown queries."""
    ok = np.nonzero(points["fpir"] <= target)[0]
    if not ok.size:
        return None, None
    i = ok[0]
    t = float(points["threshold"][i])
    return (t if math.isfinite(t) else None), float(points["fnir"][i])


def _groups(per_query: pa.Table):
    n = per_query.num_rows
    yield "all", np.ones(n, dtype=bool)
    if "group" in per_query.column_names:
        labels = np.asarray(per_query.column("group").to_pylist(), dtype=object)
        for g in sorted(set(labels.tolist())):
            yield g, labels == g


def sweep_tables(per_query: pa.Table, summary: pa.Table, target_fpir: float | None) -> tuple[pa.Table, pa.Table]:
    """threshold_sweep.parquet for every group, and the summary with the target-FPIR columns."""
    score = per_query.column("top1_score").to_numpy(zero_copy_only=False).astype(np.float64)
    correct = per_query.column("first_rank").fill_null(-1).to_numpy() == 1
    known = per_query.column("n_relevant").to_numpy() > 0
    parts, at_target = [], {}
    for name, sel in _groups(per_query):
        pts = sweep(score[sel], correct[sel], known[sel])
        n = len(pts["threshold"])
        parts.append(pa.table({"group": pa.array([name] * n, pa.string()),
                               "threshold": pa.array(pts["threshold"]),
                               **{k: pa.array(pts[k].astype(np.int64)) for k in ("tp", "fp", "fn", "tn")},
                               "fpir": pa.array(pts["fpir"], mask=np.isnan(pts["fpir"])),
                               "fnir": pa.array(pts["fnir"], mask=np.isnan(pts["fnir"]))}))
        if target_fpir is not None:
            at_target[name] = at_target_fpir(pts, target_fpir)
    table = pa.concat_tables(parts)
    if target_fpir is not None:
        groups = summary.column("group").to_pylist()
        target, threshold_at, fnir_at = TARGET_FPIR_COLUMNS
        summary = summary.append_column(target, pa.array([float(target_fpir)] * len(groups)))
        summary = summary.append_column(threshold_at,
                                        pa.array([at_target.get(g, (None, None))[0] for g in groups], pa.float64()))
        summary = summary.append_column(fnir_at,
                                        pa.array([at_target.get(g, (None, None))[1] for g in groups], pa.float64()))
    return table, summary
