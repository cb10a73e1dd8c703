"""qrels, geo and xy protocols: worked examples, brute-force references, a million-point radius run, bad inputs.

The references here build the full score matrix and the full distance matrix
(the test's own haversine and Euclidean formulas) and derive relevant and junk
sets independently of evalcore; ``reference.evaluate_all`` then ranks by a full sort.
"""
import time
import tracemalloc

import numpy as np
import pytest
from conftest import load_vector, vector_arrays
from reference import evaluate_all

from evalcore.core import protocols
from evalcore.core.coordinates import coordinate_names
from evalcore.core.protocols import spatial as gt
from evalcore.core.ranking import TILE_ROWS
from evalcore.engine.evaluate import Options, evaluate
from evalcore.errors import InputError
from evalcore.io import dataset as ds
from evalcore.io import truth as truth_io

R_EARTH = 6_371_008.8
COLUMNS = ["n_relevant", "n_junk", "first_rank", "last_rank", "ap", "ap_trapz", "inp", "rr", "top1",
           "top1_score", "relevant_score"]


# --------------------------------------------------------------------------- helpers


def close(a, b, rel=1e-9):
    if a is None or b is None:
        return a is None and b is None
    if isinstance(b, str) or isinstance(a, str):
        return a == b
    if np.isnan(float(b)):
        return np.isnan(float(a))
    return abs(float(a) - float(b)) <= rel * max(1.0, abs(float(b)))


def compare(result, expected, ks, extra=()):
    rows = result.per_query.to_pylist()
    assert len(rows) == len(expected)
    names = COLUMNS + [f"{m}_at_{k}" for k in ks for m in ("hit", "recall", "precision")] + list(extra)
    bad = [(q, n, got[n], want[n]) for q, (got, want) in enumerate(zip(rows, expected)) for n in names
           if not close(got[n], want[n])]
    assert not bad, f"{len(bad)} mismatches, first: {bad[:5]}"


def haversine_matrix(qlat, qlon, glat, glon):
    """Brute force: every query to every gallery point, metres."""
    p1, p2 = np.radians(qlat)[:, None], np.radians(glat)[None, :]
    a = np.sin(np.radians(glat[None, :] - qlat[:, None]) / 2) ** 2
    b = np.cos(p1) * np.cos(p2) * np.sin(np.radians(glon[None, :] - qlon[:, None]) / 2) ** 2
    return 2 * R_EARTH * np.arcsin(np.sqrt(np.clip(a + b, 0, 1)))


def euclid_matrix(qx, qy, gx, gy):
    dx, dy = gx[None, :] - qx[:, None], gy[None, :] - qy[:, None]
    return np.sqrt(dx * dx + dy * dy)


def dot_scores(arrays):
    return arrays["query/emb"].astype(np.float64) @ arrays["gallery/emb"].astype(np.float64).T


def grid_embeddings(rng, n, dims=6):
    """Values on a 1/64 grid: every float32 dot product is exact."""
    return (np.clip(np.round(rng.standard_normal((n, dims)) * 16), -255, 255) / 64).astype(np.float32)


def spatial_reference(dist, gjunk, radius):
    """(relevant, junk, gt_distance) from a full distance matrix."""
    eff = np.where(gjunk[None, :], np.inf, dist)
    nearest = np.argmin(eff, axis=1)                      # first minimum: lowest index on ties
    gt_distance = eff[np.arange(len(eff)), nearest]
    if radius is None:
        rel = np.zeros(dist.shape, dtype=bool)
        rel[np.arange(len(eff)), nearest] = True
    else:
        rel = (dist <= radius) & ~gjunk[None, :]
    return rel, np.broadcast_to(gjunk, dist.shape), gt_distance


def with_distances(expected, dist, gt_distance):
    for q, row in enumerate(expected):
        row["gt_distance"] = float(gt_distance[q])
        row["top1_distance"] = None if row["top1"] is None else float(dist[q, row["top1"]])
    return expected


# --------------------------------------------------------------------------- worked examples


