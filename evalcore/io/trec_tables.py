"""Qrels and runs as users hold them, as the columns the TREC importer reads from files.

The forms taken, for qrels (``{qid: {docid: grade}}``) and runs
(``{qid: {docid: score}}``) alike:

- a mapping of mappings (pytrec_eval's and BEIR's layout), ids as ``str``;
- a pyarrow or pandas table with a query, a document and a grade (or score)
  column under a common name (``QUERY_COLUMNS``, ``DOC_COLUMNS``,
  ``GRADE_COLUMNS``/``SCORE_COLUMNS``), ids as strings or integers;
- a TREC file path (``qid iter docno rel`` / ``qid Q0 docno rank score tag``);
- any other object with ranx's ``to_dict()`` (ranx's ``Qrels`` and ``Run``).

Each becomes ``importers.trec.TrecLines``, then ``trec_arrays`` makes the
same arrays ``evalcore import trec-run`` writes: queries with both results
and judgements (``complete``: every judged one), trec_eval's order (score
descending, equal scores by docno descending), and a grade read as trec_eval
reads it: >= 1 relevant with that gain, 0 judged not relevant, below 0 ->
-2, in the pool but not judged. A score must be a finite number, a grade an
integer of at most ``MAX_GRADE``; a problem is one ``InputError`` naming the
parameter, the query and the document.
"""
from __future__ import annotations

import itertools
import os
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from evalcore.core.protocols.qrels import IN_POOL, MAX_GRADE
from evalcore.errors import foreign_reason, input_error
from evalcore.io.importers import trec as trec_files
from evalcore.io.importers import trec_scan
from evalcore.io.importers.checks import WARNINGS

#: column names read as the query id, the document id, a grade and a score (first found wins; two found is an error)
QUERY_COLUMNS = ("qid", "query_id", "query-id", "query", "q_id", "topic")
DOC_COLUMNS = ("docno", "doc_id", "docid", "doc-id", "corpus-id", "corpus_id", "document", "doc")
GRADE_COLUMNS = ("rel", "relevance", "grade", "label", "score")
SCORE_COLUMNS = ("score", "sim", "similarity")
#: entries held as int32 codes
MAX_ENTRIES = (1 << 31) - 1


def is_path(value) -> bool:
    return isinstance(value, (str, os.PathLike))


def _is_table(value) -> bool:
    """A pyarrow table or a pandas DataFrame (checked by module: pandas need not be installed)."""
    return isinstance(value, pa.Table) or (type(value).__module__.split(".")[0] == "pandas"
                                           and hasattr(value, "columns"))


def as_mapping(value, name: str):
    """A mapping of mappings, a table or a path as given; another object through its ranx ``to_dict()``."""
    if isinstance(value, Mapping) or _is_table(value) or is_path(value):
        return value
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        found = to_dict()
        if isinstance(found, Mapping):
            return found
        raise input_error(name, f"its to_dict() returned {type(found).__name__}, not a mapping "
                         "{query id: {document id: value}}")
    raise input_error(name, f"{type(value).__name__} is not a mapping {{query id: {{document id: value}}}}, "
                     "a pyarrow or pandas table, a TREC file path or an object with ranx's to_dict()")


# --------------------------------------------------------------------------- values


def grades_as_rel(values: np.ndarray, name: str, where) -> np.ndarray:
    """Grades as qrels/rel (int8): g >= 0 -> g, g < 0 -> IN_POOL (-2), trec_eval's reading of a negative grade.

    Integers only (an integral float, as pandas makes of a column with gaps, counts as one); at most
    MAX_GRADE. ``where(i)`` names entry i in the message.
    """
    if values.dtype.kind == "b" or values.dtype.kind not in "iuf":
        bad = _first_not_number(values)
        raise input_error(name, f"grade {_shown(values[bad])!r} of {where(bad)} is not an integer")
    if values.dtype.kind == "f":
        wrong = np.flatnonzero(~np.isfinite(values) | (values != np.round(values)))
        if wrong.size:
            raise input_error(name, f"grade {_shown(values[wrong[0]])!r} of {where(int(wrong[0]))} is not an integer")
    high = np.flatnonzero(values > MAX_GRADE)
    if high.size:
        raise input_error(name, f"grade {_shown(values[high[0]])!r} of {where(int(high[0]))} is above {MAX_GRADE}")
    return np.where(values < 0, IN_POOL, values).astype(np.int8)


