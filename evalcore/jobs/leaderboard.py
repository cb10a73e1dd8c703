"""``evalcore leaderboard LEADERBOARD [--reveal] [--phase NAME]``: print and write a phase's ranking.

LEADERBOARD is the service's ledger (``SCORED/organizer/ledger.parquet``) or
the folder SCORED holding it. The public ranking (ranked by the ``public``
split, no other split's score) goes to ``SCORED/leaderboard-PHASE.parquet``
and ``.html``, where participants may read it; the revealed one (``--reveal``:
every split, ranked by ``private``) to ``SCORED/organizer/`` beside the ledger.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import pyarrow as pa

from evalcore.errors import InputError
from evalcore.io import ledger as lg
from evalcore.io.history import atomic_write
from evalcore.jobs.common import EXIT_OK
from evalcore.render.leaderboard import leaderboard_html


def ledger_path(text: str) -> Path:
    """The ledger named by LEADERBOARD: the file itself, or SCORED/organizer/ledger.parquet of a folder."""
    p = Path(text).absolute()
    if p.is_dir():
        p = p / "organizer" / "ledger.parquet"
    if not p.is_file():
        raise InputError(f"LEADERBOARD {text}: no ledger there (give SCORED or SCORED/organizer/ledger.parquet)")
    return p


def board_paths(scored: Path, phase: str, reveal: bool) -> tuple[Path, Path]:
    """(parquet, html) of a phase's public or revealed leaderboard under the service's --out."""
    folder, stem = (scored / "organizer", f"leaderboard-{phase}-revealed") if reveal else \
        (scored, f"leaderboard-{phase}")
    return folder / f"{stem}.parquet", folder / f"{stem}.html"


def publish(entries: list[lg.Entry], scored: Path, phase: str, reveal: bool) -> pa.Table:
    """Write a phase's leaderboard (Parquet + HTML) atomically; returns its table."""
    table = lg.leaderboard_table(entries, phase, reveal)
    parquet, page = board_paths(scored, phase, reveal)
    atomic_write(parquet, table)
    title = f"{phase}: {'private split (revealed)' if reveal else 'public split'}"
    atomic_write(page, leaderboard_html(table, title).encode())
    return table


def format_board(table: pa.Table, reveal: bool) -> list[str]:
    """The printed ranking: one line per ranked team, then a count of the rows that are not ranked."""
    split = lg.rank_split(reveal)
    rows = table.to_pylist()
    lines = [f"{'rank':>4}  {'map_' + split:>12}  team / submission"]
    for r in rows:
        if r["rank"] is not None:
            lines.append(f"{r['rank']:>4}  {r[lg.SPLIT_PREFIX + split]:>12.6f}  {r['team']} / {r['submission']}")
    others: dict[str, int] = {}
    for r in rows:
        if r["rank"] is None:
            others[r["status"]] = others.get(r["status"], 0) + 1
    if others:
        lines.append("not ranked: " + ", ".join(f"{n} {status}" for status, n in sorted(others.items())))
    return lines


def cmd_leaderboard(args) -> int:
    path = ledger_path(args.leaderboard)
    entries = lg.read_ledger(path)
    phase = lg.pick_phase(entries, args.phase, str(path))
    scored = path.parent.parent
    table = publish(entries, scored, phase, bool(args.reveal))
    for line in format_board(table, bool(args.reveal)):
        print(line)
    parquet, page = board_paths(scored, phase, bool(args.reveal))
    print(f"written {parquet} and {page}")
    return EXIT_OK


def register(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("leaderboard", help="print and write a phase's ranking from the scoring ledger",
                              description="Rank each team's best scored submission of a phase: by the public "
                                          "split, or by the private split with --reveal.")
    p.add_argument("leaderboard", metavar="LEADERBOARD", help="SCORED folder of score-service, or its ledger")
    p.add_argument("--reveal", action="store_true", help="rank by the private split and show every split")
    p.add_argument("--phase", help="the phase (default: the ledger's only phase)")
    p.set_defaults(func=cmd_leaderboard)
    return p
