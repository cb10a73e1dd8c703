"""Each importer end to end: files written with the format's own library -> `evalcore import` ->
`evalcore evaluate` -> the same metrics as a brute-force reference on the source arrays."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from reference import cosine_scores, evaluate_all, relevance_reid
from test_reference import compare, quantized

from evalcore.engine.evaluate import Options, evaluate

CLI = [str(Path(sys.executable).with_name("evalcore"))]


def cli(*args):
    done = subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "EVALCORE_DEBUG": ""})
    assert done.returncode == 0, done.stderr
    return done


@pytest.fixture(scope="module")
def source():
    """Re-id features on a 1/64 grid (exact float32 scores), labels with -1 junk and 0 distractors."""
    rng = np.random.default_rng(31)
    centers = rng.standard_normal((30, 8))
    gl = rng.integers(1, 30, 400)
    gl[:20] = -1
    gl[20:40] = 0
    ql = rng.integers(1, 30, 60)
    data = {"query/emb": centers[ql] + 0.7 * rng.standard_normal((60, 8)),
            "gallery/emb": centers[np.abs(gl)] + 0.7 * rng.standard_normal((400, 8)),
            "query/label": ql, "gallery/label": gl,
            "query/cam": rng.integers(1, 4, 60), "gallery/cam": rng.integers(1, 4, 400)}
    return quantized(data)


def expected_reid(src, ks):
    """Person_reID_baseline's rule: -1 is junk for every query, 0 is an ordinary distractor."""
    rel, junk = relevance_reid(src["query/label"], src["query/cam"], src["gallery/label"], src["gallery/cam"],
                               src["gallery/label"] == -1)
    return evaluate_all(cosine_scores(src["query/emb"], src["gallery/emb"], "dot"), rel, junk, ks)


KS = (1, 5)
OPTS = Options(protocol="reid", ks=KS, similarity="dot")


def test_mat_round_trip(tmp_path, source):
    import scipy.io

    mat = tmp_path / "pytorch_result.mat"
    scipy.io.savemat(mat, {"query_f": source["query/emb"], "query_label": source["query/label"][None],
                           "query_cam": source["query/cam"][None], "gallery_f": source["gallery/emb"],
                           "gallery_label": source["gallery/label"][None],
                           "gallery_cam": source["gallery/cam"][None]})
    cli("import", "mat", mat, "--out", tmp_path / "ds.zarr")
    compare(evaluate(tmp_path / "ds.zarr", OPTS), expected_reid(source, KS), KS)


def test_npz_round_trip(tmp_path, source):
    npz = tmp_path / "features.npz"
    np.savez(npz, qf=source["query/emb"], gf=source["gallery/emb"], q_pids=source["query/label"],
             g_pids=source["gallery/label"], q_camids=source["query/cam"], g_camids=source["gallery/cam"])
    cli("import", "npy", npz, "--out", tmp_path / "ds.zarr", "--junk-label", "-1")
    compare(evaluate(tmp_path / "ds.zarr", OPTS), expected_reid(source, KS), KS)


def test_parquet_round_trip(tmp_path, source):
    for side in ("query", "gallery"):
        pq.write_table(pa.table({"emb": pa.array(list(source[f"{side}/emb"].astype(np.float64))),
                                 "label": source[f"{side}/label"], "cam": source[f"{side}/cam"],
                                 "key": [f"{side}-{i}" for i in range(len(source[f"{side}/label"]))]}),
                       tmp_path / f"{side}.parquet")
    cli("import", "parquet", tmp_path / "query.parquet", tmp_path / "gallery.parquet", "--out", tmp_path / "ds.zarr",
        "--junk-label", "-1")
    result = evaluate(tmp_path / "ds.zarr", OPTS)
    compare(result, expected_reid(source, KS), KS)
    assert result.per_query.column("key").to_pylist()[:2] == ["query-0", "query-1"]


