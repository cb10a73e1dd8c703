"""What the command line and the job programs share: the evaluation spec, its checks, exit codes, one run.

An evaluation is two typed records: what it computes (``EvaluationSpec``: the
engine's ``Options`` plus protocol and similarity left to the dataset, the
sweep and the target FPIR) and how and where it runs (``RunSettings``). The
command line parses its strings into them (``spec_from_args``,
``settings_from_args``); ``evalcore nightly`` builds them from the job file's
typed TOML values and ``evalcore score`` and ``evalcore demo`` from their own
fixed values. Each value has one check, shared by all of them.
"""
from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from evalcore import declarations
from evalcore.declarations import MAX_INTEGER_OPTION, check_integer
from evalcore.engine.faults import check_stall_timeout
from evalcore.engine.options import Options, parse_expansion, parse_rerank
from evalcore.errors import InputError, OptionError, input_error
from evalcore.types import SIMILARITIES, Protocol, Similarity

# The command line builds its parsers from this module, so it imports only the standard library and evalcore's
# light modules at the top (faults and options are plain Python); dask, tqdm, the registries (numpy, numba) and
# the report writer (zarr, pyarrow) are imported by the functions that use them.

EXIT_OK, EXIT_FAILED, EXIT_INPUT, EXIT_GATE = 0, 1, 2, 3

SECRET_OPTION = re.compile(r"^((?:--[\w-]+=)?[\w-]*(?:key|secret|token|password|credential)[\w-]*=).+$", re.I)


def parse_ks(text: str) -> tuple[int, ...]:
    try:
        ks = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise OptionError("--ks", f"{text!r} is not a comma-separated list of integers") from None
    if not ks or any(k < 1 for k in ks):
        raise OptionError("--ks", f"{text!r} must list positive integers")
    return ks


def parse_metrics(text: str | None) -> tuple[str, ...] | None:
    """--metrics NAMES (comma-separated), checked against the registry; None when not given."""
    if text is None:
        return None
    from evalcore.core import registry

    return registry.select(text, "--metrics")


def parse_number(option: str, text: str, kind: Any = float) -> Any:
    try:
        value = kind(text)
    except ValueError:
        raise input_error(option, f"{text!r} is not a{'n integer' if kind is int else ' number'}") from None
    return value


def redacted_command(argv: list[str]) -> list[str]:
    """The command line for run.json, with the values of secret storage options hidden."""
    return [SECRET_OPTION.sub(r"\1***", a) for a in argv]


#: storage options that also go into ``client_kwargs``, as s3fs wants them (a shortcut of the command line)
CLIENT_KWARGS = ("endpoint_url", "region_name")


def parse_storage_options(pairs: list[str] | None) -> dict:
    out: dict = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise OptionError("--storage-option", f"{pair!r} is not KEY=VALUE")
        parsed: str | bool = value.lower() == "true" if value.lower() in ("true", "false") else value
        if key in CLIENT_KWARGS:
            out.setdefault("client_kwargs", {})[key] = parsed
        else:
            out[key] = parsed
    return out


def check_storage_options(table, where: str) -> dict:
    """A job file's ``storage_options`` table as fsspec keyword arguments, each value of the type written.

    A mapping all the way down: strings, booleans, numbers, arrays of them and
    nested tables (``client_kwargs = { region_name = "eu-1" }``) pass through
    as they are (never turned into text); a TOML date or time, a NaN or an
    infinity is an InputError naming the key. ``endpoint_url`` and
    ``region_name`` at the top also go into ``client_kwargs``, as
    ``--storage-option`` puts them.
    """
    def value(v, at: str):
        if isinstance(v, dict):
            return {str(k): value(x, f"{at}.{k}") for k, x in v.items()}
        if isinstance(v, list):
            return [value(x, f"{at}[{i}]") for i, x in enumerate(v)]
        if isinstance(v, float) and not math.isfinite(v):
            raise input_error(at, f"{v!r} is not a finite number")
        if isinstance(v, (str, bool, int, float)):
            return v
        raise input_error(at, f"{v!r} is a TOML {type(v).__name__}; give a string, number, boolean, array or table")

    if not isinstance(table, dict):
        raise input_error(where, f"must be a table of KEY = VALUE (nested tables allowed), not {table!r}")
    out = value(table, where)
    shortcut = {k: out.pop(k) for k in CLIENT_KWARGS if k in out}
    if shortcut:
        client = out.setdefault("client_kwargs", {})
        if not isinstance(client, dict):
            raise InputError(f"{where}.client_kwargs: must be a table")
        twice = sorted(set(shortcut) & set(client))
        if twice:
            raise input_error(where, f"{twice[0]} is given both at the top and in client_kwargs; give it once")
        client.update(shortcut)
    return out


