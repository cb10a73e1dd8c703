"""The ``evalcore`` command line (README, Commands).

Exit status: 0 done; 2 bad input or usage (one message naming the array or
option, no traceback); 1 anything else; 3 a nightly regression gate failed;
130 interrupted (Ctrl-C), 143 terminated (SIGTERM), each with one line and no
partial output left.
"""
from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import logging
import os
import shutil
import signal
import sys
import threading
import time

# Only what building the parser needs is imported here (the standard library and evalcore's plain-Python
# modules): every command pays for this module's imports before it starts, so each command imports the heavy
# modules it uses (the API and engine: numpy, numba, zarr, pyarrow; the job programs; the pages) when it runs.
# tests/test_startup.py checks that parsing a command line imports none of them.
from evalcore import __version__
from evalcore.cli import import_cmd, job_commands, recognition_cmd, trec_cmd
from evalcore.cli.usage import PlainHelp, command_parser, reworded, unknown_argument, unknown_choice
from evalcore.engine.options import Options
from evalcore.errors import ClusterError, InputError, OptionError, mention
from evalcore.jobs.common import (
    EXIT_FAILED,
    EXIT_INPUT,
    EXIT_OK,
    EvaluationSpec,
    RunSettings,
    add_run_options,
    parse_number,
    parse_storage_options,
    progress_reporters,
    run_evaluation,
    settings_from_args,
    spec_from_args,
)
from evalcore.jobs.warmup import WORKLOADS as WARMUP_WORKLOADS
from evalcore.types import PROTOCOLS, SIMILARITIES, TIES

EXIT_INTERRUPTED, EXIT_TERMINATED = 130, 128 + signal.SIGTERM
#: the file ``evalcore demo`` writes first into its folder: what --overwrite may replace there
DEMO_MARKER = "evalcore-demo.json"
DEMO_ENTRIES = ("dataset.zarr", "report")
#: the false-positive identification rate at which the demo picks its open-set threshold
DEMO_TARGET_FPIR = 0.1


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread like Ctrl-C, so every ``finally`` and cleanup runs."""


def _raise_terminated(signum, frame):
    raise Terminated()


@contextlib.contextmanager
def sigterm_raises():
    """While the command runs, SIGTERM raises ``Terminated`` (default: die at once, leaving temporaries)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line led by the argument it is about (``main`` prints it after
    one ``evalcore: error:``), exit status 2, with "did you mean" for a mistyped command, option or choice;
    help is plain text."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", PlainHelp)
        super().__init__(*args, **kwargs)

    def error(self, message):
        raise InputError(reworded(self.prog, message))

    def _check_value(self, action, value):  # argparse's one check of a value against choices
        if action.choices is not None and value not in action.choices:
            raise argparse.ArgumentError(None, unknown_choice(action, value))

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:  # words no parser took: the command's own parser has the options to suggest
            raise InputError(unknown_argument(command_parser(self, getattr(parsed, "command", None)), extras))
        return parsed


# --------------------------------------------------------------------------- commands


def cmd_evaluate(args) -> int:
    settings = settings_from_args(args)  # the cluster and storage options first, as before any work
    result = run_evaluation(args.dataset, args.out, spec_from_args(args), settings, quiet=args.quiet)
    for warning in result.warnings:
        print(f"evalcore: warning: {warning}", file=sys.stderr)
    if not args.quiet:
        print_summary(result.summary, None, run=result.run)
        print(f"report written to {args.out}")
    return EXIT_OK


def print_summary(summary, per_query, n_worst: int = 10, run=None) -> None:
    from evalcore.render import pages

    print(pages.format_terminal(summary, per_query, n_worst=n_worst, run=run))


def cmd_validate(args) -> int:
    import zarr

    from evalcore.io import dataset as ds
    from evalcore.io.validate import chosen_protocol, validate

    storage_options = parse_storage_options(args.storage_option)
    group = ds.open_dataset(args.dataset, storage_options)
    attributes = ds.dataset_attributes(group)
    protocol = chosen_protocol(group, args.protocol)  # given, the attribute's, the arrays' choice, else class
    similarity = args.similarity or attributes.get("similarity") or "cosine"
    problems = validate(group, protocol, similarity=similarity)
    if problems:
        for line in problems.messages():
            print(f"evalcore: {args.dataset}: {line}", file=sys.stderr)
        print(f"{len(problems.items)} problem(s) found", file=sys.stderr)
        return EXIT_INPUT
    sides = [group[side] for side in ("query", "gallery") if side in group]
    shapes = ", ".join(f"{side.basename}/{name} {arr.shape}" for side in sides if isinstance(side, zarr.Group)
                       for name, arr in sorted(side.arrays()) if name == "emb")
    if ds.has(group, ds.SCORES) and isinstance(scores := group[ds.SCORES], zarr.Array):
        shapes = f"{ds.SCORES} {scores.shape}, given"
    print(f"{args.dataset}: valid for protocol {protocol} ({shapes or 'precomputed rankings'})")
    return EXIT_OK