def checked_scores(values: np.ndarray, name: str, where) -> np.ndarray:
    """Scores as float64, each finite (a NaN has no place in a ranking; trec_eval would sort it anywhere)."""
    if values.dtype.kind == "b" or values.dtype.kind not in "iuf":
        bad = _first_not_number(values)
        raise input_error(name, f"score {_shown(values[bad])!r} of {where(bad)} is not a number")
    scores = values.astype(np.float64)
    wrong = np.flatnonzero(~np.isfinite(scores))
    if wrong.size:
        raise input_error(name, f"score {_shown(values[wrong[0]])!r} of {where(int(wrong[0]))} is not a finite number")
    return scores


def _shown(value):
    """A value as the user gave it (a Python number, not numpy's repr)."""
    return value.item() if isinstance(value, np.generic) else value


def _first_not_number(values: np.ndarray) -> int:
    """The first entry that is not an int or float (bool counts as neither here); 0 if every one is."""
    for i, v in enumerate(values.tolist() if values.dtype != object else values):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
            return i
        if isinstance(v, int) and not -(1 << 63) <= v < 1 << 63:  # beyond int64: numpy made objects of it
            return i
    return 0


def _number_array(values: list) -> np.ndarray:
    """``values`` as a numeric array when they are numbers, else as objects (for the message)."""
    try:
        array = np.asarray(values)
    except (ValueError, TypeError, OverflowError):
        array = np.empty(len(values), dtype=object)
        array[:] = values
    if array.dtype.kind not in "iufb":
        array = np.empty(len(values), dtype=object)
        array[:] = values
    return array


# --------------------------------------------------------------------------- columns


def _lines(qids: pa.Array, docs: pa.Array, values: np.ndarray) -> trec_files.TrecLines:
    """TrecLines of parallel columns (one entry a row): qids coded in byte order, docnos in first-seen order;
    ``qline``/``line`` count entries from 1 (the messages' "line")."""
    qdict = pc.dictionary_encode(qids).combine_chunks() if isinstance(qids, pa.ChunkedArray) \
        else pc.dictionary_encode(qids)
    ddict = pc.dictionary_encode(docs).combine_chunks() if isinstance(docs, pa.ChunkedArray) \
        else pc.dictionary_encode(docs)
    qkeys, qcode = qdict.dictionary, qdict.indices.to_numpy(zero_copy_only=False).astype(np.int32)
    order = trec_files.byte_order(qkeys)
    rank = np.empty(order.size, dtype=np.int32)
    rank[order] = np.arange(order.size, dtype=np.int32)
    # codes come in first-seen order, so a new query is where the running maximum of the codes grows
    grows = np.ones(qcode.size, dtype=bool)
    grows[1:] = np.diff(np.maximum.accumulate(qcode)) > 0
    first = np.flatnonzero(grows).astype(np.int64)[order] + 1
    qcode = rank[qcode]
    dcode = ddict.indices.to_numpy(zero_copy_only=False).astype(np.int32)
    return trec_files.TrecLines(qkeys.take(pa.array(order)).cast(pa.large_string()), qcode,
                                ddict.dictionary.cast(pa.large_string()), dcode, values, first,
                                np.arange(1, qcode.size + 1, dtype=np.int64))


