"""Report folders (CONTRACT.md section 8): Parquet tables and run.json, whole or not at all.

Locally a report is written into a hidden sibling folder and renamed into
place; an earlier report is moved aside first and removed only once the new
one stands. On object storage (no rename) the files are written first and
``manifest.json`` last: a report folder without a manifest is incomplete and
readers refuse it. An overwrite there deletes the old manifest before
anything else and removes the old report's other objects before the new
manifest appears, so a complete report never contains files of an older one.
The manifest lists every file with its size; readers read only those files
and check the sizes.
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
from evalcore.io.dataset import is_url

MANIFEST = "manifest.json"
TABLES = ("per_query", "summary", "cmc")


def versions() -> dict:
    """Versions of what computed the report, for run.json (from package metadata: importing
    distributed only to read its version costs 0.4 s in a run that may not use it)."""
    from importlib.metadata import PackageNotFoundError, version

    def installed(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    import evalcore

    return {"evalcore": evalcore.__version__, "python": platform.python_version(),
            **{name: installed(name) for name in ("numpy", "dask", "distributed", "zarr", "pyarrow", "numba")}}


def _fs(path, storage_options: Mapping | None):
    import fsspec

    fs, root = fsspec.core.url_to_fs(str(path), **dict(storage_options or {}))
    return fs, root


def check_out(out, overwrite: bool, storage_options: Mapping | None = None) -> None:
    """Refuse an existing non-empty ``--out`` unless ``overwrite`` (checked before any work)."""
    if is_url(out):
        fs, root = _fs(out, storage_options)
        root = root.rstrip("/")
        fs.invalidate_cache(root)
        objects = _listing(fs, root)
        exists = bool(objects)
        if exists and overwrite:
            # a report is flat files; an overwrite removes whatever else is in the folder, so it must
            # not be a bucket or a folder holding other folders (a dataset, other reports)
            if "/" not in root:
                raise InputError(f"--out {out}: is a whole bucket; write the report to a folder in it")
            nested = [p for p in objects if "/" in p[len(root) + 1:]]
            if nested:
                raise InputError(f"--out {out}: holds {nested[0][len(root) + 1:]!r}, so it is not a report "
                                 "folder; --overwrite only replaces report folders, choose another --out")
    else:
        p = _local(out)
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
    out = _local(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        sizes = {}
        for name, content in _files(tables, run, extra):
            target = tmp / name
            if isinstance(content, pa.Table):
                pq.write_table(content, target)
            else:
                target.write_bytes(content)
            sizes[name] = target.stat().st_size
        (tmp / MANIFEST).write_bytes(_manifest_bytes(sizes))
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


def _table_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def _listing(fs, root: str) -> list[str]:
    """Every object under the folder ``root`` (not ``root`` itself, not siblings like ``root``-2)."""
    try:
        found = fs.find(root)
    except FileNotFoundError:
        return []
    return [p for p in found if p.startswith(root + "/")]


def _write_remote(out, tables, run, extra, storage_options) -> str:
    """Manifest-last writing for object storage, where nothing can be renamed into place.

    1. the old manifest goes first: from then on the old report is incomplete,
       so a crash anywhere below leaves a report that readers refuse;
    2. objects of the old report that the new one does not write (an old
       ``threshold_sweep.parquet``, any other file in the folder) are removed
       (``check_out`` refuses to overwrite a folder holding sub-folders);
    3. every file is written as one whole object (one PUT, or one multipart
       upload that only appears when complete);
    4. ``manifest.json`` last, listing the files and their sizes.
    """
    fs, root = _fs(out, storage_options)
    root = root.rstrip("/")
    manifest = f"{root}/{MANIFEST}"
    fs.invalidate_cache(root)
    if fs.exists(manifest):
        fs.rm_file(manifest)  # the old report stops counting before any file changes
        fs.invalidate_cache(root)
    files = [(name, _table_bytes(content) if isinstance(content, pa.Table) else bytes(content))
             for name, content in _files(tables, run, extra)]
    keep = {f"{root}/{name}" for name, _ in files}
    stale = [p for p in _listing(fs, root) if p not in keep and "/" not in p[len(root) + 1:]]
    if stale:
        fs.rm(stale)
    sizes = {}
    for name, data in files:
        fs.pipe_file(f"{root}/{name}", data)
        sizes[name] = len(data)
    fs.pipe_file(manifest, _manifest_bytes(sizes))
    fs.invalidate_cache(root)
    return str(out)


def _manifest_bytes(sizes: Mapping[str, int]) -> bytes:
    return _json_bytes({"files": list(sizes), "sizes": dict(sizes), "complete": True})


def _local(path) -> Path:
    text = str(path)
    return Path(text[len("file://"):] if text.startswith("file://") else text)


def _read_manifest(path, storage_options: Mapping | None):
    """(manifest dict or None, reader of a file's bytes) for a report folder."""
    if is_url(path):
        fs, root = _fs(path, storage_options)
        root = root.rstrip("/")
        fs.invalidate_cache(root)  # a listing cached before the manifest appeared must not hide it

        def read(name: str) -> bytes:
            return fs.cat_file(f"{root}/{name}")
    else:
        folder = _local(path)

        def read(name: str) -> bytes:
            return (folder / name).read_bytes()
    try:
        manifest = json.loads(read(MANIFEST))
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None, read
    except ValueError:
        return {}, read
    return manifest, read


def is_complete(path, storage_options: Mapping | None = None) -> bool:
    """True when the report folder has its manifest (written last)."""
    manifest, _ = _read_manifest(path, storage_options)
    return manifest is not None


def read_report(path, storage_options: Mapping | None = None) -> dict:
    """The tables and run.json of a complete report; InputError for an incomplete one.

    Only the files the manifest lists are read, and each must have the size the
    manifest recorded: a report being overwritten (manifest gone, or files no
    longer those the manifest describes) is refused, never mixed.
    """
    manifest, read = _read_manifest(path, storage_options)
    if manifest is None:
        raise InputError(f"report {path}: incomplete or missing (no {MANIFEST}; it was not finished)")
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, list) or "run.json" not in files or not manifest.get("complete"):
        raise InputError(f"report {path}: {MANIFEST} is not a valid manifest")
    sizes = manifest.get("sizes") or {}
    out = {}
    for name in files:
        if not (name == "run.json" or name.endswith(".parquet")):
            continue
        try:
            data = read(name)
        except FileNotFoundError:
            raise InputError(f"report {path}: {name} is listed in {MANIFEST} but missing "
                             "(being overwritten, or damaged)") from None
        if name in sizes and len(data) != sizes[name]:
            raise InputError(f"report {path}: {name} has {len(data)} bytes, {MANIFEST} says {sizes[name]} "
                             "(being overwritten, or damaged)")
        if name == "run.json":
            out["run"] = json.loads(data)
        else:
            out[name[:-len(".parquet")]] = pq.read_table(pa.BufferReader(data))
    return out
