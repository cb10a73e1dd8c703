"""What the command line and the job programs share: option parsing, exit codes, one evaluation run."""
from __future__ import annotations

import argparse
import math
import re
import sys

from dask.utils import parse_bytes
from tqdm import tqdm

from evalcore.core import registry
from evalcore.engine.faults import check_stall_timeout
from evalcore.errors import InputError
from evalcore.io import report
from evalcore.types import EMPTY_QUERIES, PROTOCOLS, SIMILARITIES, TIES

EXIT_OK, EXIT_FAILED, EXIT_INPUT, EXIT_GATE = 0, 1, 2, 3

SECRET_OPTION = re.compile(r"^((?:--[\w-]+=)?[\w-]*(?:key|secret|token|password|credential)[\w-]*=).+$", re.I)


def parse_ks(text: str) -> tuple[int, ...]:
    try:
        ks = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise InputError(f"--ks: {text!r} is not a comma-separated list of integers") from None
    if not ks or any(k < 1 for k in ks):
        raise InputError(f"--ks: {text!r} must list positive integers")
    return ks


def parse_metrics(args) -> tuple[str, ...] | None:
    """--metrics NAMES (comma-separated), checked against the registry; None when not given."""
    text = getattr(args, "metrics", None)
    return None if text is None else registry.select(text, "--metrics")


def parse_number(option: str, text: str, kind=float):
    try:
        value = kind(text)
    except ValueError:
        raise InputError(f"{option}: {text!r} is not a{'n integer' if kind is int else ' number'}") from None
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
            raise InputError(f"--storage-option: {pair!r} is not KEY=VALUE")
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
            raise InputError(f"{at}: {v!r} is not a finite number")
        if isinstance(v, (str, bool, int, float)):
            return v
        raise InputError(f"{at}: {v!r} is a TOML {type(v).__name__}; give a string, number, boolean, array or table")

    if not isinstance(table, dict):
        raise InputError(f"{where}: must be a table of KEY = VALUE (nested tables allowed), not {table!r}")
    out = value(table, where)
    shortcut = {k: out.pop(k) for k in CLIENT_KWARGS if k in out}
    if shortcut:
        client = out.setdefault("client_kwargs", {})
        if not isinstance(client, dict):
            raise InputError(f"{where}.client_kwargs: must be a table")
        twice = sorted(set(shortcut) & set(client))
        if twice:
            raise InputError(f"{where}: {twice[0]} is given both at the top and in client_kwargs; give it once")
        client.update(shortcut)
    return out


def storage_options_of(args) -> dict:
    """The fsspec options of a run: a job file's checked table (``args.storage_options``), else the
    ``--storage-option KEY=VALUE`` pairs."""
    given = getattr(args, "storage_options", None)
    return dict(given) if given is not None else parse_storage_options(getattr(args, "storage_option", None))


def add_run_options(p: argparse.ArgumentParser) -> None:
    """Options shared by evaluate and the jobs built on it."""
    p.add_argument("--protocol", choices=PROTOCOLS,
                   help="who is relevant (default: the dataset's evalcore attribute, else class)")
    p.add_argument("--similarity", choices=SIMILARITIES, help="default cosine")
    p.add_argument("--ks", default="1,3,5,10", help="cut-offs for hit/recall/precision (default 1,3,5,10)")
    p.add_argument("--max-rank", default="50", help="length of the CMC curve (default 50)")
    p.add_argument("--ties", choices=TIES, default="pessimistic")
    p.add_argument("--threshold", help="open-set acceptance threshold on the rank-1 score")
    p.add_argument("--map-at", help="also report ap_at_K / map_at_K")
    p.add_argument("--metrics", metavar="NAMES", help="compute only these metrics, comma-separated (map,recall@5; "
                                                      "evalcore metrics lists them; default: the usual set)")
    p.add_argument("--judged-only", action="store_true", help="qrels: rank each query among its judged items")
    p.add_argument("--empty-queries", choices=EMPTY_QUERIES, default="skip",
                   help="qrels: a judged query with no relevant item is left out of the means (skip, default) "
                        "or counted with every metric 0 (zero, as trec_eval does)")
    p.add_argument("--radius", help="geo/xy: every gallery item within this distance is relevant")
    p.add_argument("--sweep", action="store_true", help="write threshold_sweep.parquet (open-set trade-off)")
    p.add_argument("--target-fpir", help="report the lowest threshold whose FPIR is at most this")
    add_cluster_options(p)
    p.add_argument("--storage-option", action="append", metavar="KEY=VALUE",
                   help="fsspec storage option for s3:// and other URLs (repeatable)")
    p.add_argument("--chunk-rows", help="queries per task (default: the Zarr chunks of query/emb)")
    p.add_argument("--gallery-shards", help="split the gallery into N shards per chunk (default: only when "
                                            "the gallery exceeds a third of a worker's memory limit)")