def check_demo_out(out: str) -> None:
    """The demo folder is new, empty, or one ``evalcore demo`` wrote (replaced by a new run, so that running the
    demo twice works); any other folder is refused, with or without --overwrite.

    Ours: it holds ``DEMO_MARKER`` and nothing but the demo's dataset.zarr and
    report/ (each what evalcore writes) and evalcore's leftovers of them.
    """
    from evalcore.io import report
    from evalcore.io.importers import check_import_out

    entries = report.local_out_entries(out, True)
    if not entries:
        return
    p = report._local(out)
    try:
        ours = json.loads((p / DEMO_MARKER).read_text()).get("written_by") == "evalcore demo"
    except (OSError, ValueError, AttributeError):
        ours = False
    foreign = [n for n in entries if n not in (DEMO_MARKER, *DEMO_ENTRIES)
               and not ((m := report.LEFTOVER.match(n)) and m["name"] in DEMO_ENTRIES)]
    if not ours or foreign:
        what = f"holds {foreign[0]!r}" if foreign else f"has no {DEMO_MARKER}"
        raise InputError(mention("--out")
                         + f" {out}: {what}, so it is not a folder evalcore demo wrote; demo replaces only its "
                         "own earlier output, choose another " + mention("--out"))
    if (p / "report").exists():
        report.check_out(p / "report", True)
    if (p / "dataset.zarr").exists():
        check_import_out(p / "dataset.zarr", True)


def cmd_demo(args) -> int:
    from evalcore.io import report
    from evalcore.io.files import atomic_write
    from evalcore.jobs import synthetic

    out = args.out or "evalcore-demo"
    dataset = os.path.join(out, "dataset.zarr")
    report_dir = os.path.join(out, "report")
    dims = parse_number("--dims", args.dims, int)
    check_demo_out(out)
    settings = RunSettings(workers=None if args.workers is None else parse_number("--workers", args.workers, int),
                           overwrite=True).checked()
    threshold = None if args.threshold == "auto" else parse_number("--threshold", args.threshold)
    # the marker first: a demo killed midway is still recognised as one by --overwrite
    atomic_write(os.path.join(out, DEMO_MARKER), (json.dumps({"written_by": "evalcore demo"}) + "\n").encode())
    print(f"writing a synthetic Market-1501-shaped dataset to {dataset} ...", flush=True)
    tmp = report.leftover_path(dataset, "tmp")
    try:
        synthetic.write_market_like(tmp, dims=dims, seed=0)
        report.swap_into_place(tmp, dataset)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    started = time.perf_counter()
    if threshold is None:
        threshold = demo_threshold(dataset, settings)
    spec = EvaluationSpec(Options(ks=(1, 5, 10), threshold=threshold), sweep=True,
                          target_fpir=DEMO_TARGET_FPIR).checked()
    result = run_evaluation(dataset, report_dir, spec, settings)
    print_summary(result.summary, result.per_query, n_worst=5)
    print(f"evaluated {result.run['n_queries']} queries x {result.run['n_gallery']} gallery in "
          f"{time.perf_counter() - started:.1f} s; report: {report_dir} (open report.html)")
    return EXIT_OK


def demo_threshold(dataset: str, settings: RunSettings) -> float:
    """The demo's open-set threshold: the lowest at which FPIR <= DEMO_TARGET_FPIR in the data's own sweep
    (a first pass over the same dataset), said on the terminal."""
    from evalcore import api

    _, on_progress = progress_reporters(quiet=False)  # half the demo's time: a bar too, and the compile notice
    with api.command_line_words():
        first = api.evaluate(dataset, ks=(1,), target_fpir=DEMO_TARGET_FPIR, **settings.evaluate_kwargs(),
                             on_progress=on_progress)
    threshold = first.metrics.get("threshold_at_target_fpir")
    if threshold is None:
        raise OptionError("demo", "the sweep found no threshold (no unknown queries)")
    print(f"open-set threshold {threshold:.4f}: the lowest threshold at which FPIR <= {DEMO_TARGET_FPIR} in this "
          "data's own sweep (--threshold T sets one)", flush=True)
    return float(threshold)


