"""Open, validate and write the contract's Zarr layout (README, Dataset layout).

IO lives here and nowhere else: the other modules receive numpy arrays.
Paths may be local folders or any fsspec URL (``s3://bucket/ds.zarr``).
"""
from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import warnings
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
import zarr
import zarr.abc.store
from zarr.core.buffer.cpu import NDBuffer
from zarr.core.sync import sync

from evalcore.errors import (
    ArrayError,
    DatasetNotFoundError,
    InputError,
    foreign_reason,
    input_error,
    mention,
    rows_text,
)
from evalcore.io import progress
from evalcore.types import PROTOCOLS, SIMILARITIES

#: dtypes writers use (``score``: float64 scores stay float64); readers accept the kinds in ``ACCEPTED_KINDS``.
WRITE_DTYPES: dict[str, str | type[str]] = {
    "emb": "float32", "label": "int64", "cam": "int64", "junk": "bool",
    "lat": "float64", "lon": "float64", "x": "float64", "y": "float64",
    "query": "int64", "item": "int64", "rel": "int8", "score": "float32",
    "key": str, "group": str, "split": str,
}
ACCEPTED_KINDS = {
    "emb": "f", "label": "iu", "cam": "iu", "junk": "b", "lat": "f", "lon": "f",
    "x": "f", "y": "f", "query": "iu", "item": "iu", "rel": "iu", "score": "f",
    "key": "UOT", "group": "UOT", "split": "UOT", "value": "f",
}
#: the given score (or distance) matrix, (Q, G), and its dtypes (compared exactly as stored)
SCORES = "scores/value"
SCORE_DTYPES = ("float16", "float32", "float64")
#: scores/value is written in chunks of at most this many rows (a multiple of the 512-row query tile) and
#: columns, and about this many bytes: a task reads its rows a few chunks at a time, never a whole row band
SCORE_CHUNK_ROWS, SCORE_CHUNK_COLS, SCORE_CHUNK_BYTES = 4096, 16384, 64 << 20
#: bytes of given scores written at a time when filling scores/value
SCORE_BAND_BYTES = 256 << 20
SIDES = ("query", "gallery")
SHARED_ATTRIBUTE = "evalcore"
#: Rows per write when filling arrays; keeps memory flat for large inputs.
DEFAULT_CHUNK_ROWS = 65536
#: the evalcore attribute's version this release reads (and writes)
ATTRIBUTE_VERSION = 1
# Bounds on what a store's metadata may claim, checked before any work: listing, checking and reading go chunk
# by chunk, so a zarr.json claiming 10^9 one-row chunks would otherwise cost gigabytes before any other check
#: the most chunks one array may have (its chunk grid: the product over axes of ceil(shape / chunk))
MAX_CHUNKS = 1 << 21
#: the largest metadata file (zarr.json) evalcore lets Zarr parse; evalcore's own are a few kB
MAX_METADATA_BYTES = 16 << 20
#: the deepest nesting of a value inside the evalcore attribute (its own fields are plain values)
MAX_ATTRIBUTE_DEPTH = 8
#: the metadata files of a group or an array: Zarr v3's, then v2's
METADATA_FILES = ("zarr.json", ".zgroup", ".zarray", ".zattrs")


def is_url(path) -> bool:
    """A URL for fsspec (s3://, gs://, ...); ``file://`` and plain paths are local."""
    return "://" in str(path) and not str(path).startswith("file://")


def local_path(path) -> str:
    """A local path as the file system takes it: ``file://`` left off (the one home of that rule)."""
    return os.fspath(str(path).removeprefix("file://"))


def _store_options(path, storage_options):
    return {"storage_options": dict(storage_options)} if is_url(path) and storage_options else {}


#: zarr 3.1 says a missing group with GroupNotFoundError; older releases with FileNotFoundError
_GROUP_NOT_FOUND = getattr(zarr.errors, "GroupNotFoundError", FileNotFoundError)


def open_dataset(path, storage_options: Mapping | None = None) -> zarr.Group:
    """Open a dataset group for reading (an open ``zarr.Group`` is returned as it is); a missing path is an input error."""
    if isinstance(path, zarr.Group):
        return path
    check_root_metadata(path, storage_options)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return zarr.open_group(str(path), mode="r", **_store_options(path, storage_options))
    except (FileNotFoundError, _GROUP_NOT_FOUND):
        raise DatasetNotFoundError(f"dataset {path}", "no Zarr group found there") from None
    except RecursionError:  # json's reader gives up on values nested ~1,000 deep
        raise InputError(f"dataset {path}: its zarr.json holds values nested too deeply to read") from None
    except (KeyError, ValueError, TypeError) as exc:
        raise InputError(f"dataset {path}: cannot be opened as a Zarr group ({foreign_reason(exc)})") from None


