"""The command line end to end: worked examples, report folders, bad input (exit 2, nothing written)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import zarr
from conftest import load_vector, random_reid, vector_arrays

from evalcore.io import dataset as ds

CLI = [str(Path(sys.executable).with_name("evalcore"))]
CORE_VECTORS = ["reid_camera_junk", "open_set_threshold", "ties_constant_submission", "ties_optimistic",
                "ap_multi_positive", "single_gt_ap_is_reciprocal_rank", "cmc_map_emoji_similarity1",
                "cmc_map_emoji_similarity2"]


def run(*args, timeout=240):
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "EVALCORE_DEBUG": ""})


def same(a, b):
    if a is None or b is None:
        return a is None and b is None
    if isinstance(b, (bool, str)):
        return a == b
    return abs(float(a) - float(b)) <= 1e-9 * max(1.0, abs(float(b)))


def check_report(out, expected):
    rows = pq.read_table(out / "per_query.parquet").to_pylist()
    summary = [r for r in pq.read_table(out / "summary.parquet").to_pylist() if r["group"] == "all"][0]
    cmc = [r["cmc"] for r in pq.read_table(out / "cmc.parquet").to_pylist() if r["group"] == "all"]
    assert len(rows) == len(expected["per_query"])
    for want, got in zip(expected["per_query"], rows):
        for col, val in want.items():
            assert same(got[col], val), (want["query"], col, got[col], val)
    for col, val in expected["summary"].items():
        assert same(summary[col], val), (col, summary[col], val)
    assert all(same(a, b) for a, b in zip(cmc[:5], expected["cmc"]))


@pytest.mark.cluster
def test_worked_examples_through_the_command_line_on_two_worker_processes(tmp_path):
    for name in CORE_VECTORS:
        case = load_vector(name)
        path = tmp_path / f"{name}.zarr"
        ds.write_dataset(path, vector_arrays(case))
        o = case["options"]
        args = ["evaluate", path, "--out", tmp_path / f"{name}.out", "--protocol", o["protocol"],
                "--ks", ",".join(map(str, o["ks"])), "--max-rank", "5", "--workers", "2"]
        if o.get("ties"):
            args += ["--ties", o["ties"]]
        if o.get("threshold") is not None:
            args += ["--threshold", o["threshold"]]
        result = run(*args)
        assert result.returncode == 0, result.stderr
        check_report(tmp_path / f"{name}.out", case["expected"])


@pytest.mark.cluster
def test_report_folder_is_complete_and_run_json_says_how(tmp_path):
    rng = np.random.default_rng(1)
    data = random_reid(rng, n_query=1100, n_gallery=3000, dims=16)
    path = tmp_path / "ds.zarr"
    ds.write_dataset(path, data, {"protocol": "reid"}, chunk_rows=128)
    out = tmp_path / "report"
    result = run("evaluate", path, "--out", out, "--workers", "2", "--threshold", "0.6", "--map-at", "5",
                 "--sweep", "--target-fpir", "0.2")
    assert result.returncode == 0, result.stderr
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(["per_query.parquet", "summary.parquet", "cmc.parquet", "threshold_sweep.parquet",
                            "run.json", "report.html", "manifest.json"])
    run_json = json.loads((out / "run.json").read_text())
    assert run_json["options"]["protocol"] == "reid"      # from the dataset attribute
    assert run_json["fingerprint"] and run_json["versions"]["zarr"]
    assert "tile grid" in run_json["scores"]
    assert run_json["counts"]["queries"] == 1100
    unknown = run_json["counts"]["unknown"]
    assert unknown > 0 and any(w.startswith(f"{unknown} of 1100 queries") for w in run_json["warnings"])
    assert "evalcore: warning:" in result.stderr
    summary = pq.read_table(out / "summary.parquet").to_pylist()
    assert [r["group"] for r in summary] == ["all", "g0", "g1", "g2"]
    assert sum(r["n_queries"] for r in summary[1:]) == summary[0]["n_queries"]
    assert summary[0]["fnir_at_target_fpir"] is not None
    # the non-TTY progress: one line per chunk (1,100 queries are three query tiles)
    assert result.stderr.count("chunk ") >= 2
    shown = run("show", out)
    assert shown.returncode == 0 and "g1" in shown.stdout


def test_existing_report_is_refused_then_replaced_with_overwrite(tmp_path):
    case = load_vector("reid_camera_junk")
    path = tmp_path / "ds.zarr"
    ds.write_dataset(path, vector_arrays(case))
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("earlier work")
    refused = run("evaluate", path, "--out", out, "--protocol", "reid", "--workers", "1")
    assert refused.returncode == 2 and "--out" in refused.stderr and "--overwrite" in refused.stderr
    assert (out / "keep.txt").read_text() == "earlier work"
    # --overwrite replaces only a report evalcore wrote: a folder holding other files is refused too
    refused = run("evaluate", path, "--out", out, "--protocol", "reid", "--workers", "1", "--overwrite")
    assert refused.returncode == 2 and "--out" in refused.stderr and "keep.txt" in refused.stderr
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]
    (out / "keep.txt").unlink()
    assert run("evaluate", path, "--out", out, "--protocol", "reid", "--workers", "1").returncode == 0
    first = (out / "run.json").read_bytes()
    replaced = run("evaluate", path, "--out", out, "--protocol", "reid", "--workers", "1", "--overwrite")
    assert replaced.returncode == 0, replaced.stderr
    assert (out / "per_query.parquet").exists() and (out / "run.json").read_bytes() != first


def bad_datasets(tmp_path):
    """(name, arrays, extra args, words the message must contain)."""
    rng = np.random.default_rng(2)
    good = {"query/emb": rng.standard_normal((6, 4)).astype(np.float32),
            "gallery/emb": rng.standard_normal((9, 4)).astype(np.float32),
            "query/label": np.arange(6), "gallery/label": np.arange(9) % 6,
            "query/cam": np.zeros(6, np.int64), "gallery/cam": np.ones(9, np.int64)}
    nan = dict(good, **{"gallery/emb": good["gallery/emb"].copy()})
    nan["gallery/emb"][[2, 7], 1] = np.nan
    zero = dict(good, **{"query/emb": good["query/emb"].copy()})
    zero["query/emb"][4] = 0
    inf = dict(good, **{"query/emb": good["query/emb"].copy()})
    inf["query/emb"][1, 0] = np.inf
    return [
        ("missing-emb", {k: v for k, v in good.items() if k != "gallery/emb"}, [], ["gallery/emb", "missing"]),
        ("missing-label", {k: v for k, v in good.items() if k != "query/label"}, [], ["query/label", "missing"]),
        ("missing-cam", {k: v for k, v in good.items() if k != "gallery/cam"}, ["--protocol", "reid"],
         ["gallery/cam", "reid"]),
        ("short-labels", dict(good, **{"gallery/label": np.arange(8)}), [], ["gallery/label", "8"]),
        ("dims", dict(good, **{"gallery/emb": rng.standard_normal((9, 5)).astype(np.float32)}), [],
         ["gallery/emb", "dimensions"]),
        ("nan", nan, [], ["gallery/emb", "2, 7", "NaN"]),
        ("inf", inf, [], ["query/emb", "1", "Inf"]),
        ("zero", zero, [], ["query/emb", "4", "zero"]),
        ("float-labels", dict(good, **{"query/label": FloatArray(np.arange(6) + 0.5)}), [],
         ["query/label", "integer"]),
    ]


class FloatArray(np.ndarray):
    """Marks an array the test writes as is, bypassing the writer's integer check."""

    def __new__(cls, values):
        return np.asarray(values).view(cls)


