"""``evalcore score-service``: score challenge submissions as they arrive, with the truth kept loaded.

Layout it reads: ``SUBMISSIONS/<team>/<submission>/`` (``query.npy`` +
``gallery.npy``, or a Zarr group with ``query/emb`` and ``gallery/emb``). A
submission is ready when it holds a ``READY`` marker file, or when nothing in
it has changed for ``--settle`` seconds. Names starting with ``.`` are uploads
in progress and are not looked at.

What it writes, all under ``--out`` (SCORED):

- ``organizer/ledger.parquet``: every decided submission (``io.ledger``): status
  (scored, rejected, failed, timed_out), reason, fingerprint, mAP per split.
- ``organizer/<phase>/<id>/``: the per-query report of a scored submission
  (with each query's split), kept for error bars and ties.
- ``results/<phase>/<id>/result.json`` and ``leaderboard-<phase>.parquet`` /
  ``.html``: what participants see, the public split only, reasons without
  server paths (``ledger.public_reason``).
- ``.work/``: spilled copies of big submissions, marked ``WORK_MARKER``; an
  unmarked ``.work`` is not evalcore's and is refused, never removed.

``<id>`` is ``io.ledger.submission_id``: no participant-chosen text becomes a
path. One submission is decided at a time, in order of arrival:

1. ``inspect``: hostile shapes (a symbolic link, a hard link to a file that is
   not the team's, a tree deeper than ``MAX_DEPTH`` or with more than
   ``MAX_ENTRIES`` entries, a name with path components, a file where a folder
   belongs, a device or pipe) -> rejected;
2. the daily limit (``--max-per-day``) -> rejected;
3. the scorer process checks the submission (``io.challenge``) and returns
   its fingerprint; one already scored in the phase -> rejected;
4. the scorer evaluates it from its own arrays (an in-memory dataset of the
   submission's vectors and the loaded truth: no combined dataset on disk);
5. the files are written, then the ledger row (the commit point), then the
   public leaderboard.

The scorer is one long-lived child process holding the truth (and the Dask
client of ``--scheduler`` / ``--workers``); past ``--timeout`` it is stopped
(SIGTERM, then SIGKILL) and started afresh, and the submission is
``timed_out``. A submission the scorer fails on is ``failed``; one the scorer process dies on (killed, out of
memory, a crash in native code) is tried again with a fresh scorer up to ``--retries`` times, each death kept
in ``organizer/crashes/`` (so restarts of the service count too), then ``failed``. After a crash the
service starts over from the ledger: a submission with a row is never
scored again, one without is scored from the start (its files are rewritten).
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import multiprocessing as mp
import os
import re
import shutil
import signal
import stat
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import zarr

from evalcore.errors import InputError, OptionError, foreign_reason, input_error, mention
from evalcore.io import challenge as ch
from evalcore.io import dataset as ds
from evalcore.io import ledger as lg
from evalcore.io import report
from evalcore.io.files import atomic_write
from evalcore.jobs import standings
from evalcore.jobs.common import EXIT_OK, parse_number, settings_from_args
from evalcore.jobs.leaderboard import publish

READY = "READY"
PHASE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
#: seconds the scorer gets to stop after SIGTERM before SIGKILL
STOP_GRACE = 10.0


# =========================================================================== configuration


@dataclass(frozen=True)
class ServiceConfig:
    """What ``evalcore score-service`` was asked to do, checked."""

    submissions: Path
    truth: str
    out: Path
    phase: str = "main"
    scheduler: str | None = None
    workers: int | None = None
    memory_limit: str | None = "auto"
    timeout: float = 600.0
    max_per_day: int | None = None
    once: bool = False
    poll: float = 10.0
    settle: float = 10.0
    #: times a submission is tried again after the scorer process died on it (then it is ``failed``)
    retries: int = 2

    @property
    def ledger(self) -> Path:
        return self.out / "organizer" / "ledger.parquet"

    @property
    def work(self) -> Path:
        """Temporary copies of big submissions (``service.SPILL_BYTES``), marked by ``WORK_MARKER``; a killed
        scorer's copies are removed at start (``clear_work``)."""
        return self.out / ".work"


#: the longest --timeout, --poll or --settle (a week): larger values overflow the waits they are passed to
MAX_SECONDS = 7 * 24 * 3600.0


def check_seconds(option: str, text, positive: bool) -> float:
    """A number of seconds: finite, at most ``MAX_SECONDS``, above 0 (``positive``) or at least 0."""
    value = parse_number(option, text)
    if not (value > 0 if positive else value >= 0) or not value <= MAX_SECONDS:
        raise input_error(option, f"{text} must be a {'positive' if positive else 'non-negative'} number of "
                         f"seconds, at most {MAX_SECONDS:g} (a week)")
    return float(value)


