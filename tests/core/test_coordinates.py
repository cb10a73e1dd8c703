"""The one check of coordinate values: positions of non-finite values and of values beyond the bound."""
from __future__ import annotations

import numpy as np
import pytest

from evalcore.core.coordinates import DEGREES, bad_coordinates, coordinate_names, coordinate_problems


def test_latitudes_beyond_ninety_degrees_and_non_finite_values_are_found_apart():
    nonfinite, outside = bad_coordinates(np.array([0.0, 90.0, -90.0, 90.5, np.nan, -np.inf, -91.0]), 90.0)
    assert nonfinite.tolist() == [4, 5]
    assert outside.tolist() == [3, 6]


def test_the_bounds_themselves_are_inside():
    for limit in DEGREES.values():
        assert [a.tolist() for a in bad_coordinates(np.array([-limit, limit]), limit)] == [[], []]


def test_without_a_bound_only_non_finite_values_are_bad():
    nonfinite, outside = bad_coordinates(np.array([1e9, np.inf, -1e12]), None)
    assert nonfinite.tolist() == [1] and outside.tolist() == []


@pytest.mark.parametrize("name, values, row0, expected", [
    ("query/lat", [0.0, 95.0], 0, ["query/lat: rows 1 lie outside [-90, 90] degrees"]),
    ("gallery/lon", [np.nan, 181.0, 0.0], 10,
     ["gallery/lon: rows 10 are NaN or infinite", "gallery/lon: rows 11 lie outside [-180, 180] degrees"]),
    ("query/x", [1e30, -1e30], 0, []),
    ("query/y", [0.0, np.inf], 0, ["query/y: rows 1 are NaN or infinite"]),
])
def test_problems_name_the_array_and_its_rows(name, values, row0, expected):
    found = coordinate_problems(name, np.array(values), row0)
    assert [str(p) for p in found] == expected
    # each problem is an error about the array, carrying the rows it names
    assert all(p.array == name and p.rows == [int(s.split("rows ")[1].split()[0])] for p, s in zip(found, expected))


def test_each_spatial_protocol_names_its_two_coordinates():
    assert coordinate_names("geo") == ("lat", "lon") and coordinate_names("xy") == ("x", "y")
    with pytest.raises(KeyError):
        coordinate_names("reid")
