"""--similarity euclidean: ranked by the squared L2 distance of the rows as given, exactly, against a brute force.

The reference here is independent of evalcore: every squared distance is
computed in float64 from the float32 rows and rounded to float32, and where
the float64 sum lies too close to a float32 rounding midpoint to tell, it is
recomputed exactly with ``fractions.Fraction``; then each query's gallery is
sorted by (distance ascending, the tie rule, gallery index) with numpy, as
torchreid's ``eval_market1501`` sorts a distance matrix. The tie rule is the
one evalcore documents (README, "Ranks are counts"): under pessimistic ties a
non-relevant item at the same distance as a relevant one is ranked before it,
under optimistic ties after; rank 1 among equal distances is the lowest
gallery index of the items the rule puts first.
"""
from __future__ import annotations

import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from conftest import random_reid
from reference import relevance_reid

import evalcore
from evalcore.core.canonical import exact_sq_dist, sq_dist_block, sq_dist_pairs
from evalcore.errors import ArrayError, InputError, OptionError
from evalcore.io import dataset as ds

pytestmark = pytest.mark.filterwarnings("ignore:.*have no relevant gallery item")

CLI = str(Path(sys.executable).with_name("evalcore"))
KWARGS = {"query/emb": "query", "gallery/emb": "gallery", "query/label": "query_labels",
          "gallery/label": "gallery_labels", "query/cam": "query_cams", "gallery/cam": "gallery_cams",
          "gallery/junk": "gallery_junk"}


# --------------------------------------------------------------------------- the reference


def f32_nearest(x: Fraction) -> np.float32:
    """The float32 nearest to the rational x, ties to even (decided exactly)."""
    c = np.float32(float(x))
    best = c
    for other in (np.nextafter(c, np.float32(-np.inf)), np.nextafter(c, np.float32(np.inf))):
        d_best, d_other = abs(Fraction(float(best)) - x), abs(Fraction(float(other)) - x)
        if d_other < d_best or (d_other == d_best and int(np.array(other).view(np.uint32)) % 2 == 0):
            best = other
    return np.float32(best)


def exact_distances(q32: np.ndarray, g32: np.ndarray) -> np.ndarray:
    """float32 nearest to the exact sum_k (q_k - g_k)^2 for every pair: float64 where it tells, Fraction where not."""
    q = q32.astype(np.float64)
    g = g32.astype(np.float64)
    d64 = ((q[:, None, :] - g[None, :, :]) ** 2).sum(axis=2)
    out = d64.astype(np.float32)
    err = 4 * q.shape[1] * 2.0 ** -53 * d64 + 1e-300  # any float64 summation of D >= 0 terms, generously
    doubt = ((d64 - err).astype(np.float32) != out) | ((d64 + err).astype(np.float32) != out)
    for i, j in zip(*np.nonzero(doubt)):
        out[i, j] = f32_nearest(sum((Fraction(float(a)) - Fraction(float(b))) ** 2 for a, b in zip(q32[i], g32[j])))
    return out


def brute_force(dist: np.ndarray, rel: np.ndarray, junk: np.ndarray, ties: str = "pessimistic",
                max_rank: int = 10) -> list[dict]:
    """Per query: ranks of the relevant items, AP, rank 1 and its distance, from one argsort of each row."""
    out = []
    for i in range(dist.shape[0]):
        idx = np.flatnonzero(~junk[i])
        d, r = dist[i, idx].astype(np.float64), rel[i, idx]
        tie = r.astype(int) if ties == "pessimistic" else (~r).astype(int)
        order = np.lexsort((idx, tie, d))  # distance ascending, then the tie rule, then the gallery index
        ranks = np.flatnonzero(r[order]) + 1
        n = len(ranks)
        out.append({"n_relevant": n, "first_rank": int(ranks[0]) if n else None,
                    "last_rank": int(ranks[-1]) if n else None,
                    "ap": float(np.mean(np.arange(1, n + 1) / ranks)) if n else None,
                    "top1": int(idx[order[0]]) if len(order) else None,
                    "top1_score": float(d[order[0]]) if len(order) else None,
                    "relevant_score": float(d[r].min()) if n else None,
                    "hit_at_5": float(ranks[0] <= 5) if n else None})
    return out