#: the file that marks ``--out/.work`` as made by evalcore: only a marked ``.work`` is cleared at start
WORK_MARKER = ".evalcore-work"
#: what the scorer puts in ``.work`` (``tempfile.mkdtemp`` prefix): all that is removed from it
SPILL_PREFIX = "spill-"


def check_work(work: Path) -> None:
    """``--out/.work`` is absent, or a folder evalcore made (it holds ``WORK_MARKER``); anything else is the
    user's and is left alone: InputError."""
    if (work.exists() or work.is_symlink()) and (work.is_symlink() or not (work / WORK_MARKER).is_file()):
        raise OptionError("--out", f"{work} exists and evalcore did not make it (no {WORK_MARKER} marker in it); "
                         "move it away or choose another " + mention("--out"))


def make_work(work: Path) -> Path:
    """``work`` (``--out/.work``), created with its marker when absent: made beside it with the marker inside,
    then renamed into place, so a kill never leaves it unmarked. A folder already there is used as it is
    (the service has checked it is marked; another caller's own folder is not marked as evalcore's)."""
    if work.is_dir():
        return work
    work.parent.mkdir(parents=True, exist_ok=True)
    fresh = Path(tempfile.mkdtemp(prefix=f"{work.name}.new-", dir=work.parent))
    (fresh / WORK_MARKER).touch()
    try:
        fresh.rename(work)
    except OSError:  # made meanwhile (another scorer of the service): use that one
        shutil.rmtree(fresh, ignore_errors=True)
    return work


def clear_work(work: Path) -> None:
    """Remove what a killed scorer left in ``--out/.work`` (its ``spill-*`` folders) and nothing else; an
    unmarked ``.work`` is refused (``check_work``)."""
    check_work(work)
    if not work.is_dir():
        return
    for e in os.scandir(work):
        if e.name.startswith(SPILL_PREFIX) and e.is_dir(follow_symlinks=False):
            shutil.rmtree(e.path, ignore_errors=True)


def check_truth(path: str) -> None:
    """``--truth`` opens as a truth bundle (its shape and splits), before the service writes anything; the
    scorer loads it again in its own process."""
    try:
        group = ds.open_dataset(path)
    except InputError as exc:
        raise OptionError("--truth", exc.message) from None
    n_query, _, _ = ch.truth_shape(group)
    ch.truth_splits(group, n_query)


def check_phase(phase: str) -> str:
    if not isinstance(phase, str) or not PHASE.match(phase):
        raise OptionError("--phase", f"{phase!r} must be 1 to 64 letters, digits, '.', '_' or '-' (not starting "
                         "with '.' or '-')")
    return phase


def config_from_args(args) -> ServiceConfig:
    settings = settings_from_args(args)
    submissions = Path(args.submissions).absolute()
    if not submissions.is_dir():
        raise InputError(f"SUBMISSIONS {args.submissions}: not a folder")
    out = Path(args.out).absolute()
    if out.exists() and not out.is_dir():
        raise InputError(mention("--out") + f" {args.out}: is a file, not a folder")
    report.check_apart("--out", out, {"submissions": str(submissions), "truth": args.truth})
    timeout = check_seconds("--timeout", args.timeout, positive=True)
    limit = None if args.max_per_day is None else parse_number("--max-per-day", args.max_per_day, int)
    if limit is not None and limit < 1:
        raise OptionError("--max-per-day", f"{limit} must be at least 1")
    poll = check_seconds("--poll", args.poll, positive=True)
    settle = check_seconds("--settle", args.settle, positive=False)
    retries = parse_number("--retries", args.retries, int)
    if retries < 0:
        raise OptionError("--retries", f"{retries} must be 0 or more")
    check_work(out / ".work")
    check_truth(str(args.truth))
    return ServiceConfig(submissions, str(args.truth), out, check_phase(args.phase), settings.scheduler,
                         settings.workers, settings.memory_limit, float(timeout), limit, bool(args.once),
                         float(poll), float(settle), int(retries))


# =========================================================================== finding and inspecting submissions


@dataclass(frozen=True)
class Candidate:
    """A folder entry under SUBMISSIONS/<team>/ that may be a submission."""

    team: str
    name: str
    path: Path


def check_name(what: str, name: str) -> str | None:
    """Why a team or submission name is refused (path components, unprintable), or None."""
    if name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
        return f"{what} name {name!r} holds path components"
    try:
        ch.check_label(what, name)
    except InputError as exc:
        return exc.message
    return None


