"""``parquet``: an embedding list column, one file with a side column or a query and a gallery file."""
from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from evalcore.core.coordinates import DEGREES
from evalcore.errors import OptionError, input_error, rows_text
from evalcore.io.importers.checks import (
    check_coordinates,
    check_integers,
    check_unique,
    junk_of,
    plural,
    protocol_of,
)

PARQUET_DEFAULTS = {"emb": "emb", "label": "label", "cam": "cam", "key": "key", "group": "group",
                    "lat": "lat", "lon": "lon", "side": "side"}


def _list_to_matrix(column, name: str, col: str) -> np.ndarray:
    """A list<number> column as an (N, D) float32 array via flatten + reshape."""
    typ = column.type
    if not (pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_fixed_size_list(typ)):
        raise input_error(name, f"column {col}: type {typ} is not a list of numbers")
    value_type = typ.value_type
    if not (pa.types.is_floating(value_type) or pa.types.is_integer(value_type)):
        raise input_error(name, f"column {col}: list values of type {value_type} are not numeric")
    dims = None
    blocks = []
    start = 0
    for chunk in column.chunks:
        lengths = pc.list_value_length(chunk)
        if lengths.null_count:
            first = int(np.nonzero(lengths.is_null().to_numpy(zero_copy_only=False))[0][0])
            raise input_error(name, f"row {start + first}, column {col}: null embedding", rows=[start + first])
        lengths = lengths.to_numpy()
        if lengths.size:
            if dims is None:
                dims = int(lengths[0])
                if dims == 0:
                    raise input_error(name, f"row {start}, column {col}: empty embedding", rows=[start])
            bad = np.nonzero(lengths != dims)[0]
            if bad.size:
                row = start + int(bad[0])
                raise input_error(name, f"row {row}, column {col}: {int(lengths[bad[0]])} values, "
                                 f"but earlier rows have {dims}", rows=[row])
            values = chunk.flatten().to_numpy(zero_copy_only=False)
            with np.errstate(over="ignore", invalid="ignore"):
                blocks.append(values.astype(np.float32, copy=False).reshape(len(chunk), dims))
        start += len(chunk)
    if dims is None:
        raise input_error(name, f"column {col}: no rows")
    data = np.concatenate(blocks) if len(blocks) > 1 else blocks[0]
    bad = np.nonzero(~np.isfinite(data).all(axis=1))[0]
    if bad.size:
        raise input_error(name, f"{plural(bad)} {rows_text(bad)}, column {col}: NaN, Inf or null values "
                         "(or values too large for float32)")
    return data


def _column_values(column, name: str, col: str, kind: str) -> np.ndarray:
    """A scalar column as numpy: ``int`` (whole numbers), ``float`` or ``str``; nulls are errors."""
    if column.null_count:
        mask = column.is_null().to_numpy(zero_copy_only=False) if hasattr(column, "is_null") else None
        first = int(np.nonzero(mask)[0][0]) if mask is not None else "?"
        raise input_error(name, f"row {first}, column {col}: null value",
                          rows=[first] if isinstance(first, int) else [])
    typ = column.type
    if pa.types.is_dictionary(typ):
        column = column.cast(typ.value_type)
        typ = typ.value_type
    if kind == "str":
        if not (pa.types.is_string(typ) or pa.types.is_large_string(typ) or pa.types.is_integer(typ)):
            raise input_error(name, f"column {col}: type {typ} is not string or integer")
        return np.asarray([str(v) for v in column.to_pylist()], dtype=object)
    numeric = pa.types.is_integer(typ) or pa.types.is_floating(typ)
    if not numeric:
        raise input_error(name, f"column {col}: type {typ} is not numeric")
    values = column.to_numpy()
    if kind == "int":
        return check_integers(values, f"{name}: column {col}")
    return values.astype(np.float64)


