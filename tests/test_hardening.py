"""Nothing silently wrong: missing or corrupt chunks, numbers float32 cannot hold, too little memory.

Each case is a real Zarr store damaged the way it happens (a chunk file
deleted, truncated or overwritten, bad JSON in ``zarr.json``), checked
against the undamaged data or the brute-force reference in tests/reference.py.
"""
from __future__ import annotations

import os
import time

import numpy as np
import pytest
from conftest import random_reid
from test_cluster import run
from test_reference import ambiguous_queries, compare, quantized, reference

from evalcore.engine.evaluate import Options, evaluate
from evalcore.errors import InputError
from evalcore.io import dataset as ds
from evalcore.io.validate import validate

KS = (1, 5)


def small(seed=1, n_query=300, n_gallery=4000, dims=16):
    arrays = random_reid(np.random.default_rng(seed), n_query=n_query, n_gallery=n_gallery, dims=dims)
    return {k: v for k, v in arrays.items() if k != "query/group"}


def one_line_error(result) -> str:
    """The CLI's whole stderr, which must be one line with no traceback."""
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


# --------------------------------------------------------------------------- missing chunks


@pytest.mark.parametrize("name,similarity", [("gallery/label", "cosine"), ("gallery/emb", "dot"),
                                             ("query/cam", "cosine")])
def test_a_missing_chunk_is_an_error_naming_the_array_and_rows(write, name, similarity):
    path = write(small(), chunk_rows=1000 if name.startswith("gallery") else 100)
    chunk = path / name / "c" / ("2/0" if name.endswith("/emb") else "2")
    assert chunk.is_file()
    chunk.unlink()
    rows = "rows 2000-2999" if name.startswith("gallery") else "rows 200-299"
    with pytest.raises(InputError, match=f"^{name}: chunk 2 \\({rows}\\) is missing"):
        evaluate(path, Options(protocol="reid", similarity=similarity, ks=KS))
    problems = validate(ds.open_dataset(path), "reid", similarity=similarity)
    assert any(p.startswith(f"{name}: chunk 2 ({rows}) is missing") for p in problems.messages()), problems.items
    result = run("validate", path, "--protocol", "reid")
    assert result.returncode == 2 and "is missing" in result.stdout + result.stderr, result


def test_chunks_of_fill_values_are_stored_so_they_are_not_missing(write):
    # all-False junk and all-zero labels: zarr leaves such chunks out unless told to store them
    arrays = small()
    arrays["gallery/junk"] = np.zeros(4000, bool)
    arrays["gallery/label"][:1000] = 0
    path = write(arrays, chunk_rows=1000)
    assert not validate(ds.open_dataset(path), "reid")
    result = evaluate(path, Options(protocol="reid", ks=KS))
    skip = ambiguous_queries(arrays, "reid")
    compare(result, reference(arrays, "reid", KS), KS, skip=skip)


@pytest.mark.cluster
def test_a_missing_chunk_on_s3_is_an_error(tmp_path):
    import fsspec
    from s3server import s3_server

    # moto keeps one store per process: a bucket of its own keeps this test out of test_s3's way
    with s3_server(bucket="evalcore-hardening") as s3:
        url = f"s3://{s3.bucket}/missing-chunk.zarr"
        arrays = {k: v for k, v in small().items() if k.endswith(("/emb", "/label"))}
        ds.write_dataset(url, arrays, chunk_rows=1000, storage_options=s3.storage_options)
        fs = fsspec.filesystem("s3", **s3.storage_options)
        fs.rm(f"{s3.bucket}/missing-chunk.zarr/gallery/label/c/3")
        try:
            with pytest.raises(InputError, match=r"^gallery/label: chunk 3 \(rows 3000-3999\) is missing"):
                evaluate(url, Options(protocol="class", ks=KS), storage_options=s3.storage_options)
        finally:
            fs.rm(f"{s3.bucket}/missing-chunk.zarr", recursive=True)


# --------------------------------------------------------------------------- corrupt chunks and metadata


def _damage(path, how: str) -> tuple[str, str]:
    """Damage one file of the store; (array, text the error must contain)."""
    if how == "truncated":
        f = path / "gallery/cam/c/1"
        f.write_bytes(f.read_bytes()[:40])
        return "gallery/cam", "chunk 1 (rows 1000-1999)"
    if how == "random-bytes":
        f = path / "gallery/label/c/2"
        f.write_bytes(np.random.default_rng(0).bytes(len(f.read_bytes())))
        return "gallery/label", "chunk 2 (rows 2000-2999)"
    if how == "embedding-truncated":
        f = path / "gallery/emb/c/3/0"
        f.write_bytes(f.read_bytes()[:1000])
        return "gallery/emb", "chunk 3 (rows 3000-3999)"
    assert how == "bad-json"
    (path / "query/cam/zarr.json").write_text('{"zarr_format": 3, "node_type": "array",')
    return "query/cam", "metadata cannot be read"


