"""Starting or joining a Dask cluster for a job."""
from __future__ import annotations

import contextlib
import logging
import os
import re

from evalcore.errors import InputError

ADDRESS = re.compile(r"^(tcp|tls|ucx|inproc)://[^\s:/]+(:\d{1,5})?$")
CONNECT_TIMEOUT = "15s"


class ClusterUnreachable(RuntimeError):
    """The scheduler given by --scheduler did not answer (exit status 1)."""


def check_address(address: str) -> str:
    """A well-formed scheduler address, else an InputError naming --scheduler."""
    if not ADDRESS.match(address or ""):
        raise InputError(f"--scheduler: {address!r} is not an address like tcp://HOST:PORT")
    return address


def default_workers() -> int:
    return max(1, min(os.cpu_count() or 1, 8))


@contextlib.contextmanager
def dask_client(scheduler: str | None = None, workers: int | None = None, memory_limit: str | None = "auto"):
    """A ``distributed.Client``: joined to ``scheduler``, or on a new LocalCluster of worker processes.

    Local workers get one thread each; distributed's nanny already sets
    OMP/MKL/OPENBLAS_NUM_THREADS=1 in them, so workers x threads never
    oversubscribes the cores.
    """
    from distributed import Client, LocalCluster

    if scheduler:
        check_address(scheduler)
        try:
            client = Client(scheduler, timeout=CONNECT_TIMEOUT)
        except (OSError, TimeoutError) as exc:
            raise ClusterUnreachable(f"--scheduler {scheduler}: no Dask scheduler answered within "
                                     f"{CONNECT_TIMEOUT} ({exc.__class__.__name__})") from None
        try:
            yield client
        finally:
            client.close()
        return
    n = workers or default_workers()
    if n < 1:
        raise InputError(f"--workers: {n} must be at least 1")
    with LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                      memory_limit=memory_limit, silence_logs=logging.ERROR) as cluster, \
            Client(cluster) as client:
        yield client