def _entries(mapping: Mapping, name: str) -> tuple[list, list, list]:
    """(qid of each entry, its docid, its value) of ``{qid: {docid: value}}``, queries with no entry left out."""
    qids, inner = [], []
    total = 0
    for qid, docs in mapping.items():
        if not isinstance(qid, str):
            raise input_error(name, f"query id {qid!r} is {type(qid).__name__}, not str")
        if not isinstance(docs, Mapping):
            raise input_error(name, f"query {qid!r} holds {type(docs).__name__}, not a mapping "
                             "{document id: value}")
        if docs:
            qids.append(qid)
            inner.append(docs)
            total += len(docs)
    if total > MAX_ENTRIES:
        raise input_error(name, f"{total} entries, more than {MAX_ENTRIES}")
    counts = [len(d) for d in inner]
    query = list(itertools.chain.from_iterable(itertools.repeat(q, c) for q, c in zip(qids, counts)))
    docs_ = list(itertools.chain.from_iterable(inner))
    values = list(itertools.chain.from_iterable(d.values() for d in inner))
    return query, docs_, values


def _strings(values: list, name: str, what: str, query: list) -> pa.Array:
    try:
        return pa.array(values, type=pa.large_string())
    except (pa.ArrowTypeError, pa.ArrowInvalid, TypeError):
        bad = next(i for i, v in enumerate(values) if not isinstance(v, str))
        raise input_error(name, f"document id {_shown(values[bad])!r} of query {query[bad]!r} is "
                         f"{type(values[bad]).__name__}, not str") from None


def mapping_lines(mapping: Mapping, name: str, kind: str) -> trec_files.TrecLines:
    """``{qid: {docid: value}}`` as TrecLines; ``kind`` ``qrels`` (values grades) or ``run`` (scores)."""
    fast = _mapping_columns(mapping, name, kind)
    if fast is not None:
        return fast
    query, docs, values = _entries(mapping, name)
    if not query:
        raise input_error(name, f"no {'judgements' if kind == 'qrels' else 'results'}")

    def where(i: int) -> str:
        return f"query {query[i]!r}, document {docs[i]!r}"

    numbers = _number_array(values)
    value = grades_as_rel(numbers, name, where) if kind == "qrels" else checked_scores(numbers, name, where)
    return _lines(pa.array(query, type=pa.large_string()), _strings(docs, name, "document", query), value)


def _mapping_columns(mapping: Mapping, name: str, kind: str) -> trec_files.TrecLines | None:
    """``mapping_lines`` without a Python object per entry: the usual mapping (str ids, float scores or int
    grades) as columns in a few passes over it, each a C loop; None for anything else (an id that is not
    a str, a value of another type, ...), which ``mapping_lines`` then reads entry by entry and reports.

    The same TrecLines as that path: qids coded in byte order (each query is one key of the mapping, its
    entries one run of rows), docnos coded by the file reader's hash table (``trec_scan.code_keys``, codes in
    no set order, as a file's), values checked by the same functions. 10M entries: ~2.5 s, not ~12 s.
    """
    qids, inner = [], []
    for qid, docs in mapping.items():
        if not isinstance(qid, str) or not isinstance(docs, Mapping):
            return None
        if docs:
            qids.append(qid)
            inner.append(docs)
    if not qids:
        return None
    counts = np.fromiter(map(len, inner), dtype=np.int64, count=len(inner))
    offsets = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    total = int(offsets[-1])
    if total > MAX_ENTRIES:
        return None
    try:
        docnos = pa.array(list(itertools.chain.from_iterable(inner)), type=pa.large_string())
    except (pa.ArrowTypeError, pa.ArrowInvalid, TypeError):
        return None
    if len(docnos) != total:   # a mapping whose iteration disagrees with its len()
        return None

    def where(i: int) -> str:
        q = int(np.searchsorted(offsets, i, side="right")) - 1
        return f"query {qids[q]!r}, document {list(inner[q])[i - int(offsets[q])]!r}"

    # the docnos are coded on a second thread (compiled, without the GIL) while this one reads the values
    with ThreadPoolExecutor(1) as pool:
        coding = pool.submit(_coded, docnos)
        numbers = _mapping_values(inner, total, kind)
        value = grades_as_rel(numbers, name, where) if kind == "qrels" else checked_scores(numbers, name, where)
        qkeys = pa.array(qids, type=pa.large_string())
        order = trec_files.byte_order(qkeys)
        rank = np.empty(order.size, dtype=np.int32)
        rank[order] = np.arange(order.size, dtype=np.int32)
        qcode = np.repeat(rank, counts)
        dkeys, dcode = coding.result()
    line = np.arange(1, total + 1, dtype=np.int64) if kind == "qrels" else None   # a run's: never read
    return trec_files.TrecLines(qkeys.take(pa.array(order)), qcode, dkeys, dcode, value, offsets[:-1][order] + 1,
                                line)