def cmd_show(args) -> int:
    from evalcore.io import report

    storage = parse_storage_options(args.storage_option)
    try:
        content = report.read_report(args.report, storage, require=("summary", "per_query"))
    except InputError:
        # "not finished" is right only for a folder that exists: say so when there is none at all
        absence = report_absence(args.report, storage)
        if absence is None:
            raise
        raise InputError(f"report {args.report}: {absence}") from None
    print_summary(content["summary"], content["per_query"], n_worst=args.worst, run=content.get("run"))
    return EXIT_OK


def report_absence(path: str, storage_options) -> str | None:
    """What is at ``path`` instead of a report folder: 'does not exist', 'is a file, not a report folder', or
    None (a folder is there). A URL that cannot be asked counts as there."""
    from evalcore.io.dataset import is_url, local_path

    if not is_url(path):
        local = local_path(path)
        if not os.path.lexists(local):
            return "does not exist"
        return None if os.path.isdir(local) else "is a file, not a report folder"
    import fsspec

    try:
        fs, root = fsspec.core.url_to_fs(path, **dict(storage_options or {}))
        return None if fs.exists(root) else "does not exist"
    except Exception:  # noqa: BLE001 - the read's own message stands
        return None


def cmd_metrics(args) -> int:
    from evalcore.core import registry

    for line in registry.describe(args.ties):
        print(line)
    return EXIT_OK


def cmd_warmup(args) -> int:
    from evalcore.jobs import warmup

    return warmup.warm_up_all(args.only)


def cmd_neighbors(args) -> int:
    from evalcore import api
    from evalcore.io import neighbors as neighbors_out
    from evalcore.io import report

    storage = parse_storage_options(args.storage_option)
    k = parse_number("--k", args.k, int)
    threads = None if args.threads is None else parse_number("--threads", args.threads, int)
    zarr_out = args.format == "zarr"
    if zarr_out:
        neighbors_out.check_zarr_out(args.out, args.overwrite, args.dataset, storage)
    else:
        report.check_out(args.out, args.overwrite, storage)
    started = time.perf_counter()
    with api.command_line_words():
        table = api.neighbors(args.dataset, k=k, similarity=args.similarity, storage_options=storage,
                              threads=threads)
    run = {"command": "neighbors", "dataset": args.dataset, "k": k, "similarity": args.similarity or "dataset default",
           "queries": table.num_rows // k, "seconds": round(time.perf_counter() - started, 3),
           "versions": report.versions()}
    if zarr_out:
        neighbors_out.write_neighbors_zarr(args.out, table, k, run, overwrite=args.overwrite, storage_options=storage)
    else:
        report.write_report(args.out, {"neighbors": table}, run, overwrite=args.overwrite, storage_options=storage)
    if not args.quiet:
        print(f"{run['queries']} queries x {k} neighbours written to {args.out}")
    return EXIT_OK


def cmd_bench(args) -> int:
    if args.compare:
        if args.sweep:
            raise OptionError("--compare", "not with " + mention("--sweep"))
        from evalcore.jobs import bench_compare

        return bench_compare.run(args)
    for option in ("resamples", "permutations", "scipy_columns", "scipy_resamples"):
        if getattr(args, option) is not None:
            raise OptionError(f"--{option.replace('_', '-')}", "only with " + mention("--compare"))
    if args.shape == "trec":  # import trec-run + evaluate as whole processes, beside pytrec_eval
        from evalcore.jobs import bench_trec

        return bench_trec.run(args)
    if args.shape == "first-run":  # a newcomer's install and first demo, as whole processes
        from evalcore.jobs import bench_first_run

        return bench_first_run.run(args)
    if args.shape == "beir":  # exact evaluation beside BEIR's top-1000 + pytrec_eval pipeline, whole processes
        from evalcore.jobs import bench_beir

        return bench_beir.run(args)
    if (args.shape or "").startswith("challenge") and not args.sweep:
        from evalcore.jobs import bench_challenge

        return bench_challenge.run(args)
    from evalcore.jobs import bench

    return bench.run(args)