def reid_reference(arrays: dict, ties: str = "pessimistic") -> list[dict]:
    q32 = np.asarray(arrays["query/emb"]).astype(np.float32)
    g32 = np.asarray(arrays["gallery/emb"]).astype(np.float32)
    rel, junk = relevance_reid(arrays["query/label"], arrays["query/cam"], arrays["gallery/label"],
                               arrays["gallery/cam"], arrays.get("gallery/junk"))
    return brute_force(exact_distances(q32, g32), rel, junk, ties)


def assert_matches(result, want: list[dict]) -> None:
    got = result.per_query.to_pylist()
    assert len(got) == len(want)
    for row, ref in zip(got, want):
        for name, value in ref.items():
            # ranks, items and distances exactly; means of fractions (AP) to their last bits
            expected = pytest.approx(value, rel=1e-12) if name in ("ap", "hit_at_5") and value is not None else value
            assert row[name] == expected, (row["query"], name, row[name], value)


def evaluate(arrays: dict, **kw):
    return evalcore.evaluate(**{KWARGS[k]: v for k, v in arrays.items() if k in KWARGS}, protocol="reid",
                             similarity="euclidean", ks=(1, 5), **kw)


# --------------------------------------------------------------------------- data with planted ties


def with_ties(seed: int, n_query=120, n_gallery=700, dims=12, dtype=np.float32) -> dict:
    """Clustered reid data, then exact ties planted: duplicated gallery rows under other identities, gallery rows
    equal to a query (distance 0), and a block of small-integer rows where many distances are equal."""
    rng = np.random.default_rng(seed)
    d = random_reid(rng, n_query=n_query, n_gallery=n_gallery, dims=dims, n_ids=30)
    g, q = d["gallery/emb"], d["query/emb"]
    g[100:160] = g[300:360]                       # duplicates of other identities' rows
    g[400:420] = q[:20]                           # distance 0 to queries 0..19
    d["gallery/label"][400:410] = d["query/label"][:10]
    ints = rng.integers(-2, 3, (120, dims)).astype(np.float32)
    g[500:620] = ints                             # integer rows: exact, equal distances to integer queries
    q[60:90] = ints[rng.integers(0, 120, 30)] + rng.integers(-1, 2, (30, dims))
    d["query/emb"], d["gallery/emb"] = q.astype(dtype), g.astype(dtype)
    return d


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_ranks_match_a_brute_force_argsort_of_squared_distances(dtype):
    data = with_ties(3, dtype=dtype)
    assert_matches(evaluate(data), reid_reference(data))


def test_optimistic_ties_match_the_brute_force():
    data = with_ties(4)
    assert_matches(evaluate(data, ties="optimistic"), reid_reference(data, "optimistic"))


def test_a_constant_gallery_and_near_duplicate_rows_are_exact():
    """Every pair tied (the dense canonical path), and rows a few ulps from the queries (the squared norms cancel)."""
    rng = np.random.default_rng(5)
    data = random_reid(rng, n_query=40, n_gallery=300, dims=8, n_ids=10)
    flat = {**data, "gallery/emb": np.tile(data["gallery/emb"][:1], (300, 1))}
    assert_matches(evaluate(flat), reid_reference(flat))
    near = dict(data)
    g = data["gallery/emb"].copy()
    for k in range(40):  # queries' rows moved by 1..3 ulps in a few coordinates
        g[k] = data["query/emb"][k]
        for step in range(1, 4):
            g[40 * step + k] = np.nextafter(g[k], np.float32(np.inf) * np.sign(rng.standard_normal(8)))
    near["gallery/emb"] = g
    assert_matches(evaluate(near), reid_reference(near))


def test_scaled_inputs_keep_their_ranks_and_report_scaled_distances():
    """Rows multiplied by 2**40 (no rounding) give the same ranks and distances times 2**80: no scale is assumed."""
    data = with_ties(6)
    big = {**data, "query/emb": data["query/emb"] * 2.0 ** 40, "gallery/emb": data["gallery/emb"] * 2.0 ** 40}
    a, b = evaluate(data).per_query, evaluate(big).per_query
    assert a.column("ap").to_pylist() == b.column("ap").to_pylist()
    assert a.column("top1").to_pylist() == b.column("top1").to_pylist()
    scaled = [None if x is None else x * 2.0 ** 80 for x in a.column("top1_score").to_pylist()]
    assert b.column("top1_score").to_pylist() == scaled