def _mapping_values(inner: list, total: int, kind: str) -> np.ndarray:
    """The values of the mappings ``inner`` in entry order, as ``_number_array`` makes them of their list:
    Arrow's conversion (one C loop, ~2x numpy's ``asarray``) when it finds all of them numbers it reads
    exactly (double: floats, or ints with floats; int64: ints alone), which numpy reads as the same float64
    or int64 values; anything else (None, bool alone, str, an int beyond what float64 holds exactly) goes
    through ``_number_array`` for its message."""
    values = list(itertools.chain.from_iterable(d.values() for d in inner))
    try:
        converted = pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        converted = None
    if converted is not None and len(converted) == total and not converted.null_count \
            and converted.type in (pa.float64(), pa.int64()):
        return converted.to_numpy()
    return _number_array(values)


def _coded(strings: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """(each distinct string once, int32 code of each entry) of a large_string array: the file reader's
    region-by-region hash table, where Arrow's ``dictionary_encode`` of 10M docnos takes ~3 s."""
    n = len(strings)
    offsets = np.frombuffer(strings.buffers()[1], dtype=np.int64)[strings.offset:strings.offset + n + 1]
    data = strings.buffers()[2]
    buf = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, dtype=np.uint8)
    table = trec_scan.KeyTable(1 << 9, 1 << 20, parts=trec_files.DOCNO_PARTS)
    codes = np.empty(n, dtype=np.int32)
    for a in range(0, n, CODED_AT_ONCE):   # "lines" (each key's first line): unused here
        b = min(n, a + CODED_AT_ONCE)
        trec_scan.code_keys(table, buf, offsets[a:b], offsets[a + 1:b + 1], offsets[a:b], codes[a:b])
    return trec_files._keys(table), codes


#: strings coded by one ``code_keys`` call: its scratch arrays (8 int64 a string) stay reused memory, not
#: 640 MB of fresh pages for 10M docnos (3.8 s -> 2.4 s on the loaded 2-core machine)
CODED_AT_ONCE = 1 << 20


def _column(table: pa.Table, names: tuple[str, ...], name: str, role: str) -> str:
    found = [c for c in table.column_names if c.lower() in names]
    if len(found) != 1:
        said = "no column" if not found else f"columns {', '.join(found)} both"
        raise input_error(name, f"{said} for the {role} (one of {', '.join(names)}; columns: "
                         f"{', '.join(table.column_names)})")
    return found[0]


def _id_column(table: pa.Table, column: str, name: str) -> pa.Array:
    values = table.column(column).combine_chunks()
    if values.null_count:
        row = int(np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))[0])
        raise input_error(name, f"column {column}, row {row}: missing id", rows=[row])
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    if pa.types.is_integer(values.type) or pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
        return values.cast(pa.large_string())
    raise input_error(name, f"column {column} holds {values.type}, not string or integer ids")


