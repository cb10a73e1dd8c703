"""The evaluation options: the command line's words (README, Commands), checked once at the door."""
from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING

# the integer bound and check live with the declarations; importable from here as before
from evalcore.declarations import MAX_INTEGER_OPTION as MAX_INTEGER_OPTION
from evalcore.declarations import PositiveInteger, check_integer, declared, named
from evalcore.declarations import shown as _shown
from evalcore.errors import InputError, OptionError, input_error, mention
from evalcore.types import EmptyQueries, Protocol, Similarity, Ties

if TYPE_CHECKING:
    from evalcore.core import intervals, registry

# core.protocols, core.registry and core.intervals (numpy, numba) are imported where they are used: the command
# line builds its parsers from this module's neighbours and must start without them

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
    #: k-reciprocal re-ranking (k1, k2, lambda); None: the plain ranking (README, Re-ranking)
    rerank: tuple[int, int, float] | None = None
    #: qrels grades: an item is relevant for the binary measures when its grade >= rel_level (trec_eval -l)
    rel_level: int = 1
    #: rankings cut at this rank before every measure (trec_eval -M); None: no cut
    depth: int | None = None
    #: αQE and DBA (K, alpha); None: the vectors as given (README, Query expansion)
    query_expansion: tuple[int, float] | None = None
    database_augmentation: tuple[int, float] | None = None
    #: bootstrap intervals of every mean (``--ci LEVEL``; core.intervals): level, resamples, seed; None: none
    ci: float | None = None
    resamples: int = 10_000
    seed: int = 0

    def checked(self) -> Options:
        """The same options, or an InputError naming the bad one."""
        from evalcore.core import protocols, registry

        protocols.get(self.protocol)  # an InputError naming the registered ones
        self.check_declared("similarity", "ties")  # each value against its declaration (evalcore.declarations)
        self.check_integers()
        if len(set(self.ks)) != len(self.ks):
            raise OptionError("--ks", f"{','.join(map(str, self.ks))} repeats a value")
        self.check_declared("threshold", "radius")
        problem = protocols.option_problems(self, self.empty_queries)  # options another protocol takes
        if problem:
            raise problem
        self.check_declared("empty_queries")
        metrics = None if self.metrics is None else registry.select(self.metrics)
        if self.ties == "average":
            registry.check_ties(metrics, self.map_at, self.ties)   # the metrics it does not define, named
            if self.threshold is not None:
                raise OptionError("--threshold", "the open-set outcome is not defined under " + mention("--ties")
                                  + " average: it needs the one item at rank 1, and a tie there has none (use "
                                  + mention("--ties") + " pessimistic or optimistic)")
        if self.ci is not None:
            self.interval_method()
        rerank = None if self.rerank is None else check_rerank(self.rerank)
        if rerank is not None and self.similarity != "cosine":
            raise OptionError("--rerank", "needs " + mention("--similarity") + " cosine (it works on distances of "
                              f"L2-normalised rows), not {self.similarity!r}")
        if rerank is not None and self.judged_only:
            raise OptionError("--rerank", "does not apply with " + mention("--judged-only")
                              + " (each query is ranked among its own judged items there)")
        qe = None if self.query_expansion is None else check_expansion("--query-expansion", self.query_expansion)
        dba = None if self.database_augmentation is None else \
            check_expansion("--database-augmentation", self.database_augmentation)
        for option, value in (("--database-augmentation", dba), ("--query-expansion", qe)):
            if value is not None and self.similarity != "cosine":
                raise input_error(option, "needs " + mention("--similarity") + " cosine (it sums L2-normalised rows), "
                                 f"not {self.similarity!r}")
        return replace(self, rerank=rerank, query_expansion=qe, database_augmentation=dba, ks=tuple(sorted(int(k) for k in self.ks)), max_rank=int(self.max_rank),
                       metrics=metrics, rel_level=int(self.rel_level), depth=None if self.depth is None else int(self.depth))

    def check_integers(self) -> None:
        """--ks, --max-rank, --map-at, --rel-level and --depth: integers from 1 to MAX_INTEGER_OPTION, else an
        InputError naming the option (a plain check, no dataset needed: the command line runs it first)."""
        try:
            ks = list(self.ks)
        except TypeError:
            raise OptionError("--ks", f"{self.ks!r} must be positive integers") from None
        if not ks:
            raise OptionError("--ks", " must be positive integers")
        for k in ks:
            try:
                check_integer("--ks", k)
            except InputError:
                if isinstance(k, int) and not isinstance(k, bool) and k >= 1:
                    raise  # a whole number past the limit: check_integer's message gives the limit
                raise OptionError("--ks", f"{','.join(map(_shown, ks))} must be positive integers") from None
        # every other integer option, as declared (a new one is checked without a line here)
        self.check_declared(*(f.name for f in fields(self) if f.name != "ks"
                              and isinstance(declared(f.name).constraint, PositiveInteger)))

    def check_declared(self, *names: str) -> None:
        """Each option of ``names`` against its declared constraint (a choice, a positive integer, a finite
        number...), else an InputError naming its flag: the checks of one option alone; the rules between
        options are ``checked``'s. None passes where it is the field's default (no depth, no threshold)."""
        optional = {f.name for f in fields(self) if f.default is None}
        for d in named(names):
            value = getattr(self, d.name)
            problem = None if value is None and d.name in optional else d.problem(value)
            if problem:
                raise problem

    def interval_method(self) -> intervals.Method:
        """The intervals' method (checked: an InputError naming --ci, --resamples or --seed)."""
        from evalcore.core import intervals

        return intervals.Method(level=self.ci if self.ci is not None else 0.95, resamples=self.resamples,
                                seed=self.seed).checked()

    def columns(self, first_rank: bool = False) -> list[registry.Column]:
        """The run's per-query metric columns in report order (``first_rank=True``: with first_rank,
        which the engine needs for the CMC and the open set whether or not it is reported)."""
        from evalcore.core import registry

        return registry.run_columns(self.metrics, self.ks, self.map_at, first_rank, self.ties)