@pytest.mark.parametrize("name", ["qrels_judged_only", "qrels_unjudged_not_relevant", "geo_nearest_reference"])
def test_worked_examples(write, name):
    case = load_vector(name)
    arrays = vector_arrays(case)
    opts = dict(case["options"])
    opts["ks"] = tuple(opts["ks"])
    result = evaluate(write(arrays), Options(**opts))
    rows = result.per_query.to_pylist()
    want = case["expected"]
    assert len(rows) == len(want["per_query"])
    bad = [(row["query"], k, row[k], v) for row, exp in zip(rows, want["per_query"]) for k, v in exp.items()
           if not close(row[k], v, 1e-12)]
    assert not bad, bad
    summary = result.summary.to_pylist()[0]
    assert [(k, summary[k]) for k, v in want["summary"].items() if not close(summary[k], v, 1e-12)] == []
    assert np.allclose(result.cmc.column("cmc").to_numpy()[:5], want["cmc"], rtol=0, atol=1e-12)
    if name.startswith("geo"):
        d = haversine_matrix(arrays["query/lat"], arrays["query/lon"], arrays["gallery/lat"], arrays["gallery/lon"])
        n = len(rows)
        assert np.allclose(result.per_query.column("gt_distance").to_numpy(), d.min(axis=1), rtol=1e-12)
        top1 = result.per_query.column("top1").to_numpy()
        assert np.allclose(result.per_query.column("top1_distance").to_numpy(), d[np.arange(n), top1], rtol=1e-12)


# --------------------------------------------------------------------------- qrels


