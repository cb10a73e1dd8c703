"""``evalcore score SUBMISSION --truth TRUTH --out DIR --team NAME``: score one challenge submission.

1. Check everything first, writing nothing: ``--out`` (new, empty, or with
   ``--overwrite`` a folder an earlier score wrote: result.json and
   organizer/ only; never the submission or the truth, nor inside them), the
   leaderboard (readable, if it exists), the truth bundle, the submission
   (headers, dtype, shape, every value: ``evalcore.io.challenge``). A problem is
   one line and exit status 2.
2. Write a combined dataset (the submission's vectors as float32 + the
   truth's arrays) into a hidden temporary folder next to ``DIR``
   (``.DIR.score-PID@HOST-RAND``: removed at the end, or by a later run
   once its owner is dead), and
   evaluate it: protocol qrels, judged-only, cosine similarity, pessimistic
   ties (a constant submission gets the worst AP, not a lucky one) into the
   organizer's report ``DIR/organizer/`` (per query; private).
3. Write ``DIR/result.json`` for the participant (team, submission,
   fingerprint, score = mAP, n_queries, n_evaluated, timestamp) and add the
   submission to the leaderboard (``--leaderboard``, default
   ``DIR/../leaderboard.parquet``; ``leaderboard_best.parquet`` beside it).
   Each row keeps its organizer report's folder (``report``). With a truth
   that has ``query/split``, these and the printed line hold the ``public``
   split's queries alone (``public_view``), as ``score-service`` shows
   ``map_public``: nothing there lets a participant work out another split's
   score; the organizer's report keeps every query.
4. With ``--ci [LEVEL]``, ``leaderboard_best.parquet`` also gets error bars:
   ``score_ci_low`` / ``score_ci_high``, the percentile bootstrap interval of
   each team's mAP over its (public) queries, and ``tied_with_leader``, whether the
   two-sided sign-flip test of the per-query AP differences against the first
   row does not reject at 1 - LEVEL (``jobs.leaderboard.error_bars``). They
   are read from each row's organizer report; a row whose report is gone (or
   older than the ``report`` column) gets nulls.
"""
from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from evalcore.core.intervals import Method
from evalcore.engine.options import Options
from evalcore.errors import InputError, OptionError, mention
from evalcore.io import challenge as ch
from evalcore.io import dataset as ds
from evalcore.io import ledger as lg
from evalcore.io import report
from evalcore.io.files import atomic_write
from evalcore.jobs import standings
from evalcore.jobs.common import (
    EXIT_OK,
    EvaluationSpec,
    parse_number,
    run_evaluation,
    settings_from_args,
)
from evalcore.jobs.leaderboard import error_bars

#: what score computes: judged-only mAP (qrels), cosine, pessimistic ties (a constant submission gets the worst AP)
SCORE_SPEC = EvaluationSpec(Options(protocol="qrels", similarity="cosine", ks=(1, 5, 10), judged_only=True),
                            protocol="qrels", similarity="cosine")

#: query rows per Zarr chunk of the combined dataset (the tasks split it further)
QUERY_CHUNK = 65536
#: gallery rows per Zarr chunk (4 MiB of float32 at D = 128)
GALLERY_CHUNK = 8192


