"""The stall watch's rule and decisions, on a scripted client and clock (no processes; see tests/test_faults.py
for the same faults on real worker processes)."""
from __future__ import annotations

import logging

import pytest

from evalcore.engine import faults as f
from evalcore.errors import InputError, OptionError

RUN = "0123abcd" * 4


def key(q0, q1, run=RUN):
    return f"evalcore-chunk-{q0}-{q1}-{run[:8]}"


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class Pending:
    def done(self):
        return False


class Scripted:
    """The client calls the watch makes, answered from attributes the test sets."""

    def __init__(self, clock: Clock):
        self.clock = clock
        self.held: dict[str, list] = {}  # worker -> keys processing
        self.silent: dict[str, float] = {}  # worker -> seconds since its last heartbeat
        self.results: dict[str, list] = {}  # worker -> keys whose results it holds
        self.events: dict[str, list] = {}
        self.nanny = True
        self.restarted: list[str] = []
        self.cancelled = None

    def processing(self):
        return {w: list(keys) for w, keys in self.held.items()}

    def scheduler_info(self):
        wall = self.clock.now + 5e8
        return {"workers": {w: {"last_seen": wall - self.silent.get(w, 0.2), "nanny": "tcp://n" if self.nanny else None}
                            for w in self.held}}

    def run_on_scheduler(self, fn):
        return self.clock.now + 5e8

    def has_what(self, workers):
        return {w: self.results.get(w, []) for w in workers}

    def restart_workers(self, workers, timeout, raise_for_error):
        self.restarted += workers
        return {w: "OK" for w in workers}

    def get_events(self, topic):
        return self.events.get(topic, [])

    def cancel(self, futures, reason=None):
        self.cancelled = reason


@pytest.fixture
def setup():
    clock = Clock()
    client = Scripted(clock)
    watch = f.StallWatch(client, [Pending()], RUN, stall_timeout=5.0, clock=clock)
    return clock, client, watch


def step(clock, watch, seconds):
    clock.now += seconds
    watch.check()
    for thread in watch._replacing:
        thread.join(5)


def test_the_limit_is_the_timeout_or_ten_times_the_longest_held_task():
    assert f.stall_limit(180, 0.0) == 180
    assert f.stall_limit(180, 30.0) == 300
    assert f.STALL_FACTOR == 10


@pytest.mark.parametrize("value", [-1, 0, float("nan"), float("inf"), "5", True])
def test_a_bad_stall_timeout_names_the_option(value):
    with pytest.raises(OptionError) as err:
        f.check_stall_timeout(value)
    assert err.value.option == "--stall-timeout"
    assert f.check_stall_timeout(None) == f.STALL_TIMEOUT and f.check_stall_timeout(2) == 2.0
    with pytest.raises(InputError, match="^stall_timeout: "):
        f.check_stall_timeout(-3, "stall_timeout")


def test_the_limit_grows_with_the_tasks_seen(setup):
    clock, client, watch = setup
    client.held = {"a": [key(0, 512)], "b": []}
    step(clock, watch, 0)
    client.held = {"a": [], "b": []}
    step(clock, watch, 3)  # held 3 s: the limit is now 30 s
    assert watch.limit == 30
    client.held = {"a": [key(512, 1024)], "b": []}
    step(clock, watch, 0)
    step(clock, watch, 20)
    assert client.restarted == [] and watch.faults == []
    step(clock, watch, 10)
    assert client.restarted == ["a"]


def test_a_worker_stuck_in_a_task_is_restarted_and_its_chunk_recorded(setup, caplog):
    clock, client, watch = setup
    client.held = {"a": [key(0, 512), key(512, 1024)], "b": ["someone-elses"]}
    step(clock, watch, 0)
    with caplog.at_level(logging.WARNING, "evalcore.faults"):
        step(clock, watch, 4.9)
        assert client.restarted == []
        step(clock, watch, 0.2)
    assert client.restarted == ["a"]
    (fault,) = watch.faults
    assert (fault.kind, fault.worker, fault.chunks, fault.action) == ("stalled", "a", [(0, 512), (512, 1024)],
                                                                      "restarted")
    assert fault.held_s == pytest.approx(5.1) and fault.limit_s == 5
    assert "worker a has held queries 0-511, 512-1023 for 5 s" in caplog.text and "still answered" in caplog.text
    # the restarted worker leaves; the scheduler's event adds the result it held, which is computed again
    client.held = {"b": [], "c": []}
    client.events["a"] = [(1, {"action": "remove-worker", "processing-tasks": {key(0, 512), key(512, 1024)},
                               "lost-computed-tasks": {key(2048, 2560), "someone-elses"}, "expected": False})]
    step(clock, watch, 1)
    (fault,) = watch.faults
    assert fault.chunks == [(0, 512), (512, 1024), (2048, 2560)]
    assert "evalcore restarted it" in fault.message() and "results are complete" in fault.message()
    assert watch.failure is None


def test_a_silent_worker_holding_results_is_blamed_not_the_one_waiting_for_them(setup):
    clock, client, watch = setup
    client.held = {"frozen": [], "waiting": [key(0, 512)], "idle": []}
    client.results = {"frozen": [key(512, 1024)]}
    step(clock, watch, 0)
    client.silent = {"frozen": 6.0}
    step(clock, watch, 5.5)
    assert client.restarted == ["frozen"]
    (fault,) = watch.faults
    assert fault.chunks == [(512, 1024)] and "no heartbeat from it for 6 s" in fault.message()
    step(clock, watch, 4)  # the waiting task's clock started again: not blamed yet
    assert client.restarted == ["frozen"]


