"""Report folders (CONTRACT.md section 8): Parquet tables and run.json, whole or not at all.

Locally a report is written into a hidden sibling folder and renamed into
place; an earlier report is moved aside first and removed only once the new
one stands. On object storage (no rename) the files are written first and
``manifest.json`` last: a report folder without a manifest is incomplete and
readers refuse it.
"""
from __future__ import annotations

import json
import os
import platform
import shutil
import uuid
from collections.abc import Mapping
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from evalcore.errors import InputError

MANIFEST = "manifest.json"
TABLES = ("per_query", "summary", "cmc")


def is_url(path) -> bool:
    return "://" in str(path) and not str(path).startswith("file://")


def versions() -> dict:
    """Versions of what computed the report, for run.json."""
    import dask
    import distributed
    import numpy
    import zarr

    import evalcore

    return {"evalcore": evalcore.__version__, "python": platform.python_version(), "numpy": numpy.__version__,
            "dask": dask.__version__, "distributed": distributed.__version__, "zarr": zarr.__version__,
            "pyarrow": pa.__version__}


def _fs(path, storage_options: Mapping | None):
    import fsspec

    fs, root = fsspec.core.url_to_fs(str(path), **dict(storage_options or {}))
    return fs, root


def check_out(out, overwrite: bool, storage_options: Mapping | None = None) -> None:
    """Refuse an existing non-empty ``--out`` unless ``overwrite`` (checked before any work)."""
    if is_url(out):
        fs, root = _fs(out, storage_options)
        exists = fs.exists(root) and bool(fs.ls(root))
    else:
        p = Path(out)
        if p.exists() and not p.is_dir():
            raise InputError(f"--out {out}: exists and is not a folder")
        exists = p.is_dir() and any(p.iterdir())
    if exists and not overwrite:
        raise InputError(f"--out {out}: exists and is not empty (pass --overwrite to replace it)")


def _json_bytes(value) -> bytes:
    return (json.dumps(value, indent=2, sort_keys=False, default=str) + "\n").encode()


def _files(tables: Mapping[str, pa.Table], run: Mapping, extra: Mapping[str, bytes | str] | None):
    """(name, bytes or table) in writing order; run.json after the tables."""
    for name, table in tables.items():
        yield f"{name}.parquet", table
    yield "run.json", _json_bytes(dict(run))
    for name, content in (extra or {}).items():
        yield name, content.encode() if isinstance(content, str) else content


def write_report(out, tables: Mapping[str, pa.Table], run: Mapping, *, extra: Mapping[str, bytes | str] | None = None,
                 overwrite: bool = False, storage_options: Mapping | None = None) -> str:
    """Write a report folder atomically (locally) or manifest-last (object storage)."""
    check_out(out, overwrite, storage_options)
    if is_url(out):
        return _write_remote(out, tables, run, extra, storage_options)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        names = []
        for name, content in _files(tables, run, extra):
            target = tmp / name
            if isinstance(content, pa.Table):
                pq.write_table(content, target)
            else:
                target.write_bytes(content)
            names.append(name)
        (tmp / MANIFEST).write_bytes(_json_bytes({"files": names, "complete": True}))
        old = None
        if out.exists():
            old = out.parent / f".{out.name}.old-{uuid.uuid4().hex[:8]}"
            os.replace(out, old)
        try:
            os.replace(tmp, out)
        except BaseException:
            if old is not None:
                os.replace(old, out)
            raise
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return str(out)


def _write_remote(out, tables, run, extra, storage_options) -> str:
    fs, root = _fs(out, storage_options)
    root = root.rstrip("/")
    if fs.exists(f"{root}/{MANIFEST}"):
        fs.rm(f"{root}/{MANIFEST}")  # the old report stops counting before any file changes
    names = []
    for name, content in _files(tables, run, extra):
        with fs.open(f"{root}/{name}", "wb") as fh:
            if isinstance(content, pa.Table):
                pq.write_table(content, fh)
            else:
                fh.write(content)
        names.append(name)
    with fs.open(f"{root}/{MANIFEST}", "wb") as fh:
        fh.write(_json_bytes({"files": names, "complete": True}))
    return str(out)


def is_complete(path, storage_options: Mapping | None = None) -> bool:
    """True when the report folder has its manifest (written last)."""
    if is_url(path):
        fs, root = _fs(path, storage_options)
        return fs.exists(f"{root.rstrip('/')}/{MANIFEST}")
    return (Path(path) / MANIFEST).is_file()


def read_report(path, storage_options: Mapping | None = None) -> dict:
    """The tables and run.json of a complete report; InputError for an incomplete one."""
    if not is_complete(path, storage_options):
        raise InputError(f"report {path}: incomplete or missing (no {MANIFEST}; it was not finished)")
    if is_url(path):
        fs, root = _fs(path, storage_options)
        root = root.rstrip("/")
        opener = lambda name: fs.open(f"{root}/{name}", "rb")  # noqa: E731
        exists = lambda name: fs.exists(f"{root}/{name}")  # noqa: E731
    else:
        opener = lambda name: open(Path(path) / name, "rb")  # noqa: E731
        exists = lambda name: (Path(path) / name).exists()  # noqa: E731
    out = {}
    for name in (*TABLES, "threshold_sweep"):
        if exists(f"{name}.parquet"):
            with opener(f"{name}.parquet") as fh:
                out[name] = pq.read_table(fh)
    with opener("run.json") as fh:
        out["run"] = json.load(fh)
    return out