def _read_parquet_table(path, columns: dict[str, str | None], required: set[str]):
    """The file's table with the wanted columns; ``columns`` maps role -> column name."""
    name = str(path)
    if not os.path.isfile(path):
        raise input_error(name, "no such file")
    try:
        schema = pq.read_schema(path)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises ArrowInvalid/OSError for broken files
        raise input_error(name, f"not a readable Parquet file ({exc})") from None
    present: dict[str, str] = {}
    for role, col in columns.items():
        if col is not None and col in schema.names:
            present[role] = col
        elif role in required:
            raise input_error(name, f"column {col} ({role}) missing; columns are {', '.join(schema.names)}")
    try:
        table = pq.read_table(path, columns=sorted(set(present.values())))
    except Exception as exc:  # noqa: BLE001
        raise input_error(name, f"cannot be read ({exc})") from None
    if table.num_rows == 0:
        raise input_error(name, "no rows")
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
            raise OptionError("--side-column", "only used with a single Parquet file (got two files)")
    files = [query_path] if gallery_path is None else [query_path, gallery_path]
    parts = []  # (file name, side, table, present columns, file rows of the side)
    for index, path in enumerate(files):
        table, present = _read_parquet_table(path, columns, required)
        name = str(path)
        if gallery_path is not None:
            sides = {("query", "gallery")[index]: np.arange(table.num_rows)}
        else:
            side_values = _column_values(table.column(present["side"]), name, present["side"], "str")
            side_values = np.asarray([s.strip().lower() for s in side_values], dtype=object)
            bad = np.nonzero((side_values != "query") & (side_values != "gallery"))[0]
            if bad.size:
                raise input_error(name, f"row {int(bad[0])}, column {present['side']}: "
                                 f"{side_values[bad[0]]!r} is neither 'query' nor 'gallery'", rows=[int(bad[0])])
            sides = {s: np.nonzero(side_values == s)[0] for s in ("query", "gallery")}
            for s, rows in sides.items():
                if rows.size == 0:
                    raise input_error(name, f"column {present['side']}: no {s} rows")
        values = {"emb": _list_to_matrix(table.column(present["emb"]), name, present["emb"])}
        for role, kind in (("label", "int"), ("cam", "int"), ("key", "str"), ("group", "str"),
                           ("lat", "float"), ("lon", "float")):
            if role in present:
                values[role] = _column_values(table.column(present[role]), name, present[role], kind)
        if ("lat" in values) != ("lon" in values):
            have, lack = ("lat", "lon") if "lat" in values else ("lon", "lat")
            raise input_error(name, f"column {present[have]} ({have}) given but column "
                             f"{columns[lack]} ({lack}) missing")
        if "lat" in values:
            for role, limit in DEGREES.items():
                check_coordinates(values[role], f"{name}: column {present[role]}", limit)
        for side, rows in sides.items():
            parts.append((name, side, present, rows, {r: v[rows] for r, v in values.items()}))
    arrays: dict[str, np.ndarray] = {}
    roles = {}
    for name, side, present, rows, values in parts:
        roles[side] = (name, set(values))
        if "key" in values:
            check_unique(values["key"].tolist(), f"{name}: column {present['key']}", "row", rows)
        for role, data in values.items():
            arrays[f"{side}/{role}"] = data
    (qname, qroles), (gname, groles) = roles["query"], roles["gallery"]
    for role in sorted(qroles ^ groles):
        has, lacks = (qname, gname) if role in qroles else (gname, qname)
        raise input_error(lacks, f"column {columns[role]} ({role}) missing for the "
                         f"{'gallery' if role in qroles else 'query'} side, but {has} has it for the "
                         f"{'query' if role in qroles else 'gallery'} side")
    dq, dg = arrays["query/emb"].shape[1], arrays["gallery/emb"].shape[1]
    if dq != dg:
        raise input_error(gname, f"column {columns['emb']}: gallery rows have {dg} values, "
                         f"but query rows{' in ' + qname if qname != gname else ''} have {dq}")
    if "gallery/label" in arrays:
        arrays.update(junk_of(arrays["gallery/label"], junk_label))
    elif junk_label is not None:
        raise OptionError("--junk-label", f"needs a label column ({columns['label']} missing)")
    protocol = protocol_of(arrays)
    return arrays, ({"protocol": protocol} if protocol else {})