def table_lines(table, name: str, kind: str) -> trec_files.TrecLines:
    """A pyarrow or pandas table with query, document and grade/score columns as TrecLines; a (query, document)
    pair listed twice is an error (a run), or kept once when its grades agree (qrels, as the file reader)."""
    if not isinstance(table, pa.Table):
        try:
            table = pa.Table.from_pandas(table, preserve_index=False)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as exc:
            raise input_error(name, f"the table cannot be read ({foreign_reason(exc)})") from None
    if table.num_rows > MAX_ENTRIES:
        raise input_error(name, f"{table.num_rows} rows, more than {MAX_ENTRIES}")
    if not table.num_rows:
        raise input_error(name, f"no {'judgements' if kind == 'qrels' else 'results'}")
    qcol = _column(table, QUERY_COLUMNS, name, "query id")
    dcol = _column(table, DOC_COLUMNS, name, "document id")
    vcol = _column(table, GRADE_COLUMNS if kind == "qrels" else SCORE_COLUMNS, name,
                   "grade" if kind == "qrels" else "score")
    qids, docs = _id_column(table, qcol, name), _id_column(table, dcol, name)
    raw = table.column(vcol).combine_chunks()
    if raw.null_count or not (pa.types.is_integer(raw.type) or pa.types.is_floating(raw.type)):
        bad = int(np.flatnonzero(raw.is_null().to_numpy(zero_copy_only=False))[0]) if raw.null_count else 0
        what = "missing" if raw.null_count else f"{raw.type}, not a number"
        raise input_error(name, f"column {vcol}, row {bad}: {what}", rows=[bad])
    numbers = raw.to_numpy(zero_copy_only=False)

    def where(i: int) -> str:
        return f"row {i} (query {qids[i].as_py()!r}, document {docs[i].as_py()!r})"

    value = grades_as_rel(numbers, name, where) if kind == "qrels" else checked_scores(numbers, name, where)
    lines = _lines(qids, docs, value)
    return _without_repeats(lines, name, kind)


def _without_repeats(lines: trec_files.TrecLines, name: str, kind: str) -> trec_files.TrecLines:
    """``lines`` with a (query, document) pair listed again dropped when it says the same (qrels); a run's
    repeated pair, or qrels that grade a pair twice differently, is an error naming both rows."""
    order = trec_files.pair_order(lines.qcode, lines.dcode, len(lines.dkeys))
    q, d = lines.qcode[order], lines.dcode[order]
    again = np.flatnonzero((q[1:] == q[:-1]) & (d[1:] == d[:-1])) + 1
    if not again.size:
        return lines
    later, earlier = order[again], order[again - 1]   # pair_order is stable: earlier rows first
    differs = lines.value[later] != lines.value[earlier]
    if kind == "run" or differs.any():
        at = 0 if kind == "run" else int(np.flatnonzero(differs)[0])
        row, first = int(later[at]), int(earlier[at])
        why = "listed twice" if kind == "run" else "graded twice, differently,"
        raise input_error(name, f"rows {first} and {row}: document {lines.dkeys[int(lines.dcode[row])].as_py()!r} "
                         f"{why} for query {lines.qkeys[int(lines.qcode[row])].as_py()!r}")
    keep = np.ones(lines.qcode.size, dtype=bool)
    keep[later] = False
    assert lines.line is not None
    return trec_files.TrecLines(lines.qkeys, lines.qcode[keep], lines.dkeys, lines.dcode[keep], lines.value[keep],
                                lines.qline, lines.line[keep])


def trec_lines(value, name: str, kind: str) -> trec_files.TrecLines:
    """Qrels (``kind`` ``qrels``) or a run (``run``) in any form the module takes, as TrecLines."""
    value = as_mapping(value, name)
    if is_path(value):
        return trec_files.read_qrels_lines(value) if kind == "qrels" else trec_files.read_run_lines(value)
    if _is_table(value):
        return table_lines(value, name, kind)
    return mapping_lines(value, name, kind)


def trec_arrays(qrels, run, *, complete: bool = False, qrels_name: str = "qrels",
                run_name: str = "run") -> tuple[dict[str, np.ndarray], dict]:
    """The arrays ``evalcore import trec-run --order trec_eval`` makes (``importers.trec.read_trec_run``) from
    qrels and a run in any form this module takes; two files are read at once, as that command reads them."""
    if is_path(qrels) and is_path(run):
        judged, runs = trec_files.read_both(run, qrels)
        qrels_name, run_name = str(qrels), str(run)
    else:
        judged = trec_lines(qrels, qrels_name, "qrels")
        runs = trec_lines(run, run_name, "run")
        qrels_name = str(qrels) if is_path(qrels) else qrels_name
        run_name = str(run) if is_path(run) else run_name
    arrays, attrs = trec_files.run_arrays(judged, runs, run_name, qrels_name, order="trec_eval", complete=complete)
    given = {name for name, v in ((qrels_name, qrels), (run_name, run)) if not is_path(v)}
    attrs[WARNINGS] = [w.replace(" (line ", " (entry ") if w.split(":")[0] in given else w
                       for w in attrs.get(WARNINGS, [])]   # a table's or mapping's entries have no lines
    return arrays, attrs


