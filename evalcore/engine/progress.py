"""Progress of a run as it goes: ``on_progress(done, total, phase)`` calls, a bar on a terminal, log lines elsewhere.

Units. A run here counts query-gallery pairs ranked (phase ``"ranking"``):
each chunk owns (q1 - q0) x G pairs, and its scan adds (q1 - q0) x width as
it finishes each gallery tile (embeddings) or block (given scores,
re-ranking); a chunk that ranks without a scan (precomputed lists, judged
rows) counts its share when it ends. A cluster run counts finished tasks
(phase ``"chunks"``; ``"shards"`` when each chunk is a task per gallery shard).
The last call of a phase has done == total.

A callback per tile, never per row: one lock and one call against a tile's
product of 512 x 4,096 scores and its fold.
"""
from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from evalcore.core.scan.base import TILE_COLS

#: ``on_progress(done, total, phase)``
OnProgress = Callable[[int, int, str], None]

#: seconds a run goes before its terminal bar shows: short runs stay as quiet as before
BAR_DELAY_S = 2.0


class PairCounter:
    """Pairs ranked so far in a run here: each chunk's share credited tile by tile, topped up when it ends.

    Thread-safe (threads split a chunk's columns, or run chunks side by side):
    ``on_progress`` is called under the counter's lock, so it sees done rise
    and needs no lock of its own. A chunk's credit never passes its share,
    so a source read twice cannot count past done == total.
    """

    def __init__(self, on_progress: OnProgress, chunks: list[tuple[int, int]], n_gallery: int,
                 phase: str = "ranking"):
        self.on_progress = on_progress
        self.phase = phase
        self.n_gallery = n_gallery
        self.share = {q0: (q1 - q0) * n_gallery for q0, q1 in chunks}
        self.total = sum(self.share.values())
        self.credit = dict.fromkeys(self.share, 0)
        self.done = 0
        self._lock = threading.Lock()

    def start(self) -> None:
        self.on_progress(0, self.total, self.phase)

    def add(self, q0: int, pairs: int, last: bool = False) -> None:
        """Credit ``pairs`` more of the chunk starting at query ``q0``. Its scan never credits the last pair:
        that comes with ``chunk_done`` (``last``), once its rows are made, so done == total (a log's line
        that the phase ended) never comes before an input error the chunk's rows still raise."""
        with self._lock:
            share = self.share.get(q0)
            if share is None:
                return
            step = min(pairs, share - (0 if last else 1) - self.credit[q0])
            if step <= 0:
                return
            self.credit[q0] += step
            self.done += step
            # inside the lock: threads report in the order they count, so done never goes back
            self.on_progress(self.done, self.total, self.phase)

    def chunk_done(self, q0: int) -> None:
        """The chunk is finished: whatever of its share is not credited yet."""
        with self._lock:
            share = self.share.get(q0)
            left = 0 if share is None else share - self.credit[q0]
        if left > 0:
            self.add(q0, left, last=True)


class TaskCounter:
    """Finished tasks of a cluster run, as Dask's done callbacks report them (from its callback thread)."""

    def __init__(self, on_progress: OnProgress, total: int, phase: str):
        self.on_progress = on_progress
        self.total = total
        self.phase = phase
        self.done = 0
        self._lock = threading.Lock()
        on_progress(0, total, phase)

    def one(self) -> None:
        """One more task finished (a future finishes once, however often Dask retried it). The last one is
        left to ``finish``: a task may return an input error as its value, which the run raises first."""
        with self._lock:  # under the lock: done never goes back
            if self.done < self.total - 1:
                self.done += 1
                self.on_progress(self.done, self.total, self.phase)

    def finish(self) -> None:
        """All of them finished (the run has every result): done == total now, whatever callbacks are late."""
        with self._lock:
            if self.done < self.total:
                self.done = self.total
                self.on_progress(self.done, self.total, self.phase)


class CountedColumns:
    """A scan's source (``core.scan.base.Columns``) whose ``blocks`` credit a ``PairCounter`` as the scan walks
    them: by gallery tile when ``by_tile`` (the embedding scan cuts each block into tiles at exactly these
    places itself, so the tiles and every number stay the same), else by block. A block's gallery items lie
    along ``axis`` (0 for gallery rows, 1 for a chunk's rows of a score matrix).

    Everything else is the wrapped source's: rows, values, its kept whole gallery and dense tiles.
    """

    def __init__(self, source: Any, counter: PairCounter, q0: int, rows: int, by_tile: bool, axis: int = 0):
        self.source = source
        self.counter = counter
        self.q0 = q0
        self.chunk_rows = rows  # not ``rows``: that is the gallery's method
        self.by_tile = by_tile
        self.axis = axis

    @property
    def n_rows(self) -> int:
        return self.source.n_rows

    @property
    def whole(self) -> np.ndarray | None:
        return getattr(self.source, "whole", None)

    @property
    def dense_tiles(self) -> set[int] | None:
        return getattr(self.source, "dense_tiles", None)

    def __getattr__(self, name: str) -> Any:  # rows(), values(), higher_is_better, query_norms, ...
        return getattr(self.source, name)

    def blocks(self, start: int = 0, stop: int | None = None) -> Iterator[tuple[int, np.ndarray]]:
        for g0, block in self.source.blocks(start, stop):
            if not self.by_tile:
                yield g0, block
                self.counter.add(self.q0, self.chunk_rows * block.shape[self.axis])
                continue
            for c0 in range(0, len(block), TILE_COLS):
                tile = block[c0:c0 + TILE_COLS]
                yield g0 + c0, tile
                self.counter.add(self.q0, self.chunk_rows * len(tile))


