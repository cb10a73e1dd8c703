"""Re-ranking's first phase: the exact neighbour lists of query ∪ gallery and the model every chunk uses.

Reads and checks every query and gallery row once (normalised float32, queries
first), finds each row's ``k1 + 1`` (or ``k2``) nearest rows and its farthest
one (``core.scan.neighbors``) on this process's threads or as cluster tasks
over row ranges, then builds the sparse model (``core.rerank.build_model``).
The chunks then rank against it (``core.scan.rerank``).
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from evalcore.core.rerank import RerankModel, RerankParams, build_model
from evalcore.core.scan.embeddings import normalize_rows, row_norms
from evalcore.core.scan.neighbors import (
    ArrayColumns,
    Mirrored,
    Neighbors,
    concat,
    search,
    search_upper,
    symmetric_search,
)
from evalcore.engine.plan import DatasetShape
from evalcore.errors import InputError
from evalcore.io import dataset as ds

#: rows of the union one search task (or thread) takes
SEARCH_ROWS = 2048
#: the most the symmetric search's mirrored candidates may take on the driver (``symmetric_fits``)
MIRRORED_BYTES = 512 * 2 ** 20


def params_of(rerank: tuple[int, int, float]) -> RerankParams:
    k1, k2, lam = rerank
    return RerankParams(int(k1), int(k2), float(lam))


def read_side_into(group, name: str, out: np.ndarray) -> None:
    """``name`` (query/emb or gallery/emb) read, checked and L2-normalised into ``out``, a block of Zarr chunks
    at a time (no second whole copy of the side)."""
    arr = group[name]
    step = max(arr.chunks[0], 1) * max(1, (1 << 16) // max(arr.chunks[0], 1))
    for a in range(0, arr.shape[0], step):
        raw = ds.read_array(arr, name, slice(a, a + step))
        norms = row_norms(raw)
        problems = ds.check_embeddings(name, a, raw, True, norms=norms)
        if problems:
            raise InputError(problems[0])
        out[a:a + len(raw)] = normalize_rows(raw, "cosine", norms)


def read_side(group, name: str) -> np.ndarray:
    """``name`` (query/emb or gallery/emb) read whole, checked, L2-normalised."""
    out = np.empty(group[name].shape, dtype=np.float32)
    read_side_into(group, name, out)
    return out


def union_rows(group) -> np.ndarray:
    """Every query row then every gallery row, normalised (the rows re-ranking relates to each other), read
    into one array."""
    nq, dims = group["query/emb"].shape
    out = np.empty((nq + group["gallery/emb"].shape[0], dims), dtype=np.float32)
    read_side_into(group, "query/emb", out[:nq])
    read_side_into(group, "gallery/emb", out[nq:])
    return out


def check_shape(shape: DatasetShape, params: RerankParams) -> None:
    """InputError when the dataset cannot be re-ranked: no embeddings, or fewer rows than the lists need."""
    if shape.ranked_by != "embeddings":
        raise InputError(f"--rerank: needs query/emb and gallery/emb (this dataset is ranked by {shape.ranked_by})")
    n = shape.n_queries + shape.n_gallery
    if params.list_length > n:
        raise InputError(f"--rerank: k1 + 1 = {params.k1 + 1} and k2 = {params.k2} must not exceed the "
                         f"{n} query and gallery rows")


def row_ranges(n: int, size: int = SEARCH_ROWS) -> list[tuple[int, int]]:
    return [(a, min(n, a + size)) for a in range(0, n, size)]


def search_rows(rows: np.ndarray, r0: int, r1: int, k: int) -> Neighbors:
    """Task of the one-sided search: the neighbour lists of rows r0 .. r1 against every row."""
    return search(rows[r0:r1], r0, ArrayColumns(rows), k)


def search_upper_rows(rows: np.ndarray, r0: int, r1: int, k: int) -> tuple[Neighbors, Mirrored]:
    """Task of the symmetric search: rows r0 .. r1 against the rows from r0 on, and the mirrored candidates of
    the later rows."""
    return search_upper(rows, r0, r1, k)


def symmetric_fits(n: int, k: int, size: int = SEARCH_ROWS) -> bool:
    """Whether the symmetric search's mirrored candidates stay within MIRRORED_BYTES on the driver: about
    k + 2 pairs of 20 bytes per row and task, over half the n / size tasks on average. Beyond it (hundreds
    of thousands of rows) the one-sided search, whose results are n x k, does twice the products instead."""
    return (n / size / 2) * n * (k + 2) * 20 <= MIRRORED_BYTES


def nearest_here(rows: np.ndarray, k: int, map_fn=map) -> Neighbors:
    """Every row's lists, row ranges run through ``map_fn`` (a thread pool's map)."""
    if symmetric_fits(len(rows), k, SEARCH_ROWS):
        return symmetric_search(rows, k, SEARCH_ROWS, map_fn)
    return concat(list(map_fn(lambda span: search_rows(rows, span[0], span[1], k), row_ranges(len(rows)))))


def nearest_on(client, rows: np.ndarray, k: int) -> Neighbors:
    """Every row's lists, one cluster task per row range (the rows are scattered once to every worker); with
    the symmetric search, the ranges are completed on this process."""
    held = client.scatter(rows, broadcast=True, hash=False)
    if not symmetric_fits(len(rows), k, SEARCH_ROWS):
        futures = [client.submit(search_rows, held, a, b, k, pure=False, retries=3) for a, b in row_ranges(len(rows))]
        return concat(client.gather(futures))

    def run(spans):
        # submitted largest first: task a's share of the products falls with a (it multiplies rows a.. only)
        return client.gather([client.submit(search_upper_rows, held, a, b, k, pure=False, retries=3)
                              for a, b in spans])

    with ThreadPoolExecutor(2) as pool:
        return symmetric_search(rows, k, SEARCH_ROWS, pool.map, run=run)


def build(group, shape: DatasetShape, rerank: tuple[int, int, float], *, client=None, map_fn=map) -> RerankModel:
    """The run's re-ranking model (module docstring)."""
    return build_timed(group, shape, rerank, client=client, map_fn=map_fn)[0]


