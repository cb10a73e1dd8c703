"""``trec`` and ``trec-run``: TREC qrels against id lists or a dataset, and TREC run files with their qrels."""
from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from evalcore.core import result_lists
from evalcore.core.protocols.qrels import IN_POOL, MAX_GRADE
from evalcore.errors import InputError, OptionError, foreign_reason, input_error, mention
from evalcore.io import dataset as ds
from evalcore.io import progress
from evalcore.io.importers import trec_scan
from evalcore.io.importers.checks import WARNINGS, check_unique
from evalcore.types import LIST_ITEMS, LIST_SCORES


def _read_ids(path) -> list[str]:
    """One id per line; the line order is the row order (blank lines only at the end)."""
    name = str(path)
    if not os.path.isfile(path):
        raise input_error(name, "no such file")
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise input_error(name, f"cannot be read ({foreign_reason(exc)})") from None
    while lines and not lines[-1].strip():
        lines.pop()
    ids = []
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        ident = line.strip()
        if not ident:
            raise input_error(name, f"line {number}, field id: empty line (one id per line; "
                             "the line order is the row order)")
        if len(ident.split()) > 1:
            raise input_error(name, f"line {number}, field id: {ident!r} contains whitespace")
        if ident in seen:
            raise input_error(name, f"line {number}, field id: duplicate id {ident!r} (also line {seen[ident]})")
        seen[ident] = number
        ids.append(ident)
    if not ids:
        raise input_error(name, "no ids")
    return ids


def trec_relevance(grade: int) -> int:
    """A TREC judgement as qrels/rel: grade >= 0 -> that grade (>= 1 relevant with gain = grade, 0 judged not
    relevant); grade < 0 -> IN_POOL (-2).

    trec_eval reads a negative grade as "in the pool, not judged": never relevant, kept in its place in the
    ranking, and not a judged non-relevant document (bpref leaves it out). Neither 0 (judged) nor junk (-1,
    removed from the ranking) says that, hence a code of its own.
    """
    return int(grade) if grade >= 0 else IN_POOL


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


