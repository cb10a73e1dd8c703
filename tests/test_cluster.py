"""A real cluster, started the way deploy/ starts it: `dask scheduler` + `dask worker` processes on 127.0.0.1.

`evalcore evaluate --scheduler tcp://...` against it must give exactly the
tables of a local run (`--workers 1`).
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import random_reid

from evalcore.io import dataset as ds

pytestmark = pytest.mark.cluster

BIN = Path(sys.executable).parent
CLI = [str(BIN / "evalcore")]
DASK = str(BIN / "dask")
REPORT_TABLES = ("per_query", "summary", "cmc")


def run(*args, timeout=180, env=None):
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env={**(env or os.environ), "EVALCORE_DEBUG": ""})


def assert_same_tables(a: Path, b: Path, names=REPORT_TABLES):
    for name in names:
        ta, tb = pq.read_table(a / f"{name}.parquet"), pq.read_table(b / f"{name}.parquet")
        assert ta.schema == tb.schema, name
        assert ta.equals(tb), f"{name}.parquet differs between {a} and {b}"


@dataclass
class DaskProcesses:
    """A scheduler and its workers, each its own process (group), plus a client for looking at them."""

    address: str
    scheduler: subprocess.Popen
    workers: list
    client: object
    logs: Path
    procs: list = field(default_factory=list)

    def worker_pids(self) -> dict:
        """{worker address: pid of the process that runs the tasks (the nanny's child)}."""
        return self.client.run(os.getpid)

    def log_tail(self, n: int = 4000) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-n:]}" for p in sorted(self.logs.glob("*.log")))


