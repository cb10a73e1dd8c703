"""Starting or joining a Dask cluster for a job, and saying plainly why a cluster run failed."""
from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
import struct
import threading
import time

from distributed import Client, Future, LocalCluster
from distributed.client import FutureCancelledError
from distributed.comm.core import CommClosedError
from distributed.scheduler import KilledWorker
from distributed.worker_memory import parse_memory_limit

# task keys are built and read there; the no-workers reason is there beside the other final cancellations
from evalcore.engine.faults import NO_WORKERS_REASON, task_queries
from evalcore.errors import ClusterError, ClusterUnreachable, InputError, OptionError, WorkerFailed, input_error

ADDRESS = re.compile(r"^(tcp|tls|ucx|inproc)://([^\s:/\[\]]+|\[[0-9A-Fa-f:.]+\])(:\d{1,5})?$")
CONNECT_TIMEOUT = "15s"
#: seconds a --scheduler endpoint that accepted the connection has to send Dask's greeting
GREETING_TIMEOUT = 10.0
#: the greeting (Dask's comm handshake: compression, python version, pickle protocol) is ~60 bytes
MAX_GREETING_BYTES = 64 * 2 ** 10
#: joining a --scheduler, connection, greeting and the client's registration together, stays under this
JOIN_BOUND = 30.0
#: imported by every local worker as it starts, so the first task does not pay for imports
PRELOAD = ["evalcore.engine.evaluate", "evalcore.core.kernels"]
#: the topic under which a nanny logs restarting its worker for exceeding the memory limit
MEMORY_RESTART_TOPIC = "worker-restart-memory"
#: seconds a run waits while the cluster has no worker at all before it gives up (env var overrides)
NO_WORKERS_TIMEOUT_ENV = "EVALCORE_NO_WORKERS_TIMEOUT"
NO_WORKERS_TIMEOUT = 30.0
#: Resident memory of an idle worker process (Python, numpy, numba, zarr, pyarrow and distributed
#: loaded): 210 to 290 MiB measured, the most in a fresh pip-installed environment.
IDLE_WORKER_MEMORY = 300 * 2 ** 20
#: A nanny kills its worker at 95% of the limit, so below this a worker is restarted before it can
#: register (or as soon as it gets work) and the run could only fail.
MIN_WORKER_MEMORY = 384 * 2 ** 20
#: what the error suggests: the idle worker plus room for a 64 MiB gallery block and a query chunk
SUGGESTED_WORKER_MEMORY = "512MiB"


def check_address(address: str) -> str:
    """A well-formed scheduler address, else an InputError naming --scheduler."""
    if not ADDRESS.match(address or ""):
        raise OptionError("--scheduler", f"{address!r} is not an address like tcp://HOST:PORT")
    return address


class _NotDask(Exception):
    """What a --scheduler endpoint sent instead of Dask's greeting (the text says what)."""


def _host_port(address: str) -> tuple[str, int]:
    """(host, port) of a ``tcp://HOST:PORT`` address (IPv6 hosts without their brackets)."""
    host, _, port = address.split("://", 1)[1].rpartition(":")
    return host.strip("[]"), int(port)


def _seconds(timeout) -> float:
    return float(str(timeout).removesuffix("s"))


def _connect(address: str, timeout: float) -> socket.socket:
    """A TCP connection to ``address``, retried (a scheduler may still be starting) until ``timeout`` seconds;
    else ClusterUnreachable, as distributed's own connect would say after the same time."""
    host, port = _host_port(address)
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        try:
            return socket.create_connection((host, port), timeout=max(0.1, min(left, 5.0)))
        except OSError as exc:  # refused, unreachable, timed out, unknown host: tried again until the bound
            if time.monotonic() + 0.2 >= deadline:
                raise ClusterUnreachable(f"--scheduler {address}: no Dask scheduler answered within "
                                         f"{CONNECT_TIMEOUT} ({exc.__class__.__name__}); check the address and "
                                         "that `dask scheduler` is running and reachable from here") from None
            time.sleep(0.2)


def _read(sock: socket.socket, n: int, deadline: float) -> bytes:
    """Exactly ``n`` bytes before ``deadline`` (time.monotonic()); TimeoutError, or _NotDask on a closed
    connection."""
    buf = bytearray()
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        sock.settimeout(left)
        part = sock.recv(n - len(buf))
        if not part:
            raise _NotDask(f"closed the connection after {len(buf)} bytes without Dask's greeting")
        buf += part
    return bytes(buf)