def check_rerank(value) -> tuple[int, int, float]:
    """``--rerank k1,k2,lambda`` as numbers: k1 >= 1 and k2 >= 1 integers, 0 <= lambda <= 1; else an InputError."""
    try:
        k1, k2, lam = value
        k1f, k2f, lamf = float(k1), float(k2), float(lam)
    except (TypeError, ValueError):
        raise OptionError("--rerank", f"{value!r} is not three numbers k1,k2,lambda (e.g. 20,6,0.3)") from None
    if not (math.isfinite(k1f) and k1f == int(k1f) and k1f >= 1):
        raise OptionError("--rerank", f"k1 = {k1} must be an integer >= 1")
    if not (math.isfinite(k2f) and k2f == int(k2f) and k2f >= 1):
        raise OptionError("--rerank", f"k2 = {k2} must be an integer >= 1")
    if not (math.isfinite(lamf) and 0 <= lamf <= 1):
        raise OptionError("--rerank", f"lambda = {lam} must be a number in [0, 1]")
    return int(k1f), int(k2f), lamf


def parse_rerank(text: str) -> tuple[int, int, float]:
    """``--rerank`` as given on the command line: ``k1,k2,lambda`` (an empty value: the defaults 20,6,0.3)."""
    if not str(text).strip():
        return (20, 6, 0.3)
    parts = [x.strip() for x in str(text).split(",")]
    if len(parts) != 3:
        raise OptionError("--rerank", f"{text!r} is not k1,k2,lambda (three numbers, e.g. 20,6,0.3)")
    return check_rerank(parts)


def check_expansion(option: str, value) -> tuple[int, float]:
    """``--query-expansion`` / ``--database-augmentation`` K,ALPHA as numbers: K >= 1 an integer, ALPHA >= 0
    finite; else an InputError naming ``option``."""
    try:
        k, alpha = value
        kf, alphaf = float(k), float(alpha)
    except (TypeError, ValueError):
        raise input_error(option, f"{value!r} is not two numbers K,ALPHA (e.g. 2,3)") from None
    if isinstance(k, bool) or not (math.isfinite(kf) and kf == int(kf) and kf >= 1):
        raise input_error(option, f"K = {k} must be an integer >= 1")
    if isinstance(alpha, bool) or not (math.isfinite(alphaf) and alphaf >= 0):
        raise input_error(option, f"ALPHA = {alpha} must be a finite number >= 0")
    return int(kf), alphaf


def parse_expansion(option: str, text: str) -> tuple[int, float]:
    """``K,ALPHA`` as given on the command line for ``option``."""
    parts = [x.strip() for x in str(text).split(",")]
    if len(parts) != 2:
        raise input_error(option, f"{text!r} is not K,ALPHA (two numbers, e.g. 2,3)")
    return check_expansion(option, parts)
