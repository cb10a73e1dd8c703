"""αQE and DBA before the evaluation: the dataset with its query and gallery vectors replaced.

Reads and checks the embeddings once (normalised float32), finds the exact
neighbour lists (``core.scan.neighbors``: canonical scores, ties to the lower
index) on this process's threads or as cluster tasks over row ranges, sums
them (``core.expansion``), and writes the new vectors into an in-memory Zarr
group whose arrays are created first; every other array (labels, cameras,
junk, keys, qrels) is copied unchanged. The ordinary evaluation then runs on
that group, so every protocol and metric applies. Memory: the two sides'
normalised rows, their replacements in the group, and one block of sums (the
original gallery is let go before αQE reads the augmented one).
"""
from __future__ import annotations

import warnings

import numpy as np
import zarr

from evalcore.core.expansion import Expansion, expand_rows, without_self
from evalcore.core.scan.embeddings import normalize_rows, row_norms
from evalcore.core.scan.neighbors import ArrayColumns, Neighbors, concat, search
from evalcore.engine.options import Options
from evalcore.engine.plan import DatasetShape
from evalcore.errors import input_error
from evalcore.io import dataset as ds

QE = "--query-expansion"
DBA = "--database-augmentation"
EMBEDDINGS = ("query/emb", "gallery/emb")
#: rows per search task (or thread) and per block of sums
BLOCK_ROWS = 2048


def check_shape(shape: DatasetShape, options: Options) -> None:
    """InputError when the dataset cannot be expanded: no embeddings, or fewer gallery rows than K needs."""
    for option, value, most in ((DBA, options.database_augmentation, shape.n_gallery - 1),
                                (QE, options.query_expansion, shape.n_gallery)):
        if value is None:
            continue
        shape.kind.needs_features(option)
        if value[0] > most:
            whom = "other gallery rows" if option == DBA else "gallery rows"
            raise input_error(option, f"K = {value[0]} exceeds the {most} {whom}")


def read_normalized(group, name: str) -> np.ndarray:
    """``name`` read whole, checked (finite, non-zero), L2-normalised as the canonical score does."""
    raw = ds.read_array(group[name], name, slice(None))
    norms = row_norms(raw)
    problems = ds.check_embeddings(name, 0, raw, True, norms=norms)
    if problems:
        raise problems[0]
    return normalize_rows(raw, "cosine", norms)


def row_ranges(n: int, size: int = BLOCK_ROWS) -> list[tuple[int, int]]:
    return [(a, min(n, a + size)) for a in range(0, n, size)]


def search_block(rows: np.ndarray, r0: int, r1: int, columns: np.ndarray, k: int) -> Neighbors:
    """Task: the ``k`` nearest ``columns`` of rows r0 .. r1."""
    return search(rows[r0:r1], r0, ArrayColumns(columns), k)


def nearest(rows: np.ndarray, columns: np.ndarray, k: int, *, client=None, map_fn=map) -> Neighbors:
    """Every row's ``k`` nearest columns: row ranges through ``map_fn`` here, or one cluster task each (both
    arrays scattered once to every worker)."""
    spans = row_ranges(len(rows))
    if not spans:
        return Neighbors(0, np.empty((0, k), np.int64), np.empty((0, k), np.float32), np.empty(0, np.int64),
                         np.empty(0, np.float32))
    if client is None:
        return concat(list(map_fn(lambda s: search_block(rows, s[0], s[1], columns, k), spans)))
    held_rows = client.scatter(rows, broadcast=True, hash=False)
    held_cols = held_rows if columns is rows else client.scatter(columns, broadcast=True, hash=False)
    futures = [client.submit(search_block, held_rows, a, b, held_cols, k, pure=False, retries=3) for a, b in spans]
    return concat(client.gather(futures))