def read_greeting(sock: socket.socket, deadline: float) -> dict:
    """The first message a Dask server sends on a new connection (its comm handshake), read with bounds.

    Dask's TCP framing: 8 bytes (uint64) the message's size; in it, uint64 the
    number of frames, one uint64 length per frame, then the frames; the
    frames are Dask's serialisation of a small dict (``compression``,
    ``python``, ``pickle-protocol``). Anything else (a size over
    MAX_GREETING_BYTES, frames that do not add up, a message that does not
    decode to that dict) raises _NotDask before more than MAX_GREETING_BYTES
    are read; silence past ``deadline`` raises TimeoutError.
    """
    head = _read(sock, 8, deadline)
    (size,) = struct.unpack("Q", head)  # distributed packs native "Q"
    if not 8 <= size <= MAX_GREETING_BYTES:
        raise _NotDask(f"answered {head!r}, which is not Dask's protocol")
    body = _read(sock, size, deadline)
    (n_frames,) = struct.unpack_from("Q", body)
    if not 1 <= n_frames <= (size - 8) // 8:
        raise _NotDask(f"answered {(head + body)[:24]!r}, which is not Dask's protocol")
    lengths = struct.unpack_from(f"{n_frames}Q", body, 8)
    start = 8 * (1 + n_frames)
    if start + sum(lengths) != size:
        raise _NotDask(f"answered {(head + body)[:24]!r}, which is not Dask's protocol")
    frames, at = [], start
    for n in lengths:
        frames.append(body[at:at + n])
        at += n
    from distributed.protocol.core import loads

    try:
        message = loads(frames, deserialize=False)
    except Exception:  # noqa: BLE001 - whatever a stranger's bytes make the decoder raise
        message = None
    if not isinstance(message, dict) or "compression" not in message:
        raise _NotDask("answered a message that is not Dask's greeting")
    return message


def check_scheduler_answers(address: str, option: str = "--scheduler", connect_timeout=CONNECT_TIMEOUT,
                            greeting_timeout: float = GREETING_TIMEOUT) -> None:
    """The ``tcp://`` endpoint ``address`` is a Dask server: it sends Dask's greeting when connected.

    A Dask scheduler speaks first on a new connection, so this reads, sends
    nothing and closes. Nothing listening (refused, unreachable) is
    ClusterUnreachable after ``connect_timeout`` (it may be starting: exit 1);
    an endpoint that accepts and then stays silent for ``greeting_timeout``
    seconds, closes, or answers anything but Dask's greeting (an HTTP server,
    the dashboard's port, a stranger's bytes) is an InputError naming
    ``option`` (exit 2). Other schemes (tls://, ucx://) are left to distributed.
    """
    if not address.startswith("tcp://"):
        return
    sock = _connect(address, _seconds(connect_timeout))
    try:
        read_greeting(sock, time.monotonic() + greeting_timeout)
    except TimeoutError:
        raise input_error(option, f"{address} accepted the connection but sent no Dask greeting within "
                         f"{greeting_timeout:g} s: not a Dask scheduler (`dask scheduler` listens on 8786; "
                         "8787 is its dashboard), or one too busy to answer") from None
    except (_NotDask, OSError) as exc:
        raise InputError(f"{option}: {address} is not a Dask scheduler: it {exc}" if isinstance(exc, _NotDask)
                         else f"{option}: {address} is not a Dask scheduler: the connection failed while "
                         f"reading its greeting ({exc.__class__.__name__})") from None
    finally:
        sock.close()


def default_workers() -> int:
    return max(1, min(os.cpu_count() or 1, 8))


