"""The dataset as the protocols read it (``DatasetReader``), and judged-only ranking from stored rows.

The protocols (``evalcore.core.protocols``) read through a ``ChunkReader``;
``DatasetReader`` is that reader over a Zarr group. Judged-only queries are
ranked here from the (query, judged item) pairs' canonical or given scores.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from evalcore.core.protocols import Truth, label_index, segment_ids
from evalcore.core.protocols.base import raise_first
from evalcore.core.ranking import Ranked, dot_overflow_rows, is_member, normalize_rows, rank_pairs, row_norms
from evalcore.core.scan.embeddings import as_reported, check_euclidean_norms, pair_scores
from evalcore.core.scan.scores import as_given, given_values
from evalcore.errors import OptionError, mention
from evalcore.io import dataset as ds
from evalcore.io import kinds
from evalcore.types import LIST_ITEMS


def n_queries_of(group) -> int:
    """Q, from the first array that has one row per query."""
    for name in (*(kinds.get(k).query_array for k in kinds.PRECEDENCE), "query/label", "query/key", "query/lat",
                 "query/x"):
        if ds.has(group, name):
            return int(group[name].shape[0])
    raise OptionError("query", "no array tells the number of queries (give " + mention("query/emb") + " or "
                      + mention(LIST_ITEMS) + ")")


def read_gallery_side(group, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Gallery labels, cameras (int64) and junk flags (bool), those present among ``names``, with the label sort."""
    out: dict = {name: ds.read(group, f"gallery/{name}").astype(bool if name == "junk" else np.int64)
                 for name in names if ds.has(group, f"gallery/{name}")}
    if "label" in out:
        out["label_index"] = label_index(out["label"])
    return out


class DatasetReader:
    """A ``ChunkReader`` over a dataset group; ``gallery`` may be a run's cache of the gallery side,
    ``preloaded`` whole arrays already decoded (validation's scan), answered without a second read."""

    def __init__(self, group, gallery: Callable[[tuple[str, ...]], dict] | None = None,
                 preloaded: dict[str, np.ndarray] | None = None):
        self.group = group
        self._gallery = gallery
        self._preloaded = preloaded or {}

    def has(self, name: str) -> bool:
        return ds.has(self.group, name)

    def read(self, name: str, rows=None) -> np.ndarray:
        if rows is None and name in self._preloaded:
            return self._preloaded[name]
        return ds.read(self.group, name, rows)

    def length(self, name: str) -> int:
        return int(self.group[name].shape[0])

    @property
    def n_queries(self) -> int:
        return n_queries_of(self.group)

    def gallery(self, names: tuple[str, ...]) -> dict[str, np.ndarray]:
        return self._gallery(names) if self._gallery is not None else read_gallery_side(self.group, names)


def _read_embeddings(group, name: str, rows, index: np.ndarray, similarity: str) -> np.ndarray:
    """Normalised float32 rows of ``name``; InputError on NaN/Inf (and zero rows under cosine)."""
    raw = ds.read_array(group[name], name, rows)
    nonfinite, zero = ds.bad_rows(raw)
    raise_first(ds.embedding_problems(name, index[nonfinite], index[zero], similarity == "cosine"))
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
            raise ds.dot_overflow_error(q_rows + q0, row_norms(query)[q_rows].max(), uniq[g_rows],
                                        row_norms(gallery)[g_rows].max())
    if options.similarity == "euclidean":  # squared distances, reported as such (``core.canonical``)
        check_euclidean_norms("query/emb", q0, row_norms(query))
        check_euclidean_norms("gallery/emb", 0, row_norms(gallery), uniq)
    scores = pair_scores(query, gallery, rows, inverse.reshape(-1), options.similarity)
    relevant = is_member(indptr, items, truth.rel_indptr - truth.rel_indptr[0], truth.rel_items)
    ranked = rank_pairs(indptr, items, scores, relevant, options.ties, truth.n_relevant, truth)
    ranked.top1_score = as_reported(ranked.top1_score, options.similarity)
    ranked.relevant_score = as_reported(ranked.relevant_score, options.similarity)
    return ranked



def _rank_given_among_allowed(group, options, truth: Truth, q0: int, indptr: np.ndarray, items: np.ndarray,
                              rows: np.ndarray) -> Ranked:
    """Judged-only ranking by the given values (``scores/value``): read at the (query, allowed item) pairs
    alone, compared exactly as stored (``core.scan.scores``), reported as given."""
    arr = ds.array(group, ds.SCORES)
    raw = ds.read_points(arr, ds.SCORES, rows + q0, items)
    finite = np.isfinite(raw)
    if not finite.all():
        raise ds.nonfinite_score_error(np.unique(rows[~finite] + q0))
    higher_is_better = ds.higher_is_better(group)
    values = given_values(raw, higher_is_better)
    relevant = is_member(indptr, items, truth.rel_indptr - truth.rel_indptr[0], truth.rel_items)
    ranked = rank_pairs(indptr, items, values, relevant, options.ties, truth.n_relevant, truth)
    ranked.top1_score = as_given(ranked.top1_score, higher_is_better)
    ranked.relevant_score = as_given(ranked.relevant_score, higher_is_better)
    return ranked
