"""Readers of the ground truth arrays (qrels, coordinates, judged embeddings).

Each reader fetches what one protocol needs from the dataset group, checks it
as it reads (errors name the array and rows) and hands plain arrays to the
pure code of ``evalcore.core.ground_truth``.
"""
from __future__ import annotations

import numpy as np

from evalcore.core.canonical import canonical_pairs
from evalcore.core.coordinates import coordinate_names, coordinate_problems
from evalcore.core.ground_truth import (
    _is_member,
    _out_of_range,
    _raise_first,
    collapse_qrels,
    euclidean,
    haversine,
    make_space,
    qrels_problems,
    qrels_truth,
    rank_pairs,
    spatial_truth,
)
from evalcore.core.protocols import Truth, segment_ids
from evalcore.core.ranking import Ranked, dot_overflow_rows, normalize_rows, row_norms
from evalcore.core.scan.scores import as_given, given_values
from evalcore.errors import InputError
from evalcore.io import dataset as ds


def n_queries_of(group) -> int:
    """Q, from the first array that has one row per query."""
    for name in ("ranking/item", ds.SCORES, "query/emb", "query/label", "query/key", "query/lat", "query/x"):
        if ds.has(group, name):
            return int(group[name].shape[0])
    raise InputError("query: no array tells the number of queries (give query/emb or ranking/item)")


def _chunk_rows(query: np.ndarray, q0: int, q1: int):
    """Rows of the judgements of queries q0..q1: a slice when qrels/query is sorted, else indices."""
    if query.size < 2 or bool(np.all(query[1:] >= query[:-1])):
        a, b = np.searchsorted(query, [q0, q1], side="left")
        return slice(int(a), int(b))
    return np.flatnonzero((query >= q0) & (query < q1))


def read_qrels_chunk(group, q0: int, q1: int, n_query: int, n_gallery: int):
    """Collapsed judgements of queries q0..q1 as ``(rows, item, rel)``, rows relative to q0.

    Reads all of ``qrels/query`` (to find the chunk's rows and to catch query
    indices that belong to no chunk) and only the chunk's rows of item and rel
    when qrels/query is sorted. Raises InputError naming the array and rows.
    """
    shapes = {name: group[name].shape for name in ("qrels/query", "qrels/item", "qrels/rel")}
    if len(set(shapes.values())) > 1:
        raise InputError(f"qrels: arrays differ in length ({', '.join(f'{k} {v}' for k, v in shapes.items())})")
    query = ds.read(group, "qrels/query").astype(np.int64)
    _raise_first(_out_of_range("qrels/query", "query", query, np.arange(query.size), n_query))
    sel = _chunk_rows(query, q0, q1)
    if isinstance(sel, slice):
        rows = np.arange(sel.start, sel.stop, dtype=np.int64)
        item = ds.read(group, "qrels/item", sel).astype(np.int64)
        rel = ds.read(group, "qrels/rel", sel).astype(np.int64)
    else:
        rows = sel
        item = ds.read(group, "qrels/item").astype(np.int64)[sel]
        rel = ds.read(group, "qrels/rel").astype(np.int64)[sel]
    q = query[rows]
    _raise_first(qrels_problems(q, item, rel, rows, n_query, n_gallery))
    q, item, rel, problems = collapse_qrels(q, item, rel, rows)
    _raise_first(problems)
    return q - q0, item, rel


def validate_qrels(group, n_query: int, n_gallery: int) -> list[str]:
    """Every qrels problem of the dataset: out-of-range indices, bad rel values, conflicting repeats."""
    query = ds.read(group, "qrels/query").astype(np.int64)
    item = ds.read(group, "qrels/item").astype(np.int64)
    rel = ds.read(group, "qrels/rel").astype(np.int64)
    if not (query.shape == item.shape == rel.shape):
        return [f"qrels: arrays differ in length (qrels/query {query.shape}, qrels/item {item.shape}, "
                f"qrels/rel {rel.shape})"]
    rows = np.arange(query.size, dtype=np.int64)
    problems = qrels_problems(query, item, rel, rows, n_query, n_gallery)
    problems += collapse_qrels(query, item, rel, rows)[3]
    return problems


def _read_coordinates(group, side: str, protocol: str, rows=None) -> tuple[np.ndarray, np.ndarray]:
    """Both coordinates of some rows of one side; InputError on bad values."""
    out, problems = [], []
    row0 = (rows.start or 0) if isinstance(rows, slice) else 0
    for leaf in coordinate_names(protocol):
        name = f"{side}/{leaf}"
        values = ds.read(group, name, rows).astype(np.float64)
        problems += coordinate_problems(name, values, row0)
        out.append(values)
    _raise_first(problems)
    return out[0], out[1]


def validate_coordinates(group, protocol: str) -> list[str]:
    """Every coordinate problem of the dataset for ``geo`` / ``xy`` (NaN, infinite, out of range)."""
    problems = []
    for side in ("query", "gallery"):
        for leaf in coordinate_names(protocol):
            name = f"{side}/{leaf}"
            if ds.has(group, name):
                problems += coordinate_problems(name, ds.read(group, name))
    return problems


