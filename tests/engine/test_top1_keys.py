"""A run reads ``gallery/key`` once: the checks hand it on and the rank-1 keys are taken from it."""
import numpy as np
import pyarrow as pa
import pytest

import evalcore
import evalcore.io.dataset as ds
import evalcore.io.validate as validate_module
from evalcore.engine.reduce import add_top1_keys


def _ranked_dataset(path, n_query=30, n_gallery=200, k=8, seed=0):
    """Precomputed lists (some rows padded with -1, one row empty) and labels, gallery keys not in index order."""
    rng = np.random.default_rng(seed)
    items = np.stack([rng.permutation(n_gallery)[:k] for _ in range(n_query)]).astype(np.int64)
    items[3, 5:] = -1
    items[7, :] = -1
    keys = np.array(sorted(f"doc-{v:05d}" for v in rng.choice(90000, n_gallery, replace=False)), dtype=object)
    arrays = {
        "query/label": rng.integers(0, 12, n_query), "gallery/label": rng.integers(0, 12, n_gallery),
        "gallery/key": keys, "query/key": np.array([f"q{i}" for i in range(n_query)], dtype=object),
        "ranking/item": items,
    }
    ds.write_dataset(path, arrays)
    return items, keys


def test_the_rank1_keys_are_the_keys_of_the_rank1_items_and_gallery_key_is_read_once(tmp_path, monkeypatch):
    path = tmp_path / "lists.zarr"
    items, keys = _ranked_dataset(path)
    reads = []
    for module in (ds, validate_module):
        real = module.read_array

        def counted(arr, name, rows=None, real=real):
            reads.append(name)
            return real(arr, name, rows)

        monkeypatch.setattr(module, "read_array", counted)
    result = evalcore.evaluate(str(path))
    table = result.per_query
    # brute force: each row's first listed item (the lists are labels-only: every listed item is kept)
    expected = [keys[row[row >= 0][0]] if (row >= 0).any() else None for row in items]
    assert table.column("top1_key").to_pylist() == expected
    assert reads.count("gallery/key") == 1


def test_given_keys_and_keys_read_from_the_store_name_the_same_items(tmp_path):
    path = tmp_path / "lists.zarr"
    _, keys = _ranked_dataset(path, seed=1)
    group = ds.open_dataset(path)
    top1 = pa.array([5, None, 0, 199, 17, None], pa.int64())
    table = pa.table({"top1": top1})
    stored = ds.read_array(ds.array(group, "gallery/key"), "gallery/key")
    from_store = add_top1_keys(group, table).column("top1_key")
    given = add_top1_keys(group, table, stored).column("top1_key")
    assert given.to_pylist() == from_store.to_pylist() == [keys[5], None, keys[0], keys[199], keys[17], None]
    assert given.type == from_store.type == pa.string()


def test_validate_hands_on_the_gallery_keys_up_to_its_bound(tmp_path, monkeypatch):
    path = tmp_path / "lists.zarr"
    _, keys = _ranked_dataset(path, seed=2)
    group = ds.open_dataset(path)
    kept: dict = {}
    assert not validate_module.validate(group, "class", scan_values=False, keep=kept)
    assert kept["gallery/key"].tolist() == keys.tolist()
    assert list(kept) == ["gallery/key"]
    monkeypatch.setattr(validate_module, "KEPT_KEY_ROWS", len(keys) - 1)
    kept = {}
    assert not validate_module.validate(group, "class", scan_values=False, keep=kept)
    assert kept == {}


@pytest.mark.parametrize("keys", [["b", "a", "c"], ["a", "b", "b"]])
def test_keys_as_stored_that_do_not_ascend_or_repeat_are_still_checked(tmp_path, keys):
    path = tmp_path / "dup.zarr"
    ds.write_dataset(path, {"query/label": np.array([0]), "gallery/label": np.array([0, 1, 0]),
                            "gallery/key": np.array(keys, dtype=object), "ranking/item": np.array([[0, 1, 2]])})
    problems = validate_module.validate(ds.open_dataset(path), "class", scan_values=False, keep={})
    repeated = len(set(keys)) < len(keys)
    assert bool(problems) == repeated
    if repeated:
        assert "gallery/key: duplicate keys 'b'" in str(problems.items[0])
