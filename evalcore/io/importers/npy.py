"""``npy``: torchreid / fast-reid arrays, one ``.npz`` or ``.npy`` files; never unpickled."""
from __future__ import annotations

import os
import zipfile

import numpy as np

from evalcore.errors import InputError, input_error
from evalcore.io import npy as npy_header
from evalcore.io.importers.checks import check_features, check_integers, check_unique, junk_of, protocol_of

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
    name = str(path)
    if not os.path.isfile(path):
        raise input_error(name, "no such file")
    npy_header.check_npy_file(name, path)  # before numpy allocates what the header claims
    try:
        data = np.load(path, allow_pickle=False)
    except ValueError as exc:
        if "allow_pickle" in str(exc) or "Object arrays" in str(exc):
            raise input_error(name, "holds a Python object array, which is not loaded "
                             "(pickle is disabled); save a numeric array instead") from None
        raise input_error(name, f"not a readable .npy file ({exc})") from None
    except (OSError, EOFError) as exc:
        raise input_error(name, f"not a readable .npy file ({exc})") from None
    if isinstance(data, np.lib.npyio.NpzFile):
        data.close()
        raise input_error(name, "is an .npz archive; give it as the input, not as a single array")
    return data


def _load_npz(path) -> dict[str, tuple[str, np.ndarray]]:
    """Arrays of an .npz by option name: option -> (description for messages, array)."""
    name = str(path)
    if not os.path.isfile(path):
        raise input_error(name, "no such file")
    try:
        archive = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise input_error(name, f"not a readable .npz file ({exc})") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise input_error(name, "is a single .npy array, not an .npz archive")
    found = {}
    with archive:
        for option, aliases in NPY_KEYS.items():
            present = [k for k in aliases if k in archive.files]
            if len(present) > 1:
                raise input_error(name, f"keys {present[0]} and {present[1]} both given; keep one")
            if not present:
                continue
            key = present[0]
            _check_member(archive, key, f"{name}: key {key}")
            try:
                found[option] = (f"{name}: key {key}", archive[key])
            except ValueError as exc:
                if "allow_pickle" in str(exc) or "Object arrays" in str(exc):
                    raise input_error(name, f"key {key}: holds a Python object array, which is not "
                                     "loaded (pickle is disabled); save a numeric array instead") from None
                raise input_error(name, f"key {key}: unreadable ({exc})") from None
    return found


def _check_member(archive, key: str, where: str) -> None:
    """The header of the .npz member ``key`` against the size the archive declares for it, before it is loaded
    (the archive cannot give more bytes than it declares: zipfile stops there and checks the CRC)."""
    names = archive.zip.namelist()
    member = key + ".npy" if key + ".npy" in names else key
    try:
        info = archive.zip.getinfo(member)
        with archive.zip.open(info) as fh:
            if not npy_header.is_npy(fh):
                return  # numpy loads such a member as a pickle, which is refused when it is loaded
            header = npy_header.read_header(where, fh)
    except InputError:
        raise
    except (KeyError, OSError, ValueError, EOFError, zipfile.BadZipFile, NotImplementedError, RuntimeError) as exc:
        raise input_error(where, f"unreadable ({exc.__class__.__name__}: {exc})") from None
    npy_header.check_fits(where, header, info.file_size)


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
                raise input_error(path, f"files {present[0]}.npy and {present[1]}.npy both present; keep one")
            if present and option not in explicit:
                file = os.path.join(path, present[0] + ".npy")
                found[option] = (f"{file}", _load_npy(file))
    elif path is not None:
        if not os.path.exists(path):
            raise input_error(path, "no such file or folder")
        if explicit:
            raise input_error(path, f"give either an .npz archive or --query-features/--gallery-features/"
                             f"... files, not both (also got --{next(iter(explicit)).replace('_', '-')})")
        found = _load_npz(path)
    for option, file in explicit.items():
        found[option] = (str(file), _load_npy(file))
    source = str(path) if path is not None else "npy import"
    for option in _NPY_REQUIRED:
        if option not in found:
            names = "/".join(NPY_KEYS[option])
            raise input_error(source, f"{option.replace('_', ' ')} missing (give key or file {names}, "
                             f"or --{option.replace('_', '-')} FILE.npy)")
    if ("query_cams" in found) != ("gallery_cams" in found):
        have, lack = ("query", "gallery") if "query_cams" in found else ("gallery", "query")
        raise input_error(source, f"{have} cameras given but {lack} cameras missing "
                         f"(give both --query-cams and --gallery-cams, or neither)")
    arrays: dict[str, np.ndarray] = {}
    for side in ("query", "gallery"):
        where, values = found[f"{side}_features"]
        emb = check_features(values, where)
        n = emb.shape[0]
        arrays[f"{side}/emb"] = emb
        where_ids, ids = found[f"{side}_ids"]
        arrays[f"{side}/label"] = check_integers(ids, where_ids, n, _relative(where, where_ids))
        if f"{side}_cams" in found:
            where_cams, cams = found[f"{side}_cams"]
            arrays[f"{side}/cam"] = check_integers(cams, where_cams, n, _relative(where, where_cams))
        if f"{side}_keys" in found:
            where_keys, keys = found[f"{side}_keys"]
            keys = np.asarray(keys).reshape(-1)
            if keys.dtype.kind not in "UiuS" or keys.shape[0] != n:
                raise input_error(where_keys, f"expected {n} string ids, got dtype {keys.dtype} "
                                 f"shape {np.asarray(found[f'{side}_keys'][1]).shape}")
            key_list = [k.decode() if isinstance(k, bytes) else str(k) for k in keys.tolist()]
            check_unique(key_list, where_keys)
            arrays[f"{side}/key"] = np.asarray(key_list, dtype=object)
    dq, dg = arrays["query/emb"].shape[1], arrays["gallery/emb"].shape[1]
    if dq != dg:
        raise input_error(found['gallery_features'][0], f"{dg} dimensions, but "
                         f"{_relative(found['query_features'][0], found['gallery_features'][0])} has {dq}")
    arrays.update(junk_of(arrays["gallery/label"], junk_label))
    return arrays, {"protocol": protocol_of(arrays)}
