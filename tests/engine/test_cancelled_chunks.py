"""A chunk's future cancelled by the scheduler (not by the run) on a LocalCluster of 2 worker processes: the chunk
is computed again, or submitted again, and the tables are those of a run in this process; a chunk cancelled
every time fails the run after ``CANCELLED_RETRIES`` resubmissions, naming its queries.

The first test is the cause of test_faults' intermittent failure: once every chunk of a re-ranked run had
finished, the scheduler forgot the broadcast model (nobody held it), so a finished chunk lost with its worker
before the driver fetched it could not be computed again and was cancelled ("already forgotten")."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from conftest import random_reid

from evalcore.engine.evaluate import evaluate
from evalcore.engine.faults import CANCELLED_RETRIES, TEST_STALL_ENV, TaskKey
from evalcore.engine.options import Options
from evalcore.errors import ClusterError
from evalcore.io import dataset as ds

pytestmark = [pytest.mark.cluster, pytest.mark.xdist_group("faults")]

RERANK = Options(rerank=(10, 4, 0.3))


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """1,500 queries x 4,000 gallery x 32 dims: 3 chunks of 512 queries."""
    path = tmp_path_factory.mktemp("cancelled") / "ds.zarr"
    ds.write_dataset(path, random_reid(np.random.default_rng(4), n_query=1500, n_gallery=4000, dims=32, n_ids=500),
                     {"protocol": "reid"}, chunk_rows=256)
    return path


def cluster(env: dict | None = None):
    from distributed import Client, LocalCluster

    c = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                     scheduler_kwargs={"dashboard_address": "127.0.0.1:0"}, env=env or {})
    return c, Client(c)


def on_scheduler(client, fn):
    """``fn(scheduler)`` run on the scheduler."""
    return client.run_on_scheduler(lambda dask_scheduler: fn(dask_scheduler))


def cancel_on_scheduler(client, key: str, reason: str) -> None:
    """``key`` cancelled by the scheduler for every client (as it does for a key it released or forgot)."""
    me = client.id  # the lambda is pickled: the client's id, not the client
    on_scheduler(client, lambda s: s.stimulus_cancel([key], me, True, reason, None))


def chunk_keys(client) -> dict[str, list[str]]:
    """The run's final chunk tasks on the scheduler (whole-gallery chunks, or sharded combines): key -> holders."""
    return on_scheduler(client, lambda s: {k: [w.address for w in ts.who_has or ()] for k, ts in s.tasks.items()
                                           if str(k).startswith(("evalcore-chunk-", "evalcore-combine-"))})


def same_tables(a, b) -> None:
    assert a.per_query.equals(b.per_query)
    assert a.summary.equals(b.summary)
    assert a.cmc.equals(b.cmc)


def test_a_chunk_lost_after_every_chunk_finished_is_computed_again(dataset):
    """Every chunk finished (the driver held in on_chunk until then), then the worker holding results not yet
    fetched is removed: with the model held for the run they are computed again (before: cancelled, 'already
    forgotten', and the run failed with FutureCancelledError)."""
    here = evaluate(dataset, RERANK, chunk_rows=512)
    c, client = cluster()
    with c, client:
        removed = []

        def remove_a_holder(stats, done, total):
            if removed:
                return
            deadline = time.monotonic() + 60
            while not ((held := chunk_keys(client)) and len(held) == total and all(held.values())):
                assert time.monotonic() < deadline, held
                time.sleep(0.05)
            unfetched = {k: w for k, w in held.items() if TaskKey.parse(k).q0 != stats["q0"]}
            victim = next(w for where in unfetched.values() for w in where)
            removed.append(victim)
            client.sync(client.scheduler.unregister, address=victim, stimulus_id="test-remove-a-holder")

        there = evaluate(dataset, RERANK, client=client, chunk_rows=512, on_chunk=remove_a_holder)
    assert removed
    same_tables(here, there)
    assert there.run["workers_lost"] == removed, there.run["faults"]
    assert [f["kind"] for f in there.run["faults"]] == ["lost"], there.run["faults"]


