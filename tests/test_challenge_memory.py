"""Big submissions in bounded memory: a submission larger than ``service.SPILL_BYTES`` is checked and scored
with the memory of a block and of a query chunk's judged rows, not of the submission (issue 24, item 4).

The 4 GiB case (2M x 512 float32) is the same code with larger numbers; here a 391 MiB gallery is scored in a
fresh process with the thresholds scaled down, and the growth of its peak resident memory is held to a bound
proportional to those sizes, far below the gallery's size. The score is the brute force of
tests/challenge_data.py."""
import json
import subprocess
import sys

import numpy as np
import pytest
from challenge_data import reference_split_maps

from evalcore.io import dataset as ds

N_QUERY, N_GALLERY, DIMS, JUDGED = 120, 400_000, 256, 20
GALLERY_MIB = N_GALLERY * DIMS * 4 / 2**20   # 391 MiB of float32
BLOCK_ROWS, CHUNK_MIB = 8192, 8              # 4 MiB blocks, 8 MiB of judged rows per query chunk
BOUND_MIB = 256   # what the process may grow by while checking and scoring (measured ~145; from memory: ~510)

SCRIPT = """
import json, sys, threading, time
from pathlib import Path
import psutil
from evalcore.io import challenge as ch
from evalcore.jobs import service
truth_small, sub_small, truth, sub, work = sys.argv[1:6]
ch.BLOCK_ROWS = int(sys.argv[6])
service.score_path(service.load_truth(truth_small), sub_small)   # kernels loaded, imports done
loaded = service.load_truth(truth)
service.SPILL_BYTES, service.CHUNK_BYTES = int(sys.argv[8]), int(sys.argv[7]) << 20
service.SPILL_CHUNK_ROWS = 2048   # 2 MiB chunks of the temporary copy: zarr decodes several at once
me, peak, stop = psutil.Process(), [0], []
def sample():  # resident memory every 5 ms while the submission is checked and scored
    while not stop:
        peak[0] = max(peak[0], me.memory_info().rss)
        time.sleep(0.005)
before = me.memory_info().rss
watcher = threading.Thread(target=sample)
watcher.start()
s = ch.open_submission(sub)
fingerprint = ch.check_submission(s, loaded.n_query, loaded.n_gallery, loaded.dims)
scored = service.score_checked(loaded, s, fingerprint, work=Path(work))
stop.append(1)
watcher.join()
print(json.dumps({"growth_mib": (peak[0] - before) / 2**20, "map": scored.map, "splits": dict(scored.split_maps),
                  "left": sorted(p.name for p in Path(work).iterdir())}))
"""


def write_truth(path, n_query, n_gallery, dims, seed):
    rng = np.random.default_rng(seed)
    qi = np.repeat(np.arange(n_query), JUDGED)
    ii = np.concatenate([rng.choice(n_gallery, JUDGED, replace=False) for _ in range(n_query)])
    rel = (rng.random(qi.size) < 0.3).astype(np.int8)
    rel[::JUDGED] = 1
    arrays = {"query/key": np.array([f"q{i}" for i in range(n_query)], object),
              "gallery/key": np.array([f"g{i}" for i in range(n_gallery)], object),
              "qrels/query": qi, "qrels/item": ii, "qrels/rel": rel,
              "query/split": np.array(["private" if i % 3 == 0 else "public" for i in range(n_query)], object)}
    ds.write_dataset(str(path), arrays, {"protocol": "qrels", "dims": dims})
    return arrays


def write_submission(folder, truth, dims, seed):
    """query.npy and gallery.npy of unit float32 rows; each query near the sum of its relevant items."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    n_gallery, n_query = len(truth["gallery/key"]), len(truth["query/key"])
    gallery = rng.standard_normal((n_gallery, dims), dtype=np.float32)
    gallery /= np.linalg.norm(gallery, axis=1, keepdims=True)
    query = np.zeros((n_query, dims))
    hit = truth["qrels/rel"] == 1
    np.add.at(query, truth["qrels/query"][hit], gallery[truth["qrels/item"][hit]])
    query += 1.5 * rng.standard_normal(query.shape)
    query = (query / np.linalg.norm(query, axis=1, keepdims=True)).astype(np.float32)
    np.save(folder / "query.npy", query)
    np.save(folder / "gallery.npy", gallery)
    return query, gallery


@pytest.mark.slow
def test_a_big_submission_is_scored_in_memory_bounded_by_its_blocks(tmp_path):
    small = write_truth(tmp_path / "small.zarr", 20, 500, DIMS, 1)
    write_submission(tmp_path / "small-sub", small, DIMS, 2)
    truth = write_truth(tmp_path / "truth.zarr", N_QUERY, N_GALLERY, DIMS, 3)
    query, gallery = write_submission(tmp_path / "sub", truth, DIMS, 4)
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "small.zarr"), str(tmp_path / "small-sub"),
                           str(tmp_path / "truth.zarr"), str(tmp_path / "sub"), str(work), str(BLOCK_ROWS),
                           str(CHUNK_MIB), "0"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    want = reference_split_maps(truth, query, gallery)
    assert got["map"] == pytest.approx(want["all"], abs=1e-9)
    assert got["splits"] == pytest.approx({"private": want["private"], "public": want["public"]}, abs=1e-9)
    assert got["left"] == []  # the temporary copy is removed
    # one float32 copy of the gallery alone would be GALLERY_MIB (391 MiB)
    assert got["growth_mib"] <= BOUND_MIB < GALLERY_MIB, got


def test_npy_rows_are_read_a_block_at_a_time_and_equal_numpy(tmp_path):
    """NpyRows (what open_submission now returns for .npy) against numpy's own reading, float16 and float64,
    and a Fortran-order file (memory-mapped instead)."""
    from evalcore.io import challenge as ch

    rng = np.random.default_rng(0)
    for dtype in ("float16", "float64"):
        a = rng.standard_normal((1000, 7)).astype(dtype)
        np.save(tmp_path / "query.npy", a)
        np.save(tmp_path / "gallery.npy", np.asfortranarray(a))
        sub = ch.open_submission(tmp_path)
        rows = sub.arrays["query"]
        assert isinstance(rows, ch.NpyRows) and not isinstance(sub.arrays["gallery"], ch.NpyRows)
        for sl in (slice(0, 1000), slice(10, 17), slice(990, 2000), slice(5, 5)):
            assert np.array_equal(rows[sl], a[sl]) and rows[sl].dtype == a.dtype
            assert np.array_equal(np.asarray(sub.arrays["gallery"][sl]), a[sl])


def test_judged_only_asked_for_gallery_shards_still_ranks_among_judged_items(tmp_path):
    """A judged-only run that would be sharded (asked here; a big gallery on a cluster gets shards by itself)
    ranks each query among its judged items, as the brute force does: shards scanned the whole gallery."""
    from challenge_data import make_truth, submission

    from evalcore.engine.evaluate import evaluate
    from evalcore.jobs.service import score_options

    truth = make_truth(tmp_path / "t.zarr", n_gallery=2000)
    q, g = submission(truth, seed=7, noise=1.0)
    ds.write_dataset(str(tmp_path / "d.zarr"), {**{k: v for k, v in truth.items() if k != "query/split"},
                                                "query/emb": q, "gallery/emb": g},
                     {"protocol": "qrels", "dims": q.shape[1]}, chunk_rows=256)
    result = evaluate(str(tmp_path / "d.zarr"), score_options(), gallery_shards=4)
    assert result.metrics["map"] == pytest.approx(reference_split_maps(truth, q, g)["all"], abs=1e-9)