def add_cluster_options(p: argparse.ArgumentParser) -> None:
    group = p.add_mutually_exclusive_group()
    group.add_argument("--scheduler", metavar="ADDRESS", help="join an existing Dask cluster (tcp://HOST:PORT)")
    group.add_argument("--workers", help="worker processes of the local cluster (default: the cores)")
    p.add_argument("--memory-limit", default="auto", help="memory limit per local worker (default auto)")
    p.add_argument("--stall-timeout", metavar="SECONDS",
                   help="restart a worker that holds a task this long (or 10 x the longest task so far, if "
                        "longer) so the task runs elsewhere; with no other worker, fail (default 180)")


def sweep_options(args) -> tuple[bool, float | None]:
    """(compute the sweep?, target FPIR): --target-fpir implies the sweep's computation."""
    target = getattr(args, "target_fpir", None)
    if target is not None:
        target = parse_number("--target-fpir", target)
        if not 0 <= target <= 1:
            raise InputError(f"--target-fpir: {target} must lie in [0, 1]")
    return bool(getattr(args, "sweep", False) or target is not None), target


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

    try:
        n = parse_bytes(str(text))
    except (ValueError, TypeError):
        raise InputError(f"{option}: {text!r} is not a size like 4GiB, 500MB or auto") from None
    if n < 1:
        raise InputError(f"{option}: {text!r} must be a positive size like 4GiB (or auto)")
    # deferred: the floor lives beside the cluster code, which imports distributed (not for evalcore --help)
    from evalcore.engine import cluster

    try:
        cluster.check_memory_limit(str(text), 1)
    except InputError as exc:
        raise InputError(option + str(exc).removeprefix("--memory-limit")) from None
    return text


def check_scheduler(address, option: str = "--scheduler") -> str:
    """A scheduler address with a host and a port (tcp://HOST:PORT), else an InputError naming the option."""
    from evalcore.engine.cluster import check_address  # deferred: keeps distributed out of evalcore --help

    try:
        check_address(address)
    except InputError:
        raise InputError(f"{option}: {address!r} is not an address like tcp://HOST:PORT") from None
    port = re.search(r"\]?:(\d{1,5})$", address.split("://", 1)[1])
    if not port or not 0 < int(port.group(1)) < 65536:
        raise InputError(f"{option}: {address!r} has no port; give tcp://HOST:PORT "
                         "(`dask scheduler` listens on 8786 by default)")
    return address


def check_cluster_options(args) -> None:
    """--workers, --scheduler, --memory-limit and --stall-timeout, before any work starts."""
    workers_from_args(args)
    if getattr(args, "scheduler", None):
        check_scheduler(args.scheduler)
    check_memory_limit(getattr(args, "memory_limit", None))
    stall_timeout_from_args(args)


def stall_timeout_from_args(args) -> float | None:
    """--stall-timeout in seconds (None: the default), else an InputError naming it."""
    text = getattr(args, "stall_timeout", None)
    if text is None:
        return None
    return check_stall_timeout(parse_number("--stall-timeout", str(text)))