def metadata_too_large(where: str, size: int) -> InputError:
    return input_error(where, f"{size:,} bytes of metadata, more than the {MAX_METADATA_BYTES:,} evalcore reads "
                      "(a dataset's zarr.json files are a few kB)")


def check_root_metadata(path, storage_options: Mapping | None = None) -> None:
    """InputError when the group's metadata file at ``path`` is larger than MAX_METADATA_BYTES, before Zarr
    parses it (a file there that is missing or unreadable is left to Zarr to report)."""
    try:
        if is_url(path):
            import fsspec

            fs, root = fsspec.core.url_to_fs(str(path), **dict(storage_options or {}))
            sizes = [fs.size(f"{root.rstrip('/')}/{name}") for name in METADATA_FILES[:2] + METADATA_FILES[3:]
                     if fs.exists(f"{root.rstrip('/')}/{name}")]
        else:
            local = local_path(path)
            sizes = [os.path.getsize(os.path.join(local, name)) for name in METADATA_FILES
                     if os.path.isfile(os.path.join(local, name))]
    except OSError:  # not there, or the store does not answer: zarr says which, as before
        return
    if sizes and max(sizes) > MAX_METADATA_BYTES:
        raise metadata_too_large(f"dataset {path}", max(sizes))


def check_array_metadata(group: zarr.Group, name: str) -> None:
    """InputError naming ``name`` when its metadata file is larger than MAX_METADATA_BYTES, before Zarr parses it.

    On a local folder this is a stat; in memory (the API's arrays) nothing; elsewhere one size request."""
    store, prefix = group.store_path.store, group.store_path.path
    if isinstance(store, zarr.storage.MemoryStore):
        return  # written by evalcore itself
    for file in ("zarr.json", ".zarray"):
        key = "/".join(part for part in (prefix, name, file) if part)
        try:
            if isinstance(store, zarr.storage.LocalStore):
                size = os.path.getsize(os.path.join(str(store.root), key))
            else:
                size = sync(store.getsize(key))
        except FileNotFoundError:
            continue
        if size > MAX_METADATA_BYTES:
            raise metadata_too_large(name, size)
        return