# the counters of the runs going on in this process, by run id: the tasks find theirs here (a worker of a
# cluster has none, and its tasks scan uncounted)
_COUNTERS: dict[str, PairCounter] = {}


def register(run_id: str, counter: PairCounter) -> None:
    _COUNTERS[run_id] = counter


def forget(run_id: str) -> None:
    _COUNTERS.pop(run_id, None)


def counted(run_id: str, source: Any, q0: int, q1: int, backend: str) -> Any:
    """``source`` of a chunk's scan by ``backend`` (its name), counted by the run's ``PairCounter`` if it has one
    here, else as it is."""
    counter = _COUNTERS.get(run_id)
    if counter is None:
        return source
    return CountedColumns(source, counter, q0, q1 - q0, by_tile=backend == "embeddings",
                          axis=1 if backend == "scores" else 0)


def chunk_done(run_id: str, q0: int) -> None:
    counter = _COUNTERS.get(run_id)
    if counter is not None:
        counter.chunk_done(q0)


# --------------------------------------------------------------------------- what the user sees


COMPILING = "compiling kernels"


def compile_phase(cache_dir: str) -> str:
    """The phase a run reports before numba compiles its first kernel (once per process, a fresh cache only)."""
    return f"{COMPILING} (first run only, cached in {cache_dir})"


#: the unit of a phase's count where it is not the phase's own word (chunks, shards): counted in thousands and
#: millions (pairs) or KiB and MiB (bytes: ``io.progress``)
UNITS = {"ranking": "pairs", "reading": "B", "writing": "B"}


class TerminalBar:
    """``on_progress`` for a terminal: a tqdm bar with an ETA per phase on ``stream`` (shown once the run has
    gone ``BAR_DELAY_S``), a message line for phases without a count (the compile notice)."""

    def __init__(self, stream: Any = None):
        self.stream = stream if stream is not None else sys.stderr
        self.bar: Any = None
        self.phase: str | None = None

    def __call__(self, done: int, total: int, phase: str) -> None:
        if total <= 0:  # a notice, not a count
            self.close()
            print(f"evalcore: {phase}", file=self.stream, flush=True)
            return
        if phase != self.phase or self.bar is None:
            self.close()
            from tqdm import tqdm  # deferred: runs without a terminal never need it

            unit = UNITS.get(phase)
            self.bar = tqdm(total=total, desc=phase, unit=unit or phase.rstrip("s"), unit_scale=unit is not None,
                            unit_divisor=1024 if unit == "B" else 1000, file=self.stream, leave=False,
                            delay=BAR_DELAY_S, dynamic_ncols=True)
            self.phase = phase
        if total != self.bar.total:  # a phase whose total grows as it goes (an import opening its second file)
            self.bar.total = total
        self.bar.update(done - self.bar.n)
        if done >= total:
            self.close()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        self.bar, self.phase = None, None


class LogLines:
    """``on_progress`` for a log (stderr not a terminal): one line as each phase ends, with its count and seconds
    (at the end, not the start: a run stopped by bad input prints its one error line alone); the per-chunk
    lines stay ``on_chunk``'s. A notice (total 0) is printed as it comes."""

    def __init__(self, stream: Any = None, clock: Callable[[], float] = time.perf_counter):
        self.stream = stream if stream is not None else sys.stderr
        self.clock = clock
        self.started: dict[str, float] = {}

    def __call__(self, done: int, total: int, phase: str) -> None:
        if total <= 0:
            print(f"evalcore: {phase}", file=self.stream, flush=True)
            return
        started = self.started.setdefault(phase, self.clock())
        if done >= total:
            what = {"ranking": "pairs ranked", "shards": "shard scans", "reading": "bytes read",
                    "writing": "bytes written"}.get(phase, phase)
            print(f"evalcore: {phase} done: {total:,} {what} in {self.clock() - started:.2f} s", file=self.stream,
                  flush=True)
            del self.started[phase]


@contextmanager
def shown(on_progress: Any) -> Iterator[None]:
    """Around a run: its bar closed at the end, also when the run fails (an error line then starts a clean
    line instead of following a half-drawn bar)."""
    try:
        yield
    finally:
        close = getattr(on_progress, "close", None)
        if close is not None:
            close()


def quietly(done: int, total: int, phase: str) -> None:  # noqa: ARG001 - the on_progress signature
    """``on_progress`` that shows nothing (``--quiet``): also keeps the compile notice off stderr."""


def print_notice(done: int, total: int, phase: str) -> None:  # noqa: ARG001 - the on_progress signature
    """What a run without ``on_progress`` shows: the compile notice alone, on stderr."""
    if total <= 0:
        print(f"evalcore: {phase}", file=sys.stderr, flush=True)