def test_faiss_json_round_trip_scores_places_by_the_nearest_reference(tmp_path):
    rng = np.random.default_rng(4)
    refs = [{"id": f"r{i}", "lat": float(37.5 + rng.random() * 0.05), "lon": float(127 + rng.random() * 0.05)}
            for i in range(40)]
    queries = [{"id": f"q{i}", "lat": float(37.5 + rng.random() * 0.05), "lon": float(127 + rng.random() * 0.05)}
               for i in range(12)]
    (tmp_path / "results").mkdir()
    lists = {}
    for q in queries:
        order = rng.permutation(40)[:10]
        lists[q["id"]] = order
        (tmp_path / "results" / f"{q['id']}.json").write_text(json.dumps(
            {"query": q["id"], "results": [{"id": f"r{j}", "score": float(1 - k / 10)} for k, j in enumerate(order)]}))
    (tmp_path / "query_index.json").write_text(json.dumps(queries))
    (tmp_path / "reference_index.json").write_text(json.dumps(refs))
    cli("import", "faiss-json", tmp_path, "--out", tmp_path / "ds.zarr")
    result = evaluate(tmp_path / "ds.zarr", Options(protocol="geo", ks=(1, 5, 10)))
    # the reference: haversine to every reference, nearest is the one relevant item
    lat = np.radians([r["lat"] for r in refs])
    lon = np.radians([r["lon"] for r in refs])
    for row, q in zip(result.per_query.to_pylist(), queries):
        qa, qo = np.radians(q["lat"]), np.radians(q["lon"])
        h = np.sin((lat - qa) / 2) ** 2 + np.cos(qa) * np.cos(lat) * np.sin((lon - qo) / 2) ** 2
        dist = 2 * 6371008.8 * np.arcsin(np.sqrt(h))
        nearest = int(np.argmin(dist))
        position = np.nonzero(lists[q["id"]] == nearest)[0]
        want = int(position[0]) + 1 if position.size else None
        assert row["first_rank"] == want
        assert row["gt_distance"] == pytest.approx(dist[nearest], rel=1e-9)
        assert row["top1_key"] == f"r{lists[q['id']][0]}"
        assert row["hit_at_10"] == (1.0 if want else 0.0)


def test_trec_qrels_merged_into_a_dataset_round_trip(tmp_path, source):
    from evalcore.io import dataset as ds

    keys_q = [f"Q{i}" for i in range(60)]
    keys_g = [f"D{i}" for i in range(400)]
    base = tmp_path / "base.zarr"
    ds.write_dataset(base, {"query/emb": source["query/emb"], "gallery/emb": source["gallery/emb"],
                            "query/key": keys_q, "gallery/key": keys_g})
    rng = np.random.default_rng(9)
    judged = {}
    lines = []
    for qi in range(60):
        for gi in rng.choice(400, 12, replace=False):
            rel = int(rng.choice([2, 1, 0, 0, -1]))
            judged[(qi, int(gi))] = rel
            lines.append(f"{keys_q[qi]} 0 {keys_g[gi]} {rel}")
    (tmp_path / "qrels.txt").write_text("\n".join(lines) + "\n")
    cli("import", "trec", tmp_path / "qrels.txt", "--dataset", base, "--out", tmp_path / "ds.zarr")
    for judged_only in (False, True):
        result = evaluate(tmp_path / "ds.zarr", Options(protocol="qrels", ks=KS, similarity="dot",
                                                         judged_only=judged_only))
        rel = np.zeros((60, 400), bool)
        junk = np.zeros((60, 400), bool)
        if judged_only:
            junk[:] = True
        for (qi, gi), r in judged.items():
            rel[qi, gi] = r > 0
            # a negative TREC grade is in the pool, not judged (trec_eval; contract v4): ranked, never relevant,
            # never junk; --judged-only (trec_eval -J) leaves it out with the unjudged items (it was judged 0 before)
            junk[qi, gi] = judged_only and r < 0
        scores = cosine_scores(source["query/emb"], source["gallery/emb"], "dot")
        compare(result, evaluate_all(scores, rel, junk, KS), KS)
