"""Progress of reading input files and writing a dataset, in bytes: ``on_progress(done, total, phase)`` calls.

Phases: ``"reading"`` (the TREC files of an import or ``evalcore trec``, piece
by piece as they are tokenised) and ``"writing"`` (a dataset's arrays, band
by band). A phase's total grows as each file is opened or each write begins
(``expect``), and its done as the bytes go (``advance``); done == total ends
it. One reporter for the process at a time (``reporting``): a command runs
one import; the readers run in worker threads, which a context variable
would not reach. Without a reporter a call costs one read of a global.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

#: ``on_progress(done, total, phase)``, as the engine's (``engine.progress``)
OnProgress = Callable[[int, int, str], None]


class ByteMeter:
    """Bytes expected and done per phase, reported under one lock (readers run in threads): done never goes
    back and never passes the total, and reaches it only when the phase ends (``finish``): a second file may
    still open after the first is read."""

    def __init__(self, on_progress: OnProgress):
        self.on_progress = on_progress
        self.total: dict[str, int] = {}
        self.done: dict[str, int] = {}
        self._lock = threading.Lock()

    def expect(self, phase: str, nbytes: int) -> None:
        """``nbytes`` more in ``phase``; the phases before it have ended (reading ends when writing starts)."""
        with self._lock:
            for other in [p for p in self.total if p != phase]:
                self._finish(other)
            if phase not in self.total:
                self.total[phase], self.done[phase] = 0, 0
                self.on_progress(0, int(nbytes), phase)
            self.total[phase] += int(nbytes)

    def advance(self, phase: str, nbytes: int) -> None:
        with self._lock:
            total = self.total.get(phase, 0)
            done = min(total - 1, self.done.get(phase, 0) + int(nbytes))  # the last byte comes with ``finish``
            if done <= self.done.get(phase, 0):
                return
            self.done[phase] = done
            self.on_progress(done, total, phase)

    def finish(self) -> None:
        """Every phase ended: done == total."""
        with self._lock:
            for phase in list(self.total):
                self._finish(phase)

    def _finish(self, phase: str) -> None:
        total = self.total.pop(phase)
        self.done.pop(phase)
        if total > 0:
            self.on_progress(total, total, phase)


_METER: ByteMeter | None = None


@contextmanager
def reporting(on_progress: OnProgress | None) -> Iterator[None]:
    """Report the reading and writing done inside the block to ``on_progress`` (None: nothing). The phases
    end with the block; a block left by an error ends none (its error line then stands alone in a log)."""
    global _METER
    meter = None if on_progress is None else ByteMeter(on_progress)
    previous, _METER = _METER, meter
    try:
        yield
        if meter is not None:
            meter.finish()
    finally:
        _METER = previous


def expect(phase: str, nbytes: int) -> None:
    """``nbytes`` more to read or write in ``phase`` (a file opened, a write begun)."""
    meter = _METER
    if meter is not None and nbytes > 0:
        meter.expect(phase, nbytes)


def advance(phase: str, nbytes: int) -> None:
    """``nbytes`` of ``phase`` done."""
    meter = _METER
    if meter is not None and nbytes > 0:
        meter.advance(phase, nbytes)
