"""Open, validate and write the contract's Zarr layout (CONTRACT.md section 2).

IO lives here and nowhere else: the other modules receive numpy arrays.
Paths may be local folders or any fsspec URL (``s3://bucket/ds.zarr``).
"""
from __future__ import annotations

import json
import warnings
from collections.abc import Mapping

import numpy as np
import zarr
import zarr.abc.store

from evalcore.errors import InputError

#: dtypes writers use; readers accept the kinds listed in ``ACCEPTED_KINDS``.
WRITE_DTYPES = {
    "emb": "float32", "label": "int64", "cam": "int64", "junk": "bool",
    "lat": "float64", "lon": "float64", "x": "float64", "y": "float64",
    "query": "int64", "item": "int64", "rel": "int8", "score": "float32",
    "key": str, "group": str,
}
ACCEPTED_KINDS = {
    "emb": "f", "label": "iu", "cam": "iu", "junk": "b", "lat": "f", "lon": "f",
    "x": "f", "y": "f", "query": "iu", "item": "iu", "rel": "iu", "score": "f",
    "key": "UOT", "group": "UOT",
}
SIDES = ("query", "gallery")
SHARED_ATTRIBUTE = "evalcore"
#: Rows per write when filling arrays; keeps memory flat for large inputs.
DEFAULT_CHUNK_ROWS = 65536


def is_url(path) -> bool:
    """A URL for fsspec (s3://, gs://, ...); ``file://`` and plain paths are local."""
    return "://" in str(path) and not str(path).startswith("file://")


def _store_options(path, storage_options):
    return {"storage_options": dict(storage_options)} if is_url(path) and storage_options else {}


#: zarr 3.1 says a missing group with GroupNotFoundError; older releases with FileNotFoundError
_GROUP_NOT_FOUND = getattr(zarr.errors, "GroupNotFoundError", FileNotFoundError)


def open_dataset(path, storage_options: Mapping | None = None) -> zarr.Group:
    """Open a dataset group for reading (an open ``zarr.Group`` is returned as it is); a missing path is an input error."""
    if isinstance(path, zarr.Group):
        return path
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return zarr.open_group(str(path), mode="r", **_store_options(path, storage_options))
    except (FileNotFoundError, _GROUP_NOT_FOUND):
        raise InputError(f"dataset {path}: no Zarr group found there") from None
    except (KeyError, ValueError, TypeError) as exc:
        raise InputError(f"dataset {path}: cannot be opened as a Zarr group ({exc})") from None


def has(group: zarr.Group, name: str) -> bool:
    """True when ``name`` (e.g. ``query/emb``) is an array of the group."""
    try:
        return isinstance(group[name], zarr.Array)
    except KeyError:
        return False


def read(group: zarr.Group, name: str, rows: slice | np.ndarray | None = None) -> np.ndarray:
    """Read an array (or some of its rows) as numpy; strings come back as ``object`` of ``str``."""
    arr = group[name]
    if rows is None:
        data = arr[...]
    elif isinstance(rows, slice):
        data = arr[rows]
    else:
        data = arr.oindex[np.asarray(rows, dtype=np.int64)]
    data = np.asarray(data)
    if data.dtype.kind in "UOT":
        data = data.astype(object)
    return data


def dataset_attributes(group: zarr.Group) -> dict:
    """The ``evalcore`` group attribute (defaults for the command line), or {}."""
    value = group.attrs.get(SHARED_ATTRIBUTE, {})
    return dict(value) if isinstance(value, Mapping) else {}


def fingerprint(group: zarr.Group) -> str:
    """A short digest of the arrays' names, shapes, dtypes and chunking (not the data)."""
    import hashlib

    parts = []
    for side in ("query", "gallery", "qrels", "ranking"):
        if side not in group:
            continue
        for name, arr in sorted(group[side].arrays()):
            parts.append(f"{side}/{name}:{arr.shape}:{arr.dtype}:{arr.chunks}")
    parts.append(json.dumps(dataset_attributes(group), sort_keys=True))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


# --------------------------------------------------------------------------- writing


def _leaf(name: str) -> str:
    return name.rsplit("/", 1)[-1]


