"""Every option of an evaluation, declared once: its name, type, constraint, default, flag, help and job-file key.

The command line's flags (``jobs.common.add_run_options``), the job file's keys
and value checks (``jobs.nightly``), the simple checks of ``engine.Options``,
the options ``compare`` warns about (``core.comparison.NUMBER_OPTIONS``) and
run.json's options record are built from these declarations, and
tests/test_declarations.py checks that the flags, the job-file keys and the
parameters of ``evalcore.evaluate`` name the same options.

Adding an option: one ``Declaration`` here and its use where it acts (README,
Contributing). Cross-option rules (``--rerank`` needs cosine, ``--radius``
only for geo/xy) stay with ``Options.checked`` and the protocols; a metric's
own parameters (``k``) are declared on the metric (``core.registry``).

Plain Python, the errors' layer: the command line builds its parsers from it
before anything heavy is imported.
"""
from __future__ import annotations

import math
import numbers
import textwrap
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from evalcore.errors import InputError, input_error
from evalcore.types import EMPTY_QUERIES, PROTOCOLS, SIMILARITIES, TIES

#: The largest value of an integer option (--ks, --max-rank, --map-at, --depth, --rel-level, --chunk-rows,
#: --gallery-shards): a cut-off, a level or a count above it exceeds any gallery, grade or query set an
#: exact evaluation holds, and every value up to it fits the kernels' integer types (past 2^63 numpy
#: cannot hold it at all).
MAX_INTEGER_OPTION = 2 ** 31 - 1

#: What the option is about: what is computed, or where and how it runs (threads, workers, memory, storage).
Part = Literal["evaluation", "execution"]
#: Where a job file (``evalcore nightly``) takes it: in each ``[[evaluation]]``, at the top, or not at all.
JobTable = Literal["evaluation", "top"]
#: When run.json's ``options`` record holds it: always; only when given (not None); only with ``ci``; never
#: (it is not an engine option: the sweep, execution).
Recorded = Literal["always", "given", "with_ci", "never"]
#: The input kinds an evaluation ranks (README, Datasets).
Kind = Literal["embeddings", "scores", "rankings", "pairs"]
KINDS: tuple[Kind, ...] = ("embeddings", "scores", "rankings", "pairs")


def shown(value: object) -> str:
    """An option's value for a message (Python will not print an integer of more than 4,300 digits)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value).bit_length() > 128:
        return f"an integer of {int(value).bit_length()} bits"
    return str(value)


def check_integer(option: str, value: object, high: int = MAX_INTEGER_OPTION) -> int:
    """``value`` as an int, 1 <= value <= ``high``, else an InputError naming ``option``.

    A whole float (3.0) is taken; a bool, a fraction, NaN or infinity is not.
    """
    n: int | None = None
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        n = int(value)
    elif isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value) \
            and float(value).is_integer():
        n = int(float(value))
    if n is None or n < 1:
        raise input_error(option, f"{shown(value)} must be a positive integer")
    if n > high:
        raise input_error(option, f"{shown(value)} is too large: at most {high:,}")
    return n


# --------------------------------------------------------------------------- constraints


@dataclass(frozen=True)
class Choice:
    """One of ``values`` (the contract's words, ``evalcore.types``)."""

    values: tuple[str, ...]

    def problem(self, option: str, value: object) -> InputError | None:
        """value in values, else "OPTION: 'x' is not a or b"."""
        if value in self.values:
            return None
        return input_error(option, f"{value!r} is not {' or '.join(self.values)}")


@dataclass(frozen=True)
class PositiveInteger:
    """A whole number 1 <= n <= ``high`` (a cut-off, a level or a count)."""

    high: int = MAX_INTEGER_OPTION

    def problem(self, option: str, value: object) -> InputError | None:
        """1 <= value <= high, a whole number, else the message of ``check_integer``."""
        try:
            check_integer(option, value, self.high)
        except InputError as exc:
            return exc
        return None


@dataclass(frozen=True)
class Number:
    """A finite real number, at least ``low`` when one is given."""

    low: float | None = None

    def problem(self, option: str, value: object) -> InputError | None:
        """isfinite(value) and value >= low, else "OPTION: v must be a finite number[ >= low]"."""
        ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value) \
            and (self.low is None or float(value) >= self.low)
        if ok:
            return None
        return input_error(option, f"{value} must be a finite number" + ("" if self.low is None else f" >= {self.low:g}"))


@dataclass(frozen=True)
class Fraction:
    """A rate in [0, 1] (a false-positive identification rate)."""

    def problem(self, option: str, value: object) -> InputError | None:
        """0 <= value <= 1, else "OPTION: v must lie in [0, 1]"."""
        if isinstance(value, numbers.Real) and 0 <= float(value) <= 1:
            return None
        return input_error(option, f"{value} must lie in [0, 1]")


