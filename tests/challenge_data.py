"""Shared data of the tests/test_challenge_*.py files: a small truth with public/private splits, submissions,
and a brute-force mAP written here, independently of evalcore's engine."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from evalcore.io import dataset as ds

DIMS = 16


def unit(x):
    x = np.asarray(x, dtype=np.float64)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def make_truth(path, n_query=40, n_gallery=600, judged=12, seed=0, splits=True):
    """A qrels truth bundle; every third query private (when ``splits``). Returns the arrays written."""
    rng = np.random.default_rng(seed)
    qi = np.repeat(np.arange(n_query), judged)
    ii = np.concatenate([rng.choice(n_gallery, judged, replace=False) for _ in range(n_query)])
    rel = (rng.random(qi.size) < 0.35).astype(np.int8)
    rel[::judged] = 1
    arrays = {"query/key": np.array([f"q{i}" for i in range(n_query)], object),
              "gallery/key": np.array([f"g{i}" for i in range(n_gallery)], object),
              "qrels/query": qi, "qrels/item": ii, "qrels/rel": rel}
    if splits:
        arrays["query/split"] = np.array(["private" if i % 3 == 0 else "public" for i in range(n_query)], object)
    ds.write_dataset(path, arrays, {"protocol": "qrels", "dims": DIMS})
    return arrays


def submission(truth, seed=1, noise=1.0):
    """(query, gallery) float32 unit vectors: each query near the mean of its relevant items, plus noise."""
    rng = np.random.default_rng(seed)
    n_gallery, n_query = len(truth["gallery/key"]), len(truth["query/key"])
    gallery = unit(rng.standard_normal((n_gallery, DIMS)))
    query = np.zeros((n_query, DIMS))
    rel = truth["qrels/rel"] == 1
    np.add.at(query, truth["qrels/query"][rel], gallery[truth["qrels/item"][rel]])
    query = unit(unit(query) + noise * rng.standard_normal((n_query, DIMS)) / np.sqrt(DIMS))
    return query.astype(np.float32), gallery.astype(np.float32)


def save(folder: Path, query, gallery, ready=True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / "query.npy", query)
    np.save(folder / "gallery.npy", gallery)
    if ready:
        (folder / "READY").write_text("")
    return folder


def reference_aps(truth, query, gallery) -> np.ndarray:
    """Brute force, per query: cosine scores of its judged items (rel >= 0) only, sorted best first with
    non-relevant items first among equal scores (pessimistic), AP = mean over relevant items of precision at
    their rank."""
    q, g = unit(query), unit(gallery)
    aps = []
    for i in range(len(q)):
        sel = (truth["qrels/query"] == i) & (truth["qrels/rel"] >= 0)
        items, rel = truth["qrels/item"][sel], truth["qrels/rel"][sel] == 1
        s = g[items] @ q[i]
        order = sorted(range(len(items)), key=lambda k: (-s[k], bool(rel[k]), items[k]))
        hits, ap = 0, 0.0
        for rank, k in enumerate(order, start=1):
            if rel[k]:
                hits += 1
                ap += hits / rank
        aps.append(ap / rel.sum())
    return np.array(aps)


def reference_split_maps(truth, query, gallery) -> dict[str, float]:
    aps = reference_aps(truth, query, gallery)
    splits = truth.get("query/split", np.array(["public"] * len(aps), object))
    return {s: float(aps[splits == s].mean()) for s in sorted(set(splits.tolist()))} | {"all": float(aps.mean())}
