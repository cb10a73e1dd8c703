"""A submission uploaded as one file: a .zip or .npz archive holding query.npy and gallery.npy."""
from __future__ import annotations

import stat
import zipfile
from pathlib import Path

from evalcore.errors import InputError

MEMBERS = ("query.npy", "gallery.npy")
#: bytes read from an archive at a time while unpacking
STEP = 1 << 20


def unpack(archive, into: Path) -> Path:
    """Copy ``query.npy`` and ``gallery.npy`` out of ``archive`` into the folder ``into``; returns it.

    Members are matched by their last name component (``run/query.npy`` too), read
    as plain bytes and written under fixed names, so no name in the archive
    becomes a path here; links, and a name given twice, are refused. A member
    named ``query`` in an .npz (``numpy.savez``) counts as ``query.npy``.
    """
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as exc:
        raise InputError(f"submission {Path(archive).name}: not a folder, a .zip or a .npz archive ({exc})") from None
    with zf:
        found: dict[str, zipfile.ZipInfo] = {}
        for info in zf.infolist():
            name = info.filename.replace("\\", "/").rsplit("/", 1)[-1]
            if name in ("query", "gallery"):
                name += ".npy"
            if name not in MEMBERS:
                continue
            if stat.S_ISLNK(info.external_attr >> 16):
                raise InputError(f"{info.filename}: a symbolic link in the archive; links are not accepted")
            if name in found:
                raise InputError(f"{name}: given twice in the archive ({found[name].filename}, {info.filename})")
            found[name] = info
        for name in MEMBERS:
            if name not in found:
                raise InputError(f"{name}: missing from the archive {Path(archive).name}")
            with zf.open(found[name]) as src, open(into / name, "wb") as dst:
                while chunk := src.read(STEP):
                    dst.write(chunk)
    return into
