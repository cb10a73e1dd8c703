"""``evalcore import FORMAT [INPUT ...] --out DATASET``: convert other tools' files to a dataset.

``register(subparsers)`` adds the subcommand; ``run(args)`` does the work and
prints one summary line. Bad input raises :class:`evalcore.errors.InputError`,
which the main command line turns into exit status 2.
"""
from __future__ import annotations

import argparse
import re
import sys
import textwrap
from typing import Any

from evalcore.cli.usage import PlainRawHelp

#: the formats ``evalcore.io.importers.FORMATS`` reads, in its order (a test keeps them equal): named here so
#: that parsing the command line imports no reader (pyarrow, zarr, scipy); ``run`` imports them
FORMAT_NAMES = ("mat", "npy", "parquet", "faiss-json", "trec", "trec-run")
DESCRIPTION = ("Convert another tool's output into an evalcore dataset (Zarr). Everything is "
               "validated before anything is written.\n\nFormats:\n\n")

#: each format's options (attribute = the reader's keyword), in the order its help lists them; a test keeps
#: them equal to the readers' keyword-only parameters
OPTIONS_OF = {
    "mat": (),
    "npy": ("query_features", "query_ids", "query_cams", "gallery_features", "gallery_ids", "gallery_cams",
            "junk_label"),
    "parquet": ("emb_column", "label_column", "cam_column", "key_column", "group_column", "lat_column",
                "lon_column", "side_column", "junk_label"),
    "faiss-json": ("query_index", "reference_index", "results_dir"),
    "trec": ("queries", "gallery", "dataset"),
    "trec-run": ("qrels", "order", "complete"),
}
#: every per-format option, each once
FORMAT_OPTIONS = tuple(dict.fromkeys(name for names in OPTIONS_OF.values() for name in names))
#: the title of each format's group of options in the help
GROUP_TITLES = {"npy": "npy", "parquet": "parquet (column names; defaults used when present)",
                "faiss-json": "faiss-json (override the folder's paths)", "trec": "trec", "trec-run": "trec-run"}


def option_arguments(name: str) -> dict[str, Any]:
    """The keywords of ``add_argument`` for the per-format option ``name`` (its flag: ``--`` + name)."""
    side, _, what = name.partition("_")
    if what in ("features", "ids", "cams"):  # npy
        text = {"features": "features (N, D)", "ids": "identity labels (N,)", "cams": "camera ids (N,), optional"}
        return {"metavar": "FILE.npy", "help": f"{side} {text[what]}"}
    if name.endswith("_column"):  # parquet
        role = name[:-len("_column")]
        return {"metavar": "NAME", "help": f"column of {role} (default {role!r})"}
    keywords: dict[str, dict[str, Any]] = {
        "junk_label": {"type": int, "metavar": "N",
                       "help": "gallery items with this label are junk for every query (npy and parquet)"},
        "query_index": {"metavar": "FILE.json", "help": "default INPUT/query_index.json"},
        "reference_index": {"metavar": "FILE.json", "help": "default INPUT/reference_index.json"},
        "results_dir": {"metavar": "DIR", "help": "default INPUT/results"},
        "queries": {"metavar": "FILE", "help": "query ids, one per line, in row order"},
        "gallery": {"metavar": "FILE", "help": "gallery ids, one per line, in row order"},
        "dataset": {"metavar": "DATASET",
                    "help": "take ids from this dataset's query/key and gallery/key and copy its arrays"},
        "qrels": {"metavar": "FILE", "help": "the TREC qrels file judging the run (required)"},
        "order": {"choices": ["score", "trec_eval"],
                  "help": "score (default): by score, ranking/score kept, ties follow evaluate --ties; "
                          "trec_eval: trec_eval's order (ties by docno descending), no ranking/score"},
        "complete": {"action": "store_true", "default": None,
                     "help": "keep judged queries without results as empty rankings, so evaluate counts them "
                             "with every measure 0 (trec_eval -c); default: left out with a warning"},
    }
    return keywords[name]


def add_common_arguments(parser: argparse.ArgumentParser, inputs_help: str, help_help: str) -> None:
    """What every format takes: its inputs, --out, --overwrite, --chunk-rows, and -h (``FormatHelp``)."""
    parser.add_argument("-h", "--help", action=FormatHelp, help=help_help)
    # a default, or argparse calls a missing "*" positional required
    parser.add_argument("inputs", metavar="INPUT", nargs="*", default=[], help=inputs_help)
    parser.add_argument("--out", metavar="DATASET", required=True, help="dataset path or URL to write")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing dataset at --out")
    parser.add_argument("--chunk-rows", type=int, default=None, metavar="N", help="rows per Zarr chunk")
    parser.add_argument("--quiet", action="store_true",
                        help="no progress (a bar on a terminal once reading or writing takes over 2 s, else a "
                             "line as each ends)")


