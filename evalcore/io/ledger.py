"""The scoring service's ledger and the leaderboards made from it.

The ledger (``SCORED/organizer/ledger.parquet``) is the organizer's record of
every submission the service has decided on: one ``Entry`` per (phase, team,
submission), whatever its ``status`` (``scored``, ``rejected``, ``failed``,
``timed_out``) and with its one-line ``reason``. It is rewritten whole through
a temporary file and ``os.replace`` under a lock (``append_entry``), so a
kill at any moment leaves either the old or the new ledger, never a torn one.

Scores are judged-only mAP per query split (``query/split`` of the truth:
``public``, ``private``, ...; a truth without splits is all ``public``) and
over all queries. How they rank and what the public and revealed views show
is the leaderboard model of ``evalcore.jobs.standings``; this module reads
and writes the ledger and answers questions about it (``phases``,
``daily_count``, ``scored_fingerprints``).
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from evalcore.errors import InputError, OptionError, input_error
from evalcore.io.files import atomic_write, locked

STATUSES = ("scored", "rejected", "failed", "timed_out")
PUBLIC, PRIVATE = "public", "private"
#: per-split score columns are named ``map_<split>``
SPLIT_PREFIX = "map_"

BASE_FIELDS = [
    ("phase", pa.string()), ("team", pa.string()), ("submission", pa.string()), ("submission_id", pa.string()),
    ("status", pa.string()), ("reason", pa.string()), ("fingerprint", pa.string()),
    ("received_at", pa.timestamp("s", tz="UTC")), ("finished_at", pa.timestamp("s", tz="UTC")),
    ("seconds", pa.float64()), ("n_queries", pa.int64()), ("n_evaluated", pa.int64()), ("map", pa.float64()),
]
BASE_COLUMNS = tuple(name for name, _ in BASE_FIELDS)


@dataclass(frozen=True)
class Entry:
    """One decided submission: who, what, the outcome and, when scored, mAP per split."""

    phase: str
    team: str
    submission: str
    status: str
    reason: str
    received_at: _dt.datetime
    finished_at: _dt.datetime
    fingerprint: str | None = None
    seconds: float | None = None
    n_queries: int | None = None
    n_evaluated: int | None = None
    #: mAP over every query of the truth (organizer only when the truth has splits)
    map: float | None = None
    #: (split, mAP) pairs, splits sorted
    split_maps: tuple[tuple[str, float | None], ...] = field(default_factory=tuple)

    @property
    def submission_id(self) -> str:
        return submission_id(self.phase, self.team, self.submission)

    def split_map(self, split: str) -> float | None:
        return dict(self.split_maps).get(split)


def submission_id(phase: str, team: str, submission: str) -> str:
    """16 hex digits of sha256(phase NUL team NUL submission): the only name of a submission used in paths,
    so no participant-chosen text ever becomes a path component."""
    return hashlib.sha256(f"{phase}\0{team}\0{submission}".encode()).hexdigest()[:16]


def check_status(status: str) -> str:
    if status not in STATUSES:
        raise OptionError("status", f"{status!r} is not one of {', '.join(STATUSES)}")
    return status


def one_line(text: str, limit: int = 300) -> str:
    """A reason as one short line (messages of exceptions may hold newlines)."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[:limit - 1] + "…"


#: an absolute path (or a file:// URL) in a message: ``/a/b/name`` -> group "name"
ABSOLUTE_PATH = re.compile(r"""(?<![\w.~/:-])(?:file:)?/+(?:[^\s/'"()\[\]]+/+)*([^\s/'"()\[\]]+)""")


def public_reason(text: str) -> str:
    """A reason as participants may read it: every absolute path cut to its last name (``/srv/x/query.npy`` ->
    ``query.npy``), so no public page shows where the server keeps its files."""
    return ABSOLUTE_PATH.sub(lambda m: m.group(1), text or "")


# --------------------------------------------------------------------------- tables


def splits_of(entries: Iterable[Entry]) -> list[str]:
    """Every split with a score in ``entries``, sorted."""
    return sorted({s for e in entries for s, _ in e.split_maps})


