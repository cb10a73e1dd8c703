"""File helpers of the io layer: a whole-file atomic write and an exclusive lock file.

``atomic_write`` writes through a hidden temporary file in the target's own
folder, fsyncs it and ``os.replace``s it into place, so a reader sees the old
file or the new one, never half of one, and a killed writer loses nothing that
was there. ``locked`` holds an ``fcntl.flock`` on a lock file for the
duration of a read-modify-write (the history, the ledger, a leaderboard).
Every module that writes a whole file or takes such a lock uses these two.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from evalcore.io.report import folder_lock, leftover_path, remove_stale_leftovers


def atomic_write(path, data: bytes | pa.Table) -> None:
    """Write bytes or a Parquet table to ``path`` via a temporary file in the same folder + os.replace.

    The temporary file is named ``.NAME.tmp-PID@HOST-RAND`` (``report.leftover_path``), so
    one a killed writer left is recognised and removed by a later write in that folder.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with folder_lock(path.parent):  # a swap in progress in this folder must not see its parts cleaned
        remove_stale_leftovers(path.parent)
    tmp = leftover_path(path, "tmp")
    try:
        if isinstance(data, pa.Table):
            pq.write_table(data, tmp)
        else:
            tmp.write_bytes(data)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


@contextlib.contextmanager
def locked(lock_path):
    """Hold an exclusive ``fcntl.flock`` on the file ``lock_path`` (created, with its folder, if needed).

    The lock belongs to the open file: it is released when the block ends or
    the process dies, so a killed run never leaves the file locked.
    """
    lock_path = Path(lock_path)
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
