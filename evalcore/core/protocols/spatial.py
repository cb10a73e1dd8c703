"""``geo`` and ``xy``: the nearest gallery item is relevant, or every item within ``--radius`` (README, Protocols).

The nearest gallery item is the one relevant item (ties: lowest index), or
with ``radius`` M every gallery item within M (inclusive). Candidates come
from a k-d tree (``scipy.spatial.cKDTree``; for ``geo`` on 3-D unit vectors,
whose chord distance orders points like the great-circle distance), searched
with a slightly enlarged bound; the exact distance formula then decides
inclusion and ties. No query x gallery distance matrix is built.

Items of ``gallery/junk`` never take part in the nearest-item search nor in
the radius search.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from evalcore.core.coordinates import coordinate_names, coordinate_problems
from evalcore.core.protocols.base import ChunkReader, Protocol, TruthOptions, raise_first
from evalcore.core.protocols.registry import register
from evalcore.core.protocols.truth import Truth, truth_from_pairs
from evalcore.errors import InputError

#: Mean Earth radius (IUGG), metres.
EARTH_RADIUS_M = 6_371_008.8
#: Neighbours asked of the tree per query when looking for the nearest item.
NEAREST_K = 8
#: Relative widening of tree bounds, so rounding never drops a true candidate.
REL_SLACK = 1e-9
#: Absolute widening of chord bounds (unit sphere; ~6 mm on the Earth).
CHORD_SLACK = 1e-9
_EMPTY = np.empty(0, dtype=np.int64)


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


def read_coordinates(reader: ChunkReader, side: str, protocol: str, rows=None) -> tuple[np.ndarray, np.ndarray]:
    """Both coordinates of some rows of one side; InputError on bad values."""
    out, problems = [], []
    row0 = (rows.start or 0) if isinstance(rows, slice) else 0
    for leaf in coordinate_names(protocol):
        name = f"{side}/{leaf}"
        values = reader.read(name, rows).astype(np.float64)
        problems += coordinate_problems(name, values, row0)
        out.append(values)
    raise_first(problems)
    return out[0], out[1]


class SpatialProtocol(Protocol):
    """A protocol of points: the exact ``distance`` decides, ``space`` builds the search tree's points."""

    takes_radius = True
    distance: Callable[..., np.ndarray]
    space: Callable[..., Space]

    def __init__(self, name: str, distance: Callable[..., np.ndarray], space: Callable[..., Space]):
        self.name = name
        self.arrays = tuple(f"{side}/{leaf}" for side in ("query", "gallery") for leaf in coordinate_names(name))
        self.distance, self.space = distance, space

    def load(self, reader: ChunkReader, options: TruthOptions, q0: int, q1: int, n_gallery: int) -> Truth:
        gallery_junk = reader.gallery(("junk",)).get("junk")
        query = read_coordinates(reader, "query", self.name, slice(q0, q1))
        gallery = read_coordinates(reader, "gallery", self.name)
        return spatial_truth(self.space(*query, *gallery), options.radius, gallery_junk)

    def validate(self, reader: ChunkReader, n_query: int | None, n_gallery: int | None) -> list[InputError]:
        """Every coordinate problem (NaN, infinite, out of range), the same check ``load`` makes."""
        problems: list[InputError] = []
        for side in ("query", "gallery"):
            for leaf in coordinate_names(self.name):
                name = f"{side}/{leaf}"
                if reader.has(name):
                    problems += coordinate_problems(name, reader.read(name))
        return problems

    def top1_columns(self, reader: ChunkReader, q0: int, q1: int, top1: np.ndarray) -> dict[str, np.ndarray]:
        """top1_distance: from each query of q0..q1 to its rank-1 item (metres for geo); NaN where top1 < 0."""
        a, b = coordinate_names(self.name)
        top1 = np.asarray(top1, dtype=np.int64)
        out = np.full(len(top1), np.nan)
        valid = np.flatnonzero(top1 >= 0)
        if valid.size:
            uniq, inverse = np.unique(top1[valid], return_inverse=True)
            qa = reader.read(f"query/{a}", slice(q0, q1)).astype(np.float64)[valid]
            qb = reader.read(f"query/{b}", slice(q0, q1)).astype(np.float64)[valid]
            ga = reader.read(f"gallery/{a}", uniq).astype(np.float64)[inverse]
            gb = reader.read(f"gallery/{b}", uniq).astype(np.float64)[inverse]
            out[valid] = self.distance(qa, qb, ga, gb)
        return {"top1_distance": out}


GEO = register(SpatialProtocol("geo", haversine, geo_space))
XY = register(SpatialProtocol("xy", euclidean, xy_space))