def candidates(root: Path) -> list[Candidate]:
    """Every SUBMISSIONS/<team>/<submission> entry (hidden names skipped), teams and submissions sorted.
    A team entry that is not a plain folder is one candidate named ``-`` (rejected by ``inspect``)."""
    out = []
    for team in sorted(os.listdir(root)):
        if team.startswith("."):
            continue
        tpath = root / team
        if tpath.is_symlink() or not tpath.is_dir():
            out.append(Candidate(team, "-", tpath))
            continue
        for name in sorted(os.listdir(tpath)):
            if not name.startswith(".") and name != READY:
                out.append(Candidate(team, name, tpath / name))
    return out


#: a submission whose folder tree is deeper than this is refused before any of it is read (a Zarr group of
#: two arrays is about 6 levels deep)
MAX_DEPTH = 32
#: ... and one holding more entries than this (files and folders together; counted as the tree is listed)
MAX_ENTRIES = 100_000


class TreeRefused(Exception):
    """A submission's folder tree is past ``MAX_DEPTH`` or ``MAX_ENTRIES``, or a folder of it cannot be
    listed; ``reason`` says which."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def walk(path: Path, max_depth: int | None = None, max_entries: int | None = None) -> list[tuple[str, os.stat_result]]:
    """(relative name, lstat) of every entry under ``path``, links not followed, sorted by name.

    Iterative (an explicit stack: a tree thousands of levels deep cannot exhaust Python's recursion), and
    bounded: past ``max_depth`` levels or ``max_entries`` entries (defaults ``MAX_DEPTH``, ``MAX_ENTRIES``) it
    stops with ``TreeRefused`` before listing further; so it does at a folder it cannot list.
    """
    max_depth = MAX_DEPTH if max_depth is None else max_depth
    max_entries = MAX_ENTRIES if max_entries is None else max_entries
    rows: list[tuple[str, os.stat_result]] = []
    stack = [(path, "", 1)]
    while stack:
        folder, prefix, depth = stack.pop()
        try:
            it = os.scandir(folder)
        except (FileNotFoundError, NotADirectoryError):
            continue  # removed meanwhile: the signature then differs
        except OSError as exc:  # e.g. a folder its team made unreadable: that submission's problem alone
            raise TreeRefused(f"{prefix.rstrip('/') or '.'}: cannot be listed ({exc.strerror})") from None
        with it:
            for e in it:
                if len(rows) >= max_entries:
                    raise TreeRefused(f"holds more than {max_entries} files and folders; a submission is "
                                     "query.npy + gallery.npy or one Zarr group")
                try:
                    st = e.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                rel = prefix + e.name
                rows.append((rel, st))
                if stat.S_ISDIR(st.st_mode):
                    if depth >= max_depth:
                        raise TreeRefused(f"folders nested more than {max_depth} levels deep (under "
                                         f"{rel.split('/')[0]!r}); a submission is query.npy + gallery.npy or "
                                         "one Zarr group")
                    stack.append((Path(folder) / e.name, rel + "/", depth + 1))
    return sorted(rows, key=lambda row: row[0])


def signature(path: Path) -> tuple:
    """(relative name, kind, size, mtime_ns) of every entry under ``path`` (links not followed): it changes
    when anything in the submission is written. A tree past the bounds of ``walk`` is one row saying so."""
    try:
        rows = walk(path)
    except TreeRefused as exc:
        return (("", "too big", exc.reason, time.time_ns()),)
    return tuple((rel, stat.S_IFMT(st.st_mode), st.st_size, st.st_mtime_ns) for rel, st in rows)


def is_ready(c: Candidate, settle: float, now: float) -> bool:
    """A READY marker inside, or nothing under it changed for ``settle`` seconds. An entry that is not a plain
    folder (a link, a file) is never a submission, so it is ready at once: to be rejected."""
    try:
        if c.path.is_symlink() or not c.path.is_dir() or (c.path / READY).is_file():
            return True
        newest = max([c.path.lstat().st_mtime_ns] + [st.st_mtime_ns for _, st in walk(c.path)])
    except TreeRefused:
        return True  # refused by ``inspect`` whatever else happens to it
    except OSError:
        return False
    return now - newest / 1e9 >= settle


def owners(c: Candidate) -> set[int]:
    """The users a submission's files may belong to: the owners of its team folder and of its own folder,
    but never root nor the service's own user (a file of theirs is never a team's)."""
    found = set()
    for p in (c.path.parent, c.path):
        with contextlib.suppress(OSError):
            found.add(p.lstat().st_uid)
    return found - {0, os.geteuid()}


def hard_link_refused(c: Candidate, rel: str, st: os.stat_result, names_inside: int) -> str | None:
    """Why a file with more than one name is refused, or None.

    Judged for this submission alone, so another team cannot get it refused by linking its file: accepted
    when every name of the file is inside this submission, or when the file belongs to the submission's own
    user (``owners``: another user cannot make a file theirs; the other name is then somebody else's link to
    it). Otherwise it may be anybody's file (the truth, another team's upload): refused.
    """
    if names_inside >= st.st_nlink or st.st_uid in owners(c):
        return None
    return (f"{rel}: a hard link ({st.st_nlink} names for one file, not all in this submission) to a file "
            "that is not this team's; submit plain copies")


def inspect(c: Candidate) -> str | None:
    """Why a submission is refused before any of it is read, or None.

    Refused: a team or submission name with path components or unprintable
    characters; a team or submission entry that is a link or not a folder;
    a tree deeper than ``MAX_DEPTH`` or with more than ``MAX_ENTRIES`` entries;
    inside it, any symbolic link, a hard link to a file that is not the team's
    (``hard_link_refused``), anything but files and folders.
    """
    for what, name in (("team", c.team), ("submission", c.name)):
        if name != "-" and (why := check_name(what, name)):
            return why
    if c.name == "-":
        kind = "a symbolic link" if c.path.is_symlink() else "a file"
        return f"team entry {c.team!r} is {kind}, not a folder of submissions"
    if c.path.is_symlink():
        return f"submission {c.name!r} is a symbolic link (to {os.readlink(c.path)!r}); submit a folder"
    if not c.path.is_dir():
        return f"submission {c.name!r} is a file, not a folder (query.npy + gallery.npy, or a Zarr group)"
    try:
        rows = walk(c.path)
    except TreeRefused as exc:
        return f"submission {c.name!r}: {exc.reason}"
    inside: dict[tuple[int, int], int] = {}
    for _, st in rows:
        if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
            inside[st.st_dev, st.st_ino] = inside.get((st.st_dev, st.st_ino), 0) + 1
    for rel, st in rows:
        if stat.S_ISLNK(st.st_mode):
            try:
                target = os.readlink(c.path / rel)
            except OSError:
                target = "?"
            return f"{rel}: a symbolic link (to {target!r}); links are not accepted"
        if stat.S_ISREG(st.st_mode):
            if st.st_nlink > 1 and (why := hard_link_refused(c, rel, st, inside[st.st_dev, st.st_ino])):
                return why
        elif not stat.S_ISDIR(st.st_mode):
            return f"{rel}: not a regular file or folder"
    return None


# =========================================================================== the truth and scoring (in the scorer)


@dataclass(frozen=True)
class LoadedTruth:
    """The truth bundle in memory: every array but embeddings, its shape and each query's split."""

    arrays: dict
    n_query: int
    n_gallery: int
    dims: int
    splits: np.ndarray


