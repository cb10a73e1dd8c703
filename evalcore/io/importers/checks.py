"""What every reader checks: features, integer labels, unique ids, coordinates; the protocol the arrays imply."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from evalcore.core import protocols
from evalcore.core.coordinates import bad_coordinates
from evalcore.errors import input_error, rows_text

#: attrs key under which a reader hands back warnings; import_to takes it out before writing
WARNINGS = "_import_warnings"


def plural(rows) -> str:
    return "row" if len(rows) == 1 else "rows"


def check_features(values, where: str) -> np.ndarray:
    """A (N, D) float32 array; ``where`` is ``"FILE: key NAME"``-like."""
    data = np.asarray(values)
    if data.dtype.kind not in "fiu" or data.dtype.kind == "b":
        raise input_error(where, f"dtype {data.dtype} is not numeric")
    if data.ndim != 2:
        raise input_error(where, f"shape {data.shape} is not (rows, dims)")
    if data.shape[0] == 0 or data.shape[1] == 0:
        raise input_error(where, f"shape {data.shape} is empty")
    with np.errstate(over="ignore", invalid="ignore"):
        data = data.astype(np.float32, copy=False)
    bad = np.nonzero(~np.isfinite(data).all(axis=1))[0]
    if bad.size:
        raise input_error(where, f"{plural(bad)} {rows_text(bad)} contain NaN or Inf "
                         "(or values too large for float32)")
    return data


def check_integers(values, where: str, n: int | None = None, n_from: str = "") -> np.ndarray:
    """A 1-D int64 array (a (1, N) or (N, 1) matrix is flattened); floats must be whole."""
    data = np.asarray(values)
    if data.ndim == 2 and 1 in data.shape:
        data = data.reshape(-1)
    if data.ndim != 1:
        raise input_error(where, f"shape {data.shape} is not one-dimensional")
    if data.dtype.kind == "f":
        bad = np.nonzero(~np.isfinite(data) | (data != np.round(data)))[0]
        if bad.size:
            raise input_error(where, f"{plural(bad)} {rows_text(bad)} are not whole numbers "
                             f"(first: {data[bad[0]]!r})")
    elif data.dtype.kind not in "iu":
        raise input_error(where, f"dtype {data.dtype} is not integer")
    if n is not None and data.shape[0] != n:
        raise input_error(where, f"{data.shape[0]} entries, but {n_from} has {n} rows")
    return data.astype(np.int64)


def check_unique(keys: Sequence[str], where: str, record: str = "row", rows=None) -> None:
    seen: dict[str, int] = {}
    for i, key in enumerate(keys):
        j = seen.setdefault(key, i)
        if j != i:
            a, b = (rows[j], rows[i]) if rows is not None else (j, i)
            raise input_error(where, f"duplicate id {key!r} ({record}s {a} and {b})")


def check_coordinates(values, where: str, limit: float, rows=None, record: str = "row") -> None:
    """Finite values within [-limit, limit] degrees; ``rows`` maps positions to the record numbers shown."""
    values = np.asarray(values, dtype=np.float64)
    nonfinite, outside = bad_coordinates(values, limit)
    for bad, what in ((nonfinite, "NaN or infinite"), (outside, f"outside [-{limit:g}, {limit:g}] degrees")):
        if bad.size:
            shown = bad if rows is None else np.asarray(rows)[bad]
            one = bad.size == 1
            verb = ("is " if one else "are ") if what[0] == "N" else ("lies " if one else "lie ")
            raise input_error(where, f"{record}{'' if one else 's'} {rows_text(shown)} {verb}{what} "
                             f"(first: {float(values[bad[0]])!r})")


def protocol_of(arrays: Mapping[str, np.ndarray]) -> str | None:
    """The protocol the arrays carry the truth of (``reid`` before ``class``), or None."""
    return protocols.implied(arrays)


def junk_of(labels: np.ndarray, junk_label: int | None) -> dict[str, np.ndarray]:
    return {} if junk_label is None else {"gallery/junk": labels == int(junk_label)}