@pytest.mark.cluster
@pytest.mark.parametrize("how", ["truncated", "random-bytes", "embedding-truncated", "bad-json"])
def test_a_corrupt_chunk_is_one_line_naming_the_array_exit_2(write, how):
    path = write(small(), chunk_rows=1000)
    name, where = _damage(path, how)
    out = path.parent / "out"
    result = run("evaluate", path, "--out", out, "--workers", "2", "--chunk-rows", "256", timeout=120)
    assert result.returncode == 2, result.stderr
    message = one_line_error(result)
    assert message.startswith(f"evalcore: error: {name}: ") and where in message, message
    assert not out.exists()
    checked = run("validate", path, "--protocol", "reid")
    assert checked.returncode == 2 and name in checked.stdout + checked.stderr, checked


@pytest.mark.cluster
def test_a_corrupt_gallery_chunk_in_a_sharded_run_is_one_line(write):
    path = write(small(n_gallery=9000), chunk_rows=1000)
    name, where = _damage(path, "embedding-truncated")
    result = run("evaluate", path, "--out", path.parent / "out", "--workers", "2", "--gallery-shards", "2",
                 timeout=120)
    assert result.returncode == 2, result.stderr
    message = one_line_error(result)
    assert message.startswith(f"evalcore: error: {name}: {where}"), message


def test_a_corrupt_chunk_read_in_process_is_an_input_error(write):
    path = write(small(), chunk_rows=1000)
    _damage(path, "random-bytes")
    with pytest.raises(InputError, match=r"^gallery/label: chunk 2 \(rows 2000-2999\) cannot be read"):
        evaluate(path, Options(protocol="reid", ks=KS))


# --------------------------------------------------------------------------- numbers float32 cannot hold