@dataclass(frozen=True)
class Switch:
    """On or off (a flag alone on the command line, true or false in a job file)."""

    def problem(self, option: str, value: object) -> InputError | None:
        """value is a bool, else "OPTION must be true or false"."""
        return None if isinstance(value, bool) else InputError(f"{option} must be true or false")


@dataclass(frozen=True)
class Checked:
    """A value with a check of its own (named by ``by``): a list, a tuple of parameters, a size, an address."""

    by: str

    def problem(self, option: str, value: object) -> InputError | None:
        """Checked where it is used (``by``): nothing to say here."""
        return None


Constraint = Choice | PositiveInteger | Number | Fraction | Switch | Checked


# --------------------------------------------------------------------------- the declarations


@dataclass(frozen=True)
class Declaration:
    """One option: how it is named, typed, checked, defaulted, written on the command line and in a job file."""

    #: the Python name: ``evalcore.evaluate``'s parameter, ``Options``' field, the job file's key
    name: str
    #: the Python type, as written in ``evalcore.evaluate``'s signature (``Ties``: ``evalcore.types``,
    #: ``Rerank``: ``evalcore.api``; a client is ``Any``, so the signature needs no import of distributed);
    #: a test compares the two
    type: str
    #: ``evalcore.evaluate``'s default (protocol and similarity: None, the dataset's attribute)
    default: object
    constraint: Constraint
    part: Part = "evaluation"
    #: the command-line flag; None: not on the command line (a Python callback, a client)
    flag: str | None = None
    metavar: str | None = None
    help: str | None = None
    #: the command line's default, as text (argparse's ``default``)
    cli_default: str | None = None
    #: argparse's ``action``, ``nargs`` and ``const`` where the flag is not ``--flag VALUE``
    action: str | None = None
    nargs: str | None = None
    const: str | None = None
    #: flags of one ``exclusive`` group cannot be given together (``--scheduler``, ``--workers``)
    exclusive: str | None = None
    job: JobTable | None = None
    #: a run made with another value may have other metric values (``compare`` warns about it)
    changes_numbers: bool = False
    #: the protocols that take it; None: every protocol
    protocols: tuple[str, ...] | None = None
    #: the input kinds that take it; None: every kind
    kinds: tuple[Kind, ...] | None = None
    recorded: Recorded = "always"
    #: a parameter of ``evalcore.evaluate`` (``--scheduler`` is not: Python gives a ``client``)
    api: bool = True

    def argparse_kwargs(self) -> dict[str, object]:
        """``add_argument``'s keyword arguments for ``flag`` (those argparse would default left out)."""
        given = {"action": self.action, "nargs": self.nargs, "const": self.const, "default": self.cli_default,
                 "metavar": self.metavar, "help": self.help,
                 "choices": self.constraint.values if isinstance(self.constraint, Choice) else None}
        order = ("nargs", "const", "choices", "default", "action", "metavar", "help")
        return {k: given[k] for k in order if given[k] is not None}

    def problem(self, value: object, option: str | None = None) -> InputError | None:
        """The constraint's error for ``value`` (named ``option``, else the flag, else the name), or None."""
        return self.constraint.problem(option or self.flag or self.name, value)


_EXPANSION = ("each query replaced by the normalised sum of itself and its K nearest gallery vectors weighted by "
              "similarity^ALPHA")