def max_local_workers() -> int:
    """The most local worker processes this machine can start: its memory (cgroup limits included, as
    distributed reads them) over IDLE_WORKER_MEMORY, what each holds before it does any work."""
    from distributed.system import MEMORY_LIMIT

    return max(1, int(MEMORY_LIMIT) // IDLE_WORKER_MEMORY)


def check_local_workers(n, option: str = "--workers") -> int:
    """A number of local worker processes this machine can start, else an InputError naming ``option``."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise input_error(option, f"{n!r} must be at least 1")
    most = max_local_workers()
    if n > most:
        shown = str(n) if n.bit_length() <= 128 else f"an integer of {n.bit_length()} bits"
        raise input_error(option, f"{shown} worker processes cannot start here: each holds about "
                         f"{IDLE_WORKER_MEMORY >> 20} MiB before any work, and this machine's memory allows "
                         f"at most {most}")
    return n


def _mib(n) -> str:
    return f"{n / 2 ** 20:.0f} MiB" if n else "no limit"


def explain_failure(exc: BaseException, client=None, *, scheduler: str | None = None,
                    since: float | None = None) -> str | None:
    """One line saying why a cluster run failed, or None when ``exc`` is not a cluster failure."""
    found = _diagnose(exc, client, scheduler=scheduler, since=since)
    return found[1] if found else None


def _diagnose(exc: BaseException, client=None, *, scheduler: str | None = None, since: float | None = None):
    """(ClusterError subclass, one-line message) for a cluster failure, else None.

    ``KilledWorker`` means every worker that ran a task died while running it
    (``distributed.scheduler.allowed-failures`` + 1 of them; the task's own
    ``retries`` only count exceptions it raised). The scheduler's event log
    tells the causes apart: a nanny that restarts its worker for going over
    the terminate fraction (95%) of the memory limit logs a
    ``worker-restart-memory`` event (``{"worker", "pid", "rss"}``); a death
    without one (the kernel's OOM killer, a segfault, a kill) is reported as a
    crash. ``since`` (time.time()) keeps events of earlier runs on a
    long-lived cluster out. A lost scheduler connection (futures cancelled
    with reason ``scheduler-connection-lost``, or ``CommClosedError`` when it
    went away in the middle of a request) is named too.
    """
    if isinstance(exc, FutureCancelledError) and getattr(exc, "reason", "") == NO_WORKERS_REASON:
        return ClusterError, no_workers_message(scheduler, no_workers_timeout())
    lost = isinstance(exc, FutureCancelledError) and getattr(exc, "reason", "") == "scheduler-connection-lost"
    if lost or isinstance(exc, CommClosedError):  # the latter: the scheduler went away in mid-request
        where = f"--scheduler {scheduler}" if scheduler else "the local cluster"
        return ClusterUnreachable, (f"{where}: lost the connection to the Dask scheduler during the run "
                                    "(did it stop?); nothing was written, run again")
    if not isinstance(exc, KilledWorker):
        return None
    last = exc.last_worker
    address = getattr(last, "address", str(last))
    limit = getattr(last, "memory_limit", 0) or 0
    attempts = exc.allowed_failures + 1
    what = task_queries(str(exc.task)) or f"task {exc.task!r}"
    events = []
    if client is not None:
        try:
            events = [e for t, e in client.get_events(MEMORY_RESTART_TOPIC)
                      if isinstance(e, dict) and (since is None or t >= since - 5)]
        except Exception:  # noqa: BLE001 - explaining must not fail; fall back to the plain message
            events = []
    mine = [e for e in events if e.get("worker") == address] or events
    if scheduler:
        fix = ("start the workers with a larger `dask worker --memory-limit` "
               "(or lower --chunk-rows if query chunks are large)")
    else:
        fix = "raise --memory-limit (or lower --chunk-rows if query chunks are large)"
    if mine:
        rss = max(int(e.get("rss") or 0) for e in mine)
        return WorkerFailed, (f"a worker ran out of memory: Dask restarted it for going over its memory limit "
                              f"({_mib(limit)} per worker, {_mib(rss)} in use) while it evaluated {what}, "
                              f"{attempts} times; {fix}")
    return WorkerFailed, (f"a worker process died while it evaluated {what}, {attempts} times (last on {address}, "
                          f"memory limit {_mib(limit)}) and Dask saw no memory-limit restart; if the system's "
                          f"OOM killer stopped it, {fix}; otherwise see the worker logs")


def no_workers_timeout() -> float:
    """Seconds without any worker before a run fails (``EVALCORE_NO_WORKERS_TIMEOUT``, default 30)."""
    try:
        return max(0.1, float(os.environ.get(NO_WORKERS_TIMEOUT_ENV) or NO_WORKERS_TIMEOUT))
    except ValueError:
        return NO_WORKERS_TIMEOUT


def no_workers_message(scheduler: str | None, seconds: float) -> str:
    if scheduler:
        return (f"--scheduler {scheduler}: the Dask scheduler has had no worker for {seconds:g} s "
                "(did the workers stop or lose their connection?); nothing was written, start "
                "`dask worker` processes for it and run again")
    return (f"the local cluster has had no worker for {seconds:g} s (the worker processes kept dying; "
            f"see --memory-limit, at least {SUGGESTED_WORKER_MEMORY}); nothing was written")


class WorkerWatch:
    """Cancels the client's futures when the cluster has had no worker for ``timeout`` seconds.

    Without it a run whose last worker died waits forever: the scheduler keeps
    the tasks, hoping for a worker. The futures are cancelled with
    ``NO_WORKERS_REASON``, which ``_diagnose`` turns into one message.
    """

    def __init__(self, client, timeout: float, poll: float = 0.5):
        self.client, self.timeout, self.poll = client, timeout, poll
        self.fired = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="evalcore-worker-watch", daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        last_seen = time.monotonic()
        while not self._stop.wait(self.poll):
            try:
                n = len(self.client.nthreads())
            except Exception:  # noqa: BLE001 - a lost scheduler is reported by the run itself
                continue
            if n:
                last_seen = time.monotonic()
            elif time.monotonic() - last_seen >= self.timeout:
                self.fired = True
                with contextlib.suppress(Exception):
                    pending: list = [Future(key, self.client) for key in list(self.client.futures)]
                    self.client.cancel(pending, reason=NO_WORKERS_REASON)
                last_seen = time.monotonic()


def check_memory_limit(memory_limit, n_workers: int) -> None:
    """InputError naming --memory-limit when a worker could not even start within it."""
    if memory_limit in (None, "auto"):
        return
    try:
        limit = parse_memory_limit(memory_limit, 1, total_cores=n_workers, logger=logging.getLogger(__name__))
    except (ValueError, TypeError):
        return  # the option's own check says what is wrong with its spelling
    if limit and limit < MIN_WORKER_MEMORY:
        raise OptionError("--memory-limit", f"{memory_limit} per worker is too small: an idle worker process "
                         f"already holds about {IDLE_WORKER_MEMORY >> 20} MiB (Python, numpy, numba, zarr, "
                         f"Dask), so it is restarted before it can register; give at least "
                         f"{SUGGESTED_WORKER_MEMORY}")


class _DropKilledWorkerLog(logging.Filter):
    """The scheduler's 'marked as failed because N workers died' line: the error message says it better."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "workers died while trying to run it" not in str(record.msg)


@contextlib.contextmanager
def _muted(name: str):
    log = logging.getLogger(name)
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        log.setLevel(level)


@contextlib.contextmanager
def _explained(client, scheduler: str | None):
    """Turn a cluster failure raised by the code using ``client`` into a one-line ClusterError."""
    since = time.time()
    try:
        yield client
    except ClusterError:
        raise
    except Exception as exc:  # noqa: BLE001 - anything else passes through unchanged
        found = _diagnose(exc, client, scheduler=scheduler, since=since)
        if found is None:
            raise
        kind, message = found
        raise kind(message) from exc


@contextlib.contextmanager
def dask_client(scheduler: str | None = None, workers: int | None = None, memory_limit: str | None = "auto"):
    """A ``distributed.Client``: joined to ``scheduler``, or on a new LocalCluster of worker processes.

    Local workers get one thread each; distributed's nanny already sets
    OMP/MKL/OPENBLAS_NUM_THREADS=1 in them, so workers x threads never
    oversubscribes the cores. Raises ClusterUnreachable when the scheduler does
    not answer within CONNECT_TIMEOUT (or the connection is lost mid-run),
    InputError naming --scheduler when the address answers but is not Dask
    (``check_scheduler_answers``; joining stays under JOIN_BOUND seconds), and
    WorkerFailed (saying whether memory was the cause) when workers keep dying.
    """
    if scheduler:
        check_address(scheduler)
        started = time.monotonic()
        # distributed's own connect waits for the greeting without a bound and reads a stranger's first bytes
        # as a message size (a hang, or a huge allocation): the endpoint is checked first, with bounds
        check_scheduler_answers(scheduler)
        left = JOIN_BOUND - (time.monotonic() - started)
        try:
            # not the process's default: a run cut short (scheduler gone) must not leave dask's global config
            # pointing every later dask computation of this process at a client that is no more
            client = Client(scheduler, timeout=f"{max(1.0, min(_seconds(CONNECT_TIMEOUT), left - 1)):.1f}s",
                            set_as_default=False)
        except (OSError, TimeoutError) as exc:
            raise ClusterUnreachable(f"--scheduler {scheduler}: no Dask scheduler answered within "
                                     f"{CONNECT_TIMEOUT} ({exc.__class__.__name__}); check the address and "
                                     "that `dask scheduler` is running and reachable from here") from None
        try:
            # a scheduler gone mid-run makes distributed log the broken connection and the failed
            # reconnection with tracebacks (when a send was under way): the one-line ClusterUnreachable
            # raised here already says what happened
            with _muted("distributed.batched"), _muted("distributed.client"), \
                    WorkerWatch(client, no_workers_timeout()), _explained(client, scheduler):
                yield client
        finally:
            # closing cancels a reconnection in progress (scheduler gone), which distributed logs as an
            # error with a traceback; the one-line ClusterUnreachable already says what happened
            with _muted("distributed.client"), contextlib.suppress(Exception):
                client.close()
        return
    n = check_local_workers(workers or default_workers())
    check_memory_limit(memory_limit, n)
    scheduler_log = logging.getLogger("distributed.scheduler")
    quiet = _DropKilledWorkerLog()
    scheduler_log.addFilter(quiet)
    try:
        with LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                          memory_limit=memory_limit, silence_logs=logging.CRITICAL, preload=PRELOAD,
                          # CRITICAL: a worker losing its scheduler at shutdown logs a traceback that means nothing;
                          # failures reach the user through _explained. No dashboard; its health/metrics
                          # routes on a free loopback port, not on :8787
                          scheduler_kwargs={"dashboard_address": "127.0.0.1:0"}) as cluster, \
                Client(cluster, set_as_default=False) as client, WorkerWatch(client, no_workers_timeout()), \
                _explained(client, None):
            yield client
    finally:
        scheduler_log.removeFilter(quiet)