def test_tiny_rows_whose_squared_distances_are_subnormal_match_the_brute_force():
    """Rows scaled by 2**-70: squared distances fall below float32's normal range, where rounding makes new ties
    (and products underflow in the estimates): still the brute force's ranks and distances."""
    data = with_ties(16)
    tiny = {**data, "query/emb": data["query/emb"] * np.float32(2.0 ** -70),
            "gallery/emb": data["gallery/emb"] * np.float32(2.0 ** -70)}
    assert_matches(evaluate(tiny), reid_reference(tiny))


# --------------------------------------------------------------------------- the canonical distance itself


def test_canonical_distance_is_the_nearest_float32_also_at_rounding_midpoints():
    """Pairs whose exact squared distance is a float32 rounding midpoint, or a hair beside one: the float64 sum
    cannot tell them, the exact sum must (checked against Fraction)."""
    a = np.float32(1 + 2.0 ** -12)  # a^2 = 1 + 2^-11 + 2^-24: exactly half a float32 ulp above 1 + 2^-11
    rows_q = np.array([[a, 0, 0], [a, 2.0 ** -40, 0], [a, 0, 0], [3.0, -a, 2.0 ** -30]], dtype=np.float32)
    rows_g = np.array([[0, 0, 0], [0, 0, 0], [0, 2.0 ** -40, 0], [3.0, 0, 0]], dtype=np.float32)
    want = [f32_nearest(sum((Fraction(float(x)) - Fraction(float(y))) ** 2 for x, y in zip(q, g)))
            for q, g in zip(rows_q, rows_g)]
    assert want[0] == np.float32(1 + 2.0 ** -11) and want[1] > want[0]  # ties to even; a hair above rounds up
    idx = np.arange(len(rows_q))
    assert sq_dist_pairs(rows_q, rows_g, idx, idx).tolist() == [float(w) for w in want]
    assert [exact_sq_dist(q, g) for q, g in zip(rows_q, rows_g)] == want
    assert np.diag(sq_dist_block(rows_q, rows_g)).tolist() == [float(w) for w in want]


def test_block_and_pair_paths_agree_with_the_exact_reference():
    rng = np.random.default_rng(8)
    a = (rng.standard_normal((60, 33)) * rng.choice([1e-20, 1.0, 1e15], (60, 1))).astype(np.float32)
    b = np.concatenate([a[:20] * np.float32(1 + 2.0 ** -23), rng.standard_normal((40, 33)).astype(np.float32)])
    want = exact_distances(a, b)
    ia, ib = np.divmod(np.arange(60 * 60), 60)
    assert np.array_equal(sq_dist_block(a, b), want)
    assert np.array_equal(sq_dist_pairs(a, b, ia, ib).reshape(60, 60), want)


# --------------------------------------------------------------------------- where the work runs


@pytest.fixture(scope="module")
def tiled():
    """More queries than a query tile (512) and gallery items than a gallery tile (4096), with planted ties."""
    rng = np.random.default_rng(9)
    data = random_reid(rng, n_query=600, n_gallery=4500, dims=8, n_ids=200)
    data["gallery/emb"][100:140] = data["gallery/emb"][4200:4240]
    data["gallery/emb"][4400:4450] = data["query/emb"][500:550]
    return data


def test_chunk_rows_do_not_change_the_results(tiled):
    base = evaluate(tiled, chunk_rows=4096)
    for rows in (97, 512):
        other = evaluate(tiled, chunk_rows=rows)
        assert other.per_query.equals(base.per_query) and other.cmc.equals(base.cmc)
    assert_matches(base, reid_reference(tiled))


@pytest.mark.cluster
def test_a_local_cluster_of_two_processes_gives_the_threads_results(tiled):
    from distributed import Client, LocalCluster

    local = evaluate(tiled, chunk_rows=256)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c, \
            Client(c) as client:
        remote = evaluate(tiled, chunk_rows=256, client=client)
    assert remote.per_query.equals(local.per_query) and remote.summary.equals(local.summary)


# --------------------------------------------------------------------------- as torchreid users call it


