"""``trec`` and ``trec-run``: TREC qrels against id lists or a dataset, and TREC run files with their qrels."""
from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping

import numpy as np

from evalcore.core.protocols.qrels import MAX_GRADE
from evalcore.errors import InputError
from evalcore.io import dataset as ds
from evalcore.io.importers.checks import WARNINGS, check_unique


def _read_ids(path) -> list[str]:
    """One id per line; the line order is the row order (blank lines only at the end)."""
    name = str(path)
    if not os.path.isfile(path):
        raise InputError(f"{name}: no such file")
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{name}: cannot be read ({exc})") from None
    while lines and not lines[-1].strip():
        lines.pop()
    ids = []
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        ident = line.strip()
        if not ident:
            raise InputError(f"{name}: line {number}, field id: empty line (one id per line; "
                             "the line order is the row order)")
        if len(ident.split()) > 1:
            raise InputError(f"{name}: line {number}, field id: {ident!r} contains whitespace")
        if ident in seen:
            raise InputError(f"{name}: line {number}, field id: duplicate id {ident!r} (also line {seen[ident]})")
        seen[ident] = number
        ids.append(ident)
    if not ids:
        raise InputError(f"{name}: no ids")
    return ids


def trec_relevance(grade: int) -> int:
    """A TREC judgement as qrels/rel: grade >= 1 -> that grade (relevant, gain = grade); anything else -> 0.

    trec_eval reads a negative grade as "judged, not relevant" (unjudged-in-pool),
    not as something to remove from the ranking; so no TREC grade becomes junk (-1).
    """
    return max(int(grade), 0)


def _skipped_queries(name: str, skipped: dict[str, int], why: str) -> str:
    shown = ", ".join(f"{q!r} (line {n})" for q, n in list(skipped.items())[:5])
    more = f", ... ({len(skipped)} queries)" if len(skipped) > 5 else ""
    return f"{name}: judged queries {why} are left out: {shown}{more}"


#: what trec_eval's C ``isspace`` separates fields with: ASCII space, tab, newline, vertical tab, form feed, CR
#: (not Python's ``str.split`` set, which also splits at U+00A0, U+2003, U+001F, ...)
FIELD_SEPARATORS = re.compile(r"[ \t\n\v\f\r]+")
#: a score as trec_eval's ``atof`` reads all of it: a plain decimal number, optionally with an exponent
#: (``2.5``, ``-3``, ``.5``, ``1e-05``); ``1_5``, ``0x1p3``, ``0.5abc``, ``nan``, ``inf`` and non-ASCII
#: digits are not (atof would read a prefix of them, or a value Python's float would not)
PLAIN_INTEGER = re.compile(r"[+-]?[0-9]+")
PLAIN_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def trec_records(handle, name: str, layout: str, *, more_ignored: bool = False):
    """(line number, fields) of a whitespace-separated TREC file, split where trec_eval splits.

    Blank lines and lines whose first field starts with ``#`` are skipped. A
    line with fewer fields than ``layout`` names is an input error; so is one
    with more, unless ``more_ignored`` (a run file: trec_eval ignores
    everything after the sixth field), where only the first ones come back.
    """
    expected = len(layout.split())
    for number, line in enumerate(handle, start=1):
        fields = FIELD_SEPARATORS.split(line.strip(" \t\n\v\f\r"))
        if fields == [""] or fields[0].startswith("#"):
            continue
        if len(fields) < expected or (len(fields) > expected and not more_ignored):
            raise InputError(f"{name}: line {number}: {len(fields)} fields, expected "
                             f"{'at least ' if more_ignored else ''}{expected} ({layout})")
        yield number, fields[:expected]


def trec_score(text: str, name: str, number: int) -> float:
    """A run's score field as a float64, read whole: a plain decimal number (``PLAIN_DECIMAL``), finite.

    Python's ``float`` would read ``1_5`` as 15 and ``nan``; trec_eval's
    ``atof`` reads ``1_5`` as 1 and ``0.5abc`` as 0.5. Neither is a score
    anyone meant, so each is an input error naming the file and line.
    """
    if not PLAIN_DECIMAL.fullmatch(text):
        if text.lower().lstrip("+-") in ("nan", "inf", "infinity"):
            raise InputError(f"{name}: line {number}, field score: {text!r} is not a finite number")
        raise InputError(f"{name}: line {number}, field score: {text!r} is not a plain decimal number "
                         "(like 2.5, -3 or 1e-05)")
    score = float(text)  # correctly rounded to the nearest double, as glibc's strtod/atof rounds
    if not math.isfinite(score):
        raise InputError(f"{name}: line {number}, field score: {text!r} is not a finite number "
                         "(beyond float64's range)")
    return score