def add_interval_options(p: argparse.ArgumentParser, ci_default: str | None) -> None:
    """--ci, --resamples, --seed (compare and evaluate); the statistics are core.intervals'."""
    p.add_argument("--ci", default=ci_default, metavar="LEVEL",
                   help=f"confidence level of the bootstrap intervals, in (0, 1) (default {ci_default or 'none'})")
    p.add_argument("--resamples", default="10000", help="bootstrap resamples (default 10000)")
    p.add_argument("--seed", default="0", help="seed of the resamples and sign flips (default 0)")


def cmd_compare(args) -> int:
    from evalcore import api
    from evalcore.core import registry
    from evalcore.render.compare import format_terminal

    ci = parse_number("--ci", args.ci)
    resamples = parse_number("--resamples", args.resamples, int)
    permutations = parse_number("--permutations", args.permutations, int)
    seed = parse_number("--seed", args.seed, int)
    metrics = None if args.metrics is None else registry.select(args.metrics, "--metrics")
    with api.command_line_words():
        result = api.compare(*args.runs, out=args.out, ci=ci, resamples=resamples, permutations=permutations,
                             seed=seed, metrics=metrics, intersect=args.intersect, latex=args.latex,
                             overwrite=args.overwrite, storage_options=parse_storage_options(args.storage_option))
    for warning in result.warnings:
        print(f"evalcore: warning: {warning}", file=sys.stderr)
    print(format_terminal(result, None if args.all_groups else "all"))
    if args.out:
        print(f"comparison written to {args.out}")
    if args.latex:
        print(f"LaTeX table written to {args.latex}")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="evalcore", description="Exact, distributed evaluation of embedding retrieval.",
                    epilog="evalcore COMMAND --help describes a command's options.")
    parser.add_argument("-V", "--version", action="version", version=f"evalcore {__version__}")
    # not required: a bare ``evalcore`` prints this help (main)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands", parser_class=Parser)

    p = sub.add_parser("evaluate", help="evaluate a dataset and write a report folder")
    p.add_argument("dataset", help="Zarr dataset: a folder or any fsspec URL (s3://...)")
    p.add_argument("--out", required=True, help="report folder (local or URL)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing report folder")
    p.add_argument("--quiet", action="store_true", help="no progress and no printed summary")
    add_run_options(p)
    add_interval_options(p, None)
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("validate", help="check a dataset and list every problem found")
    p.add_argument("dataset")
    p.add_argument("--protocol", choices=PROTOCOLS)
    p.add_argument("--similarity", choices=SIMILARITIES)
    p.add_argument("--storage-option", action="append", metavar="KEY=VALUE")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("demo", help="synthetic Market-1501-shaped data, full run, printed summary")
    p.add_argument("--out", help="folder for the dataset and the report (default ./evalcore-demo); a folder an "
                                 "earlier demo wrote is replaced, any other non-empty folder refused")
    p.add_argument("--overwrite", action="store_true", help="accepted for older scripts: demo always replaces its "
                                                            "own earlier output, and never anything else")
    p.add_argument("--dims", default="256", help="embedding dimensions (default 256)")
    p.add_argument("--threshold", default="auto",
                   help="open-set threshold for the demo (default auto: the lowest threshold at which FPIR <= 0.1 "
                        "in the data's own sweep)")
    p.add_argument("--workers", help="local worker processes (default: the cores)")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("show", help="print a report's summary and worst queries")
    p.add_argument("report")
    p.add_argument("--worst", type=int, default=10, help="how many worst queries to list")
    p.add_argument("--storage-option", action="append", metavar="KEY=VALUE")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("compare", help="compare runs on their paired queries: differences, intervals, tests")
    p.add_argument("runs", nargs="+", metavar="REPORT", help="report folders (local or URL); the first is the baseline")
    p.add_argument("--out", help="write the comparison folder here")
    p.add_argument("--overwrite", action="store_true", help="replace an existing comparison folder")
    add_interval_options(p, "0.95")
    p.add_argument("--permutations", default="10000", help="random sign flips of the randomization test "
                                                           "(default 10000; every flip up to 20 queries)")
    p.add_argument("--metrics", metavar="NAMES", help="compare only these metrics, comma-separated")
    p.add_argument("--intersect", action="store_true", help="compare the queries the runs share when their "
                                                            "query sets differ (default: an error)")
    p.add_argument("--latex", metavar="FILE", help="also write the table as LaTeX (booktabs) to FILE")
    p.add_argument("--all-groups", action="store_true", help="print every query/group row, not just all")
    p.add_argument("--storage-option", action="append", metavar="KEY=VALUE")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("metrics", help="list every metric --metrics takes: name, column, direction, definition")
    p.add_argument("--ties", choices=TIES, default="pessimistic",
                   help="average: list only the metrics defined under evaluate --ties average, each with its "
                        "definition there (tied items share their gains); the others list every metric")
    p.set_defaults(func=cmd_metrics)

    p = sub.add_parser("warmup", help="compile every kernel into numba's cache now (an image build, a fresh "
                       "machine), so no run waits for it; says where and how long")
    p.add_argument("--only", action="append", choices=sorted(WARMUP_WORKLOADS), metavar="KIND",
                   help="warm only this kind of run (repeatable): " + ", ".join(
                       f"{k} ({v})" for k, v in WARMUP_WORKLOADS.items()))
    p.set_defaults(func=cmd_warmup)

    p = sub.add_parser("neighbors", help="each query's exact k nearest gallery items and scores, to Parquet")
    p.add_argument("dataset", help="Zarr dataset: a folder or any fsspec URL")
    p.add_argument("--k", required=True, help="neighbours per query")
    p.add_argument("--out", required=True, help="folder for neighbors.parquet and run.json (--format zarr: the "
                                                "Zarr group of neighbors/item and neighbors/score)")
    p.add_argument("--format", choices=["parquet", "zarr"], default="parquet",
                   help="parquet (default): one row per (query, rank); zarr: (Q, K) arrays")
    p.add_argument("--similarity", choices=SIMILARITIES, help="default: the dataset's attribute, else cosine")
    p.add_argument("--threads", help="threads (default: the cores, at most 8)")
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--storage-option", action="append", metavar="KEY=VALUE")
    p.set_defaults(func=cmd_neighbors)

    p = sub.add_parser("bench", help="measure evaluate against the matrix-product floor and a full-sort evaluator")
    p.add_argument("--shape", choices=["small", "medium", "market", "large", "xl", "reid-200k", "trec", "beir",
                                       "challenge", "challenge-product", "challenge-big", "first-run"],
                   help="the one shape to measure (default market; not with --sweep); reid-200k: 20,000 x "
                   "200,000 x 128, for --rerank at scale; trec: import trec-run + "
                   "evaluate of a synthetic run (--queries x --top) as whole processes, beside pytrec_eval; "
                   "challenge, challenge-product, challenge-big: the scoring service against evalcore score per "
                   "submission; first-run: pip install -e . (and .[test]) into new venvs, then evalcore demo "
                   "cold and again, as whole processes")
    p.add_argument("--workers", help="worker processes (default 2); with --sweep a comma list like --workers-list")
    p.add_argument("--memory-limit", default=None, help="per worker (xl uses 2GiB; --sweep defaults to 2GiB)")
    p.add_argument("--data-dir", help="where to write the generated datasets, reused when there "
                   "(default: a temporary folder)")
    p.add_argument("--skip-conventional", action="store_true")
    p.add_argument("--repeat", help="timed pairs per compared figure, alternated pair by pair (default 5; "
                   "--shape trec: 3); the figures are medians with min-max and the median of the paired ratios; "
                   "with --compare: runs of evalcore compare")
    p.add_argument("--rerank", action="store_true", help="also time re-ranked evaluation (k1=20, k2=6, lambda=0.3) "
                   "and the dense reference function where it fits")
    p.add_argument("--sweep", action="store_true",
                   help="a cost table over gallery sizes and worker counts instead of one shape")
    p.add_argument("--sizes", help="--sweep: gallery sizes (default 100000,300000,1000000,2000000; 100k, 1M also read)")
    p.add_argument("--dims", help="--sweep: embedding width (default 128)")
    p.add_argument("--queries", help="--sweep: query count (default 10000); --shape trec: run queries (default 100000)")
    p.add_argument("--top", help="--shape trec: results a query (default 100; pytrec_eval is run up to 100); "
                   "--shape beir: the pipeline's top-k (default 1000)")
    p.add_argument("--gallery", help="--shape beir: corpus documents (default 100000)")
    p.add_argument("--workers-list", help="--sweep: worker counts (default 1,2)")
    p.add_argument("--gallery-shards", help="--sweep: gallery shards per query chunk, passed to evaluate "
                   "(default: as evaluate plans from the memory limit; 1 = whole gallery)")
    p.add_argument("--csv", metavar="FILE", help="--sweep: also write the table as CSV")
    p.add_argument("--plot", metavar="FILE.svg", help="--sweep: chart ratio and seconds against Q*G*D as SVG")
    p.add_argument("--compare", action="store_true",
                   help="time evalcore compare on two generated reports beside scipy.stats on the same columns")
    p.add_argument("--resamples", help="--compare: bootstrap resamples (default 10000)")
    p.add_argument("--permutations", help="--compare: sign flips (default 10000)")
    p.add_argument("--scipy-columns", help="--compare: columns scipy is timed on (default 1), scaled to all")
    p.add_argument("--scipy-resamples", help="--compare: resamples scipy is timed at (default 1000), scaled")
    p.set_defaults(func=cmd_bench)

    import_cmd.register(sub)
    trec_cmd.register(sub)  # trec_eval's command in one process
    recognition_cmd.register(sub)  # GLDv2's GAP from the challenge's CSV files
    job_commands.register(sub)  # nightly, score, score-service, leaderboard
    return parser


