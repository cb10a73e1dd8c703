"""CUHK03's single-gallery-shot protocol: one gallery image per identity, drawn from a seed, ranks of the match.

torchreid's ``eval_cuhk03`` (and fast-reid's copy), per query: remove the
gallery items of the query's identity *and* camera (the ``reid`` rule); skip
a query with no item of its identity left; then ``repeats`` times draw one
kept gallery item per gallery identity, uniformly, rank the drawn items and
record the CMC of that small gallery; the query's CMC is the mean over the
repeats. The tools draw with numpy's global, unseeded generator, per query
and per repeat. evalcore draws the same way (per query, per repeat, per
identity, uniformly among the identity's kept items) from a counter-based
generator, so a draw depends only on (seed, query row, repeat, identity) and
never on chunking, threads, the machine or the order queries are processed:

    key(identity) = the identity's lowest gallery row
    u = h(h(h(h(seed) + query row) + repeat) + key)      (h: SplitMix64's mixer, arithmetic mod 2**64)
    drawn = the identity's kept items in ascending gallery row, the (u mod n_kept)-th

(uniform up to a bias below n_kept / 2**64). A gallery item without identity
(a negative label) is a group of its own, so it is always drawn.

In a drawn gallery every identity has one item, so exactly one is a match
and the query's rank in repeat r is ``1 + #{drawn non-matches whose distance
is <= the match's}`` (ties pessimistic: a match after every non-match it
ties with, as elsewhere in evalcore). ``cmc[k-1]`` is the share of (counted
query, repeat) pairs with rank <= k, which equals the mean over queries of
each query's mean over its repeats (every query has the same number of
repeats).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: SplitMix64's constants (Steele, Lea and Flood 2014)
GAMMA = np.uint64(0x9E3779B97F4A7C15)
MIX1 = np.uint64(0xBF58476D1CE4E5B9)
MIX2 = np.uint64(0x94D049BB133111EB)


@dataclass(frozen=True)
class IdentityGroups:
    """The gallery's items grouped by identity: group j holds ``members[starts[j]:starts[j] + sizes[j]]``
    (gallery rows, ascending); ``labels[j]`` its label (-1: an item without identity, a group of one);
    ``keys[j]`` its lowest gallery row, which keys its draws."""

    members: np.ndarray
    starts: np.ndarray
    sizes: np.ndarray
    labels: np.ndarray
    keys: np.ndarray


def splitmix64(z) -> np.ndarray:
    """SplitMix64's output function of ``z`` (uint64, wrapping): z += gamma, then two xor-shift-multiplies."""
    with np.errstate(over="ignore"):  # arithmetic mod 2**64 is the definition
        z = np.asarray(z, dtype=np.uint64) + GAMMA
        z = (z ^ (z >> np.uint64(30))) * MIX1
        z = (z ^ (z >> np.uint64(27))) * MIX2
        return z ^ (z >> np.uint64(31))


def draws(seed: int, query_rows: np.ndarray, repeats: int, keys: np.ndarray) -> np.ndarray:
    """u[b, r, j] = h(h(h(h(seed) + query_rows[b]) + r) + keys[j]) as uint64, shape (B, repeats, J)."""
    with np.errstate(over="ignore"):  # arithmetic mod 2**64 is the definition
        h = splitmix64(np.uint64(seed))
        h = splitmix64(h + np.asarray(query_rows, dtype=np.uint64)[:, None, None])
        h = splitmix64(h + np.arange(repeats, dtype=np.uint64)[None, :, None])
        return splitmix64(h + np.asarray(keys, dtype=np.uint64)[None, None, :])


def identity_groups(gallery_labels: np.ndarray) -> IdentityGroups:
    """Group the gallery rows by label (int64; negative: no identity, each such row a group of its own)."""
    labels = np.asarray(gallery_labels, dtype=np.int64)
    known = labels >= 0
    distinct, inverse = np.unique(labels[known], return_inverse=True)
    group = np.empty(labels.size, dtype=np.int64)
    group[known] = inverse
    group[~known] = distinct.size + np.arange(int((~known).sum()))
    members = np.argsort(group, kind="stable")  # stable: ascending gallery row within a group
    sizes = np.bincount(group, minlength=distinct.size + int((~known).sum()))
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
    group_labels = np.concatenate((distinct, np.full(int((~known).sum()), -1, dtype=np.int64)))
    return IdentityGroups(members=members.astype(np.int64), starts=starts, sizes=sizes.astype(np.int64),
                          labels=group_labels, keys=members[starts].astype(np.int64))


def sample_gallery(groups: IdentityGroups, gallery_cams: np.ndarray, query_rows: np.ndarray,
                   query_labels: np.ndarray, query_cams: np.ndarray, repeats: int, seed: int):
    """The drawn galleries of the queries at ``query_rows`` (module docstring).

    Returns ``(items, match_group, counted)``: ``items[b, r, j]`` the gallery
    row drawn for identity group j in repeat r of query b (int64, (B, repeats,
    J)); ``match_group[b]`` the group of the query's identity (-1: none);
    ``counted[b]``: the query has a kept item of its identity (the others'
    draws of their own identity are meaningless and left unused).
    """
    u = draws(seed, query_rows, repeats, groups.keys)
    items = groups.members[groups.starts + (u % groups.sizes.astype(np.uint64)).astype(np.int64)]
    n_labelled = int((groups.labels >= 0).sum())  # the labelled groups come first, in ascending label
    distinct = groups.labels[:n_labelled]
    position = np.searchsorted(distinct, query_labels)
    found = (query_labels >= 0) & (position < n_labelled)
    found[found] = distinct[position[found]] == query_labels[found]
    match_group = np.where(found, position, -1)
    counted = np.zeros(len(query_rows), dtype=bool)
    for b, j in enumerate(match_group):
        if j < 0:
            continue
        own = groups.members[groups.starts[j]:groups.starts[j] + groups.sizes[j]]
        kept = own[gallery_cams[own] != query_cams[b]]  # same identity and camera: removed (reid rule)
        if kept.size:
            counted[b] = True
            items[b, :, j] = kept[(u[b, :, j] % np.uint64(kept.size)).astype(np.int64)]
    return items, match_group.astype(np.int64), counted


def match_ranks(distance_rows: np.ndarray, items: np.ndarray, match_group: np.ndarray) -> np.ndarray:
    """rank[b, r] = #{j: d[b, items[b, r, j]] <= d[b, items[b, r, match_group[b]]]}: the match's 1-based rank
    in its drawn gallery, ties pessimistic (the match itself counts once). Rows with match_group < 0: 0."""
    n, repeats, width = items.shape
    drawn = np.take_along_axis(distance_rows, items.reshape(n, repeats * width), axis=1).reshape(items.shape)
    column = np.maximum(match_group, 0)[:, None, None]
    match = np.take_along_axis(drawn, np.broadcast_to(column, (n, repeats, 1)), axis=2)
    ranks = (drawn <= match).sum(axis=2)
    return np.where(match_group[:, None] >= 0, ranks, 0).astype(np.int64)


def cmc_points(ranks: np.ndarray, top: int) -> np.ndarray:
    """cmc[k-1] = #{(query, repeat): rank <= k} / #(query, repeat) for k = 1 .. top, float64 (one division)."""
    counts = np.bincount(ranks.ravel(), minlength=top + 1)[1:top + 1]
    return np.cumsum(counts) / ranks.size
