"""Toy rank lists for the metric tests: CSR packing and rankings with ties and missing items.

A metric function takes one CSR list of relevant ranks per query (``indptr``,
``ranks``: r_1 < r_2 < ... of each query) and R (``n_relevant``). R can be
larger than the number of ranks given: precomputed lists may miss relevant items.
"""
import numpy as np

from evalcore.core import protocols as p
from evalcore.core import registry
from evalcore.core.lists import binary_lists
from evalcore.core.ranking import rank_by_lists, rank_pairs


def csr(rank_lists):
    """(indptr, ranks) of one list of sorted 1-based ranks per query."""
    indptr = np.zeros(len(rank_lists) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in rank_lists], out=indptr[1:])
    ranks = np.concatenate([np.asarray(r, dtype=np.int64) for r in rank_lists]) if rank_lists else np.empty(0)
    return indptr, ranks.astype(np.int64)


def per_query(metric, rank_lists, n_relevant, *args):
    """metric(indptr, ranks, n_relevant, *args) as a list of Python numbers (NaN for unknown queries)."""
    indptr, ranks = csr(rank_lists)
    if metric in {x.function for x in registry.METRICS if x.lists}:  # it reads lists: binary ones, gain 1
        return metric(binary_lists(indptr, ranks, np.asarray(n_relevant, dtype=np.int64)), *args).tolist()
    return metric(indptr, ranks, np.asarray(n_relevant, dtype=np.int64), *args).tolist()


def binary_ranking(rank_list, length):
    """The conventional view: a 0/1 relevance list of ``length`` ranked items, 1 at each rank in ``rank_list``."""
    rel = np.zeros(length, dtype=bool)
    rel[np.asarray(rank_list, dtype=np.int64) - 1] = True
    return rel


#: One query's scored list with ties: (score, relevant) of gallery items 0..4.
#: Sorted by score: item 0 (0.9, relevant), then items 1, 2, 3 tied at 0.5
#: (2 relevant, 1 and 3 not), then item 4 (0.1, relevant). Ties pessimistic
#: put 1 and 3 before 2: relevant ranks 1, 4, 5; optimistic put 2 first: 1, 2, 5.
TIED_SCORES = np.array([0.9, 0.5, 0.5, 0.5, 0.1], dtype=np.float32)
TIED_RELEVANT = np.array([True, False, True, False, True])
TIED_RANKS = {"pessimistic": [1, 4, 5], "optimistic": [1, 2, 5]}


def tied_ranks(ties):
    """Ranks of TIED_SCORES through evalcore's per-list ranking, checked against the hand-derived ones."""
    indptr = np.array([0, len(TIED_SCORES)], dtype=np.int64)
    items = np.arange(len(TIED_SCORES), dtype=np.int64)
    ranked = rank_pairs(indptr, items, TIED_SCORES, TIED_RELEVANT, ties, np.array([3]))
    assert ranked.ranks.tolist() == TIED_RANKS[ties]
    return ranked


def precomputed(items, relevant, junk=(), gallery_junk=None):
    """Ranked of one precomputed list (``ranking/item`` row) for one query with the given relevant/junk items."""
    rel = np.asarray(relevant, dtype=np.int64)
    jnk = np.asarray(junk, dtype=np.int64)
    truth = p.truth_from_pairs(1, np.zeros(len(rel), np.int64), rel, np.zeros(len(jnk), np.int64), jnk, None)
    return rank_by_lists(np.asarray([items], dtype=np.int64), None, truth, gallery_junk)
