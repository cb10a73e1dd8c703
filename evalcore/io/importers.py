"""Import retrieval results from other tools' file formats into the contract's Zarr layout.

One reader per format. Each reader only reads and validates: it returns
``(arrays, attrs)`` with arrays named as in the contract (``query/emb``,
``gallery/label``, ``qrels/rel``, ``ranking/item`` ...) and raises
:class:`~evalcore.errors.InputError` on the first problem, naming the file,
the record (0-based ``row`` / ``entry``, 1-based ``line``) and the field.
:func:`import_to` runs a reader and only then calls
:func:`evalcore.io.dataset.write_dataset`, so nothing is written on bad input.

Formats (``FORMATS_HELP`` is the same text for the command line):

``mat``
    Person_reID_baseline_pytorch's ``pytorch_result.mat`` (``scipy.io.savemat``):
    keys ``query_f`` (Q,D), ``query_label`` (1,Q), ``query_cam`` (1,Q),
    ``gallery_f`` (G,D), ``gallery_label`` (1,G), ``gallery_cam`` (1,G).
    Gallery label -1 ("junk" in that project's evaluate script) becomes
    ``gallery/junk`` = True and stays negative; label 0 (Market-1501
    distractors) stays an ordinary non-matching item. Protocol ``reid``.

``npy``
    NumPy arrays as torchreid / fast-reid users save them, always loaded with
    ``allow_pickle=False``. Either one ``.npz`` with keys ``query_features``/``qf``,
    ``gallery_features``/``gf``, ``query_pids``/``q_pids``, ``gallery_pids``/``g_pids``
    and optionally ``query_camids``/``q_camids``, ``gallery_camids``/``g_camids``
    (and ``query_keys``/``gallery_keys``); or a folder holding ``<key>.npy`` files
    under those names; or explicit files ``--query-features --gallery-features
    --query-ids --gallery-ids [--query-cams --gallery-cams]`` (these override
    files found in a folder). With cameras the protocol is ``reid``, without it
    is ``class``. ``--junk-label N`` marks gallery items with label N as junk.

``parquet``
    One Parquet file with a side column (``--side-column``, default ``side``,
    values ``query``/``gallery``), or two files: query first, gallery second.
    Columns: ``--emb-column`` (default ``emb``; list<number>, every row the same
    length), and when present ``--label-column`` (``label``), ``--cam-column``
    (``cam``), ``--key-column`` (``key``), ``--group-column`` (``group``),
    ``--lat-column`` (``lat``), ``--lon-column`` (``lon``). A column named
    explicitly must exist; a default-named one is used when present. Row numbers
    in messages are 0-based rows of the file. Protocol: ``reid`` with labels and
    cameras, ``class`` with labels only, ``geo`` with coordinates only.

``faiss-json``
    FAISS search results for place recognition, in a folder::

        query_index.json      [{"id": "q1", "lat": 48.85, "lon": 2.35}, ...]
                              (or {"queries": [...]})
        reference_index.json  [{"id": "r1", "lat": ..., "lon": ...}, ...]
                              (or {"references": [...]})
        results/<query id>.json, one per query, best match first, either
            {"query": "q1", "results": [{"id": "r7", "score": 0.93}, ...]}
        or, as FAISS returns them (``index.search`` -> D, I):
            {"query": "q1", "neighbors": [7, 3, ...], "scores": [0.93, ...]}
            {"query": "q1", "neighbors": [7, 3, ...], "distances": [0.12, ...]}

    ``--query-index``, ``--reference-index`` and ``--results-dir`` override the
    three paths. Ids are strings (JSON integers are turned into strings) and
    must be unique; ``lat`` in [-90, 90] and ``lon`` in [-180, 180] degrees,
    finite. ``"query"`` is optional but, when given, must equal the file's id.
    In ``neighbors`` an integer is a 0-based position in reference_index.json
    (the FAISS id; -1 pads are dropped with their score), a string is a
    reference id. ``distances`` are stored negated in ``ranking/score`` so
    that higher is better everywhere. The order in the file is the ranking.
    A query without a results file is an error; an empty list is a query with
    no results; a results file for an unknown query is an error; a reference
    listed twice for one query is an error. ``ranking/item`` is (Q, K) with K
    the longest list, padded with -1 (score NaN). Protocol ``geo``.

``trec``
    A TREC qrels file, one judgement per line ``qid iter docid rel``
    (whitespace separated, ``iter`` ignored; blank lines and lines starting
    with ``#`` are skipped), plus the query and gallery ids: ``--queries
    FILE --gallery FILE`` (one id per line; the line order is the row order),
    or ``--dataset DATASET`` to take ``query/key``/``gallery/key`` from an
    existing dataset and write a copy of it with the qrels added (existing
    qrels are replaced). As in trec_eval (relevance level 1): rel >= 1 -> 1
    relevant; 0 and negative -> 0 judged, not relevant (a negative grade is
    trec_eval's "unjudged in pool", never junk). Judgements of queries not
    among the query ids are left out with a warning (trec_eval ignores
    queries without results). A repeated (qid, docid) with the same relevance
    is collapsed; with a different one it is an error. Protocol ``qrels``.

``trec-run``
    A TREC run file, one result per line ``qid Q0 docno rank score tag``
    (whitespace separated; ``Q0``, ``rank`` and ``tag`` are ignored, as
    trec_eval ignores them), with its qrels: ``--qrels FILE`` (read as for
    ``trec``). Writes ``ranking/item`` (best first, -1 pads), ``query/key``,
    ``gallery/key`` (every docno of the run and the qrels, sorted) and
    ``qrels/*``. Queries are those with both results and judgements, sorted
    by qid; the others are left out with a warning (trec_eval's default).
    ``--order score`` (default): results sorted by score, highest first, and
    ``ranking/score`` written (float32), so equal scores are tie groups that
    ``evaluate --ties`` orders (pessimistic by default). ``--order trec_eval``:
    trec_eval's own order (score descending, equal scores by docno
    descending) and no ``ranking/score``, so that order stands; with
    ``evaluate --empty-queries zero`` the numbers are trec_eval's (map,
    recip_rank = mrr, P_k = precision_at_k, recall_k, success_k = hit_at_k).
    A line without 6 fields, a score that is not a finite number, and a docno
    listed twice for one query are errors naming the file and line
    (duplicates in ``ranking/item`` are refused the same way at evaluation:
    a second listing would count as a second hit).
"""
from __future__ import annotations

import inspect
import json
import math
import os
import zipfile
from collections.abc import Mapping, Sequence

import numpy as np

from evalcore.errors import InputError, rows_text
from evalcore.io.dataset import is_url

__all__ = [
    "FORMATS", "FORMATS_HELP", "import_to", "read_faiss_json", "read_mat", "read_npy",
    "read_parquet", "read_trec", "read_trec_run",
]

FORMATS_HELP = __doc__[__doc__.index("``mat``"):]


# --------------------------------------------------------------------------- helpers


def _name(path) -> str:
    return str(path)


def _plural(rows) -> str:
    return "row" if len(rows) == 1 else "rows"


