"""Open-set identification at a threshold, and the threshold sweep (NIST FRVT-style FPIR/FNIR trade-off).

For a threshold T a query accepts its rank-1 item when top1_score >= T; the
item is correct when it is relevant (first_rank == 1). A query is known when
it has a relevant gallery item (R > 0), unknown otherwise. The rates are
each computed from counts of one kind of query only, and those counts are
reported beside them (``SPLIT_COUNTS``):

    known queries:   accepted-correct + accepted-wrong + rejected = #known
    unknown queries: accepted + rejected = #unknown
    FNIR = (known accepted-wrong + known rejected) / #known
    FPIR = unknown accepted / #unknown;  rejection accuracy = unknown rejected / #unknown

TP/FP/FN/TN (accepted or not x correct or not) stay as well: they count
known and unknown queries together, so FP/(FP + TN) is not the FPIR.
Both rates only change at the distinct rank-1 scores, so those (plus +inf,
accepting nothing) are every decision point of the sweep.
"""
from __future__ import annotations

import math

import numpy as np
import pyarrow as pa

#: summary columns ``--target-fpir`` adds (``sweep_tables``)
TARGET_FPIR_COLUMNS = ("target_fpir", "threshold_at_target_fpir", "fnir_at_target_fpir")
#: the counts FNIR (the first three: the known queries) and FPIR (the last two: the unknown queries) come from
SPLIT_COUNTS = ("known_accepted_correct", "known_accepted_wrong", "known_rejected", "unknown_accepted",
                "unknown_rejected")
#: the integer columns of the open-set figures: the confusion matrix over all queries, then the split counts
COUNT_COLUMNS = ("tp", "fp", "fn", "tn", *SPLIT_COUNTS)


def split_counts(accepted: np.ndarray, correct: np.ndarray, known: np.ndarray) -> dict[str, int]:
    """The five counts of ``SPLIT_COUNTS`` over the given queries (one bool per query in each array).

    known_accepted_correct = #(known & accepted & correct), known_accepted_wrong = #(known & accepted & ~correct),
    known_rejected = #(known & ~accepted), unknown_accepted = #(~known & accepted), unknown_rejected = #(~known & ~accepted).
    """
    accepted, correct, known = (np.asarray(a, dtype=bool) for a in (accepted, correct, known))
    return {"known_accepted_correct": int((known & accepted & correct).sum()),
            "known_accepted_wrong": int((known & accepted & ~correct).sum()),
            "known_rejected": int((known & ~accepted).sum()),
            "unknown_accepted": int((~known & accepted).sum()),
            "unknown_rejected": int((~known & ~accepted).sum())}


def rates(counts: dict) -> dict[str, float | None]:
    """rejection_accuracy, fpir and fnir from the split counts (None where their queries are none).

    rejection_accuracy = unknown_rejected / #unknown, fpir = unknown_accepted / #unknown,
    fnir = (known_accepted_wrong + known_rejected) / #known.
    """
    n_unknown = counts["unknown_accepted"] + counts["unknown_rejected"]
    n_known = counts["known_accepted_correct"] + counts["known_accepted_wrong"] + counts["known_rejected"]
    return {"rejection_accuracy": counts["unknown_rejected"] / n_unknown if n_unknown else None,
            "fpir": counts["unknown_accepted"] / n_unknown if n_unknown else None,
            "fnir": (counts["known_accepted_wrong"] + counts["known_rejected"]) / n_known if n_known else None}


def threshold_figures(outcome: np.ndarray, known: np.ndarray, threshold: float | None) -> dict:
    """The summary's open-set columns over the given queries, from their ``outcome`` (TP/FP/FN/TN) and R > 0.

    threshold, tp, fp, fn, tn (over all queries, as before), rejection_accuracy, fpir, fnir, then the split
    counts the rates come from. Accepted = TP or FP; correct = TP or FN.
    """
    outcome = np.asarray(outcome, dtype=object)
    matrix = {o.lower(): int((outcome == o).sum()) for o in ("TP", "FP", "FN", "TN")}
    accepted = (outcome == "TP") | (outcome == "FP")
    correct = (outcome == "TP") | (outcome == "FN")
    counts = split_counts(accepted, correct, known)
    # the old columns keep their places (scripts read them); the split counts follow
    return {"threshold": float(threshold) if threshold is not None else None, **matrix, **rates(counts), **counts}


def sweep(top1_score: np.ndarray, correct: np.ndarray, known: np.ndarray) -> dict[str, np.ndarray]:
    """tp, fp, fn, tn, fpir, fnir and the split counts (``SPLIT_COUNTS``) at every distinct threshold, ascending.

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
    acc_known_correct = np.concatenate([[0], np.cumsum((known & correct)[order])])[n_accepted]
    n_correct, n_known, n_unknown = int(correct.sum()), int(known.sum()), int((~known).sum())
    tp = acc_correct
    fp = n_accepted - acc_correct
    fn = n_correct - acc_correct
    tn = len(s) - n_accepted - fn
    counts = {"known_accepted_correct": acc_known_correct,
              "known_accepted_wrong": n_accepted - acc_unknown - acc_known_correct,
              "known_rejected": n_known - (n_accepted - acc_unknown),
              "unknown_accepted": acc_unknown, "unknown_rejected": n_unknown - acc_unknown}
    with np.errstate(invalid="ignore", divide="ignore"):
        fpir = acc_unknown / n_unknown if n_unknown else np.full(len(thresholds), np.nan)
        fnir = ((counts["known_accepted_wrong"] + counts["known_rejected"]) / n_known if n_known
                else np.full(len(thresholds), np.nan))
    return {"threshold": thresholds, "tp": tp, "fp": fp, "fn": fn, "tn": tn,
            "fpir": np.asarray(fpir, dtype=np.float64), "fnir": np.asarray(fnir, dtype=np.float64),
            **{k: np.asarray(v, dtype=np.int64) for k, v in counts.items()}}


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
                               "fnir": pa.array(pts["fnir"], mask=np.isnan(pts["fnir"])),
                               **{k: pa.array(pts[k].astype(np.int64)) for k in SPLIT_COUNTS}}))
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