def trec_records(handle, name: str, layout: str, *, more_ignored: bool = False, start: int = 1):
    """(line number, fields) of a whitespace-separated TREC file, split where trec_eval splits.

    Blank lines and lines whose first field starts with ``#`` are skipped. A
    line with fewer fields than ``layout`` names is an input error; so is one
    with more, unless ``more_ignored`` (a run file: trec_eval ignores
    everything after the sixth field), where only the first ones come back.
    """
    expected = len(layout.split())
    for number, line in enumerate(handle, start=start):
        fields = FIELD_SEPARATORS.split(line.strip(" \t\n\v\f\r"))
        if fields == [""] or fields[0].startswith("#"):
            continue
        if len(fields) < expected or (len(fields) > expected and not more_ignored):
            raise input_error(name, f"line {number}: {len(fields)} fields, expected "
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
            raise input_error(name, f"line {number}, field score: {text!r} is not a finite number")
        raise input_error(name, f"line {number}, field score: {text!r} is not a plain decimal number "
                         "(like 2.5, -3 or 1e-05)")
    score = float(text)  # correctly rounded to the nearest double, as glibc's strtod/atof rounds
    if not math.isfinite(score):
        raise input_error(name, f"line {number}, field score: {text!r} is not a finite number "
                         "(beyond float64's range)")
    return score


def read_trec(qrels_path, *, queries=None, gallery=None, dataset=None,
              storage_options: Mapping | None = None) -> tuple[dict[str, np.ndarray], dict]:
    """TREC qrels against query/gallery id lists, or against an existing dataset's keys."""
    arrays: dict[str, np.ndarray] = {}
    attrs: dict = {}
    if dataset is not None:
        if queries is not None or gallery is not None:
            raise OptionError("--dataset", "give either " + mention("--dataset") + " or " + mention("--queries")
                              + "/" + mention("--gallery") + ", not both")
        group = ds.open_dataset(dataset, storage_options)
        for name in ("query/key", "gallery/key"):
            if not ds.has(group, name):
                raise InputError(f"dataset {dataset}: {name} missing (needed to match TREC ids; "
                                 "give " + mention("--queries") + " and " + mention("--gallery") + " instead)")
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
            raise OptionError("trec", "give " + mention("--queries") + " FILE and " + mention("--gallery")
                              + " FILE (one id per line), "
                             "or " + mention("--dataset") + " DATASET")
        qids, gids = _read_ids(queries), _read_ids(gallery)
        arrays["query/key"] = np.asarray(qids, dtype=object)
        arrays["gallery/key"] = np.asarray(gids, dtype=object)
        qsource, gsource = str(queries), str(gallery)
    name = str(qrels_path)
    judged = read_qrels_lines(qrels_path)
    key_pos = _positions(judged.qkeys, qids)
    qpos = key_pos[judged.qcode]
    gpos = _positions(judged.dkeys, gids)[judged.dcode]
    skipped = _first_lines(judged, key_pos < 0)  # trec_eval too evaluates only queries that have results
    kept = qpos >= 0  # judged's rows are in file order: the order of the qrels arrays
    unknown = np.flatnonzero(kept & (gpos < 0))
    if unknown.size:  # the first in the file
        row = int(unknown[0])
        assert judged.line is not None
        raise input_error(name, f"line {judged.line[row]}, field docid: unknown document "
                         f"{judged.dkeys[int(judged.dcode[row])].as_py()!r} (not in {gsource})")
    if not kept.any():
        raise input_error(name, f"no judgements for the queries of {qsource}")
    arrays["qrels/query"] = qpos[kept].astype(np.int64)
    arrays["qrels/item"] = gpos[kept].astype(np.int64)
    arrays["qrels/rel"] = judged.value[kept]
    warnings = [_skipped_queries(name, skipped, f"not in {qsource}")] if skipped else []
    return arrays, {**attrs, "protocol": "qrels", WARNINGS: warnings}


#: bytes read and tokenised at a time: what is held of the file stays far below its size in memory
PIECE_BYTES = 1 << 24
#: pieces whose token arrays exist at once (``_tokenised``): the one being read, the one the caller holds, one spare
SPAN_RING = 3


@dataclass(frozen=True)
class TrecLines:
    """The kept lines of a TREC run or qrels file as columns, one entry a line in file order.

    ``qkeys``/``dkeys`` hold each distinct qid/docno once (``qkeys`` sorted
    by code point, UTF-8 byte order, as Python sorts str; ``dkeys`` in no set
    order); ``qcode``/``dcode`` index them. ``value`` is the score (float64, run) or ``qrels/rel`` (int8,
    qrels); ``qline`` the 1-based line each qid first appears on; ``line`` each entry's line (qrels; None
    for a run, whose line numbers only error messages need, found again then).
    """

    qkeys: pa.Array
    qcode: np.ndarray
    dkeys: pa.Array
    dcode: np.ndarray
    value: np.ndarray
    qline: np.ndarray
    line: np.ndarray | None = None


def _utf8_error(exc: UnicodeDecodeError, offset: int) -> str:
    """What decoding the whole file would have said, from the error's fields (encoding, positions, reason): the
    positions shifted by the piece's ``offset``."""
    start, end = exc.start + offset, exc.end + offset
    if exc.end - exc.start == 1:
        return f"'{exc.encoding}' codec can't decode byte 0x{exc.object[exc.start]:02x} in position {start}: " \
               f"{exc.reason}"
    return f"'{exc.encoding}' codec can't decode bytes in position {start}-{end - 1}: {exc.reason}"


def _pieces(path, piece_bytes: int):
    """(byte offset, uint8 array) of a file read ``piece_bytes`` at a time, each cut after its last ``\\n``
    (the rest goes with the next piece; a piece without one runs on to the next ``\\n`` or the end).

    Every piece is UTF-8 (checked only when a byte above 127 is there; a
    piece starts after a ``\\n``, so the pieces are UTF-8 exactly when the file is).
    Read straight into the array the piece is a view of: bytes joined to the
    carried rest and then sliced cost two more copies (3.6 GB: 2.3 s, now 0.6 s).
    """
    name = str(path)
    if not os.path.isfile(path):
        raise input_error(name, "no such file")
    offset, carry = 0, np.zeros(0, dtype=np.uint8)
    with open(path, "rb", buffering=0) as handle:
        progress.expect("reading", os.fstat(handle.fileno()).st_size)
        while True:
            data = np.empty(carry.size + piece_bytes, dtype=np.uint8)
            data[:carry.size] = carry
            got = handle.readinto(data.data[carry.size:])
            progress.advance("reading", got)
            end = carry.size + got
            if not end:
                return
            cut = trec_scan.last_newline(data[:end]) + 1 if got else end
            if not cut:
                carry = data[:end]
                continue
            piece, carry = data[:cut], data[cut:end]
            if piece.max() > 127:
                try:
                    piece.tobytes().decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise input_error(name, f"not UTF-8 text ({_utf8_error(exc, offset)})") from None
            yield offset, piece
            offset += cut


@dataclass
class _Scan:
    """What ``_scan_file`` found: the codes of each kept line, the key tables, the first bad line or None."""

    qcode: np.ndarray
    dcode: np.ndarray
    line: np.ndarray | None
    qtable: trec_scan.KeyTable
    dtable: trec_scan.KeyTable
    bad: int | None


#: regions of the docno table (``trec_scan.KeyTable``): a million docnos make regions of ~0.5 MiB
DOCNO_PARTS = 128


@dataclass
class _Tokens:
    """One piece tokenised (``trec_scan.tokenize_piece``): its bytes, the kept lines' field spans and line
    numbers, the row of its first kept line, and the line of a wrong field count there (-1: none)."""

    row: int
    buf: np.ndarray
    spans: np.ndarray
    lines: np.ndarray
    bad: int


def _tokenised(path, fields: int, wanted: tuple[int, int, int], more_ignored: bool, qtable: trec_scan.KeyTable,
               qcode: np.ndarray):
    """The pieces of a file tokenised, each piece's qids coded into ``qcode`` (``qtable`` sees the pieces in
    file order, so the codes are in first-seen order). Nothing after the piece with a wrong field count:
    the rest is only read, for the UTF-8 check (a decoding error is reported first, as before)."""
    row, line, bad = 0, 1, False
    # the span and line arrays are reused, a ring of SPAN_RING: fresh ones (~80 MB a 16 MiB piece, mapped
    # anew each time) cost the first touch of every page written, ~0.5 GB a 373 MB run on this VM. The
    # caller holds a piece while the next is made (``_ahead``), so two pieces' arrays are in use at most.
    ring: list[tuple[np.ndarray, np.ndarray]] = []
    for index, (_, buf) in enumerate(_pieces(path, PIECE_BYTES)):
        if bad:
            continue
        capacity = buf.size // (2 * fields - 1) + 1
        slot = index % SPAN_RING
        if slot == len(ring) or ring[slot][1].size < capacity:  # not made yet, or too small for this piece
            scratch = (np.empty((6, capacity), dtype=np.int64), np.empty(capacity, dtype=np.int64))
            ring[slot:slot + 1] = [scratch]
        spans, piece_lines = ring[slot]
        n, bad_line, next_line = trec_scan.tokenize_piece(buf, fields, more_ignored, np.array(wanted), line, spans,
                                                          piece_lines)
        spans, piece_lines = spans[:, :n], piece_lines[:n]
        qtable.reserve(n, int((spans[1] - spans[0]).sum()))
        qtable.count, _ = trec_scan.encode_keys(buf, spans[0], spans[1], piece_lines, qcode[row:row + n],
                                                qtable.slots, qtable.offsets, qtable.first_line, qtable.arena,
                                                qtable.count)
        yield _Tokens(row, buf, spans, piece_lines, int(bad_line))
        row, line, bad = row + n, int(next_line), bad_line >= 0


_DONE = object()


def _ahead(items):
    """``items`` with the next one made on a second thread while the caller works on this one: the compiled
    passes release the GIL, so the two use two cores. Its exceptions come out where its items would."""
    it = iter(items)
    with ThreadPoolExecutor(1) as pool:
        coming = pool.submit(next, it, _DONE)
        while (item := coming.result()) is not _DONE:
            coming = pool.submit(next, it, _DONE)
            yield item


def _scan_file(path, layout: str, wanted: tuple[int, int, int], *, more_ignored: bool, keep_lines: bool,
               on_values) -> _Scan:
    """Tokenise a TREC file piece by piece (``trec_scan``); ``on_values(first row, tokens)`` gets each
    piece's value fields as an Arrow binary array. Stops at the first line with a wrong field count
    (the rest of the file is still checked to be UTF-8). A second thread reads, tokenises and codes the
    qids of the next piece (``_tokenised``) while this one codes the docnos and values of the last, so
    each table still sees the pieces in file order."""
    fields = len(layout.split())
    size = os.path.getsize(path) if os.path.isfile(path) else 0
    most = (size + 1) // (2 * fields) + 1  # a kept line holds at least 2 * fields - 1 bytes and its \n
    # pages are only touched as rows are written: the bound costs address space, not memory
    qcode, dcode = np.empty(most, dtype=np.int32), np.empty(most, dtype=np.int32)
    lines = np.empty(most if keep_lines else 0, dtype=np.int64)
    qtable, dtable = trec_scan.KeyTable(), trec_scan.KeyTable(1 << 9, 1 << 20, parts=DOCNO_PARTS)
    bad, row = None, 0
    for piece in _ahead(_tokenised(path, fields, wanted, more_ignored, qtable, qcode)):
        buf, spans, row, n = piece.buf, piece.spans, piece.row, piece.spans.shape[1]
        # docnos: hashed, then looked up one cache-sized region of the table at a time
        trec_scan.code_keys(dtable, buf, spans[2], spans[3], piece.lines, dcode[row:row + n])
        if keep_lines:
            lines[row:row + n] = piece.lines
        offsets, values = np.empty(n + 1, dtype=np.int64), np.empty(buf.size, dtype=np.uint8)
        trec_scan.gather_tokens(buf, spans[4], spans[5], offsets, values)
        on_values(row, pa.LargeBinaryArray.from_buffers(pa.large_binary(), n,
                                                        [None, pa.py_buffer(offsets), pa.py_buffer(values)]))
        row += n
        if piece.bad >= 0:
            bad = piece.bad
    return _Scan(qcode[:row], dcode[:row], lines[:row] if keep_lines else None, qtable, dtable, bad)


def _keys(table: trec_scan.KeyTable) -> pa.Array:
    """The keys of a table as UTF-8 strings, in code order."""
    offsets, data = table.keys()
    return pa.LargeBinaryArray.from_buffers(pa.large_binary(), table.count,
                                            [None, pa.py_buffer(offsets), pa.py_buffer(data)]).cast(pa.large_string())


def byte_order(strings: pa.Array) -> np.ndarray:
    """Indices that sort ``strings`` (no nulls) by their UTF-8 bytes, as ``pc.sort_indices`` does.

    Strings of at most ``trec_scan.PACKED_BYTES`` bytes (most qids and docnos) become two 64-bit words each
    and one lexsort of those orders them: 2M ten-byte docnos in ~0.27 s against Arrow's ~0.55 s.
    """
    strings = strings.cast(pa.large_string()) if strings.type != pa.large_string() else strings
    n = len(strings)
    offsets = np.frombuffer(strings.buffers()[1], dtype=np.int64)[strings.offset:strings.offset + n + 1]
    if not n or int(np.diff(offsets).max()) > trec_scan.PACKED_BYTES:
        return pc.sort_indices(strings).to_numpy()
    data = np.frombuffer(strings.buffers()[2], dtype=np.uint8)
    high, low = np.empty(n, dtype=np.uint64), np.empty(n, dtype=np.uint64)
    trec_scan.packed_keys(offsets, data, high, low)
    return np.lexsort((low, high))


def _sorted_keys(table: trec_scan.KeyTable, codes: np.ndarray) -> tuple[pa.Array, np.ndarray, np.ndarray]:
    """(keys sorted by bytes, ``codes`` recoded in place to index them, each sorted key's first line); in
    place: a recoded copy of a 100M-line run's codes is 400 MB more memory to touch."""
    keys = _keys(table)
    order = byte_order(keys)
    rank = np.empty(order.size, dtype=np.int32)
    rank[order] = np.arange(order.size, dtype=np.int32)
    trec_scan.recode(codes, rank)
    return keys.take(pa.array(order)), codes, table.first_line[:table.count][order]


def _line_numbers(path, layout: str, more_ignored: bool, rows) -> np.ndarray:
    """The line numbers of kept lines ``rows`` (0-based, in file order): the error path, which reads the
    file again (``trec_scan.kept_lines``) rather than keeping a line number for every row."""
    rows = np.asarray(rows, dtype=np.int64)
    order = np.argsort(rows, kind="stable")
    found = np.zeros(rows.size, dtype=np.int64)
    row, line, fields = 0, 1, len(layout.split())
    for _, piece in _pieces(path, PIECE_BYTES):
        row, line = trec_scan.kept_lines(piece, line, fields, more_ignored, rows[order], row, found)
        if row > rows.max():
            break
    out = np.empty_like(found)
    out[order] = found
    return out


def _line_text(path, number: int) -> str:
    """Line ``number`` (1-based, lines end at ``\\n``) of an already validated UTF-8 file: the error path only."""
    line = 1
    for _, array in _pieces(path, PIECE_BYTES):
        piece = array.tobytes()
        lines_here = piece.count(b"\n")
        if number < line + lines_here or not piece.endswith(b"\n"):
            return piece.split(b"\n")[number - line].decode("utf-8")
        line += lines_here
    return ""


def _first_problem(candidates) -> int | None:
    """The smallest line number among arrays of line numbers (None when all are empty)."""
    found = [int(c.min()) for c in candidates if c.size]
    return min(found) if found else None


def _raise_at(path, number: int, layout: str, more_ignored: bool, check) -> None:
    """Re-read line ``number`` alone with the per-line rules (``trec_records`` and ``check``), which raise
    their message if it breaks one; returns if it does not (the problem is then one across lines)."""
    name = str(path)
    for n, fields in trec_records([_line_text(path, number)], name, layout, more_ignored=more_ignored, start=number):
        check(fields, name, n)


def _duplicates(qcode: np.ndarray, dcode: np.ndarray, ndocs: int) -> tuple[np.ndarray, np.ndarray]:
    """(row of each repeat of a (qid, docno) pair, row of that pair's first occurrence); rows in file order."""
    pair = qcode.astype(np.int64) * max(ndocs, 1) + dcode
    ordered = np.sort(pair)
    if not (ordered[1:] == ordered[:-1]).any():  # the usual file has no repeat: no stable argsort needed
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    order = np.argsort(pair, kind="stable")
    repeat = np.flatnonzero(pair[order][1:] == pair[order][:-1]) + 1
    group_first = np.maximum.accumulate(np.where(np.diff(pair[order], prepend=-1) != 0, np.arange(pair.size), 0))
    return order[repeat], order[group_first[repeat]]


def _matches(text: pa.Array | pa.ChunkedArray, pattern: re.Pattern) -> np.ndarray:
    """Whether each value matches ``pattern`` whole (RE2, the same syntax as the Python pattern here)."""
    return pc.match_substring_regex(text, f"^(?:{pattern.pattern})$").to_numpy(zero_copy_only=False).astype(bool)


def _byte_set(allowed: bytes) -> np.ndarray:
    table = np.zeros(256, dtype=bool)
    table[np.frombuffer(allowed, dtype=np.uint8)] = True
    return table


#: the bytes plain decimal numbers and integers are made of (values of other bytes go to the regex)
DECIMAL_BYTES, INTEGER_BYTES = _byte_set(b"0123456789.eE+-"), _byte_set(b"0123456789-")


def _plain_numbers(text: pa.Array, pattern: re.Pattern, allowed: np.ndarray, kind: pa.DataType) -> np.ndarray:
    """Each value parsed as ``kind`` (returned as float64), NaN where it does not match ``pattern`` whole.

    The fast path: when every byte is ``allowed`` and Arrow parses every value
    (its grammar on those bytes is the pattern's: sign, digits, point,
    exponent; floats correctly rounded), no value needs the regex. Otherwise
    each value is matched (RE2) and only the matching ones parsed.
    """
    if len(text) == 0:
        return np.zeros(0, dtype=np.float64)
    offsets = np.frombuffer(text.buffers()[1], dtype=np.int64)[text.offset:text.offset + len(text) + 1]
    data = np.frombuffer(text.buffers()[2], dtype=np.uint8)[offsets[0]:offsets[-1]]
    if allowed[data].all():
        try:
            return text.cast(kind).cast(pa.float64()).to_numpy(zero_copy_only=False)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
    plain = _matches(text, pattern)
    parsed = pc.if_else(pa.array(plain), text, "0").cast(kind).cast(pa.float64()).to_numpy(zero_copy_only=False)
    return np.where(plain, parsed, np.nan)


def _check_score(fields: list[str], name: str, number: int) -> None:
    trec_score(fields[4], name, number)


RUN_LAYOUT, QRELS_LAYOUT = "qid Q0 docno rank score tag", "qid iter docno rel"


def _first_row(candidates) -> int | None:
    """The smallest row among arrays of rows (None when all are empty)."""
    found = [int(c.min()) for c in candidates if c.size]
    return min(found) if found else None


def read_run_lines(path) -> TrecLines:
    """A TREC run (``qid Q0 docno rank score tag``) as columns; scores read whole as float64 (``trec_score``).

    The rank field is ignored, as trec_eval ignores it, and so is every field
    after the sixth (trec_eval's ``results.trunc`` has nine). A docno listed
    twice for one query is an error naming both lines: trec_eval refuses such
    a run too, and counting it twice would count a hit twice. The first
    problem in the file is reported, found again by the per-line rules.
    Held per line: two int32 codes and the float64 score.
    """
    name, layout = str(path), RUN_LAYOUT
    fields = len(layout.split())
    most = (os.path.getsize(path) + 1) // (2 * fields) + 1 if os.path.isfile(path) else 0
    score = np.empty(most, dtype=np.float64)   # touched only as far as rows are read
    not_finite: list[int] = []   # the first row whose score is not a plain number (NaN) or is infinite

    def scores(first_row: int, tokens: pa.Array) -> None:
        values = _plain_numbers(tokens.cast(pa.large_string()), PLAIN_DECIMAL, DECIMAL_BYTES, pa.float64())
        score[first_row:first_row + len(tokens)] = values
        if not not_finite:   # checked a piece at a time: a mask of the whole run is memory to touch
            not_finite.extend(first_row + np.flatnonzero(~np.isfinite(values))[:1])

    scan = _scan_file(path, layout, (0, 2, 4), more_ignored=True, keep_lines=False, on_values=scores)
    score = score[:scan.qcode.size]
    qkeys, qcode, qline = _sorted_keys(scan.qtable, scan.qcode)
    dkeys, dcode = _keys(scan.dtable), scan.dcode
    repeat, earlier = (_duplicates(qcode, dcode, len(dkeys))
                       if result_lists.may_repeat(qcode, dcode, len(qkeys), len(dkeys))
                       else (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)))
    first = _first_row([np.array(not_finite, dtype=np.int64), repeat])
    problem = scan.bad
    if first is not None:
        at_row = int(_line_numbers(path, layout, True, [first])[0])
        problem = at_row if problem is None else min(problem, at_row)
    if problem is not None:
        _raise_at(path, problem, layout, True, _check_score)
        at = int(np.flatnonzero(repeat == first)[0])
        row, before = repeat[at], earlier[at]
        raise input_error(name, f"line {problem}, field docno: {dkeys[int(dcode[row])].as_py()!r} listed twice "
                         f"for query {qkeys[int(qcode[row])].as_py()!r} (also line "
                         f"{int(_line_numbers(path, layout, True, [before])[0])}); each document may appear once "
                         "per query")
    if not qcode.size:
        raise input_error(name, "no results")
    return TrecLines(qkeys, qcode, dkeys, dcode, score, qline)


