"""Challenge scoring: checking untrusted submissions, the participant result, the leaderboard.

A submission holds a feature vector for every query and every gallery image
of the truth bundle: either a Zarr group with ``query/emb`` and
``gallery/emb``, or a folder with ``query.npy`` and ``gallery.npy``. It is
untrusted, so everything is checked before a byte of it is used, and before
anything is written:

- ``.npy``: the header alone is parsed first (``check_npy_header``: magic,
  version 1.0/2.0 header, dtype, shape, and that the file holds exactly the
  bytes the header promises); only then is the file memory-mapped, with
  ``allow_pickle=False``. Object (pickled) arrays never get that far.
- Zarr: dtype and codecs come from the metadata (``check_zarr_array``); only
  plain numeric codecs are allowed (no pickle / msgpack / JSON / vlen filters).
- dtype float16, float32 or float64 (``check_dtype``); shape (rows, dims)
  with rows = the truth's query / gallery count and dims = the truth's
  ``dims`` attribute, default 128 (``check_rows``).
- values, block by block (``check_norms``): no NaN / Inf, and every vector
  L2-normalised: | ||v|| - 1 | <= 1e-3.

Each problem is one InputError naming the array (``gallery.npy``,
``query/emb``), how many rows and the first one.

The participant sees team, submission, fingerprint, score, n_queries,
n_evaluated, timestamp (``RESULT_KEYS``), and nothing of the annotations. The
leaderboard is one Parquet file rewritten under a lock with a temporary file
and ``os.replace`` (``rewrite_leaderboard``); which rows it keeps and how they
rank (each team's best) is the leaderboard model, ``evalcore.jobs.standings``.
Team and submission names are compared in Unicode NFC: they are normalised
where they come in (``check_label``, ``read_leaderboard``).
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import math
import os
import re
import stat
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import zarr

from evalcore.errors import InputError, OptionError, foreign_reason, input_error, mention
from evalcore.io import dataset as ds
from evalcore.io.dataset import is_url
from evalcore.io.files import atomic_write, locked

DEFAULT_DIMS = 128
NORM_TOLERANCE = 1e-3
#: rows per block when scanning or copying a submission (64 MiB of float64 at D = 128)
BLOCK_ROWS = 65536
FLOAT_DTYPES = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))
SIDES = ("query", "gallery")
#: codecs a submitted Zarr array may use: byte layout, checksums and plain compressors only
SAFE_CODECS = frozenset({
    "bytes", "transpose", "sharding_indexed", "crc32c", "blosc", "zstd", "gzip", "zlib", "lz4", "bz2", "lzma",
    "shuffle", "delta", "bitround", "fletcher32", "adler32", "crc32", "numcodecs.zstd", "numcodecs.gzip",
    "numcodecs.zlib", "numcodecs.lz4", "numcodecs.blosc", "numcodecs.bz2", "numcodecs.lzma", "numcodecs.shuffle",
    "numcodecs.delta", "numcodecs.crc32", "numcodecs.adler32", "numcodecs.fletcher32",
})
LEADERBOARD_COLUMNS = ("team", "submission", "fingerprint", "score", "n_queries", "n_evaluated", "scored_at")
RESULT_KEYS = ("team", "submission", "fingerprint", "score", "n_queries", "n_evaluated", "timestamp")
TEAM = re.compile(r"^[^\x00-\x1f\x7f]{1,100}$")
#: Unicode categories refused in names: controls (U+0085 too), format characters (bidi overrides such as
#: U+202E, zero-width), line / paragraph separators (U+2028, U+2029: ``splitlines`` splits there),
#: surrogates, private use and unassigned code points
REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})


# =========================================================================== pure checks


def check_dtype(name: str, dtype) -> np.dtype:
    """float16, float32 or float64 (either byte order); object, structured, int, complex... are refused."""
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise input_error(name, f"dtype {dtype!r} is not float16, float32 or float64") from None
    if dtype.hasobject:
        raise input_error(name, "holds Python objects (a pickled array); only float16, float32 or float64 "
                         "numbers are accepted")
    if dtype.names is not None or dtype.subdtype is not None or dtype.newbyteorder("=") not in FLOAT_DTYPES:
        raise input_error(name, f"dtype {dtype} is not float16, float32 or float64")
    return dtype


def check_shape(name: str, shape, n_rows: int, dims: int, what: str) -> None:
    """(n_rows, dims) exactly; ``what`` names the rows ("queries", "gallery images")."""
    shape = tuple(shape)
    if len(shape) != 2:
        raise input_error(name, f"shape {shape} is not (rows, {dims})")
    check_rows(name, shape[0], n_rows, what)
    if shape[1] != dims:
        raise input_error(name, f"{shape[1]} dimensions, the challenge asks for {dims}")


def check_rows(name: str, rows: int, expected: int, what: str) -> None:
    """One vector per row of the truth: missing or extra rows are refused."""
    if rows < expected:
        raise input_error(name, f"{rows} rows, but the truth has {expected} {what} "
                         f"({expected - rows} missing)")
    if rows > expected:
        raise input_error(name, f"{rows} rows, but the truth has {expected} {what} ({rows - expected} extra)")


def check_header_size(name: str, shape: tuple, dtype: np.dtype, data_offset: int, file_size: int) -> None:
    """The file holds exactly the bytes the header promises (a lying header or a truncated file is refused)."""
    want = data_offset + math.prod(shape) * dtype.itemsize
    if file_size < want:
        raise input_error(name, f"truncated or the header lies: shape {tuple(shape)} of {dtype} needs "
                         f"{want} bytes, the file has {file_size}")
    if file_size > want:
        raise input_error(name, f"the header lies: shape {tuple(shape)} of {dtype} needs {want} bytes, "
                         f"the file has {file_size} ({file_size - want} bytes too many)")


@dataclass
class NormCheck:
    """Rows found so far with NaN/Inf and with a norm off 1 (counts and the first of each)."""

    nonfinite: int = 0
    first_nonfinite: int | None = None
    off: int = 0
    first_off: int | None = None
    first_off_norm: float | None = None

    def add(self, other: NormCheck) -> None:
        if other.nonfinite and self.first_nonfinite is None:
            self.first_nonfinite = other.first_nonfinite
        if other.off and self.first_off is None:
            self.first_off, self.first_off_norm = other.first_off, other.first_off_norm
        self.nonfinite += other.nonfinite
        self.off += other.off

    def raise_if_any(self, name: str, tolerance: float = NORM_TOLERANCE) -> None:
        if self.nonfinite:
            raise input_error(name, f"{self.nonfinite} row(s) contain NaN or Inf (first: row {self.first_nonfinite})",
                              rows=[int(self.first_nonfinite or 0)])
        if self.off:
            raise input_error(name, f"{self.off} row(s) are not L2-normalised: norm off 1 by more than "
                             f"{tolerance:g} (first: row {self.first_off}, norm {self.first_off_norm:.6g})",
                              rows=[int(self.first_off or 0)])


def check_norms(block: np.ndarray, start: int, tolerance: float = NORM_TOLERANCE) -> NormCheck:
    """NaN/Inf rows and rows with | ||v|| - 1 | > tolerance in ``block`` (rows numbered from ``start``).

    The norm is summed in float64 whatever the dtype.
    """
    block = np.asarray(block)
    finite = np.isfinite(block).all(axis=1)
    norms = np.sqrt(np.einsum("ij,ij->i", block, block, dtype=np.float64))
    off = finite & ~(np.abs(norms - 1.0) <= tolerance)
    bad, far = np.flatnonzero(~finite), np.flatnonzero(off)
    out = NormCheck(nonfinite=int(bad.size), off=int(far.size))
    if bad.size:
        out.first_nonfinite = start + int(bad[0])
    if far.size:
        out.first_off, out.first_off_norm = start + int(far[0]), float(norms[far[0]])
    return out


def codec_names(metadata) -> list[str]:
    """Every codec / filter / compressor id named anywhere in a Zarr array's metadata dict."""
    names = []

    def walk(value, key=None):
        if isinstance(value, Mapping):
            if key in ("codecs", "filters", "compressor", "compressors", "index_codecs") or "id" in value \
                    or ("name" in value and "configuration" in value):
                label = value.get("id", value.get("name"))
                if isinstance(label, str):
                    names.append(label)
            for k, v in value.items():
                if k in ("attributes", "chunk_grid", "chunk_key_encoding"):
                    continue
                walk(v, k)
        elif isinstance(value, (list, tuple)):
            for v in value:
                if isinstance(v, str) and key in ("codecs", "filters", "compressors"):
                    names.append(v)
                else:
                    walk(v, key)

    walk(metadata)
    return names


