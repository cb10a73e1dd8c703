"""Faults: a worker killed or frozen mid-run, a task that hangs, the scheduler lost mid-run or not there at all,
a worker out of memory."""
from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import subprocess
import threading
import time

import numpy as np
import psutil
import pytest
from conftest import random_reid
from test_cluster import CLI, assert_same_tables, dask_processes, run

from evalcore.engine.faults import TEST_STALL_ENV
from evalcore.io import dataset as ds

# one test process runs them all, one after another (pyproject: --dist loadgroup): their kills and stalls are
# timed against one cluster's load, not two of these at once, and they share one cluster
pytestmark = [pytest.mark.cluster, pytest.mark.xdist_group("faults")]


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """4,000 queries x 60,000 gallery x 64 dims: 16 tasks of 256 queries, a few seconds on two workers.

    Clustered identities (not pure noise, where nearly every score is a near tie) keep it that short.
    """
    path = tmp_path_factory.mktemp("faults") / "big.zarr"
    ds.write_dataset(path, random_reid(np.random.default_rng(3), n_query=4000, n_gallery=60000, dims=64,
                                       n_ids=1500), {"protocol": "reid"}, chunk_rows=8192)
    return path


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """`dask scheduler` + 2 x `dask worker` processes, shared by the tests below (the last one kills it)."""
    with dask_processes(tmp_path_factory.mktemp("cluster")) as c:
        yield c


def _lines(stream, out: queue.Queue) -> None:
    for line in stream:
        out.put(line)
    out.put(None)


def run_with_fault(args, fault, timeout: float = 120, env: dict | None = None):
    """Run the CLI, reading its progress lines as they come; call ``fault(done, total, proc)`` after the first
    chunk (``proc``: the CLI's Popen).

    Returns (exit status, stdout, stderr, what ``fault`` returned).
    """
    proc = subprocess.Popen([*CLI, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "EVALCORE_DEBUG": "", **(env or {})})
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_lines, args=(proc.stderr, lines), daemon=True).start()
    stderr, result, at = [], None, None
    try:
        deadline = time.monotonic() + timeout
        while (line := lines.get(timeout=max(0.1, deadline - time.monotonic()))) is not None:
            stderr.append(line)
            m = re.match(r"evalcore: chunk (\d+)/(\d+) done", line)
            if m and at is None:
                at = int(m.group(1)), int(m.group(2))
                result = fault(*at, proc)
        stdout = proc.stdout.read()
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert at is not None, "".join(stderr)
    assert at[0] < at[1], f"the run had finished before the fault ({at[0]}/{at[1]} chunks)"
    return rc, stdout, "".join(stderr), result


@pytest.mark.parametrize("sharding", [[], ["--gallery-shards", "4"]], ids=["whole-gallery", "sharded"])
def test_a_worker_killed_mid_run_changes_nothing(cluster, big, tmp_path, sharding):
    """Sharded, the killed worker owned shards: its tasks move to the other worker (a restarted one has a new
    address, so no owner is left for them) and the tables are the same."""
    clean = run("evaluate", big, "--out", tmp_path / "clean", "--scheduler", cluster.address, "--chunk-rows", "256",
                "--quiet", *sharding)
    assert clean.returncode == 0, clean.stderr + cluster.log_tail()

    def kill_a_busy_worker(done, total, proc):
        # the worker that is running a task right now, by the pid of its process (the nanny's child); asked
        # again for a few seconds: between a finished task and the next one handed out (sharded: the next
        # shard's bands) the scheduler may list none, more often on a loaded machine
        deadline = time.monotonic() + 10
        while not (busy := [w for w, keys in cluster.client.processing().items() if keys]) \
                and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        assert busy, "no worker is busy: the run is too short to kill a worker in its middle"
        pid = cluster.worker_pids()[busy[0]]
        os.kill(pid, signal.SIGKILL)
        return pid, busy[0]

    rc, stdout, stderr, (killed, address) = run_with_fault(
        ["evaluate", big, "--out", tmp_path / "faulty", "--scheduler", cluster.address, "--chunk-rows", "256",
         *sharding], kill_a_busy_worker)
    assert rc == 0, stderr + cluster.log_tail()
    assert "report written to" in stdout
    # the nanny replaced the killed process: two workers again, the killed pid not among them
    cluster.client.wait_for_workers(2, timeout=30)
    assert killed not in cluster.worker_pids().values()
    assert_same_tables(tmp_path / "clean", tmp_path / "faulty")
    # ... and the run says so: run.json records the lost worker and the chunks that ran again, stderr warns
    record = json.loads((tmp_path / "faulty" / "run.json").read_text())
    assert record["workers_lost"] == [address], record["faults"]
    (fault,) = record["faults"]
    assert fault["kind"] == "lost" and fault["worker"] == address and fault["chunks"], fault
    assert record["retried_chunks"] == fault["chunks"]
    first = fault["chunks"][0]
    assert f"evalcore: warning: worker {address} was lost (died or lost its connection); queries " \
           f"{first[0]}-{first[1] - 1}" in stderr, stderr
    assert any(address in w and "ran again on another worker" in w for w in record["warnings"]), record["warnings"]