#: the flags of ``add_run_options`` before the cluster options: every declared evaluation option with a flag, in
#: the declarations' order, but the intervals' (``cli.main.add_interval_options`` adds those, shared with compare)
RUN_OPTIONS = tuple(d.name for d in declarations.DECLARATIONS if d.part == "evaluation" and d.flag is not None
                    and d.name not in declarations.INTERVAL_OPTIONS)
#: ... and after them: the execution options with a flag that are not the cluster's
STORAGE_OPTIONS = tuple(d.name for d in declarations.DECLARATIONS if d.part == "execution" and d.flag is not None
                        and d.name not in declarations.CLUSTER_OPTIONS)


def add_declared(p: argparse.ArgumentParser, names: tuple[str, ...]) -> None:
    """The flags of the declared options ``names``, in that order; those of one ``exclusive`` group in a
    mutually exclusive group (``--scheduler`` or ``--workers``)."""
    groups: dict[str, Any] = {}
    for d in declarations.named(names):
        target = p
        if d.exclusive is not None:
            if d.exclusive not in groups:
                groups[d.exclusive] = p.add_mutually_exclusive_group()
            target = groups[d.exclusive]
        kwargs: dict[str, Any] = d.argparse_kwargs()
        target.add_argument(str(d.flag), **kwargs)


def add_run_options(p: argparse.ArgumentParser) -> None:
    """Options shared by evaluate and the jobs built on it."""
    add_declared(p, RUN_OPTIONS)
    add_cluster_options(p)
    add_declared(p, STORAGE_OPTIONS)


def add_cluster_options(p: argparse.ArgumentParser) -> None:
    add_declared(p, declarations.CLUSTER_OPTIONS)


#: the largest --memory-limit taken: 2^63 - 1 bytes (8 EiB), what a signed 64-bit size holds
MAX_MEMORY_LIMIT = 2 ** 63 - 1


def check_memory_limit(text, option: str = "--memory-limit"):
    """``auto`` or a size dask understands (4GiB, 500MB, 2e9 bytes) at or above the engine's worker memory
    floor, else an InputError naming the option.

    Checked with ``dask.utils.parse_bytes`` before any work (the cluster would
    otherwise refuse it only when it starts, and a run in this process not at
    all). A size under one byte (``0``, ``0.5``) is refused: dask would read it
    as "no limit". The floor is the engine's own check
    (``engine.cluster.check_memory_limit``: ``MIN_WORKER_MEMORY``), so the
    number lives in one place.
    """
    if text is None or str(text).strip().lower() == "auto":
        return text
    from dask.utils import parse_bytes

    try:
        n = parse_bytes(str(text))
    except (ValueError, TypeError, OverflowError):  # 1e400: a float too large for an int
        raise input_error(option, f"{text!r} is not a size like 4GiB, 500MB or auto") from None
    if n < 1:
        raise input_error(option, f"{text!r} must be a positive size like 4GiB (or auto)")
    if n > MAX_MEMORY_LIMIT:  # dask would quietly use the machine's memory instead
        raise input_error(option, f"{text!r} is more memory than any machine has (at most 8 EiB); "
                         "give a size like 4GiB, or auto")
    # deferred: the floor lives beside the cluster code, which imports distributed (not for evalcore --help)
    from evalcore.engine import cluster

    try:
        cluster.check_memory_limit(str(text), 1)
    except InputError as exc:
        raise OptionError(option, exc.text) from None
    return text