@pytest.mark.parametrize("case", range(9))
def test_bad_dataset_exits_2_with_a_naming_message_and_writes_nothing(tmp_path, case):
    name, arrays, extra, words = bad_datasets(tmp_path)[case]
    path = tmp_path / f"{name}.zarr"
    raw = {k: np.asarray(v) for k, v in arrays.items() if isinstance(v, FloatArray)}
    ds.write_dataset(path, {k: v for k, v in arrays.items() if k not in raw})
    for key, values in raw.items():  # what another tool might have written
        zarr.open_group(str(path), mode="a").create_array(key, data=values)
    out = tmp_path / "out"
    result = run("evaluate", path, "--out", out, "--workers", "1", *extra)
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]


@pytest.mark.parametrize("args,words", [
    (["--ks", "1,x"], ["--ks"]),
    (["--ks", "0,3"], ["--ks"]),
    (["--max-rank", "0"], ["--max-rank"]),
    (["--max-rank", "ten"], ["--max-rank"]),
    (["--threshold", "nan"], ["--threshold"]),
    (["--threshold", "high"], ["--threshold"]),
    (["--map-at", "-2"], ["--map-at"]),
    (["--workers", "0"], ["--workers"]),
    (["--scheduler", "not-an-address"], ["--scheduler"]),
    (["--protocol", "bogus"], ["--protocol"]),
    (["--stall-timeout", "-1"], ["--stall-timeout", "> 0"]),
    (["--stall-timeout", "0"], ["--stall-timeout"]),
    (["--stall-timeout", "soon"], ["--stall-timeout", "not a number"]),
    (["--stall-timeout", "inf", "--workers", "2"], ["--stall-timeout"]),
])
def test_bad_options_exit_2_naming_the_option(tmp_path, args, words):
    case = load_vector("reid_camera_junk")
    path = tmp_path / "ds.zarr"
    ds.write_dataset(path, vector_arrays(case))
    out = tmp_path / "out"
    result = run("evaluate", path, "--out", out, "--protocol", "reid", *args)
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert all(w in result.stderr for w in words), result.stderr
    assert not out.exists()


