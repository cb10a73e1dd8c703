"""engine.faults.broadcasts_kept: Dask's active memory manager is paused for the run and restored after,
on a real scheduler (tests/test_faults.py kills a worker under it)."""
from __future__ import annotations

import pytest
from distributed import Client, LocalCluster

from evalcore.engine.faults import broadcasts_kept


@pytest.fixture(scope="module")
def client():
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as c:
        yield c


def test_paused_during_the_run_and_restarted_after(client):
    client.amm.start()
    with broadcasts_kept(client):
        assert not client.amm.running()
    assert client.amm.running()


def test_restarted_after_a_failing_run_and_left_off_when_it_was_off(client):
    client.amm.start()
    with pytest.raises(RuntimeError), broadcasts_kept(client):
        raise RuntimeError("the run failed")
    assert client.amm.running()
    client.amm.stop()
    with broadcasts_kept(client):
        assert not client.amm.running()
    assert not client.amm.running()  # it was off before: not started by the run
    client.amm.start()
