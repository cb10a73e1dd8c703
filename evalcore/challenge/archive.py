"""A submission uploaded as one file: a .zip or .npz archive holding query.npy and gallery.npy.

The archive is untrusted: it is bounded before anything is extracted (its own
size, how many members it lists, the bytes its two members say they hold),
and again while they are extracted (a header may lie), against the largest
submission the truth allows (``submission_limit``). A damaged archive (bad
CRC, corrupt compressed data, an encrypted member, an unknown compression
method) is one InputError naming the archive and the member.
"""
from __future__ import annotations

import stat
import zipfile
from pathlib import Path

from evalcore.errors import InputError, foreign_reason, input_error

MEMBERS = ("query.npy", "gallery.npy")
#: bytes read from an archive at a time while unpacking
STEP = 1 << 20
#: the most members an archive may list (the two arrays, plus folders, READY, a macOS __MACOSX copy...)
MAX_MEMBERS = 1000
#: room for a .npy header (numpy's reader refuses headers over 10,000 bytes) and the zip's own records
HEADER_ROOM = 1 << 16


def submission_limit(n_query: int, n_gallery: int, dims: int) -> int:
    """The most bytes a valid submission's two .npy files hold: (queries + gallery images) x dims x 8
    (float64, the widest dtype accepted), plus ``HEADER_ROOM`` per file."""
    return (n_query + n_gallery) * dims * 8 + len(MEMBERS) * HEADER_ROOM


def check_listing(archive: str, infos: list[zipfile.ZipInfo], limit: int) -> dict[str, zipfile.ZipInfo]:
    """The two members by their fixed names, from the archive's listing alone (nothing extracted yet).

    Members are matched by their last name component (``run/query.npy`` too); a member named ``query`` in an
    .npz (``numpy.savez``) counts as ``query.npy``. Refused: more than ``MAX_MEMBERS`` members, a link, a name
    given twice, a missing member, and members whose stated sizes add up to more than ``limit`` bytes.
    """
    if len(infos) > MAX_MEMBERS:
        raise InputError(f"submission {archive}: lists {len(infos)} members, more than {MAX_MEMBERS}; "
                         "an archive of query.npy and gallery.npy is expected")
    found: dict[str, zipfile.ZipInfo] = {}
    for info in infos:
        name = info.filename.replace("\\", "/").rsplit("/", 1)[-1]
        if name in ("query", "gallery"):
            name += ".npy"
        if name not in MEMBERS:
            continue
        if stat.S_ISLNK(info.external_attr >> 16):
            raise input_error(info.filename, "a symbolic link in the archive; links are not accepted")
        if name in found:
            raise input_error(name, f"given twice in the archive ({found[name].filename}, {info.filename})")
        found[name] = info
    for name in MEMBERS:
        if name not in found:
            raise input_error(name, f"missing from the archive {archive}")
    stated = sum(found[name].file_size for name in MEMBERS)
    if stated > limit:
        raise InputError(f"submission {archive}: its members say they hold {stated} bytes unpacked, more than "
                         f"the {limit} bytes the largest valid submission for this truth holds")
    return found


def extract(zf: zipfile.ZipFile, archive: str, info: zipfile.ZipInfo, target: Path, budget: int) -> int:
    """Copy one member to ``target``, ``STEP`` bytes at a time, stopping past its stated size or ``budget``
    bytes (headers can lie); returns the bytes written. Every failure to decode is an InputError naming the
    archive and the member."""
    written = 0
    cap = min(info.file_size, budget)
    try:
        with zf.open(info) as src, open(target, "wb") as dst:
            while chunk := src.read(min(STEP, cap - written + 1)):
                written += len(chunk)
                if written > cap:
                    raise InputError(f"submission {archive}: member {info.filename} unpacks to more than "
                                     f"{cap} bytes (its stated size, within the submission's limit)")
                dst.write(chunk)
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - bad CRC, corrupt deflate data, encrypted, unknown method...
        raise InputError(f"submission {archive}: member {info.filename} cannot be unpacked "
                         f"({foreign_reason(exc, named=True)})") from None
    return written


def unpack(archive, into: Path, limit: int) -> Path:
    """Copy ``query.npy`` and ``gallery.npy`` out of ``archive`` into the folder ``into``; returns it.

    ``limit`` bounds the archive's size and the bytes unpacked (``submission_limit``). Members are read as
    plain bytes and written under fixed names, so no name in the archive becomes a path here.
    """
    name = Path(archive).name
    try:
        size = Path(archive).stat().st_size
    except OSError as exc:
        raise InputError(f"submission {name}: cannot be read ({exc.__class__.__name__})") from None
    if size > limit:
        raise InputError(f"submission {name}: {size} bytes, more than the {limit} bytes the largest valid "
                         "submission for this truth holds")
    try:
        zf = zipfile.ZipFile(archive)
    except Exception as exc:  # noqa: BLE001 - BadZipFile, OSError, and whatever a damaged directory raises
        raise InputError(f"submission {name}: not a folder, a .zip or a .npz archive ({foreign_reason(exc)})") from None
    with zf:
        found = check_listing(name, zf.infolist(), limit)
        budget = limit
        for member in MEMBERS:
            budget -= extract(zf, name, found[member], into / member, budget)
    return into