@pytest.fixture(scope="module")
def reranked(tmp_path_factory):
    """1,500 queries x 20,000 gallery x 64 dims: small enough that a re-ranked run keeps the search's query x
    gallery estimates on the worker that computed them."""
    path = tmp_path_factory.mktemp("faults-rerank") / "rr.zarr"
    ds.write_dataset(path, random_reid(np.random.default_rng(4), n_query=1500, n_gallery=20000, dims=64,
                                       n_ids=700), {"protocol": "reid"}, chunk_rows=4096)
    return path


def test_a_worker_killed_while_re_ranking_changes_nothing(cluster, reranked, tmp_path):
    """Re-ranked on the cluster, the chunks count from estimates kept on the worker that computed them. Kill
    that worker mid-run (one chunk held back there, so it is busy): what it held is computed again from the
    run's rows, which stay on the cluster for the run, and the tables are the same."""
    args = ["--scheduler", cluster.address, "--chunk-rows", "256", "--rerank", "10,4,0.3"]
    clean = run("evaluate", reranked, "--out", tmp_path / "clean", *args, "--quiet")
    assert clean.returncode == 0, clean.stderr + cluster.log_tail()

    def kill_the_holder(done, total, proc):
        holders = sorted({w for key, where in cluster.client.who_has().items() if "rerank-estimates" in key
                          for w in where})
        assert holders, "no worker holds kept estimates"
        pid = cluster.worker_pids()[holders[0]]
        os.kill(pid, signal.SIGKILL)
        return pid, holders[0]

    rc, stdout, stderr, (killed, address) = run_with_fault(
        ["evaluate", reranked, "--out", tmp_path / "faulty", *args], kill_the_holder,
        env={TEST_STALL_ENV: f"*:3:{tmp_path / 'held-back-once'}"})
    assert rc == 0, stderr + cluster.log_tail()
    cluster.client.wait_for_workers(2, timeout=30)
    assert killed not in cluster.worker_pids().values()
    assert_same_tables(tmp_path / "clean", tmp_path / "faulty")
    record = json.loads((tmp_path / "faulty" / "run.json").read_text())
    assert record["workers_lost"] == [address], record["faults"]
    # the clean run's chunks read kept blocks; after the holder died, the chunks that ran again could not
    assert json.loads((tmp_path / "clean" / "run.json").read_text())["rerank_chunks_from_estimates"] >= 1
    assert record["rerank_chunks_from_estimates"] < len(record["chunks"])


# --------------------------------------------------------------------------- a worker that stops making progress


@pytest.fixture(scope="module")
def clean(big, tmp_path_factory):
    """The report of an undisturbed run (in this process: the numbers do not depend on where it ran)."""
    out = tmp_path_factory.mktemp("clean") / "report"
    result = run("evaluate", big, "--out", out, "--quiet")
    assert result.returncode == 0, result.stderr
    return out


def local_workers(cli_pid: int) -> list:
    """The worker processes of the CLI's local cluster (multiprocessing children; not its resource tracker)."""
    return [c for c in psutil.Process(cli_pid).children(recursive=True) if "spawn_main" in " ".join(c.cmdline())]


def addresses_of(worker) -> set[str]:
    """tcp://127.0.0.1:PORT where a worker process listens: its address, and its HTTP server's."""
    connections = getattr(worker, "net_connections", None) or worker.connections
    return {f"tcp://127.0.0.1:{c.laddr.port}" for c in connections("tcp") if c.status == psutil.CONN_LISTEN}


@contextlib.contextmanager
def freezing():
    """freeze(done, total, proc) -> (addresses, when): SIGSTOP a worker of the CLI's local cluster; killed after."""
    frozen = []

    def freeze(done, total, proc):
        worker = local_workers(proc.pid)[0]
        addresses = addresses_of(worker)
        worker.suspend()  # SIGSTOP: still connected, silent, holding its tasks
        frozen.append(worker)
        return addresses, time.monotonic()

    try:
        yield freeze
    finally:
        for worker in frozen:
            with contextlib.suppress(psutil.NoSuchProcess):
                worker.kill()


#: every chunk sleeps 0.2 s first, so the run is still going when a worker freezes after the first one
SLOW_CHUNKS = {TEST_STALL_ENV: "*:0.2"}


