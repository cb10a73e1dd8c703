"""``evalcore import FORMAT [INPUT ...] --out DATASET``: convert other tools' files to a dataset.

``register(subparsers)`` adds the subcommand; ``run(args)`` does the work and
prints one summary line. Bad input raises :class:`evalcore.errors.InputError`,
which the main command line turns into exit status 2.
"""
from __future__ import annotations

import argparse
import sys

#: the formats ``evalcore.io.importers.FORMATS`` reads, in its order (a test keeps them equal): named here so
#: that parsing the command line imports no reader (pyarrow, zarr, scipy); ``run`` imports them
FORMAT_NAMES = ("mat", "npy", "parquet", "faiss-json", "trec", "trec-run")
DESCRIPTION = ("Convert another tool's output into an evalcore dataset (Zarr). Everything is "
               "validated before anything is written.\n\nFormats:\n\n")

#: option attribute -> importer keyword, for every per-format option.
FORMAT_OPTIONS = (
    # npy
    "query_features", "gallery_features", "query_ids", "gallery_ids", "query_cams", "gallery_cams",
    "junk_label",
    # parquet
    "emb_column", "label_column", "cam_column", "key_column", "group_column", "lat_column",
    "lon_column", "side_column",
    # faiss-json
    "query_index", "reference_index", "results_dir",
    # trec
    "queries", "gallery", "dataset",
    # trec-run
    "qrels", "order", "complete",
)


class FormatsHelp(argparse.RawDescriptionHelpFormatter):
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
        description=DESCRIPTION, formatter_class=FormatsHelp)
    parser.add_argument("format", metavar="FORMAT", choices=FORMAT_NAMES,
                        help="input format: " + ", ".join(FORMAT_NAMES))
    parser.add_argument("inputs", metavar="INPUT", nargs="*",
                        help="input file(s) or folder (see the formats above)")
    parser.add_argument("--out", metavar="DATASET", required=True, help="dataset path or URL to write")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing dataset at --out")
    parser.add_argument("--chunk-rows", type=int, default=None, metavar="N", help="rows per Zarr chunk")

    npy = parser.add_argument_group("npy")
    for side in ("query", "gallery"):
        npy.add_argument(f"--{side}-features", metavar="FILE.npy", help=f"{side} features (N, D)")
        npy.add_argument(f"--{side}-ids", metavar="FILE.npy", help=f"{side} identity labels (N,)")
        npy.add_argument(f"--{side}-cams", metavar="FILE.npy", help=f"{side} camera ids (N,), optional")
    npy.add_argument("--junk-label", type=int, metavar="N",
                     help="npy/parquet: gallery items with this label are junk for every query")

    pq = parser.add_argument_group("parquet (column names; defaults used when present)")
    for role in ("emb", "label", "cam", "key", "group", "lat", "lon", "side"):
        pq.add_argument(f"--{role}-column", metavar="NAME", help=f"column of {role} (default {role!r})")

    fj = parser.add_argument_group("faiss-json (override the folder's paths)")
    fj.add_argument("--query-index", metavar="FILE.json", help="default INPUT/query_index.json")
    fj.add_argument("--reference-index", metavar="FILE.json", help="default INPUT/reference_index.json")
    fj.add_argument("--results-dir", metavar="DIR", help="default INPUT/results")

    trec = parser.add_argument_group("trec")
    trec.add_argument("--queries", metavar="FILE", help="query ids, one per line, in row order")
    trec.add_argument("--gallery", metavar="FILE", help="gallery ids, one per line, in row order")
    trec.add_argument("--dataset", metavar="DATASET",
                      help="take ids from this dataset's query/key and gallery/key and copy its arrays")
    run_group = parser.add_argument_group("trec-run")
    run_group.add_argument("--qrels", metavar="FILE", help="the TREC qrels file judging the run (required)")
    run_group.add_argument("--order", choices=["score", "trec_eval"],
                           help="score (default): by score, ranking/score kept, ties follow evaluate --ties; "
                                "trec_eval: trec_eval's order (ties by docno descending), no ranking/score")
    run_group.add_argument("--complete", action="store_true", default=None,
                           help="keep judged queries without results as empty rankings, so evaluate counts them "
                                "with every measure 0 (trec_eval -c); default: left out with a warning")
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Import and print one summary line; InputError propagates (exit status 2)."""
    from evalcore.io.importers import import_to

    options = {name: getattr(args, name) for name in FORMAT_OPTIONS if getattr(args, name, None) is not None}
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
