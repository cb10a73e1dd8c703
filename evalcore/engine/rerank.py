"""Re-ranking's first phase: the exact neighbour lists of query ∪ gallery and the model every chunk uses.

Reads and checks every query and gallery row once (normalised float32, queries
first), finds each row's ``k1 + 1`` (or ``k2``) nearest rows and its farthest
one (``core.scan.neighbors``) on this process's threads or as cluster tasks
over row ranges, then builds the sparse model (``core.rerank.build_model``).
The chunks then rank against it (``core.scan.rerank``).
"""
from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

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
from evalcore.errors import OptionError, input_error
from evalcore.io import dataset as ds

#: rows of the union one search task (or thread) takes
SEARCH_ROWS = 2048
#: the most the symmetric search's mirrored candidates may take on the driver (``symmetric_fits``)
MIRRORED_BYTES = 512 * 2 ** 20
#: the most the query x gallery estimates the search keeps for the chunks may take (``keeps_estimates``)
KEPT_ESTIMATES_BYTES = 512 * 2 ** 20

#: float32 query x gallery estimates kept from the search, as (first query row, end row, rows x gallery array),
#: the array on a cluster a future of one held by the worker that multiplied those rows
Pieces = list[tuple[int, int, object]]


@dataclass(frozen=True)
class RerankPhase:
    """What the first phase hands the chunks: the model, the search's seconds (reading included), and the
    search's query x gallery estimates where they were kept (else no pieces; on a cluster futures, which the
    run holds until it ends so that their blocks stay on the workers)."""

    model: RerankModel
    search_s: float
    estimates: Pieces


def params_of(rerank: tuple[int, int, float]) -> RerankParams:
    k1, k2, lam = rerank
    return RerankParams(int(k1), int(k2), float(lam))