def test_a_frozen_worker_is_restarted_and_the_run_completes_with_the_same_tables(big, clean, tmp_path):
    out = tmp_path / "out"
    started = time.monotonic()
    with freezing() as freeze:
        rc, stdout, stderr, (addresses, _) = run_with_fault(
            ["evaluate", big, "--out", out, "--workers", "2", "--chunk-rows", "256", "--stall-timeout", "2"],
            freeze, env=SLOW_CHUNKS)
    assert rc == 0, stderr
    assert time.monotonic() - started < 60
    assert_same_tables(clean, out)
    record = json.loads((out / "run.json").read_text())
    (fault,) = record["faults"]
    address = fault["worker"]
    assert address in addresses and (fault["kind"], fault["action"]) == ("stalled", "restarted"), (fault, addresses)
    assert fault["chunks"] and record["retried_chunks"] == fault["chunks"] and record["workers_lost"] == [address]
    assert fault["heartbeat_s"] >= 2 and fault["held_s"] >= fault["limit_s"] >= 2, fault
    assert record["stall_timeout"] == 2
    assert f"evalcore: warning: worker {address} has held queries" in stderr, stderr
    assert "no heartbeat from it" in stderr and "Traceback" not in stderr, stderr


def test_a_frozen_only_worker_fails_the_run_naming_it_and_its_queries(big, tmp_path):
    out = tmp_path / "out"
    with freezing() as freeze:
        rc, _, stderr, (addresses, frozen_at) = run_with_fault(
            ["evaluate", big, "--out", out, "--workers", "1", "--chunk-rows", "256", "--stall-timeout", "2"],
            freeze, env=SLOW_CHUNKS)
    assert rc == 1, stderr
    assert time.monotonic() - frozen_at < 40  # the limit (~2-10 s here), then the local cluster's shutdown
    assert "Traceback" not in stderr, stderr
    message = stderr.strip().splitlines()[-1]
    found = re.match(r"evalcore: error: worker (\S+) held queries \d+-\d+(, \d+-\d+)? for \d+ s without "
                     r"finishing \(no heartbeat from it for \d+ s", message)
    assert found and found.group(1) in addresses, (message, addresses)
    assert "no other worker answers" in message and "--stall-timeout" in message, message
    assert not out.exists()


def test_a_task_that_hangs_once_is_run_again_elsewhere(big, clean, tmp_path):
    """The worker answers (heartbeats) but its task does not finish: the chunk of queries 1024-1535 sleeps
    for two minutes on its first attempt only (the test hook's flag file)."""
    out = tmp_path / "out"
    started = time.monotonic()
    result = run("evaluate", big, "--out", out, "--workers", "2", "--chunk-rows", "256", "--stall-timeout", "2",
                 env={**os.environ, TEST_STALL_ENV: f"1024:120:{tmp_path / 'slept'}"})
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started < 60
    assert (tmp_path / "slept").exists()
    assert_same_tables(clean, out)
    record = json.loads((out / "run.json").read_text())
    (fault,) = record["faults"]
    # the hung chunk, and any other the restarted worker held at that moment (on a loaded machine it may
    # already have been handed the next one), all run again
    assert fault["kind"] == "stalled" and [1024, 1536] in fault["chunks"], fault
    assert fault["heartbeat_s"] < 2, fault
    assert record["retried_chunks"] == fault["chunks"]
    held = [line for line in result.stderr.splitlines() if " has held queries " in line]
    assert held and "1024-1535" in held[0] and "it still answered" in result.stderr, result.stderr


def test_losing_the_scheduler_mid_run_is_a_clear_error(cluster, big, tmp_path):
    def kill_the_scheduler(done, total, proc):
        os.killpg(cluster.scheduler.pid, signal.SIGKILL)
        return time.monotonic()

    out = tmp_path / "out"
    rc, _, stderr, killed_at = run_with_fault(["evaluate", big, "--out", out, "--scheduler", cluster.address,
                                               "--chunk-rows", "256"], kill_the_scheduler)
    assert rc == 1, stderr
    assert time.monotonic() - killed_at < 30
    assert "Traceback" not in stderr, stderr
    message = stderr.strip().splitlines()[-1]
    assert message.startswith(f"evalcore: error: --scheduler {cluster.address}: lost the connection"), message
    assert not out.exists()


def test_losing_the_only_worker_mid_run_fails_instead_of_waiting_forever(big, tmp_path, monkeypatch):
    # the scheduler keeps the tasks while it has no worker; the run gives up after EVALCORE_NO_WORKERS_TIMEOUT
    monkeypatch.setenv("EVALCORE_NO_WORKERS_TIMEOUT", "5")
    with dask_processes(tmp_path, n_workers=1) as one:
        def kill_the_worker(done, total, proc):
            os.killpg(one.workers[0].pid, signal.SIGKILL)  # the nanny and its worker: nothing restarts it
            return time.monotonic()

        out = tmp_path / "out"
        rc, _, stderr, killed_at = run_with_fault(["evaluate", big, "--out", out, "--scheduler", one.address,
                                                   "--chunk-rows", "256"], kill_the_worker, timeout=120)
        assert rc == 1, stderr
        assert time.monotonic() - killed_at < 40
        assert "Traceback" not in stderr, stderr
        message = stderr.strip().splitlines()[-1]
        assert message.startswith(f"evalcore: error: --scheduler {one.address}: the Dask scheduler has had no "
                                  "worker for 5 s"), message
        assert not out.exists()


