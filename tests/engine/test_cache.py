"""The run cache: a byte budget, least recently used spans out first, one run at a time, forgotten at the end."""
from __future__ import annotations

import numpy as np
import pytest

from evalcore.engine import cache
from evalcore.engine.gallery import GalleryBlocks, gallery_side
from evalcore.io import dataset as ds


@pytest.fixture(autouse=True)
def no_cache_left():
    yield
    held = cache.current()
    if held is not None:
        cache.forget_run(held.run_id)


def test_spans_are_kept_while_they_fit_the_budget_least_recently_used_out_first():
    c = cache.run_cache("run-a", budget=100)
    a = c.span((0, 10), 40)
    b = c.span((10, 20), 40)
    assert a is not None and b is not None and c.nbytes == 80
    a["block"] = 1
    assert c.span((0, 10), 40) is a  # held: the same store, now the most recently used
    c.span((20, 30), 40)  # needs room: (10, 20) was used least recently
    assert c.spans() == [(0, 10), (20, 30)] and c.nbytes == 80
    assert c.span((0, 10), 40)["block"] == 1
    assert c.span((30, 40), 101) is None  # larger than the whole budget: not cached at all
    assert c.spans() == [(20, 30), (0, 10)]


def test_a_new_run_replaces_the_cache_and_forgetting_a_run_empties_it():
    first = cache.run_cache("run-a", 100)
    first.span((0, 10), 10)["x"] = 1
    assert cache.run_cache("run-a", 0) is first and first.budget == 100  # asking with 0 keeps the budget
    second = cache.run_cache("run-b", 100)
    assert second is not first and cache.current() is second
    assert first.spans() == []  # the old run's blocks are let go, not kept beside the new ones
    cache.forget_run("run-a")  # not the run held: nothing happens
    assert cache.current() is second
    cache.forget_run("run-b")
    assert cache.current() is None


def test_gallery_blocks_of_one_run_are_read_once(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    group = ds.write_dataset(tmp_path / "d.zarr", {"query/emb": rng.standard_normal((4, 8), dtype=np.float32),
                                                   "gallery/emb": rng.standard_normal((5000, 8), dtype=np.float32),
                                                   "gallery/label": rng.integers(0, 9, 5000)}, chunk_rows=1024)
    reads = []
    original = ds.read_array

    def counting(array, name, rows):
        reads.append((name, rows))
        return original(array, name, rows)

    monkeypatch.setattr(ds, "read_array", counting)
    for _ in range(3):  # three tasks of one run
        blocks = GalleryBlocks(group, "cosine", run_id="r1", cache_bytes=1 << 20)
        rows = np.concatenate([b for _, b in blocks.blocks()])
    assert len(reads) == -(-5000 // blocks.block_rows)
    assert rows.shape == (5000, 8)
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1, rtol=1e-6)
    # a task of another run reads again: a rewritten dataset is never served stale
    GalleryBlocks(group, "cosine", run_id="r2", cache_bytes=1 << 20).rows(np.array([0, 4999]))
    assert len(reads) == 2 * -(-5000 // blocks.block_rows)
    # gallery-side arrays: once per run
    side = gallery_side(group, "r2", ("label",))
    assert gallery_side(group, "r2", ("label",)) is side
    assert np.array_equal(side["label"], ds.read(group, "gallery/label"))