def _check_grade(fields: list[str], name: str, number: int) -> None:
    grade = fields[3]
    if not PLAIN_INTEGER.fullmatch(grade):  # int() would read 0_1 as 1, trec_eval's atol as 0
        raise input_error(name, f"line {number}, field rel: {grade!r} is not an integer")
    if trec_relevance(int(grade)) > MAX_GRADE:
        raise input_error(name, f"line {number}, field rel: grade {grade} is above {MAX_GRADE}")


def read_qrels_lines(path) -> TrecLines:
    """A TREC qrels file (``qid iter docno grade``) as columns, ``value`` the qrels/rel (``trec_relevance``).

    A pair judged twice alike keeps its first line; judged differently it is
    an error naming both lines. The first problem in the file is reported.
    """
    name, layout = str(path), QRELS_LAYOUT
    tokens: list[pa.Array] = []
    scan = _scan_file(path, layout, (0, 2, 3), more_ignored=False, keep_lines=True,
                      on_values=lambda _, values: tokens.append(values))
    assert scan.line is not None
    line, bad = scan.line, scan.bad
    text = pa.chunked_array(tokens, type=pa.large_binary()).combine_chunks().cast(pa.large_string())
    short = pc.utf8_length(text).to_numpy(zero_copy_only=False) <= 18  # longer: beyond int64, only the sign matters
    parsed = _plain_numbers(text.filter(pa.array(short)), PLAIN_INTEGER, INTEGER_BYTES, pa.int64())
    integer = np.zeros(line.size, dtype=bool)
    integer[short] = ~np.isnan(parsed)
    integer[~short] = _matches(text.filter(pa.array(~short)), PLAIN_INTEGER)
    grade = np.zeros(line.size, dtype=np.int64)
    grade[integer & short] = parsed[~np.isnan(parsed)]
    for row in np.flatnonzero(integer & ~short):  # beyond int64: only its sign matters (0 or too high)
        grade[row] = min(max(int(text[int(row)].as_py()), -1), MAX_GRADE + 1)
    rel = np.where(grade < 0, IN_POOL, grade)  # trec_relevance, a column at a time
    qkeys, qcode, qline = _sorted_keys(scan.qtable, scan.qcode)
    dkeys, dcode = _keys(scan.dtable), scan.dcode
    repeat, earlier = (_duplicates(qcode, dcode, len(dkeys))
                       if result_lists.may_repeat(qcode, dcode, len(qkeys), len(dkeys))
                       else (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)))
    conflict = rel[repeat] != rel[earlier]
    per_line = [line[~integer], line[rel > MAX_GRADE]]
    problem = _first_problem([np.array([bad or 0])[:1 if bad else 0], *per_line, line[repeat[conflict]]])
    if problem is not None:
        _raise_at(path, problem, layout, False, _check_grade)
        at = int(np.flatnonzero(line[repeat[conflict]] == problem)[0])
        row, first = repeat[conflict][at], earlier[conflict][at]
        raise input_error(name, f"line {problem}, field rel: ({qkeys[int(qcode[row])].as_py()}, "
                         f"{dkeys[int(dcode[row])].as_py()}) judged {text[int(row)].as_py()} here "
                         f"but differently on line {line[first]}")
    if not line.size:
        raise input_error(name, "no judgements")
    keep = np.ones(line.size, dtype=bool)
    keep[repeat] = False
    return TrecLines(qkeys, qcode[keep], dkeys, dcode[keep], rel[keep].astype(np.int8), qline, line[keep])