def read_side_into(group, name: str, out: np.ndarray) -> None:
    """``name`` (query/emb or gallery/emb) read, checked and L2-normalised into ``out``, a block of Zarr chunks
    at a time, decoded straight into ``out`` and normalised there (no temporary: fresh memory's first touch
    is most of a read's time on a VM)."""
    arr = group[name]
    step = max(arr.chunks[0], 1) * max(1, (1 << 16) // max(arr.chunks[0], 1))
    for a in range(0, arr.shape[0], step):
        piece = out[a:a + step]
        ds.read_into(arr, name, slice(a, a + step), piece)
        norms = row_norms(piece)
        problems = ds.check_embeddings(name, a, piece, True, norms=norms)
        if problems:
            raise problems[0]
        normalize_rows(piece, "cosine", norms, copy=False)


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
    shape.kind.needs_features("--rerank")
    n = shape.n_queries + shape.n_gallery
    if params.list_length > n:
        raise OptionError("--rerank", f"k1 + 1 = {params.k1 + 1} and k2 = {params.k2} must not exceed the "
                         f"{n} query and gallery rows")


def row_ranges(n: int, size: int = SEARCH_ROWS) -> list[tuple[int, int]]:
    return [(a, min(n, a + size)) for a in range(0, n, size)]


def search_rows(rows: np.ndarray, r0: int, r1: int, k: int) -> Neighbors:
    """Task of the one-sided search: the neighbour lists of rows r0 .. r1 against every row."""
    return search(rows[r0:r1], r0, ArrayColumns(rows), k)


def search_upper_rows(rows: np.ndarray, r0: int, r1: int, k: int,
                      n_query: int = 0) -> tuple[Neighbors, Mirrored, np.ndarray | None]:
    """Task of the symmetric search: rows r0 .. r1 against the rows from r0 on, the mirrored candidates of
    the later rows, and, for rows below ``n_query``, their estimates against the gallery (else None)."""
    kept = np.empty((min(r1, n_query) - r0, len(rows) - n_query), np.float32) if r0 < n_query else None
    near, mirrored = search_upper(rows, r0, r1, k, kept, n_query)
    return near, mirrored, kept


def symmetric_fits(n: int, k: int, size: int = SEARCH_ROWS) -> bool:
    """Whether the symmetric search's mirrored candidates stay within MIRRORED_BYTES on the driver: about
    k + 2 pairs of 20 bytes per row and task, over half the n / size tasks on average. Beyond it (hundreds
    of thousands of rows) the one-sided search, whose results are n x k, does twice the products instead."""
    return (n / size / 2) * n * (k + 2) * 20 <= MIRRORED_BYTES


def keeps_estimates(n_query: int, n_gallery: int, n: int, k: int) -> bool:
    """Whether the search keeps its query x gallery estimates for the chunks' scan (which then multiplies
    nothing again): the symmetric search runs and they fit KEPT_ESTIMATES_BYTES."""
    return symmetric_fits(n, k) and n_query * n_gallery * 4 <= KEPT_ESTIMATES_BYTES


def estimate_rows(pieces: Pieces | None, q0: int, q1: int) -> np.ndarray | None:
    """Rows q0 .. q1 of the kept estimates (a view when one piece holds them), None unless pieces hold them
    all."""
    parts = [np.asarray(values)[max(q0, a) - a:min(q1, b) - a] for a, b, values in pieces or ()
             if a < q1 and b > q0]
    if not parts or sum(len(x) for x in parts) != q1 - q0:
        return None
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def worker_pieces(keys: list[tuple[int, int, str]]) -> Pieces:
    """The kept blocks among ``keys`` (first row, end row, key) that the worker running this task holds. A
    chunk that runs elsewhere (its holder busy, or dead) finds fewer and multiplies its own rows instead."""
    from distributed import get_worker  # deferred: only cluster tasks call this

    data = get_worker().data
    return [(a, b, data[key]) for a, b, key in keys if key in data]


def nearest_here(rows: np.ndarray, k: int, map_fn=map, n_query: int = 0) -> tuple[Neighbors, Pieces]:
    """Every row's lists, row ranges run through ``map_fn`` (a thread pool's map); with ``n_query``, the
    query x gallery estimates too where ``keeps_estimates``."""
    if not symmetric_fits(len(rows), k, SEARCH_ROWS):
        return concat(list(map_fn(lambda span: search_rows(rows, span[0], span[1], k), row_ranges(len(rows))))), []
    kept = np.empty((n_query, len(rows) - n_query), np.float32) \
        if n_query and keeps_estimates(n_query, len(rows) - n_query, len(rows), k) else None

    def run(spans):
        return list(map_fn(lambda s: search_upper(rows, s[0], s[1], k,
                                                  None if kept is None or s[0] >= n_query else kept[s[0]:s[1]],
                                                  n_query), spans))

    return symmetric_search(rows, k, SEARCH_ROWS, map_fn, run=run), [] if kept is None else [(0, n_query, kept)]


def nearest_on(client, rows: np.ndarray, k: int, n_query: int = 0) -> tuple[Neighbors, Pieces]:
    """Every row's lists, one cluster task per row range (the rows are scattered once to every worker); with
    the symmetric search, the ranges are completed on this process. The kept estimates stay on the workers
    that computed them, as futures (chunk tasks read them there: ``worker_pieces``)."""
    held = client.scatter(rows, broadcast=True, hash=False)
    if not symmetric_fits(len(rows), k, SEARCH_ROWS):
        futures = [client.submit(search_rows, held, a, b, k, pure=False, retries=3) for a, b in row_ranges(len(rows))]
        return concat(client.gather(futures)), []
    keep = n_query if n_query and keeps_estimates(n_query, len(rows) - n_query, len(rows), k) else 0
    pieces: Pieces = []

    def run(spans):
        # submitted largest first: task a's share of the products falls with a (it multiplies rows a.. only)
        tasks = [client.submit(search_upper_rows, held, a, b, k, keep, pure=False, retries=3) for a, b in spans]
        pieces.extend((a, min(b, keep), client.submit(_item, t, 2, key=f"rerank-estimates-{a}-{uuid.uuid4().hex}"))
                      for (a, b), t in zip(spans, tasks) if a < keep)
        return client.gather([client.submit(_item, t, slice(0, 2), pure=False) for t in tasks])

    with ThreadPoolExecutor(2) as pool:
        return symmetric_search(rows, k, SEARCH_ROWS, pool.map, run=run), pieces


def _item(value, at):
    return value[at]


def build(group, shape: DatasetShape, rerank: tuple[int, int, float], *, client=None, map_fn=map) -> RerankModel:
    """The run's re-ranking model (module docstring)."""
    return build_timed(group, shape, rerank, client=client, map_fn=map_fn).model


def build_timed(group, shape: DatasetShape, rerank: tuple[int, int, float], *, client=None,
                map_fn=map) -> RerankPhase:
    """``build``, the seconds its neighbour search took (reading the rows included), and the search's
    query x gallery estimates where they fit (``keeps_estimates``)."""
    params = params_of(rerank)
    check_shape(shape, params)
    started = time.perf_counter()
    rows = union_rows(group)
    nearest, pieces = nearest_here(rows, params.list_length, map_fn, shape.n_queries) if client is None \
        else nearest_on(client, rows, params.list_length, shape.n_queries)
    search_s = time.perf_counter() - started
    return RerankPhase(build_model(rows, shape.n_queries, nearest, params), search_s, pieces)


def gallery_neighbors(group, k: int, *, similarity: str = "cosine", map_fn=map) -> Neighbors:
    """Each query's ``k`` nearest gallery items and its farthest one, exactly (``evalcore neighbors``)."""
    for name in ("query/emb", "gallery/emb"):
        if not ds.has(group, name):
            raise input_error(name, "missing (the neighbour search needs query and gallery embeddings)")
    n_gallery = group["gallery/emb"].shape[0]
    if int(k) != k or not 1 <= k <= n_gallery:
        raise OptionError("--k", f"{k} must be an integer from 1 to the {n_gallery} gallery rows")
    sides = []
    for name in ("query/emb", "gallery/emb"):
        raw = ds.read_array(group[name], name, slice(None))
        norms = row_norms(raw)
        problems = ds.check_embeddings(name, 0, raw, similarity == "cosine", norms=norms)
        if problems:
            raise problems[0]
        sides.append(normalize_rows(raw, similarity, norms))
    query, gallery = sides
    columns = ArrayColumns(gallery)
    parts = list(map_fn(lambda span: search(query[span[0]:span[1]], span[0], columns, int(k), similarity=similarity),
                        row_ranges(len(query))))
    return concat(parts) if parts else Neighbors(0, np.empty((0, int(k)), np.int64), np.empty((0, int(k)), np.float32),
                                                  np.empty(0, np.int64), np.empty(0, np.float32))