def _popen(args, log: Path, env=None) -> subprocess.Popen:
    with open(log, "wb") as fh:  # the child keeps its own descriptor
        return subprocess.Popen([str(a) for a in args], stdout=fh, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM the process group we started (the nanny takes its worker down), SIGKILL it if it lingers."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # also any child the nanny left behind in the group
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


@contextlib.contextmanager
def dask_processes(tmp_path: Path, n_workers: int = 2, memory_limit: str = "1GiB", env=None, timeout: float = 60):
    """`dask scheduler` and ``n_workers`` x `dask worker --nworkers 1 --nthreads 1` on 127.0.0.1,
    as deploy/ runs them."""
    from distributed import Client

    logs = tmp_path / "dask-logs"
    logs.mkdir(exist_ok=True)
    scheduler_file = tmp_path / "scheduler.json"
    procs, client = [], None
    try:
        # --idle-timeout / --death-timeout: should this process be killed before its finally, nothing lingers
        scheduler = _popen([DASK, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                            "--scheduler-file", scheduler_file, "--idle-timeout", "120s"], logs / "scheduler.log", env)
        procs.append(scheduler)
        deadline = time.monotonic() + timeout
        address = None
        while address is None:
            assert scheduler.poll() is None, f"dask scheduler exited:\n{(logs / 'scheduler.log').read_text()}"
            assert time.monotonic() < deadline, f"no scheduler file:\n{(logs / 'scheduler.log').read_text()}"
            with contextlib.suppress(FileNotFoundError, ValueError):
                address = json.loads(scheduler_file.read_text())["address"]
            time.sleep(0.1)
        assert address.startswith("tcp://127.0.0.1:"), address
        workers = []
        for i in range(n_workers):
            w = _popen([DASK, "worker", "--scheduler-file", scheduler_file, "--nworkers", "1", "--nthreads", "1",
                        "--memory-limit", memory_limit, "--host", "127.0.0.1", "--no-dashboard",
                        "--death-timeout", "60", "--local-directory", tmp_path / f"worker-{i}"],
                       logs / f"worker-{i}.log", env)
            procs.append(w)
            workers.append(w)
        client = Client(address, timeout="30s")
        client.wait_for_workers(n_workers, timeout=max(1.0, deadline - time.monotonic()))
        assert all(a.startswith("tcp://127.0.0.1:") for a in client.scheduler_info()["workers"])
        yield DaskProcesses(address, scheduler, workers, client, logs, procs)
    finally:
        if client is not None:
            with contextlib.suppress(Exception):
                client.close(timeout=5)
        for proc in reversed(procs):
            _stop(proc)


def test_evaluate_on_a_dask_cluster_of_processes_equals_a_local_run(tmp_path):
    rng = np.random.default_rng(7)
    path = tmp_path / "ds.zarr"
    ds.write_dataset(path, random_reid(rng, n_query=700, n_gallery=6000, dims=24), {"protocol": "reid"},
                     chunk_rows=128)
    local = run("evaluate", path, "--out", tmp_path / "local", "--workers", "1", "--quiet")
    assert local.returncode == 0, local.stderr
    with dask_processes(tmp_path) as cluster:
        remote = run("evaluate", path, "--out", tmp_path / "remote", "--scheduler", cluster.address,
                     "--chunk-rows", "256")
        assert remote.returncode == 0, remote.stderr + cluster.log_tail()
        assert "report written to" in remote.stdout
        # both workers got work: --chunk-rows 256 rounds up to whole query tiles, a task each
        assert remote.stderr.count("evalcore: chunk ") >= 2, remote.stderr
    assert_same_tables(tmp_path / "local", tmp_path / "remote")
    run_json = json.loads((tmp_path / "remote" / "run.json").read_text())
    assert run_json["scheduler"] == cluster.address
    assert run_json["workers"] == 2
    # nothing went wrong, and run.json says so
    assert (run_json["faults"], run_json["workers_lost"], run_json["retried_chunks"]) == ([], [], [])
    assert run_json["stall_timeout"] == 180 and "warning: worker" not in remote.stderr


def test_each_gallery_shard_is_read_by_the_worker_that_owns_it(tmp_path):
    """Sharded on two worker processes: every band and scan task of a shard ran on its owner, and the
    tables equal the unsharded in-process run."""
    import re

    from distributed import Client, LocalCluster, get_task_stream

    from evalcore.engine.cluster import PRELOAD
    from evalcore.engine.evaluate import Options, evaluate
    from evalcore.engine.plan import shard_owners

    rng = np.random.default_rng(11)
    path = tmp_path / "ds.zarr"
    ds.write_dataset(path, random_reid(rng, n_query=1100, n_gallery=20000, dims=16), {"protocol": "reid"},
                     chunk_rows=4096)
    options = Options(protocol="reid")
    here = evaluate(path, options)
    import dask

    # Dask's work stealing may move a pinned task to an idle worker (the pin is loose, so a lost owner's
    # work can move): that costs a shard read, never a number. Off here, so the placement is what is seen.
    with dask.config.set({"distributed.scheduler.work-stealing": False}), \
            LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                         preload=PRELOAD) as cluster, Client(cluster) as client:
        client.wait_for_workers(2)
        workers = sorted(client.scheduler_info()["workers"])
        with get_task_stream(client) as stream:
            sharded = evaluate(path, options, client=client, gallery_shards=4, chunk_rows=256)
        # the run's cached gallery is given back when it ends
        assert client.run(lambda: __import__("evalcore.engine.cache", fromlist=["x"]).current() is None) == \
            {w: True for w in workers}
    shards = [tuple(s) for s in sharded.info["gallery_shards"]]
    assert len(shards) == 4
    owner = dict(zip(shards, shard_owners(4, workers)))
    placed = 0
    for task in stream.data:
        m = re.match(r"^evalcore-(bands|scan)-\d+-\d+-(\d+)-(\d+)-", task["key"])
        if m:
            assert [task["worker"]] == owner[int(m.group(2)), int(m.group(3))], task["key"]
            placed += 1
    assert placed == 4 * (1 + len(sharded.info["chunks"]))  # per shard: one bands task (one batch), a scan per chunk
    for name in ("per_query", "summary", "cmc"):
        assert getattr(here, name).equals(getattr(sharded, name)), name