def _check_features(values, where: str) -> np.ndarray:
    """A (N, D) float32 array; ``where`` is ``"FILE: key NAME"``-like."""
    data = np.asarray(values)
    if data.dtype.kind not in "fiu" or data.dtype.kind == "b":
        raise InputError(f"{where}: dtype {data.dtype} is not numeric")
    if data.ndim != 2:
        raise InputError(f"{where}: shape {data.shape} is not (rows, dims)")
    if data.shape[0] == 0 or data.shape[1] == 0:
        raise InputError(f"{where}: shape {data.shape} is empty")
    with np.errstate(over="ignore", invalid="ignore"):
        data = data.astype(np.float32, copy=False)
    bad = np.nonzero(~np.isfinite(data).all(axis=1))[0]
    if bad.size:
        raise InputError(f"{where}: {_plural(bad)} {rows_text(bad)} contain NaN or Inf "
                         "(or values too large for float32)")
    return data


def _check_integers(values, where: str, n: int | None = None, n_from: str = "") -> np.ndarray:
    """A 1-D int64 array (a (1, N) or (N, 1) matrix is flattened); floats must be whole."""
    data = np.asarray(values)
    if data.ndim == 2 and 1 in data.shape:
        data = data.reshape(-1)
    if data.ndim != 1:
        raise InputError(f"{where}: shape {data.shape} is not one-dimensional")
    if data.dtype.kind == "f":
        bad = np.nonzero(~np.isfinite(data) | (data != np.round(data)))[0]
        if bad.size:
            raise InputError(f"{where}: {_plural(bad)} {rows_text(bad)} are not whole numbers "
                             f"(first: {data[bad[0]]!r})")
    elif data.dtype.kind not in "iu":
        raise InputError(f"{where}: dtype {data.dtype} is not integer")
    if n is not None and data.shape[0] != n:
        raise InputError(f"{where}: {data.shape[0]} entries, but {n_from} has {n} rows")
    return data.astype(np.int64)


def _check_unique(keys: Sequence[str], where: str, record: str = "row", rows=None) -> None:
    seen: dict[str, int] = {}
    for i, key in enumerate(keys):
        j = seen.setdefault(key, i)
        if j != i:
            a, b = (rows[j], rows[i]) if rows is not None else (j, i)
            raise InputError(f"{where}: duplicate id {key!r} ({record}s {a} and {b})")


def _check_coordinates(lat, lon, where_lat: str, where_lon: str, rows=None) -> None:
    """Finite latitudes in [-90, 90] and longitudes in [-180, 180]."""
    for values, where, limit in ((lat, where_lat, 90.0), (lon, where_lon, 180.0)):
        values = np.asarray(values, dtype=np.float64)
        bad = np.nonzero(~np.isfinite(values))[0]
        if bad.size:
            shown = bad if rows is None else np.asarray(rows)[bad]
            raise InputError(f"{where}: {_plural(bad)} {rows_text(shown)} are NaN or infinite")
        bad = np.nonzero(np.abs(values) > limit)[0]
        if bad.size:
            shown = bad if rows is None else np.asarray(rows)[bad]
            raise InputError(f"{where}: {_plural(bad)} {rows_text(shown)} lie outside "
                             f"[-{limit:g}, {limit:g}] degrees (first: {values[bad[0]]!r})")


def _protocol(arrays: Mapping[str, np.ndarray]) -> str | None:
    if "query/label" in arrays and "query/cam" in arrays:
        return "reid"
    if "query/label" in arrays:
        return "class"
    if "qrels/rel" in arrays:
        return "qrels"
    if "query/lat" in arrays:
        return "geo"
    return None


def _junk(labels: np.ndarray, junk_label: int | None) -> dict[str, np.ndarray]:
    return {} if junk_label is None else {"gallery/junk": labels == int(junk_label)}


# --------------------------------------------------------------------------- mat


MAT_KEYS = ("query_f", "query_label", "query_cam", "gallery_f", "gallery_label", "gallery_cam")


def read_mat(path) -> tuple[dict[str, np.ndarray], dict]:
    """Person_reID_baseline_pytorch's ``pytorch_result.mat``; gallery label -1 is junk."""
    import scipy.io

    name = _name(path)
    if not os.path.isfile(path):
        raise InputError(f"{name}: no such file")
    try:
        mat = scipy.io.loadmat(path)
    except NotImplementedError as exc:  # MATLAB v7.3 files are HDF5
        raise InputError(f"{name}: cannot be read by scipy.io.loadmat ({exc})") from None
    except Exception as exc:  # noqa: BLE001 - scipy raises many types for broken files
        raise InputError(f"{name}: not a readable .mat file ({type(exc).__name__}: {exc})") from None
    missing = [k for k in MAT_KEYS if k not in mat]
    if missing:
        found = sorted(k for k in mat if not k.startswith("__"))
        raise InputError(f"{name}: key {missing[0]} missing (needs {', '.join(MAT_KEYS)}; "
                         f"found {', '.join(found) or 'none'})")
    arrays: dict[str, np.ndarray] = {}
    for side in ("query", "gallery"):
        emb = _check_features(mat[f"{side}_f"], f"{name}: key {side}_f")
        n = emb.shape[0]
        arrays[f"{side}/emb"] = emb
        arrays[f"{side}/label"] = _check_integers(mat[f"{side}_label"], f"{name}: key {side}_label",
                                                  n, f"{side}_f")
        arrays[f"{side}/cam"] = _check_integers(mat[f"{side}_cam"], f"{name}: key {side}_cam",
                                                n, f"{side}_f")
    if arrays["query/emb"].shape[1] != arrays["gallery/emb"].shape[1]:
        raise InputError(f"{name}: key gallery_f: {arrays['gallery/emb'].shape[1]} dimensions, "
                         f"but query_f has {arrays['query/emb'].shape[1]}")
    arrays["gallery/junk"] = arrays["gallery/label"] == -1
    return arrays, {"protocol": "reid"}


# --------------------------------------------------------------------------- npy


NPY_KEYS = {
    "query_features": ("query_features", "qf"),
    "gallery_features": ("gallery_features", "gf"),
    "query_ids": ("query_pids", "q_pids"),
    "gallery_ids": ("gallery_pids", "g_pids"),
    "query_cams": ("query_camids", "q_camids"),
    "gallery_cams": ("gallery_camids", "g_camids"),
    "query_keys": ("query_keys", "q_keys"),
    "gallery_keys": ("gallery_keys", "g_keys"),
}
_NPY_REQUIRED = ("query_features", "gallery_features", "query_ids", "gallery_ids")


def _load_npy(path) -> np.ndarray:
    name = _name(path)
    if not os.path.isfile(path):
        raise InputError(f"{name}: no such file")
    try:
        data = np.load(path, allow_pickle=False)
    except ValueError as exc:
        if "allow_pickle" in str(exc) or "Object arrays" in str(exc):
            raise InputError(f"{name}: holds a Python object array, which is not loaded "
                             "(pickle is disabled); save a numeric array instead") from None
        raise InputError(f"{name}: not a readable .npy file ({exc})") from None
    except (OSError, EOFError) as exc:
        raise InputError(f"{name}: not a readable .npy file ({exc})") from None
    if isinstance(data, np.lib.npyio.NpzFile):
        data.close()
        raise InputError(f"{name}: is an .npz archive; give it as the input, not as a single array")
    return data


