"""Ground truth for the ``qrels``, ``geo`` and ``xy`` protocols (README, Protocols).

``qrels``: relevant = rel 1, junk = rel -1, anything unjudged is not relevant.
With ``judged_only`` anything unjudged is junk too: a query is ranked among
its judged non-junk items alone (the "allowed" CSR list of the ``Truth``),
ranked there from per-pair canonical scores (``rank_pairs``).

``geo`` / ``xy``: the nearest gallery item is the one relevant item (ties:
lowest index), or with ``radius`` M every gallery item within M (inclusive).
Candidates come from a k-d tree (``scipy.spatial.cKDTree``; for ``geo`` on 3-D
unit vectors, whose chord distance orders points like the great-circle
distance), searched with a slightly enlarged bound; the exact distance formula
then decides inclusion and ties. No query x gallery distance matrix is built.

Items of ``gallery/junk`` are junk for every protocol: they never take part
in the nearest-item search nor in the radius search.

Everything here is arrays in, arrays out; ``evalcore.io.truth`` reads the
arrays from a dataset and calls it.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from evalcore.core.protocols import Truth, csr_from_pairs, segment_ids, truth_from_pairs
from evalcore.core.ranking import Ranked
from evalcore.errors import InputError, rows_text

#: Mean Earth radius (IUGG), metres.
EARTH_RADIUS_M = 6_371_008.8
#: Neighbours asked of the tree per query when looking for the nearest item.
NEAREST_K = 8
#: Relative widening of tree bounds, so rounding never drops a true candidate.
REL_SLACK = 1e-9
#: Absolute widening of chord bounds (unit sphere; ~6 mm on the Earth).
CHORD_SLACK = 1e-9
_EMPTY = np.empty(0, dtype=np.int64)


def _raise_first(problems: list[str]) -> None:
    if problems:
        more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
        raise InputError(problems[0] + more)


# =========================================================================== qrels


def _out_of_range(name: str, what: str, values: np.ndarray, rows: np.ndarray, n: int) -> list[str]:
    """One message for the rows of ``name`` whose index is not in [0, n)."""
    bad = np.flatnonzero((values < 0) | (values >= n))
    if not bad.size:
        return []
    return [f"{name}: rows {rows_text(rows[bad])} hold {what} index {int(values[bad[0]])}"
            f"{' ...' if bad.size > 1 else ''}, outside [0, {n})"]


def qrels_problems(query: np.ndarray, item: np.ndarray, rel: np.ndarray, rows: np.ndarray,
                   n_query: int, n_gallery: int) -> list[str]:
    """Judgements that break the contract: query not in [0, Q), item not in [0, G), rel not in {-1, 0, 1}.

    ``rows`` are the judgements' row numbers in the qrels arrays (for the messages).
    """
    found = _out_of_range("qrels/query", "query", query, rows, n_query)
    found += _out_of_range("qrels/item", "gallery", item, rows, n_gallery)
    bad = np.flatnonzero((rel < -1) | (rel > 1))
    if bad.size:
        found.append(f"qrels/rel: rows {rows_text(rows[bad])} hold {int(rel[bad[0]])}"
                     f"{' ...' if bad.size > 1 else ''} (must be 1 relevant, 0 not relevant or -1 junk)")
    return found


def collapse_qrels(query: np.ndarray, item: np.ndarray, rel: np.ndarray, rows: np.ndarray):
    """Judgements sorted by (query, item) with repeats collapsed, and the conflicting repeats.

    A (query, item) pair judged twice with the same rel is one judgement; judged
    with different rels it is a problem (one message per conflicting pair, first 5).
    Returns ``(query, item, rel, problems)``.
    """
    order = np.lexsort((rows, item, query))
    q, i, r, w = query[order], item[order], rel[order], rows[order]
    same = (q[1:] == q[:-1]) & (i[1:] == i[:-1])
    conflict = np.flatnonzero(same & (r[1:] != r[:-1]))
    problems = []
    if conflict.size:
        first = conflict[:5]
        pairs = "; ".join(f"rows {int(w[k])} and {int(w[k + 1])} judge (query {int(q[k])}, item {int(i[k])}) "
                          f"{int(r[k])} and {int(r[k + 1])}" for k in first)
        problems.append(f"qrels/rel: conflicting duplicate judgements: {pairs}"
                        + (f" ({conflict.size} conflicts in all)" if conflict.size > 5 else ""))
    keep = np.ones(len(q), dtype=bool)
    keep[1:] = ~same
    return q[keep], i[keep], r[keep], problems


def qrels_truth(rows: np.ndarray, item: np.ndarray, rel: np.ndarray, n_queries: int, n_gallery: int,
                gallery_junk: np.ndarray | None, judged_only: bool = False) -> Truth:
    """Truth from collapsed judgements (``rows`` relative to the chunk's first query).

    relevant = {g : rel(q, g) = 1}, junk = {g : rel(q, g) = -1} (plus ``gallery/junk``);
    unjudged items are not relevant; column n_judged(q) = #{judgements of q}. With ``judged_only``:
    allowed(q) = {g judged for q : rel >= 0, g not in gallery/junk},
    relevant(q) = {g in allowed(q) : rel = 1}, n_junk(q) = G - |allowed(q)|.
    """
    rows, item, rel = (np.asarray(a, dtype=np.int64) for a in (rows, item, rel))
    relevant, junk = rel == 1, rel == -1
    # n_judged: judgements of any grade; a query with one is "known-judged" (--empty-queries zero)
    truth = truth_from_pairs(n_queries, rows[relevant], item[relevant], rows[junk], item[junk], gallery_junk,
                             columns={"n_judged": np.bincount(rows, minlength=n_queries).astype(np.int64)})
    if not judged_only:
        return truth
    allowed = rel >= 0
    if gallery_junk is not None:
        allowed &= ~gallery_junk[item]
    indptr, items = csr_from_pairs(rows[allowed], item[allowed], n_queries)
    return replace(truth, n_junk=(n_gallery - np.diff(indptr)).astype(np.int64),
                   allowed_indptr=indptr, allowed_items=items)


# =========================================================================== distances


def haversine(lat1, lon1, lat2, lon2) -> np.ndarray:
    """Great-circle distance in metres between points given in degrees.

    d = 2 R asin( sqrt( sin^2(dphi/2) + cos(phi1) cos(phi2) sin^2(dlambda/2) ) ),
    dphi = radians(lat2 - lat1), dlambda = radians(lon2 - lon1), R = 6,371,008.8 m
    (the argument of sqrt clipped to [0, 1]).
    """
    lat1, lon1, lat2, lon2 = (np.asarray(a, dtype=np.float64) for a in (lat1, lon1, lat2, lon2))
    half_dphi = np.radians(lat2 - lat1) / 2
    half_dlmb = np.radians(lon2 - lon1) / 2
    h = np.sin(half_dphi) ** 2 + np.cos(np.radians(lat1)) * np.cos(np.radians(lat2)) * np.sin(half_dlmb) ** 2
    return 2 * EARTH_RADIUS_M * np.arcsin(np.sqrt(np.clip(h, 0.0, 1.0)))


def euclidean(x1, y1, x2, y2) -> np.ndarray:
    """d = sqrt((x2 - x1)^2 + (y2 - y1)^2), every step correctly rounded."""
    dx = np.asarray(x2, dtype=np.float64) - np.asarray(x1, dtype=np.float64)
    dy = np.asarray(y2, dtype=np.float64) - np.asarray(y1, dtype=np.float64)
    return np.sqrt(dx * dx + dy * dy)


def unit_vectors(lat, lon) -> np.ndarray:
    """(n, 3) points on the unit sphere: (cos phi cos lambda, cos phi sin lambda, sin phi)."""
    phi, lmb = np.radians(np.asarray(lat, np.float64)), np.radians(np.asarray(lon, np.float64))
    return np.column_stack([np.cos(phi) * np.cos(lmb), np.cos(phi) * np.sin(lmb), np.sin(phi)])


def chord_of_metres(metres) -> np.ndarray:
    """Chord on the unit sphere of a great-circle distance: c = 2 sin(min(M / 2R, pi/2))."""
    return 2 * np.sin(np.minimum(np.asarray(metres, np.float64) / (2 * EARTH_RADIUS_M), np.pi / 2))


@dataclass(frozen=True)
class Space:
    """Points of one chunk in one protocol's space.

    ``query_points`` / ``gallery_points`` are tree coordinates (rows = query
    rows of the chunk / gallery indices); ``distance(qi, gi)`` is the exact
    formula that decides; ``to_tree(d)`` maps a distance to the tree metric
    and ``widen(t)`` enlarges a tree distance past any rounding.
    """

    query_points: np.ndarray
    gallery_points: np.ndarray
    distance: Callable[[np.ndarray, np.ndarray], np.ndarray]
    to_tree: Callable[[np.ndarray], np.ndarray]
    widen: Callable[[np.ndarray], np.ndarray]


def geo_space(qlat, qlon, glat, glon) -> Space:
    """Haversine metres decide; the tree works on unit vectors (chord distance)."""
    return Space(unit_vectors(qlat, qlon), unit_vectors(glat, glon),
                 lambda qi, gi: haversine(qlat[qi], qlon[qi], glat[gi], glon[gi]),
                 chord_of_metres, lambda t: np.asarray(t) * (1 + REL_SLACK) + CHORD_SLACK)


def xy_space(qx, qy, gx, gy) -> Space:
    """Euclidean distance decides; the tree works on the (x, y) points themselves."""
    return Space(np.column_stack([qx, qy]).astype(np.float64), np.column_stack([gx, gy]).astype(np.float64),
                 lambda qi, gi: euclidean(qx[qi], qy[qi], gx[gi], gy[gi]),
                 lambda d: np.asarray(d, np.float64), lambda t: np.asarray(t) * (1 + REL_SLACK) + 1e-300)


def _first_per_row(rows: np.ndarray, items: np.ndarray, dist: np.ndarray, n_rows: int):
    """Per row, the item of smallest exact distance, lowest index among equals (-1, NaN if none)."""
    order = np.lexsort((items, dist, rows))
    rows, items, dist = rows[order], items[order], dist[order]
    first = np.ones(len(rows), dtype=bool)
    first[1:] = rows[1:] != rows[:-1]
    best, best_d = np.full(n_rows, -1, np.int64), np.full(n_rows, np.nan)
    best[rows[first]], best_d[rows[first]] = items[first], dist[first]
    return best, best_d


def _ball_pairs(tree, points: np.ndarray, bounds) -> tuple[np.ndarray, np.ndarray]:
    """(row, tree position) of every tree point within bounds[row] of points[row]."""
    if not len(points):
        return _EMPTY, _EMPTY
    found = tree.query_ball_point(points, r=bounds)
    counts = np.fromiter((len(f) for f in found), dtype=np.int64, count=len(found))
    pos = np.fromiter((j for f in found for j in f), dtype=np.int64, count=int(counts.sum()))
    return np.repeat(np.arange(len(points), dtype=np.int64), counts), pos


def gallery_tree(space: Space, keep: np.ndarray):
    """(k-d tree over the kept gallery points, their gallery indices); tree None when none is kept."""
    from scipy.spatial import cKDTree  # deferred: 0.4 s to import, and only geo and xy truths need it

    gidx = np.flatnonzero(keep).astype(np.int64)
    if not gidx.size:
        return None, gidx
    # sliding-midpoint build: a few times faster than the balanced one, queries as fast
    return cKDTree(space.gallery_points[gidx], balanced_tree=False, compact_nodes=False), gidx


def nearest(space: Space, tree, gidx: np.ndarray, k: int = NEAREST_K) -> tuple[np.ndarray, np.ndarray]:
    """Per query: the kept gallery item of smallest exact distance (lowest index on ties), and that distance.

    The tree gives the k nearest by its metric; every item within
    widen(t_1) of the query is a candidate (a ball query when all k are);
    the exact distance then picks among the candidates.
    """
    n = len(space.query_points)
    if n == 0 or tree is None:
        return np.full(n, -1, np.int64), np.full(n, np.nan)
    k = min(k, gidx.size)
    tdist, tpos = tree.query(space.query_points, k=np.arange(1, k + 1))
    bound = space.widen(tdist[:, 0])
    within = tdist <= bound[:, None]
    more = within[:, -1] & (gidx.size > k)          # there may be equals beyond the k-th
    rows, cols = np.nonzero(within & ~more[:, None])
    cand_rows, cand_pos = rows, tpos[rows, cols]
    if more.any():
        extra = np.flatnonzero(more)
        r, pos = _ball_pairs(tree, space.query_points[extra], bound[extra])
        cand_rows, cand_pos = np.concatenate([cand_rows, extra[r]]), np.concatenate([cand_pos, pos])
    items = gidx[cand_pos]
    return _first_per_row(cand_rows, items, space.distance(cand_rows, items), n)


def within_radius(space: Space, tree, gidx: np.ndarray, radius: float) -> tuple[np.ndarray, np.ndarray]:
    """Pairs (query row, gallery index) with exact distance <= radius, tree items only.

    Tree candidates within widen(to_tree(radius)), one dual-tree pass; the
    exact distance then decides (inclusive).
    """
    from scipy.spatial import cKDTree  # deferred: 0.4 s to import, and only geo and xy truths need it

    if len(space.query_points) == 0 or tree is None:
        return _EMPTY, _EMPTY
    bound = float(space.widen(space.to_tree(np.asarray(radius))))
    pairs = cKDTree(space.query_points).sparse_distance_matrix(tree, bound, output_type="ndarray")
    rows, items = pairs["i"].astype(np.int64), gidx[pairs["j"].astype(np.int64)]
    inside = space.distance(rows, items) <= radius
    return rows[inside], items[inside]


def spatial_truth(space: Space, radius: float | None, gallery_junk: np.ndarray | None) -> Truth:
    """Truth of ``geo`` / ``xy``: the nearest item, or every item within ``radius``; column gt_distance.

    gt_distance(q) = min over non-junk g of d(q, g) (NaN with no such g).
    """
    n_gallery = len(space.gallery_points)
    keep = np.ones(n_gallery, dtype=bool) if gallery_junk is None else ~np.asarray(gallery_junk, bool)
    tree, gidx = gallery_tree(space, keep)
    best, best_d = nearest(space, tree, gidx)
    if radius is None:
        has = best >= 0
        rows, items = np.flatnonzero(has).astype(np.int64), best[has]
    else:
        rows, items = within_radius(space, tree, gidx, radius)
    return truth_from_pairs(len(space.query_points), rows, items, _EMPTY, _EMPTY, gallery_junk,
                            columns={"gt_distance": best_d})


def make_space(protocol: str, query: tuple, gallery: tuple) -> Space:
    return (geo_space if protocol == "geo" else xy_space)(*query, *gallery)


# =========================================================================== judged-only ranking


def rank_pairs(indptr: np.ndarray, items: np.ndarray, scores: np.ndarray, relevant: np.ndarray,
               ties: str, n_relevant: np.ndarray) -> Ranked:
    """Ranks within each query's own list of (item, score) (CSR by ``indptr``).

    Order: score descending; among equal scores non-relevant first
    (pessimistic) or relevant first (optimistic); then lowest index.
    rank(g) = 1 + position in that order; top1 = the first item.
    """
    n = len(indptr) - 1
    rows = segment_ids(indptr)
    tie = relevant if ties == "pessimistic" else ~relevant
    order = np.lexsort((items, tie, -scores.astype(np.float64), rows))
    position = np.arange(len(rows), dtype=np.int64) - indptr[rows] + 1
    rel_sorted = relevant[order]
    ranks = position[rel_sorted]
    rel_indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows[rel_sorted], minlength=n), out=rel_indptr[1:])
    has = np.diff(indptr) > 0
    top1 = np.full(n, -1, dtype=np.int64)
    top1_score = np.full(n, np.nan)
    first = order[indptr[:-1][has]]
    top1[has], top1_score[has] = items[first], scores[first].astype(np.float64)
    relevant_score = np.full(n, np.nan)
    has_rel = np.diff(rel_indptr) > 0
    rel_scores = scores[order][rel_sorted].astype(np.float64)   # best first within each query
    relevant_score[has_rel] = rel_scores[rel_indptr[:-1][has_rel]]
    return Ranked(rel_indptr, ranks, np.asarray(n_relevant, dtype=np.int64), top1, top1_score, relevant_score)


def _is_member(indptr: np.ndarray, items: np.ndarray, of_indptr: np.ndarray, of_items: np.ndarray) -> np.ndarray:
    """For each pair (row, item) of the first CSR list: is it in the second one?"""
    keys = np.sort(segment_ids(of_indptr) * (1 << 32) + of_items)
    pairs = segment_ids(indptr) * (1 << 32) + items
    if not keys.size:
        return np.zeros(len(pairs), dtype=bool)
    pos = np.minimum(np.searchsorted(keys, pairs), keys.size - 1)
    return keys[pos] == pairs


