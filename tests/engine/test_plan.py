"""Planning: shard bounds, shard owners, the shard count chosen for a cluster, block sizes."""
from __future__ import annotations

import numpy as np
import pytest
import zarr

from evalcore.core.ranking import TILE_COLS
from evalcore.engine.plan import DatasetShape, block_rows, plan_shards, shard_bounds, shard_owners


def test_every_shard_has_owners_and_every_worker_owns_a_fair_share():
    workers = [f"tcp://w{i}" for i in range(4)]
    for n_shards in range(1, 13):
        owners = shard_owners(n_shards, workers)
        assert len(owners) == n_shards and all(owners)
        count = {w: sum(w in o for o in owners) for w in workers}
        if n_shards >= len(workers):
            assert all(len(o) == 1 for o in owners)  # one reader per shard: read once
            assert max(count.values()) - min(count.values()) <= 1
            # a worker's shards are contiguous: its scans walk one stretch of the gallery
            for w in workers:
                mine = [k for k, o in enumerate(owners) if o == [w]]
                assert mine == list(range(mine[0], mine[-1] + 1))
        else:
            assert sorted(w for o in owners for w in o) == workers  # every worker helps, none twice
    assert shard_owners(3, []) == [[], [], []]


def test_two_workers_and_four_shards_own_two_each():
    assert shard_owners(4, ["a", "b"]) == [["a"], ["a"], ["b"], ["b"]]
    assert shard_owners(2, ["a", "b", "c", "d"]) == [["a", "b"], ["c", "d"]]


def test_shard_bounds_cover_the_gallery_in_whole_blocks():
    for n, block, shards in [(10_000, 2048, 3), (2_000_000, 65536, 4), (5000, 8192, 4), (1, 2048, 2)]:
        bounds = shard_bounds(n, block, shards)
        assert bounds[0][0] == 0 and bounds[-1][1] == n
        assert all(a == prev for (_, prev), (a, _) in zip(bounds[:-1], bounds[1:]))
        unit = block if n // block >= shards else TILE_COLS
        assert all(a % unit == 0 for a, _ in bounds)
        sizes = [b - a for a, b in bounds]
        assert len(bounds) == min(shards, -(-n // unit))
        assert max(sizes) - min(sizes) <= unit  # equal work for the shards' owners, to a block


def _gallery(tmp_path, rows: int, dims: int, chunk: int):
    root = zarr.open_group(tmp_path / "g.zarr", mode="w")
    root.create_array("gallery/emb", shape=(rows, dims), chunks=(chunk, dims), dtype="float16")
    return root


@pytest.mark.parametrize("workers, want", [(1, 3), (2, 4), (3, 3), (4, 4)])
def test_a_chosen_shard_count_is_a_multiple_of_the_workers(tmp_path, workers, want):
    root = _gallery(tmp_path, 300_000, 64, 65536)
    shape = DatasetShape(10, 300_000, "embeddings", dims=64)
    budget = 300_000 * 64 * 4 // 3 + 1  # the gallery needs three budgets' worth
    assert len(plan_shards(root, shape, budget, None, workers)) == want
    # asked for, the count is kept; one shard is no sharding
    assert len(plan_shards(root, shape, budget, 5, workers)) == 5
    assert plan_shards(root, shape, budget, 1, workers) is None
    assert plan_shards(root, shape, 10 ** 12, None, workers) is None


def test_blocks_are_whole_tiles_and_whole_zarr_chunks_where_those_are_small():
    for chunk, dims in [(65536, 128), (1000, 64), (10 ** 7, 256), (1, 2048)]:
        rows = block_rows(chunk, dims)
        assert rows % TILE_COLS == 0 and rows >= TILE_COLS
        if chunk * dims * 4 <= 4 * (64 << 20):
            assert rows >= chunk
    assert block_rows(65536, 128) * 128 * 4 <= np.int64(4) * (64 << 20)
