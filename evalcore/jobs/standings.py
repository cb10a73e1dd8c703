"""The challenge leaderboards' one model: who ranks, in what order, and what each view shows.

Two files hold scored submissions: ``evalcore score``'s board
(``leaderboard.parquet``, one row per team and fingerprint, read and written by
``io.challenge``) and the service's ledger (one ``Entry`` per decided
submission, ``io.ledger``). Both rank by one rule, ``rank_key``::

    rank key = (no score, -score, time, team, submission)    smallest first

so a higher score ranks first; a missing or NaN score ranks last; among equal
scores the earlier submission (``scored_at`` / ``received_at``) ranks first,
then the team name, then the submission name. ``best_of_each_team`` keeps each
team's smallest key and sorts the teams by it: ``best_per_team`` (score's
``leaderboard_best.parquet``, every team, a team without a score last) and
``ranked`` (the ledger's views: only ``scored`` entries with a score get a rank).

Public and private: a truth's queries may be split (``query/split``). What a
participant sees is the ``public`` split alone (``result_record``, the public
view of ``leaderboard_table``, and score's result, which ``jobs.score`` computes
over the public queries); the revealed view ranks by the ``private`` split
(``rank_split``). Reading and writing the files stays in io.
"""
from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

import pyarrow as pa

from evalcore.io import challenge as ch
from evalcore.io import ledger as lg

T = TypeVar("T")
#: a row without a time ranks after every row with one
NO_TIME = _dt.datetime.max.replace(tzinfo=_dt.UTC)


# --------------------------------------------------------------------------- the one rule


def has_score(score: float | None) -> bool:
    """A score ranks when it is a number (not null, not NaN)."""
    return score is not None and not math.isnan(score)


def rank_key(score: float | None, when: _dt.datetime | None, team: str, submission: str) -> tuple:
    """(no score, -score, time, team, submission): the smaller key ranks first."""
    valid = has_score(score)
    return (not valid, -score if valid and score is not None else 0.0, when or NO_TIME, team, submission)


def best_of_each_team(items: Iterable[T], key: Callable[[T], tuple], team: Callable[[T], str]) -> list[T]:
    """Each team's item with the smallest ``key`` (the first of equal ones), sorted by ``key``."""
    best: dict[str, T] = {}
    for item in items:
        t = team(item)
        if t not in best or key(item) < key(best[t]):
            best[t] = item
    return sorted(best.values(), key=key)


# --------------------------------------------------------------------------- evalcore score's board


def board_key(row: Mapping) -> tuple:
    return rank_key(row["score"], row["scored_at"], row["team"], row["submission"])


def best_per_team(table: pa.Table) -> pa.Table:
    """Each team's best row of score's board (``rank_key``; a team without a score last), best first."""
    rows = best_of_each_team(table.to_pylist(), board_key, lambda r: r["team"])
    return pa.Table.from_pylist(rows, schema=ch.LEADERBOARD_SCHEMA)


def with_row(table: pa.Table, row: Mapping) -> pa.Table:
    """The board with ``row`` added, replacing an earlier row of the same team and fingerprint (a submission
    scored again is one row)."""
    keep = [r for r in table.to_pylist() if not (r["team"] == row["team"] and r["fingerprint"] == row["fingerprint"])]
    return pa.Table.from_pylist(keep + [dict(row)], schema=ch.LEADERBOARD_SCHEMA)


def update_leaderboard(path, record: Mapping,
                       decorate_best: Callable[[pa.Table], pa.Table] | None = None) -> pa.Table:
    """Add a scored submission to the board at ``path`` (``with_row``) and rewrite ``<stem>_best.parquet``
    (``best_per_team``, with the columns ``decorate_best(table) -> table`` adds), both under the board's lock
    (``io.challenge.rewrite_leaderboard``). Returns the new board."""
    row = {k: record[k] for k in ch.LEADERBOARD_COLUMNS}
    row["report"] = record.get("report")
    row["team"], row["submission"] = ch.normalized(row["team"]), ch.normalized(row["submission"])

    def change(table: pa.Table) -> tuple[pa.Table, pa.Table]:
        table = with_row(table, row)
        best = best_per_team(table)
        return table, best if decorate_best is None else decorate_best(best)

    return ch.rewrite_leaderboard(path, change)