def random_qrels(rng, n_query, n_gallery, max_judged, shuffle):
    """Judgements for most queries (some have none), rel in {-1, 0, 1}, a few identical repeats."""
    q, g, r = [], [], []
    for i in range(n_query):
        m = int(rng.integers(0, max_judged + 1)) if i % 10 else 0
        items = rng.choice(n_gallery, m, replace=False)
        q += [i] * m
        g += items.tolist()
        r += rng.choice([-1, 0, 1], m, p=[0.1, 0.55, 0.35]).tolist()
    q, g, r = np.array(q), np.array(g), np.array(r)
    rep = rng.choice(len(q), len(q) // 20, replace=False)
    q, g, r = np.concatenate([q, q[rep]]), np.concatenate([g, g[rep]]), np.concatenate([r, r[rep]])
    order = rng.permutation(len(q)) if shuffle else np.lexsort((g, q))
    return q[order].astype(np.int64), g[order].astype(np.int64), r[order].astype(np.int8)


def qrels_reference_sets(arrays, judged_only, nq, ng):
    judged = np.full((nq, ng), -2)
    judged[arrays["qrels/query"], arrays["qrels/item"]] = arrays["qrels/rel"]
    gjunk = arrays.get("gallery/junk", np.zeros(ng, bool))[None, :]
    if judged_only:
        allowed = (judged >= 0) & ~gjunk
        return (judged == 1) & allowed, ~allowed
    return (judged == 1) & ~gjunk, (judged == -1) | gjunk


def qrels_arrays(rng, n_query, n_gallery, shuffle, max_judged=40):
    q, g, r = random_qrels(rng, n_query, n_gallery, max_judged, shuffle)
    return {
        # small integers: exact scores and many exact ties, so the tie policy matters
        "query/emb": rng.integers(-2, 3, (n_query, 4)).astype(np.float32),
        "gallery/emb": rng.integers(-2, 3, (n_gallery, 4)).astype(np.float32),
        "gallery/junk": rng.random(n_gallery) < 0.03,
        "qrels/query": q, "qrels/item": g, "qrels/rel": r,
    }


@pytest.mark.parametrize("judged_only, ties, shuffle", [
    (False, "pessimistic", False), (False, "optimistic", True),
    (True, "pessimistic", True), (True, "optimistic", False),
])
def test_qrels_matches_brute_force(write, judged_only, ties, shuffle):
    rng = np.random.default_rng(21 + 2 * judged_only + shuffle)
    arrays = qrels_arrays(rng, 600, 1500, shuffle)
    ks = (1, 5, 20)
    result = evaluate(write(arrays, chunk_rows=256),
                      Options(protocol="qrels", ks=ks, ties=ties, similarity="dot", judged_only=judged_only,
                              map_at=10))
    rel, junk = qrels_reference_sets(arrays, judged_only, 600, 1500)
    expected = evaluate_all(dot_scores(arrays), rel, junk, ks, ties=ties, map_at=10)
    compare(result, expected, ks, extra=("ap_at_10",))
    # the data exercise what they should: unknown queries, junk, repeats, several chunks
    assert sum(e["n_relevant"] == 0 for e in expected) >= 60
    assert len(result.info["chunks"]) == -(-600 // TILE_ROWS) > 1
    if judged_only:
        assert all(e["n_junk"] >= 1500 - 40 for e in expected)


def test_judged_only_scores_do_not_depend_on_chunking(write):
    rng = np.random.default_rng(5)
    arrays = qrels_arrays(rng, 1300, 900, shuffle=True)
    arrays["query/emb"] = rng.standard_normal((1300, 24)).astype(np.float32)
    arrays["gallery/emb"] = rng.standard_normal((900, 24)).astype(np.float32)
    path = write(arrays)
    opts = Options(protocol="qrels", judged_only=True, ks=(1, 5))
    one = evaluate(path, opts, chunk_rows=4096)
    many = evaluate(path, opts, chunk_rows=512)
    assert one.info["chunks"] != many.info["chunks"] and len(many.info["chunks"]) == 3
    assert one.per_query.equals(many.per_query)
    # and the scores are the float64 dot products of the normalised rows, rounded to float32
    qn = arrays["query/emb"] / np.linalg.norm(arrays["query/emb"].astype(np.float64), axis=1, keepdims=True)
    gn = arrays["gallery/emb"] / np.linalg.norm(arrays["gallery/emb"].astype(np.float64), axis=1, keepdims=True)
    rows = one.per_query.to_pylist()
    checked = 0
    for q, row in enumerate(rows):
        if row["top1"] is not None:
            s = np.float32(qn[q].astype(np.float32).astype(np.float64) @ gn[row["top1"]].astype(np.float32))
            assert abs(row["top1_score"] - float(s)) <= 2e-7
            checked += 1
    assert checked > 500


@pytest.mark.parametrize("judged_only", [False, True])
def test_qrels_with_precomputed_rankings(write, judged_only):
    """ranking/item lists (no embeddings) honour the qrels Truth, judged-only included."""
    rng = np.random.default_rng(31 + judged_only)
    nq, ng = 300, 400
    arrays = qrels_arrays(rng, nq, ng, shuffle=True)
    del arrays["query/emb"], arrays["gallery/emb"]
    scores = np.stack([rng.permutation(ng) for _ in range(nq)]).astype(np.float32) / ng   # distinct
    arrays["ranking/item"] = np.argsort(-scores, axis=1, kind="stable").astype(np.int64)
    arrays["ranking/score"] = np.take_along_axis(scores, arrays["ranking/item"], axis=1)
    arrays["gallery/key"] = np.array([f"g{i}" for i in range(ng)], dtype=object)
    ks = (1, 5)
    result = evaluate(write(arrays), Options(protocol="qrels", ks=ks, judged_only=judged_only))
    rel, junk = qrels_reference_sets(arrays, judged_only, nq, ng)
    compare(result, evaluate_all(scores.astype(np.float64), rel, junk, ks), ks)


# --------------------------------------------------------------------------- geo


def geo_arrays(rng, n_query=300, n_gallery=4000):
    """A dense region, points across the antimeridian and near a pole, repeated positions, junk."""
    glat = rng.uniform(45.0, 45.5, n_gallery)
    glon = rng.uniform(7.0, 7.7, n_gallery)
    glat[:300], glon[:300] = rng.uniform(-10, 10, 300), rng.choice([-1, 1], 300) * rng.uniform(179.9, 180, 300)
    glat[300:400], glon[300:400] = rng.uniform(89.9, 90, 100), rng.uniform(-180, 180, 100)
    dup = rng.choice(np.arange(400, n_gallery), 200, replace=False)
    glat[dup[100:]], glon[dup[100:]] = glat[dup[:100]], glon[dup[:100]]     # 100 repeated positions
    qlat = rng.uniform(45.0, 45.5, n_query)
    qlon = rng.uniform(7.0, 7.7, n_query)
    qlat[:40], qlon[:40] = rng.uniform(-10, 10, 40), rng.choice([-1, 1], 40) * rng.uniform(179.95, 180, 40)
    qlat[40:60], qlon[40:60] = rng.uniform(89.95, 90, 20), rng.uniform(-180, 180, 20)
    qlat[60:100], qlon[60:100] = glat[dup[:40]], glon[dup[:40]]              # exactly on repeated points
    gjunk = rng.random(n_gallery) < 0.03
    gjunk[dup[:10]] = True                                                   # the lower copy is junk
    return {"query/emb": grid_embeddings(rng, n_query), "gallery/emb": grid_embeddings(rng, n_gallery),
            "query/lat": qlat, "query/lon": qlon, "gallery/lat": glat, "gallery/lon": glon,
            "gallery/junk": gjunk}


@pytest.mark.parametrize("radius", [None, 3000.0])
def test_geo_matches_brute_force(write, radius):
    rng = np.random.default_rng(41)
    arrays = geo_arrays(rng)
    ks = (1, 5, 10)
    result = evaluate(write(arrays, chunk_rows=256), Options(protocol="geo", ks=ks, similarity="dot", radius=radius))
    dist = haversine_matrix(arrays["query/lat"], arrays["query/lon"], arrays["gallery/lat"], arrays["gallery/lon"])
    rel, junk, gt_distance = spatial_reference(dist, arrays["gallery/junk"], radius)
    expected = with_distances(evaluate_all(dot_scores(arrays), rel, junk, ks), dist, gt_distance)
    compare(result, expected, ks, extra=("gt_distance", "top1_distance"))
    # the data reach the hard cases: zero-distance ties, antimeridian and polar neighbours
    assert (gt_distance[60:100] == 0).all()
    nearest = np.argmin(np.where(arrays["gallery/junk"], np.inf, dist), axis=1)
    assert (arrays["gallery/lon"][nearest[:40]] * arrays["query/lon"][:40] < 0).sum() >= 5
    if radius is not None:
        assert not np.any(np.abs(dist - radius) < 1e-3)          # no accidental boundary case
        assert np.mean([e["n_relevant"] for e in expected]) > 3


def test_geo_radius_is_inclusive_and_decided_by_haversine(write):
    qlat, qlon = np.array([10.0, -33.9]), np.array([20.0, 151.2])
    glat = np.array([10.01, 10.0, 10.0, -33.9, -33.9])
    glon = np.array([20.02, 20.0, 20.0, 151.2, 179.0])
    radius = float(gt.haversine(qlat[0], qlon[0], glat[0], glon[0]))
    glat[2], glon[2] = np.nextafter(10.01, 90.0), 20.02   # one ulp farther north than item 0: outside
    assert gt.haversine(qlat[0], qlon[0], glat[2], glon[2]) > radius
    arrays = {"query/emb": np.ones((2, 2), np.float32), "gallery/emb": np.ones((5, 2), np.float32),
              "query/lat": qlat, "query/lon": qlon, "gallery/lat": glat, "gallery/lon": glon}
    path = write(arrays)
    truth = protocols.get("geo").load(truth_io.DatasetReader(ds.open_dataset(path)), Options(protocol="geo", radius=radius), 0, 2, 5)
    assert truth.rel_items[truth.rel_indptr[0]:truth.rel_indptr[1]].tolist() == [0, 1]
    assert truth.rel_items[truth.rel_indptr[1]:truth.rel_indptr[2]].tolist() == [3]
    assert truth.columns["gt_distance"].tolist() == [0.0, 0.0]
    # radius 0: only the items at the very same position
    truth = protocols.get("geo").load(truth_io.DatasetReader(ds.open_dataset(path)), Options(protocol="geo", radius=0.0), 0, 2, 5)
    assert truth.rel_items.tolist() == [1, 3] and truth.n_relevant.tolist() == [1, 1]


def test_geo_radius_over_a_million_gallery_positions(write):
    """No Q x G matrix: fast, small peak memory, and right on sampled queries."""
    rng = np.random.default_rng(51)
    ng, nq, radius = 1_000_000, 2000, 30_000.0
    glat = np.degrees(np.arcsin(rng.uniform(-1, 1, ng)))
    glon = rng.uniform(-180, 180, ng)
    pick = rng.integers(0, ng, nq)
    qlat = np.clip(glat[pick] + rng.normal(0, 0.2, nq), -90, 90)
    qlon = (glon[pick] + rng.normal(0, 0.2, nq) + 180) % 360 - 180
    arrays = {"query/lat": qlat, "query/lon": qlon, "gallery/lat": glat, "gallery/lon": glon,
              "ranking/item": rng.integers(0, ng, (nq, 5)).astype(np.int64)}
    arrays["ranking/item"][:, 2] = pick                # often within the radius: first_rank 3
    path = write(arrays)
    tracemalloc.start()
    started = time.perf_counter()
    try:
        result = evaluate(path, Options(protocol="geo", radius=radius, ks=(1, 5)))
        seconds = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert seconds < 20, seconds
    assert peak < 400e6, peak          # one chunk's Q x G float64 matrix alone would be 8 GB
    pq = result.per_query
    n_rel = pq.column("n_relevant").to_numpy()
    assert n_rel.mean() > 3
    for q in rng.choice(nq, 8, replace=False):
        d = haversine_matrix(qlat[q:q + 1], qlon[q:q + 1], glat, glon)[0]
        assert n_rel[q] == int((d <= radius).sum())
        assert pq.column("gt_distance")[q].as_py() == pytest.approx(d.min(), rel=1e-12)
        top1 = pq.column("top1")[q].as_py()
        assert pq.column("top1_distance")[q].as_py() == pytest.approx(d[top1], rel=1e-12)
        ranked = arrays["ranking/item"][q]
        assert pq.column("first_rank")[q].as_py() == (int(np.argmax(d[ranked] <= radius)) + 1
                                                     if (d[ranked] <= radius).any() else None)


# --------------------------------------------------------------------------- xy


@pytest.mark.parametrize("radius", [None, 5.0])
@pytest.mark.parametrize("ties", ["pessimistic", "optimistic"])
def test_xy_matches_brute_force(write, radius, ties):
    """Integer coordinates: many equally near items (lowest index wins) and items exactly at the radius."""
    rng = np.random.default_rng(61)
    nq, ng = 400, 3000
    arrays = {"query/emb": rng.integers(-2, 3, (nq, 3)).astype(np.float32),
              "gallery/emb": rng.integers(-2, 3, (ng, 3)).astype(np.float32),
              "query/x": rng.integers(0, 60, nq).astype(np.float64),
              "query/y": rng.integers(0, 60, nq).astype(np.float64),
              "gallery/x": rng.integers(0, 60, ng).astype(np.float64),
              "gallery/y": rng.integers(0, 60, ng).astype(np.float64),
              "gallery/junk": rng.random(ng) < 0.03}
    ks = (1, 3, 10)
    result = evaluate(write(arrays, chunk_rows=256),
                      Options(protocol="xy", ks=ks, ties=ties, similarity="dot", radius=radius))
    dist = euclid_matrix(arrays["query/x"], arrays["query/y"], arrays["gallery/x"], arrays["gallery/y"])
    rel, junk, gt_distance = spatial_reference(dist, arrays["gallery/junk"], radius)
    expected = with_distances(evaluate_all(dot_scores(arrays), rel, junk, ks, ties=ties), dist, gt_distance)
    compare(result, expected, ks, extra=("gt_distance", "top1_distance"))
    eff = np.where(arrays["gallery/junk"], np.inf, dist)
    assert ((eff == gt_distance[:, None]).sum(axis=1) > 1).sum() > 50      # nearest ties
    if radius is not None:
        assert (dist == radius).sum() > 100                                 # boundary pairs


@pytest.mark.parametrize("protocol", ["geo", "xy"])
def test_nearest_with_many_equally_near_items(protocol):
    """More equally near items than the tree is first asked for: the lowest index still wins."""
    rng = np.random.default_rng(81)
    ng = 400
    ga, gb = rng.uniform(1, 2, ng), rng.uniform(1, 2, ng)
    same = rng.choice(ng, 30, replace=False)
    ga[same], gb[same] = 1.5, 1.5                          # 30 items at one position
    qa, qb = np.array([1.5, 1.5, 1.2]), np.array([1.5, 1.5 + 1e-3, 1.7])
    junk = np.zeros(ng, bool)
    junk[same.min()] = True                                # the lowest of them is junk
    if protocol == "geo":
        space, dist = gt.geo_space(qa, qb, ga, gb), haversine_matrix(qa, qb, ga, gb)
    else:
        space, dist = gt.xy_space(qa, qb, ga, gb), euclid_matrix(qa, qb, ga, gb)
    truth = gt.spatial_truth(space, None, junk)
    eff = np.where(junk, np.inf, dist)
    assert truth.rel_items.tolist() == np.argmin(eff, axis=1).tolist()
    assert truth.rel_items[0] == np.sort(same)[1]
    assert np.array_equal(truth.columns["gt_distance"], eff.min(axis=1))
    assert truth.n_junk.tolist() == [1, 1, 1]
    assert (eff[1] == eff[1].min()).sum() == 29               # all 29 kept copies tie for query 1


def test_nearest_looks_past_the_first_k_tree_neighbours():
    """12 integer points exactly 5 away: whichever of them has the lowest index wins, whatever k."""
    circle = np.array([(5, 0), (0, 5), (-5, 0), (0, -5), (3, 4), (4, 3), (-3, 4), (-4, 3),
                       (3, -4), (4, -3), (-3, -4), (-4, -3)], dtype=np.float64)
    rng = np.random.default_rng(91)
    angle, radius = rng.uniform(0, 2 * np.pi, 600), rng.uniform(5.5, 9, 600)
    far = np.column_stack([radius * np.cos(angle), radius * np.sin(angle)])  # the tree needs many leaves
    for shift in range(12):
        points = np.concatenate([far[:2], np.roll(circle, shift, axis=0), far[2:]])   # index 2 goes round
        space = gt.xy_space(np.zeros(1), np.zeros(1), points[:, 0], points[:, 1])
        for k in (1, 2, 5, 12, 20):
            tree, gidx = gt.gallery_tree(space, np.ones(len(points), bool))
            best, dist = gt.nearest(space, tree, gidx, k=k)
            assert best.tolist() == [2] and dist.tolist() == [5.0], (shift, k)


def test_geo_and_xy_truths_work_with_precomputed_rankings(write):
    rng = np.random.default_rng(71)
    nq, ng = 200, 500
    arrays = {"query/x": rng.uniform(0, 10, nq), "query/y": rng.uniform(0, 10, nq),
              "gallery/x": rng.uniform(0, 10, ng), "gallery/y": rng.uniform(0, 10, ng),
              "gallery/junk": rng.random(ng) < 0.05}
    scores = np.stack([rng.permutation(ng) for _ in range(nq)]).astype(np.float32) / ng
    arrays["ranking/item"] = np.argsort(-scores, axis=1, kind="stable").astype(np.int64)
    ks = (1, 5)
    result = evaluate(write(arrays), Options(protocol="xy", ks=ks, radius=1.0))
    dist = euclid_matrix(arrays["query/x"], arrays["query/y"], arrays["gallery/x"], arrays["gallery/y"])
    rel, junk, gt_distance = spatial_reference(dist, arrays["gallery/junk"], 1.0)
    expected = evaluate_all(scores.astype(np.float64), rel, junk, ks)
    for e in expected:
        e["top1_score"] = e["relevant_score"] = None                       # no ranking/score given
    compare(result, with_distances(expected, dist, gt_distance), ks, extra=("gt_distance", "top1_distance"))


# --------------------------------------------------------------------------- bad inputs


def small_qrels(**changes):
    arrays = {"query/emb": np.ones((3, 2), np.float32), "gallery/emb": np.ones((5, 2), np.float32),
              "qrels/query": np.array([0, 0, 1, 2]), "qrels/item": np.array([1, 4, 0, 2]),
              "qrels/rel": np.array([1, 0, -1, 1], np.int8)}
    for name, (row, value) in changes.items():
        arrays[name] = arrays[name].copy()
        arrays[name][row] = value
    return arrays


@pytest.mark.parametrize("changes, needle", [
    ({"qrels/query": (2, 3)}, "qrels/query: rows 2 hold query index 3, outside [0, 3)"),
    ({"qrels/query": (0, -1)}, "qrels/query: rows 0"),
    ({"qrels/item": (1, 5)}, "qrels/item: rows 1 hold gallery index 5, outside [0, 5)"),
    ({"qrels/item": (3, -2)}, "qrels/item: rows 3"),
    ({"qrels/rel": (2, -3)}, "qrels/rel: rows 2 hold -3"),
    ({"qrels/item": (1, 1)}, "qrels/rel: conflicting duplicate judgements: rows 0 and 1 judge (query 0, item 1)"),
])
def test_bad_qrels_raise_input_error(write, changes, needle):
    path = write(small_qrels(**changes))
    for judged_only in (False, True):
        with pytest.raises(InputError, match=needle.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
            evaluate(path, Options(protocol="qrels", judged_only=judged_only))
    group = ds.open_dataset(path)
    assert any(needle in str(p) for p in protocols.get("qrels").validate(truth_io.DatasetReader(group), 3, 5))
    with pytest.raises(InputError, match=needle.split(":")[0]):
        protocols.get("qrels").load(truth_io.DatasetReader(group), Options(protocol="qrels"), 0, 3, 5)


def test_identical_repeats_are_one_judgement(write):
    arrays = small_qrels()
    for name in ("qrels/query", "qrels/item", "qrels/rel"):
        arrays[name] = np.concatenate([arrays[name], arrays[name][:1], arrays[name]])
    result = evaluate(write(arrays), Options(protocol="qrels", ks=(1,)))
    assert result.per_query.column("n_relevant").to_pylist() == [1, 0, 1]
    assert result.per_query.column("n_junk").to_pylist() == [0, 1, 0]
    assert protocols.get("qrels").validate(truth_io.DatasetReader(ds.open_dataset(write(small_qrels(), name="ok.zarr"))), 3, 5) == []


@pytest.mark.parametrize("name, row, needle", [
    ("gallery/emb", 4, "gallery/emb: rows 4 contain NaN or Inf"),
    ("query/emb", 2, "query/emb: rows 2 contain NaN or Inf"),
])
def test_bad_embeddings_in_judged_only_ranking(write, name, row, needle):
    arrays = small_qrels()
    arrays[name] = arrays[name].copy()
    arrays[name][row, 1] = np.nan
    path = write(arrays)
    with pytest.raises(InputError, match=needle):
        evaluate(path, Options(protocol="qrels", judged_only=True))
    arrays[name][row] = 0.0
    with pytest.raises(InputError, match=name + ": rows .* all-zero"):
        evaluate(write(arrays, name="zero.zarr"), Options(protocol="qrels", judged_only=True))
    assert evaluate(write(arrays, name="dot.zarr"), Options(protocol="qrels", judged_only=True, similarity="dot"))


@pytest.mark.parametrize("protocol, name, row, value, needle", [
    ("geo", "query/lat", 1, 95.0, "query/lat: rows 1 lie outside [-90, 90] degrees"),
    ("geo", "gallery/lon", 3, np.nan, "gallery/lon: rows 3 are NaN or infinite"),
    ("geo", "gallery/lon", 0, 180.5, "gallery/lon: rows 0 lie outside [-180, 180] degrees"),
    ("xy", "query/y", 2, np.inf, "query/y: rows 2 are NaN or infinite"),
])
def test_bad_coordinates_raise_input_error(write, protocol, name, row, value, needle):
    a, b = coordinate_names(protocol)
    arrays = {"query/emb": np.ones((3, 2), np.float32), "gallery/emb": np.ones((5, 2), np.float32),
              f"query/{a}": np.zeros(3), f"query/{b}": np.zeros(3),
              f"gallery/{a}": np.linspace(0, 1, 5), f"gallery/{b}": np.zeros(5)}
    arrays[name][row] = value
    path = write(arrays)
    with pytest.raises(InputError, match=name):
        evaluate(path, Options(protocol=protocol))
    group = ds.open_dataset(path)
    with pytest.raises(InputError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        protocols.get(protocol).load(truth_io.DatasetReader(group), Options(protocol=protocol), 0, 3, 5)
    assert needle in [str(p) for p in protocols.get(protocol).validate(truth_io.DatasetReader(group), None, None)]
