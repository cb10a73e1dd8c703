"""Faults of a cluster run: a worker lost, a worker stuck, and what run.json records about them.

Dask already runs a lost worker's tasks again elsewhere (a killed worker's
nanny also starts a new one), so a lost worker costs time, not numbers; what
it did not do was say so. And a worker that stops making progress while it
stays connected (a process stopped or swapped out, a read that never
returns) holds its tasks for ever: the scheduler only removes a worker whose
heartbeats stop for ``distributed.scheduler.worker-ttl`` (5 minutes), and a
worker stuck in a task keeps heartbeating.

``StallWatch`` runs beside the driver. Every ``poll`` seconds it asks the
scheduler which of the run's tasks each worker holds, and it sees:

- **a lost worker**: one that was there and is gone. The scheduler's
  ``remove-worker`` event for it names the tasks it was running and the
  results it held; the run's among them ran again, and each becomes a
  ``Fault`` (kind ``lost``, or ``left`` when the worker retired on purpose).
- **a stall**: a task of the run held by one worker for the stall limit,
  ``max(stall_timeout, STALL_FACTOR x the longest a task of the run has
  been held so far)``, or no task of the run finishing for that long. Blamed
  is a worker whose heartbeats stopped while it holds tasks or results of
  the run (the one the others wait for), else the worker holding the task.
  When another worker still answers, the blamed one is restarted through the
  scheduler (``Client.restart_workers``: its nanny kills and replaces the
  process; a worker without a nanny, or whose nanny does not answer, is
  removed), so its tasks run again elsewhere (kind ``stalled``). When none
  does, or a task has now stalled on ``MAX_STALLS`` workers (the task itself
  hangs, wherever it runs), the run's futures are cancelled and the driver
  raises ``WorkerStalled`` with ``failure``, one line naming the worker and
  the query rows.

- **a cancelled chunk**: a chunk's future the scheduler cancelled without the
  run asking for it (``already forgotten``: a task it could no longer
  compute, ``lost dependencies``, a release). The driver submits that chunk
  again under a new key (``TaskKey.attempt``), at most ``CANCELLED_RETRIES``
  times (then the run fails naming its queries); each is a ``Fault`` of kind
  ``cancelled``. Cancellations the run or the client made on purpose (a stall
  or no workers failing the run, a lost scheduler, a scheduler restart) are
  not submitted again: ``resubmittable``.

Held time is what the driver sees between polls: from the first poll that
finds a task on a worker to the first that does not (waiting behind the
worker's other task included), the same measure for the limit and the stall.

Test hook (tests only, never set in production): ``EVALCORE_TEST_STALL=Q0:SECONDS[:FLAGFILE]``
in a worker's environment makes the whole-gallery chunk task whose first
query row is Q0 (``*``: every chunk) sleep SECONDS before it starts; with
FLAGFILE only the attempt that creates that file sleeps, so a retry runs
normally.
"""
from __future__ import annotations

import contextlib
import logging
import math
import os
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Literal, cast

from evalcore.errors import input_error

#: seconds a task of the run may be held by one worker (or the run may go without a finished task)
#: before the worker is called stuck, unless STALL_FACTOR x the longest held task so far is longer
STALL_TIMEOUT = 180.0
STALL_FACTOR = 10
#: a task that stalls on this many workers fails the run: it hangs wherever it runs
MAX_STALLS = 2
#: the reason given to the run's futures when a stall fails it
STALL_REASON = "evalcore-stalled"
#: the reason given to futures cancelled because the cluster had no workers (``cluster.WorkerWatch``)
NO_WORKERS_REASON = "evalcore-no-workers"
#: cancellations that end the run: evalcore's own (a stall, no workers) and the client's (scheduler gone or
#: restarted); any other cancellation of a chunk is the scheduler's, and the chunk is submitted again
FINAL_CANCEL_REASONS = frozenset({STALL_REASON, NO_WORKERS_REASON, "scheduler-connection-lost", "scheduler-restart"})
#: a chunk cancelled by the scheduler is submitted again at most this many times (as a task is retried 3 times)
CANCELLED_RETRIES = 3
#: a worker whose last heartbeat is this much older than the freshest worker's has stopped answering
#: (capped by the stall limit); workers heartbeat every 0.5 s (up to 10 workers) to a few seconds
FROZEN_AFTER = 10.0
#: how long a restart may take: the nanny waits 4 s for a clean stop, then kills; then the new worker starts
RESTART_TIMEOUT = 30.0
TEST_STALL_ENV = "EVALCORE_TEST_STALL"