def chunk_count(shape: tuple[int, ...], chunks: tuple[int, ...]) -> int:
    """The chunks of an array's grid: prod over axes of ceil(shape / chunk) (1 for a 0-d array)."""
    return math.prod(-(-int(n) // max(1, int(c))) for n, c in zip(shape, chunks))


def check_chunk_grid(name: str, arr: zarr.Array) -> None:
    """InputError naming ``name`` when its chunk grid, from the declared shape, exceeds MAX_CHUNKS."""
    count = chunk_count(arr.shape, arr.chunks)
    if count > MAX_CHUNKS:
        raise input_error(name, f"{count:,} chunks (shape {arr.shape} in chunks of {arr.chunks}), more than the "
                         f"{MAX_CHUNKS:,} evalcore reads per array; rewrite it with larger chunks")


def array(group: zarr.Group, name: str) -> zarr.Array:
    """The array ``name`` of the group; InputError when it is missing or a group."""
    found = group.get(name)
    if not isinstance(found, zarr.Array):
        raise input_error(name, "missing (not an array of the dataset)")
    return found


def member_array(group: zarr.Group, name: str) -> zarr.Array:
    """``group[name]`` typed as an array: KeyError when missing, as ``group[name]``; InputError when it is a group."""
    found = group[name]
    if not isinstance(found, zarr.Array):
        raise input_error(name, "a group, not an array of the dataset")
    return found


def member_group(group: zarr.Group, name: str) -> zarr.Group:
    """``group[name]`` typed as a group: KeyError when missing, as ``group[name]``; InputError when it is an array."""
    found = group[name]
    if not isinstance(found, zarr.Group):
        raise input_error(name, "an array, not a group of the dataset")
    return found


def has(group: zarr.Group, name: str) -> bool:
    """True when ``name`` (e.g. ``query/emb``) is an array of the group.

    Metadata that cannot be parsed (bad JSON in the array's ``zarr.json``, an
    unknown codec), is larger than MAX_METADATA_BYTES or claims more than
    MAX_CHUNKS chunks is an InputError naming the array, not a traceback.
    """
    check_array_metadata(group, name)
    try:
        found = group[name]
    except KeyError:
        return False
    except OSError:
        raise  # the store did not answer: not the data's fault (exit 1)
    except Exception as exc:  # noqa: BLE001 - any parse failure of the metadata is bad input
        raise input_error(name, f"its Zarr metadata cannot be read ({foreign_reason(exc, named=True, limit=160)})") from None
    if not isinstance(found, zarr.Array):
        return False
    check_chunk_grid(name, found)  # before anything lists, checks or reads its chunks
    return True


def chunk_rows_text(arr: zarr.Array, index: int) -> str:
    """``chunk 3 (rows 3000-3999)``: a chunk (or shard) of the first axis and the rows it holds."""
    step = (arr.shards or arr.chunks)[0] if arr.ndim else 1
    stop = min(arr.shape[0], (index + 1) * step) if arr.ndim else 1
    what = "shard" if arr.shards else "chunk"
    return f"{what} {index} (rows {index * step}-{stop - 1})"


def missing_chunks(arr: zarr.Array) -> list[tuple[int, ...]]:
    """Grid coordinates of the chunks (shards, for sharded arrays) the store does not hold.

    Zarr reads a chunk that is not stored as the fill value, so a lost chunk
    file would silently become zeros. One listing of the array's keys (cheap
    on local folders and object stores alike) is compared with the keys the
    chunk grid implies. Chunks inside a stored shard are not checked.
    """
    grid = tuple(-(-n // c) for n, c in zip(arr.shape, arr.shards or arr.chunks))
    if any(n == 0 for n in grid):
        return []
    store, prefix = arr.store_path.store, arr.store_path.path

    async def keys():
        return [k async for k in store.list_prefix(prefix + "/" if prefix else "")]

    stored = {k[len(prefix) + 1:] if prefix else k for k in sync(keys())}
    return [coords for coords in itertools.product(*(range(n) for n in grid))
            if arr.metadata.encode_chunk_key(coords) not in stored]


def chunk_problems(group: zarr.Group, name: str) -> list[InputError]:
    """``name: chunk 3 (rows 3000-3999) is missing`` for every chunk the store lacks."""
    arr = member_array(group, name)
    lost = missing_chunks(arr)
    if not lost:
        return []
    rows = sorted({c[0] if c else 0 for c in lost})
    shown = ", ".join(chunk_rows_text(arr, r) for r in rows[:3])
    more = f" and {len(rows) - 3} more" if len(rows) > 3 else ""
    return [input_error(name, f"{shown}{more} {'is' if len(rows) == 1 else 'are'} missing from the store "
            "(Zarr would read the fill value there; restore the chunk files, or rewrite the array "
            "with every chunk stored)")]


def _read_rows(arr: zarr.Array, rows) -> np.ndarray:
    if rows is None:
        return np.asarray(arr[...])
    if isinstance(rows, tuple):  # (row slice, column slice) of a 2-D array
        return np.asarray(arr[rows])
    if isinstance(rows, slice):
        return np.asarray(arr[rows])
    return np.asarray(arr.oindex[np.asarray(rows, dtype=np.int64)])


def _bad_chunk(arr: zarr.Array, rows) -> int | None:
    """The first chunk of the first axis among ``rows`` that cannot be read (only looked for after a failure)."""
    if not arr.ndim or not arr.shape[0]:
        return None
    step = (arr.shards or arr.chunks)[0]
    if isinstance(rows, tuple):
        rows = rows[0]
    if rows is None:
        wanted = range(-(-arr.shape[0] // step))
    elif isinstance(rows, slice):
        a, z, _ = rows.indices(arr.shape[0])
        wanted = range(a // step, -(-z // step))
    else:
        wanted = np.unique(np.asarray(rows, dtype=np.int64) // step).tolist()
    for c in wanted:
        try:
            arr[c * step:(c + 1) * step]
        except Exception:  # noqa: BLE001 - this is the chunk that fails
            return int(c)
    return None


def read_array(arr: zarr.Array, name: str, rows: slice | np.ndarray | tuple | None = None) -> np.ndarray:
    """``arr[rows]`` as numpy; a chunk that cannot be decoded is an InputError naming the array and rows.

    A truncated or overwritten chunk makes the codec raise (zstd, blosc,
    a short buffer); the message says which array and which chunk, once,
    so a worker's failure reaches the user as one line.
    """
    return _decoded(arr, name, rows, lambda: _read_rows(arr, rows))


def read_into(arr: zarr.Array, name: str, rows: slice, out: np.ndarray) -> None:
    """``out[...] = arr[rows]``, decoded straight into ``out`` when the dtypes match (no temporary array: on a
    VM a fresh one costs its first touch of every page, ~0.3 s for Market's 161 MB gallery); errors as
    ``read_array``."""
    if out.dtype != arr.dtype or not out.flags.c_contiguous:
        out[...] = read_array(arr, name, rows)  # e.g. float16 upcast on the way
        return
    _decoded(arr, name, rows, lambda: arr.get_basic_selection(rows, out=NDBuffer.from_numpy_array(out)))


def _decoded(arr: zarr.Array, name: str, rows, read):
    """``read()``, with a chunk that cannot be decoded reported as an InputError naming the array and rows."""
    try:
        return read()
    except (InputError, MemoryError, OSError):
        raise  # OSError: the store did not answer, which is not the data's fault (exit 1)
    except Exception as exc:  # noqa: BLE001 - a decode failure of stored bytes is bad input
        bad = _bad_chunk(arr, rows)
        where = chunk_rows_text(arr, bad) + " " if bad is not None else ""
        raise input_error(name, f"{where}cannot be read, the stored data is corrupt ({foreign_reason(exc, named=True, limit=160)})") from None


def read_points(arr: zarr.Array, name: str, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """``arr[rows[i], cols[i]]`` for every i (a 2-D array read point by point, chunk by chunk), as numpy;
    a chunk that cannot be decoded is an InputError naming the array."""
    rows, cols = np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)
    if not rows.size:
        return np.empty(0, dtype=arr.dtype)
    try:
        return np.asarray(arr.vindex[rows, cols])
    except (InputError, MemoryError, OSError):
        raise
    except Exception as exc:  # noqa: BLE001 - a decode failure of stored bytes is bad input
        bad = _bad_chunk(arr, np.unique(rows))
        where = chunk_rows_text(arr, bad) + " " if bad is not None else ""
        raise input_error(name, f"{where}cannot be read, the stored data is corrupt ({foreign_reason(exc, named=True, limit=160)})") from None


def higher_is_better(group: zarr.Group) -> bool:
    """The ``higher_is_better`` attribute of ``scores/value``: true (scores, the default) or false (distances)."""
    value = group[SCORES].attrs.get("higher_is_better", True)
    if not isinstance(value, bool):
        raise input_error(SCORES, f"attribute higher_is_better is {value!r}, not true or false")
    return value


def nonfinite_score_error(rows: np.ndarray) -> ArrayError:
    """The input error for rows of scores/value holding NaN or infinite values (``rows``: global rows)."""
    return ArrayError(SCORES, f"rows {rows_text(rows)} hold NaN or infinite values (every value must be a finite "
                      "number)", rows=rows)


def read(group: zarr.Group, name: str, rows: slice | np.ndarray | None = None) -> np.ndarray:
    """Read an array (or some of its rows) as numpy; strings come back as ``object`` of ``str``."""
    data = read_array(member_array(group, name), name, rows)
    if data.dtype.kind in "UOT":
        data = data.astype(object)
    return data


def dataset_attributes(group: zarr.Group) -> dict:
    """The ``evalcore`` group attribute (defaults for the command line), or {}; InputError naming it when it is
    malformed (``checked_attribute``)."""
    return checked_attribute(group.attrs.get(SHARED_ATTRIBUTE, {}))


def _json_word(value) -> str:
    """How JSON calls a value's type, for messages."""
    kinds = ((bool, "a boolean"), (str, "a string"), (int, "a number"), (float, "a number"), (Mapping, "an object"),
             (list, "a list"), (tuple, "a list"), (type(None), "null"))
    return next((word for kind, word in kinds if isinstance(value, kind)), type(value).__name__)


def nesting_depth(value, limit: int) -> int:
    """How deeply lists and objects nest inside ``value`` (0 for a plain value), counted without recursion and
    only up to ``limit + 1``."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth > limit:
            break
        if isinstance(item, Mapping):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend((v, depth + 1) for v in item)
    return deepest


def checked_attribute(value) -> dict:
    """The ``evalcore`` attribute as a dict, or InputError naming it: an object, ``version`` 1 (or absent),
    ``protocol`` and ``similarity`` null or one of the known words, no value nested deeper than
    MAX_ATTRIBUTE_DEPTH (a malformed attribute must not quietly become the defaults)."""
    where = f"attribute {SHARED_ATTRIBUTE}"
    if not isinstance(value, Mapping):
        raise input_error(where, f"is {_json_word(value)} ({_shown(value)}), not an object such as "
                         '{"version": 1, "protocol": "reid"}')
    if nesting_depth(value, MAX_ATTRIBUTE_DEPTH) > MAX_ATTRIBUTE_DEPTH:
        raise input_error(where, f"values nested more than {MAX_ATTRIBUTE_DEPTH} levels deep")
    version = value.get("version", ATTRIBUTE_VERSION)
    if isinstance(version, bool) or version != ATTRIBUTE_VERSION:
        raise InputError(f"{where}.version: {_shown(version)} is not {ATTRIBUTE_VERSION}, the version this release "
                         "reads")
    for field, known in (("protocol", PROTOCOLS), ("similarity", SIMILARITIES)):
        given = value.get(field)
        if given is not None and (not isinstance(given, str) or given not in known):
            raise InputError(f"{where}.{field}: {_shown(given)} is not one of {', '.join(known)}")
    return dict(value)


def _shown(value) -> str:
    """A value for a message, at most 60 characters of its JSON."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError, RecursionError):  # nested too deeply to write out
        return f"({_json_word(value)})"
    return text if len(text) <= 60 else text[:57] + "..."


def fingerprint(group: zarr.Group) -> str:
    """A short digest of the arrays' names, shapes, dtypes and chunking (not the data)."""
    parts = []
    for side in ("query", "gallery", "qrels", "ranking", "scores"):
        if side not in group:
            continue
        for name, arr in sorted(member_group(group, side).arrays()):
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
    if _leaf(name) == "score" and data.dtype == np.float64:
        return data  # scores keep their precision: two float64 scores one float32 apart would tie
    if dtype is not None and np.dtype(dtype).kind == "i" and data.dtype.kind == "f":
        bad = np.nonzero(~np.isfinite(data) | (data != np.round(data)))[0]
        if bad.size:
            raise input_error(name, f"rows {rows_text(bad)} are not integers ({data.reshape(-1)[bad[0]]!r})", rows=bad)
    if dtype is not None and np.dtype(dtype).kind == "i" and data.dtype.kind in "iuf" and data.size:
        info = np.iinfo(np.dtype(dtype))  # int8 qrels/rel: a grade above 127 would wrap around
        out = np.nonzero((data.reshape(-1) < info.min) | (data.reshape(-1) > info.max))[0]
        if out.size:
            raise input_error(name, f"rows {rows_text(out)} hold {data.reshape(-1)[out[0]]!r}, outside "
                             f"[{info.min}, {info.max}]", rows=out)
    return data.astype(dtype, copy=False) if dtype is not None else data  # no second copy of a large ranking


def score_chunks(shape: tuple[int, ...], dtype, chunk_rows: int | None = None) -> tuple[int, int]:
    """Chunks of ``scores/value``: whole query tiles of rows (at most ``chunk_rows``) by at most
    SCORE_CHUNK_COLS columns, about SCORE_CHUNK_BYTES each."""
    n_rows, n_cols = shape
    cols = max(1, min(n_cols, SCORE_CHUNK_COLS))
    fit = max(1, SCORE_CHUNK_BYTES // (cols * np.dtype(dtype).itemsize))
    rows = min(SCORE_CHUNK_ROWS, fit if fit < 512 else fit // 512 * 512, chunk_rows or SCORE_CHUNK_ROWS)
    return max(1, min(rows, n_rows)), cols


def matrix_like(values: Any) -> Any:
    """A 2-D array-like kept as it is when it has a numpy dtype and slices (numpy, dask, Zarr): scores are
    written a chunk at a time, never computed whole; anything else goes through ``np.asarray``."""
    try:
        dtype = np.dtype(values.dtype)
        if len(values.shape) == 2 and hasattr(values, "__getitem__"):
            return values, dtype
    except (AttributeError, TypeError):
        pass
    data = np.asarray(values)
    return data, data.dtype


#: the bytes of one chunk of ranking/item or ranking/score (whole 512-row query tiles): a task reads a few
#: of them, not one chunk as large as a top-1,000 list of 65,536 queries (524 MB)
LIST_CHUNK_BYTES = 8 << 20


def list_chunk_rows(shape: tuple[int, ...]) -> int:
    """Rows per chunk of a (Q, K) precomputed list array: about LIST_CHUNK_BYTES at 8 bytes a value, whole
    query tiles of 512 rows."""
    k = max(1, int(np.prod(shape[1:], dtype=np.int64)))
    return max(512, (LIST_CHUNK_BYTES // (8 * k)) // 512 * 512)


def fast_codec():
    """The codec of the numeric arrays written (not embeddings): zstd at its fast level -1. On 10M int64 and
    10M float64 list entries it writes ~3x and reads ~2.5x faster than level 0 for ~1.25x the bytes.
    (Blosc's LZ4 is faster still, but numcodecs' Blosc holds a process lock whose leak a killed worker
    reports on stderr.)"""
    return zarr.codecs.ZstdCodec(level=-1)


#: chunks written by one assignment: zarr compresses the chunks of one write on its threads at once, so one
#: chunk a write left a second core idle (a 100,000 x 1,000 ranking, 2 cores: 5.6 s -> 3.0 s with 2 or 4)
WRITE_BAND_CHUNKS = 4


def write_dataset(path, arrays: Mapping[str, np.ndarray], attrs: Mapping | None = None, *,
                  chunk_rows: int | None = None, storage_options: Mapping | None = None,
                  overwrite: bool = False, array_attrs: Mapping[str, Mapping] | None = None) -> zarr.Group:
    """Write ``arrays`` (``{"query/emb": ..., "gallery/label": ...}``) as a contract dataset.

    Every array is created first with its final shape, dtype and row chunks and
    then filled one chunk-aligned row range at a time (never through dask's
    ``to_zarr``). Every chunk is stored, also one holding only the fill value
    (zarr leaves those out by default), so a missing chunk always means lost
    data. ``attrs`` becomes the group's ``evalcore`` attribute; ``array_attrs``
    gives arrays their own attributes (``{"scores/value": {"higher_is_better": False}}``
    for distances). ``scores/value`` (numpy, dask or Zarr, float16/32/64) keeps its
    dtype and is read and written one chunk at a time.
    Embeddings are stored uncompressed: float vectors shrink by a few percent
    under zstd, while decompressing them costs about as much as scoring them.
    """
    mode: Literal["w", "w-"] = "w" if overwrite else "w-"
    try:
        if isinstance(path, zarr.abc.store.Store):  # e.g. a MemoryStore: arrays evaluated in memory
            root = zarr.open_group(store=path, mode=mode)
        else:
            root = zarr.open_group(str(path), mode=mode, **_store_options(path, storage_options))
    except (FileExistsError, zarr.errors.ContainsGroupError, zarr.errors.ContainsArrayError):
        raise InputError(f"output {path}: already exists (pass " + mention("--overwrite") + " to replace it)") from None
    created = {}
    in_memory = isinstance(path, zarr.storage.MemoryStore)
    for name, values in arrays.items():
        if name == SCORES:
            data, dtype = matrix_like(values)
            if dtype.kind != "f" or dtype.name not in SCORE_DTYPES:
                raise input_error(SCORES, f"dtype {dtype} is not float16, float32 or float64")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                created[name] = (root.create_array(name, shape=tuple(data.shape), dtype=dtype,
                                                   chunks=score_chunks(tuple(data.shape), dtype, chunk_rows),
                                                   fill_value=0, compressors=None,
                                                   config={"write_empty_chunks": True}), data)
            continue
        data = _as_written(name, values)
        rows = chunk_rows or (list_chunk_rows(data.shape) if name.startswith("ranking/") else DEFAULT_CHUNK_ROWS)
        chunks = (max(1, min(rows, data.shape[0] or 1)),) + tuple(data.shape[1:]) if data.ndim else ()
        dtype = str if data.dtype == object else data.dtype
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # in memory (evalcore.trec, arrays given to evaluate): compressing costs time and saves nothing
            extra: dict[str, Any] = {"compressors": None} if _leaf(name) == "emb" or in_memory else \
                {} if dtype is str else {"compressors": [fast_codec()]}
            # every chunk stored, even one of fill values only: readers treat a missing chunk as lost data
            created[name] = (root.create_array(name, shape=data.shape, dtype=dtype, chunks=chunks,
                                               fill_value=None if dtype is str else 0,
                                               config={"write_empty_chunks": True}, **extra), data)
    if not in_memory:  # the bytes of every array, as the bands below write them (a bar for a long import)
        progress.expect("writing", sum(_counted_bytes(data, data.shape[0] if data.ndim else 0)
                                       for _, data in created.values()))
    for name, (arr, data) in created.items():
        if name == SCORES:  # a band of chunk rows at a time when it is small, else chunk by chunk
            step, width = arr.chunks
            whole_band = step * data.shape[1] * arr.dtype.itemsize <= SCORE_BAND_BYTES
            for start in range(0, data.shape[0], step):
                band = np.asarray(data[start:start + step]) if whole_band else None
                for c0 in range(0, data.shape[1], width):
                    piece = band[:, c0:c0 + width] if band is not None else data[start:start + step, c0:c0 + width]
                    arr[start:start + step, c0:c0 + width] = np.asarray(piece)
                    progress.advance("writing", _counted_bytes(piece, len(piece)))
            continue
        if data.ndim == 0:
            arr[...] = data
            continue
        step = arr.chunks[0] * WRITE_BAND_CHUNKS
        for start in range(0, data.shape[0], step):
            arr[start:start + step] = data[start:start + step]
            progress.advance("writing", _counted_bytes(data, min(step, data.shape[0] - start)))
    for name, extra_attrs in (array_attrs or {}).items():
        if name in created:
            created[name][0].attrs.update(dict(extra_attrs))
    if attrs:
        root.attrs[SHARED_ATTRIBUTE] = {"version": 1, **dict(attrs)}
    return root


def _counted_bytes(data: Any, rows: int) -> int:
    """The bytes of ``rows`` rows of ``data`` for the writing progress: numbers only (strings have no fixed
    size, and an import's bulk is its numbers)."""
    if data.dtype.kind not in "biuf":
        return 0
    return rows * int(np.prod(data.shape[1:])) * data.dtype.itemsize


# --------------------------------------------------------------------------- validation


def bad_rows(block: np.ndarray | None, norms: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(rows with NaN/Inf, all-zero rows) of an embedding block.

    With the rows' float64 norms at hand no extra pass is needed: a NaN or Inf
    gives a non-finite norm and a zero row a zero one.
    """
    if norms is not None:
        return np.nonzero(~np.isfinite(norms))[0], np.nonzero(norms == 0)[0]
    assert block is not None, "bad_rows needs the block or its norms"
    return np.nonzero(~np.isfinite(block).all(axis=1))[0], np.nonzero(~np.any(block != 0, axis=1))[0]


def embedding_problems(name: str, nonfinite: np.ndarray, zero: np.ndarray, cosine: bool) -> list[InputError]:
    """The errors for bad embedding rows (zero rows only matter under cosine)."""
    found: list[InputError] = []
    if nonfinite.size:
        found.append(ArrayError(name, f"rows {rows_text(nonfinite)} contain NaN or Inf", rows=nonfinite))
    if cosine and zero.size:
        found.append(ArrayError(name, f"rows {rows_text(zero)} are all-zero vectors (cosine similarity is undefined "
                                "for them; use " + mention("--similarity") + " dot or fix the rows)", rows=zero))
    return found


def check_embeddings(name: str, rows_start: int, block: np.ndarray, cosine: bool,
                     norms: np.ndarray | None = None) -> list[InputError]:
    """Problems of one block of embedding rows starting at ``rows_start``."""
    nonfinite, zero = bad_rows(block, norms)
    return embedding_problems(name, nonfinite + rows_start, zero + rows_start, cosine)




def dot_overflow_error(query_rows: np.ndarray, query_norm: float, gallery_rows: np.ndarray,
                       gallery_norm: float) -> ArrayError:
    """The input error for embeddings whose dot products can overflow float32."""
    return ArrayError("gallery/emb", f"rows {rows_text(gallery_rows)} (norm up to {gallery_norm:.3g}) with "
                      + mention("query/emb") + " rows "
            f"{rows_text(query_rows)} (norm up to {query_norm:.3g}) give dot products that can exceed "
            f"float32's largest value ({float(np.finfo(np.float32).max):.3g}) under " + mention("--similarity")
            + " dot; scale the embeddings down (or use " + mention("--similarity") + " cosine)", rows=gallery_rows)
