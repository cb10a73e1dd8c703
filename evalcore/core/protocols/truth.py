"""Relevant and junk gallery items for a chunk of queries (README, Protocols).

A protocol turns labels, cameras, qrels or coordinates into a ``Truth``: two
CSR lists by query (relevant items, per-query junk), each sorted by gallery
index. Items of ``gallery/junk`` are junk for every query; they are kept out
of both lists and counted once in ``n_junk``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Truth:
    """Who is relevant and who is junk, for the queries of one chunk.

    ``rel_items[rel_indptr[i]:rel_indptr[i+1]]`` are query i's relevant gallery
    indices (ascending); the same for junk. ``allowed`` (judged-only) lists, per
    query, the only gallery items that take part in its ranking.
    """

    rel_indptr: np.ndarray
    rel_items: np.ndarray
    junk_indptr: np.ndarray
    junk_items: np.ndarray
    n_junk: np.ndarray
    columns: dict = field(default_factory=dict)
    allowed_indptr: np.ndarray | None = None
    allowed_items: np.ndarray | None = None
    #: the gain (grade) of each relevant item, aligned with ``rel_items``; None: 1 for every one
    rel_gain: np.ndarray | None = None
    #: per query, the judged items graded 0 (judged, not relevant): bpref counts them (qrels only)
    n_judged_nonrel: np.ndarray | None = None
    nonrel_indptr: np.ndarray | None = None
    nonrel_items: np.ndarray | None = None
    #: per query, the items in the pool but not judged (qrels -2): infAP counts them; None where there are none
    pool_indptr: np.ndarray | None = None
    pool_items: np.ndarray | None = None

    @property
    def n_queries(self) -> int:
        return len(self.rel_indptr) - 1

    @property
    def n_relevant(self) -> np.ndarray:
        return np.diff(self.rel_indptr)

    @property
    def gains(self) -> np.ndarray:
        """The gain of every relevant item (CSR order of ``rel_items``): its grade, 1 outside graded qrels."""
        if self.rel_gain is None:
            return np.ones(len(self.rel_items), dtype=np.int64)
        return np.asarray(self.rel_gain, dtype=np.int64)


def csr_order(rows: np.ndarray, items: np.ndarray, n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """(indptr, order): pairs grouped by row, items ascending within a row, as a permutation of the pairs."""
    order = np.arange(len(rows)) if pairs_in_order(rows, items) else np.lexsort((items, rows))
    counts = np.bincount(rows, minlength=n_rows)
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    return indptr, order


def pairs_in_order(rows: np.ndarray, items: np.ndarray) -> bool:
    """Whether (rows, items) already ascend as pairs: then a stable sort of them is the identity (the usual
    case, judgements stored sorted), and one linear check saves a lexsort."""
    if len(rows) < 2:
        return True
    step = np.diff(rows)
    return bool((step >= 0).all() and ((step > 0) | (items[1:] >= items[:-1])).all())


def csr_from_pairs(rows: np.ndarray, items: np.ndarray, n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """(indptr, items) of pairs grouped by row, items ascending within a row."""
    indptr, order = csr_order(rows, items, n_rows)
    return indptr, np.asarray(items, dtype=np.int64)[order]


def segment_ids(indptr: np.ndarray) -> np.ndarray:
    """The row of every element of a CSR list."""
    return np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))


def truth_from_pairs(n_queries: int, rel_rows, rel_items, junk_rows, junk_items,
                     gallery_junk: np.ndarray | None, columns: dict | None = None,
                     allowed: tuple[np.ndarray, np.ndarray] | None = None,
                     rel_gain: np.ndarray | None = None) -> Truth:
    """Assemble a Truth; ``gallery/junk`` items leave the relevant and junk lists (``rel_gain``: the gain of
    each relevant pair, given in the pairs' order, kept aligned)."""
    n_global = 0
    if gallery_junk is not None and gallery_junk.any():
        n_global = int(gallery_junk.sum())
        keep = ~gallery_junk[rel_items]
        rel_rows, rel_items = rel_rows[keep], rel_items[keep]
        rel_gain = None if rel_gain is None else rel_gain[keep]
        keep = ~gallery_junk[junk_items]
        junk_rows, junk_items = junk_rows[keep], junk_items[keep]
    rel_indptr, rel_order = csr_order(rel_rows, rel_items, n_queries)
    rel_sorted = np.asarray(rel_items, dtype=np.int64)[rel_order]
    gains = None if rel_gain is None else np.asarray(rel_gain, dtype=np.int64)[rel_order]
    junk_indptr, junk_sorted = csr_from_pairs(junk_rows, junk_items, n_queries)
    n_junk = np.diff(junk_indptr) + n_global
    allowed_indptr = allowed_items = None
    if allowed is not None:
        allowed_indptr, allowed_items = allowed
    return Truth(rel_indptr, rel_sorted, junk_indptr, junk_sorted, n_junk.astype(np.int64),
                 columns or {}, allowed_indptr, allowed_items, gains)