@pytest.mark.parametrize(("options", "shards"), [(RERANK, None), (Options(), 2)], ids=["rerank", "sharded"])
def test_a_chunk_the_scheduler_cancels_is_submitted_again(dataset, options, shards):
    """A chunk not yet fetched is cancelled on the scheduler mid-run (as the scheduler does for a key it released
    or forgot): it is submitted again under a new key, counted once, and run.json says so."""
    here = evaluate(dataset, options, chunk_rows=512)
    c, client = cluster()
    with c, client:
        cancelled = []

        def cancel_another(stats, done, total):
            if cancelled:
                return
            key = next(k for k in sorted(chunk_keys(client)) if TaskKey.parse(k).q0 != stats["q0"])
            cancelled.append(key)
            cancel_on_scheduler(client, key, "released-by-test")
            deadline = time.monotonic() + 30
            while client.futures[key].status != "cancelled":  # the driver's next result sees it
                assert time.monotonic() < deadline
                time.sleep(0.02)

        seen = []
        there = evaluate(dataset, options, client=client, chunk_rows=512, gallery_shards=shards,
                         on_chunk=lambda stats, done, total: (seen.append((stats["q0"], done, total)),
                                                              cancel_another(stats, done, total)))
    (key,) = cancelled
    same_tables(here, there)
    assert [d for _, d, _ in seen] == [1, 2, 3] and sorted(q0 for q0, _, _ in seen) == [0, 512, 1024], seen
    (fault,) = there.run["faults"]
    assert (fault["kind"], fault["action"], fault["tasks"]) == ("cancelled", "released-by-test", [key]), fault
    assert there.run["workers_lost"] == [] and there.run["retried_chunks"] == fault["chunks"]
    assert any("cancelled" in w and "ran again" in w for w in there.run["warnings"]), there.run["warnings"]


def test_a_chunk_cancelled_every_time_fails_the_run_naming_it(dataset):
    """Chunk 0 sleeps 2 s in every attempt, and each of its submissions is cancelled on the scheduler: the run
    fails after CANCELLED_RETRIES resubmissions with one ClusterError naming its queries, not a wait for ever."""
    c, client = cluster(env={TEST_STALL_ENV: "0:2"})
    stop = threading.Event()
    cancels = []

    def cancel_chunk_0():
        while not stop.wait(0.05):
            for key in chunk_keys(client):
                if key.startswith("evalcore-chunk-0-") and key not in cancels:
                    cancels.append(key)
                    cancel_on_scheduler(client, key, "test")

    with c, client:
        thread = threading.Thread(target=cancel_chunk_0, daemon=True)
        thread.start()
        started = time.monotonic()
        try:
            with pytest.raises(ClusterError, match=f"cancelled the task of queries 0-511 {CANCELLED_RETRIES + 1} times"):
                evaluate(dataset, Options(), client=client, chunk_rows=512)
        finally:
            stop.set()
            thread.join(timeout=10)
    assert time.monotonic() - started < 60
    assert len(cancels) == CANCELLED_RETRIES + 1 and cancels[-1].endswith(f"-r{CANCELLED_RETRIES}"), cancels


def test_a_resubmitted_chunk_keeps_its_queries_and_run_in_its_key():
    from distributed.client import FutureCancelledError

    from evalcore.engine.faults import FINAL_CANCEL_REASONS, resubmittable, task_key, task_queries

    key = task_key("scan", 512, 768, "0123abcd" * 4, (0, 4000), attempt=2)
    assert key == "evalcore-scan-512-768-0-4000-0123abcd-r2"
    parsed = TaskKey.parse(key)
    assert parsed is not None and (parsed.run, parsed.attempt, parsed.span) == ("0123abcd", 2, (512, 768))
    assert task_queries(key) == "queries 512-767, gallery rows 0-3999"
    assert str(TaskKey.parse("evalcore-chunk-0-256-0123abcd")) == "evalcore-chunk-0-256-0123abcd"
    assert resubmittable(FutureCancelledError(key, "already forgotten"))
    assert resubmittable(FutureCancelledError(key, None))
    assert not any(resubmittable(FutureCancelledError(key, r)) for r in FINAL_CANCEL_REASONS)
    assert not resubmittable(RuntimeError("a task's own error"))
