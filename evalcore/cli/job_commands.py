"""The job programs' subcommands: ``nightly``, ``score``, ``score-service``, ``leaderboard``.

Their parsers live here, not beside the programs, so that parsing any command
line imports none of the job modules (each brings numpy, pyarrow, zarr,
numba): a command's function imports its program when it runs.
"""
from __future__ import annotations

import argparse

from evalcore.jobs.common import add_cluster_options


def cmd_nightly(args: argparse.Namespace) -> int:
    from evalcore.jobs import nightly

    return nightly.cmd_nightly(args)


def cmd_score(args: argparse.Namespace) -> int:
    from evalcore.jobs import score

    return score.cmd_score(args)


def cmd_score_service(args: argparse.Namespace) -> int:
    from evalcore.jobs import service

    return service.cmd_score_service(args)


def cmd_leaderboard(args: argparse.Namespace) -> int:
    from evalcore.jobs import leaderboard

    return leaderboard.cmd_leaderboard(args)


def register(subparsers) -> None:
    """Add the job programs' subcommands to ``parser.add_subparsers(dest="command")``."""
    p = subparsers.add_parser(
        "nightly", help="run a job file's evaluations, keep their history and check regression gates",
        description="Run the evaluations of a TOML job file (see jobs/nightly.example.toml), write their "
                    "reports under REPORTS/DATE/NAME, add their summaries to the history, write "
                    "REPORTS/DATE/trend.html and check the regression gates (exit 3 when one fails).")
    p.add_argument("job", metavar="JOB.toml", help="the job file")
    p.add_argument("--date", help="run date YYYY-MM-DD (default: today, UTC); rerunning a date replaces it")
    p.add_argument("--quiet", action="store_true", help="no per-chunk progress lines")
    add_cluster_options(p)
    p.set_defaults(func=cmd_nightly, memory_limit=None)

    p = subparsers.add_parser(
        "score", help="score a challenge submission against a truth bundle and update the leaderboard",
        description="Check an untrusted submission (a folder with query.npy and gallery.npy, or a Zarr group "
                    "with query/emb and gallery/emb), score it by judged-only mAP with cosine similarity, write "
                    "DIR/result.json (participant), DIR/organizer/ (full report) and update the leaderboard.")
    p.add_argument("submission", metavar="SUBMISSION", help="folder with query.npy + gallery.npy, or a Zarr group")
    p.add_argument("--truth", required=True, help="truth bundle: Zarr group with query/key, gallery/key, qrels/*")
    p.add_argument("--out", required=True, metavar="DIR", help="result folder of this submission (new or empty)")
    p.add_argument("--team", required=True, help="team name")
    p.add_argument("--name", help="submission name (default: the submission's file or folder name)")
    p.add_argument("--leaderboard", metavar="PATH",
                   help="leaderboard Parquet file (default DIR/../leaderboard.parquet)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing DIR")
    p.add_argument("--quiet", action="store_true", help="no per-chunk progress lines")
    p.add_argument("--ci", nargs="?", const="0.95", metavar="LEVEL",
                   help="error bars on leaderboard_best.parquet: each team's bootstrap interval at LEVEL (default "
                   "0.95) and whether it is statistically tied with rank 1")
    p.add_argument("--resamples", help="--ci: bootstrap resamples and sign-flip permutations (default 10000)")
    add_cluster_options(p)
    p.set_defaults(func=cmd_score)

    p = subparsers.add_parser(
        "score-service", help="score challenge submissions as they arrive, with the truth kept loaded",
        description="Watch SUBMISSIONS/<team>/<submission> and score each ready submission once (READY marker, "
                    "or unchanged for --settle seconds) against the truth; record every outcome in "
                    "OUT/organizer/ledger.parquet and the public leaderboard OUT/leaderboard-PHASE.parquet.")
    p.add_argument("submissions", metavar="SUBMISSIONS", help="folder of team folders of submissions")
    p.add_argument("--truth", required=True, help="truth bundle (query/key, gallery/key, qrels/*, query/split)")
    p.add_argument("--out", required=True, metavar="SCORED", help="where results, ledger and leaderboards go")
    p.add_argument("--phase", default="main", help="phase name: each phase has its own leaderboard (default main)")
    p.add_argument("--timeout", default="600", help="seconds one submission may take (default 600)")
    p.add_argument("--max-per-day", default=None, help="submissions per team per UTC day (default: no limit)")
    p.add_argument("--retries", default="2", help="times a submission is scored again after the scorer process "
                   "died on it, then it is failed (default 2)")
    p.add_argument("--once", action="store_true", help="one pass over the ready submissions, then exit")
    p.add_argument("--poll", default="10", help="seconds between passes (default 10)")
    p.add_argument("--settle", default="10", help="a submission without READY is ready after this many "
                   "seconds unchanged (default 10)")
    add_cluster_options(p)
    p.set_defaults(func=cmd_score_service)

    p = subparsers.add_parser("leaderboard", help="print and write a phase's ranking from the scoring ledger",
                              description="Rank each team's best scored submission of a phase: by the public "
                                          "split, or by the private split with --reveal.")
    p.add_argument("leaderboard", metavar="LEADERBOARD", help="SCORED folder of score-service, or its ledger")
    p.add_argument("--reveal", action="store_true", help="rank by the private split and show every split")
    p.add_argument("--phase", help="the phase (default: the ledger's only phase)")
    p.add_argument("--ci", nargs="?", const="0.95", metavar="LEVEL",
                   help="error bars: each ranked row's bootstrap interval at LEVEL (default 0.95) and whether it is "
                   "statistically tied with rank 1, from the ranking split's queries alone")
    p.add_argument("--resamples", default="10000", help="--ci: bootstrap resamples and sign-flip permutations "
                   "(default 10000)")
    p.set_defaults(func=cmd_leaderboard)