def _load_npz(path) -> dict[str, tuple[str, np.ndarray]]:
    """Arrays of an .npz by option name: option -> (description for messages, array)."""
    name = _name(path)
    if not os.path.isfile(path):
        raise InputError(f"{name}: no such file")
    try:
        archive = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise InputError(f"{name}: not a readable .npz file ({exc})") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise InputError(f"{name}: is a single .npy array, not an .npz archive")
    found = {}
    with archive:
        for option, aliases in NPY_KEYS.items():
            present = [k for k in aliases if k in archive.files]
            if len(present) > 1:
                raise InputError(f"{name}: keys {present[0]} and {present[1]} both given; keep one")
            if not present:
                continue
            key = present[0]
            try:
                found[option] = (f"{name}: key {key}", archive[key])
            except ValueError as exc:
                if "allow_pickle" in str(exc) or "Object arrays" in str(exc):
                    raise InputError(f"{name}: key {key}: holds a Python object array, which is not "
                                     "loaded (pickle is disabled); save a numeric array instead") from None
                raise InputError(f"{name}: key {key}: unreadable ({exc})") from None
    return found


def _relative(where: str, other: str) -> str:
    """``where`` without its file name when ``other`` names the same file (``FILE: key K``)."""
    head = where.rsplit(": key ", 1)
    return "key " + head[1] if len(head) == 2 and other.startswith(head[0] + ": key ") else where


def read_npy(path=None, *, query_features=None, gallery_features=None, query_ids=None,
             gallery_ids=None, query_cams=None, gallery_cams=None, junk_label: int | None = None,
             ) -> tuple[dict[str, np.ndarray], dict]:
    """torchreid/fast-reid style arrays: one ``.npz``, a folder of ``.npy`` files, or explicit files."""
    explicit = {"query_features": query_features, "gallery_features": gallery_features,
                "query_ids": query_ids, "gallery_ids": gallery_ids, "query_cams": query_cams,
                "gallery_cams": gallery_cams}
    explicit = {k: v for k, v in explicit.items() if v is not None}
    found: dict[str, tuple[str, np.ndarray]] = {}
    if path is not None and os.path.isdir(path):
        for option, aliases in NPY_KEYS.items():
            present = [a for a in aliases if os.path.isfile(os.path.join(path, a + ".npy"))]
            if len(present) > 1:
                raise InputError(f"{path}: files {present[0]}.npy and {present[1]}.npy both present; keep one")
            if present and option not in explicit:
                file = os.path.join(path, present[0] + ".npy")
                found[option] = (f"{file}", _load_npy(file))
    elif path is not None:
        if not os.path.exists(path):
            raise InputError(f"{path}: no such file or folder")
        if explicit:
            raise InputError(f"{path}: give either an .npz archive or --query-features/--gallery-features/"
                             f"... files, not both (also got --{next(iter(explicit)).replace('_', '-')})")
        found = _load_npz(path)
    for option, file in explicit.items():
        found[option] = (_name(file), _load_npy(file))
    source = _name(path) if path is not None else "npy import"
    for option in _NPY_REQUIRED:
        if option not in found:
            names = "/".join(NPY_KEYS[option])
            raise InputError(f"{source}: {option.replace('_', ' ')} missing (give key or file {names}, "
                             f"or --{option.replace('_', '-')} FILE.npy)")
    if ("query_cams" in found) != ("gallery_cams" in found):
        have, lack = ("query", "gallery") if "query_cams" in found else ("gallery", "query")
        raise InputError(f"{source}: {have} cameras given but {lack} cameras missing "
                         f"(give both --query-cams and --gallery-cams, or neither)")
    arrays: dict[str, np.ndarray] = {}
    for side in ("query", "gallery"):
        where, values = found[f"{side}_features"]
        emb = _check_features(values, where)
        n = emb.shape[0]
        arrays[f"{side}/emb"] = emb
        where_ids, ids = found[f"{side}_ids"]
        arrays[f"{side}/label"] = _check_integers(ids, where_ids, n, _relative(where, where_ids))
        if f"{side}_cams" in found:
            where_cams, cams = found[f"{side}_cams"]
            arrays[f"{side}/cam"] = _check_integers(cams, where_cams, n, _relative(where, where_cams))
        if f"{side}_keys" in found:
            where_keys, keys = found[f"{side}_keys"]
            keys = np.asarray(keys).reshape(-1)
            if keys.dtype.kind not in "UiuS" or keys.shape[0] != n:
                raise InputError(f"{where_keys}: expected {n} string ids, got dtype {keys.dtype} "
                                 f"shape {np.asarray(found[f'{side}_keys'][1]).shape}")
            keys = [k.decode() if isinstance(k, bytes) else str(k) for k in keys.tolist()]
            _check_unique(keys, where_keys)
            arrays[f"{side}/key"] = np.asarray(keys, dtype=object)
    dq, dg = arrays["query/emb"].shape[1], arrays["gallery/emb"].shape[1]
    if dq != dg:
        raise InputError(f"{found['gallery_features'][0]}: {dg} dimensions, but "
                         f"{_relative(found['query_features'][0], found['gallery_features'][0])} has {dq}")
    arrays.update(_junk(arrays["gallery/label"], junk_label))
    return arrays, {"protocol": _protocol(arrays)}


# --------------------------------------------------------------------------- parquet


PARQUET_DEFAULTS = {"emb": "emb", "label": "label", "cam": "cam", "key": "key", "group": "group",
                    "lat": "lat", "lon": "lon", "side": "side"}


def _list_to_matrix(column, name: str, col: str) -> np.ndarray:
    """A list<number> column as an (N, D) float32 array via flatten + reshape."""
    import pyarrow as pa
    import pyarrow.compute as pc

    typ = column.type
    if not (pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_fixed_size_list(typ)):
        raise InputError(f"{name}: column {col}: type {typ} is not a list of numbers")
    value_type = typ.value_type
    if not (pa.types.is_floating(value_type) or pa.types.is_integer(value_type)):
        raise InputError(f"{name}: column {col}: list values of type {value_type} are not numeric")
    dims = None
    blocks = []
    start = 0
    for chunk in column.chunks:
        lengths = pc.list_value_length(chunk)
        if lengths.null_count:
            first = int(np.nonzero(lengths.is_null().to_numpy(zero_copy_only=False))[0][0])
            raise InputError(f"{name}: row {start + first}, column {col}: null embedding")
        lengths = lengths.to_numpy()
        if lengths.size:
            if dims is None:
                dims = int(lengths[0])
                if dims == 0:
                    raise InputError(f"{name}: row {start}, column {col}: empty embedding")
            bad = np.nonzero(lengths != dims)[0]
            if bad.size:
                row = start + int(bad[0])
                raise InputError(f"{name}: row {row}, column {col}: {int(lengths[bad[0]])} values, "
                                 f"but earlier rows have {dims}")
            values = chunk.flatten().to_numpy(zero_copy_only=False)
            with np.errstate(over="ignore", invalid="ignore"):
                blocks.append(values.astype(np.float32, copy=False).reshape(len(chunk), dims))
        start += len(chunk)
    if dims is None:
        raise InputError(f"{name}: column {col}: no rows")
    data = np.concatenate(blocks) if len(blocks) > 1 else blocks[0]
    bad = np.nonzero(~np.isfinite(data).all(axis=1))[0]
    if bad.size:
        raise InputError(f"{name}: {_plural(bad)} {rows_text(bad)}, column {col}: NaN, Inf or null values "
                         "(or values too large for float32)")
    return data


