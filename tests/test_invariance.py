"""Results do not depend on Zarr chunking, task size, worker count or the order chunks finish."""
import numpy as np
import pytest
from conftest import random_reid

from evalcore.core.ranking import TILE_ROWS
from evalcore.engine.evaluate import Options, evaluate
from evalcore.engine.plan import plan_chunks

OPTS = Options(protocol="reid", ks=(1, 5, 10), threshold=0.7, map_at=5)


@pytest.fixture(scope="module")
def arrays():
    rng = np.random.default_rng(21)
    data = random_reid(rng, n_query=700, n_gallery=9000, dims=24, n_ids=400)
    # exact duplicates of gallery rows under other labels: ties that a chunking change must not flip
    data["gallery/emb"][100:140] = data["gallery/emb"][5000:5040]
    return data


def tables_equal(a, b):
    assert a.per_query.equals(b.per_query), "per_query differs"
    assert a.summary.equals(b.summary), "summary differs"
    assert a.cmc.equals(b.cmc), "cmc differs"


def test_zarr_chunking_and_task_size_do_not_change_results(write, arrays):
    base = evaluate(write(arrays, name="a.zarr", chunk_rows=4096), OPTS)
    for chunk_rows, task_rows in ((97, None), (256, 256), (1000, 512), (700, 768)):
        other = evaluate(write(arrays, name=f"c{chunk_rows}.zarr", chunk_rows=chunk_rows), OPTS,
                         chunk_rows=task_rows)
        assert len(other.info["chunks"]) >= 1
        tables_equal(base, other)


def test_chunks_cover_queries_once_on_tile_boundaries():
    for n, rows, workers in ((700, 97, 1), (3368, 1024, 2), (10, 5000, 4), (256, 256, 8)):
        chunks = plan_chunks(n, rows, workers)
        flat = np.concatenate([np.arange(a, b) for a, b in chunks])
        assert np.array_equal(flat, np.arange(n))
        assert all(a % TILE_ROWS == 0 for a, _ in chunks)


def test_results_do_not_depend_on_the_order_chunks_finish(write, arrays, monkeypatch):
    """Reduce in chunk order even when chunks complete backwards."""
    import evalcore.engine.schedule as ev

    path = write(arrays, name="o.zarr", chunk_rows=256)
    forward = evaluate(path, OPTS)
    calls = []
    original = ev.evaluate_chunk

    def record(*args, **kw):
        calls.append(args[2])
        return original(*args, **kw)

    monkeypatch.setattr(ev, "evaluate_chunk", record)
    again = evaluate(path, OPTS)
    assert calls == sorted(calls)
    tables_equal(forward, again)


@pytest.mark.cluster
def test_worker_count_does_not_change_results(write, arrays):
    from distributed import Client, LocalCluster

    path = write(arrays, name="w.zarr", chunk_rows=256)
    local = evaluate(path, OPTS)
    for n_workers in (1, 2):
        with LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=None) as c, \
                Client(c) as client:
            tables_equal(local, evaluate(path, OPTS, client=client))


@pytest.mark.parametrize("shards", [2, 3])
def test_sharded_gallery_equals_the_unsharded_run(write, arrays, shards):
    """(chunk x gallery shard) tasks whose counts are added give the very same tables."""
    big = dict(arrays)
    rng = np.random.default_rng(5)
    extra = rng.standard_normal((20000, big["gallery/emb"].shape[1])).astype(np.float32)
    for name, fill in (("gallery/emb", extra), ("gallery/label", rng.integers(-1, 400, 20000)),
                       ("gallery/cam", rng.integers(0, 4, 20000)), ("gallery/junk", rng.random(20000) < 0.01)):
        big[name] = np.concatenate([big[name], fill.astype(big[name].dtype)])
    path = write(big, name="s.zarr", chunk_rows=4096)
    whole = evaluate(path, OPTS)
    sharded = evaluate(path, OPTS, gallery_shards=shards)
    assert len(sharded.info["gallery_shards"]) == shards
    tables_equal(whole, sharded)


@pytest.mark.cluster
def test_sharded_gallery_on_worker_processes(write, arrays):
    from distributed import Client, LocalCluster

    path = write(arrays, name="sw.zarr", chunk_rows=4096)
    whole = evaluate(path, OPTS)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c, \
            Client(c) as client:
        sharded = evaluate(path, OPTS, client=client, gallery_shards=2)
    bounds = sharded.info["gallery_shards"]
    assert len(bounds) == 2 and bounds[0][0] == 0 and bounds[-1][1] == 9000
    assert bounds[0][1] == bounds[1][0] and bounds[0][1] % 4096 == 0
    tables_equal(whole, sharded)


def test_bad_gallery_rows_are_reported_from_a_sharded_run(write, arrays):
    from evalcore.errors import InputError

    bad = dict(arrays, **{"gallery/emb": arrays["gallery/emb"].copy()})
    bad["gallery/emb"][8500, 3] = np.nan  # in the second shard
    path = write(bad, name="bad.zarr", chunk_rows=4096)
    with pytest.raises(InputError, match="gallery/emb: rows 8500 contain NaN"):
        evaluate(path, OPTS, gallery_shards=2)
