"""Open, validate and write the contract's Zarr layout (CONTRACT.md section 2).

IO lives here and nowhere else: the other modules receive numpy arrays.
Paths may be local folders or any fsspec URL (``s3://bucket/ds.zarr``).
"""
from __future__ import annotations

import json
import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import zarr

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


def open_dataset(path, storage_options: Mapping | None = None) -> zarr.Group:
    """Open a dataset group for reading; a missing path is an input error."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return zarr.open_group(str(path), mode="r", **_store_options(path, storage_options))
    except (FileNotFoundError, zarr.errors.GroupNotFoundError if hasattr(zarr.errors, "GroupNotFoundError") else FileNotFoundError):
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


@dataclass
class Problems:
    """Collects every problem found; ``raise_first`` turns them into one InputError."""

    items: list[str] = field(default_factory=list)

    def add(self, message: str) -> None:
        self.items.append(message)

    def __bool__(self) -> bool:
        return bool(self.items)

    def raise_if_any(self) -> None:
        if self.items:
            more = f" (and {len(self.items) - 1} more problem(s); run `evalcore validate`)" if len(self.items) > 1 else ""
            raise InputError(self.items[0] + more)


def _rows_list(rows: np.ndarray, limit: int = 5) -> str:
    shown = ", ".join(str(int(r)) for r in rows[:limit])
    return shown + (f", ... ({len(rows)} rows)" if len(rows) > limit else "")


def _check_kind(group, name, problems) -> bool:
    arr = group[name]
    kinds = ACCEPTED_KINDS.get(_leaf(name))
    if kinds and arr.dtype.kind not in kinds:
        what = {"f": "floating-point", "iu": "integer", "b": "boolean", "UOT": "string"}[kinds]
        problems.add(f"{name}: dtype {arr.dtype} is not {what}")
        return False
    if _leaf(name) == "emb" and np.dtype(str(arr.dtype)) not in (np.float16, np.float32, np.float64):
        problems.add(f"{name}: dtype {arr.dtype} is not float16, float32 or float64")
        return False
    return True


def required_arrays(protocol: str) -> list[str]:
    """Arrays a protocol needs besides the embeddings (contract sections 2 and 3)."""
    need = {
        "reid": ["query/label", "gallery/label", "query/cam", "gallery/cam"],
        "class": ["query/label", "gallery/label"],
        "qrels": ["qrels/query", "qrels/item", "qrels/rel"],
        "geo": ["query/lat", "query/lon", "gallery/lat", "gallery/lon"],
        "xy": ["query/x", "query/y", "gallery/x", "gallery/y"],
    }[protocol]
    return need


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


def scan_embeddings(group, name: str, cosine: bool, problems: Problems) -> None:
    """Check every row of an embedding array, a few whole Zarr chunks (~64 MiB) at a time."""
    arr = group[name]
    chunk = max(arr.chunks[0], 1)
    step = max(1, (1 << 24) // max(1, arr.shape[1] * chunk)) * chunk
    nonfinite, zero = [], []
    for start in range(0, arr.shape[0], step):
        bad, empty = bad_rows(np.asarray(arr[start:start + step]))
        nonfinite.append(bad + start)
        zero.append(empty + start)
    join = lambda parts: np.concatenate(parts) if parts else np.empty(0, np.int64)  # noqa: E731
    for message in embedding_problems(name, join(nonfinite), join(zero), cosine):
        problems.add(message)


def validate(group: zarr.Group, protocol: str, *, similarity: str = "cosine", judged_only: bool = False,
             scan_values: bool = True) -> Problems:
    """Every problem of the dataset for this protocol, each naming the array and rows."""
    problems = Problems()
    rankings = has(group, "ranking/item")
    if protocol not in ("reid", "class", "qrels", "geo", "xy"):
        problems.add(f"--protocol: unknown protocol {protocol!r} (choose reid, class, qrels, geo or xy)")
        return problems
    for name in ("query/emb", "gallery/emb"):
        if not rankings and not has(group, name):
            problems.add(f"{name}: missing (needed to rank; or give ranking/item)")
    for name in required_arrays(protocol):
        if not has(group, name):
            problems.add(f"{name}: missing (needed by protocol {protocol!r})")
    if problems:
        return problems

    n = {}
    for side in SIDES:
        for leaf in ("emb", "label", "cam", "key", "group", "junk", "lat", "lon", "x", "y"):
            name = f"{side}/{leaf}"
            if not has(group, name):
                continue
            if not _check_kind(group, name, problems):
                continue
            shape = group[name].shape
            if leaf == "emb":
                if len(shape) != 2:
                    problems.add(f"{name}: shape {shape} is not (rows, dims)")
                    continue
            elif len(shape) != 1:
                problems.add(f"{name}: shape {shape} is not one-dimensional")
                continue
            if side in n and n[side][1] != shape[0]:
                problems.add(f"{name}: {shape[0]} rows, but {n[side][0]} has {n[side][1]}")
            else:
                n.setdefault(side, (name, shape[0]))
    if has(group, "query/emb") and has(group, "gallery/emb"):
        dq, dg = group["query/emb"].shape[-1], group["gallery/emb"].shape[-1]
        if dq != dg:
            problems.add(f"gallery/emb: {dg} dimensions, but query/emb has {dq}")
    if has(group, "ranking/item"):
        item = group["ranking/item"]
        if len(item.shape) != 2:
            problems.add(f"ranking/item: shape {item.shape} is not (queries, K)")
        elif "query" in n and item.shape[0] != n["query"][1]:
            problems.add(f"ranking/item: {item.shape[0]} rows, but {n['query'][0]} has {n['query'][1]}")
        if has(group, "ranking/score") and group["ranking/score"].shape != item.shape:
            problems.add(f"ranking/score: shape {group['ranking/score'].shape} differs from ranking/item {item.shape}")
        _check_kind(group, "ranking/item", problems)
    if has(group, "qrels/query"):
        lengths = {name: group[name].shape for name in ("qrels/query", "qrels/item", "qrels/rel") if has(group, name)}
        if len(set(lengths.values())) > 1:
            problems.add(f"qrels: arrays differ in length ({', '.join(f'{k} {v}' for k, v in lengths.items())})")
        for name in lengths:
            _check_kind(group, name, problems)
    if problems:
        return problems

    if scan_values and (not rankings or has(group, "query/emb")):
        for name in ("query/emb", "gallery/emb"):
            if has(group, name):
                scan_embeddings(group, name, similarity == "cosine", problems)
    for name in ("query/key", "gallery/key"):
        if has(group, name):
            keys = read(group, name)
            uniq, counts = np.unique(keys.astype(str), return_counts=True)
            dup = uniq[counts > 1]
            if dup.size:
                problems.add(f"{name}: duplicate keys {', '.join(map(repr, dup[:5].tolist()))}"
                             + (f" ({dup.size} in all)" if dup.size > 5 else ""))
    for name in ("query/lat", "gallery/lat", "query/lon", "gallery/lon", "query/x", "query/y",
                 "gallery/x", "gallery/y"):
        if has(group, name) and protocol in ("geo", "xy"):
            values = read(group, name).astype(np.float64)
            bad = np.nonzero(~np.isfinite(values))[0]
            if bad.size:
                problems.add(f"{name}: rows {_rows_list(bad)} are NaN or infinite")
            limit = 90 if name.endswith("lat") else 180 if name.endswith("lon") else math.inf
            out = np.nonzero(np.abs(values) > limit)[0]
            if out.size:
                problems.add(f"{name}: rows {_rows_list(out)} lie outside [-{limit}, {limit}] degrees")
    if protocol == "qrels" and "gallery" in n:
        from evalcore import ground_truth

        n_query = group["ranking/item"].shape[0] if has(group, "ranking/item") else n["query"][1]
        for message in ground_truth.validate_qrels(group, n_query, n["gallery"][1]):
            problems.add(message)
    if has(group, "ranking/item") and "gallery" in n:
        items = read(group, "ranking/item")
        bad = np.nonzero(((items < -1) | (items >= n["gallery"][1])).any(axis=1))[0]
        if bad.size:
            problems.add(f"ranking/item: rows {_rows_list(bad)} hold gallery indices outside "
                         f"[0, {n['gallery'][1]}) (use -1 only to pad)")
    return problems
