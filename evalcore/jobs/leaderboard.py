"""``evalcore leaderboard LEADERBOARD [--reveal] [--phase NAME]``: print and write a phase's ranking.

LEADERBOARD is the service's ledger (``SCORED/organizer/ledger.parquet``) or
the folder SCORED holding it. The public ranking (ranked by the ``public``
split, no other split's score) goes to ``SCORED/leaderboard-PHASE.parquet``
and ``.html``, where participants may read it; the revealed one (``--reveal``:
every split, ranked by ``private``) to ``SCORED/organizer/`` beside the ledger.

``--ci [LEVEL]`` adds error bars to each ranked row: the percentile bootstrap
interval of the ranking split's mAP over that split's queries
(``map_<split>_low``, ``map_<split>_high``), and ``tied_with_leader``: whether
the two-sided sign-flip test of the per-query AP differences between the row
and rank 1, on the same queries, does not reject at 1 - LEVEL
(``core.intervals.statistically_tied``). The per-query APs come from the
organizer's reports (``SCORED/organizer/PHASE/ID/per_query.parquet``); the
public view uses the public queries alone, so nothing of the private split
reaches it.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from evalcore.core.intervals import Method, mean_interval, statistically_tied
from evalcore.errors import InputError, OptionError
from evalcore.io import ledger as lg
from evalcore.io.files import atomic_write
from evalcore.jobs import standings
from evalcore.jobs.common import EXIT_OK, parse_number
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


def split_aps(scored: Path, e: lg.Entry, split: str) -> np.ndarray:
    """AP of each query of ``split`` (query order; NaN where a query has no AP) of a scored entry, from the
    organizer's per-query report."""
    path = scored / "organizer" / e.phase / e.submission_id / "per_query.parquet"
    try:
        table = pq.read_table(path, columns=["query", "ap", "split"])
    except (OSError, pa.ArrowException, KeyError) as exc:
        raise OptionError("--ci", f"the per-query report of {e.team!r} / {e.submission!r} ({path}) cannot be read "
                         f"({exc.__class__.__name__}); error bars need every ranked row's report") from None
    table = table.filter(pc.equal(table.column("split"), split)).sort_by("query")
    return np.asarray(table.column("ap").to_numpy(zero_copy_only=False), dtype=np.float64)


def error_bars(aps: list[np.ndarray | None], leader: int | None, method: Method
               ) -> tuple[list[float | None], list[float | None], list[bool | None]]:
    """(low, high, tied) per row of a board: the percentile bootstrap interval of the mean of the row's per-query
    APs (NaN: no AP, left out), and ``tied_with_leader``: the two-sided sign-flip test of the AP differences
    between the row and row ``leader``, on the queries where both have an AP, does not reject at 1 - level.
    Rows without APs (None), and the leader's own ``tied``, are None; so is ``tied`` where the two rows' query
    lists differ in length (not scored on the same truth)."""
    low: list[float | None] = [None] * len(aps)
    high: list[float | None] = [None] * len(aps)
    tied: list[bool | None] = [None] * len(aps)
    first = None if leader is None else aps[leader]
    for i, values in enumerate(aps):
        if values is None:
            continue
        defined = values[~np.isnan(values)]
        if defined.size:
            lo, hi = mean_interval(defined[:, None], method.level, method.resamples, method.seed)
            low[i], high[i] = float(lo[0]), float(hi[0])
        if i != leader and first is not None and len(first) == len(values):
            both = ~np.isnan(first) & ~np.isnan(values)
            if both.any():
                tied[i] = statistically_tied(first[both], values[both], 1 - method.level, method)
    return low, high, tied


def with_error_bars(table: pa.Table, entries: list[lg.Entry], scored: Path, split: str, method: Method) -> pa.Table:
    """``table`` (a leaderboard) with ``map_<split>_low``, ``map_<split>_high`` and ``tied_with_leader`` for its
    ranked rows (null elsewhere, and ``tied_with_leader`` null on rank 1)."""
    by_key = {(e.phase, e.team, e.submission): e for e in entries}
    rows = table.to_pylist()
    aps = [split_aps(scored, by_key[r["phase"], r["team"], r["submission"]], split) if r["rank"] is not None
           else None for r in rows]
    low, high, tied = error_bars(aps, next((i for i, r in enumerate(rows) if r["rank"] == 1), None), method)
    name = lg.SPLIT_PREFIX + split
    table = table.append_column(pa.field(f"{name}_low", pa.float64()), pa.array(low, pa.float64()))
    table = table.append_column(pa.field(f"{name}_high", pa.float64()), pa.array(high, pa.float64()))
    return table.append_column(pa.field("tied_with_leader", pa.bool_()), pa.array(tied, pa.bool_()))


def publish(entries: list[lg.Entry], scored: Path, phase: str, reveal: bool,
            method: Method | None = None) -> pa.Table:
    """Write a phase's leaderboard (Parquet + HTML) atomically, with error bars when ``method`` is given;
    returns its table."""
    table = standings.leaderboard_table(entries, phase, reveal)
    if method is not None:
        table = with_error_bars(table, entries, scored, standings.rank_split(reveal), method)
    parquet, page = board_paths(scored, phase, reveal)
    atomic_write(parquet, table)
    title = f"{phase}: {'private split (revealed)' if reveal else 'public split'}"
    atomic_write(page, leaderboard_html(table, title).encode())
    return table


def format_board(table: pa.Table, reveal: bool) -> list[str]:
    """The printed ranking: one line per ranked team, then a count of the rows that are not ranked."""
    split = standings.rank_split(reveal)
    rows = table.to_pylist()
    name = lg.SPLIT_PREFIX + split
    bars = f"{name}_low" in table.column_names
    lines = [f"{'rank':>4}  {name:>12}  " + (f"{'interval':>19}  {'tied':>4}  " if bars else "") + "team / submission"]
    for r in rows:
        if r["rank"] is not None:
            extra = ""
            if bars:
                interval = "" if r[f"{name}_low"] is None else f"[{r[f'{name}_low']:.4f}, {r[f'{name}_high']:.4f}]"
                extra = f"{interval:>19}  {'=' if r['tied_with_leader'] else '':>4}  "
            lines.append(f"{r['rank']:>4}  {r[name]:>12.6f}  {extra}{r['team']} / {r['submission']}")
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
    method = None
    if args.ci is not None:
        level = parse_number("--ci", args.ci)
        method = Method(level=level, resamples=parse_number("--resamples", args.resamples, int),
                        permutations=parse_number("--resamples", args.resamples, int), seed=0).checked()
    table = publish(entries, scored, phase, bool(args.reveal), method)
    for line in format_board(table, bool(args.reveal)):
        print(line)
    if method is not None:
        print(f"intervals: {method.level:g} percentile bootstrap of the {standings.rank_split(bool(args.reveal))} split's "
              f"queries ({method.resamples} resamples, seed 0); '=': tied with rank 1 (two-sided sign-flip test of "
              f"the per-query AP differences, not rejected at {1 - method.level:.2g})")
    parquet, page = board_paths(scored, phase, bool(args.reveal))
    print(f"written {parquet} and {page}")
    return EXIT_OK