def test_missing_dataset_exits_2(tmp_path):
    result = run("evaluate", tmp_path / "nope.zarr", "--out", tmp_path / "out")
    assert result.returncode == 2 and "nope.zarr" in result.stderr
    assert not (tmp_path / "out").exists()


def test_validate_lists_every_problem(tmp_path):
    rng = np.random.default_rng(3)
    q = rng.standard_normal((5, 3)).astype(np.float32)
    q[2] = np.nan
    g = rng.standard_normal((7, 3)).astype(np.float32)
    g[4] = 0
    path = tmp_path / "ds.zarr"
    ds.write_dataset(path, {"query/emb": q, "gallery/emb": g, "query/label": np.arange(5),
                            "gallery/label": np.arange(7), "query/key": ["a", "b", "a", "c", "d"]})
    result = run("validate", path)
    assert result.returncode == 2
    assert "query/emb: rows 2" in result.stderr and "gallery/emb: rows 4" in result.stderr
    assert "query/key: duplicate keys 'a'" in result.stderr
    good = tmp_path / "good.zarr"
    ds.write_dataset(good, {"query/emb": g, "gallery/emb": q[[0, 1, 3, 4]], "query/label": np.arange(7),
                            "gallery/label": np.arange(4)})
    g[4] = 1
    ok = run("validate", tmp_path / "good.zarr", "--similarity", "dot")
    assert ok.returncode == 0, ok.stderr


def test_failed_run_leaves_an_earlier_report_intact(tmp_path):
    case = load_vector("reid_camera_junk")
    path = tmp_path / "ds.zarr"
    ds.write_dataset(path, vector_arrays(case))
    out = tmp_path / "out"
    assert run("evaluate", path, "--out", out, "--protocol", "reid", "--workers", "1").returncode == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    bad = tmp_path / "bad.zarr"
    arrays = vector_arrays(case)
    arrays["gallery/emb"][3] = np.nan
    ds.write_dataset(bad, arrays)
    failed = run("evaluate", bad, "--out", out, "--protocol", "reid", "--workers", "1", "--overwrite")
    assert failed.returncode == 2 and "gallery/emb" in failed.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.zarr", "ds.zarr", "out"]


@pytest.mark.cluster
def test_demo_writes_a_dataset_and_a_report_and_prints_the_summary(tmp_path):
    out = tmp_path / "demo"
    result = run("demo", "--out", out, "--workers", "2")
    assert result.returncode == 0, result.stderr
    assert "Summary" in result.stdout and "all" in result.stdout and "Worst" in result.stdout
    summary = pq.read_table(out / "report" / "summary.parquet").to_pylist()[0]
    assert summary["n_queries"] == 3368 and 0 < summary["n_unknown"] < 200   # Market-1501 shaped, a few unknown
    assert 0 < summary["map"] < 1
    # the threshold is the sweep's own at FPIR 0.1, and says so: unknown queries accepted / unknown <= 0.1
    assert summary["threshold"] == summary["threshold_at_target_fpir"] and summary["target_fpir"] == 0.1
    assert f"open-set threshold {summary['threshold']:.4f}" in result.stdout
    per_query = pq.read_table(out / "report" / "per_query.parquet").to_pylist()
    unknown = [r["top1_score"] for r in per_query if r["n_relevant"] == 0]
    assert sum(s >= summary["threshold"] for s in unknown) / len(unknown) <= 0.1
    assert summary["fpir"] <= 0.1  # the old fixed 0.2 accepted every unknown query (FPIR 1.0)
    assert (out / "report" / "report.html").exists() and (out / "report" / "threshold_sweep.parquet").exists()
    # run again, the demo replaces its own earlier output (it used to refuse without --overwrite)
    again = run("demo", "--out", out, "--dims", "16", "--workers", "1")
    assert again.returncode == 0, again.stderr
    assert ds.open_dataset(out / "dataset.zarr")["query/emb"].shape[1] == 16