def check_scheduler(address, option: str = "--scheduler") -> str:
    """A scheduler address with a host and a port (tcp://HOST:PORT), else an InputError naming the option."""
    from evalcore.engine.cluster import check_address  # deferred: keeps distributed out of evalcore --help

    try:
        check_address(address)
    except InputError:
        raise input_error(option, f"{address!r} is not an address like tcp://HOST:PORT") from None
    port = re.search(r"\]?:(\d{1,5})$", address.split("://", 1)[1])
    if not port or not 0 < int(port.group(1)) < 65536:
        raise input_error(option, f"{address!r} has no port; give tcp://HOST:PORT "
                         "(`dask scheduler` listens on 8786 by default)")
    return address


def check_workers(n: int | None, option: str = "--workers") -> int | None:
    """A number of worker processes (None: the default), else an InputError naming the option
    (``--workers``, or a job file's ``workers`` key)."""
    if n is not None and (isinstance(n, bool) or not isinstance(n, int)):
        raise input_error(option, f"{n!r} must be a positive integer")
    if n is not None and n < 1:
        raise input_error(option, f"{n} must be at least 1")
    if n is not None and n > 1:  # as many processes as the memory can start (deferred: distributed)
        from evalcore.engine.cluster import check_local_workers

        check_local_workers(n, option)
    return n


def check_count(option: str, n: int | None) -> int | None:
    """--chunk-rows, --gallery-shards: a count from 1 to MAX_INTEGER_OPTION (None: the default)."""
    if n is not None and n < 1:
        raise input_error(option, f"{n} must be at least 1")
    if n is not None and n > MAX_INTEGER_OPTION:
        check_integer(option, n)  # the message of every integer option that is too large
    return n


def check_target_fpir(target: float | None, option: str = "--target-fpir") -> float | None:
    """A false-positive identification rate in [0, 1] (None: none asked)."""
    problem = None if target is None else declarations.declared("target_fpir").problem(target, option)
    if problem:
        raise problem
    return target


#: the engine's options (``Options``' fields) an ``EvaluationSpec`` holds in ``options``: protocol and similarity
#: aside, the spec's own (None: the dataset's)
ENGINE_FIELDS = frozenset(f.name for f in fields(Options)) - {"protocol", "similarity"}
#: the evaluation options an ``EvaluationSpec`` holds itself, beside ``options``
SPEC_FIELDS = ("protocol", "similarity", "sweep", "target_fpir")


@dataclass(frozen=True)
class EvaluationSpec:
    """What one evaluation computes: the command line's evaluation options, typed.

    ``options`` holds the engine's options (ks, max_rank, ties, threshold, ...);
    its protocol and similarity are not used: ``protocol`` and ``similarity``
    here are the ones given, None leaving them to the dataset's ``evalcore``
    attribute (else class and cosine), as ``evalcore.evaluate`` does. The
    options that depend on the protocol (``--radius``, ``--judged-only``, ...)
    are checked by ``Options.checked`` once the dataset is open.
    """

    options: Options = field(default_factory=Options)
    protocol: Protocol | None = None
    similarity: Similarity | None = None
    #: write threshold_sweep.parquet; a target_fpir computes the sweep as well
    sweep: bool = False
    target_fpir: float | None = None

    def checked(self) -> EvaluationSpec:
        """The same spec, or an InputError naming the bad value: the checks that need no dataset."""
        if self.protocol is not None:
            from evalcore.core import protocols

            protocols.get(self.protocol)  # an InputError naming the registered ones
        if self.similarity is not None and self.similarity not in SIMILARITIES:
            raise OptionError("--similarity", f"{self.similarity!r} is not cosine or dot")
        self.options.check_integers()  # before the dataset is opened: 10^20 is not a cut-off
        check_target_fpir(self.target_fpir)
        return self

    def evaluate_kwargs(self) -> dict[str, Any]:
        """``evalcore.evaluate`` keyword arguments of the spec."""
        # every declared evaluation option: the engine's from ``options``, the rest (protocol and similarity as
        # given, the sweep) from the spec
        return {d.name: getattr(self.options if d.name in ENGINE_FIELDS else self, d.name)
                for d in declarations.DECLARATIONS if d.part == "evaluation" and d.api}