def read_trec(qrels_path, *, queries=None, gallery=None, dataset=None,
              storage_options: Mapping | None = None) -> tuple[dict[str, np.ndarray], dict]:
    """TREC qrels against query/gallery id lists, or against an existing dataset's keys."""
    arrays: dict[str, np.ndarray] = {}
    attrs: dict = {}
    if dataset is not None:
        if queries is not None or gallery is not None:
            raise InputError("--dataset: give either --dataset or --queries/--gallery, not both")
        group = ds.open_dataset(dataset, storage_options)
        for name in ("query/key", "gallery/key"):
            if not ds.has(group, name):
                raise InputError(f"dataset {dataset}: {name} missing (needed to match TREC ids; "
                                 "give --queries and --gallery instead)")
        for side in ("query", "gallery", "ranking"):
            if side in group:
                for leaf, _ in sorted(ds.member_group(group, side).arrays()):
                    arrays[f"{side}/{leaf}"] = ds.read(group, f"{side}/{leaf}")
        attrs = {k: v for k, v in ds.dataset_attributes(group).items() if k != "version"}
        qids = [str(k) for k in arrays["query/key"]]
        gids = [str(k) for k in arrays["gallery/key"]]
        check_unique(qids, f"dataset {dataset}: query/key")
        check_unique(gids, f"dataset {dataset}: gallery/key")
        qsource, gsource = f"dataset {dataset} query/key", f"dataset {dataset} gallery/key"
    else:
        if queries is None or gallery is None:
            raise InputError("trec: give --queries FILE and --gallery FILE (one id per line), "
                             "or --dataset DATASET")
        qids, gids = _read_ids(queries), _read_ids(gallery)
        arrays["query/key"] = np.asarray(qids, dtype=object)
        arrays["gallery/key"] = np.asarray(gids, dtype=object)
        qsource, gsource = str(queries), str(gallery)
    qpos = {q: i for i, q in enumerate(qids)}
    gpos = {g: i for i, g in enumerate(gids)}

    name = str(qrels_path)
    rows: list[tuple[int, int, int, int, str]] = []  # (line, query, item, rel, docid), in the file's order
    skipped: dict[str, int] = {}  # judged query ids absent from the ids -> first line
    for qid, judgements in _read_trec_qrels(qrels_path).items():
        if qid not in qpos:  # trec_eval too evaluates only queries that have results
            skipped[qid] = min(number for _, number in judgements.values())
            continue
        rows += [(number, qpos[qid], gpos.get(docid, -1), rel, docid) for docid, (rel, number) in judgements.items()]
    rows.sort()
    unknown = [r for r in rows if r[2] < 0]
    if unknown:  # the first in the file
        number, docid = unknown[0][0], unknown[0][4]
        raise InputError(f"{name}: line {number}, field docid: unknown document {docid!r} (not in {gsource})")
    if not rows:
        raise InputError(f"{name}: no judgements for the queries of {qsource}")
    arrays["qrels/query"] = np.asarray([r[1] for r in rows], dtype=np.int64)
    arrays["qrels/item"] = np.asarray([r[2] for r in rows], dtype=np.int64)
    arrays["qrels/rel"] = np.asarray([r[3] for r in rows], dtype=np.int8)
    skipped = dict(sorted(skipped.items(), key=lambda item: item[1]))
    warnings = [_skipped_queries(name, skipped, f"not in {qsource}")] if skipped else []
    return arrays, {**attrs, "protocol": "qrels", WARNINGS: warnings}


def _open_text(path):
    """A TREC file for reading; lines end at ``\\n`` only, as trec_eval reads them (a ``\\r`` is whitespace)."""
    name = str(path)
    if not os.path.isfile(path):
        raise InputError(f"{name}: no such file")
    return open(path, encoding="utf-8", newline="\n")


def _read_trec_qrels(path) -> dict[str, dict[str, tuple[int, int]]]:
    """qid -> docno -> (qrels/rel, line) from a TREC qrels file (``qid iter docno grade``)."""
    name = str(path)
    judged: dict[str, dict[str, tuple[int, int]]] = {}
    try:
        with _open_text(path) as handle:
            for number, fields in trec_records(handle, name, "qid iter docno rel"):
                qid, _, docno, grade = fields
                if not PLAIN_INTEGER.fullmatch(grade):  # int() would read 0_1 as 1, trec_eval's atol as 0
                    raise InputError(f"{name}: line {number}, field rel: {grade!r} is not an integer")
                rel = trec_relevance(int(grade))
                if rel > MAX_GRADE:
                    raise InputError(f"{name}: line {number}, field rel: grade {grade} is above {MAX_GRADE}")
                seen = judged.setdefault(qid, {})
                if docno in seen and seen[docno][0] != rel:
                    raise InputError(f"{name}: line {number}, field rel: ({qid}, {docno}) judged {grade} here "
                                     f"but differently on line {seen[docno][1]}")
                seen.setdefault(docno, (rel, number))
    except UnicodeDecodeError as exc:
        raise InputError(f"{name}: not UTF-8 text ({exc})") from None
    if not judged:
        raise InputError(f"{name}: no judgements")
    return judged