def entries_table(entries: list[Entry]) -> pa.Table:
    """The ledger as a table: the base columns, then ``map_<split>`` for every split seen."""
    splits = splits_of(entries)
    schema = pa.schema(BASE_FIELDS + [(SPLIT_PREFIX + s, pa.float64()) for s in splits])
    rows = []
    for e in entries:
        row = {name: getattr(e, name) for name in BASE_COLUMNS}
        row.update({SPLIT_PREFIX + s: e.split_map(s) for s in splits})
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=schema)


def _float(value) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def entries_from_table(table: pa.Table, where: str) -> list[Entry]:
    missing = [c for c in BASE_COLUMNS if c not in table.column_names]
    if missing:
        raise input_error(where, f"not a ledger of evalcore score-service (no column {missing[0]})")
    splits = [c[len(SPLIT_PREFIX):] for c in table.column_names if c.startswith(SPLIT_PREFIX)]
    out = []
    for row in table.to_pylist():
        out.append(Entry(
            phase=row["phase"], team=row["team"], submission=row["submission"], status=row["status"],
            reason=row["reason"] or "", received_at=row["received_at"], finished_at=row["finished_at"],
            fingerprint=row["fingerprint"], seconds=_float(row["seconds"]), n_queries=row["n_queries"],
            n_evaluated=row["n_evaluated"], map=_float(row["map"]),
            split_maps=tuple((s, _float(row[SPLIT_PREFIX + s])) for s in splits
                             if row[SPLIT_PREFIX + s] is not None or row["status"] == "scored")))
    return out


def read_ledger(path) -> list[Entry]:
    """Every entry of the ledger at ``path`` (none when it does not exist yet)."""
    p = Path(path)
    if not p.exists():
        return []
    try:
        table = pq.read_table(p)
    except (OSError, pa.ArrowException) as exc:
        raise InputError(f"LEADERBOARD {path}: not a readable Parquet file ({exc.__class__.__name__})") from None
    return entries_from_table(table, f"LEADERBOARD {path}")


def append_entry(path, entry: Entry) -> list[Entry]:
    """Add ``entry`` to the ledger, unless one of the same (phase, team, submission) is there already (then the
    ledger is left as it is: a submission is decided once). Atomic and under ``.<name>.lock``; returns the ledger."""
    check_status(entry.status)
    p = Path(path)
    with locked(p.parent / f".{p.name}.lock"):
        entries = read_ledger(p)
        if any(e.submission_id == entry.submission_id for e in entries):
            return entries
        entries.append(entry)
        atomic_write(p, entries_table(entries))
    return entries


# --------------------------------------------------------------------------- queries


def phases(entries: Iterable[Entry]) -> list[str]:
    return sorted({e.phase for e in entries})


def pick_phase(entries: list[Entry], phase: str | None, where: str) -> str:
    """The phase asked for, or the ledger's only phase; InputError naming ``--phase`` otherwise."""
    known = phases(entries)
    if phase is not None:
        if phase not in known:
            raise OptionError("--phase", f"{phase!r} has no submission in {where} (phases: {', '.join(known) or 'none'})")
        return phase
    if len(known) > 1:
        raise OptionError("--phase", f"{where} holds phases {', '.join(known)}; name one")
    if not known:
        raise InputError(f"LEADERBOARD {where}: holds no submission yet")
    return known[0]


def daily_count(entries: Iterable[Entry], phase: str, team: str, day: _dt.date) -> int:
    """Submissions of ``team`` in ``phase`` received on UTC ``day`` that used the scorer (every status but
    ``rejected``): what ``--max-per-day`` limits."""
    return sum(1 for e in entries if e.phase == phase and e.team == team and e.status != "rejected"
               and e.received_at.astimezone(_dt.UTC).date() == day)


def scored_fingerprints(entries: Iterable[Entry], phase: str) -> Mapping[str, Entry]:
    """fingerprint -> the first scored entry with it, in ``phase``."""
    out: dict[str, Entry] = {}
    for e in entries:
        if e.phase == phase and e.status == "scored" and e.fingerprint and e.fingerprint not in out:
            out[e.fingerprint] = e
    return out
