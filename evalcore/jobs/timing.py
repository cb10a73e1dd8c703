"""Timings that hold up on a shared machine: repeated, alternated pair by pair, reported as medians with spread.

Two commands timed one after the other on a noisy machine see different
loads; timed in alternation (A B, B A, A B, ...) the drift falls on both, and
the median of the paired ratios A_i / B_i is steadier than the ratio of two
medians. ``evalcore bench`` prints every figure it compares this way.
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Samples:
    """Seconds of repeated runs of one thing."""

    seconds: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    def text(self) -> str:
        """``3.21 s (3.02-3.40, n=5)``: the median, then min-max."""
        return f"{self.median:6.2f} s ({min(self.seconds):.2f}-{max(self.seconds):.2f}, n={len(self.seconds)})"


@dataclass(frozen=True)
class Paired:
    """Two things timed in alternation; ``ratios`` are first_i / second_i, pair by pair."""

    first: Samples
    second: Samples

    @property
    def ratios(self) -> tuple[float, ...]:
        return tuple(a / b for a, b in zip(self.first.seconds, self.second.seconds))

    @property
    def ratio(self) -> float:
        """The median of the paired ratios."""
        return statistics.median(self.ratios)

    def ratio_text(self) -> str:
        """``2.61 (2.40-2.75)``: the median paired ratio, then min-max."""
        return f"{self.ratio:.2f} ({min(self.ratios):.2f}-{max(self.ratios):.2f})"


def seconds_of(run: Callable[[], object]) -> Callable[[], float]:
    """A callable that runs ``run`` and returns its wall seconds."""
    def timed() -> float:
        started = time.perf_counter()
        run()
        return time.perf_counter() - started
    return timed


def alternate(first: Callable[[], float], second: Callable[[], float], repeat: int) -> Paired:
    """Each callable (returning its own seconds) ``repeat`` times, in the order A B, B A, A B, ...
    so neither always runs first on a cache or a load the other left."""
    a: list[float] = []
    b: list[float] = []
    for i in range(repeat):
        if i % 2 == 0:
            a.append(first())
            b.append(second())
        else:
            b.append(second())
            a.append(first())
    return Paired(Samples(tuple(a)), Samples(tuple(b)))
