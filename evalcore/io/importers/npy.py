"""``npy``: torchreid / fast-reid arrays, one ``.npz`` or ``.npy`` files; never unpickled.

Every array's .npy header is read first (``evalcore.io.npy``: numpy's bounded header parser): a file or
member without the .npy magic (a pickle), a dtype of Python objects, more than two dimensions or more data
than the file holds is refused, naming the file (and key), before numpy loads anything."""
from __future__ import annotations

import os
import zipfile

import numpy as np

from evalcore.errors import InputError, flag_of, foreign_reason, input_error, mention
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
    """The array of the .npy file ``path``, its header read and checked first (``_loadable``): numpy never sees
    a file that is not a .npy (a pickle, an .npz) or that holds Python objects."""
    name = str(path)
    if not os.path.isfile(path):
        raise input_error(name, "no such file")
    try:
        with open(path, "rb") as fh:
            magic = npy_header.is_npy(fh)
            if not magic and not os.fstat(fh.fileno()).st_size:
                raise input_error(name, "is empty, not a .npy array")
            if not magic and zipfile.is_zipfile(fh):
                raise input_error(name, "is an .npz archive; give it as the input, not as a single array")
            fh.seek(0)
            header = _loadable(name, npy_header.read_header(name, fh) if magic else None)
            npy_header.check_fits(name, header, os.fstat(fh.fileno()).st_size)
            fh.seek(0)
            return np.load(fh, allow_pickle=False)  # the file checked, not whatever is at its name now
    except InputError:
        raise
    except (ValueError, OSError, EOFError) as exc:
        raise input_error(name, f"not a readable .npy file ({foreign_reason(exc)})") from None


def _loadable(where: str, header: npy_header.NpyHeader | None) -> npy_header.NpyHeader:
    """``header`` (None: the file or member has no .npy magic) when what it describes may be loaded, else an
    InputError naming ``where`` and what is wrong: not a .npy (a pickle is never loaded), a dtype holding
    Python objects (loading them would unpickle), more than two dimensions (ids have one, features two)."""
    if header is None:
        raise input_error(where, "is not a .npy array (it does not start with the .npy magic bytes); pickled "
                          "data is never loaded: save a numeric array with numpy.save")
    if header.dtype.hasobject:
        raise input_error(where, f"holds a Python object array (dtype {header.dtype}), which is not loaded "
                          "(pickle is disabled); save a numeric array instead")
    if len(header.shape) > 2:
        raise input_error(where, f"the .npy header's shape {header.shape} has {len(header.shape)} dimensions; "
                          "ids have one, features two")
    return header


def _load_npz(path) -> dict[str, tuple[str, np.ndarray]]:
    """Arrays of an .npz by option name: option -> (description for messages, array)."""
    name = str(path)
    if not os.path.isfile(path):
        raise input_error(name, "no such file")
    try:  # numpy is given zip archives only: anything else it would read as a .npy, or unpickle
        with open(path, "rb") as fh:
            if npy_header.is_npy(fh):
                raise input_error(name, "is a single .npy array, not an .npz archive")
            if not zipfile.is_zipfile(fh):
                raise input_error(name, "is not an .npz archive (not a zip file); pickled data is never loaded: "
                                  "save the arrays with numpy.savez")
        archive = np.load(path, allow_pickle=False)
    except InputError:
        raise
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise input_error(name, f"not a readable .npz file ({foreign_reason(exc)})") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):  # a zip file is always opened as one
        raise input_error(name, "is not an .npz archive")
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
            except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
                raise input_error(name, f"key {key}: unreadable ({foreign_reason(exc)})") from None
    return found


def _check_member(archive, key: str, where: str) -> None:
    """The header of the .npz member ``key``, before it is loaded: ``_loadable`` (a member without the .npy magic
    would be unpickled, one of Python objects too), and against the size the archive declares for it (the
    archive cannot give more bytes than it declares: zipfile stops there and checks the CRC)."""
    names = archive.zip.namelist()
    member = key + ".npy" if key + ".npy" in names else key
    try:
        info = archive.zip.getinfo(member)
        with archive.zip.open(info) as fh:
            header = npy_header.read_header(where, fh) if npy_header.is_npy(fh) else None
    except InputError:
        raise
    except (KeyError, OSError, ValueError, EOFError, zipfile.BadZipFile, NotImplementedError, RuntimeError) as exc:
        raise input_error(where, f"unreadable ({foreign_reason(exc, named=True)})") from None
    npy_header.check_fits(where, _loadable(where, header), info.file_size)


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
            raise input_error(path, "give either an .npz archive or " + mention("--query-features") + "/"
                              + mention("--gallery-features") + "/"
                              "... files, not both (also got " + flag_of(next(iter(explicit))) + ")")
        found = _load_npz(path)
    for option, file in explicit.items():
        found[option] = (str(file), _load_npy(file))
    source = str(path) if path is not None else "npy import"
    for option in _NPY_REQUIRED:
        if option not in found:
            names = "/".join(NPY_KEYS[option])
            raise input_error(source, f"{option.replace('_', ' ')} missing (give key or file {names}, or "
                              + flag_of(option) + " FILE.npy)")
    if ("query_cams" in found) != ("gallery_cams" in found):
        have, lack = ("query", "gallery") if "query_cams" in found else ("gallery", "query")
        raise input_error(source, f"{have} cameras given but {lack} cameras missing "
                         "(give both " + mention("--query-cams") + " and " + mention("--gallery-cams")
                          + ", or neither)")
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