def _column_values(column, name: str, col: str, kind: str) -> np.ndarray:
    """A scalar column as numpy: ``int`` (whole numbers), ``float`` or ``str``; nulls are errors."""
    import pyarrow as pa

    if column.null_count:
        mask = column.is_null().to_numpy(zero_copy_only=False) if hasattr(column, "is_null") else None
        first = int(np.nonzero(mask)[0][0]) if mask is not None else "?"
        raise InputError(f"{name}: row {first}, column {col}: null value")
    typ = column.type
    if pa.types.is_dictionary(typ):
        column = column.cast(typ.value_type)
        typ = typ.value_type
    if kind == "str":
        if not (pa.types.is_string(typ) or pa.types.is_large_string(typ) or pa.types.is_integer(typ)):
            raise InputError(f"{name}: column {col}: type {typ} is not string or integer")
        return np.asarray([str(v) for v in column.to_pylist()], dtype=object)
    numeric = pa.types.is_integer(typ) or pa.types.is_floating(typ)
    if not numeric:
        raise InputError(f"{name}: column {col}: type {typ} is not numeric")
    values = column.to_numpy()
    if kind == "int":
        return _check_integers(values, f"{name}: column {col}")
    return values.astype(np.float64)


def _read_parquet_table(path, columns: dict[str, str | None], required: set[str]):
    """The file's table with the wanted columns; ``columns`` maps role -> column name."""
    import pyarrow.parquet as pq

    name = _name(path)
    if not os.path.isfile(path):
        raise InputError(f"{name}: no such file")
    try:
        schema = pq.read_schema(path)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises ArrowInvalid/OSError for broken files
        raise InputError(f"{name}: not a readable Parquet file ({exc})") from None
    present = {}
    for role, col in columns.items():
        if col in schema.names:
            present[role] = col
        elif role in required:
            raise InputError(f"{name}: column {col} ({role}) missing; columns are {', '.join(schema.names)}")
    try:
        table = pq.read_table(path, columns=sorted(set(present.values())))
    except Exception as exc:  # noqa: BLE001
        raise InputError(f"{name}: cannot be read ({exc})") from None
    if table.num_rows == 0:
        raise InputError(f"{name}: no rows")
    return table, present


def read_parquet(query_path, gallery_path=None, *, emb_column=None, label_column=None, cam_column=None,
                 key_column=None, group_column=None, lat_column=None, lon_column=None,
                 side_column=None, junk_label: int | None = None) -> tuple[dict[str, np.ndarray], dict]:
    """Parquet with an embedding list column: one file with a side column, or query + gallery files."""
    given = {"emb": emb_column, "label": label_column, "cam": cam_column, "key": key_column,
             "group": group_column, "lat": lat_column, "lon": lon_column, "side": side_column}
    columns = {role: given[role] or PARQUET_DEFAULTS[role] for role in given}
    required = {role for role, col in given.items() if col is not None} | {"emb"}
    if gallery_path is None:
        required.add("side")
    else:
        columns.pop("side")
        if side_column is not None:
            raise InputError("--side-column: only used with a single Parquet file (got two files)")
    files = [query_path] if gallery_path is None else [query_path, gallery_path]
    parts = []  # (file name, side, table, present columns, file rows of the side)
    for index, path in enumerate(files):
        table, present = _read_parquet_table(path, columns, required)
        name = _name(path)
        if gallery_path is not None:
            sides = {("query", "gallery")[index]: np.arange(table.num_rows)}
        else:
            side_values = _column_values(table.column(present["side"]), name, present["side"], "str")
            side_values = np.asarray([s.strip().lower() for s in side_values], dtype=object)
            bad = np.nonzero((side_values != "query") & (side_values != "gallery"))[0]
            if bad.size:
                raise InputError(f"{name}: row {int(bad[0])}, column {present['side']}: "
                                 f"{side_values[bad[0]]!r} is neither 'query' nor 'gallery'")
            sides = {s: np.nonzero(side_values == s)[0] for s in ("query", "gallery")}
            for s, rows in sides.items():
                if rows.size == 0:
                    raise InputError(f"{name}: column {present['side']}: no {s} rows")
        values = {"emb": _list_to_matrix(table.column(present["emb"]), name, present["emb"])}
        for role, kind in (("label", "int"), ("cam", "int"), ("key", "str"), ("group", "str"),
                           ("lat", "float"), ("lon", "float")):
            if role in present:
                values[role] = _column_values(table.column(present[role]), name, present[role], kind)
        if ("lat" in values) != ("lon" in values):
            have, lack = ("lat", "lon") if "lat" in values else ("lon", "lat")
            raise InputError(f"{name}: column {present[have]} ({have}) given but column "
                             f"{columns[lack]} ({lack}) missing")
        if "lat" in values:
            _check_coordinates(values["lat"], values["lon"], f"{name}: column {present['lat']}",
                               f"{name}: column {present['lon']}")
        for side, rows in sides.items():
            parts.append((name, side, present, rows, {r: v[rows] for r, v in values.items()}))
    arrays: dict[str, np.ndarray] = {}
    roles = {}
    for name, side, present, rows, values in parts:
        roles[side] = (name, set(values))
        if "key" in values:
            _check_unique(values["key"].tolist(), f"{name}: column {present['key']}", "row", rows)
        for role, data in values.items():
            arrays[f"{side}/{role}"] = data
    (qname, qroles), (gname, groles) = roles["query"], roles["gallery"]
    for role in sorted(qroles ^ groles):
        has, lacks = (qname, gname) if role in qroles else (gname, qname)
        raise InputError(f"{lacks}: column {columns[role]} ({role}) missing for the "
                         f"{'gallery' if role in qroles else 'query'} side, but {has} has it for the "
                         f"{'query' if role in qroles else 'gallery'} side")
    dq, dg = arrays["query/emb"].shape[1], arrays["gallery/emb"].shape[1]
    if dq != dg:
        raise InputError(f"{gname}: column {columns['emb']}: gallery rows have {dg} values, "
                         f"but query rows{' in ' + qname if qname != gname else ''} have {dq}")
    if "gallery/label" in arrays:
        arrays.update(_junk(arrays["gallery/label"], junk_label))
    elif junk_label is not None:
        raise InputError(f"--junk-label: needs a label column ({columns['label']} missing)")
    protocol = _protocol(arrays)
    return arrays, ({"protocol": protocol} if protocol else {})


# --------------------------------------------------------------------------- faiss-json