def score_record(team: str, submission: str, fingerprint: str, summary_all: Mapping, when: _dt.datetime) -> dict:
    """What the participant of ``evalcore score`` sees: exactly ``io.challenge.RESULT_KEYS``, nothing of the
    annotations (``summary_all``: the public queries' summary row)."""
    score = summary_all.get("map")
    return {"team": team, "submission": submission, "fingerprint": fingerprint,
            "score": None if score is None else float(score),
            "n_queries": int(summary_all["n_queries"]), "n_evaluated": int(summary_all["n_evaluated"]),
            "timestamp": when.isoformat().replace("+00:00", "Z")}


def board_row(record: Mapping, when: _dt.datetime, report: str | None = None) -> dict:
    """The board's row of a participant record (``score_record``), with its organizer report's folder."""
    return {"team": record["team"], "submission": record["submission"], "fingerprint": record["fingerprint"],
            "score": record["score"], "n_queries": record["n_queries"], "n_evaluated": record["n_evaluated"],
            "scored_at": when, "report": report}


# --------------------------------------------------------------------------- the service's ledger views


def rank_split(reveal: bool) -> str:
    """The split a leaderboard ranks by: ``private`` when revealed, else ``public``."""
    return lg.PRIVATE if reveal else lg.PUBLIC


def ranked(entries: Iterable[lg.Entry], split: str) -> list[tuple[int | None, lg.Entry]]:
    """(rank, entry) for every entry: each team's best ``scored`` entry by ``split``'s mAP gets a rank
    (``rank_key`` with the time received; 1 first); every other entry None. Ranked entries come first in rank
    order, the rest in the order they were received (then team, submission)."""
    entries = list(entries)

    def key(e: lg.Entry) -> tuple:
        return rank_key(e.split_map(split), e.received_at, e.team, e.submission)

    scored = (e for e in entries if e.status == "scored" and has_score(e.split_map(split)))
    leaders = best_of_each_team(scored, key, lambda e: e.team)
    chosen = {id(e) for e in leaders}
    rest = sorted((e for e in entries if id(e) not in chosen), key=lambda e: (e.received_at, e.team, e.submission))
    return [(i, e) for i, e in enumerate(leaders, start=1)] + [(None, e) for e in rest]


def leaderboard_table(entries: Iterable[lg.Entry], phase: str, reveal: bool) -> pa.Table:
    """A phase's leaderboard: every entry of the phase with its rank (``ranked``).

    Public (``reveal`` False): rank, team, submission, status, reason (``public_reason``: no server path),
    received_at, ``map_public``, nothing else of the scores. Revealed: also the fingerprint, every split's mAP
    and the mAP over all queries, ranked by ``map_private``.
    """
    mine = [e for e in entries if e.phase == phase]
    split = rank_split(reveal)
    splits = lg.splits_of(mine) if reveal else [lg.PUBLIC]
    fields = [("phase", pa.string()), ("rank", pa.int64()), ("team", pa.string()), ("submission", pa.string()),
              ("status", pa.string()), ("reason", pa.string()), ("received_at", pa.timestamp("s", tz="UTC"))]
    fields += [(lg.SPLIT_PREFIX + s, pa.float64()) for s in splits]
    if reveal:
        fields += [("map", pa.float64()), ("fingerprint", pa.string()), ("n_evaluated", pa.int64())]
    rows = []
    for rank, e in ranked(mine, split):
        row: dict[str, object] = {"phase": e.phase, "rank": rank, "team": e.team, "submission": e.submission,
                                  "status": e.status, "reason": e.reason if reveal else lg.public_reason(e.reason),
                                  "received_at": e.received_at}
        row.update({lg.SPLIT_PREFIX + s: e.split_map(s) for s in splits})
        if reveal:
            row.update({"map": e.map, "fingerprint": e.fingerprint, "n_evaluated": e.n_evaluated})
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=pa.schema(fields))


def result_record(entry: lg.Entry) -> dict:
    """What the service's participant sees of their submission: the public split's mAP only, never another
    split's."""
    return {"phase": entry.phase, "team": entry.team, "submission": entry.submission, "status": entry.status,
            "reason": lg.public_reason(entry.reason), "fingerprint": entry.fingerprint,
            "score": entry.split_map(lg.PUBLIC), "split": lg.PUBLIC,
            "received_at": entry.received_at.isoformat().replace("+00:00", "Z")}
