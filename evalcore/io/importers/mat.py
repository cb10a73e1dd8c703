"""``mat``: Person_reID_baseline_pytorch's ``pytorch_result.mat``."""
from __future__ import annotations

import os

import numpy as np

from evalcore.errors import foreign_reason, input_error
from evalcore.io.importers.checks import check_features, check_integers

MAT_KEYS = ("query_f", "query_label", "query_cam", "gallery_f", "gallery_label", "gallery_cam")


def read_mat(path) -> tuple[dict[str, np.ndarray], dict]:
    """Person_reID_baseline_pytorch's ``pytorch_result.mat``; gallery label -1 is junk."""
    import scipy.io  # deferred: only .mat files need it, and it takes a while to import

    name = str(path)
    if not os.path.isfile(path):
        raise input_error(name, "no such file")
    try:
        mat = scipy.io.loadmat(path)
    except NotImplementedError as exc:  # MATLAB v7.3 files are HDF5
        raise input_error(name, f"cannot be read by scipy.io.loadmat ({foreign_reason(exc)})") from None
    except Exception as exc:  # noqa: BLE001 - scipy raises many types for broken files
        raise input_error(name, f"not a readable .mat file ({foreign_reason(exc, named=True)})") from None
    missing = [k for k in MAT_KEYS if k not in mat]
    if missing:
        found = sorted(k for k in mat if not k.startswith("__"))
        raise input_error(name, f"key {missing[0]} missing (needs {', '.join(MAT_KEYS)}; "
                         f"found {', '.join(found) or 'none'})")
    arrays: dict[str, np.ndarray] = {}
    for side in ("query", "gallery"):
        emb = check_features(mat[f"{side}_f"], f"{name}: key {side}_f")
        n = emb.shape[0]
        arrays[f"{side}/emb"] = emb
        arrays[f"{side}/label"] = check_integers(mat[f"{side}_label"], f"{name}: key {side}_label",
                                                  n, f"{side}_f")
        arrays[f"{side}/cam"] = check_integers(mat[f"{side}_cam"], f"{name}: key {side}_cam",
                                                n, f"{side}_f")
    if arrays["query/emb"].shape[1] != arrays["gallery/emb"].shape[1]:
        raise input_error(name, f"key gallery_f: {arrays['gallery/emb'].shape[1]} dimensions, "
                         f"but query_f has {arrays['query/emb'].shape[1]}")
    arrays["gallery/junk"] = arrays["gallery/label"] == -1
    return arrays, {"protocol": "reid"}