def load(group, options, q0: int, q1: int, n_gallery: int, gallery_junk: np.ndarray | None) -> Truth:
    """Truth of queries q0..q1 for ``qrels``, ``geo`` or ``xy`` (reads the arrays, then pure code)."""
    if options.protocol == "qrels":
        rows, item, rel = read_qrels_chunk(group, q0, q1, n_queries_of(group), n_gallery)
        return qrels_truth(rows, item, rel, q1 - q0, n_gallery, gallery_junk, options.judged_only)
    if options.protocol in ("geo", "xy"):
        query = _read_coordinates(group, "query", options.protocol, slice(q0, q1))
        gallery = _read_coordinates(group, "gallery", options.protocol)
        return spatial_truth(make_space(options.protocol, query, gallery), options.radius, gallery_junk)
    raise ValueError(f"ground_truth.load: protocol {options.protocol!r} is not qrels, geo or xy")


def top1_distance(group, options, q0: int, q1: int, top1: np.ndarray) -> np.ndarray:
    """Distance from each query of q0..q1 to its rank-1 gallery item (metres for geo); NaN where top1 < 0."""
    a, b = coordinate_names(options.protocol)
    top1 = np.asarray(top1, dtype=np.int64)
    out = np.full(len(top1), np.nan)
    valid = np.flatnonzero(top1 >= 0)
    if not valid.size:
        return out
    uniq, inverse = np.unique(top1[valid], return_inverse=True)
    qa = ds.read(group, f"query/{a}", slice(q0, q1)).astype(np.float64)[valid]
    qb = ds.read(group, f"query/{b}", slice(q0, q1)).astype(np.float64)[valid]
    ga = ds.read(group, f"gallery/{a}", uniq).astype(np.float64)[inverse]
    gb = ds.read(group, f"gallery/{b}", uniq).astype(np.float64)[inverse]
    out[valid] = (haversine if options.protocol == "geo" else euclidean)(qa, qb, ga, gb)
    return out


def _read_embeddings(group, name: str, rows, index: np.ndarray, similarity: str) -> np.ndarray:
    """Normalised float32 rows of ``name``; InputError on NaN/Inf (and zero rows under cosine)."""
    raw = ds.read_array(group[name], name, rows)
    nonfinite, zero = ds.bad_rows(raw)
    _raise_first(ds.embedding_problems(name, index[nonfinite], index[zero], similarity == "cosine"))
    return normalize_rows(raw, similarity)


def rank_among_allowed(group, options, truth: Truth, q0: int, q1: int) -> Ranked:
    """Judged-only ranking: each query ranked among its allowed items alone.

    Scores only for the (query, allowed item) pairs (canonical scores, ``canonical_pairs``, on rows
    normalised by ``normalize_rows``), then ``rank_pairs``. The rows read are
    checked as they are read (the judged gallery rows only).
    """
    indptr = np.asarray(truth.allowed_indptr, dtype=np.int64)
    indptr = indptr - indptr[0]
    items = np.asarray(truth.allowed_items, dtype=np.int64)
    rows = segment_ids(indptr)
    if ds.has(group, ds.SCORES):
        return _rank_given_among_allowed(group, options, truth, q0, indptr, items, rows)
    query = _read_embeddings(group, "query/emb", slice(q0, q1), np.arange(q0, q1), options.similarity)
    uniq, inverse = np.unique(items, return_inverse=True)
    if uniq.size:
        gallery = _read_embeddings(group, "gallery/emb", uniq, uniq, options.similarity)
    else:
        gallery = np.empty((0, query.shape[1]), dtype=np.float32)
    if options.similarity == "dot":  # the raw rows' products must stay finite in float32
        q_rows, g_rows = dot_overflow_rows(row_norms(query), row_norms(gallery), query.shape[1])
        if g_rows.size:
            raise InputError(ds.dot_overflow_message(q_rows + q0, row_norms(query)[q_rows].max(), uniq[g_rows],
                                                     row_norms(gallery)[g_rows].max()))
    scores = canonical_pairs(query, gallery, rows, inverse.reshape(-1))
    relevant = _is_member(indptr, items, truth.rel_indptr - truth.rel_indptr[0], truth.rel_items)
    return rank_pairs(indptr, items, scores, relevant, options.ties, truth.n_relevant)



def _rank_given_among_allowed(group, options, truth: Truth, q0: int, indptr: np.ndarray, items: np.ndarray,
                              rows: np.ndarray) -> Ranked:
    """Judged-only ranking by the given values (``scores/value``): read at the (query, allowed item) pairs
    alone, compared exactly as stored (``core.scan.scores``), reported as given."""
    arr = ds.array(group, ds.SCORES)
    raw = ds.read_points(arr, ds.SCORES, rows + q0, items)
    finite = np.isfinite(raw)
    if not finite.all():
        raise InputError(ds.nonfinite_score_message(np.unique(rows[~finite] + q0)))
    higher_is_better = ds.higher_is_better(group)
    values = given_values(raw, higher_is_better)
    relevant = _is_member(indptr, items, truth.rel_indptr - truth.rel_indptr[0], truth.rel_items)
    ranked = rank_pairs(indptr, items, values, relevant, options.ties, truth.n_relevant)
    ranked.top1_score = as_given(ranked.top1_score, higher_is_better)
    ranked.relevant_score = as_given(ranked.relevant_score, higher_is_better)
    return ranked