def workers_from_args(args) -> int | None:
    if getattr(args, "workers", None) is None:
        return None
    n = parse_number("--workers", args.workers, int)
    if n < 1:
        raise InputError(f"--workers: {n} must be at least 1")
    return n


def progress_reporter(label: str = "chunks"):
    """A progress bar on a terminal; one log line per finished chunk otherwise."""
    state = {"bar": None}

    def on_chunk(stats: dict, done: int, total: int) -> None:
        if sys.stderr.isatty():
            if state["bar"] is None:
                state["bar"] = tqdm(total=total, unit="chunk", desc=label, file=sys.stderr, leave=False)
            state["bar"].update(1)
            if done == total:
                state["bar"].close()
        else:
            print(f"evalcore: chunk {done}/{total} done (queries {stats['q0']}-{stats['q1'] - 1}, "
                  f"{stats['seconds']:.2f} s)", file=sys.stderr, flush=True)

    return on_chunk


def evaluate_params(args) -> dict:
    """``evalcore.evaluate`` keyword arguments from the command line, every value checked before any work."""
    check_cluster_options(args)
    map_at = parse_number("--map-at", args.map_at, int) if args.map_at is not None else None
    chunk_rows = parse_number("--chunk-rows", args.chunk_rows, int) if args.chunk_rows else None
    if chunk_rows is not None and chunk_rows < 1:
        raise InputError(f"--chunk-rows: {chunk_rows} must be at least 1")
    shards = getattr(args, "gallery_shards", None)
    shards = parse_number("--gallery-shards", shards, int) if shards else None
    if shards is not None and shards < 1:
        raise InputError(f"--gallery-shards: {shards} must be at least 1")
    sweep, target_fpir = sweep_options(args)
    return dict(
        protocol=args.protocol, similarity=args.similarity, ks=parse_ks(args.ks),
        max_rank=parse_number("--max-rank", args.max_rank, int), ties=args.ties,
        threshold=parse_number("--threshold", args.threshold) if args.threshold is not None else None,
        map_at=map_at, judged_only=bool(args.judged_only),
        radius=parse_number("--radius", args.radius) if args.radius is not None else None,
        empty_queries=getattr(args, "empty_queries", None) or "skip",
        sweep=bool(getattr(args, "sweep", False)), target_fpir=target_fpir, metrics=parse_metrics(args),
        workers=workers_from_args(args), memory_limit=args.memory_limit,
        chunk_rows=chunk_rows, gallery_shards=shards, stall_timeout=stall_timeout_from_args(args))


def run_evaluation(dataset: str, out: str, args, *, quiet: bool = False, extra_run: dict | None = None):
    """Evaluate ``dataset`` through the Python API and write the report folder ``out``; returns the Result."""
    # deferred: the engine brings distributed and numba, which evalcore --help should not import
    from evalcore import api
    from evalcore.engine.cluster import dask_client

    storage_options = storage_options_of(args)
    # everything the user passed is checked here, before any work starts: nothing is written yet
    params = evaluate_params(args)
    report.check_apart("--out", out, {"dataset": dataset})
    report.check_out(out, args.overwrite, storage_options)
    on_chunk = None if quiet else progress_reporter()
    with api.command_line_words():
        if args.scheduler:
            with dask_client(args.scheduler) as client:
                result = api.evaluate(dataset, **{**params, "workers": None}, client=client,
                                      storage_options=storage_options, on_chunk=on_chunk)
        else:  # in this process, or a local cluster when the job is too large or --workers asks for one
            result = api.evaluate(dataset, **params, storage_options=storage_options, on_chunk=on_chunk)
    result.save(out, overwrite=args.overwrite, storage_options=storage_options, run={
        "command": redacted_command(sys.argv[1:]), "dataset": dataset, "scheduler": args.scheduler or "local",
        **(extra_run or {})})
    return result