def torchreid_distmat(qf: np.ndarray, gf: np.ndarray) -> np.ndarray:
    """torchreid.metrics.distance.euclidean_squared_distance, in numpy float32: ||q||^2 + ||g||^2 - 2 q g^T."""
    qf, gf = qf.astype(np.float32), gf.astype(np.float32)
    return ((qf ** 2).sum(1, keepdims=True) + (gf ** 2).sum(1)[None, :] - 2 * qf @ gf.T).astype(np.float32)


@pytest.mark.parametrize("integers", [True, False])
def test_torchreid_evaluate_rank_on_a_users_euclidean_distmat_gives_the_same_map_and_cmc(integers):
    """torchreid's users compute ``distmat = compute_distance_matrix(qf, gf, "euclidean")`` and call
    ``evaluate_rank(distmat, q_pids, g_pids, q_camids, g_camids)``. Small-integer features make every distance
    exact in float32 (ties included); well-separated random ones leave their float32 rounding no tie to flip."""
    from evalcore.compat.torchreid import evaluate_rank

    rng = np.random.default_rng(10)
    data = random_reid(rng, n_query=80, n_gallery=600, dims=16, n_ids=25, global_junk=0)
    del data["gallery/junk"]
    if integers:
        data["query/emb"] = rng.integers(-3, 4, data["query/emb"].shape).astype(np.float32)
        data["gallery/emb"] = rng.integers(-3, 4, data["gallery/emb"].shape).astype(np.float32)
    distmat = torchreid_distmat(data["query/emb"], data["gallery/emb"])
    cmc, mAP = evaluate_rank(distmat, data["query/label"], data["gallery/label"], data["query/cam"],
                             data["gallery/cam"], max_rank=20)
    result = evaluate(data, max_rank=20)
    assert result.summary.column("map").to_pylist()[0] == pytest.approx(float(mAP), rel=1e-12)
    ours = np.array(result.cmc.column(result.cmc.column_names[-1]).to_pylist(), dtype=np.float64)
    np.testing.assert_allclose(ours[:20], cmc.astype(np.float64), rtol=1e-6, atol=0)


# --------------------------------------------------------------------------- the other doors