DECLARATIONS: tuple[Declaration, ...] = (
    Declaration("protocol", "str | None", None, Choice(PROTOCOLS), flag="--protocol", changes_numbers=True,
                help="who is relevant (default: the dataset's evalcore attribute, else class)", job="evaluation"),
    Declaration("similarity", "Similarity | None", None, Choice(SIMILARITIES), flag="--similarity", help="default cosine",
                job="evaluation", changes_numbers=True, kinds=("embeddings",)),
    Declaration("ks", "Sequence[int]", (1, 3, 5, 10), Checked("ks: positive integers, each once"), flag="--ks",
                cli_default="1,3,5,10", help="cut-offs for hit/recall/precision (default 1,3,5,10)",
                job="evaluation", changes_numbers=True),
    Declaration("max_rank", "int", 50, PositiveInteger(), flag="--max-rank", cli_default="50",
                help="length of the CMC curve (default 50)", job="evaluation"),
    Declaration("ties", "Ties", "pessimistic", Choice(TIES), flag="--ties", cli_default="pessimistic",
                help="order of equal scores: pessimistic (default; non-relevant items first), optimistic (relevant "
                     "first) or average (tied items share their gains: the expected value over every order, for "
                     "the measures evalcore metrics --ties average lists)", job="evaluation", changes_numbers=True),
    Declaration("threshold", "float | None", None, Number(), flag="--threshold",
                help="open-set acceptance threshold on the rank-1 score", job="evaluation", changes_numbers=True),
    Declaration("map_at", "int | None", None, PositiveInteger(), flag="--map-at", help="also report ap_at_K / map_at_K",
                job="evaluation"),
    Declaration("metrics", "Sequence[str] | None", None, Checked("core.registry.select"), flag="--metrics",
                metavar="NAMES", help="compute only these metrics, comma-separated (map,recall@5; evalcore metrics "
                                      "lists them; default: the usual set)", job="evaluation", recorded="given"),
    Declaration("judged_only", "bool", False, Switch(), flag="--judged-only", action="store_true",
                help="qrels: rank each query among its judged items", job="evaluation", changes_numbers=True,
                protocols=("qrels",)),
    Declaration("empty_queries", "EmptyQueries", "skip", Choice(EMPTY_QUERIES), flag="--empty-queries", cli_default="skip",
                help="qrels: a judged query with no relevant item is left out of the means (skip, default) or "
                     "counted with every metric 0 (zero, as trec_eval does)", job="evaluation", changes_numbers=True),
    Declaration("rel_level", "int", 1, PositiveInteger(), flag="--rel-level", cli_default="1",
                help="qrels grades: relevant for the binary measures when the grade is at least this (trec_eval -l; "
                     "default 1); nDCG keeps every grade", job="evaluation", changes_numbers=True),
    Declaration("depth", "int | None", None, PositiveInteger(), flag="--depth",
                help="cut every ranking at this rank before every measure (trec_eval -M)", job="evaluation",
                changes_numbers=True),
    Declaration("radius", "float | None", None, Number(low=0), flag="--radius",
                help="geo/xy: every gallery item within this distance is relevant", job="evaluation",
                changes_numbers=True, protocols=("geo", "xy")),
    Declaration("rerank", "Rerank", None, Checked("engine.options.check_rerank"),
                flag="--rerank", nargs="?", const="", metavar="K1,K2,LAMBDA",
                help="k-reciprocal re-ranking (Zhong et al. 2017) with these parameters; alone: 20,6,0.3",
                job="evaluation", changes_numbers=True, kinds=("embeddings", "scores"), recorded="given"),
    Declaration("query_expansion", "Expansion", None, Checked("engine.options.check_expansion"),
                flag="--query-expansion", metavar="K,ALPHA", help="alpha query expansion: " + _EXPANSION,
                job="evaluation", changes_numbers=True, kinds=("embeddings",), recorded="given"),
    Declaration("database_augmentation", "Expansion", None, Checked("engine.options.check_expansion"),
                flag="--database-augmentation", metavar="K,ALPHA",
                help="DBA: each gallery vector replaced likewise with its K nearest other gallery vectors (before "
                     "--query-expansion)", job="evaluation", changes_numbers=True, kinds=("embeddings",),
                recorded="given"),
    Declaration("sweep", "bool", False, Switch(), flag="--sweep", action="store_true",
                help="write threshold_sweep.parquet (open-set trade-off)", job="evaluation", recorded="never"),
    Declaration("target_fpir", "float | None", None, Fraction(), flag="--target-fpir",
                help="report the lowest threshold whose FPIR is at most this", job="evaluation", recorded="never"),
    # where and how it runs: the numbers are the same whatever these are
    Declaration("scheduler", "str | None", None, Checked("jobs.common.check_scheduler"), part="execution",
                flag="--scheduler", metavar="ADDRESS", help="join an existing Dask cluster (tcp://HOST:PORT)",
                exclusive="cluster", job="top", recorded="never", api=False),
    Declaration("workers", "int | None", None, Checked("jobs.common.check_workers"), part="execution",
                flag="--workers", help="worker processes of the local cluster (default: the cores)",
                exclusive="cluster", job="top", recorded="never"),
    Declaration("memory_limit", "str | None", "auto", Checked("jobs.common.check_memory_limit"), part="execution",
                flag="--memory-limit", cli_default="auto", help="memory limit per local worker (default auto)",
                job="top", recorded="never"),
    Declaration("stall_timeout", "float | None", None, Checked("engine.faults.check_stall_timeout"),
                part="execution", flag="--stall-timeout", metavar="SECONDS",
                help="restart a worker that holds a task this long (or 10 x the longest task so far, if longer) so "
                     "the task runs elsewhere; with no other worker, fail (default 180)", job="top", recorded="never"),
    Declaration("storage_options", "Mapping[str, Any] | None", None, Checked("jobs.common.check_storage_options"),
                part="execution", flag="--storage-option", action="append", metavar="KEY=VALUE",
                help="fsspec storage option for s3:// and other URLs (repeatable)", job="evaluation",
                recorded="never"),
    Declaration("chunk_rows", "int | None", None, PositiveInteger(), part="execution", flag="--chunk-rows",
                help="queries per task (default: the Zarr chunks of query/emb)", job="evaluation", recorded="never"),
    Declaration("gallery_shards", "int | None", None, PositiveInteger(), part="execution", flag="--gallery-shards",
                help="split the gallery into N shards per chunk (default: only when the gallery exceeds a third of "
                     "a worker's memory limit)", recorded="never"),
    # the intervals (the command line adds them with compare's: cli.main.add_interval_options)
    Declaration("ci", "float | None", None, Checked("core.intervals.Method.checked"), flag="--ci", metavar="LEVEL",
                help="confidence level of the bootstrap intervals, in (0, 1) (default none)", recorded="with_ci"),
    Declaration("resamples", "int", 10_000, Checked("core.intervals.Method.checked"), flag="--resamples",
                cli_default="10000", help="bootstrap resamples (default 10000)", recorded="with_ci"),
    Declaration("seed", "int", 0, Checked("core.intervals.Method.checked"), flag="--seed", cli_default="0",
                help="seed of the resamples and sign flips (default 0)", recorded="with_ci"),
    # Python alone: a client and callbacks
    Declaration("client", "Any", None, Checked("a dask.distributed.Client"), part="execution",
                recorded="never"),
    Declaration("on_chunk", "Callable[[dict[str, Any], int, int], None] | None", None, Checked("a callable"),
                part="execution", recorded="never"),
    Declaration("on_progress", "Callable[[int, int, str], None] | None", None, Checked("a callable"),
                part="execution", recorded="never"),
)

