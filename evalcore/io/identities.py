"""Identities as users hold them (strings, numbers, mixed) coded once to evalcore's int64 labels.

evalcore's label arrays are int64 and a negative label means "no identity"
(never relevant). Users hold identities as any hashable values: person ids
as strings (``"0002"``), file-name stems, tuples, numbers. ``code_identities``
turns the two sides of one evaluation into int64 codes such that two rows
share a code exactly when their values are equal (Python's ``==`` and
``hash``: ``1``, ``1.0`` and ``True`` are one value; ``1`` and ``"1"`` are
two), across both sides.

Rules, in order:

* missing (``None``, or a float NaN): code -1, no identity (NaN equals
  nothing, not even itself; ``None`` is read the same way).
* a negative number: code -1, no identity (evalcore's own rule for labels),
  unless ``negative_is_identity=True`` (the ReID tools' rule: ``-1`` is a
  value like any other, and two ``-1`` rows match).
* integer arrays whose values are valid labels (non-negative, within int64)
  keep their values, so reports show the user's ids.
* anything else (strings, mixed types, negatives kept as identities, unsigned
  values past int64): every distinct value gets a code 0 .. n-1, in sorted
  order where the values sort, else in order of first appearance (query side
  first).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from evalcore.errors import foreign_reason, input_error

#: the code of a row without identity (evalcore: a negative label is never relevant)
NO_IDENTITY = -1
INT64_MAX = np.iinfo(np.int64).max


def code_identities(query_values, gallery_values, *, negative_is_identity: bool = False,
                    names: tuple[str, str] = ("query_labels", "gallery_labels")) -> tuple[np.ndarray, np.ndarray]:
    """Code both sides' identities to int64: equal values share a code, missing ones get -1 (module docstring).

    ``query_values``, ``gallery_values``: 1-D, anything ``np.asarray`` takes
    (lists, numpy arrays, CPU torch tensors). ``names`` name the two
    parameters in errors. Returns ``(q_codes, g_codes)``, int64.

    >>> q, g = code_identities(["a", "b"], ["b", "c", None])
    >>> q.tolist(), g.tolist()
    ([0, 1], [1, 2, -1])
    >>> [c.tolist() for c in code_identities([3, -1], [-1, 7])]
    [[3, -1], [-1, 7]]
    >>> [c.tolist() for c in code_identities([3, -1], [-1, 7], negative_is_identity=True)]
    [[1, 0], [0, 2]]
    """
    q = one_dimensional(query_values, names[0])
    g = one_dimensional(gallery_values, names[1])
    if q.dtype.kind in "iu" and g.dtype.kind in "iu":
        return integer_codes(q, g, negative_is_identity)
    if q.dtype.kind == "f" and g.dtype.kind == "f":
        return number_codes(q.astype(np.float64), g.astype(np.float64), negative_is_identity)
    if q.dtype.kind in "USb" and q.dtype.kind == g.dtype.kind:
        return dense_codes(q, g)  # one kind of string (or bool) on both sides: sortable, nothing missing
    return object_codes(q, g, negative_is_identity, names)  # mixed kinds compare as Python values (exact)


def one_dimensional(values, name: str) -> np.ndarray:
    """``values`` as a 1-D numpy array (strings of numpy's variable-width dtype read as objects)."""
    try:
        array = np.asarray(values)
    except ValueError:  # a ragged list, such as one holding tuples and strings: one object per element
        array = None
    except (TypeError, RuntimeError) as exc:  # a CUDA or grad-holding torch tensor
        raise input_error(name, f"cannot be read as an array ({foreign_reason(exc)})") from None
    if isinstance(values, (list, tuple)) and (array is None or array.ndim != 1):
        array = np.empty(len(values), dtype=object)  # tuples in a list are identities, not rows of a matrix
        for row, value in enumerate(values):
            array[row] = value
    if array is None:
        raise input_error(name, "cannot be read as a 1-D array of identities")
    if array.ndim != 1:
        raise input_error(name, f"must be 1-D, got shape {array.shape}")
    if array.dtype.kind == "T":  # numpy's StringDType: no missing values unless na_object is set; objects are exact
        array = array.astype(object)
    if array.dtype.kind not in "biufUSO":
        raise input_error(name, f"dtype {array.dtype} cannot hold identities (give integers, strings or objects)")
    return array


def integer_codes(q: np.ndarray, g: np.ndarray, negative_is_identity: bool) -> tuple[np.ndarray, np.ndarray]:
    """Integers: valid labels keep their values; negatives are -1 (or identities, densely coded)."""
    sides = [side for side in (q, g) if side.size]
    if any(side.dtype.kind == "u" and int(side.max()) > INT64_MAX for side in sides):
        return object_codes(q, g, negative_is_identity, ("", ""))  # past int64: exact as Python ints
    q64, g64 = q.astype(np.int64), g.astype(np.int64)
    if negative_is_identity and any(int(side.min()) < 0 for side in sides):
        return dense_codes(q64, g64)
    return np.maximum(q64, NO_IDENTITY), np.maximum(g64, NO_IDENTITY)


def number_codes(q: np.ndarray, g: np.ndarray, negative_is_identity: bool) -> tuple[np.ndarray, np.ndarray]:
    """Floats (as float64): NaN is -1, negatives -1 unless identities; the rest coded densely by value."""
    both = np.concatenate([q, g])
    missing = np.isnan(both) if negative_is_identity else np.isnan(both) | (both < 0)
    codes = np.full(both.shape, NO_IDENTITY, dtype=np.int64)
    _, inverse = np.unique(both[~missing], return_inverse=True)
    codes[~missing] = inverse.reshape(-1)
    return codes[:q.size], codes[q.size:]


def dense_codes(q: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Codes 0 .. n-1 by sorted distinct value over both sides (no value missing)."""
    _, inverse = np.unique(np.concatenate([q, g]), return_inverse=True)
    inverse = inverse.reshape(-1).astype(np.int64)
    return inverse[:q.size], inverse[q.size:]


def is_missing(value: Any, negative_is_identity: bool) -> bool:
    """None, a NaN, or (unless negatives are identities) a negative number; bools are values."""
    if value is None:
        return True
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        return False
    return bool(math.isnan(value) or (not negative_is_identity and value < 0))


def object_codes(q: np.ndarray, g: np.ndarray, negative_is_identity: bool,
                 names: tuple[str, str]) -> tuple[np.ndarray, np.ndarray]:
    """Any hashable values: one dict from value to code; sorted codes when the distinct values sort."""
    seen: dict[Any, int] = {}
    codes = []
    for name, side in zip(names, (q, g), strict=True):
        out = np.empty(side.size, dtype=np.int64)
        for row, value in enumerate(side.tolist()):
            if is_missing(value, negative_is_identity):
                out[row] = NO_IDENTITY
                continue
            try:
                out[row] = seen.setdefault(value, len(seen))
            except TypeError:
                raise input_error(name, f"row {row} is a {type(value).__name__}, which is not hashable; "
                                 "identities must be hashable values (strings, numbers, tuples)", rows=[row]) from None
        codes.append(out)
    try:  # sorted order where the values sort (the same codes whatever the row order); else first appearance
        ranked = sorted(seen)
    except TypeError:
        return codes[0], codes[1]
    renumber = np.empty(len(seen) + 1, dtype=np.int64)
    renumber[[seen[v] for v in ranked]] = np.arange(len(ranked))
    renumber[-1] = NO_IDENTITY  # index -1: missing rows stay -1
    return renumber[codes[0]], renumber[codes[1]]