def test_the_dataset_attribute_and_the_command_line_give_the_api_result(tmp_path):
    data = with_ties(11)
    del data["gallery/junk"], data["query/group"]
    path = tmp_path / "ds.zarr"
    ds.write_dataset(path, data, {"protocol": "reid", "similarity": "euclidean"})
    by_attribute = evalcore.evaluate(str(path), ks=(1, 5))
    assert by_attribute.per_query.equals(evaluate(data).per_query)
    assert by_attribute.run["options"]["similarity"] == "euclidean"
    done = subprocess.run([CLI, "evaluate", str(path), "--similarity", "euclidean", "--ks", "1,5", "--out",
                           str(tmp_path / "out"), "--quiet"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    import pyarrow.parquet as pq
    cli = pq.read_table(tmp_path / "out" / "per_query.parquet")
    assert cli.column("ap").to_pylist() == by_attribute.per_query.column("ap").to_pylist()
    assert cli.column("top1_score").to_pylist() == by_attribute.per_query.column("top1_score").to_pylist()


def test_inputs_without_features_and_score_thresholds_are_refused_naming_the_option():
    q, g = np.zeros((3, 4), np.float32), np.ones((5, 4), np.float32)
    labels = dict(query_labels=np.arange(3), gallery_labels=np.arange(5) % 3)
    with pytest.raises(InputError, match="similarity") as given:
        evalcore.evaluate(scores=np.zeros((3, 5)), **labels, similarity="euclidean")
    assert "\n" not in str(given.value)
    with pytest.raises(OptionError, match="threshold") as thr:
        evalcore.evaluate(query=q, gallery=g, **labels, similarity="euclidean", threshold=0.5)
    assert "euclidean" in str(thr.value) and "\n" not in str(thr.value)


def test_rankings_with_euclidean_are_refused_naming_the_option(tmp_path):
    path = tmp_path / "r.zarr"
    ds.write_dataset(path, {"query/label": np.arange(2), "gallery/label": np.arange(3),
                            "ranking/item": np.array([[0, 1, 2], [2, 1, 0]], dtype=np.int64)})
    with pytest.raises(OptionError, match="similarity.*ranking/item") as refused:
        evalcore.evaluate(str(path), similarity="euclidean")
    assert "\n" not in str(refused.value)


def test_rows_whose_squared_distances_leave_float32_are_refused_naming_them():
    data = with_ties(12)
    data["gallery/emb"][7] = 2.0 ** 63
    with pytest.raises(ArrayError, match=r"gallery: rows 7 have norms") as refused:
        evaluate(data)
    assert refused.value.rows == [7] and "euclidean" in str(refused.value)
    assert isinstance(refused.value, InputError)


def test_judged_only_ranks_each_query_among_its_judged_items_by_distance():
    """qrels by id (BEIR's layout), judged-only: each query's judged documents sorted by squared distance."""
    rng = np.random.default_rng(13)
    q = rng.integers(-2, 3, (30, 6)).astype(np.float32)      # integer rows: many exact ties
    g = rng.integers(-2, 3, (200, 6)).astype(np.float32)
    qrels = {f"q{i}": {f"d{j}": int(rng.integers(0, 2)) for j in rng.choice(200, 25, replace=False)}
             for i in range(30)}
    result = evalcore.evaluate(query=q, gallery=g, query_ids=[f"q{i}" for i in range(30)],
                               gallery_ids=[f"d{j}" for j in range(200)], qrels=qrels, judged_only=True,
                               similarity="euclidean", ks=(1,))
    dist = exact_distances(q, g)
    rows = {r["key"]: r for r in result.per_query.to_pylist()}
    for i in range(30):
        judged = np.array(sorted(int(d[1:]) for d in qrels[f"q{i}"]))
        rel = np.array([qrels[f"q{i}"][f"d{j}"] >= 1 for j in judged])
        want = brute_force(dist[i:i + 1, judged], rel[None, :], np.zeros((1, len(judged)), bool))[0]
        row = rows[f"q{i}"]
        if want["n_relevant"]:
            assert (row["first_rank"], row["ap"]) == (want["first_rank"], pytest.approx(want["ap"], rel=1e-12))
            assert row["relevant_score"] == want["relevant_score"]
        assert row["top1_score"] == want["top1_score"]


# --------------------------------------------------------------------------- neighbors and ann_recall


def test_neighbors_are_the_k_nearest_by_squared_distance_lower_index_first_on_ties():
    """``evalcore.neighbors`` under euclidean: each query's k nearest items by the brute force's argsort
    (distance, then gallery index), their squared distances in ``score``; across gallery tiles (> 4096)."""
    rng = np.random.default_rng(14)
    q = rng.integers(-2, 3, (70, 5)).astype(np.float32)
    g = np.concatenate([rng.integers(-2, 3, (4200, 5)), rng.standard_normal((300, 5))]).astype(np.float32)
    k = 12
    table = evalcore.neighbors(query=q, gallery=g, k=k, similarity="euclidean", threads=2)
    dist = exact_distances(q, g)
    order = np.lexsort((np.broadcast_to(np.arange(len(g)), dist.shape), dist), axis=1)[:, :k]
    assert table.column("item").to_numpy().reshape(-1, k).tolist() == order.tolist()
    want = np.take_along_axis(dist, order, axis=1)
    assert table.column("score").to_numpy().reshape(-1, k).tolist() == want.tolist()


def test_ann_recall_counts_distance_ties_as_hits():
    """An ANN list of items at the k-th exact distance (tied, other ids) scores full recall; farther ones do not."""
    rng = np.random.default_rng(15)
    q = rng.integers(-1, 2, (20, 4)).astype(np.float32)
    g = rng.integers(-1, 2, (400, 4)).astype(np.float32)
    k = 5
    dist = exact_distances(q, g)
    kth = np.sort(dist, axis=1)[:, k - 1]
    ann = np.stack([np.flatnonzero(dist[i] <= kth[i])[::-1][:k] for i in range(20)])  # ties, other ids
    assert evalcore.ann_recall(ann, query=q, gallery=g, k=k, similarity="euclidean").recall == 1.0
    far = np.stack([np.argsort(-dist[i], kind="stable")[:k] for i in range(20)])  # the farthest items
    want = np.mean([np.sum(dist[i, far[i]] <= kth[i]) / k for i in range(20)])
    assert evalcore.ann_recall(far, query=q, gallery=g, k=k, similarity="euclidean").recall == pytest.approx(want)