def build_timed(group, shape: DatasetShape, rerank: tuple[int, int, float], *, client=None,
                map_fn=map) -> tuple[RerankModel, float]:
    """``build``, and the seconds its neighbour search took (reading the rows included)."""
    params = params_of(rerank)
    check_shape(shape, params)
    started = time.perf_counter()
    rows = union_rows(group)
    nearest = nearest_here(rows, params.list_length, map_fn) if client is None \
        else nearest_on(client, rows, params.list_length)
    search_s = time.perf_counter() - started
    return build_model(rows, shape.n_queries, nearest, params), search_s


def gallery_neighbors(group, k: int, *, similarity: str = "cosine", map_fn=map) -> Neighbors:
    """Each query's ``k`` nearest gallery items and its farthest one, exactly (``evalcore neighbors``)."""
    for name in ("query/emb", "gallery/emb"):
        if not ds.has(group, name):
            raise InputError(f"{name}: missing (the neighbour search needs query and gallery embeddings)")
    n_gallery = group["gallery/emb"].shape[0]
    if int(k) != k or not 1 <= k <= n_gallery:
        raise InputError(f"--k: {k} must be an integer from 1 to the {n_gallery} gallery rows")
    sides = []
    for name in ("query/emb", "gallery/emb"):
        raw = ds.read_array(group[name], name, slice(None))
        norms = row_norms(raw)
        problems = ds.check_embeddings(name, 0, raw, similarity == "cosine", norms=norms)
        if problems:
            raise InputError(problems[0])
        sides.append(normalize_rows(raw, similarity, norms))
    query, gallery = sides
    columns = ArrayColumns(gallery)
    parts = list(map_fn(lambda span: search(query[span[0]:span[1]], span[0], columns, int(k)),
                        row_ranges(len(query))))
    return concat(parts) if parts else Neighbors(0, np.empty((0, int(k)), np.int64), np.empty((0, int(k)), np.float32),
                                                  np.empty(0, np.int64), np.empty(0, np.float32))