def _load_json(path):
    name = _name(path)
    if not os.path.isfile(path):
        raise InputError(f"{name}: no such file")
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except json.JSONDecodeError as exc:
        raise InputError(f"{name}: line {exc.lineno}, column {exc.colno}: invalid JSON ({exc.msg})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{name}: cannot be read ({exc})") from None


def _json_id(value, where: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InputError(f"{where}, field id: {value!r} is not a string")
    value = str(value)
    if not value:
        raise InputError(f"{where}, field id: empty id")
    return value


def _json_number(value, where: str, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{where}, field {field}: {value!r} is not a number")
    return float(value)


def _read_index(path, wrapper: str):
    """ids, lat, lon of a query or reference index file."""
    name = _name(path)
    data = _load_json(path)
    if isinstance(data, dict):
        if wrapper not in data:
            raise InputError(f"{name}: expected a list of entries or an object with key {wrapper!r}")
        data = data[wrapper]
    if not isinstance(data, list):
        raise InputError(f"{name}: expected a list of {{\"id\", \"lat\", \"lon\"}} entries")
    if not data:
        raise InputError(f"{name}: no entries")
    ids, lat, lon = [], [], []
    seen: dict[str, int] = {}
    for i, entry in enumerate(data):
        where = f"{name}: entry {i}"
        if not isinstance(entry, dict):
            raise InputError(f"{where}: {entry!r} is not an object with id, lat, lon")
        for field in ("id", "lat", "lon"):
            if field not in entry:
                raise InputError(f"{where}, field {field}: missing")
        ident = _json_id(entry["id"], where)
        if ident in seen:
            raise InputError(f"{where}, field id: duplicate id {ident!r} (also entry {seen[ident]})")
        seen[ident] = i
        for field, out, limit in (("lat", lat, 90.0), ("lon", lon, 180.0)):
            value = _json_number(entry[field], where, field)
            if not math.isfinite(value):
                raise InputError(f"{where}, field {field}: {value!r} is not a finite number")
            if abs(value) > limit:
                raise InputError(f"{where}, field {field}: {value!r} lies outside [-{limit:g}, {limit:g}] degrees")
            out.append(value)
        ids.append(ident)
    return ids, np.asarray(lat, dtype=np.float64), np.asarray(lon, dtype=np.float64), seen


def _read_results(path, query_id: str, ref_pos: dict[str, int], n_ref: int, ref_name: str):
    """Gallery positions and scores (higher is better) of one results file, best first."""
    name = _name(path)
    data = _load_json(path)
    if not isinstance(data, dict):
        raise InputError(f"{name}: expected an object with \"results\" (or \"neighbors\" and \"scores\")")
    if "query" in data and str(data["query"]) != query_id:
        raise InputError(f"{name}: field query: {data['query']!r} differs from the file's query id {query_id!r}")
    items, scores = [], []
    if "results" in data:
        results = data["results"]
        if not isinstance(results, list):
            raise InputError(f"{name}: field results: expected a list of {{\"id\", \"score\"}}")
        for j, entry in enumerate(results):
            where = f"{name}: results entry {j}"
            if not isinstance(entry, dict):
                raise InputError(f"{where}: {entry!r} is not an object with id and score")
            for field in ("id", "score"):
                if field not in entry:
                    raise InputError(f"{where}, field {field}: missing")
            ref = _json_id(entry["id"], where)
            if ref not in ref_pos:
                raise InputError(f"{where}, field id: unknown reference {ref!r} (not in {ref_name})")
            items.append(ref_pos[ref])
            scores.append((_json_number(entry["score"], where, "score"), where, "score"))
    elif "neighbors" in data:
        neighbors = data["neighbors"]
        which = [k for k in ("scores", "distances") if k in data]
        if len(which) != 1:
            raise InputError(f"{name}: field scores/distances: give exactly one of \"scores\" or "
                             f"\"distances\" with \"neighbors\"")
        field = which[0]
        values = data[field]
        if not isinstance(neighbors, list) or not isinstance(values, list):
            raise InputError(f"{name}: fields neighbors and {field} must be lists")
        if len(neighbors) != len(values):
            raise InputError(f"{name}: field {field}: {len(values)} values, but neighbors has {len(neighbors)}")
        sign = -1.0 if field == "distances" else 1.0
        for j, (ref, value) in enumerate(zip(neighbors, values)):
            where = f"{name}: neighbors entry {j}"
            if isinstance(ref, bool) or not isinstance(ref, (int, str)):
                raise InputError(f"{where}, field neighbors: {ref!r} is neither a reference position nor an id")
            if isinstance(ref, int):
                if ref == -1:  # FAISS pads missing neighbours with -1
                    continue
                if not 0 <= ref < n_ref:
                    raise InputError(f"{where}, field neighbors: position {ref} outside [0, {n_ref}) "
                                     f"of {ref_name}")
                items.append(ref)
            else:
                if ref not in ref_pos:
                    raise InputError(f"{where}, field neighbors: unknown reference {ref!r} (not in {ref_name})")
                items.append(ref_pos[ref])
            scores.append((sign * _json_number(value, f"{name}: {field} entry {j}", field),
                           f"{name}: {field} entry {j}", field))
    else:
        raise InputError(f"{name}: field results missing (or give \"neighbors\" with \"scores\"/\"distances\")")
    for value, where, field in scores:
        if not math.isfinite(value):
            raise InputError(f"{where}, field {field}: {value!r} is not a finite number")
    seen: dict[int, int] = {}
    for j, item in enumerate(items):
        if item in seen:
            raise InputError(f"{name}: entry {j}: reference at position {item} listed twice "
                             f"(also entry {seen[item]})")
        seen[item] = j
    return items, [s[0] for s in scores]


def read_faiss_json(folder=None, *, query_index=None, reference_index=None, results_dir=None,
                    ) -> tuple[dict[str, np.ndarray], dict]:
    """FAISS place-recognition results: query/reference index JSON plus one results JSON per query."""
    if folder is None and not (query_index and reference_index and results_dir):
        raise InputError("faiss-json: give a folder, or all of --query-index, --reference-index, --results-dir")
    if folder is not None and not os.path.isdir(folder):
        raise InputError(f"{folder}: no such folder")
    query_index = query_index or os.path.join(folder, "query_index.json")
    reference_index = reference_index or os.path.join(folder, "reference_index.json")
    results_dir = results_dir or os.path.join(folder, "results")
    if not os.path.isdir(results_dir):
        raise InputError(f"{results_dir}: no such folder (expected results/<query id>.json files)")
    qids, qlat, qlon, qpos = _read_index(query_index, "queries")
    gids, glat, glon, gpos = _read_index(reference_index, "references")
    ref_name = os.path.basename(str(reference_index))
    for entry in sorted(os.listdir(results_dir)):
        if entry.endswith(".json") and entry[:-5] not in qpos:
            raise InputError(f"{os.path.join(results_dir, entry)}: no query {entry[:-5]!r} in {query_index}")
    rankings = []
    for i, qid in enumerate(qids):
        path = os.path.join(results_dir, qid + ".json")
        if os.sep in qid or (os.altsep and os.altsep in qid) or not os.path.isfile(path):
            raise InputError(f"{path}: no results file for query {qid!r} ({query_index} entry {i})")
        rankings.append(_read_results(path, qid, gpos, len(gids), ref_name))
    k = max(1, max(len(items) for items, _ in rankings))
    item = np.full((len(qids), k), -1, dtype=np.int64)
    score = np.full((len(qids), k), np.nan, dtype=np.float32)
    for i, (items, scores) in enumerate(rankings):
        item[i, :len(items)] = items
        score[i, :len(scores)] = scores
    arrays = {
        "query/key": np.asarray(qids, dtype=object), "query/lat": qlat, "query/lon": qlon,
        "gallery/key": np.asarray(gids, dtype=object), "gallery/lat": glat, "gallery/lon": glon,
        "ranking/item": item, "ranking/score": score,
    }
    return arrays, {"protocol": "geo"}


# --------------------------------------------------------------------------- trec


def _read_ids(path) -> list[str]:
    """One id per line; the line order is the row order (blank lines only at the end)."""
    name = _name(path)
    if not os.path.isfile(path):
        raise InputError(f"{name}: no such file")
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{name}: cannot be read ({exc})") from None
    while lines and not lines[-1].strip():
        lines.pop()
    ids = []
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        ident = line.strip()
        if not ident:
            raise InputError(f"{name}: line {number}, field id: empty line (one id per line; "
                             "the line order is the row order)")
        if len(ident.split()) > 1:
            raise InputError(f"{name}: line {number}, field id: {ident!r} contains whitespace")
        if ident in seen:
            raise InputError(f"{name}: line {number}, field id: duplicate id {ident!r} (also line {seen[ident]})")
        seen[ident] = number
        ids.append(ident)
    if not ids:
        raise InputError(f"{name}: no ids")
    return ids


#: attrs key under which a reader hands back warnings; import_to takes it out before writing
WARNINGS = "_import_warnings"


def trec_relevance(grade: int) -> int:
    """A TREC judgement as qrels/rel: grade >= 1 -> 1 relevant; anything else -> 0 judged, not relevant.

    trec_eval's default relevance level is 1, and it reads a negative grade as
    "judged, not relevant" (unjudged-in-pool), not as something to remove from
    the ranking; so no TREC grade becomes junk (-1).
    """
    return 1 if grade >= 1 else 0


def _skipped_queries(name: str, skipped: dict[str, int], why: str) -> str:
    shown = ", ".join(f"{q!r} (line {n})" for q, n in list(skipped.items())[:5])
    more = f", ... ({len(skipped)} queries)" if len(skipped) > 5 else ""
    return f"{name}: judged queries {why} are left out: {shown}{more}"


def trec_records(handle, name: str, layout: str):
    """(line number, fields) of a whitespace-separated TREC file; blank and ``#`` lines are skipped,
    a line with another number of fields than ``layout`` names is an input error."""
    expected = len(layout.split())
    for number, line in enumerate(handle, start=1):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        if len(fields) != expected:
            raise InputError(f"{name}: line {number}: {len(fields)} fields, expected {expected} ({layout})")
        yield number, fields


def read_trec(qrels_path, *, queries=None, gallery=None, dataset=None,
              storage_options: Mapping | None = None) -> tuple[dict[str, np.ndarray], dict]:
    """TREC qrels against query/gallery id lists, or against an existing dataset's keys."""
    from evalcore.io import dataset as ds

    arrays: dict[str, np.ndarray] = {}
    attrs: dict = {}
    if dataset is not None:
        if queries is not None or gallery is not None:
            raise InputError("--dataset: give either --dataset or --queries/--gallery, not both")
        group = ds.open_dataset(dataset, storage_options)
        for name in ("query/key", "gallery/key"):
            if not ds.has(group, name):
                raise InputError(f"dataset {dataset}: {name} missing (needed to match TREC ids; "
                                 "give --queries and --gallery instead)")
        for side in ("query", "gallery", "ranking"):
            if side in group:
                for leaf, _ in sorted(group[side].arrays()):
                    arrays[f"{side}/{leaf}"] = ds.read(group, f"{side}/{leaf}")
        attrs = {k: v for k, v in ds.dataset_attributes(group).items() if k != "version"}
        qids = [str(k) for k in arrays["query/key"]]
        gids = [str(k) for k in arrays["gallery/key"]]
        _check_unique(qids, f"dataset {dataset}: query/key")
        _check_unique(gids, f"dataset {dataset}: gallery/key")
        qsource, gsource = f"dataset {dataset} query/key", f"dataset {dataset} gallery/key"
    else:
        if queries is None or gallery is None:
            raise InputError("trec: give --queries FILE and --gallery FILE (one id per line), "
                             "or --dataset DATASET")
        qids, gids = _read_ids(queries), _read_ids(gallery)
        arrays["query/key"] = np.asarray(qids, dtype=object)
        arrays["gallery/key"] = np.asarray(gids, dtype=object)
        qsource, gsource = _name(queries), _name(gallery)
    qpos = {q: i for i, q in enumerate(qids)}
    gpos = {g: i for i, g in enumerate(gids)}

    name = _name(qrels_path)
    if not os.path.isfile(qrels_path):
        raise InputError(f"{name}: no such file")
    judged: dict[tuple[int, int], tuple[int, int]] = {}  # (query, item) -> (rel, line)
    skipped: dict[str, int] = {}  # judged query ids absent from the ids -> first line
    try:
        with open(qrels_path, encoding="utf-8") as handle:
            for number, fields in trec_records(handle, name, "qid iter docid rel"):
                qid, _, docid, rel_text = fields
                if qid not in qpos:  # trec_eval too evaluates only queries that have results
                    skipped.setdefault(qid, number)
                    continue
                if docid not in gpos:
                    raise InputError(f"{name}: line {number}, field docid: unknown document {docid!r} "
                                     f"(not in {gsource})")
                try:
                    rel = int(rel_text)
                except ValueError:
                    raise InputError(f"{name}: line {number}, field rel: {rel_text!r} is not an integer") from None
                rel = trec_relevance(rel)
                pair = (qpos[qid], gpos[docid])
                if pair in judged and judged[pair][0] != rel:
                    raise InputError(f"{name}: line {number}, field rel: ({qid}, {docid}) judged {rel_text} "
                                     f"here but differently on line {judged[pair][1]}")
                judged.setdefault(pair, (rel, number))
    except UnicodeDecodeError as exc:
        raise InputError(f"{name}: not UTF-8 text ({exc})") from None
    if not judged:
        raise InputError(f"{name}: no judgements" + (f" for the queries of {qsource}" if skipped else ""))
    pairs = np.asarray(list(judged), dtype=np.int64).reshape(-1, 2)
    arrays["qrels/query"] = pairs[:, 0]
    arrays["qrels/item"] = pairs[:, 1]
    arrays["qrels/rel"] = np.asarray([r for r, _ in judged.values()], dtype=np.int8)
    warnings = [_skipped_queries(name, skipped, f"not in {qsource}")] if skipped else []
    return arrays, {**attrs, "protocol": "qrels", WARNINGS: warnings}


# --------------------------------------------------------------------------- trec-run


def _open_text(path):
    name = _name(path)
    if not os.path.isfile(path):
        raise InputError(f"{name}: no such file")
    return open(path, encoding="utf-8")


def _read_trec_qrels(path) -> dict[str, dict[str, tuple[int, int]]]:
    """qid -> docno -> (qrels/rel, line) from a TREC qrels file (``qid iter docno grade``)."""
    name = _name(path)
    judged: dict[str, dict[str, tuple[int, int]]] = {}
    try:
        with _open_text(path) as handle:
            for number, line in enumerate(handle, start=1):
                fields = line.split()
                if not fields or fields[0].startswith("#"):
                    continue
                if len(fields) != 4:
                    raise InputError(f"{name}: line {number}: {len(fields)} fields, expected 4 (qid iter docno rel)")
                qid, _, docno, grade = fields
                try:
                    rel = trec_relevance(int(grade))
                except ValueError:
                    raise InputError(f"{name}: line {number}, field rel: {grade!r} is not an integer") from None
                seen = judged.setdefault(qid, {})
                if docno in seen and seen[docno][0] != rel:
                    raise InputError(f"{name}: line {number}, field rel: ({qid}, {docno}) judged {grade} here "
                                     f"but differently on line {seen[docno][1]}")
                seen.setdefault(docno, (rel, number))
    except UnicodeDecodeError as exc:
        raise InputError(f"{name}: not UTF-8 text ({exc})") from None
    if not judged:
        raise InputError(f"{name}: no judgements")
    return judged


def _read_trec_lines(path) -> dict[str, list[tuple[str, float, int]]]:
    """qid -> [(docno, score, line), ...] in file order, from ``qid Q0 docno rank score tag`` lines.

    The rank field is ignored, as trec_eval ignores it. A docno listed twice
    for one query is an error naming both lines: trec_eval refuses such a run
    too, and counting it twice would count a hit twice.
    """
    name = _name(path)
    runs: dict[str, list[tuple[str, float, int]]] = {}
    first_line: dict[tuple[str, str], int] = {}
    try:
        with _open_text(path) as handle:
            for number, fields in trec_records(handle, name, "qid Q0 docno rank score tag"):
                qid, _, docno, _, score_text, _ = fields
                try:
                    score = float(score_text)
                except ValueError:
                    raise InputError(f"{name}: line {number}, field score: {score_text!r} is not a number") from None
                if not math.isfinite(score):
                    raise InputError(f"{name}: line {number}, field score: {score_text!r} is not a finite number")
                earlier = first_line.setdefault((qid, docno), number)
                if earlier != number:
                    raise InputError(f"{name}: line {number}, field docno: {docno!r} listed twice for query "
                                     f"{qid!r} (also line {earlier}); each document may appear once per query")
                runs.setdefault(qid, []).append((docno, score, number))
    except UnicodeDecodeError as exc:
        raise InputError(f"{name}: not UTF-8 text ({exc})") from None
    if not runs:
        raise InputError(f"{name}: no results")
    return runs


def trec_order(results: list[tuple[str, float, int]], order: str) -> list[tuple[str, float, int]]:
    """One query's results best first.

    ``score``: score descending (exact ties keep the file order; equal float32
    scores are tie groups that ``--ties`` orders at evaluation). ``trec_eval``:
    score descending, equal scores by docno descending (byte order), which is
    trec_eval's own sort, so its numbers come out exactly.
    """
    if order == "trec_eval":
        by_docno = sorted(results, key=lambda r: r[0].encode(), reverse=True)
        return sorted(by_docno, key=lambda r: -r[1])
    return sorted(results, key=lambda r: -r[1])


def read_trec_run(run_path, *, qrels=None, order: str = "score") -> tuple[dict[str, np.ndarray], dict]:
    """A TREC run file plus its qrels as precomputed rankings with TREC judgements (protocol qrels)."""
    if qrels is None:
        raise InputError("trec-run: --qrels FILE is required (qid iter docno rel)")
    if order not in ("score", "trec_eval"):
        raise InputError(f"--order: {order!r} is not score or trec_eval")
    judged = _read_trec_qrels(qrels)
    runs = _read_trec_lines(run_path)
    # trec_eval evaluates the queries that have both results and judgements
    qids = sorted(q for q in runs if q in judged)
    if not qids:
        raise InputError(f"{_name(run_path)}: no query of the run is judged in {_name(qrels)}")
    warnings = []
    unjudged = {q: runs[q][0][2] for q in runs if q not in judged}
    if unjudged:
        warnings.append(_skipped_queries(_name(run_path), unjudged, f"without judgements in {_name(qrels)}")
                        .replace("judged queries", "queries"))
    no_results = {q: min(n for _, n in judged[q].values()) for q in judged if q not in runs}
    if no_results:
        warnings.append(_skipped_queries(_name(qrels), no_results, f"without results in {_name(run_path)}"))
    ranked = {q: trec_order(runs[q], order) for q in qids}
    gids = sorted({d for q in qids for d, _, _ in ranked[q]} | {d for q in qids for d in judged[q]})
    gpos = {g: i for i, g in enumerate(gids)}
    k = max(len(ranked[q]) for q in qids)
    item = np.full((len(qids), k), -1, dtype=np.int64)
    score = np.full((len(qids), k), np.nan, dtype=np.float32)
    for i, q in enumerate(qids):
        item[i, :len(ranked[q])] = [gpos[d] for d, _, _ in ranked[q]]
        score[i, :len(ranked[q])] = [s for _, s, _ in ranked[q]]
    pairs = [(i, gpos[d], rel) for i, q in enumerate(qids) for d, (rel, _) in sorted(judged[q].items())]
    arrays = {
        "query/key": np.asarray(qids, dtype=object), "gallery/key": np.asarray(gids, dtype=object),
        "ranking/item": item,
        "qrels/query": np.asarray([p[0] for p in pairs], dtype=np.int64),
        "qrels/item": np.asarray([p[1] for p in pairs], dtype=np.int64),
        "qrels/rel": np.asarray([p[2] for p in pairs], dtype=np.int8),
    }
    if order == "score":
        arrays["ranking/score"] = score
    return arrays, {"protocol": "qrels", "trec_order": order, WARNINGS: warnings}


# --------------------------------------------------------------------------- dispatch


#: format -> (reader, fewest and most positional inputs, what the inputs are)
FORMATS = {
    "mat": (read_mat, 1, 1, "pytorch_result.mat"),
    "npy": (read_npy, 0, 1, "an .npz file or a folder of .npy files (or none with --query-features ...)"),
    "parquet": (read_parquet, 1, 2, "one Parquet file with a side column, or a query and a gallery file"),
    "faiss-json": (read_faiss_json, 0, 1, "a folder with query_index.json, reference_index.json, results/"),
    "trec": (read_trec, 1, 1, "a TREC qrels file"),
    "trec-run": (read_trec_run, 1, 1, "a TREC run file (qid Q0 docno rank score tag)"),
}


def read_format(format: str, inputs, **options) -> tuple[dict[str, np.ndarray], dict]:
    """Run the reader of ``format`` on ``inputs`` (a path or list of paths) with its options."""
    if format not in FORMATS:
        raise InputError(f"format {format!r}: unknown (choose {', '.join(FORMATS)})")
    reader, fewest, most, what = FORMATS[format]
    if inputs is None:
        inputs = []
    elif isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    inputs = [os.fspath(p) for p in inputs]
    if not fewest <= len(inputs) <= most:
        count = str(fewest) if fewest == most else f"{fewest} to {most}"
        raise InputError(f"format {format}: {len(inputs)} input path(s) given, expected {count} ({what})")
    accepted = [p.name for p in inspect.signature(reader).parameters.values()
                if p.kind == inspect.Parameter.KEYWORD_ONLY]
    options = {k: v for k, v in options.items() if v is not None}
    for option in options:
        if option not in accepted:
            raise InputError(f"--{option.replace('_', '-')}: not an option of format {format} "
                             f"(it takes {', '.join('--' + a.replace('_', '-') for a in accepted) or 'none'})")
    return reader(*inputs, **options)


def _same_path(a, b) -> bool:
    if is_url(a) or is_url(b):
        return str(a).rstrip("/") == str(b).rstrip("/")
    return os.path.abspath(a) == os.path.abspath(b)


#: import options that name input files or folders (--out must stay clear of them)
PATH_OPTIONS = ("query_features", "gallery_features", "query_ids", "gallery_ids", "query_cams", "gallery_cams",
                "query_index", "reference_index", "results_dir", "queries", "gallery", "dataset")


def _is_evalcore_group_meta(meta) -> bool:
    return (isinstance(meta, dict) and meta.get("node_type") == "group"
            and isinstance(meta.get("attributes"), dict) and "evalcore" in meta["attributes"])


def check_import_out(out, overwrite: bool, inputs: Mapping | None = None,
                     storage_options: Mapping | None = None) -> None:
    """``--out`` of an import: new, an empty folder, or (with ``overwrite``) a dataset evalcore wrote.

    Ours: a Zarr group whose attributes hold ``evalcore`` (``write_dataset`` sets
    it) and whose folder holds nothing but ``zarr.json`` and Zarr nodes. Never
    one of the ``inputs`` ({what: path}), inside one, or holding one.
    """
    from evalcore.io import report

    report.check_apart("--out", out, inputs or {}, plain_folders_may_hold_out=True)
    if is_url(out):
        fs, root = report._fs(out, storage_options)
        root = root.rstrip("/")
        fs.invalidate_cache(root)
        if not report._listing(fs, root):
            return
        if not overwrite:
            raise InputError(f"output {out}: already exists (pass --overwrite to replace it)")
        try:
            meta = json.loads(fs.cat_file(f"{root}/zarr.json"))
        except (FileNotFoundError, ValueError):
            meta = None
        if not _is_evalcore_group_meta(meta):
            raise InputError(f"--out {out}: is not a dataset evalcore wrote (no Zarr group with the evalcore "
                             "attribute); --overwrite only replaces those, choose another --out")
        return
    with report.lock_if_folder(report._local(out).parent):  # a concurrent import's swap must wait
        check_local_import_out(out, overwrite)


def check_local_import_out(out, overwrite: bool) -> None:
    """``check_import_out`` of a local folder; the caller holds ``folder_lock`` on its parent (if that exists)."""
    from evalcore.io import report

    p = report._local(out)
    if os.path.lexists(p) and not p.is_dir():
        raise InputError(f"--out {out}: exists and is not a folder")
    report.check_creatable("--out", out)
    entries = sorted(e.name for e in p.iterdir()) if p.is_dir() else []
    if not entries:
        return
    if not overwrite:
        raise InputError(f"output {out}: already exists (pass --overwrite to replace it)")
    try:
        meta = json.loads((p / "zarr.json").read_text())
    except (OSError, ValueError):
        meta = None
    foreign = [n for n in entries if n != "zarr.json" and not (p / n / "zarr.json").is_file()]
    if not _is_evalcore_group_meta(meta) or foreign:
        what = f"holds {foreign[0]!r}" if foreign else "is not a Zarr group with the evalcore attribute"
        raise InputError(f"--out {out}: {what}, so it is not a dataset evalcore wrote; --overwrite only "
                         "replaces those (or an empty folder), choose another --out")


def import_inputs(inputs, options: Mapping) -> dict:
    """{what: path} of every input file or folder of an import, for ``check_import_out``."""
    found = {"input" + (f" {i + 1}" if i else ""): path for i, path in enumerate(inputs)}
    found.update({f"--{k.replace('_', '-')}": v for k, v in options.items()
                  if k in PATH_OPTIONS and isinstance(v, (str, os.PathLike))})
    return found


def import_to(format: str, inputs, out, overwrite: bool = False, *, chunk_rows: int | None = None,
              storage_options: Mapping | None = None, **options) -> dict:
    """Read ``inputs`` in ``format``, validate everything, then write the dataset at ``out``.

    Locally the dataset is written into a hidden sibling folder and renamed into
    place (``report.swap_into_place``), so a failed or killed import leaves an
    earlier dataset as it was. Returns a summary: format, out, protocol and
    counts (queries, gallery, dims, qrels, ranking_k) for what was written.
    """
    from evalcore.io import report
    from evalcore.io.dataset import write_dataset

    check_import_out(out, overwrite, import_inputs(inputs, options), storage_options)
    if format == "trec":
        options["storage_options"] = storage_options
        if options.get("dataset") is not None and _same_path(options["dataset"], out):
            raise InputError(f"--out {out}: is the --dataset being read; write the merged dataset elsewhere")
    arrays, attrs = read_format(format, inputs, **options)
    warnings = attrs.pop(WARNINGS, [])
    # the evalcore attribute marks the group as ours for a later --overwrite, even without a protocol
    attrs = dict(attrs) or {"version": 1}
    if is_url(out):
        write_dataset(out, arrays, attrs, chunk_rows=chunk_rows, storage_options=storage_options,
                      overwrite=overwrite)
    else:
        target = report._local(out)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = report.leftover_path(target, "tmp")
        try:
            write_dataset(tmp, arrays, attrs, chunk_rows=chunk_rows)
            report.swap_into_place(tmp, target, lambda: check_local_import_out(out, overwrite))
        except BaseException:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
            raise
    summary = {"format": format, "out": str(out), "protocol": attrs.get("protocol"), "warnings": warnings}
    for side, label in (("query", "queries"), ("gallery", "gallery")):
        for leaf in ("emb", "key", "label", "lat"):
            if f"{side}/{leaf}" in arrays:
                summary[label] = int(arrays[f"{side}/{leaf}"].shape[0])
                break
    if "query/emb" in arrays:
        summary["dims"] = int(arrays["query/emb"].shape[1])
    if "gallery/junk" in arrays:
        summary["junk"] = int(np.count_nonzero(arrays["gallery/junk"]))
    if "qrels/rel" in arrays:
        summary["qrels"] = int(arrays["qrels/rel"].shape[0])
    if "ranking/item" in arrays:
        summary["ranking_k"] = int(arrays["ranking/item"].shape[1])
    return summary
