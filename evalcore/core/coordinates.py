"""Coordinates of the geo and xy protocols: their names, and the one check of their values.

Kept apart from the protocols (whose package brings the k-d tree and rank machinery)
so that readers of other tools' files can check coordinates cheaply.
"""
from __future__ import annotations

import numpy as np

from evalcore.errors import InputError, input_error, rows_text

#: the largest absolute value, in degrees, of a geographic coordinate (x and y have no bound)
DEGREES = {"lat": 90.0, "lon": 180.0}


def bad_coordinates(values: np.ndarray, limit: float | None) -> tuple[np.ndarray, np.ndarray]:
    """Positions of NaN / infinite values, and of finite values with |v| > ``limit`` (none without a limit)."""
    values = np.asarray(values, dtype=np.float64)
    finite = np.isfinite(values)
    if limit is None:
        return np.flatnonzero(~finite), np.zeros(0, np.int64)
    with np.errstate(invalid="ignore"):
        return np.flatnonzero(~finite), np.flatnonzero(finite & (np.abs(values) > limit))


def coordinate_problems(name: str, values: np.ndarray, row0: int = 0) -> list[InputError]:
    """NaN / infinite coordinates, latitudes outside [-90, 90], longitudes outside [-180, 180]."""
    limit = DEGREES.get(name.rsplit("/", 1)[-1])
    nonfinite, outside = bad_coordinates(values, limit)
    found: list[InputError] = []
    if nonfinite.size:
        found.append(input_error(name, f"rows {rows_text(nonfinite + row0)} are NaN or infinite", rows=nonfinite + row0))
    if outside.size:
        found.append(input_error(name, f"rows {rows_text(outside + row0)} lie outside [-{limit:g}, {limit:g}] degrees",
                                 rows=outside + row0))
    return found


def coordinate_names(protocol: str) -> tuple[str, str]:
    return {"geo": ("lat", "lon"), "xy": ("x", "y")}[protocol]