def load_truth(path: str) -> LoadedTruth:
    try:
        group = ds.open_dataset(path)
    except InputError as exc:
        raise OptionError("--truth", exc.message) from None
    n_query, n_gallery, dims = ch.truth_shape(group)
    splits = ch.truth_splits(group, n_query)
    arrays = {}
    for side in ("query", "gallery", "qrels"):
        if side in group:
            for name, _ in sorted(ds.member_group(group, side).arrays()):
                if name not in ("emb", "split"):
                    arrays[f"{side}/{name}"] = ds.read(group, f"{side}/{name}")
    return LoadedTruth(arrays, n_query, n_gallery, dims, splits)


#: a submission whose float32 copy (query + gallery) is larger than this is scored from a temporary Zarr
#: under ``--out`` (``spilled_dataset``), a gallery shard at a time, instead of from memory
SPILL_BYTES = 1 << 30
#: float32 bytes of judged gallery rows one query chunk of a spilled submission reads (judged-only ranking
#: reads a chunk's judged rows alone): the chunk's rows are chosen to fit it
CHUNK_BYTES = 128 << 20
#: gallery rows per Zarr chunk of a spilled submission (shards are cut at whole chunks)
SPILL_CHUNK_ROWS = 8192


def float32_bytes(truth: LoadedTruth) -> int:
    """Bytes of the submission's vectors as float32: (queries + gallery images) x dims x 4."""
    return (truth.n_query + truth.n_gallery) * truth.dims * 4


def copy_rows(target, source, rows: int = ch.BLOCK_ROWS) -> None:
    """``target[:] = source`` as float32, ``rows`` rows at a time (the source is never read whole)."""
    for start in range(0, source.shape[0], rows):
        target[start:start + rows] = np.asarray(source[start:start + rows], dtype=np.float32)


