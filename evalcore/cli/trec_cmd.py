"""``evalcore trec QRELS RUN``: trec_eval's command in one process, its flags, measure names and printout.

Nothing is written unless ``--out DIR`` asks for the report folder; the
dataset is built in memory. Only argparse is imported to build the parser
(tests/test_startup.py); ``run`` imports the evaluation.
"""
from __future__ import annotations

import argparse
import sys
import warnings

from evalcore.cli.usage import PlainHelp
from evalcore.errors import EvalcoreWarning

#: -M and -l: integers from 1 to this, as every integer option (the engine's cut-offs are int32)
MAX_INTEGER = (1 << 31) - 1

DESCRIPTION = """\
Evaluate a TREC run against TREC qrels as trec_eval does, and print trec_eval's lines
(measure, query id or all, value). trec_eval's rules throughout: equal scores ranked by
docno descending, queries without judgements left out, a judged query with no relevant
document counted with every measure 0, a negative grade "in the pool, not judged".
Measures (-m, repeatable): num_q num_ret num_rel num_rel_ret map gm_map Rprec bpref
recip_rank iprec_at_recall P recall infAP gm_bpref Rprec_mult utility 11pt_avg binG G
ndcg ndcg_rel Rndcg ndcg_cut map_cut relative_P success set_P set_relative_P set_recall
set_map set_F num_nonrel_judged_ret rbp rbp_resid unj, with cut-offs as P.5,10 or P_5
and the persistence as rbp.p=0.8 (printed rbp_p=0.8); official (the default:
trec_eval's default set less runid) and all_trec (trec_eval's less runid and
relstring). Unlike trec_eval, -m P.5 -m P.10 prints both."""


def register(subparsers) -> argparse.ArgumentParser:
    """Add the ``trec`` subcommand to ``parser.add_subparsers(dest="command")``."""
    p = subparsers.add_parser("trec", help="trec_eval's evaluation and printout in one process (-q -m -c -M -l -J)",
                              description=DESCRIPTION, formatter_class=PlainHelp)
    p.add_argument("qrels", metavar="QRELS", help="TREC qrels file (qid iter docno rel)")
    p.add_argument("run", metavar="RUN", help="TREC run file (qid Q0 docno rank score tag)")
    p.add_argument("-q", dest="per_query", action="store_true", help="print every query's values, then all")
    p.add_argument("-m", dest="measures", action="append", metavar="MEASURE",
                   help="a trec_eval measure name (repeatable; default official)")
    p.add_argument("-c", dest="complete", action="store_true",
                   help="count judged queries without results, every measure 0")
    p.add_argument("-M", dest="depth", metavar="N", help="cut every ranking at N before every measure")
    p.add_argument("-l", dest="rel_level", metavar="N", help="relevant when the grade is >= N (default 1)")
    p.add_argument("-J", dest="judged_only", action="store_true",
                   help="drop the documents without a grade >= 0 from the rankings first")
    p.add_argument("--out", metavar="DIR", help="also write the report folder (Parquet tables, report.html)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing report folder at --out")
    p.set_defaults(func=run)
    return p


def _integer(flag: str, text: str | None, default: int | None) -> int | None:
    from evalcore.errors import input_error

    if text is None:
        return default
    word = text.strip()
    if not (word.isascii() and word.isdigit()) or not 1 <= int(word) <= MAX_INTEGER:
        raise input_error(flag, f"{text!r} is not an integer from 1 to {MAX_INTEGER}")
    return int(word)


def run(args: argparse.Namespace) -> int:
    """Print trec_eval's lines on stdout, warnings on stderr; InputError propagates (exit status 2)."""
    from evalcore import trec_api
    from evalcore.engine import progress
    from evalcore.io import report

    depth, level = _integer("-M", args.depth, None), _integer("-l", args.rel_level, 1)
    measures = args.measures or ["official"]
    trec_api.parse_measures(measures, option="-m")   # before any reading
    if args.out is not None:
        report.check_out(args.out, args.overwrite)
    # a bar on a terminal once reading or ranking takes over 2 s; in a log nothing, as trec_eval prints nothing
    bar = progress.TerminalBar() if sys.stderr.isatty() else None
    with warnings.catch_warnings(), progress.shown(bar):   # warnings printed below, once, in the command's words
        warnings.simplefilter("ignore", EvalcoreWarning)
        result = trec_api.trec(args.qrels, args.run, measures, complete=args.complete, depth=depth,
                               rel_level=level or 1, judged_only=args.judged_only, on_progress=bar)
    for warning in result.warnings:
        print(f"evalcore: warning: {warning}", file=sys.stderr)
    sys.stdout.write(result.format(per_query=args.per_query))
    if args.out is not None:
        sys.stdout.flush()
        result.save(args.out, overwrite=args.overwrite)
        print(f"evalcore: report written to {args.out}", file=sys.stderr)
    return 0