class _Stderr(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a record comes (tests and callers may replace it)."""

    @property  # type: ignore[override]
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def show_fault_events() -> None:
    """A worker lost or restarted mid-run is printed as it happens: ``evalcore: warning: ...`` on stderr."""
    log = logging.getLogger("evalcore.faults")
    if not log.handlers:
        handler = _Stderr()
        handler.setFormatter(logging.Formatter("evalcore: warning: %(message)s"))
        log.addHandler(handler)
        log.propagate = False


def memory_advice(args: argparse.Namespace | None) -> str:
    """What to change after an out-of-memory error: only options the command that ran has (compare has neither
    --memory-limit nor --chunk-rows), else nothing."""
    present = [flag for flag, dest in (("raise --memory-limit", "memory_limit"), ("lower --chunk-rows", "chunk_rows"))
               if args is not None and hasattr(args, dest)]
    return "; " + " or ".join(present) if present else ""


def main(argv: list[str] | None = None) -> int:
    debug = bool(os.environ.get("EVALCORE_DEBUG"))
    show_fault_events()
    try:
        with sigterm_raises():
            parser = build_parser()
            try:
                args = parser.parse_args(argv)
            except SystemExit as done:  # --help and --version print and stop here, as a command that is done
                return done.code if isinstance(done.code, int) else EXIT_OK
            if args.command is None:
                parser.print_help()
                return EXIT_OK
            return (getattr(args, "func", None) or args.run)(args)
    except Terminated:
        print("evalcore: terminated", file=sys.stderr)
        return EXIT_TERMINATED
    except InputError as exc:
        print(f"evalcore: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except ClusterError as exc:  # unreachable scheduler, a worker lost (out of memory or killed)
        print(f"evalcore: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except MemoryError as exc:
        print(f"evalcore: error: out of memory ({exc}){memory_advice(locals().get('args'))}", file=sys.stderr)
        return EXIT_FAILED
    except BrokenPipeError:  # `evalcore metrics | head`: the reader has gone; nothing to say, as for any CLI
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit's flush cannot fail again
        return EXIT_OK
    except KeyboardInterrupt:
        print("evalcore: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - the last line of defence: one message, exit 1
        if debug:
            raise
        print(f"evalcore: error: {exc.__class__.__name__}: {exc} (set EVALCORE_DEBUG=1 for a traceback)",
              file=sys.stderr)
        return EXIT_FAILED


def entry() -> None:
    """The ``evalcore`` console script: ``main``'s exit status, reached without the C++ libraries' teardown.

    What a normal exit does for Python is done here (non-daemon threads
    joined, ``atexit`` handlers run, output flushed); then the process ends
    without running the static destructors of the native libraries it loaded.
    One of those (pyarrow's) can abort a process that is already done (SIGABRT,
    "terminate called without an active exception", exit 134 instead of the
    status the command chose): 4 runs in 40 of a refused ``evalcore compare`` on
    a loaded machine, none in 50 this way.
    """
    code = main()
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe, a closed stream: nothing more can be said
            pass
    os._exit(code if isinstance(code, int) else 1)


if __name__ == "__main__":  # pragma: no cover
    entry()