def check_codecs(name: str, metadata) -> None:
    """Only plain numeric codecs (no pickle, msgpack, JSON, vlen...): decoding must not run foreign code."""
    unsafe = [c for c in codec_names(metadata) if c.lower() not in SAFE_CODECS]
    if unsafe:
        raise input_error(name, f"uses codec {unsafe[0]!r}; only plain numeric Zarr codecs are accepted "
                         f"({', '.join(sorted(c for c in SAFE_CODECS if '.' not in c))})")


def unprintable(text: str) -> list[str]:
    """The characters of ``text`` in ``REFUSED_CATEGORIES``, as U+XXXX."""
    return [f"U+{ord(c):04X}" for c in text if unicodedata.category(c) in REFUSED_CATEGORIES]


def normalized(text: str) -> str:
    """``text`` in Unicode NFC: a name typed composed (U+00E9) and decomposed (e + U+0301) is one name."""
    return unicodedata.normalize("NFC", text)


def check_label(option: str, text: str) -> str:
    """A team or submission name: 1 to 100 printable characters (no control, format, separator characters),
    returned in NFC (``normalized``), so the leaderboard sees one team however its name was typed."""
    if isinstance(text, str):
        text = normalized(text)
    if not isinstance(text, str) or not TEAM.match(text) or not text.strip():
        raise input_error(option, f"{text!r} must be 1 to 100 printable characters")
    bad = unprintable(text)
    if bad:
        raise input_error(option, f"{text!r} must be 1 to 100 printable characters "
                         f"(holds {', '.join(dict.fromkeys(bad))})")
    return text.strip()


