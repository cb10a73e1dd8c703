"""``evalcore gap SOLUTION PREDICTIONS``: Google Landmarks v2's recognition GAP and top-1 accuracy from the
challenge's CSV files, per Usage subset (Public, Private), printed; nothing written.

Only argparse is imported to build the parser; ``run`` imports the measure.
"""
from __future__ import annotations

import argparse

from evalcore.cli.usage import PlainHelp

DESCRIPTION = """\
Global Average Precision (GAP) and top-1 accuracy of landmark recognition, from the
Google Landmark Recognition challenge's files: SOLUTION (id,landmarks,Usage; landmarks
space-separated, empty for a non-landmark image; Usage Public, Private or Ignored) and
PREDICTIONS (id,landmarks with landmarks "LANDMARK SCORE", empty for none). GAP ranks
every prediction by score, highest first (ties: image id, then landmark, ascending):
(1/M) sum P(i) rel(i), M = images with a landmark; a prediction for a non-landmark
image counts against. Prints one line per subset: subset, gap, top1_accuracy, images,
landmark images."""


def register(subparsers) -> argparse.ArgumentParser:
    """Add the ``gap`` subcommand to ``parser.add_subparsers(dest="command")``."""
    p = subparsers.add_parser("gap", help="landmark recognition GAP and top-1 accuracy from GLDv2's CSV files",
                              description=DESCRIPTION, formatter_class=PlainHelp)
    p.add_argument("solution", metavar="SOLUTION", help="the challenge's solution CSV (id,landmarks,Usage)")
    p.add_argument("predictions", metavar="PREDICTIONS", help="a submission CSV (id,landmarks)")
    p.add_argument("--ignore-non-landmark", action="store_true",
                   help="drop predictions for non-landmark images first (not the challenge's rule)")
    p.set_defaults(run=run)
    return p


def run(args) -> int:
    from evalcore.errors import input_error
    from evalcore.io import landmark_csv
    from evalcore.measures_api import gap

    subsets, ignored = landmark_csv.read_solution(args.solution)
    known = {image for s in subsets.values() for image in s}
    predictions = landmark_csv.read_predictions(args.predictions, known, ignored)
    lines = []
    for name, truth in subsets.items():
        if not any(truth.values()):  # GAP is undefined without a landmark image: the subset is not shown
            continue
        r = gap({k: v for k, v in predictions.items() if k in truth}, truth,
                ignore_non_landmark=args.ignore_non_landmark)
        lines.append(f"{name.lower():<8}gap {r.gap:.6f}  top1_accuracy {r.top1_accuracy:.6f}  "
                     f"images {len(truth)}  landmark_images {r.n_landmark_queries}")
    if not lines:
        raise input_error(args.solution, "no Public or Private image has a landmark, so GAP is undefined")
    print("\n".join(lines))
    return 0