def _read_trec_lines(path) -> dict[str, list[tuple[str, float, int]]]:
    """qid -> [(docno, score, line), ...] in file order, from ``qid Q0 docno rank score tag`` lines.

    The rank field is ignored, as trec_eval ignores it, and so is every field
    after the sixth (trec_eval's ``results.trunc`` has nine). The score is
    read whole as a float64 (``trec_score``). A docno listed twice for one
    query is an error naming both lines: trec_eval refuses such a run too,
    and counting it twice would count a hit twice.
    """
    name = str(path)
    runs: dict[str, list[tuple[str, float, int]]] = {}
    first_line: dict[tuple[str, str], int] = {}
    try:
        with _open_text(path) as handle:
            for number, fields in trec_records(handle, name, "qid Q0 docno rank score tag", more_ignored=True):
                qid, _, docno, _, score_text, _ = fields
                score = trec_score(score_text, name, number)
                earlier = first_line.setdefault((qid, docno), number)
                if earlier != number:
                    raise InputError(f"{name}: line {number}, field docno: {docno!r} listed twice for query "
                                     f"{qid!r} (also line {earlier}); each document may appear once per query")
                runs.setdefault(qid, []).append((docno, score, number))
    except UnicodeDecodeError as exc:
        raise InputError(f"{name}: not UTF-8 text ({exc})") from None
    if not runs:
        raise InputError(f"{name}: no results")
    return runs


def trec_order(results: list[tuple[str, float, int]], order: str) -> list[tuple[str, float, int]]:
    """One query's results best first.

    ``score``: score descending (exact ties keep the file order; equal scores,
    compared as the float64 values read, are tie groups that ``--ties``
    orders at evaluation). ``trec_eval``:
    score descending, equal scores by docno descending (byte order), which is
    trec_eval's own sort, so its numbers come out exactly.
    """
    if order == "trec_eval":
        by_docno = sorted(results, key=lambda r: r[0].encode(), reverse=True)
        return sorted(by_docno, key=lambda r: -r[1])
    return sorted(results, key=lambda r: -r[1])


def read_trec_run(run_path, *, qrels=None, order: str = "score") -> tuple[dict[str, np.ndarray], dict]:
    """A TREC run file plus its qrels as precomputed rankings with TREC judgements (protocol qrels)."""
    if qrels is None:
        raise InputError("trec-run: --qrels FILE is required (qid iter docno rel)")
    if order not in ("score", "trec_eval"):
        raise InputError(f"--order: {order!r} is not score or trec_eval")
    judged = _read_trec_qrels(qrels)
    runs = _read_trec_lines(run_path)
    # trec_eval evaluates the queries that have both results and judgements
    qids = sorted(q for q in runs if q in judged)
    if not qids:
        raise InputError(f"{str(run_path)}: no query of the run is judged in {str(qrels)}")
    warnings = []
    unjudged = {q: runs[q][0][2] for q in runs if q not in judged}
    if unjudged:
        warnings.append(_skipped_queries(str(run_path), unjudged, f"without judgements in {str(qrels)}")
                        .replace("judged queries", "queries"))
    no_results = {q: min(n for _, n in judged[q].values()) for q in judged if q not in runs}
    if no_results:
        warnings.append(_skipped_queries(str(qrels), no_results, f"without results in {str(run_path)}"))
    ranked = {q: trec_order(runs[q], order) for q in qids}
    gids = sorted({d for q in qids for d, _, _ in ranked[q]} | {d for q in qids for d in judged[q]})
    gpos = {g: i for i, g in enumerate(gids)}
    k = max(len(ranked[q]) for q in qids)
    item = np.full((len(qids), k), -1, dtype=np.int64)
    score = np.full((len(qids), k), np.nan, dtype=np.float64)  # every score as read: none may merge into a tie
    for i, q in enumerate(qids):
        item[i, :len(ranked[q])] = [gpos[d] for d, _, _ in ranked[q]]
        score[i, :len(ranked[q])] = [s for _, s, _ in ranked[q]]
    pairs = [(i, gpos[d], rel) for i, q in enumerate(qids) for d, (rel, _) in sorted(judged[q].items())]
    arrays = {
        "query/key": np.asarray(qids, dtype=object), "gallery/key": np.asarray(gids, dtype=object),
        "ranking/item": item,
        "qrels/query": np.asarray([p[0] for p in pairs], dtype=np.int64),
        "qrels/item": np.asarray([p[1] for p in pairs], dtype=np.int64),
        "qrels/rel": np.asarray([p[2] for p in pairs], dtype=np.int8),
    }
    if order == "score":
        arrays["ranking/score"] = score
    return arrays, {"protocol": "qrels", "trec_order": order, WARNINGS: warnings}
