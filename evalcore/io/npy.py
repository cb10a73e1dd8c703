"""A ``.npy`` header read and checked before any of its data is: what it claims must fit its file.

numpy allocates the whole array the header claims before it reads a byte
of data, so a 200-byte file whose header says 10^12 rows asks for terabytes.
Reading the header alone (a few hundred bytes, numpy's own bounded parser)
and holding it to the bytes that follow it turns that into one line naming
the file. Used by the ``npy`` importer (a ``.npy`` file, or a member of an
``.npz`` against the size the archive declares for it).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np

from evalcore.errors import InputError, input_error

#: the first bytes of every .npy file
MAGIC = b"\x93NUMPY"


@dataclass(frozen=True)
class NpyHeader:
    """What a .npy header claims: ``shape``, ``dtype``, ``fortran_order``, and ``offset`` (header bytes)."""

    shape: tuple[int, ...]
    dtype: np.dtype
    fortran_order: bool
    offset: int

    @property
    def data_bytes(self) -> int:
        """prod(shape) x itemsize: the bytes of data the header promises (Python ints: no overflow)."""
        return math.prod(self.shape) * self.dtype.itemsize


def read_header(name: str, fh: BinaryIO) -> NpyHeader:
    """The header of the .npy stream ``fh`` (positioned at its start), else an InputError naming ``name``.

    Versions 1.0 and 2.0 (what ``numpy.save`` writes for every numeric array);
    numpy's parser bounds the header's length. A shape must be a tuple of
    sizes >= 0.
    """
    fmt = np.lib.format
    start = fh.tell()
    try:
        version = fmt.read_magic(fh)
        if version == (1, 0):
            shape, fortran, dtype = fmt.read_array_header_1_0(fh)
        elif version == (2, 0):
            shape, fortran, dtype = fmt.read_array_header_2_0(fh)
        else:
            raise input_error(name, f".npy format version {version[0]}.{version[1]} is not read "
                             "(numpy.save writes 1.0 or 2.0 for numeric arrays)")
    except InputError:
        raise
    except (ValueError, SyntaxError, TypeError, EOFError, OSError) as exc:
        raise input_error(name, f"the .npy header cannot be read ({exc})") from None
    if not isinstance(shape, tuple) or not all(isinstance(s, int) and s >= 0 for s in shape):
        raise input_error(name, f"the .npy header's shape {shape!r} is not a tuple of sizes")
    return NpyHeader(shape, dtype, bool(fortran), fh.tell() - start)


def check_fits(name: str, header: NpyHeader, size: int) -> None:
    """The data the header claims fits the ``size`` bytes of its file: prod(shape) x itemsize <= size - offset.

    Object arrays are left to the loader (which refuses them: pickle is off).
    """
    if header.dtype.hasobject:
        return
    have = max(size - header.offset, 0)
    if header.data_bytes > have:
        raise input_error(name, f"the .npy header claims shape {header.shape} of {header.dtype} "
                         f"({header.data_bytes:,} bytes of data), but the file holds {have:,} bytes after its "
                         "header (truncated, or a header that does not match its data)")


def is_npy(fh: BinaryIO) -> bool:
    """Whether the stream starts with the .npy magic (the position is kept)."""
    start = fh.tell()
    try:
        return fh.read(len(MAGIC)) == MAGIC
    finally:
        fh.seek(start)


def check_npy_file(name: str, path) -> NpyHeader | None:
    """The header of the .npy file ``path``, checked against the file's size; None when it is not a .npy
    (no magic: the caller's loader says what it is)."""
    try:
        with open(path, "rb") as fh:
            if not is_npy(fh):
                return None
            header = read_header(name, fh)
            fh.seek(0, 2)
            size = fh.tell()
    except OSError as exc:
        raise input_error(name, f"cannot be read ({exc.strerror or exc})") from None
    check_fits(name, header, size)
    return header