def _as_written(name: str, values) -> np.ndarray:
    """Values in the writer's dtype for the array named ``name``."""
    dtype = WRITE_DTYPES.get(_leaf(name))
    data = np.asarray(values)
    if dtype is str or data.dtype.kind in "UOT":
        return np.asarray([str(v) for v in data.reshape(-1)], dtype=object).reshape(data.shape)
    if _leaf(name) == "emb" and data.dtype in (np.float16, np.float32):
        return data  # keep float16 embeddings as given
    if dtype is not None and np.dtype(dtype).kind == "i" and data.dtype.kind == "f":
        bad = np.nonzero(~np.isfinite(data) | (data != np.round(data)))[0]
        if bad.size:
            raise InputError(f"{name}: rows {_rows_list(bad)} are not integers ({data.reshape(-1)[bad[0]]!r})")
    return data.astype(dtype) if dtype is not None else data


def write_dataset(path, arrays: Mapping[str, np.ndarray], attrs: Mapping | None = None, *,
                  chunk_rows: int | None = None, storage_options: Mapping | None = None,
                  overwrite: bool = False) -> zarr.Group:
    """Write ``arrays`` (``{"query/emb": ..., "gallery/label": ...}``) as a contract dataset.

    Every array is created first with its final shape, dtype and row chunks and
    then filled one chunk-aligned row range at a time (never through dask's
    ``to_zarr``). ``attrs`` becomes the group's ``evalcore`` attribute.
    Embeddings are stored uncompressed: float vectors shrink by a few percent
    under zstd, while decompressing them costs about as much as scoring them.
    """
    mode = "w" if overwrite else "w-"
    try:
        if isinstance(path, zarr.abc.store.Store):  # e.g. a MemoryStore: arrays evaluated in memory
            root = zarr.open_group(store=path, mode=mode)
        else:
            root = zarr.open_group(str(path), mode=mode, **_store_options(path, storage_options))
    except (FileExistsError, zarr.errors.ContainsGroupError, zarr.errors.ContainsArrayError):
        raise InputError(f"output {path}: already exists (pass --overwrite to replace it)") from None
    created = {}
    for name, values in arrays.items():
        data = _as_written(name, values)
        rows = chunk_rows or DEFAULT_CHUNK_ROWS
        chunks = (max(1, min(rows, data.shape[0] or 1)),) + tuple(data.shape[1:]) if data.ndim else ()
        dtype = str if data.dtype == object else data.dtype
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            extra = {"compressors": None} if _leaf(name) == "emb" else {}
            created[name] = (root.create_array(name, shape=data.shape, dtype=dtype, chunks=chunks,
                                               fill_value=None if dtype is str else 0, **extra), data)
    for arr, data in created.values():
        if data.ndim == 0:
            arr[...] = data
            continue
        step = arr.chunks[0]
        for start in range(0, data.shape[0], step):
            arr[start:start + step] = data[start:start + step]
    if attrs:
        root.attrs[SHARED_ATTRIBUTE] = {"version": 1, **dict(attrs)}
    return root


# --------------------------------------------------------------------------- validation


def _rows_list(rows: np.ndarray, limit: int = 5) -> str:
    shown = ", ".join(str(int(r)) for r in rows[:limit])
    return shown + (f", ... ({len(rows)} rows)" if len(rows) > limit else "")


def bad_rows(block: np.ndarray, norms: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(rows with NaN/Inf, all-zero rows) of an embedding block.

    With the rows' float64 norms at hand no extra pass is needed: a NaN or Inf
    gives a non-finite norm and a zero row a zero one.
    """
    if norms is not None:
        return np.nonzero(~np.isfinite(norms))[0], np.nonzero(norms == 0)[0]
    return np.nonzero(~np.isfinite(block).all(axis=1))[0], np.nonzero(~np.any(block != 0, axis=1))[0]


def embedding_problems(name: str, nonfinite: np.ndarray, zero: np.ndarray, cosine: bool) -> list[str]:
    """The messages for bad embedding rows (zero rows only matter under cosine)."""
    found = []
    if nonfinite.size:
        found.append(f"{name}: rows {_rows_list(nonfinite)} contain NaN or Inf")
    if cosine and zero.size:
        found.append(f"{name}: rows {_rows_list(zero)} are all-zero vectors "
                     "(cosine similarity is undefined for them; use --similarity dot or fix the rows)")
    return found


def check_embeddings(name: str, rows_start: int, block: np.ndarray, cosine: bool,
                     norms: np.ndarray | None = None) -> list[str]:
    """Problems of one block of embedding rows starting at ``rows_start``."""
    nonfinite, zero = bad_rows(block, norms)
    return embedding_problems(name, nonfinite + rows_start, zero + rows_start, cosine)


