"""``qrels``: judgements decide (README, Protocols).

relevant = rel >= 1 (gain = the grade), judged not relevant = rel 0, junk = rel -1,
in the pool but not judged = rel -2 (a negative TREC grade: never relevant, keeps its place in
the ranking, not a judged non-relevant item for bpref), anything unjudged is not relevant. With
``judged_only`` anything unjudged is junk too: a query is ranked among its
judged non-junk items alone (the ``allowed`` CSR list of the ``Truth``).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from evalcore.core.protocols.base import ChunkReader, Protocol, TruthOptions, out_of_range, raise_first
from evalcore.core.protocols.registry import register
from evalcore.core.protocols.truth import Truth, csr_from_pairs, pairs_in_order, truth_from_pairs
from evalcore.errors import ArrayError, InputError, OptionError, mention, rows_text

QRELS_ARRAYS = ("qrels/query", "qrels/item", "qrels/rel")
#: the highest grade qrels/rel may hold (it is stored as int8)
MAX_GRADE = 127
#: qrels/rel of an item in the pool but not judged (trec_eval's reading of a negative grade)
IN_POOL = -2
#: qrels/rel of a junk item: removed from the ranking
JUNK = -1


def integer_grades(rel: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
    """qrels/rel as int64, or an InputError naming it when a value is not an integer (NaN, 2.5)."""
    values = np.asarray(rel)
    if values.dtype.kind in "iub":
        return values.astype(np.int64)
    if values.dtype.kind != "f":
        raise ArrayError("qrels/rel", f"holds {values.dtype} values (must be integer grades)")
    bad = np.flatnonzero(~np.isfinite(values) | (values != np.round(values)))
    if bad.size:
        where = bad if rows is None else np.asarray(rows)[bad]
        raise ArrayError("qrels/rel", f"rows {rows_text(where)} hold {values[bad[0]]!r} (must be integer grades)", rows=where)
    return values.astype(np.int64)


def qrels_problems(query: np.ndarray, item: np.ndarray, rel: np.ndarray, rows: np.ndarray,
                   n_query: int, n_gallery: int) -> list[InputError]:
    """Judgements that break the contract: query not in [0, Q), item not in [0, G), rel not an integer
    grade in IN_POOL .. MAX_GRADE.

    ``rows`` are the judgements' row numbers in the qrels arrays (for the messages).
    """
    found = out_of_range("qrels/query", "query", query, rows, n_query)
    found += out_of_range("qrels/item", "gallery", item, rows, n_gallery)
    bad = np.flatnonzero((rel < IN_POOL) | (rel > MAX_GRADE))
    if bad.size:
        found.append(ArrayError("qrels/rel", f"rows {rows_text(rows[bad])} hold {int(rel[bad[0]])}"
                                f"{' ...' if bad.size > 1 else ''} (must be a grade >= 1 relevant, 0 not relevant, "
                                f"-1 junk or -2 in the pool, not judged; at most {MAX_GRADE})", rows=rows[bad]))
    return found


def collapse_qrels(query: np.ndarray, item: np.ndarray, rel: np.ndarray, rows: np.ndarray):
    """Judgements sorted by (query, item) with repeats collapsed, and the conflicting repeats.

    A (query, item) pair judged twice with the same rel is one judgement; judged
    with different rels it is a problem (one message per conflicting pair, first 5).
    Returns ``(query, item, rel, problems)``.
    """
    # qrels are usually stored sorted by (query, item), rows ascending: then the lexsort is the identity
    if pairs_in_order(query, item) and bool((np.diff(rows) >= 0).all()):
        q, i, r, w = query, item, rel, rows
    else:
        order = np.lexsort((rows, item, query))
        q, i, r, w = query[order], item[order], rel[order], rows[order]
    same = (q[1:] == q[:-1]) & (i[1:] == i[:-1])
    conflict = np.flatnonzero(same & (r[1:] != r[:-1]))
    problems: list[InputError] = []
    if conflict.size:
        first = conflict[:5]
        pairs = "; ".join(f"rows {int(w[k])} and {int(w[k + 1])} judge (query {int(q[k])}, item {int(i[k])}) "
                          f"{int(r[k])} and {int(r[k + 1])}" for k in first)
        problems.append(ArrayError("qrels/rel", f"conflicting duplicate judgements: {pairs}"
                                   + (f" ({conflict.size} conflicts in all)" if conflict.size > 5 else "")))
    if not same.any():
        return q, i, r, problems
    keep = np.ones(len(q), dtype=bool)
    keep[1:] = ~same
    return q[keep], i[keep], r[keep], problems


def qrels_truth(rows: np.ndarray, item: np.ndarray, rel: np.ndarray, n_queries: int, n_gallery: int,
                gallery_junk: np.ndarray | None, judged_only: bool = False) -> Truth:
    """Truth from collapsed judgements (``rows`` relative to the chunk's first query).

    relevant = {g : rel(q, g) >= 1} with gain(g) = rel(q, g), junk = {g : rel(q, g) = -1}
    (plus ``gallery/junk``); judged not relevant = {g : rel(q, g) = 0} (bpref counts them);
    in the pool, not judged = {g : rel(q, g) = -2}: ranked, never relevant, not counted by bpref;
    unjudged items are not relevant; column n_judged(q) = #{judgements of q, -2 included: the query is in
    the qrels, which is what --empty-queries zero asks}. With ``judged_only`` (trec_eval -J):
    allowed(q) = {g judged for q : rel >= 0, g not in gallery/junk},
    relevant(q) = {g in allowed(q) : rel = 1}, n_junk(q) = G - |allowed(q)|.
    """
    rows, item, rel = (np.asarray(a, dtype=np.int64) for a in (rows, item, rel))
    relevant, junk = rel >= 1, rel == JUNK
    # n_judged: judgements of any grade; a query with one is "known-judged" (--empty-queries zero)
    truth = truth_from_pairs(n_queries, rows[relevant], item[relevant], rows[junk], item[junk], gallery_junk,
                             columns={"n_judged": np.bincount(rows, minlength=n_queries).astype(np.int64)},
                             rel_gain=rel[relevant] if relevant.any() and rel.max() > 1 else None)
    nonrel = rel == 0
    if gallery_junk is not None:
        nonrel &= ~gallery_junk[item]
    nonrel_indptr, nonrel_items = csr_from_pairs(rows[nonrel], item[nonrel], n_queries)
    truth = replace(truth, n_judged_nonrel=np.diff(nonrel_indptr).astype(np.int64), nonrel_indptr=nonrel_indptr,
                    nonrel_items=nonrel_items)
    pool = rel == IN_POOL   # infAP counts them above each relevant item (only where there are some: no cost else)
    if gallery_junk is not None:
        pool &= ~gallery_junk[item]
    if pool.any() and not judged_only:
        pool_indptr, pool_items = csr_from_pairs(rows[pool], item[pool], n_queries)
        truth = replace(truth, pool_indptr=pool_indptr, pool_items=pool_items)
    if not judged_only:
        return truth
    allowed = rel >= 0
    if gallery_junk is not None:
        allowed &= ~gallery_junk[item]
    indptr, items = csr_from_pairs(rows[allowed], item[allowed], n_queries)
    return replace(truth, n_junk=(n_gallery - np.diff(indptr)).astype(np.int64),
                   allowed_indptr=indptr, allowed_items=items)


def chunk_rows(query: np.ndarray, q0: int, q1: int):
    """Rows of the judgements of queries q0..q1: a slice when qrels/query is sorted, else indices."""
    if query.size < 2 or bool(np.all(query[1:] >= query[:-1])):
        a, b = np.searchsorted(query, [q0, q1], side="left")
        return slice(int(a), int(b))
    return np.flatnonzero((query >= q0) & (query < q1))


def read_qrels_chunk(reader: ChunkReader, q0: int, q1: int, n_query: int, n_gallery: int):
    """Collapsed judgements of queries q0..q1 as ``(rows, item, rel)``, rows relative to q0.

    Reads all of ``qrels/query`` (to find the chunk's rows and to catch query
    indices that belong to no chunk) and only the chunk's rows of item and rel
    when qrels/query is sorted. Raises InputError naming the array and rows.
    """
    lengths = {name: reader.length(name) for name in QRELS_ARRAYS}
    if len(set(lengths.values())) > 1:
        raise OptionError("qrels", f"arrays differ in length ({', '.join(f'{k} ({v},)' for k, v in lengths.items())})")
    query = reader.read("qrels/query").astype(np.int64)
    raise_first(out_of_range("qrels/query", "query", query, None, n_query))
    sel = chunk_rows(query, q0, q1)
    if isinstance(sel, slice):
        rows = np.arange(sel.start, sel.stop, dtype=np.int64)
        item = reader.read("qrels/item", sel).astype(np.int64)
        rel = integer_grades(reader.read("qrels/rel", sel), rows)
    else:
        rows = sel
        item = reader.read("qrels/item").astype(np.int64)[sel]
        rel = integer_grades(reader.read("qrels/rel"))[sel]
    q = query[rows]
    raise_first(qrels_problems(q, item, rel, rows, n_query, n_gallery))
    q, item, rel, problems = collapse_qrels(q, item, rel, rows)
    raise_first(problems)
    return q - q0, item, rel


class QrelsProtocol(Protocol):
    name = "qrels"
    arrays = QRELS_ARRAYS
    takes_judged_only = True
    takes_empty_zero = True

    def load(self, reader: ChunkReader, options: TruthOptions, q0: int, q1: int, n_gallery: int) -> Truth:
        gallery_junk = reader.gallery(("junk",)).get("junk")
        rows, item, rel = read_qrels_chunk(reader, q0, q1, reader.n_queries, n_gallery)
        return qrels_truth(rows, item, rel, q1 - q0, n_gallery, gallery_junk, options.judged_only)

    def validate(self, reader: ChunkReader, n_query: int | None, n_gallery: int | None) -> list[InputError]:
        """Out-of-range indices, bad rel values and conflicting repeats, over every judgement."""
        if n_query is None or n_gallery is None:
            return []
        query, item = (reader.read(name).astype(np.int64) for name in QRELS_ARRAYS[:2])
        try:
            rel = integer_grades(reader.read("qrels/rel"))
        except InputError as exc:
            return [exc]
        if not (query.shape == item.shape == rel.shape):
            return [OptionError("qrels", "arrays differ in length (" + mention("qrels/query") + f" {query.shape}, "
                                + mention("qrels/item") + f" {item.shape}, " + mention("qrels/rel")
                                + f" {rel.shape})")]
        rows = np.arange(query.size, dtype=np.int64)
        problems = qrels_problems(query, item, rel, rows, n_query, n_gallery)
        problems += collapse_qrels(query, item, rel, rows)[3]
        return problems


QRELS = register(QrelsProtocol())