def add_format_options(parser: argparse.ArgumentParser, formats) -> None:
    """Each format's group of options, an option shared by two formats in the first one's group."""
    added: set[str] = set()
    for format in formats:
        names = [n for n in OPTIONS_OF[format] if n not in added]
        if names:
            group = parser.add_argument_group(GROUP_TITLES[format])
            for name in names:
                group.add_argument("--" + name.replace("_", "-"), **option_arguments(name))
            added.update(names)


def format_sections() -> dict[str, str]:
    """Each format's description from the importers' text on the formats, by format name."""
    from evalcore.io.importers import FORMATS_HELP

    parts = re.split(r"^``([a-z-]+)``\n", FORMATS_HELP, flags=re.M)
    return {name: textwrap.dedent(body).strip("\n") for name, body in zip(parts[1::2], parts[2::2])}


def format_parser(format: str, prog: str) -> argparse.ArgumentParser:
    """The parser ``import FORMAT --help`` prints: that format's description, inputs and options alone."""
    from evalcore.io.importers.formats import FORMATS

    _, fewest, most, what = FORMATS[format]
    count = {(1, 1): "one path", (0, 1): "one path or none"}.get((fewest, most), f"{fewest} to {most} paths")
    parser = argparse.ArgumentParser(prog=f"{prog} {format}", add_help=False, formatter_class=PlainRawHelp,
                                     description=f"Convert {format} input into an evalcore dataset (Zarr); "
                                                 "everything is validated before anything is written.\n\n"
                                                 + format_sections()[format],
                                     epilog=f"{prog} --help lists every format.")
    add_common_arguments(parser, f"{count}: {what}", "show this help")
    add_format_options(parser, [format])
    return parser


class FormatHelp(argparse.Action):
    """-h/--help of ``import``: after FORMAT only that format's help (``format_parser``), else every format's."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        format = getattr(namespace, "format", None)
        if format in FORMAT_NAMES:
            parser = format_parser(format, parser.prog)
        parser.print_help()
        parser.exit()


class FormatsHelp(PlainRawHelp):
    """Adds the importers' text on the formats to the description, only when help is printed."""

    def add_text(self, text):
        if text == DESCRIPTION:
            from evalcore.io.importers import FORMATS_HELP

            text += FORMATS_HELP
        super().add_text(text)


def register(subparsers) -> argparse.ArgumentParser:
    """Add the ``import`` subcommand to ``parser.add_subparsers(dest="command")``."""
    parser = subparsers.add_parser(
        "import", help="convert another tool's files (mat, npy, parquet, faiss-json, trec, trec-run) to a dataset",
        description=DESCRIPTION, formatter_class=FormatsHelp, add_help=False,
        epilog="evalcore import FORMAT --help shows one format's description and options alone.")
    parser.add_argument("format", metavar="FORMAT", choices=FORMAT_NAMES,
                        help="input format: " + ", ".join(FORMAT_NAMES))
    add_common_arguments(parser, "input file(s) or folder (see the formats above)",
                         "show this help; after FORMAT, that format's alone")
    add_format_options(parser, FORMAT_NAMES)
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Import and print one summary line; InputError propagates (exit status 2)."""
    from evalcore.engine import progress as shown_progress
    from evalcore.io import progress
    from evalcore.io.importers import import_to
    from evalcore.jobs.common import progress_reporters

    options = {name: getattr(args, name) for name in FORMAT_OPTIONS if getattr(args, name, None) is not None}
    _, on_progress = progress_reporters(quiet=getattr(args, "quiet", False))  # bytes read and written
    with shown_progress.shown(on_progress), progress.reporting(on_progress):
        summary = import_to(args.format, list(args.inputs), args.out, overwrite=args.overwrite,
                            chunk_rows=getattr(args, "chunk_rows", None), **options)
    counts = [f"{summary[k]} {k}" for k in ("queries", "gallery", "dims", "junk", "qrels") if k in summary]
    if "ranking_k" in summary:
        counts.append(f"top-{summary['ranking_k']} rankings")
    protocol = summary.get("protocol") or "none"
    for warning in summary.get("warnings", []):
        print(f"evalcore: warning: {warning}", file=sys.stderr)
    print(f"imported {args.format} into {summary['out']}: {', '.join(counts)} (protocol {protocol})")
    return 0