def _positions(keys: pa.Array, ids) -> np.ndarray:
    """Each key's index in ``ids`` (a list or Arrow array of str), -1 where it is not there."""
    value_set = ids if isinstance(ids, pa.Array) else pa.array(list(ids), pa.large_string())
    return pc.index_in(keys, value_set=value_set).fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)


def _sorted_union(a: pa.Array, used_a: np.ndarray, b: pa.Array, used_b: np.ndarray):
    """(the distinct strings of ``a[used_a]`` and ``b[used_b]`` sorted by bytes, each used one's index there
    for ``a`` and ``b``, -1 for the others): one sort of both, equal neighbours merged, instead of a hash set,
    a sort and a hash lookup per side."""
    ia, ib = np.flatnonzero(used_a), np.flatnonzero(used_b)
    both = pa.concat_arrays([a.take(pa.array(ia)), b.take(pa.array(ib))])
    order = byte_order(both)
    ordered = both.take(pa.array(order))
    new = np.ones(len(ordered), dtype=bool)
    if len(ordered) > 1:
        new[1:] = pc.not_equal(ordered.slice(1), ordered.slice(0, len(ordered) - 1)).to_numpy(zero_copy_only=False)
    at = np.empty(len(ordered), dtype=np.int64)
    at[order] = np.cumsum(new) - 1
    pos_a, pos_b = np.full(len(a), -1, dtype=np.int64), np.full(len(b), -1, dtype=np.int64)
    pos_a[ia], pos_b[ib] = at[:ia.size], at[ia.size:]
    return ordered.filter(pa.array(new)), pos_a, pos_b