# --------------------------------------------------------------------------- qrels beside embeddings (BEIR's layout)


def id_strings(values, name: str) -> pa.Array:
    """``query_ids``/``gallery_ids`` as strings, one a row: ``str`` ids as given, integers as their decimal
    text (a table's integer ids are read so too); each id once (an id twice would make a judgement ambiguous)."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
        raise input_error(name, f"{type(values).__name__} is not a list of ids")
    listed = values.tolist() if hasattr(values, "tolist") else list(values)
    for row, value in enumerate(listed):
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise input_error(name, f"row {row} holds {type(value).__name__} {value!r}, not a str or int id", rows=[row])
    ids = pa.array([v if isinstance(v, str) else str(v) for v in listed], type=pa.large_string())
    encoded = pc.dictionary_encode(ids)
    if len(encoded.dictionary) != len(ids):
        codes = encoded.indices.to_numpy(zero_copy_only=False)
        seen = np.zeros(len(encoded.dictionary), dtype=bool)
        for row, code in enumerate(codes):  # the first repeat, for the message
            if seen[code]:
                raise input_error(name, f"id {ids[row].as_py()!r} appears twice (row {row})", rows=[row])
            seen[code] = True
    return ids


@dataclass(frozen=True)
class JudgedPairs:
    """Qrels matched to the rows of the query and gallery embeddings by id.

    ``query``/``item``/``rel``: qrels/query, qrels/item, qrels/rel (grades as trec_eval reads them, see
    ``grades_as_rel``); a judged document not among the gallery ids has item ``n_gallery + j``, ``j``
    indexing ``absent_docs`` (the caller decides how such a document is held: never retrievable, still
    judged). ``absent_queries``: judged query ids not among the query ids (their judgements are left out).
    """

    query: np.ndarray
    item: np.ndarray
    rel: np.ndarray
    absent_docs: list[str]
    absent_queries: list[str]


def judged_pairs(qrels, query_ids: pa.Array, gallery_ids: pa.Array, name: str = "qrels") -> JudgedPairs:
    """``qrels`` in any form this module takes (``{qid: {docid: grade}}``, a table, a TREC file, ranx's Qrels)
    matched to ``query_ids``/``gallery_ids`` (from ``id_strings``) by id."""
    lines = trec_lines(qrels, name, "qrels")
    qrow = pc.index_in(lines.qkeys, value_set=query_ids).to_numpy(zero_copy_only=False)
    drow = pc.index_in(lines.dkeys, value_set=gallery_ids).to_numpy(zero_copy_only=False)
    qrow = np.where(np.isnan(qrow), -1, qrow).astype(np.int64) if qrow.dtype.kind == "f" else qrow.astype(np.int64)
    drow = np.where(np.isnan(drow), -1, drow).astype(np.int64) if drow.dtype.kind == "f" else drow.astype(np.int64)
    kept = qrow[lines.qcode] >= 0
    used_docs = np.zeros(len(lines.dkeys), dtype=bool)
    used_docs[lines.dcode[kept]] = True
    absent = np.flatnonzero((drow < 0) & used_docs)
    drow[absent] = len(gallery_ids) + np.arange(absent.size)
    absent_queries = np.flatnonzero(qrow < 0)
    return JudgedPairs(query=qrow[lines.qcode[kept]], item=drow[lines.dcode[kept]], rel=lines.value[kept],
                       absent_docs=lines.dkeys.take(pa.array(absent)).to_pylist(),
                       absent_queries=lines.qkeys.take(pa.array(absent_queries)).to_pylist())
