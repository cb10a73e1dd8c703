"""The Python API as a notebook uses it: arrays in memory, a dataset path or group, Result and save()."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import zarr
from conftest import load_vector, random_reid, vector_arrays
from reference import cosine_scores, evaluate_all, relevance_reid

import evalcore
from evalcore.engine import evaluate as engine
from evalcore.io import dataset as ds

CLI = str(Path(sys.executable).with_name("evalcore"))
VECTORS = sorted(p.stem for p in (Path(__file__).parent / "fixtures" / "vectors").glob("*.json"))
KWARGS = {"query/emb": "query", "gallery/emb": "gallery", "query/label": "query_labels",
          "gallery/label": "gallery_labels", "query/cam": "query_cams", "gallery/cam": "gallery_cams",
          "gallery/junk": "gallery_junk", "query/group": "query_groups"}


class TensorLike:
    """What a CPU torch tensor offers numpy: ``__array__`` and nothing else (no torch needed)."""

    def __init__(self, values):
        self._values = np.asarray(values)

    def __array__(self, dtype=None, copy=None):
        return self._values if dtype is None else self._values.astype(dtype)


def as_kwargs(arrays: dict, wrap=lambda x: x) -> dict:
    return {KWARGS[name]: wrap(value) for name, value in arrays.items()}


def assert_tables_equal(a, b, skip=()):
    assert a.column_names == b.column_names
    for name in a.column_names:
        if name not in skip:
            assert a.column(name).to_pylist() == b.column(name).to_pylist(), name


@pytest.fixture(scope="module")
def reid_data():
    return random_reid(np.random.default_rng(7), n_query=600, n_gallery=5000, dims=24)


@pytest.mark.cluster
def test_numpy_arrays_give_the_same_per_query_table_as_the_command_line_on_zarr(tmp_path, reid_data):
    path = tmp_path / "ds.zarr"
    ds.write_dataset(path, reid_data)
    done = subprocess.run([CLI, "evaluate", str(path), "--out", str(tmp_path / "cli"), "--protocol", "reid",
                           "--workers", "2", "--quiet"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result = evalcore.evaluate(**as_kwargs(reid_data), protocol="reid")
    cli = pq.read_table(tmp_path / "cli" / "per_query.parquet")
    assert_tables_equal(result.per_query, cli)
    assert_tables_equal(result.summary, pq.read_table(tmp_path / "cli" / "summary.parquet"))


def test_tensor_like_and_dask_inputs_equal_numpy_and_the_brute_force_reference(reid_data):
    import dask.array as da

    from_numpy = evalcore.evaluate(**as_kwargs(reid_data), protocol="reid")
    from_tensors = evalcore.evaluate(**as_kwargs(reid_data, TensorLike), protocol="reid")
    from_dask = evalcore.evaluate(**as_kwargs(reid_data, lambda x: da.from_array(x, chunks=1000)
                                              if x.dtype != object else x), protocol="reid")
    assert_tables_equal(from_tensors.per_query, from_numpy.per_query)
    assert_tables_equal(from_dask.per_query, from_numpy.per_query)
    d = reid_data
    rel, junk = relevance_reid(d["query/label"], d["query/cam"], d["gallery/label"], d["gallery/cam"],
                               d["gallery/junk"])
    want = evaluate_all(cosine_scores(d["query/emb"], d["gallery/emb"]), rel, junk, (1, 3, 5, 10))
    got = from_numpy.per_query.to_pylist()
    for row, ref in zip(got, want):
        for name in ("n_relevant", "n_junk", "first_rank", "last_rank", "ap", "ap_trapz", "inp", "hit_at_5"):
            assert row[name] == (ref[name] if ref[name] is None else pytest.approx(ref[name], abs=1e-12)), \
                (row["query"], name)


@pytest.mark.parametrize("name", VECTORS)
def test_worked_examples_through_the_api_on_an_in_memory_group(name):
    case = load_vector(name)
    o = case["options"]
    group = ds.write_dataset(zarr.storage.MemoryStore(), vector_arrays(case))
    result = evalcore.evaluate(group, protocol=o["protocol"], ks=o["ks"], max_rank=5,
                               ties=o.get("ties") or "pessimistic", threshold=o.get("threshold"),
                               judged_only=bool(o.get("judged_only")), radius=o.get("radius"),
                               similarity=o.get("similarity"))
    expected = case["expected"]
    rows = result.per_query.to_pylist()
    assert len(rows) == len(expected["per_query"])
    for want, got in zip(expected["per_query"], rows):
        for col, val in want.items():
            assert got[col] == val if val is None or isinstance(val, (bool, str)) \
                else got[col] == pytest.approx(val, abs=1e-6), (name, want.get("query"), col)
    for col, val in expected["summary"].items():
        assert result.metrics[col] == (val if val is None else pytest.approx(val, abs=1e-6)), (name, col)
    curve = [r["cmc"] for r in result.cmc.to_pylist() if r["group"] == "all"][:5]
    assert curve == pytest.approx(expected["cmc"], abs=1e-6)


def test_the_dataset_attribute_gives_the_protocol_in_the_api_as_on_the_command_line(tmp_path, reid_data):
    path = tmp_path / "ds.zarr"
    ds.write_dataset(path, reid_data, {"protocol": "reid"})
    by_attribute = evalcore.evaluate(str(path))
    assert by_attribute.run["options"]["protocol"] == "reid"
    as_class = evalcore.evaluate(str(path), protocol="class")
    assert by_attribute.metrics["map"] != as_class.metrics["map"]  # reid's junk rule changes the ranks
    assert_tables_equal(by_attribute.per_query, evalcore.evaluate(zarr.open_group(str(path), mode="r")).per_query)


def test_errors_name_the_parameter_not_the_flag_or_the_array(reid_data):
    kwargs = as_kwargs(reid_data)
    with pytest.raises(evalcore.InputError, match=r"^query_labels: 3 rows"):
        evalcore.evaluate(**{**kwargs, "query_labels": [1, 2, 3]}, protocol="reid")
    with pytest.raises(evalcore.InputError, match=r"^max_rank: 0 must be a positive integer"):
        evalcore.evaluate(**kwargs, max_rank=0)
    bad = reid_data["gallery/emb"].copy()
    bad[11] = np.nan
    with pytest.raises(evalcore.InputError, match=r"^gallery: rows 11 contain NaN"):
        evalcore.evaluate(**{**kwargs, "gallery": bad}, protocol="reid")
    with pytest.raises(evalcore.InputError, match=r"^source: give a dataset or arrays"):
        evalcore.evaluate("somewhere.zarr", **kwargs)
    with pytest.raises(ValueError):  # InputError is a ValueError for callers that catch those
        evalcore.evaluate(**kwargs, ties="random")


def test_a_bad_stall_timeout_names_the_parameter_and_a_good_one_is_recorded_on_a_cluster_only(reid_data):
    kwargs = as_kwargs(reid_data)
    for bad in (-1, 0, "10", float("nan")):
        with pytest.raises(evalcore.OptionError) as err:
            evalcore.evaluate(**kwargs, stall_timeout=bad)
        assert err.value.option == "stall_timeout", str(err.value)
    result = evalcore.evaluate(**kwargs, protocol="reid", stall_timeout=30)
    assert result.run["execution"].startswith("in process")
    assert result.run["stall_timeout"] is None  # in this process there is no worker to stall
    assert (result.run["faults"], result.run["workers_lost"], result.run["retried_chunks"]) == ([], [], [])


def test_small_jobs_run_in_this_process_and_release_their_gallery_copy(reid_data):
    result = evalcore.evaluate(**as_kwargs(reid_data), protocol="reid")
    assert result.run["execution"].startswith("in process")
    from evalcore.engine import cache

    assert cache.current() is None  # the run's cache (normalised gallery, side arrays) went with it


@pytest.mark.parametrize("split_pairs", [8192, 1])
def test_in_process_threads_equal_one_thread_and_any_chunking(reid_data, monkeypatch, split_pairs):
    # the threads split each chunk's 5,000 columns off the 4,096-column tile grid (``column_spans``), and with
    # SPLIT_PAIRS = 1 its thresholds too (``pair_thresholds``); neither may change a number
    from evalcore.core.scan import base

    monkeypatch.setattr(base, "SPLIT_PAIRS", split_pairs)
    group = ds.write_dataset(zarr.storage.MemoryStore(), reid_data)
    options = engine.Options(protocol="reid")
    one = engine.evaluate(group, options, threads=1, chunk_rows=256)
    for threads, rows in ((2, 256), (3, 512), (2, 4096)):
        assert_tables_equal(engine.evaluate(group, options, threads=threads, chunk_rows=rows).per_query,
                            one.per_query)
    # unasked, a run whose chunks each use every thread takes chunks of 4,096 rows: here one
    planned = engine.evaluate(group, options, threads=2)
    assert planned.run["chunks"] == [[0, 600]]
    assert_tables_equal(planned.per_query, one.per_query)
    assert len(engine.evaluate(group, options, threads=1).run["chunks"]) > 1  # one thread: Zarr chunks, 2 at least


@pytest.mark.cluster
def test_save_writes_the_report_folder_of_the_command_line(tmp_path, reid_data):
    result = evalcore.evaluate(**as_kwargs(reid_data), protocol="reid", threshold=0.5, sweep=True, workers=1)
    assert result.run["execution"].startswith("local cluster")
    out = result.save(tmp_path / "report")
    files = sorted(p.name for p in Path(out).iterdir())
    assert files == ["cmc.parquet", "manifest.json", "per_query.parquet", "report.html", "run.json",
                     "summary.parquet", "threshold_sweep.parquet"]
    back = evalcore.read_report(out)
    assert_tables_equal(back["per_query"], result.per_query)
    with pytest.raises(evalcore.InputError):
        result.save(tmp_path / "report")  # exists: refused without overwrite
    assert evalcore.read_report(out)["summary"].equals(back["summary"])


def test_validate_lists_problems_of_a_dataset(tmp_path, reid_data):
    path = tmp_path / "ds.zarr"
    ds.write_dataset(path, {k: v for k, v in reid_data.items() if k != "query/cam"})
    problems = evalcore.validate(str(path), "reid")
    assert any("query/cam" in p for p in problems)
    assert evalcore.validate(str(path), "class") == []


def test_the_docstring_examples_run():
    import doctest

    import evalcore.api

    failed, attempted = doctest.testmod(evalcore.api)
    assert attempted > 0 and failed == 0