def check_team(team: str) -> str:
    return check_label("--team", team)


# =========================================================================== reading a submission


def check_npy_header(name: str, path) -> tuple[tuple, np.dtype, bool, int]:
    """(shape, dtype, fortran_order, data offset) of a .npy file, from its header alone.

    Refuses: not a regular file, bad magic, header versions other than 1.0 / 2.0,
    a dtype other than float16/32/64 (objects: pickle), a shape other than 2-D,
    and a file whose size differs from what the header promises.
    """
    path = Path(path)
    try:
        st = path.stat()
    except FileNotFoundError:
        raise input_error(name, f"missing ({path})") from None

    if not stat.S_ISREG(st.st_mode):
        raise input_error(name, f"not a regular file ({path})")
    fmt = np.lib.format
    with open(path, "rb") as fh:
        try:
            version = fmt.read_magic(fh)
        except ValueError as exc:
            raise input_error(name, f"not a .npy file ({foreign_reason(exc)})") from None
        try:
            if version == (1, 0):
                shape, fortran, dtype = fmt.read_array_header_1_0(fh)
            elif version == (2, 0):
                shape, fortran, dtype = fmt.read_array_header_2_0(fh)
            else:
                raise input_error(name, f".npy format version {version[0]}.{version[1]} is not accepted "
                                 "(write it with numpy.save: version 1.0 or 2.0)")
        except (ValueError, SyntaxError, TypeError) as exc:
            raise input_error(name, f"the .npy header cannot be read ({foreign_reason(exc)})") from None
        offset = fh.tell()
    dtype = check_dtype(name, dtype)
    if not isinstance(shape, tuple) or not all(isinstance(s, int) and s >= 0 for s in shape):
        raise input_error(name, f"the header's shape {shape!r} is not a tuple of sizes")
    if len(shape) != 2:
        raise input_error(name, f"shape {shape} is not (rows, dims)")
    check_header_size(name, shape, dtype, offset, st.st_size)
    return shape, dtype, bool(fortran), offset