def _first_lines(lines: TrecLines, keys: np.ndarray) -> dict[str, int]:
    """qid -> its first line, for the selected qids (a bool mask over ``lines.qkeys``), ordered by that line."""
    chosen = np.flatnonzero(keys)   # usually none or few
    first = {lines.qkeys[int(code)].as_py(): int(lines.qline[code]) for code in chosen}
    return dict(sorted(first.items(), key=lambda item: item[1]))


def read_both(run_path, qrels_path) -> tuple[TrecLines, TrecLines]:
    """(qrels, run) read at once: the qrels on a second thread while this one reads the run (the compiled
    passes and Arrow release the GIL). A problem in the qrels is reported first, as when they were read first."""
    with ThreadPoolExecutor(1) as pool:
        judged = pool.submit(read_qrels_lines, qrels_path)
        try:
            runs = read_run_lines(run_path)
        except BaseException:
            judged.result()  # raises the qrels' own problem, if there is one
            raise
        return judged.result(), runs


def pair_order(rows: np.ndarray, items: np.ndarray, n_items: int) -> np.ndarray:
    """The stable order of (row, item) pairs, row first: ``np.lexsort((items, rows))``, as one stable argsort of
    row * n_items + item where that fits in int64 (items in [0, n_items)). Qrels come grouped by query, so the
    one key is nearly sorted: 2M judgements in ~0.03 s, against ~0.36 s for the lexsort."""
    rows, items = np.asarray(rows, dtype=np.int64), np.asarray(items, dtype=np.int64)
    if not rows.size or (int(rows.max()) + 1) * max(n_items, 1) >= 1 << 62:
        return np.lexsort((items, rows))
    return np.argsort(rows * max(n_items, 1) + items, kind="stable")