BY_NAME: Mapping[str, Declaration] = {d.name: d for d in DECLARATIONS}

#: the options whose flags ``cli.main.add_interval_options`` adds (shared with compare, its own default for --ci)
INTERVAL_OPTIONS = ("ci", "resamples", "seed")
#: the flags ``jobs.common.add_cluster_options`` adds (also to nightly, bench and the other jobs)
CLUSTER_OPTIONS = ("scheduler", "workers", "memory_limit", "stall_timeout")


def declared(name: str) -> Declaration:
    """The declaration of the option ``name`` (a KeyError for an undeclared one: a programming error)."""
    return BY_NAME[name]


def named(names: Iterable[str]) -> tuple[Declaration, ...]:
    """The declarations of ``names``, in that order."""
    return tuple(BY_NAME[n] for n in names)


def options_doc(names: Iterable[str], indent: str = "    ", width: int = 116) -> str:
    """The options section of an API function's docstring, made from the declarations: each declared option
    among ``names`` that has a help text, as ``name=default`` (``--flag``): its help, in ``names``' order."""
    lines = ["", indent + "Options (each declared once in ``evalcore.declarations``; the flag is the command line's):"]
    for d in named([n for n in names if n in BY_NAME and BY_NAME[n].help]):
        flag = f" (``{d.flag}``)" if d.flag else ""
        lines += textwrap.wrap(f"``{d.name}={d.default!r}``{flag}: {d.help}.", width=width,
                               initial_indent=indent + "- ", subsequent_indent=indent + "  ")
    return "\n".join(lines) + "\n"


def number_options() -> tuple[str, ...]:
    """The options a run's metric values depend on: two runs that differ in one may differ for that alone."""
    return tuple(d.name for d in DECLARATIONS if d.changes_numbers)


def job_keys(table: JobTable) -> frozenset[str]:
    """The option keys a job file takes in ``table`` (its other keys, name, dataset, gates..., are the job's)."""
    return frozenset(d.name for d in DECLARATIONS if d.job == table)


def recorded_options(options: Mapping[str, object]) -> dict[str, object]:
    """run.json's ``options`` record of the engine's options (``dataclasses.asdict(Options)``).

    Those recorded only when given are left out when None (a run.json reads as
    it did before they existed); the intervals' resamples and seed only with a
    ``ci`` level.
    """
    with_ci = options.get("ci") is not None

    def kept(name: str) -> bool:
        d = BY_NAME.get(name)
        if d is None or d.recorded == "always":
            return True
        if d.recorded == "given":
            return options[name] is not None
        return d.recorded == "with_ci" and with_ci

    return {k: v for k, v in options.items() if kept(k)}


def recorded_value(options: Mapping[str, object], name: str) -> object:
    """The value of ``name`` in a run.json ``options`` record: as recorded, else the default it was left out
    for (``recorded_options``); a KeyError when an always-recorded option is missing (an older run)."""
    if name in options:
        return options[name]
    d = BY_NAME[name]
    if d.recorded == "given" or (d.recorded == "with_ci" and options.get("ci") is None):
        return d.default
    raise KeyError(name)