def test_with_no_other_worker_the_run_fails_naming_the_worker_and_queries(setup):
    clock, client, watch = setup
    client.held = {"tcp://w:1": [key(256, 512)]}
    step(clock, watch, 0)
    client.silent = {"tcp://w:1": 7.0}
    step(clock, watch, 6)
    assert client.restarted == [] and client.cancelled == f.STALL_REASON
    assert watch.failure.startswith("worker tcp://w:1 held queries 256-511 for 6 s without finishing (no heartbeat")
    assert "no other worker answers" in watch.failure and "\n" not in watch.failure
    assert watch.stuck == {"tcp://w:1"}


def test_a_task_that_stalls_on_two_workers_fails_the_run(setup):
    clock, client, watch = setup
    client.held = {"a": [key(0, 512)], "b": []}
    step(clock, watch, 0)
    step(clock, watch, 5)
    assert client.restarted == ["a"]
    client.held = {"b": [key(0, 512)], "a2": []}  # a restarted as a2; the task moved to b, and hangs there too
    step(clock, watch, 0.5)
    step(clock, watch, 5)
    assert client.restarted == ["a"]
    assert watch.failure.startswith("queries 0-511 stalled on 2 workers (a, then b; stall limit 5 s)")
    assert client.cancelled == f.STALL_REASON


def test_a_lost_worker_is_recorded_with_the_chunks_that_ran_again(setup):
    clock, client, watch = setup
    client.held = {"a": [key(0, 512)], "b": [key(512, 1024)], "c": []}
    step(clock, watch, 0)
    client.held = {"b": [key(512, 1024)], "d": []}  # a died; c retired on purpose, with nothing of the run
    client.events = {"a": [(1, {"action": "add-worker"}),
                           (2, {"action": "remove-worker", "processing-tasks": {key(0, 512)},
                                "lost-computed-tasks": set(), "expected": False})],
                     "c": [(2, {"action": "remove-worker", "processing-tasks": set(), "lost-computed-tasks": set(),
                                "expected": True})]}
    step(clock, watch, 1)
    (fault,) = watch.faults
    assert (fault.kind, fault.worker, fault.chunks) == ("lost", "a", [(0, 512)])
    assert fault.message() == ("worker a was lost (died or lost its connection); queries 0-511 ran again on "
                               "another worker, so the results are complete")
    assert f.retried_chunks(watch.faults) == [(0, 512)]
    assert fault.record()["chunks"] == [[0, 512]]


def test_without_a_nanny_the_stuck_worker_is_removed(setup):
    clock, client, watch = setup
    client.nanny = False
    removed = []
    client.sync = lambda fn, **kw: removed.append(kw["address"])
    client.scheduler = type("S", (), {"unregister": None})()
    client.held = {"a": [key(0, 512)], "b": []}
    step(clock, watch, 0)
    step(clock, watch, 5)
    assert removed == ["a"] and client.restarted == []
    assert watch.faults[0].action == "removed"


def test_the_test_hook_sleeps_only_where_and_as_often_as_asked(tmp_path, monkeypatch):
    slept = []
    monkeypatch.setattr(f.time, "sleep", slept.append)
    f.test_stall(0)
    monkeypatch.setenv(f.TEST_STALL_ENV, "512:3")
    f.test_stall(0)
    f.test_stall(512)
    f.test_stall(512)
    monkeypatch.setenv(f.TEST_STALL_ENV, f"*:0.5:{tmp_path / 'flag'}")
    f.test_stall(7)
    f.test_stall(8)
    assert slept == [3.0, 3.0, 0.5]


def test_a_task_stolen_from_behind_a_stuck_one_does_not_raise_the_limit(setup):
    clock, client, watch = setup
    client.held = {"a": [key(0, 512), key(512, 1024)], "b": []}
    step(clock, watch, 0)
    client.held = {"a": [key(0, 512)], "b": [key(512, 1024)]}  # Dask's work stealing moved the queued one
    step(clock, watch, 3)
    client.held = {"a": [key(0, 512)], "b": []}
    step(clock, watch, 0.5)
    assert watch.slowest == 0.5 and watch.limit == 5
    step(clock, watch, 1.5)
    assert client.restarted == ["a"]


def test_a_worker_whose_nanny_does_not_answer_is_removed_instead(setup):
    clock, client, watch = setup
    removed = []
    client.restart_workers = lambda workers, timeout, raise_for_error: {w: "timed out" for w in workers}
    client.sync = lambda fn, **kw: removed.append(kw["address"])
    client.scheduler = type("S", (), {"unregister": None})()
    client.held = {"a": [key(0, 512)], "b": []}
    step(clock, watch, 0)
    step(clock, watch, 5)
    assert removed == ["a"] and watch.faults[0].action == "removed"
    client.held = {"b": []}
    step(clock, watch, 1)
    assert [(x.kind, x.action, x.chunks) for x in watch.faults] == [("stalled", "removed", [(0, 512)])]