def read_trec_run(run_path, *, qrels=None, order: str = "score",
                  complete: bool | None = None) -> tuple[dict[str, np.ndarray], dict]:
    """A TREC run file plus its qrels as precomputed rankings with TREC judgements (protocol qrels).

    The queries are those with both results and judgements, sorted by qid
    (``complete``: every judged query, those without results as an empty
    ranking row, trec_eval's ``-c``). ``order`` ``score``: each list by score
    descending, exact ties (equal float64 values) in file order, left to
    ``--ties``; ``trec_eval``: equal scores by docno descending (byte order),
    trec_eval's own sort, and no ``ranking/score``.
    """
    if qrels is None:
        raise InputError("trec-run: " + mention("--qrels") + " FILE is required (qid iter docno rel)")
    if order not in ("score", "trec_eval"):
        raise OptionError("--order", f"{order!r} is not score or trec_eval")
    judged, runs = read_both(run_path, qrels)
    return run_arrays(judged, runs, str(run_path), str(qrels), order=order, complete=complete)


def run_arrays(judged: TrecLines, runs: TrecLines, run_name: str, qrels_name: str, *, order: str = "score",
               complete: bool | None = None) -> tuple[dict[str, np.ndarray], dict]:
    """``read_trec_run``'s arrays from qrels and run columns however they were read (files, or the tables
    and dicts of ``evalcore.io.trec_tables``); ``run_name``/``qrels_name`` name them in messages."""
    run_path, qrels = run_name, qrels_name
    judged_query = _positions(runs.qkeys, judged.qkeys)        # run qid -> judged qid, -1 if unjudged
    in_run = np.zeros(len(judged.qkeys), dtype=bool)
    in_run[judged_query[judged_query >= 0]] = True
    if not in_run.any():
        raise input_error(str(run_path), f"no query of the run is judged in {str(qrels)}")
    chosen = np.ones_like(in_run) if complete else in_run
    query_row = np.where(chosen, np.cumsum(chosen) - 1, -1)   # judged qid -> row of query/key
    warnings = []
    unjudged = _first_lines(runs, judged_query < 0)
    if unjudged:
        warnings.append(_skipped_queries(str(run_path), unjudged, f"without judgements in {str(qrels)}")
                        .replace("judged queries", "queries"))
    no_results = _first_lines(judged, ~chosen)
    if no_results:
        warnings.append(_skipped_queries(str(qrels), no_results, f"without results in {str(run_path)}"))
    run_row = np.where(judged_query >= 0, query_row[judged_query], -1)   # run qid -> ranking row
    qrels_rows = query_row[judged.qcode]
    kept_qrels = qrels_rows >= 0
    used_run = result_lists.used_codes(runs.qcode, runs.dcode, run_row, len(runs.dkeys))
    used_qrels = np.zeros(len(judged.dkeys), dtype=bool)
    used_qrels[judged.dcode[kept_qrels]] = True
    gallery, run_item, qrels_item_of = _sorted_union(runs.dkeys, used_run, judged.dkeys, used_qrels)
    n_queries = int(chosen.sum())
    counts = result_lists.row_counts(runs.qcode, run_row, n_queries)
    ranking_item = np.empty((n_queries, int(counts.max())), dtype=np.int64)   # fill_rows writes every place
    ranking_score = np.empty(ranking_item.shape, dtype=np.float64)  # every score as read: no merged ties
    result_lists.fill_rows(runs.qcode, runs.dcode, runs.value, run_row, run_item,
                           order == "trec_eval", ranking_item, ranking_score)
    del runs  # the rankings hold what is needed of the run
    qrels_query = qrels_rows[kept_qrels]
    qrels_item = qrels_item_of[judged.dcode[kept_qrels]]
    by_pair = pair_order(qrels_query, qrels_item, len(gallery))
    arrays = {
        "query/key": judged.qkeys.filter(pa.array(chosen)).to_numpy(zero_copy_only=False).astype(object),
        "gallery/key": gallery.to_numpy(zero_copy_only=False).astype(object),
        LIST_ITEMS: ranking_item,
        "qrels/query": qrels_query[by_pair].astype(np.int64),
        "qrels/item": qrels_item[by_pair].astype(np.int64),
        "qrels/rel": judged.value[kept_qrels][by_pair].astype(np.int8),
    }
    if order == "score":
        arrays[LIST_SCORES] = ranking_score
    attrs: dict = {"protocol": "qrels", "trec_order": order, WARNINGS: warnings}
    if complete:
        attrs["trec_complete"] = True
    return arrays, attrs