def check_zarr_array(name: str, array) -> np.dtype:
    """dtype and codecs of a submitted Zarr array, from its metadata (no chunk is read)."""
    try:
        meta = array.metadata.to_dict()
    except Exception as exc:  # noqa: BLE001 - anything odd in untrusted metadata is a refusal
        raise input_error(name, f"unreadable Zarr metadata ({exc.__class__.__name__})") from None
    raw = meta.get("data_type", meta.get("dtype"))
    if not isinstance(raw, str):
        raise input_error(name, f"dtype {raw!r} is not float16, float32 or float64")
    if raw in ("|O", "object") or raw.startswith("|O"):
        check_dtype(name, np.dtype(object))
    try:
        dtype = np.dtype(raw)
    except TypeError:
        raise input_error(name, f"dtype {raw!r} is not float16, float32 or float64") from None
    check_dtype(name, dtype)
    check_codecs(name, meta)
    return dtype


@dataclass(frozen=True)
class NpyRows:
    """The rows of a C-order ``.npy`` file whose header ``check_npy_header`` passed, read on demand.

    ``rows[a:b]`` reads bytes ``offset + a * row_bytes`` to ``offset + b *
    row_bytes`` with one ``pread``: only the block asked for is ever in memory
    (a memory map would keep every page read resident in the process).
    """

    path: str
    shape: tuple
    dtype: np.dtype
    offset: int

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __len__(self) -> int:
        return int(self.shape[0])

    def __getitem__(self, rows) -> np.ndarray:
        if not isinstance(rows, slice) or rows.step not in (None, 1):
            raise TypeError("NpyRows reads contiguous row slices only")
        start, stop, _ = rows.indices(self.shape[0])
        stop = max(start, stop)
        row_bytes = int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize
        fd = os.open(self.path, os.O_RDONLY)
        try:
            data = os.pread(fd, (stop - start) * row_bytes, self.offset + start * row_bytes)
        finally:
            os.close(fd)
        if len(data) != (stop - start) * row_bytes:
            raise OSError(f"{self.path}: shorter than its header says (changed while read?)")
        return np.frombuffer(data, dtype=self.dtype).reshape((stop - start, *self.shape[1:]))


@dataclass
class Submission:
    """A submission opened for reading: one array-like per side, with the names used in messages."""

    path: str
    kind: str                       # "npy" or "zarr"
    arrays: dict = field(default_factory=dict)
    names: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        return Path(str(self.path).rstrip("/")).name or str(self.path)


def open_submission(path) -> Submission:
    """Open a submission after checking its headers / metadata (dtype, 2-D shape, codecs, file sizes)."""
    root = Path(str(path))
    if (root / "query.npy").exists() or (root / "gallery.npy").exists():
        sub = Submission(str(path), "npy")
        for side in SIDES:
            name = f"{side}.npy"
            shape, dtype, fortran, offset = check_npy_header(name, root / name)
            try:
                # C order (what numpy.save writes for most arrays): rows read by position, a block at a time;
                # Fortran order has no contiguous rows, so it is mapped
                sub.arrays[side] = NpyRows(str(root / name), shape, dtype, offset) if not fortran \
                    else np.load(root / name, mmap_mode="r", allow_pickle=False)
            except (ValueError, OSError) as exc:
                raise input_error(name, f"cannot be read ({foreign_reason(exc)})") from None
            sub.names[side] = name
        return sub


    if not root.exists() and not is_url(path):
        raise InputError(f"submission {path}: no such file or folder")
    try:
        group = ds.open_dataset(str(path))
    except InputError:
        raise InputError(f"submission {path}: neither a folder with query.npy and gallery.npy "
                         "nor a Zarr group with " + mention("query/emb") + " and " + mention("gallery/emb")) from None
    sub = Submission(str(path), "zarr")
    for side in SIDES:
        name = f"{side}/emb"
        try:
            arr = group[name]
        except KeyError:
            arr = None
        except Exception as exc:  # noqa: BLE001 - untrusted metadata zarr itself refuses
            raise input_error(name, f"unreadable Zarr metadata ({foreign_reason(exc, named=True)})") from None
        if not isinstance(arr, zarr.Array):
            raise input_error(name, f"missing from the submission {path}")
        check_zarr_array(name, arr)
        if len(arr.shape) != 2:
            raise input_error(name, f"shape {arr.shape} is not (rows, dims)")
        sub.arrays[side] = arr
        sub.names[side] = name
    return sub