log = logging.getLogger("evalcore.faults")

#: task keys: evalcore-chunk-Q0-Q1-RUN, or for sharded runs evalcore-truth-Q0-Q1-RUN,
#: evalcore-bands-Q0-Q1-S0-S1-RUN, evalcore-scan-Q0-Q1-S0-S1-RUN and evalcore-combine-Q0-Q1-RUN; a chunk
#: submitted again after the scheduler cancelled it ends in -rN, its Nth resubmission
#: (``TaskKey`` builds and reads them; this is the one pattern they follow)
TASK_KEY = re.compile(r"^evalcore-([a-z]+)-(\d+)-(\d+)(?:-(\d+)-(\d+))?-([0-9a-f]+)(?:-r(\d+))?$")
TaskKind = Literal["chunk", "truth", "bands", "scan", "combine"]


@dataclass(frozen=True)
class TaskKey:
    """The key of one task of a run: its kind, query rows [q0, q1), gallery rows [s0, s1) for a shard's
    task, the run (the first 8 characters of its id) and the attempt (0, or N for a chunk's Nth submission
    after the scheduler cancelled it). ``str()`` is the Dask key; ``parse`` reads one."""

    kind: TaskKind
    q0: int
    q1: int
    run: str
    s0: int | None = None
    s1: int | None = None
    attempt: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "run", self.run[:8])

    def __str__(self) -> str:
        shard = f"-{self.s0}-{self.s1}" if self.s0 is not None else ""
        attempt = f"-r{self.attempt}" if self.attempt else ""
        return f"evalcore-{self.kind}-{self.q0}-{self.q1}{shard}-{self.run}{attempt}"

    @classmethod
    def parse(cls, key) -> TaskKey | None:
        """The key's parts, or None when it is not an evalcore task key."""
        found = TASK_KEY.match(key) if isinstance(key, str) else None
        if not found:
            return None
        kind, q0, q1, s0, s1, run, attempt = found.groups()
        return cls(cast(TaskKind, kind), int(q0), int(q1), run, None if s0 is None else int(s0),
                   None if s1 is None else int(s1), int(attempt or 0))

    @property
    def span(self) -> tuple[int, int]:
        return self.q0, self.q1

    def queries(self) -> str:
        """``queries 512-767`` (and ``, gallery rows 0-59999`` for a shard's task)."""
        shard = f", gallery rows {self.s0}-{self.s1 - 1}" if self.s0 is not None and self.s1 is not None else ""
        return f"queries {self.q0}-{self.q1 - 1}{shard}"


def task_key(kind: TaskKind, q0: int, q1: int, run_id: str, shard: tuple[int, int] | None = None,
             attempt: int = 0) -> str:
    """The Dask key of a task of run ``run_id`` (see ``TaskKey``)."""
    s0, s1 = shard if shard is not None else (None, None)
    return str(TaskKey(kind, q0, q1, run_id, s0, s1, attempt))


def resubmittable(exc: BaseException) -> bool:
    """Whether a chunk whose future ended with ``exc`` is submitted again: a cancellation by the scheduler
    (a key it forgot or released; a killed worker's chunk whose broadcast input was gone), not one of
    ``FINAL_CANCEL_REASONS``."""
    from distributed.client import FutureCancelledError  # deferred: runs without a client never import it

    return isinstance(exc, FutureCancelledError) and exc.reason not in FINAL_CANCEL_REASONS