def expand_into(target: zarr.Array, rows: np.ndarray, neighbours: np.ndarray, found: Neighbors,
                expansion: Expansion, option: str, self_search: bool) -> None:
    """Write every row's expanded vector into ``target`` a block of rows at a time."""
    for a, b in row_ranges(len(rows), target.chunks[0]):
        ids, scores = found.ids[a:b], found.scores[a:b]
        if self_search:
            ids, scores = without_self(ids, scores, a)
        block = expand_rows(rows[a:b], neighbours, ids, scores, expansion.alpha)
        bad = np.nonzero(~np.isfinite(block).all(axis=1))[0]
        if bad.size:
            raise input_error(option, f"the expanded vector of row {a + int(bad[0])} is zero (its neighbours "
                             "cancel it); use ALPHA > 0", rows=[a + int(bad[0])])
        target[a:b] = block


def new_group(group) -> tuple[zarr.Group, dict]:
    """An in-memory group holding every array of ``group`` but the embeddings, and the group's attribute."""
    arrays, array_attrs = {}, {}
    for name, arr in group.members(max_depth=None):
        if isinstance(arr, zarr.Array) and name not in EMBEDDINGS:
            arrays[name] = ds.read_array(arr, name, slice(None))
            if dict(arr.attrs):
                array_attrs[name] = dict(arr.attrs)
    attrs = {k: v for k, v in ds.dataset_attributes(group).items() if k != "version"}
    rows = max(1, group["query/emb"].chunks[0])
    return ds.write_dataset(zarr.storage.MemoryStore(), arrays, attrs, chunk_rows=rows,
                            array_attrs=array_attrs), attrs


def embeddings_array(root: zarr.Group, name: str, like: zarr.Array, dtype) -> zarr.Array:
    """``name`` created first (shape and row chunks of ``like``), every chunk stored, then filled."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return root.create_array(name, shape=like.shape, dtype=dtype, chunks=like.chunks, fill_value=0,
                                 compressors=None, config={"write_empty_chunks": True})


def copy_side(group, root: zarr.Group, name: str) -> None:
    """``name`` into the new group unchanged (dtype and chunks as given), a chunk of rows at a time."""
    out = embeddings_array(root, name, group[name], group[name].dtype)
    for a, b in row_ranges(out.shape[0], out.chunks[0]):
        out[a:b] = ds.read_array(group[name], name, slice(a, b))


def expand_side(root: zarr.Group, name: str, like: zarr.Array, rows: np.ndarray, columns: np.ndarray,
                expansion: Expansion, option: str, *, client=None, map_fn=map) -> zarr.Array:
    """``name`` in the new group: ``rows`` expanded over their nearest ``columns`` (DBA: rows is columns)."""
    self_search = rows is columns
    found = nearest(rows, columns, expansion.k + self_search, client=client, map_fn=map_fn)
    out = embeddings_array(root, name, like, np.float32)
    expand_into(out, rows, columns, found, expansion, option, self_search)
    return out


def expanded(group, shape: DatasetShape, options: Options, *, client=None, map_fn=map) -> zarr.Group:
    """The dataset with DBA applied to the gallery, then αQE to the queries (module docstring)."""
    check_shape(shape, options)
    root, _ = new_group(group)
    dba, qe = options.database_augmentation, options.query_expansion
    original = read_normalized(group, "gallery/emb")
    if dba is None:
        copy_side(group, root, "gallery/emb")
        gallery = original
    else:
        out = expand_side(root, "gallery/emb", group["gallery/emb"], original, original, Expansion(*dba), DBA,
                          client=client, map_fn=map_fn)
        del original  # the original rows go before αQE reads the augmented ones
        if qe is None:
            copy_side(group, root, "query/emb")
            return root
        # normalised as the evaluation will normalise them
        gallery = normalize_rows(ds.read_array(out, "gallery/emb", slice(None)), "cosine", copy=False)
    if qe is None:
        copy_side(group, root, "query/emb")
    else:
        expand_side(root, "query/emb", group["query/emb"], read_normalized(group, "query/emb"), gallery,
                    Expansion(*qe), QE, client=client, map_fn=map_fn)
    return root