def blocks(array, block_rows: int = BLOCK_ROWS):
    """(start, numpy rows) of an array-like, ``block_rows`` at a time."""
    for start in range(0, array.shape[0], block_rows):
        yield start, np.asarray(array[start:start + block_rows])


def little_endian(dtype) -> np.dtype:
    """``dtype`` in little-endian byte order (``>f4`` -> ``<f4``): what the fingerprint hashes, so byte order,
    which changes no number, changes no fingerprint."""
    return np.dtype(dtype).newbyteorder("<")


def check_submission(sub: Submission, n_query: int, n_gallery: int, dims: int = DEFAULT_DIMS,
                     tolerance: float = NORM_TOLERANCE) -> str:
    """Check every array (shape first, then every value); returns the fingerprint (sha256 hex).

    fingerprint = sha256 over, per side (query, gallery): ``"<side>:<dtype.str>:<rows>x<dims>\\n"``
    then the rows' bytes in C order, both taken little-endian (``little_endian``): the same numbers give the
    same fingerprint whether submitted as .npy or Zarr, in either byte order.
    """
    expected = {"query": (n_query, "queries"), "gallery": (n_gallery, "gallery images")}
    for side in SIDES:
        arr = sub.arrays[side]
        check_dtype(sub.names[side], arr.dtype)
        check_shape(sub.names[side], arr.shape, expected[side][0], dims, expected[side][1])
    digest = hashlib.sha256()
    for side in SIDES:
        arr, name = sub.arrays[side], sub.names[side]
        dtype = little_endian(arr.dtype)
        digest.update(f"{side}:{dtype.str}:{arr.shape[0]}x{arr.shape[1]}\n".encode())
        found = NormCheck()
        try:
            for start, block in blocks(arr):
                digest.update(np.ascontiguousarray(block, dtype=dtype).tobytes())
                found.add(check_norms(block, start, tolerance))
        except InputError:
            raise
        except Exception as exc:  # noqa: BLE001 - a corrupt chunk of an untrusted Zarr group
            raise input_error(name, f"cannot be read ({foreign_reason(exc, named=True)})") from None
        found.raise_if_any(name, tolerance)
    return digest.hexdigest()


# =========================================================================== the truth bundle


TRUTH_ARRAYS = ("query/key", "gallery/key", "qrels/query", "qrels/item", "qrels/rel")


def truth_shape(group) -> tuple[int, int, int]:
    """(queries, gallery images, dims) of a truth bundle; InputError naming what is missing."""
    attrs = ds.dataset_attributes(group)
    if attrs.get("protocol", "qrels") != "qrels":
        raise OptionError("truth", f"attribute evalcore.protocol is {attrs.get('protocol')!r}, not 'qrels'")
    for name in TRUTH_ARRAYS:
        if not ds.has(group, name):
            raise OptionError("truth", f"{name} is missing")
    dims = attrs.get("dims", DEFAULT_DIMS)
    if not isinstance(dims, int) or isinstance(dims, bool) or dims < 1:
        raise OptionError("truth", f"attribute evalcore.dims {dims!r} is not a positive integer")
    return int(group["query/key"].shape[0]), int(group["gallery/key"].shape[0]), int(dims)