def test_tiny_rows_under_cosine_rank_as_their_direction(write):
    """Rows scaled to subnormal (1e-44) or huge (1e37) values: 1/||x|| is outside float32's normal range."""
    arrays = small(seed=4, n_query=300, n_gallery=3000, dims=8)
    rng = np.random.default_rng(5)
    for side, n in (("query", 300), ("gallery", 3000)):
        emb = arrays[f"{side}/emb"].astype(np.float64)
        picked = rng.permutation(n)
        for i, scale in enumerate((1e-44, 1e-41, 1e-39, 1e37)):
            emb[picked[i * n // 20:(i + 1) * n // 20]] *= scale
        arrays[f"{side}/emb"] = emb.astype(np.float32)
        assert np.all(np.abs(arrays[f"{side}/emb"]).max(axis=1) > 0)  # no row underflowed to zero
        assert np.all(np.isfinite(arrays[f"{side}/emb"]))
    path = write(arrays, chunk_rows=500)
    assert not validate(ds.open_dataset(path), "reid"), "non-zero finite rows are valid under cosine"
    result = evaluate(path, Options(protocol="reid", ks=KS))
    skip = ambiguous_queries(arrays, "reid")
    assert len(skip) < 0.2 * 300
    compare(result, reference(arrays, "reid", KS), KS, skip=skip)


def test_dot_products_that_overflow_float32_are_an_input_error(write):
    arrays = quantized(small(seed=6, n_query=300, n_gallery=3000, dims=12))
    # exact under float32 at 2**60 (a power of two keeps every product exact) ...
    safe = {k: (v * np.float32(2.0 ** 60) if k.endswith("/emb") else v) for k, v in arrays.items()}
    result = evaluate(write(safe, name="safe.zarr"), Options(protocol="reid", ks=KS, similarity="dot"))
    compare(result, reference(safe, "reid", KS, similarity="dot"), KS)
    # ... but at 2**64 a few rows' products pass float32's largest value (3.4e38)
    big = dict(safe)
    for name, rows in (("query/emb", [3, 250]), ("gallery/emb", [7, 2999])):
        big[name] = safe[name].copy()
        big[name][rows] *= np.float32(16.0)
    norms = {k: np.linalg.norm(big[k].astype(np.float64), axis=1) for k in ("query/emb", "gallery/emb")}
    assert norms["query/emb"].max() * norms["gallery/emb"].max() > np.finfo(np.float32).max
    path = write(big, name="big.zarr", chunk_rows=1000)
    with pytest.raises(InputError, match=r"^gallery/emb: rows 7, 2999 .*query/emb rows 3, 250 .*scale the "):
        evaluate(path, Options(protocol="reid", ks=KS, similarity="dot"))
    problems = validate(ds.open_dataset(path), "reid", similarity="dot")
    assert any(p.startswith("gallery/emb: rows 7, 2999") and "query/emb rows 3, 250" in p for p in problems.messages())
    assert not validate(ds.open_dataset(path), "reid", similarity="cosine")  # cosine normalises first


def test_dot_overflow_is_checked_in_judged_only_runs(write):
    rng = np.random.default_rng(2)
    q = rng.standard_normal((20, 8)).astype(np.float32)
    g = rng.standard_normal((50, 8)).astype(np.float32)
    g[4] *= np.float32(1e20)
    q[1] *= np.float32(1e20)
    qrels = {"qrels/query": np.repeat(np.arange(20), 3), "qrels/item": np.tile([4, 9, 11], 20),
             "qrels/rel": np.ones(60, np.int8)}
    path = write({"query/emb": q, "gallery/emb": g, **qrels})
    with pytest.raises(InputError, match=r"^gallery/emb: rows 4 .*query/emb rows 1 "):
        evaluate(path, Options(protocol="qrels", similarity="dot", judged_only=True, ks=(1,)))


# --------------------------------------------------------------------------- precomputed rankings


def test_validate_names_rows_that_rank_one_item_twice(write):
    items = np.tile(np.arange(5), (10, 1))
    items[3, 4] = 1
    items[7, 2] = 0
    items[8, 3:] = -1  # padding twice is fine
    path = write({"ranking/item": items, "query/label": np.zeros(10, np.int64),
                  "gallery/label": np.zeros(20, np.int64)})
    problems = validate(ds.open_dataset(path), "class")
    assert any(p.startswith("ranking/item: rows 3, 7 name a gallery item more than once") for p in problems.messages()), \
        problems.items


# --------------------------------------------------------------------------- resources


@pytest.mark.cluster
def test_a_memory_limit_too_small_for_a_worker_is_a_clear_error(write):
    path = write(small())
    started = time.monotonic()
    result = run("evaluate", path, "--out", path.parent / "out", "--workers", "1", "--memory-limit", "100MB",
                 timeout=90)
    assert time.monotonic() - started < 30
    assert result.returncode == 2, result.stderr
    message = one_line_error(result)
    assert message.startswith("evalcore: error: --memory-limit: 100MB per worker is too small"), message
    assert "at least 512MiB" in message
    assert not (path.parent / "out").exists()


def test_failure_messages_name_the_queries_of_every_kind_of_task():
    from types import SimpleNamespace

    from distributed.scheduler import KilledWorker

    from evalcore.engine.cluster import explain_failure, task_queries
    from evalcore.engine.plan import DatasetShape, TaskContext
    from evalcore.engine.schedule import submit_chunks

    class Recorder:
        def __init__(self):
            self.keys = []

        def submit(self, fn, *args, key, **kwargs):
            self.keys.append((fn.__name__, key, args))
            return key

    chunks, shards = [(0, 256), (256, 512)], [(0, 4096), (4096, 9000)]
    client = Recorder()
    shape = DatasetShape(512, 9000, "embeddings", dims=8)
    submit_chunks(client, "ds.zarr", Options(), chunks, None, TaskContext(shape, "0123abcd" * 4), shards)
    submit_chunks(client, "ds.zarr", Options(), chunks, None, TaskContext(shape, "99999999" * 4), None)
    assert len(client.keys) == 2 + 2 + 2 * 2 + 2 + 2  # truth, bands (a batch per shard), scans, combine; unsharded
    for fn, key, args in client.keys:
        q0, q1 = args[2], args[3]  # (path, options, q0, q1, ...)
        want = f"queries {q0}-{q1 - 1}"
        if fn in ("shard_bands", "scan_shard"):
            want += f", gallery rows {args[4]}-{args[5] - 1}"
        assert task_queries(key) == want, (fn, key)
    scan = next(k for fn, k, a in client.keys if fn == "scan_shard" and a[2] == 256 and a[4] == 4096)
    worker = SimpleNamespace(address="tcp://10.0.0.5:40000", memory_limit=1 << 30)
    message = explain_failure(KilledWorker(scan, worker, 3), None)
    assert "while it evaluated queries 256-511, gallery rows 4096-8999, 4 times" in message, message


def test_worker_watch_timeout_comes_from_the_environment(monkeypatch):
    from evalcore.engine.cluster import NO_WORKERS_TIMEOUT_ENV, no_workers_timeout

    monkeypatch.setenv(NO_WORKERS_TIMEOUT_ENV, "2.5")
    assert no_workers_timeout() == 2.5
    monkeypatch.delenv(NO_WORKERS_TIMEOUT_ENV)
    assert no_workers_timeout() == 30.0
    assert os.environ.get(NO_WORKERS_TIMEOUT_ENV) is None


def test_dot_overflow_is_found_when_a_later_chunk_meets_cached_gallery_blocks(write):
    # chunk 1 (queries 0-255) reads and caches every gallery block; only chunk 2 holds the large query row
    arrays = quantized(small(seed=8, n_query=300, n_gallery=3000, dims=12))
    arrays["query/emb"] = arrays["query/emb"] * np.float32(2.0 ** 62)
    arrays["gallery/emb"] = arrays["gallery/emb"] * np.float32(2.0 ** 62)
    arrays["query/emb"][280] *= np.float32(64.0)
    path = write(arrays, chunk_rows=1000)
    norms = {k: np.linalg.norm(arrays[k].astype(np.float64), axis=1) for k in ("query/emb", "gallery/emb")}
    assert norms["query/emb"][:256].max() * norms["gallery/emb"].max() < np.finfo(np.float32).max / 2
    assert norms["query/emb"][280] * norms["gallery/emb"].max() > np.finfo(np.float32).max
    with pytest.raises(InputError, match=r"^gallery/emb: rows .*query/emb rows 280 .*scale the "):
        evaluate(path, Options(protocol="reid", ks=KS, similarity="dot"), chunk_rows=256)