def test_an_unreachable_scheduler_is_a_clear_error_in_bounded_time(write):
    path = write({"query/emb": np.eye(4, dtype=np.float32), "gallery/emb": np.eye(4, dtype=np.float32),
                  "query/label": np.arange(4), "gallery/label": np.arange(4)})
    out = path.parent / "out"
    address = f"tcp://127.0.0.1:{free_port()}"  # nothing listens there
    started = time.monotonic()
    result = run("evaluate", path, "--out", out, "--scheduler", address, timeout=90)
    elapsed = time.monotonic() - started
    assert result.returncode == 1, result.stderr
    assert elapsed < 30, elapsed
    (message,) = result.stderr.strip().splitlines()
    assert message.startswith(f"evalcore: error: --scheduler {address}: no Dask scheduler answered within"), message
    assert not out.exists()

    started = time.monotonic()
    result = run("evaluate", path, "--out", out, "--scheduler", "localhost")
    assert result.returncode == 2, result.stderr
    assert time.monotonic() - started < 15
    assert "--scheduler" in result.stderr and "tcp://HOST:PORT" in result.stderr
    assert "Traceback" not in result.stderr
    assert not out.exists()


def test_a_worker_out_of_memory_is_reported_with_the_setting_to_change(tmp_path):
    # One score tile of 4,096 gallery rows x 12,288 dims is 192 MiB of float32 (read, then normalised): a
    # task needs far more than a 450 MiB worker (210-290 MiB of it Python and libraries) can hold.
    rng = np.random.default_rng(0)
    nq, ng, dims = 256, 4096, 12288
    path = tmp_path / "wide.zarr"
    ds.write_dataset(path, {"query/emb": rng.standard_normal((nq, dims), dtype=np.float32),
                            "gallery/emb": rng.standard_normal((ng, dims), dtype=np.float32),
                            "query/label": rng.integers(0, 50, nq), "gallery/label": rng.integers(0, 50, ng)})
    started = time.monotonic()
    # distributed gives up on a task after allowed-failures + 1 worker deaths (default 3 + 1); 1 + 1 is quicker
    env = {**os.environ, "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "1"}
    result = run("evaluate", path, "--out", tmp_path / "out", "--workers", "1", "--memory-limit", "450MiB",
                 timeout=120, env=env)
    elapsed = time.monotonic() - started
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    message = result.stderr.strip().splitlines()[-1]
    assert message.startswith("evalcore: error: "), result.stderr
    assert "ran out of memory" in message and "450 MiB per worker" in message, message
    assert "raise --memory-limit" in message and "2 times" in message, message
    assert not (tmp_path / "out").exists()
    assert elapsed < 60, elapsed


def test_killed_worker_messages_tell_memory_from_other_deaths():
    from types import SimpleNamespace

    from distributed.scheduler import KilledWorker

    from evalcore.engine.cluster import check_address, explain_failure

    worker = SimpleNamespace(address="tcp://10.0.0.5:40000", memory_limit=4 << 30)
    exc = KilledWorker("evalcore-chunk-512-768-0123abcd", worker, 3)

    class Events:
        def __init__(self, events):
            self.events = events

        def get_events(self, topic):
            assert topic == "worker-restart-memory"
            return self.events

    now = time.time()
    oom = Events([(now - 3600, {"worker": "tcp://10.0.0.9:1", "pid": 1, "rss": 1 << 30}),  # an earlier run's
                  (now, {"worker": worker.address, "pid": 2, "rss": 4 << 30})])
    message = explain_failure(exc, oom, scheduler="tcp://sched:8786", since=now - 60)
    assert message.startswith("a worker ran out of memory"), message
    assert "4096 MiB per worker" in message and "queries 512-767" in message and "4 times" in message
    assert "dask worker --memory-limit" in message  # a remote cluster's limit is set where its workers start
    assert "\n" not in message

    message = explain_failure(exc, Events(oom.events[:1]), scheduler=None, since=now - 60)
    assert message.startswith("a worker process died while it evaluated queries 512-767, 4 times"), message
    assert "OOM killer" in message and "raise --memory-limit" in message and "worker logs" in message
    assert explain_failure(ValueError("not a cluster failure")) is None

    assert check_address("tcp://[::1]:8786") and check_address("tls://scheduler.example:8786")
