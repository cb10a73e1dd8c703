"""Synthetic, clustered retrieval data for the demo and the benchmarks.

Identities are random unit directions; an image is its identity's direction
plus Gaussian noise, so a model is good but not perfect. Arrays are created
first and filled in row blocks, so a million-row gallery never sits in memory.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import zarr

from evalcore.io.dataset import SHARED_ATTRIBUTE

BLOCK = 65536


def _create(root, name, shape, dtype, chunk_rows):
    chunks = (min(chunk_rows, max(shape[0], 1)),) + tuple(shape[1:])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        extra = {"compressors": None} if name.endswith("/emb") else {}  # see dataset.write_dataset
        # every chunk stored, even all-zero ones: a missing chunk is an input error (see io/dataset.py)
        return root.create_array(name, shape=shape, dtype=dtype, chunks=chunks, fill_value=0,
                                 config={"write_empty_chunks": True}, **extra)


@dataclass(frozen=True)
class Clusters:
    """What a synthetic reid/class dataset holds: its shape and how its identities look.

    ``separation``: how many standard deviations of non-matching scores a
    matching score sits above them on average (4 gives mAP near 0.8 on a
    Market-sized gallery).
    ``distractors``: gallery share with label -1 (no identity); ``junk``: share
    flagged in ``gallery/junk``; ``unknown``: query share whose identity has no
    gallery image (open-set queries).
    """

    n_query: int
    n_gallery: int
    dims: int
    n_ids: int
    n_cams: int = 6
    dtype: str = "float32"
    separation: float = 4.0
    distractors: float = 0.14
    junk: float = 0.0
    unknown: float = 0.0
    protocol: str = "reid"


def write_clustered(path, clusters: Clusters, *, seed: int = 0, query_chunk: int = 1024, gallery_chunk: int = 32768,
                    keys: bool = True) -> None:
    """Write the dataset ``clusters`` describes, drawn from ``seed``, in chunks of (at most) ``query_chunk`` and
    ``gallery_chunk`` rows; ``keys``: with ``query/key`` and ``gallery/key``."""
    c = clusters
    n_query, n_gallery, dims, n_ids, dtype = c.n_query, c.n_gallery, c.dims, c.n_ids, c.dtype
    separation, distractors, junk, unknown = c.separation, c.distractors, c.junk, c.unknown
    rng = np.random.default_rng(seed)
    itemsize = np.dtype(dtype).itemsize
    # about 32 MiB per chunk whatever the width: a block read never decompresses much more than it uses
    gallery_chunk = min(gallery_chunk, max(1024, (32 << 20) // (dims * itemsize)))
    query_chunk = min(query_chunk, max(256, (32 << 20) // (dims * itemsize)))
    centers = rng.standard_normal((n_ids, dims)).astype(np.float32)
    centers /= np.linalg.norm(centers, axis=1, keepdims=True)
    # Same-identity cosine ~ 1/(1+n^2); other identities ~ N(0, 1/D) whatever n: pick the noise
    # norm n that puts matches `separation` standard deviations above the crowd.
    noise = np.sqrt(max(np.sqrt(dims) / separation - 1.0, 0.01))
    scale = np.float32(noise / np.sqrt(dims))
    root = zarr.open_group(str(path), mode="w")
    arrays = {}
    for side, n, chunk in (("query", n_query, query_chunk), ("gallery", n_gallery, gallery_chunk)):
        arrays[f"{side}/emb"] = _create(root, f"{side}/emb", (n, dims), dtype, chunk)
        arrays[f"{side}/label"] = _create(root, f"{side}/label", (n,), "int64", chunk)
        arrays[f"{side}/cam"] = _create(root, f"{side}/cam", (n,), "int64", chunk)
    if junk:
        arrays["gallery/junk"] = _create(root, "gallery/junk", (n_gallery,), "bool", gallery_chunk)
    if keys:
        for side, n, chunk in (("query", n_query, query_chunk), ("gallery", n_gallery, gallery_chunk)):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                arrays[f"{side}/key"] = root.create_array(f"{side}/key", shape=(n,), dtype=str,
                                                          chunks=(min(chunk, max(n, 1)),),
                                                          config={"write_empty_chunks": True})
    n_known_ids = max(1, int(round(n_ids * (1 - unknown)))) if unknown else n_ids
    for side, n in (("gallery", n_gallery), ("query", n_query)):
        for a in range(0, n, BLOCK):
            b = min(n, a + BLOCK)
            if side == "gallery":
                label = rng.integers(0, n_known_ids, b - a)
                label[rng.random(b - a) < distractors] = -1
            else:
                label = rng.integers(0, n_ids, b - a)
            emb = np.where(label[:, None] >= 0, centers[np.maximum(label, 0)], 0).astype(np.float32)
            emb += scale * rng.standard_normal((b - a, dims), dtype=np.float32)
            emb[label < 0] += rng.standard_normal((int((label < 0).sum()), dims), dtype=np.float32) / np.sqrt(dims)
            arrays[f"{side}/emb"][a:b] = emb.astype(dtype)
            arrays[f"{side}/label"][a:b] = label
            arrays[f"{side}/cam"][a:b] = rng.integers(1, c.n_cams + 1, b - a)
            if side == "gallery" and junk:
                arrays["gallery/junk"][a:b] = rng.random(b - a) < junk
            if keys:
                arrays[f"{side}/key"][a:b] = np.array([f"{side[0]}{i:07d}" for i in range(a, b)], dtype=object)
    root.attrs[SHARED_ATTRIBUTE] = {"version": 1, "protocol": c.protocol, "similarity": "cosine"}


def write_market_like(path, dims: int = 256, dtype="float32", seed: int = 0) -> None:
    """Market-1501's shape: 3,368 queries x 19,732 gallery, 751 identities, 6 cameras.

    About 14% distractors (label -1), 2% junk, and 2% of identities without a
    gallery image, so a few queries are unknown (open set).
    """
    write_clustered(path, Clusters(n_query=3368, n_gallery=19732, dims=dims, n_ids=751, n_cams=6, dtype=dtype,
                                   distractors=0.14, junk=0.02, unknown=0.02, protocol="reid"), seed=seed)