def write_combined(path, sub: ch.Submission, truth, n_query: int, n_gallery: int, dims: int) -> None:
    """The dataset the evaluation reads: submission vectors (float32) + every non-embedding truth array."""
    arrays = {}
    for side in ("query", "gallery", "qrels"):
        if side not in truth:
            continue
        for name, _ in sorted(truth[side].arrays()):
            if name != "emb":
                arrays[f"{side}/{name}"] = ds.read(truth, f"{side}/{name}")
    root = ds.write_dataset(path, arrays, {"protocol": "qrels", "similarity": "cosine", "dims": dims})
    for side, n, chunk in (("query", n_query, QUERY_CHUNK), ("gallery", n_gallery, GALLERY_CHUNK)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = root.create_array(f"{side}/emb", shape=(n, dims), dtype="float32",
                                    chunks=(max(1, min(chunk, n)), dims), compressors=None, fill_value=0,
                                    config={"write_empty_chunks": True})
        src = sub.arrays[side]
        step = max(chunk, (ch.BLOCK_ROWS // chunk) * chunk)
        for start in range(0, n, step):
            out[start:start + step] = np.asarray(src[start:start + step], dtype=np.float32)


#: what a score folder holds; --overwrite replaces nothing else
SCORE_ENTRIES = ("result.json", "organizer")


def check_score_out(out: Path, overwrite: bool) -> None:
    """``--out`` of score: new, empty, or (with ``overwrite``) a folder an earlier score wrote.

    Ours: nothing but ``result.json`` (exactly the participant's keys),
    ``organizer/`` (a report folder evalcore wrote) and evalcore's leftovers of them.
    """
    entries = report.local_out_entries(out, overwrite)
    if not entries:
        return
    foreign = [n for n in entries if n not in SCORE_ENTRIES
               and not ((m := report.LEFTOVER.match(n)) and m["name"] in SCORE_ENTRIES)]
    if "result.json" in entries and not foreign:
        try:
            record = json.loads((out / "result.json").read_text())
        except (OSError, ValueError):
            record = None
        if not (isinstance(record, dict) and set(record) == set(ch.RESULT_KEYS)):
            foreign = ["result.json"]
    if foreign:
        raise InputError(mention("--out") + f" {out}: holds {foreign[0]!r}, which an earlier score did not write; "
                         + mention("--overwrite") + " only replaces a score folder (result.json and organizer/), "
                         "choose another " + mention("--out"))
    if (out / "organizer").exists():
        report.check_out(out / "organizer", True)


def public_view(per_query: pa.Table, splits: np.ndarray) -> dict:
    """What the participant is shown: the summary's ``all`` row (``map``, ``n_queries``, ``n_evaluated``) over
    the ``public`` split's queries alone, by the engine's own reduction, as the service shows ``map_public``.
    A truth without ``query/split`` is all public: every query."""
    from evalcore.engine.reduce import summarize

    public = np.asarray(splits == lg.PUBLIC, dtype=bool)
    if not public.any():
        return {"map": None, "n_queries": 0, "n_evaluated": 0}
    summary, _ = summarize(per_query.sort_by("query").filter(pa.array(public)), SCORE_SPEC.options)
    return next(r for r in summary.to_pylist() if r["group"] == "all")


def report_aps(folder: str | None) -> np.ndarray | None:
    """AP of each query (query order; NaN where a query has none) from an organizer report's per-query table;
    None when the report is not there or not readable."""
    if folder is None:
        return None
    try:
        table = pq.read_table(Path(folder) / "per_query.parquet", columns=["query", "ap"]).sort_by("query")
    except (OSError, pa.ArrowException, KeyError):
        return None
    return np.asarray(table.column("ap").to_numpy(zero_copy_only=False), dtype=np.float64)


def public_aps(aps: np.ndarray | None, public: np.ndarray | None) -> np.ndarray | None:
    """The public queries' APs of a report (``public``: one flag per query of this truth); None when the
    report is of another truth (another number of queries)."""
    if aps is None or public is None:
        return aps
    return aps[public] if len(aps) == len(public) else None


def with_score_error_bars(best: pa.Table, method: Method, public: np.ndarray | None = None) -> pa.Table:
    """The best-per-team board with ``score_ci_low``, ``score_ci_high`` and ``tied_with_leader`` (against its
    first row, the leader, when that has a score), over the ``public`` queries alone when given."""
    rows = best.to_pylist()
    scored = [r["score"] is not None and r["score"] == r["score"] for r in rows]
    aps = [public_aps(report_aps(r["report"]), public) if ok else None for r, ok in zip(rows, scored)]
    low, high, tied = error_bars(aps, 0 if scored and scored[0] else None, method)
    best = best.append_column(pa.field("score_ci_low", pa.float64()), pa.array(low, pa.float64()))
    best = best.append_column(pa.field("score_ci_high", pa.float64()), pa.array(high, pa.float64()))
    return best.append_column(pa.field("tied_with_leader", pa.bool_()), pa.array(tied, pa.bool_()))


def interval_method(args) -> Method | None:
    """``--ci [LEVEL]`` and ``--resamples`` as a checked Method (seed 0), or None without ``--ci``."""
    if args.ci is None:
        if args.resamples is not None:
            raise OptionError("--resamples", "only with " + mention("--ci"))
        return None
    resamples = parse_number("--resamples", args.resamples or "10000", int)
    return Method(level=parse_number("--ci", args.ci), resamples=resamples, permutations=resamples,
                  seed=0).checked()


def cmd_score(args) -> int:
    # -- 1. checks, nothing written
    team = ch.check_team(args.team)
    method = interval_method(args)
    for option, value in (("--out", args.out), ("--leaderboard", args.leaderboard)):
        if value is not None and not ch.is_local(value):
            raise InputError(f"{option} {value}: must be a local (or shared) path: it is locked and renamed")
    out = Path(ds.local_path(args.out)).absolute()
    check_score_out(out, args.overwrite)
    inputs = {"submission": ds.local_path(args.submission), "truth": ds.local_path(args.truth)}
    report.check_apart("--out", out, inputs)
    leaderboard = Path(ds.local_path(args.leaderboard)).absolute() if args.leaderboard \
        else out.parent / "leaderboard.parquet"
    if leaderboard.is_dir():
        raise InputError(mention("--leaderboard") + f" {leaderboard}: is a folder, give a .parquet file")
    report.check_apart("--leaderboard", leaderboard, inputs)
    ch.read_leaderboard(leaderboard)
    settings = settings_from_args(args)  # --scheduler, --workers, --memory-limit, --stall-timeout, --overwrite
    try:
        truth = ds.open_dataset(args.truth)
    except InputError as exc:
        raise OptionError("--truth", exc.message) from None
    n_query, n_gallery, dims = ch.truth_shape(truth)
    splits = ch.truth_splits(truth, n_query)
    has_splits = ds.has(truth, "query/split")
    sub = ch.open_submission(args.submission)
    name = ch.check_label("--name", args.name or sub.name)
    fingerprint = ch.check_submission(sub, n_query, n_gallery, dims)

    # -- 2. evaluate
    made = [p for p in out.parents if not p.exists()]  # removed again if the run fails
    out.parent.mkdir(parents=True, exist_ok=True)
    with report.folder_lock(out.parent):
        report.remove_stale_leftovers(out.parent)  # e.g. the combined copy of a killed run's submission
    tmp = report.leftover_path(out, "score")
    tmp.mkdir()
    done = False
    try:
        combined = tmp / "combined.zarr"
        write_combined(combined, sub, truth, n_query, n_gallery, dims)
        organizer = out / "organizer"
        run_evaluation(str(combined), str(organizer), SCORE_SPEC, settings, quiet=args.quiet, extra_run={
            "dataset": str(args.submission), "truth": str(args.truth),
            "challenge": {"team": team, "submission": name, "fingerprint": fingerprint,
                          "submission_kind": sub.kind}})
        done = True
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        for folder in [] if done else made:  # innermost first; only the empty folders this run made
            try:
                folder.rmdir()
            except OSError:
                break
    content = report.read_report(organizer)
    shown = public_view(content["per_query"], splits)  # the organizer's report keeps every split

    # -- 3. the participant's result and the leaderboard: the public split only, as the service shows it
    when = ch.utc_now()
    record = standings.score_record(team, name, fingerprint, shown, when)

    atomic_write(out / "result.json", (json.dumps(record, indent=2) + "\n").encode())
    bars: list[pa.Table] = []

    def decorate(best: pa.Table) -> pa.Table:
        bars.append(with_score_error_bars(best, method, splits == lg.PUBLIC) if method is not None else best)
        return bars[-1]

    standings.update_leaderboard(leaderboard, standings.board_row(record, when, str(organizer)), decorate)
    score = "none (no query has a relevant judged item)" if record["score"] is None else f"{record['score']:.6f}"
    public = "public " if has_splits else ""
    print(f"{team} / {name}: {public}mAP {score} over {record['n_evaluated']} of {record['n_queries']} "
          f"{public}queries; "
          f"result {out / 'result.json'}; leaderboard {leaderboard}", flush=True)
    if method is not None:
        for line in board_lines(bars[-1], method):
            print(line)
    return EXIT_OK


def board_lines(best: pa.Table, method: Method) -> list[str]:
    """The best-per-team board with its intervals, as printed by ``score --ci``."""
    lines = [f"{'rank':>4}  {'mAP':>9}  {'interval':>19}  {'tied':>4}  team / submission"]
    for i, r in enumerate(best.to_pylist(), 1):
        score = "" if r["score"] is None else f"{r['score']:.6f}"
        interval = "" if r["score_ci_low"] is None else f"[{r['score_ci_low']:.4f}, {r['score_ci_high']:.4f}]"
        lines.append(f"{i:>4}  {score:>9}  {interval:>19}  {'=' if r['tied_with_leader'] else '':>4}  "
                     f"{r['team']} / {r['submission']}")
    lines.append(f"intervals: {method.level:g} percentile bootstrap of each team's queries ({method.resamples} "
                 f"resamples, seed 0); '=': tied with rank 1 (two-sided sign-flip test of the per-query AP "
                 f"differences, not rejected at {1 - method.level:.2g})")
    return lines