def task_queries(key) -> str | None:
    """``queries 512-767`` (and ``, gallery rows 0-59999`` for a shard's task) named by a task key."""
    parsed = TaskKey.parse(key)
    return parsed.queries() if parsed else None


def task_span(key) -> tuple[int, int] | None:
    """The query rows [q0, q1) of a task key."""
    parsed = TaskKey.parse(key)
    return parsed.span if parsed else None


def check_stall_timeout(value, option: str = "--stall-timeout") -> float:
    """A number of seconds > 0 (None: the default), else an InputError naming the option."""
    if value is None:
        return STALL_TIMEOUT
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise input_error(option, f"{value!r} is not a number of seconds")
    if not (math.isfinite(value) and value > 0):
        raise input_error(option, f"{value} must be a number of seconds > 0")
    return float(value)


def stall_limit(stall_timeout: float, slowest: float) -> float:
    """Seconds a worker may hold a task of the run before it is called stuck."""
    return max(stall_timeout, STALL_FACTOR * slowest)


def test_stall(q0: int) -> None:
    """Tests only: sleep in the task of chunk ``q0`` as ``EVALCORE_TEST_STALL=Q0:SECONDS[:FLAGFILE]`` says
    (see the module's docstring)."""
    spec = os.environ.get(TEST_STALL_ENV)
    if not spec:
        return
    first, seconds, *flag = spec.split(":", 2)
    if first != "*" and int(first) != q0:
        return
    if flag:
        try:
            os.close(os.open(flag[0], os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return  # an earlier attempt slept; this one runs
    time.sleep(float(seconds))


FaultKind = Literal["lost", "left", "stalled", "cancelled"]


@dataclass(frozen=True)
class Fault:
    """A worker that stopped serving the run, and the run's tasks that therefore ran again.

    ``kind``: ``lost`` (the worker died or lost its connection), ``left`` (it
    retired on purpose, its tasks moved), ``stalled`` (evalcore found it stuck
    and restarted or removed it) or ``cancelled`` (the scheduler cancelled a
    chunk's future and the driver submitted the chunk again; ``action`` is the
    reason the scheduler gave, ``worker`` is empty: no worker is blamed).
    ``chunks``: the query rows [q0, q1) of the tasks that ran again;
    ``tasks``: their keys (a cancelled chunk: the key cancelled). For a stall,
    ``held_s`` is how long the worker had held the oldest of them,
    ``heartbeat_s`` how long it had been silent, ``limit_s`` the stall limit
    then, and ``action`` what the scheduler did (``restarted``, ``removed``).
    """

    kind: FaultKind
    worker: str
    chunks: list[tuple[int, int]] = field(default_factory=list)
    tasks: list[str] = field(default_factory=list)
    held_s: float | None = None
    heartbeat_s: float | None = None
    limit_s: float | None = None
    action: str = "rescheduled"

    def record(self) -> dict:
        return {"kind": self.kind, "worker": self.worker, "chunks": [list(c) for c in self.chunks],
                "tasks": list(self.tasks), "held_s": _round(self.held_s), "heartbeat_s": _round(self.heartbeat_s),
                "limit_s": _round(self.limit_s), "action": self.action}

    def _stall(self, what: str) -> str:
        """The stall, as both lines say it: how long, how silent, against which limit."""
        return (f"{what or 'tasks of the run'} for {self.held_s:.0f} s without finishing "
                f"({_silence(self.heartbeat_s, self.limit_s)}; stall limit {self.limit_s:.0f} s)")

    def _how(self) -> str:
        return "left the cluster" if self.kind == "left" else "was lost (died or lost its connection)"

    def event(self) -> str:
        """One line for the log as it happens."""
        what = _queries_text(self.chunks)
        if self.kind == "cancelled":
            return f"the scheduler cancelled {what} ({self.action}); submitting them again"
        if self.kind == "stalled":
            return (f"worker {self.worker} has held {self._stall(what)}; "
                    f"{'restarting' if self.action == 'restarted' else 'removing'} it, its tasks run again "
                    "on another worker")
        return f"worker {self.worker} {self._how()}" + (f"; {what} run again on another worker" if what else "")

    def message(self) -> str:
        """One line for run.json's warnings (and stderr at the end of the run)."""
        what = _queries_text(self.chunks)
        if self.kind == "cancelled":
            return f"the scheduler cancelled {what} ({self.action}); they ran again, so the results are complete"
        if self.kind == "stalled":
            return (f"worker {self.worker} held {self._stall(what)}; evalcore {self.action} it and "
                    f"{'they' if what else 'the run'} ran again on another worker, so the results are complete")
        if not what:
            return f"worker {self.worker} {self._how()} during the run; no task of the run had to run again"
        return f"worker {self.worker} {self._how()}; {what} ran again on another worker, so the results are complete"


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 2)


def _silence(heartbeat_s: float | None, limit: float | None) -> str:
    if heartbeat_s is not None and heartbeat_s >= frozen_after(limit):
        return f"no heartbeat from it for {heartbeat_s:.0f} s: the process is frozen or its machine unresponsive"
    return "it still answered, so the task itself was stuck"


def frozen_after(limit: float | None) -> float:
    """The silence that makes a worker frozen when a stall is found: half the stall limit (at most
    ``FROZEN_AFTER``). Not the whole limit: a worker frozen just after it began its task has been silent a
    little less than it has held that task (its last heartbeat came after the task began), and was read as
    "still answered" at the moment the task reached the limit. Half still spans at least two heartbeats of
    a cluster under 200 workers (every 0.5-2 s) for any limit of 2 s or more."""
    return min(limit or FROZEN_AFTER, FROZEN_AFTER) / 2


def _queries_text(chunks) -> str:
    spans = sorted(set(chunks))
    if not spans:
        return ""
    shown = ", ".join(f"{q0}-{q1 - 1}" for q0, q1 in spans[:5])
    more = f" and {len(spans) - 5} more chunks" if len(spans) > 5 else ""
    return f"queries {shown}{more}"


def _spans(keys) -> list[tuple[int, int]]:
    return sorted({s for s in map(task_span, keys) if s is not None})


def retried_chunks(faults: list[Fault]) -> list[tuple[int, int]]:
    return sorted({c for f in faults for c in f.chunks})


class StallWatch:
    """Watches a run's tasks on a Dask client: records lost workers, restarts stuck ones or fails the run.

    ``futures``: the run's futures (cancelled when the run fails);
    ``run_id``: the task keys of the run end in its first 8 characters.
    ``check()`` is one poll; as a context manager a thread calls it every
    ``poll`` seconds. After the run, ``faults`` lists what happened and
    ``failure`` the one-line reason when the watch failed the run.
    """

    def __init__(self, client, futures, run_id: str, stall_timeout: float = STALL_TIMEOUT,
                 poll: float | None = None, clock=time.monotonic):
        self.client, self.futures, self.run = client, list(futures), run_id[:8]
        self.stall_timeout = stall_timeout
        self.poll = poll if poll is not None else min(1.0, max(0.2, stall_timeout / 10))
        self.clock = clock
        self.faults: list[Fault] = []
        self.failure: str | None = None
        #: workers evalcore judged stuck when it failed the run
        self.stuck: set[str] = set()
        self.slowest = 0.0
        self._held: dict[tuple[str, str], float] = {}  # (worker, key) -> when first seen held
        self._workers: dict[str, set[str]] = {}  # worker -> the run's keys it held at the last poll
        self._stalls: Counter = Counter()  # key -> workers it stalled on
        self._stalled_on: dict[str, list[str]] = {}
        self._restarted: dict[str, Fault] = {}  # worker -> its stall, until it is seen gone
        self._replacing: list[threading.Thread] = []
        self._progress = clock()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="evalcore-stall-watch", daemon=True)

    # ------------------------------------------------------------------ running beside the driver

    def __enter__(self):
        try:
            self.check(final=True)  # the workers there at the start: one lost before the first poll is seen too
        except Exception:  # noqa: BLE001 - the polls try again
            pass
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=30)
        if exc[0] is None and self.failure is None:
            try:
                self.check(final=True)  # a worker lost after the last poll
            except Exception:  # noqa: BLE001 - the run is done; its record may miss a late loss
                pass

    def _run(self) -> None:
        while not self._stop.wait(self.poll) and self.failure is None:
            try:
                self.check()
            except Exception:  # noqa: BLE001 - a lost scheduler is reported by the run itself
                continue

    @property
    def unavailable(self) -> set[str]:
        """Workers that would not answer now: stuck, or being restarted (left out of the run's clean-up)."""
        locked = self._lock.acquire(timeout=2)  # a poll still waiting on a scheduler that went away: no matter
        try:
            return self.stuck | set(self._restarted.copy())
        finally:
            if locked:
                self._lock.release()

    def progress(self) -> None:
        """The driver received a chunk."""
        self._progress = self.clock()

    def resubmitted(self, cancelled, again, reason: str) -> None:
        """The driver submitted a chunk again (future ``again``) after the scheduler cancelled its future
        ``cancelled`` for ``reason``: recorded as a fault, and ``again`` watched (and cancelled if the run
        fails) like the run's other futures."""
        self.futures.append(again)  # one append: a poll iterating the list at once sees it or not, no matter
        fault = Fault("cancelled", "", _spans([cancelled.key]), [str(cancelled.key)], action=reason)
        self.faults.append(fault)
        log.warning(fault.event())
        if self.failure is not None:  # the watch failed the run while it was submitted: this one ends too
            with contextlib.suppress(Exception):
                self.client.cancel([again], reason=STALL_REASON)

    @property
    def limit(self) -> float:
        return stall_limit(self.stall_timeout, self.slowest)

    def ours(self, key) -> bool:
        parsed = TaskKey.parse(key)
        return parsed is not None and parsed.run == self.run

    # ------------------------------------------------------------------ one poll

    def check(self, final: bool = False) -> None:
        with self._lock:
            self._check(final)

    def _check(self, final: bool) -> None:
        processing = {w: {k for k in keys if self.ours(k)} for w, keys in self.client.processing().items()}
        now = self.clock()
        for worker in [w for w in self._workers if w not in processing]:
            self._gone(worker)
        self._workers = processing
        held = {(w, k) for w, keys in processing.items() for k in keys}
        anywhere = {k for _, k in held}
        for pair in [p for p in self._held if p not in held]:
            since = self._held.pop(pair)
            # finished: not lost with its worker, nor moved to another (stolen from behind a slow task)
            if pair[0] in processing and pair[1] not in anywhere:
                self.slowest = max(self.slowest, now - since)
                self._progress = max(self._progress, now)
        for pair in held:
            if pair[0] not in self._restarted:
                self._held.setdefault(pair, now)
        if final:
            return
        limit = self.limit
        aged: dict[str, set[str]] = {}
        for (w, k), since in self._held.items():
            if now - since >= limit and w not in self._restarted:  # not one being replaced already
                aged.setdefault(w, set()).add(k)
        unfinished = any(not f.done() for f in self.futures)
        if aged or (unfinished and now - self._progress >= limit):
            self._stalled(processing, aged, now, limit)

    def _gone(self, worker: str) -> None:
        """A worker seen at the last poll is gone: record it, with the run's tasks that ran again because of it."""
        keys, expected = self._removal(worker)
        keys = keys if keys is not None else self._workers.get(worker, set())
        stall = self._restarted.pop(worker, None)
        if stall is not None:
            tasks = sorted(set(stall.tasks) | keys)
            self.faults[self.faults.index(stall)] = Fault(
                "stalled", worker, _spans(tasks), tasks, stall.held_s, stall.heartbeat_s, stall.limit_s, stall.action)
            return
        if expected and not keys:
            return  # retired on purpose (scaled down) with nothing of ours
        fault = Fault("left" if expected else "lost", worker, _spans(keys), sorted(keys))
        self.faults.append(fault)
        log.warning(fault.event())

    def _removal(self, worker: str) -> tuple[set[str] | None, bool]:
        """(the run's keys the scheduler rescheduled or recomputed, expected) from its remove-worker event."""
        try:
            events = self.client.get_events(worker)
        except Exception:  # noqa: BLE001 - then what the last poll saw
            return None, False
        for _, event in reversed(list(events)):
            if isinstance(event, dict) and event.get("action") == "remove-worker":
                keys = {k for name in ("processing-tasks", "lost-computed-tasks") for k in event.get(name) or ()}
                return {k for k in keys if self.ours(k)}, bool(event.get("expected"))
        return None, False

    def _stalled(self, processing: dict[str, set[str]], aged: dict[str, set[str]], now: float, limit: float) -> None:
        """Some task of the run was held for the limit, or none finished for that long: blame, then act."""
        info = self.client.scheduler_info()["workers"]
        seen = {w: float(d.get("last_seen") or 0) for w, d in info.items()}
        # on the scheduler's clock (not this machine's): its time now, else the freshest heartbeat
        reference = max([*seen.values(), self._scheduler_time()])
        silent = {w: reference - t for w, t in seen.items()}
        frozen = {w for w, s in silent.items() if s >= frozen_after(limit) and w not in self._restarted}
        blamed: dict[str, set[str]] = {}
        if frozen:  # a silent worker holding the run's tasks or results is the one the others wait for
            has = self.client.has_what(list(frozen))
            for w in frozen:
                keys = processing.get(w, set()) | {k for k in has.get(w, ()) if self.ours(k)}
                if keys:
                    blamed[w] = keys
        if blamed:
            for w in aged:
                if w not in blamed:  # waiting on the silent one: a fresh start after it is gone
                    for k in aged[w]:
                        self._held[w, k] = now
        else:
            blamed = {w: set(keys) for w, keys in aged.items()}
        if not blamed:
            self._progress = now  # nothing of the run is held anywhere; look again after another limit
            return
        for w in blamed:  # a stall counts against the tasks held for the limit (not those queued behind them)
            for k in aged.get(w, ()):
                self._stalls[k] += 1
                self._stalled_on.setdefault(k, []).append(w)
        # how long each has held its oldest task of the run (a silent holder of results: how long it is silent)
        held_s = {w: max([now - self._held[w, k] for k in keys if (w, k) in self._held] or [silent.get(w, 0.0)])
                  for w, keys in blamed.items()}
        alive = [w for w in info if w not in blamed and w not in frozen and w not in self._restarted]
        repeated = sorted(k for k in self._stalls if self._stalls[k] >= MAX_STALLS)
        if repeated or not alive:
            self._fail(blamed, repeated, held_s, silent, limit)
            return
        for w, keys in sorted(blamed.items()):
            nanny = bool(info.get(w, {}).get("nanny"))
            fault = Fault("stalled", w, _spans(keys), sorted(keys), held_s[w], silent.get(w), limit,
                          "restarted" if nanny else "removed")
            self.faults.append(fault)
            self._restarted[w] = fault
            log.warning(fault.event())
            for pair in [p for p in self._held if p[0] == w]:
                del self._held[pair]
            # in the background: a nanny waits 4 s for a clean stop before it kills, and polls go on meanwhile
            thread = threading.Thread(target=self._replace, args=(w, nanny), name="evalcore-restart", daemon=True)
            thread.start()
            self._replacing.append(thread)
        self._progress = now

    def _replace(self, worker: str, nanny: bool) -> None:
        """Have the scheduler restart a stuck worker through its nanny, or remove it (then its tasks move)."""
        try:
            if nanny:
                outcome = self.client.restart_workers([worker], timeout=RESTART_TIMEOUT, raise_for_error=False)
                if (outcome or {}).get(worker) == "OK":
                    return
                self._set_action(worker, "removed")
            # no nanny (or it did not answer): the scheduler forgets the worker and runs its tasks elsewhere
            self.client.sync(self.client.scheduler.unregister, address=worker,
                             stimulus_id=f"evalcore-stalled-{time.time()}")
        except Exception as exc:  # noqa: BLE001 - the next polls still see the worker, and fail the run if need be
            if self._stop.is_set():
                return  # the run is over (its cluster may be closing): its tasks ran elsewhere
            log.warning(f"could not restart or remove worker {worker}: {exc.__class__.__name__}: {exc}")
            self._set_action(worker, "could not restart", forget=True)  # it may be blamed again (and fail the run)

    def _set_action(self, worker: str, action: str, forget: bool = False) -> None:
        with self._lock:
            stall = self._restarted.pop(worker, None) if forget else self._restarted.get(worker)
            if stall is not None and stall in self.faults:
                self.faults[self.faults.index(stall)] = updated = replace(stall, action=action)
                if not forget:
                    self._restarted[worker] = updated

    def _scheduler_time(self) -> float:
        try:
            return float(self.client.run_on_scheduler(time.time))
        except Exception:  # noqa: BLE001 - a scheduler that refuses run_function: the freshest heartbeat
            return 0.0

    def _fail(self, blamed, repeated, held_s, silent, limit) -> None:
        if repeated:
            key = repeated[0]
            where = ", then ".join(self._stalled_on[key])
            self.failure = (f"{task_queries(key) or key} stalled on {self._stalls[key]} workers ({where}; stall "
                            f"limit {limit:.0f} s): the task itself hangs wherever it runs (a read that never "
                            "returns?); see the worker logs, or raise --stall-timeout if it is only slow; "
                            "nothing was written")
        else:
            w = max(blamed, key=lambda a: held_s[a])
            what = _queries_text(_spans(blamed[w])) or "tasks of the run"
            self.failure = (f"worker {w} held {what} for {held_s[w]:.0f} s without finishing "
                            f"({_silence(silent.get(w), limit)}; stall limit {limit:.0f} s) and no other worker "
                            "answers to run them again; restart that worker or raise --stall-timeout; "
                            "nothing was written")
        self.stuck = set(blamed)
        try:
            self.client.cancel(self.futures, reason=STALL_REASON)
        except Exception:  # noqa: BLE001 - the driver still sees failure when its futures end
            pass


@contextlib.contextmanager
def broadcasts_kept(client):
    """Dask's active memory manager paused while a run relies on data broadcast to every worker (the
    re-ranking model, the union's rows, arrays given in memory), and restarted after if it ran. Its default
    policy drops the extra copies once no waiting task on a worker needs them; the death of the worker then
    left with the only copy would cancel every chunk that depends on it ("already forgotten"), where a
    retry on another worker was promised (``tests/test_faults.py``)."""
    amm = getattr(client, "amm", None)
    try:
        running = bool(amm.running()) if amm is not None else False
        if running:
            amm.stop()
    except Exception:  # noqa: BLE001 - a scheduler without it (or refusing): the run goes on as before
        running = False
    try:
        yield
    finally:
        if running:
            try:
                amm.start()
            except Exception:  # noqa: BLE001 - the scheduler is gone or refuses: nothing left to restore
                logging.getLogger("evalcore").debug("could not restart the active memory manager")