def spilled_chunk_rows(truth: LoadedTruth) -> int:
    """Queries per chunk of a spilled submission: as many as keep their judged gallery rows (at most the
    most-judged query's count each) within ``CHUNK_BYTES`` of float32."""
    judged = np.bincount(np.asarray(truth.arrays["qrels/query"], dtype=np.int64), minlength=1).max()
    return int(max(1, CHUNK_BYTES // (max(1, int(judged)) * truth.dims * 4)))


def scoring_attrs(truth: LoadedTruth) -> dict:
    return {"protocol": "qrels", "similarity": "cosine", "dims": truth.dims}


def scoring_dataset(truth: LoadedTruth, sub: ch.Submission) -> zarr.Group:
    """The submission's vectors (float32) and the truth's arrays as one in-memory dataset (nothing on disk)."""
    arrays = dict(truth.arrays)
    for side, n in (("query", truth.n_query), ("gallery", truth.n_gallery)):
        arrays[f"{side}/emb"] = np.empty((n, truth.dims), np.float32)
        copy_rows(arrays[f"{side}/emb"], sub.arrays[side])
    rows = max(1, truth.n_query, truth.n_gallery)
    return ds.write_dataset(zarr.storage.MemoryStore(), arrays, scoring_attrs(truth), chunk_rows=rows)


def spilled_dataset(path: Path, truth: LoadedTruth, sub: ch.Submission) -> zarr.Group:
    """The same dataset as ``scoring_dataset`` written to ``path`` (uncompressed float32 chunks of
    ``SPILL_CHUNK_ROWS`` rows), a block of the submission at a time: memory stays a block, whatever its size."""
    root = ds.write_dataset(str(path), truth.arrays, scoring_attrs(truth))
    for side, n in (("query", truth.n_query), ("gallery", truth.n_gallery)):
        out = root.create_array(f"{side}/emb", shape=(n, truth.dims), dtype="float32",
                                chunks=(max(1, min(SPILL_CHUNK_ROWS, n)), truth.dims), compressors=None,
                                fill_value=0, config={"write_empty_chunks": True})
        # whole chunks per block: no chunk is read back to be completed
        copy_rows(out, sub.arrays[side], max(SPILL_CHUNK_ROWS, ch.BLOCK_ROWS // SPILL_CHUNK_ROWS * SPILL_CHUNK_ROWS))
    return root


def split_maps(per_query: pa.Table, splits: np.ndarray, options) -> tuple[tuple[str, float | None], ...]:
    """mAP per split: the summary's ``map`` over the queries of each split alone (the engine's own reduction
    of the per-query table, rows in query order)."""
    from evalcore.engine.reduce import summarize

    out = []
    for name in sorted(set(splits.tolist())):
        summary, _ = summarize(per_query.filter(pa.array(splits == name)), options)
        value = summary.to_pylist()[0].get("map")
        out.append((name, None if value is None else float(value)))
    return tuple(out)


@dataclass(frozen=True)
class Scored:
    """What the scorer returns for a scored submission."""

    fingerprint: str
    map: float | None
    split_maps: tuple[tuple[str, float | None], ...]
    n_queries: int
    n_evaluated: int
    per_query: pa.Table
    run: dict


def score_options():
    from evalcore.jobs.score import SCORE_SPEC

    o = SCORE_SPEC.options
    from dataclasses import replace
    return replace(o, protocol="qrels", similarity="cosine").checked()


def evaluate_submission(truth: LoadedTruth, sub: ch.Submission, client=None,
                        work: Path | None = None) -> tuple[pa.Table, dict, Any]:
    """Evaluate a checked submission; returns (per_query with a ``split`` column, run record, summary's all row).

    In memory when its float32 copy fits ``SPILL_BYTES``; else from a temporary Zarr in ``work`` (or the
    system's temporary folder), removed afterwards, in query chunks of ``spilled_chunk_rows``.
    """
    from evalcore import api
    from evalcore.engine import evaluate as engine

    options = score_options()
    if float32_bytes(truth) <= SPILL_BYTES:
        group = scoring_dataset(truth, sub)
        threads = 1 if client is not None else max(1, api.choose_threads(group))
        result = engine.evaluate(group, options, client=client, threads=threads)
    else:
        if work is not None:
            make_work(work)
        folder = Path(tempfile.mkdtemp(prefix=SPILL_PREFIX, dir=work))
        try:
            path = folder / "submission.zarr"
            spilled_dataset(path, truth, sub)
            threads = 1 if client is not None else max(1, min(2, os.cpu_count() or 1))
            result = engine.evaluate(str(path), options, client=client, threads=threads,
                                     chunk_rows=spilled_chunk_rows(truth))
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    per_query = result.per_query.append_column("split", pa.array(truth.splits.tolist(), pa.string()))
    return per_query, result.run, result.metrics


def score_checked(truth: LoadedTruth, sub: ch.Submission, fingerprint: str, client=None,
                  work: Path | None = None) -> Scored:
    """Score a submission ``check_submission`` passed: mAP over all queries and per split."""
    started = time.perf_counter()
    per_query, run, metrics = evaluate_submission(truth, sub, client, work)
    maps = split_maps(per_query, truth.splits, score_options())
    run = {**run, "timings": {**run.get("timings", {}), "service_s": time.perf_counter() - started}}
    value = metrics.get("map")
    return Scored(fingerprint, None if value is None else float(value), maps, int(metrics["n_queries"]),
                  int(metrics["n_evaluated"]), per_query, run)


def score_path(truth: LoadedTruth, path) -> Scored:
    """Open, check and score the submission at ``path`` here, in this process (the platform adapters)."""
    sub = ch.open_submission(path)
    return score_checked(truth, sub, ch.check_submission(sub, truth.n_query, truth.n_gallery, truth.dims))


def scorer_main(conn, truth_path: str, scheduler: str | None, workers: int | None, memory_limit,
                work: str | None = None) -> None:
    """The scorer process: load the truth (and join or start the cluster) once, then answer requests.

    First it says ("ok", (n_query, n_gallery, dims)), ("invalid", the InputError) or ("failed", reason); then
    ("check", path) -> ("ok", fingerprint) | ("rejected", reason) | ("failed", reason);
    ("score",) -> ("ok", Scored) | ("failed", reason). It ends when the service's end of the pipe closes.
    """
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the cluster below is closed on the way out
    try:
        serve(conn, truth_path, scheduler, workers, memory_limit, work)
    finally:
        # past here nothing is left to close: a SIGTERM while the interpreter exits ends it quietly (a
        # SystemExit raised inside an atexit hook printed a traceback)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def serve(conn, truth_path: str, scheduler: str | None, workers: int | None, memory_limit,
          work: str | None) -> None:
    """``scorer_main``'s loop, with the truth and the cluster it holds."""
    with contextlib.ExitStack() as stack:
        try:
            truth = load_truth(truth_path)
            client = None
            if scheduler or workers:
                from evalcore.engine.cluster import dask_client

                client = stack.enter_context(dask_client(scheduler, workers, memory_limit))
        except InputError as exc:  # bad input (the truth, an option): the service stops with this very error
            conn.send(("invalid", exc))
            return
        except Exception as exc:  # noqa: BLE001 - told to the service, which stops with it
            conn.send(("failed", lg.one_line(foreign_reason(exc, named=True))))
            return
        conn.send(("ok", (truth.n_query, truth.n_gallery, truth.dims)))
        sub = fingerprint = None
        while True:
            try:
                request = conn.recv()
            except (EOFError, OSError):
                return
            try:
                if request[0] == "check":
                    sub = ch.open_submission(request[1])
                    fingerprint = ch.check_submission(sub, truth.n_query, truth.n_gallery, truth.dims)
                    conn.send(("ok", fingerprint))
                else:
                    assert sub is not None and fingerprint is not None
                    conn.send(("ok", score_checked(truth, sub, fingerprint, client, None if work is None else Path(work))))
                    sub = None
            except InputError as exc:
                conn.send(("rejected", lg.one_line(exc.message)))
            except Exception as exc:  # noqa: BLE001 - a failed submission is a row, not the end of the scorer
                conn.send(("failed", lg.one_line(foreign_reason(exc, named=True))))


def death(exitcode: int) -> str:
    """How a process ended, in words: ``signal 9 (SIGKILL)`` or ``exit code 1``."""
    if exitcode < 0:
        try:
            return f"signal {-exitcode} ({signal.Signals(-exitcode).name})"
        except ValueError:
            return f"signal {-exitcode}"
    return f"exit code {exitcode}"


class ScorerTimeout(Exception):
    """The scorer did not answer within the submission's time."""


class ScorerDied(Exception):
    """The scorer process ended without answering; ``how`` says how it ended, when that is known."""

    def __init__(self, how: str = "its pipe closed") -> None:
        super().__init__(how)
        self.how = how


class Scorer:
    """The service's handle on the scorer process (started on first use, restarted after a timeout)."""

    def __init__(self, config: ServiceConfig):
        self.config = config
        self.process: Any = None
        self.conn: Any = None

    def start(self) -> None:
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        c = self.config
        self.process = ctx.Process(target=scorer_main, args=(child, c.truth, c.scheduler, c.workers, c.memory_limit,
                                                                 str(c.work)),
                                   name="evalcore-scorer", daemon=False)
        self.process.start()
        child.close()
        self.conn = parent
        try:
            status, value = self._answer(max(300.0, c.timeout))
        except (ScorerDied, ScorerTimeout) as exc:
            self.process.join(STOP_GRACE)
            code = self.process.exitcode
            self.stop()
            how = "did not answer" if isinstance(exc, ScorerTimeout) else \
                f"ended ({death(code) if code is not None else 'its pipe closed'})"
            raise RuntimeError(f"the scorer process {how} while loading the truth and starting") from None
        if status != "ok":
            self.process.join(STOP_GRACE)  # it ends by itself after telling why
            self.stop()
            if status == "invalid":  # the InputError the scorer raised, its class and fields kept (pickled)
                raise value.with_traceback(None) from None
            raise RuntimeError(value)

    def _answer(self, timeout: float):
        if not self.conn.poll(max(0.0, timeout)):
            raise ScorerTimeout()
        try:
            return self.conn.recv()
        except (EOFError, OSError):
            raise ScorerDied() from None

    def ask(self, request: tuple, timeout: float):
        if self.process is None or not self.process.is_alive():
            self.stop()
            self.start()
        try:
            self.conn.send(request)
            return self._answer(timeout)
        except ScorerTimeout:
            self.stop()
            raise
        except (ScorerDied, BrokenPipeError, ConnectionError):
            # the pipe closed: the process is ending; its exit code comes once it is reaped (before that it
            # reads None, which was once taken for a timeout)
            self.process.join(STOP_GRACE)
            code = self.process.exitcode
            self.stop()
            raise ScorerDied(death(code) if code is not None else "its pipe closed") from None

    def stop(self) -> None:
        """Stop the scorer: SIGTERM (it closes its cluster), SIGKILL after ``STOP_GRACE`` seconds."""
        if self.conn is not None:
            self.conn.close()
        if self.process is not None and self.process.is_alive():
            self.process.terminate()
            self.process.join(STOP_GRACE)
            if self.process.is_alive():
                self.process.kill()
                self.process.join()
        self.process = self.conn = None


# =========================================================================== deciding one submission


def now_utc() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0)


def entry(config: ServiceConfig, c: Candidate, status: str, reason: str, received: _dt.datetime,
          started: float, scored: Scored | None = None, fingerprint: str | None = None) -> lg.Entry:
    return lg.Entry(
        phase=config.phase, team=c.team, submission=c.name, status=status, reason=lg.one_line(reason),
        received_at=received, finished_at=now_utc(), fingerprint=scored.fingerprint if scored else fingerprint,
        seconds=round(time.perf_counter() - started, 3), n_queries=scored.n_queries if scored else None,
        n_evaluated=scored.n_evaluated if scored else None, map=scored.map if scored else None,
        split_maps=scored.split_maps if scored else ())


def decide(config: ServiceConfig, scorer: Scorer, c: Candidate, entries: list[lg.Entry]) -> lg.Entry:
    """The outcome of one submission (nothing written yet except by ``write_scored``)."""
    received, started = now_utc(), time.perf_counter()
    why = inspect(c)
    if why:
        return entry(config, c, "rejected", why, received, started)
    if config.max_per_day is not None and \
            lg.daily_count(entries, config.phase, c.team, received.date()) >= config.max_per_day:
        return entry(config, c, "rejected", f"daily limit reached: {config.max_per_day} submission(s) per team "
                     f"per day (UTC {received.date()}); submit again tomorrow", received, started)
    before = signature(c.path)
    sid = lg.submission_id(config.phase, c.team, c.name)
    deaths, last = crash_record(config, sid)
    while True:
        if deaths > config.retries:
            return entry(config, c, "failed", f"the scorer process died on it {deaths} time(s), last with {last}; "
                         f"not retried again (--retries {config.retries})", received, started)
        deadline = time.monotonic() + config.timeout  # each attempt has the whole --timeout
        try:
            status, value = scorer.ask(("check", str(c.path)), config.timeout)
            if status != "ok":
                return entry(config, c, status, value, received, started)
            fingerprint = value
            same = lg.scored_fingerprints(entries, config.phase).get(fingerprint)
            if same is not None:
                return entry(config, c, "rejected", "identical to a submission already scored in this phase (same "
                             "fingerprint); not scored again", received, started, fingerprint=fingerprint)
            status, value = scorer.ask(("score",), deadline - time.monotonic())
            break
        except ScorerTimeout:
            return entry(config, c, "timed_out", f"scoring took longer than --timeout {config.timeout:g} s and was "
                         "stopped", received, started)
        except ScorerDied as exc:
            # kept on disk before the retry: a submission that also takes the service down with it is not
            # retried for ever across restarts
            deaths, last = note_crash(config, sid, exc.how)
    if status != "ok":
        return entry(config, c, status, value, received, started)
    if signature(c.path) != before:
        return entry(config, c, "rejected", "the submission changed while it was read (still being written?); "
                     "submit it again, complete, with a READY file", received, started)
    scored: Scored = value
    result = entry(config, c, "scored", "", received, started, scored)
    write_scored(config, result, scored)
    return result


def crash_path(config: ServiceConfig, sid: str) -> Path:
    return config.out / "organizer" / "crashes" / config.phase / f"{sid}.json"


def crash_record(config: ServiceConfig, sid: str) -> tuple[int, str]:
    """(how many times the scorer process died on this submission, how it died last), from its crash file."""
    import json

    try:
        record = json.loads(crash_path(config, sid).read_text())
        return int(record["deaths"]), str(record["last"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0, ""


def note_crash(config: ServiceConfig, sid: str, how: str) -> tuple[int, str]:
    """One more death of the scorer on this submission, written (atomically) before it is retried."""
    import json

    deaths = crash_record(config, sid)[0] + 1
    atomic_write(crash_path(config, sid), (json.dumps({"deaths": deaths, "last": how}) + "\n").encode())
    return deaths, how


def organizer_dir(config: ServiceConfig, e: lg.Entry) -> Path:
    return config.out / "organizer" / e.phase / e.submission_id


def result_path(config: ServiceConfig, e: lg.Entry) -> Path:
    return config.out / "results" / e.phase / e.submission_id / "result.json"


def write_scored(config: ServiceConfig, e: lg.Entry, scored: Scored) -> None:
    """The organizer's per-query report of a scored submission (rewritten if a crash left one)."""
    from evalcore.engine.reduce import summarize

    summary, cmc = summarize(scored.per_query.drop_columns(["split"]), score_options())
    run = {**scored.run, "challenge": {"phase": e.phase, "team": e.team, "submission": e.submission,
                                       "fingerprint": scored.fingerprint, "split_maps": dict(scored.split_maps)}}
    report.write_report(organizer_dir(config, e), {"per_query": scored.per_query, "summary": summary, "cmc": cmc},
                        run, overwrite=True)


def record(config: ServiceConfig, e: lg.Entry) -> list[lg.Entry]:
    """The participant's result, then the ledger row (the commit point), then the public leaderboard."""
    import json

    atomic_write(result_path(config, e), (json.dumps(standings.result_record(e), indent=2) + "\n").encode())
    entries = lg.append_entry(config.ledger, e)
    publish(entries, config.out, config.phase, reveal=False)
    return entries


# =========================================================================== the service loop


@contextlib.contextmanager
def service_lock(out: Path):
    """One service per ``--out``: an flock the kernel drops when the process dies (kill -9 included)."""
    out.mkdir(parents=True, exist_ok=True)
    with open(out / ".service.lock", "a+") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise InputError(mention("--out") + f" {out}: another score-service is running on it") from None
        yield


def run_pass(config: ServiceConfig, scorer: Scorer, say=print) -> int:
    """Decide every ready submission not in the ledger yet; returns how many were decided."""
    entries = lg.read_ledger(config.ledger)
    done = {e.submission_id for e in entries}
    now = time.time()
    ready = [c for c in candidates(config.submissions)
             if lg.submission_id(config.phase, c.team, c.name) not in done and is_ready(c, config.settle, now)]
    for index, c in enumerate(ready, 1):
        # the progress of a pass, one submission at a time: which one is being scored, then what it got and how
        # long it took (a scorer restarted after a crash or a timeout shows as a long one)
        say(f"{config.phase} / {c.team!r} / {c.name!r}: scoring ({index} of {len(ready)} ready)", flush=True)
        started = time.perf_counter()
        e = decide(config, scorer, c, entries)
        entries = record(config, e)
        shown = f"public mAP {e.split_map(lg.PUBLIC):.6f}" if e.status == "scored" and \
            e.split_map(lg.PUBLIC) is not None else e.reason
        say(f"{e.phase} / {c.team!r} / {c.name!r}: {e.status} ({shown}) in {time.perf_counter() - started:.2f} s",
            flush=True)
    return len(ready)


def run_service(config: ServiceConfig, say=print) -> int:
    with service_lock(config.out):
        # a crash between the ledger row and the public leaderboard: the leaderboard is rebuilt from the ledger
        publish(lg.read_ledger(config.ledger), config.out, config.phase, reveal=False)
        clear_work(config.work)  # a killed scorer's spilled copy
        scorer = Scorer(config)
        scorer.start()
        say(f"score-service: phase {config.phase}, truth {config.truth}, watching {config.submissions}",
            flush=True)
        try:
            while True:
                run_pass(config, scorer, say)
                if config.once:
                    return EXIT_OK
                time.sleep(config.poll)
        finally:
            scorer.stop()


def cmd_score_service(args) -> int:
    return run_service(config_from_args(args))