@dataclass(frozen=True)
class RunSettings:
    """How and where one evaluation runs (what it computes is the ``EvaluationSpec``)."""

    #: a Dask scheduler address to join (tcp://HOST:PORT); None: in this process or a local cluster
    scheduler: str | None = None
    #: local worker processes; None: as evaluate decides
    workers: int | None = None
    #: per local worker, a size dask understands or "auto"
    memory_limit: str | None = "auto"
    #: fsspec options of the dataset and the report folder, typed as given
    storage_options: Mapping[str, Any] = field(default_factory=dict)
    chunk_rows: int | None = None
    gallery_shards: int | None = None
    #: seconds before a worker holding a task is restarted; None: the default
    stall_timeout: float | None = None
    #: replace an existing report folder
    overwrite: bool = False

    def checked(self) -> RunSettings:
        """The same settings, or an InputError naming the option: every check before any work starts."""
        check_workers(self.workers)
        if self.scheduler:
            check_scheduler(self.scheduler)
        check_memory_limit(self.memory_limit)
        if self.stall_timeout is not None:
            check_stall_timeout(self.stall_timeout)
        check_count("--chunk-rows", self.chunk_rows)
        check_count("--gallery-shards", self.gallery_shards)
        return self

    def evaluate_kwargs(self) -> dict[str, Any]:
        """``evalcore.evaluate`` keyword arguments of the settings (the scheduler aside: a client)."""
        return dict(workers=self.workers, memory_limit=self.memory_limit, chunk_rows=self.chunk_rows,
                    gallery_shards=self.gallery_shards, stall_timeout=self.stall_timeout)


def _optional(option: str, text: str | None, kind: Any = float) -> Any:
    return None if text is None else parse_number(option, str(text), kind)


#: how a flag's text becomes the value of an option whose constraint does not say it (``Checked`` ones); the
#: others by their constraint (``value_from_text``). A test checks every such option has its parser here.
TEXT_PARSERS: Mapping[str, Any] = {
    "ks": lambda flag, text: parse_ks(text),
    "metrics": lambda flag, text: parse_metrics(text),
    "rerank": lambda flag, text: parse_rerank(text),
    "query_expansion": parse_expansion,
    "database_augmentation": parse_expansion,
    "ci": lambda flag, text: parse_number(flag, str(text), float),
    "resamples": lambda flag, text: parse_number(flag, str(text), int),
    "seed": lambda flag, text: parse_number(flag, str(text), int),
}


def value_from_text(d: declarations.Declaration, text: Any) -> Any:
    """The value of the declared option ``d`` from its flag's text (argparse's value); None: not given, the
    declared default. A number by its constraint (``PositiveInteger``: int; ``Number``, ``Fraction``: float), a
    switch as a bool, a choice as given (argparse checked it), the rest by ``TEXT_PARSERS``."""
    if text is None:
        return d.default
    flag = str(d.flag)
    if d.name in TEXT_PARSERS:
        return TEXT_PARSERS[d.name](flag, text)
    if isinstance(d.constraint, declarations.PositiveInteger):
        return parse_number(flag, str(text), int)
    if isinstance(d.constraint, (declarations.Number, declarations.Fraction)):
        return parse_number(flag, str(text), float)
    if isinstance(d.constraint, declarations.Switch):
        return bool(text)
    return text


#: the evaluation options a command line gives (``add_run_options``): every declared one with a flag
def _command_line_options() -> tuple[declarations.Declaration, ...]:
    return tuple(d for d in declarations.DECLARATIONS if d.part == "evaluation" and d.flag is not None)


def spec_from_args(args: argparse.Namespace) -> EvaluationSpec:
    """The ``EvaluationSpec`` of the command line's evaluation options (``add_run_options``), checked.

    Built from the declarations (``evalcore.declarations``): each option's flag
    text through ``value_from_text``; an option the command does not have (a
    flag another command adds) is its declared default.
    """
    values = {d.name: value_from_text(d, getattr(args, d.name, None)) for d in _command_line_options()}
    options = Options(**{name: value for name, value in values.items() if name in ENGINE_FIELDS})
    return EvaluationSpec(options, **{name: values[name] for name in SPEC_FIELDS}).checked()


