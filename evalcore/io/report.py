"""Report folders (README, Metrics: the report folder): Parquet tables and run.json, whole or not at all.

Locally a report is written into a hidden sibling folder and swapped into
place in one step (``swap_into_place``: Linux ``renameat2(RENAME_EXCHANGE)``),
so ``--out`` always holds either the earlier report or the new one; the earlier
one is removed only once the new one stands. On object storage (no rename) the files are written first and
``manifest.json`` last: a report folder without a manifest is incomplete and
readers refuse it. An overwrite there deletes the old manifest before
anything else and removes the old report's other objects before the new
manifest appears, so a complete report never contains files of an older one.
The manifest lists every file with its size; readers read only those files
and check the sizes.

``--overwrite`` replaces only what evalcore wrote: an empty folder, or a report
folder whose ``manifest.json`` is evalcore's and lists every file in it.
The local swap holds an ``flock`` on the parent folder, so two runs replacing
one report at once take turns. The hidden
siblings a run makes carry its pid and host (``.NAME.tmp-PID@HOST-RAND``,
``.NAME.old-...``, ``.NAME.score-...``); a later run removes those whose
owner is dead (or that are older than a day), and puts back in place an
earlier report that a kill left moved aside (only the fallback swap, where the
exchange is unavailable, moves it aside).
"""
from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import hashlib
import json
import os
import platform
import re
import shutil
import socket
import time
import uuid
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

import evalcore
from evalcore.errors import InputError, foreign_reason, mention
from evalcore.io.dataset import is_url, local_path

MANIFEST = "manifest.json"
TABLES = ("per_query", "summary", "cmc")
#: the keys of an evalcore manifest (see ``_manifest_bytes``)
MANIFEST_KEYS = frozenset({"files", "sizes", "complete"})
#: every file a report folder may hold (an object-store overwrite killed midway leaves some of them, no manifest)
REPORT_FILES = frozenset({f"{t}.parquet" for t in (*TABLES, "threshold_sweep")} | {"run.json", "report.html"})
#: the record file of a report folder (run.json) or of a comparison folder (``evalcore compare``)
RECORDS = ("run.json", "comparison.json")
#: every file a comparison folder may hold
COMPARISON_FILES = frozenset({"comparison.parquet", "per_query_diff.parquet", "compare.html", "comparison.json"})
#: hidden siblings evalcore makes while writing NAME: ``.NAME.KIND-PID@HOST-RAND``; the older
#: unnamed forms (``.NAME.tmp-<8 or 12 hex>``, ``.NAME.old-<8 hex>``, ``.NAME.score-<mkdtemp 8>``) count by age only
LEFTOVER = re.compile(r"^\.(?P<name>.+)\.(?P<kind>tmp|old|score)-(?:(?P<pid>\d{1,10})@(?P<host>[0-9a-f]{8})-"
                      r"(?P<rand>[0-9a-f]{8})|(?P<legacy>[0-9a-f]{8}|[0-9a-f]{12}|[0-9a-z_]{8}))$")
#: a leftover whose owner cannot be asked (another host, an older evalcore) is stale after this long
STALE_SECONDS = 24 * 3600
#: a manifest lists a few file names and sizes: a longer one is not evalcore's, and is not parsed
MAX_MANIFEST_BYTES = 1 << 20
#: run.json records options, counts, warnings and per-chunk timings: megabytes at most; reading is refused past this
MAX_RECORD_BYTES = 64 << 20


