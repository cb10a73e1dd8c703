"""The evaluation options: the command line's words (README, Commands), checked once at the door."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from evalcore.core import intervals, registry
from evalcore.errors import InputError
from evalcore.types import EMPTY_QUERIES, PROTOCOLS, SIMILARITIES, TIES, EmptyQueries, Protocol, Similarity, Ties


@dataclass(frozen=True)
class Options:
    """The evaluation options of the command line (README, Commands), dataset and output aside."""

    protocol: Protocol = "class"
    similarity: Similarity = "cosine"
    ks: tuple[int, ...] = (1, 3, 5, 10)
    max_rank: int = 50
    ties: Ties = "pessimistic"
    threshold: float | None = None
    map_at: int | None = None
    judged_only: bool = False
    radius: float | None = None
    #: qrels: a judged query with no relevant item is left out of the means (skip) or scores 0 (zero)
    empty_queries: EmptyQueries = "skip"
    #: the metrics to compute, by name (``map``, ``recall@5``; core.registry); None: the default set
    metrics: tuple[str, ...] | None = None
    #: bootstrap intervals of every mean (``--ci LEVEL``; core.intervals): level, resamples, seed; None: none
    ci: float | None = None
    resamples: int = 10_000
    seed: int = 0

    def checked(self) -> Options:
        """The same options, or an InputError naming the bad one."""
        if self.protocol not in PROTOCOLS:
            raise InputError(f"--protocol: {self.protocol!r} is not one of {', '.join(PROTOCOLS)}")
        if self.similarity not in SIMILARITIES:
            raise InputError(f"--similarity: {self.similarity!r} is not cosine or dot")
        if self.ties not in TIES:
            raise InputError(f"--ties: {self.ties!r} is not pessimistic or optimistic")
        if not self.ks or any(int(k) != k or k < 1 for k in self.ks):
            raise InputError(f"--ks: {','.join(map(str, self.ks))} must be positive integers")
        if len(set(self.ks)) != len(self.ks):
            raise InputError(f"--ks: {','.join(map(str, self.ks))} repeats a value")
        if int(self.max_rank) != self.max_rank or self.max_rank < 1:
            raise InputError(f"--max-rank: {self.max_rank} must be a positive integer")
        if self.threshold is not None and not math.isfinite(self.threshold):
            raise InputError(f"--threshold: {self.threshold} must be a finite number")
        if self.map_at is not None and (int(self.map_at) != self.map_at or self.map_at < 1):
            raise InputError(f"--map-at: {self.map_at} must be a positive integer")
        if self.radius is not None and not (math.isfinite(self.radius) and self.radius >= 0):
            raise InputError(f"--radius: {self.radius} must be a finite number >= 0")
        if self.radius is not None and self.protocol not in ("geo", "xy"):
            raise InputError(f"--radius: only applies to the geo and xy protocols, not {self.protocol!r}")
        if self.judged_only and self.protocol != "qrels":
            raise InputError(f"--judged-only: only applies to the qrels protocol, not {self.protocol!r}")
        if self.empty_queries not in EMPTY_QUERIES:
            raise InputError(f"--empty-queries: {self.empty_queries!r} is not skip or zero")
        if self.empty_queries == "zero" and self.protocol != "qrels":
            raise InputError(f"--empty-queries: zero only applies to the qrels protocol, not {self.protocol!r} "
                             "(there a query with no relevant item is an open-set query; see --threshold)")
        metrics = None if self.metrics is None else registry.select(self.metrics)
        if self.ci is not None:
            self.interval_method()
        return replace(self, ks=tuple(sorted(int(k) for k in self.ks)), max_rank=int(self.max_rank), metrics=metrics)

    def interval_method(self) -> intervals.Method:
        """The intervals' method (checked: an InputError naming --ci, --resamples or --seed)."""
        return intervals.Method(level=self.ci if self.ci is not None else 0.95, resamples=self.resamples,
                                seed=self.seed).checked()

    def columns(self, first_rank: bool = False) -> list[registry.Column]:
        """The run's per-query metric columns in report order (``first_rank=True``: with first_rank,
        which the engine needs for the CMC and the open set whether or not it is reported)."""
        return registry.run_columns(self.metrics, self.ks, self.map_at, first_rank)