def settings_from_args(args: argparse.Namespace) -> RunSettings:
    """The ``RunSettings`` of the command line's cluster, storage and chunk options, checked before any work.

    Every option is optional here: a command without one (score has no
    --chunk-rows) gets the default.
    """
    text = lambda name: getattr(args, name, None) or None  # noqa: E731 - "" is not given
    return RunSettings(
        scheduler=getattr(args, "scheduler", None),
        workers=_optional("--workers", getattr(args, "workers", None), int),
        memory_limit=getattr(args, "memory_limit", "auto"),
        storage_options=parse_storage_options(getattr(args, "storage_option", None)),
        chunk_rows=_optional("--chunk-rows", text("chunk_rows"), int),
        gallery_shards=_optional("--gallery-shards", text("gallery_shards"), int),
        stall_timeout=_optional("--stall-timeout", getattr(args, "stall_timeout", None)),
        overwrite=bool(getattr(args, "overwrite", False))).checked()


def progress_reporter(label: str = "chunks") -> Any:
    """A progress bar on a terminal; one log line per finished chunk otherwise."""
    state: dict[str, Any] = {"bar": None}

    def on_chunk(stats: dict, done: int, total: int) -> None:
        if sys.stderr.isatty():
            if state["bar"] is None:
                from tqdm import tqdm

                state["bar"] = tqdm(total=total, unit="chunk", desc=label, file=sys.stderr, leave=False)
            state["bar"].update(1)
            if done == total:
                state["bar"].close()
        else:
            print(f"evalcore: chunk {done}/{total} done (queries {stats['q0']}-{stats['q1'] - 1}, "
                  f"{stats['seconds']:.2f} s)", file=sys.stderr, flush=True)

    return on_chunk


def progress_reporters(quiet: bool) -> tuple[Any, Any]:
    """(on_chunk, on_progress) of a command: nothing at all with --quiet; on a terminal a bar with an ETA
    (``engine.progress.TerminalBar``); in a log a line per phase and one per finished chunk."""
    from evalcore.engine import progress  # deferred: the engine brings numba

    if quiet:
        return None, progress.quietly
    if sys.stderr.isatty():
        return None, progress.TerminalBar()
    return progress_reporter(), progress.LogLines()


def evaluate_params(args: argparse.Namespace) -> dict[str, Any]:
    """``evalcore.evaluate`` keyword arguments from the command line, every value checked before any work."""
    settings = settings_from_args(args)
    spec = spec_from_args(args)
    return {**spec.evaluate_kwargs(), **settings.evaluate_kwargs()}


def run_evaluation(dataset: str, out: str, spec: EvaluationSpec, settings: RunSettings, *, quiet: bool = False,
                   extra_run: dict | None = None) -> Any:
    """Evaluate ``dataset`` through the Python API and write the report folder ``out``; returns the Result."""
    # deferred: the engine and the report writer bring numba, zarr and pyarrow, which argument parsing does not need
    from evalcore import api
    from evalcore.io import report

    # everything the user passed is checked here, before any work starts: nothing is written yet
    spec, settings = spec.checked(), settings.checked()
    storage_options = dict(settings.storage_options)
    params = {**spec.evaluate_kwargs(), **settings.evaluate_kwargs()}
    report.check_apart("--out", out, {"dataset": dataset})
    report.check_out(out, settings.overwrite, storage_options)
    from evalcore.engine.progress import shown

    on_chunk, on_progress = progress_reporters(quiet)
    with api.command_line_words(), shown(on_progress):
        if settings.scheduler:
            from evalcore.engine.cluster import dask_client  # only here: in-process runs never import distributed

            with dask_client(settings.scheduler) as client:
                result = api.evaluate(dataset, **{**params, "workers": None}, client=client,
                                      storage_options=storage_options, on_chunk=on_chunk, on_progress=on_progress)
        else:  # in this process, or a local cluster when the job is too large or --workers asks for one
            result = api.evaluate(dataset, **params, storage_options=storage_options, on_chunk=on_chunk,
                                  on_progress=on_progress)
    result.save(out, overwrite=settings.overwrite, storage_options=storage_options, run={
        "command": redacted_command(sys.argv[1:]), "dataset": dataset,
        "scheduler": settings.scheduler or "local", **(extra_run or {})})
    return result