def versions() -> dict:
    """Versions of what computed the report, for run.json (from package metadata: importing
    distributed only to read its version costs 0.4 s in a run that may not use it)."""
    def installed(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None


    return {"evalcore": evalcore.__version__, "python": platform.python_version(),
            **{name: installed(name) for name in ("numpy", "dask", "distributed", "zarr", "pyarrow", "numba")}}


def _fs(path, storage_options: Mapping | None):
    fs, root = fsspec.core.url_to_fs(str(path), **dict(storage_options or {}))
    return fs, root


def check_out(out, overwrite: bool, storage_options: Mapping | None = None) -> None:
    """Refuse ``--out`` unless it is new, empty, or (with ``overwrite``) a report folder evalcore wrote.

    Checked before any work, and again under the lock just before the swap. A
    new local folder must be creatable: its nearest existing parent is a folder
    we can write in.
    """
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
                raise InputError(mention("--out") + f" {out}: is a whole bucket; write the report to a folder in it")
            nested = [p for p in objects if "/" in p[len(root) + 1:]]
            if nested:
                raise InputError(mention("--out") + f" {out}: holds {nested[0][len(root) + 1:]!r}, so it is not a "
                                 "report folder; " + mention("--overwrite") + " only replaces report folders, "
                                 "choose another " + mention("--out"))
            names = [p[len(root) + 1:] for p in objects]
            try:
                manifest = json.loads(fs.cat_file(f"{root}/{MANIFEST}")) if MANIFEST in names else None
            except ValueError:
                manifest = {}
            _refuse_unless_ours(out, names, manifest, remote=True)
        if exists and not overwrite:
            raise InputError(mention("--out") + f" {out}: exists and is not empty (pass " + mention("--overwrite")
                             + " to replace it)")
    else:
        # under the parent's lock: a concurrent run's swap must not move the folder while we look at it
        with lock_if_folder(_local(out).parent):
            check_local_out(out, overwrite)


def local_out_entries(out, overwrite: bool, option: str = "--out") -> list[str]:
    """The names in the local output folder ``out`` (none when it is new or empty), after the checks
    every output folder shares: not a file, creatable, and empty unless ``overwrite``.

    Whether a non-empty folder is one evalcore wrote is the caller's check:
    each kind of output (report, dataset, score, demo) knows its own entries.
    """
    p = _local(out)
    if os.path.lexists(p) and not p.is_dir():
        raise InputError(f"{option} {out}: exists and is not a folder")
    check_creatable(option, out)
    names = sorted(e.name for e in p.iterdir()) if p.is_dir() else []
    if names and not overwrite:
        raise InputError(mention(option) + f" {out}: exists and is not empty (pass " + mention("--overwrite")
                         + " to replace it)")
    return names


def check_local_out(out, overwrite: bool) -> None:
    """``check_out`` of a local folder; the caller holds ``folder_lock`` on its parent (if that exists)."""
    names = local_out_entries(out, overwrite)
    if names:
        manifest, _ = _read_manifest(_local(out), None)
        _refuse_unless_ours(out, names, manifest)


def is_our_manifest(manifest) -> bool:
    """An evalcore manifest: exactly its keys, ``complete``, a list of file names with run.json among them."""
    return (isinstance(manifest, dict) and set(manifest) == MANIFEST_KEYS and manifest["complete"] is True
            and isinstance(manifest["files"], list) and all(isinstance(f, str) for f in manifest["files"])
            and any(r in manifest["files"] for r in RECORDS) and isinstance(manifest["sizes"], dict))


def foreign_entries(names, manifest, remote: bool = False) -> list[str]:
    """Entries of a folder that are not part of the report evalcore's ``manifest`` describes.

    Without a manifest nothing is ours locally (a local report appears whole,
    manifest included); on object storage report file names are, since an
    overwrite killed after removing the old manifest leaves those.
    """
    if is_our_manifest(manifest):
        ours = {MANIFEST, *manifest["files"]}
    else:
        ours = set(REPORT_FILES | COMPARISON_FILES) if remote and manifest is None else set()
    return sorted(n for n in names if n not in ours)


def _refuse_unless_ours(out, names, manifest, remote: bool = False) -> None:
    foreign = foreign_entries(names, manifest, remote)
    if foreign:
        what = "has no evalcore manifest.json" if manifest is None else (
            "has a manifest.json evalcore did not write" if not is_our_manifest(manifest)
            else "is not part of its report")
        entries = f"{len(foreign)} entr{'y' if len(foreign) == 1 else 'ies'}"
        raise InputError(mention("--out") + f" {out}: holds {foreign[0]!r} ({entries} evalcore did not write; the "
                         f"folder {what}); " + mention("--overwrite") + " only replaces a report folder evalcore "
                         "wrote, or an empty folder: choose another " + mention("--out"))


def check_creatable(option: str, path) -> None:
    """``path`` can be created (or replaced): its nearest existing parent is a folder we can write in.

    Probed by making and removing a hidden folder there (permission bits do not
    tell for root or for /proc), so nothing is left behind.
    """
    path = _local(path).absolute()
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        if parent.is_symlink():  # a dangling link: mkdir would fail later
            break
        parent = parent.parent
    if not parent.is_dir():
        raise InputError(mention(option) + f" {path}: {parent} is {'a file' if parent.exists() else 'missing'}, "
                         "not a folder")
    probe = leftover_path(parent / path.name, "tmp")
    try:
        probe.mkdir()
    except OSError as exc:
        raise InputError(mention(option) + f" {path}: cannot write in {parent} "
                         f"({exc.strerror or foreign_reason(exc)})") from None
    probe.rmdir()


def _real(path) -> str:
    return os.path.realpath(_local(path)) if not is_url(path) else str(path).rstrip("/")


def check_apart(option: str, out, inputs: Mapping[str, object], plain_folders_may_hold_out: bool = False) -> None:
    """``out`` is neither one of ``inputs`` ({what: path}) nor inside one, nor holds one (replacing it would
    delete the input).

    ``plain_folders_may_hold_out``: an input that is a plain folder (not a Zarr
    group), read for named files only, may hold the output (import faiss-json DIR --out DIR/ds.zarr).
    """
    o = _real(out)
    for what, path in inputs.items():
        if path is None:
            continue
        i = _real(path)
        plain = plain_folders_may_hold_out and not is_url(path) and os.path.isdir(i) and not any(
            os.path.exists(os.path.join(i, m)) for m in ("zarr.json", ".zgroup", ".zarray"))
        if o == i or (o.startswith(i.rstrip("/") + "/") and not plain):
            raise InputError(mention(option) + f" {out}: is {'' if o == i else 'inside '}the {what} {path}; "
                             "write the output elsewhere")
        if i.startswith(o.rstrip("/") + "/"):
            raise InputError(mention(option) + f" {out}: holds the {what} {path}; write the output elsewhere")


def check_file_target(option: str, path, inputs: Mapping[str, object]) -> None:
    """A file the command writes (``--latex FILE``) is checked before any work: a local path, not a folder,
    neither one of ``inputs`` ({what: path}: the runs, the output folder) nor inside one nor holding one, and
    creatable. Replacing an input's file would destroy it; a file inside a report or the comparison folder
    would be a file evalcore's manifest does not list (a later --overwrite refuses the folder)."""
    if is_url(path):
        raise InputError(f"{option} {path}: must be a local file path, not a URL")
    if os.path.isdir(_local(path)):
        raise InputError(f"{option} {path}: is a folder; give the name of a file to write")
    check_apart(option, path, inputs)
    check_creatable(option, path)


# --------------------------------------------------------------------------- leftovers and the local swap


def _host_tag() -> str:
    return hashlib.sha1(socket.gethostname().encode()).hexdigest()[:8]


def leftover_path(target, kind: str) -> Path:
    """The hidden sibling ``.NAME.KIND-PID@HOST-RAND`` of ``target`` this process writes (kind tmp, old, score)."""
    target = Path(target)
    return target.parent / f".{target.name}.{kind}-{os.getpid()}@{_host_tag()}-{uuid.uuid4().hex[:8]}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def is_stale(path, now: float | None = None) -> bool:
    """A leftover of evalcore (by name) whose writer is gone: its pid on this host is dead, or it is a day old."""
    path = Path(path)
    m = LEFTOVER.match(path.name)
    if not m:
        return False
    if m["pid"] and m["host"] == _host_tag() and int(m["pid"]) != os.getpid():
        if not _alive(int(m["pid"])):
            return True
    try:
        age = (time.time() if now is None else now) - path.lstat().st_mtime
    except FileNotFoundError:
        return False
    return m["pid"] != str(os.getpid()) and age > STALE_SECONDS


def remove_stale_leftovers(folder) -> list[str]:
    """Remove the stale leftovers in ``folder``; returns their names.

    A stale ``.NAME.old-*`` whose NAME is missing is the earlier output a kill
    left moved aside in the middle of a swap: it is renamed back, not removed.
    Call it holding ``folder_lock(folder)``.
    """
    try:
        entries = list(Path(folder).iterdir())
    except OSError:
        return []
    done = []
    for p in entries:
        try:
            if not is_stale(p):
                continue
            m = LEFTOVER.match(p.name)
            assert m is not None  # is_stale(p) matched the name
            target = p.parent / m["name"]
            if m["kind"] == "old" and not os.path.lexists(target):
                os.replace(p, target)
            elif p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink()
            done.append(p.name)
        except OSError:
            continue  # another run got there first
    return done


def lock_if_folder(folder):
    """``folder_lock(folder)`` when the folder exists (nothing to race with otherwise)."""
    return folder_lock(folder) if Path(folder).is_dir() else contextlib.nullcontext()


@contextlib.contextmanager
def folder_lock(folder):
    """An exclusive ``fcntl.flock`` on the folder itself (nothing is created; released when the process dies)."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


#: ``renameat2`` flag: exchange two existing paths atomically (Linux 3.15+; ext4, xfs, btrfs, tmpfs, ...)
RENAME_EXCHANGE = 2
#: ``renameat2``'s "relative to the current directory"
AT_FDCWD = -100
#: errors meaning "this kernel, libc or filesystem cannot exchange": the swap falls back to two renames
NO_EXCHANGE = frozenset({errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP})


def _renameat2():
    """libc's ``renameat2``, or None where the C library has none (not Linux, old glibc)."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_RENAMEAT2 = _renameat2()


def exchange(a, b) -> bool:
    """Swap the two existing paths ``a`` and ``b`` in one atomic step; False where that is not available.

    ``renameat2(RENAME_EXCHANGE)``: no moment exists where either name is
    missing. False (nothing changed) where the C library has no
    ``renameat2`` or the kernel or filesystem refuses the flag (EINVAL,
    ENOSYS, EOPNOTSUPP: NFS, some FUSE and overlay filesystems); any other
    failure is an OSError.
    """
    if _RENAMEAT2 is None:
        return False
    if _RENAMEAT2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in NO_EXCHANGE:
        return False
    raise OSError(code, os.strerror(code), os.fspath(a), None, os.fspath(b))


def _remove_replaced(path: Path) -> None:
    """Remove the earlier output a swap put at ``path``: a folder's tree, or a link itself (never its target)."""
    if path.is_symlink() or not path.is_dir():
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    else:
        shutil.rmtree(path, ignore_errors=True)  # what is left stays a named leftover, removed by a later run


def swap_into_place(tmp, out, check=None) -> str:
    """Put the finished folder ``tmp`` at ``out``, replacing an earlier ``out``; returns how.

    The one helper that puts folders in place: reports (a score's organizer
    report too), imported datasets and the demo's dataset. Holds ``folder_lock`` on the parent so concurrent swaps take
    turns (without it, a second run's rename meets the first run's new folder:
    "Directory not empty"). Under the lock: stale leftovers go, then
    ``check()`` (the --out rules again: what is there now may differ from what
    was checked before the work). Then:

    * ``out`` absent: one rename (``"rename"``);
    * ``out`` present: ``exchange(tmp, out)`` swaps the two in one atomic step,
      so ``out`` is never missing, not even for a process killed in the middle;
      ``tmp`` then holds the earlier output and is removed (``"exchange"``); a
      kill before that leaves a ``.NAME.tmp-*`` leftover that a later run
      removes;
    * where the exchange is not available (see ``exchange``): the earlier
      ``out`` is renamed aside to ``.NAME.old-*``, then ``tmp`` to ``out``
      (``"two renames"``). A kill between the two leaves no ``out`` for that
      moment; the next evalcore run writing in that folder renames the
      ``.old-*`` back (``remove_stale_leftovers``).
    """
    tmp, out = Path(tmp), Path(out)
    replaced = None
    with folder_lock(out.parent):
        remove_stale_leftovers(out.parent)
        if check is not None:
            check()
        if not os.path.lexists(out):
            os.replace(tmp, out)
            return "rename"
        if exchange(tmp, out):
            how, replaced = "exchange", tmp
        else:
            how, replaced = "two renames", leftover_path(out, "old")
            os.replace(out, replaced)
            try:
                os.replace(tmp, out)
            except BaseException:
                os.replace(replaced, out)
                raise
    _remove_replaced(replaced)
    return how


def _json_bytes(value) -> bytes:
    return (json.dumps(value, indent=2, sort_keys=False, default=str) + "\n").encode()


def _files(tables: Mapping[str, pa.Table], run: Mapping, extra: Mapping[str, bytes | str] | None,
           record: str = "run.json"):
    """(name, bytes or table) in writing order; the record (run.json) after the tables."""
    for name, table in tables.items():
        yield f"{name}.parquet", table
    yield record, _json_bytes(dict(run))
    for name, content in (extra or {}).items():
        yield name, content.encode() if isinstance(content, str) else content


def write_report(out, tables: Mapping[str, pa.Table], run: Mapping, *, extra: Mapping[str, bytes | str] | None = None,
                 overwrite: bool = False, storage_options: Mapping | None = None, record: str = "run.json") -> str:
    """Write a report folder atomically (locally) or manifest-last (object storage); ``record`` names the
    JSON record (``comparison.json`` for a comparison folder)."""
    check_out(out, overwrite, storage_options)
    if is_url(out):
        return _write_remote(out, tables, run, extra, storage_options, record)
    out = _local(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = leftover_path(out, "tmp")
    tmp.mkdir()
    try:
        sizes = {}
        for name, content in _files(tables, run, extra, record):
            target = tmp / name
            if isinstance(content, pa.Table):
                pq.write_table(content, target)
            else:
                target.write_bytes(content)
            sizes[name] = target.stat().st_size
        (tmp / MANIFEST).write_bytes(_manifest_bytes(sizes))
        swap_into_place(tmp, out, lambda: check_local_out(out, overwrite))
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


def _write_remote(out, tables, run, extra, storage_options, record: str = "run.json") -> str:
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
             for name, content in _files(tables, run, extra, record)]
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
    return Path(local_path(path))


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
        data = read(MANIFEST)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None, read
    if len(data) > MAX_MANIFEST_BYTES:  # a list of a few file names: more is not a manifest evalcore wrote
        return {}, read
    try:
        manifest = json.loads(data)
    except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
        return {}, read
    return manifest, read


def is_complete(path, storage_options: Mapping | None = None) -> bool:
    """True when the report folder has its manifest (written last)."""
    manifest, _ = _read_manifest(path, storage_options)
    return manifest is not None


def read_report(path, storage_options: Mapping | None = None, require: tuple[str, ...] = ()) -> dict:
    """The tables and run.json of a complete report; InputError for an incomplete one.

    Only the files the manifest lists are read, and each must have the size the
    manifest recorded: a report being overwritten (manifest gone, or files no
    longer those the manifest describes) is refused, never mixed. Every file is
    checked before it is used (a report folder is input like any other): the
    manifest names plain files of the folder with their sizes, run.json is a
    JSON object of at most ``MAX_RECORD_BYTES``, each table a Parquet file; a
    file that is not is an InputError naming it. ``require``: tables
    (``"summary"``) the caller needs; a report without one is an InputError.
    """
    manifest, read = _read_manifest(path, storage_options)
    if manifest is None:
        raise InputError(f"report {path}: incomplete or missing (no {MANIFEST}; it was not finished)")
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if isinstance(files, list) and "comparison.json" in files and "run.json" not in files:
        raise InputError(f"report {path}: is a comparison folder (evalcore compare), not an evaluation report")
    if not isinstance(files, list) or "run.json" not in files or not manifest.get("complete"):
        raise InputError(f"report {path}: {MANIFEST} is not a valid manifest")
    sizes = manifest.get("sizes") or {}
    _check_listing(path, files, sizes)
    out = {}
    for name in files:
        if not (name == "run.json" or name.endswith(".parquet")):
            continue
        try:
            # a local file longer than its listed size, or a run.json past the bound, is not read at all
            size = (_local(path) / name).stat().st_size if not is_url(path) else sizes.get(name, 0)
            if name in sizes:
                _check_size(path, name, size, sizes[name])
            if name == "run.json" and size > MAX_RECORD_BYTES:
                raise InputError(f"report {path}: run.json has {size} bytes, more than the {MAX_RECORD_BYTES} "
                                 "a run record can be")
            data = read(name)
        except FileNotFoundError:
            raise InputError(f"report {path}: {name} is listed in {MANIFEST} but missing "
                             "(being overwritten, or damaged)") from None
        except OSError as exc:  # a folder where the file belongs, no permission
            raise InputError(f"report {path}: {name} cannot be read ({exc.strerror or exc})") from None
        if name in sizes:
            _check_size(path, name, len(data), sizes[name])
        if name == "run.json":
            out["run"] = parse_record(path, name, data)
        else:
            out[name[:-len(".parquet")]] = _parquet(path, name, data)
    missing = [t for t in require if t not in out]
    if missing:
        raise InputError(f"report {path}: has no {missing[0]}.parquet ({MANIFEST} does not list it)")
    return out


def _check_size(path, name: str, size: int, listed: int) -> None:
    if size != listed:
        raise InputError(f"report {path}: {name} has {size} bytes, {MANIFEST} says {listed} "
                         "(being overwritten, or damaged)")


def _check_listing(path, files: list, sizes) -> None:
    """The manifest's ``files`` are plain names in the folder (never a path out of it), ``sizes`` their sizes."""
    for name in files:
        if not isinstance(name, str) or not name or name in (".", "..") or "/" in name or "\\" in name \
                or "\0" in name:
            raise InputError(f"report {path}: {MANIFEST} lists {name!r}, which is not a file name in the folder; "
                             "it is not a manifest evalcore wrote")
    if not isinstance(sizes, dict) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                                              for v in sizes.values()):
        raise InputError(f"report {path}: {MANIFEST}'s sizes are not a byte count per file; it is not a manifest "
                         "evalcore wrote")


def parse_record(path, name: str, data: bytes) -> dict:
    """A report's JSON record (run.json) as a dict, or an InputError naming it: not JSON, nested past the
    parser's depth, or not an object."""
    try:
        record = json.loads(data)
    except RecursionError:
        raise InputError(f"report {path}: {name} is nested too deep to be a run record") from None
    except ValueError as exc:  # JSONDecodeError, and bytes that are not UTF-8
        raise InputError(f"report {path}: {name} is not JSON ({foreign_reason(exc)}); the report is damaged") from None
    if not isinstance(record, dict):
        raise InputError(f"report {path}: {name} holds a JSON {type(record).__name__}, not an object; "
                         "the report is damaged")
    return record


def _parquet(path, name: str, data: bytes) -> pa.Table:
    try:
        return pq.read_table(pa.BufferReader(data))
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise InputError(f"report {path}: {name} is not a readable Parquet file ({foreign_reason(exc)}); "
                         "the report is damaged") from None