# =========================================================================== result and leaderboard


def utc_now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0)


LEADERBOARD_SCHEMA = pa.schema([
    ("team", pa.string()), ("submission", pa.string()), ("fingerprint", pa.string()), ("score", pa.float64()),
    ("n_queries", pa.int64()), ("n_evaluated", pa.int64()), ("scored_at", pa.timestamp("s", tz="UTC")),
    # the organizer's report folder of the row (null for rows written before it was kept): ``score --ci`` reads
    # each row's per-query APs there
    ("report", pa.string()),
])


def best_path(leaderboard) -> Path:
    """``leaderboard_best.parquet`` next to ``leaderboard.parquet``."""
    p = Path(leaderboard)
    return p.with_name(f"{p.stem}_best{p.suffix or '.parquet'}")


def read_leaderboard(path) -> pa.Table:
    """The leaderboard (empty when the file does not exist yet); InputError when it is not one."""
    p = Path(path)
    if not p.exists():
        return LEADERBOARD_SCHEMA.empty_table()
    try:
        table = pq.read_table(p)
    except (OSError, pa.ArrowException) as exc:
        raise InputError(mention("--leaderboard")
                         + f" {path}: not a readable Parquet file ({exc.__class__.__name__})") from None
    missing = [c for c in LEADERBOARD_COLUMNS if c not in table.column_names]
    if missing:
        raise InputError(mention("--leaderboard") + f" {path}: not a leaderboard (no column(s) {', '.join(missing)})")
    if "report" not in table.column_names:
        table = table.append_column("report", pa.nulls(table.num_rows, pa.string()))
    try:
        table = table.select(LEADERBOARD_SCHEMA.names).cast(LEADERBOARD_SCHEMA)
    except (pa.ArrowException, ValueError) as exc:
        raise InputError(mention("--leaderboard")
                         + f" {path}: columns of unexpected types ({foreign_reason(exc)})") from None
    for name in ("team", "submission"):  # rows written before names were normalised join their team
        values = [None if v is None else normalized(v) for v in table.column(name).to_pylist()]
        table = table.set_column(table.schema.get_field_index(name), name, pa.array(values, pa.string()))
    return table


def rewrite_leaderboard(path, change: Callable[[pa.Table], tuple[pa.Table, pa.Table]]) -> pa.Table:
    """Read, change and write the leaderboard at ``path`` and ``<stem>_best.parquet`` under its lock.

    Holds an exclusive lock (``.<name>.lock`` next to the file) while it reads;
    ``change(board) -> (board, best)`` (the leaderboard model,
    ``evalcore.jobs.standings``) gives both tables, each written through a
    temporary file and ``os.replace``. Returns the new leaderboard.
    """
    p = Path(path)
    with locked(p.parent / f".{p.name}.lock"):
        table, best = change(read_leaderboard(p))
        atomic_write(p, table)
        atomic_write(best_path(p), best)
    return table


def is_local(path) -> bool:
    return not is_url(path)


# =========================================================================== splits of the truth


def truth_splits(group, n_query: int) -> np.ndarray:
    """``query/split`` of a truth bundle (strings such as ``public``, ``private``), one per query; every query
    ``public`` when the array is absent. InputError naming the array when its length or a value is wrong."""
    if not ds.has(group, "query/split"):
        return np.full(n_query, "public", dtype=object)
    values = ds.read(group, "query/split")
    if values.ndim != 1 or values.shape[0] != n_query:
        raise OptionError("truth", mention("query/split")
                          + f" has shape {values.shape}, the truth has {n_query} queries")
    out = np.asarray([str(v) for v in values], dtype=object)
    bad = [i for i, v in enumerate(out) if not v.strip() or unprintable(v) or len(v) > 100]
    if bad:
        raise OptionError("truth", mention("query/split")
                          + f": {len(bad)} row(s) are empty or not printable (first: row {bad[0]})")
    return out
