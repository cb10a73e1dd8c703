"""Precomputed rankings (ranking/item, ranking/score): tie groups follow --ties, duplicates and bad scores refused.

The expected values come from a brute-force per-list evaluation written here
(sort each list's kept items by score, then by the tie policy, then by list
position; count), or from tests/reference.py on full-gallery lists.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from reference import evaluate_all

from evalcore.engine.evaluate import Options, evaluate
from evalcore.errors import InputError
from evalcore.io import dataset as ds
from evalcore.io.validate import validate

CLI = [str(Path(sys.executable).with_name("evalcore"))]


def run(*args, timeout=240):
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "EVALCORE_DEBUG": ""})


def class_lists(items, scores, query_label, gallery_label):
    arrays = {"query/label": np.asarray(query_label, np.int64), "gallery/label": np.asarray(gallery_label, np.int64),
              "ranking/item": np.asarray(items, np.int64)}
    if scores is not None:
        arrays["ranking/score"] = np.asarray(scores, np.float32)
    return arrays


def brute_ap(relevant_flags_in_order, n_relevant):
    """AP of one ranked list of relevance flags: (1/R) * sum over relevant positions of (hits so far / position)."""
    hits, total = 0, 0.0
    for pos, rel in enumerate(relevant_flags_in_order, start=1):
        if rel:
            hits += 1
            total += hits / pos
    return total / n_relevant


# --------------------------------------------------------------------------- the reported defect


@pytest.mark.parametrize("ties, expected_ap", [
    # six items scored 1.0, the two relevant ones listed first: pessimistic ranks them 5 and 6
    ("pessimistic", (1 / 5 + 2 / 6) / 2),
    ("optimistic", 1.0),
])
def test_constant_scores_do_not_let_the_list_order_win(write, ties, expected_ap):
    arrays = class_lists([[0, 1, 2, 3, 4, 5]], [[1.0] * 6], [7], [7, 7, 1, 2, 3, 4])
    result = evaluate(write(arrays), Options(protocol="class", ks=(1, 5), ties=ties))
    row = result.per_query.to_pylist()[0]
    assert row["ap"] == pytest.approx(expected_ap, abs=1e-12)
    assert row["ap"] == pytest.approx(brute_ap([0, 0, 0, 0, 1, 1] if ties == "pessimistic" else [1, 1, 0, 0, 0, 0], 2))
    assert row["first_rank"] == (5 if ties == "pessimistic" else 1)
    assert row["hit_at_1"] == (0.0 if ties == "pessimistic" else 1.0)
    assert row["top1"] in ((2, 3, 4, 5) if ties == "pessimistic" else (0, 1))
    assert "tie groups" in result.info["scores"] and ties in result.info["scores"]


def test_without_scores_the_given_order_stands_and_run_json_says_so(write):
    arrays = class_lists([[0, 1, 2, 3, 4, 5]], None, [7], [7, 7, 1, 2, 3, 4])
    result = evaluate(write(arrays), Options(protocol="class", ks=(1, 5)))
    assert result.per_query.to_pylist()[0]["ap"] == 1.0
    assert "as it stands" in result.info["scores"] and "--ties does not apply" in result.info["scores"]


def test_tie_groups_only_reorder_within_equal_scores(write):
    # scores 3, 2, 2, 2, 1: the relevant item listed second shares its score with two non-relevant ones
    arrays = class_lists([[4, 0, 2, 3, 1]], [[3, 2, 2, 2, 1]], [7], [7, 1, 2, 3, 5])
    pess = evaluate(write(arrays, name="p.zarr"), Options(protocol="class", ks=(1,))).per_query.to_pylist()[0]
    opt = evaluate(write(arrays, name="o.zarr"), Options(protocol="class", ks=(1,), ties="optimistic")
                   ).per_query.to_pylist()[0]
    assert (pess["first_rank"], opt["first_rank"]) == (4, 2)   # never past its group, never before item 4
    assert pess["top1"] == opt["top1"] == 4


def test_junk_between_tied_items_is_removed_before_counting(write):
    # reid rule: gallery item 1 (same label, same camera) is junk; items 0..3 all tie
    arrays = {"query/label": np.array([7]), "query/cam": np.array([0]),
              "gallery/label": np.array([7, 7, 1, 2]), "gallery/cam": np.array([1, 0, 0, 0]),
              "ranking/item": np.array([[0, 1, 2, 3]]), "ranking/score": np.array([[0.5] * 4], np.float32)}
    row = evaluate(write(arrays), Options(protocol="reid", ks=(1,))).per_query.to_pylist()[0]
    assert (row["first_rank"], row["n_junk"]) == (3, 1)


@pytest.mark.parametrize("ties", ["pessimistic", "optimistic"])
def test_many_ties_against_the_brute_force_reference_and_any_chunking(write, ties):
    """Full-gallery lists with 4 score levels (tie groups of ~25), shuffled inside each group."""
    rng = np.random.default_rng(5)
    nq, ng = 600, 100
    ql, gl = rng.integers(0, 8, nq), rng.integers(0, 8, ng)
    gl[rng.random(ng) < 0.2] = -1
    levels = rng.integers(0, 4, (nq, ng)).astype(np.float32) / 4
    items = np.empty((nq, ng), np.int64)
    for q in range(nq):
        shuffle = rng.permutation(ng)          # random order inside each tie group
        items[q] = shuffle[np.argsort(-levels[q, shuffle], kind="stable")]
    arrays = class_lists(items, np.take_along_axis(levels, items, axis=1), ql, gl)
    ks = (1, 5, 10)
    rel = (ql[:, None] == gl[None, :]) & (gl[None, :] >= 0)
    expected = evaluate_all(levels.astype(np.float64), rel, np.zeros_like(rel), ks, ties=ties)
    results = [evaluate(write(arrays, name=f"c{c}.zarr", chunk_rows=c), Options(protocol="class", ks=ks, ties=ties))
               for c in (64, 600)]
    for result in results:
        for got, want in zip(result.per_query.to_pylist(), expected):
            for col in ("n_relevant", "first_rank", "last_rank", "ap", "rr", "inp", "hit_at_5", "recall_at_10",
                        "precision_at_10"):
                assert got[col] == pytest.approx(want[col], abs=1e-12), (got["query"], col)
            if want["top1"] is not None:       # same group, same relevance side as the reference's top item
                assert levels[got["query"], got["top1"]] == levels[got["query"], want["top1"]]
                assert rel[got["query"], got["top1"]] == rel[got["query"], want["top1"]]
    assert results[0].summary.to_pylist() == results[1].summary.to_pylist()


@pytest.mark.parametrize("dtype, first_rank", [
    (np.float32, 2),   # 1 + 1e-9 and 1 are one float32 value: a tie, so the relevant item listed first goes last
    (np.float64, 1),   # two float64 values: the higher one, the relevant item, is first
])
def test_scores_compare_in_the_precision_stored(write, dtype, first_rank):
    arrays = class_lists([[0, 1]], None, [7], [7, 1])
    arrays["ranking/score"] = np.array([[1 + 1e-9, 1.0]], dtype)
    path = write(arrays)
    assert ds.open_dataset(path)["ranking/score"].dtype == dtype     # written as given, read as stored
    assert not validate(ds.open_dataset(path), "class")
    row = evaluate(path, Options(protocol="class", ks=(1,))).per_query.to_pylist()[0]
    assert row["first_rank"] == first_rank
    assert row["top1_score"] == float(dtype(1 + 1e-9))


def test_float64_scores_rising_by_less_than_float32_can_see_are_refused(write):
    arrays = class_lists([[0, 1]], None, [7], [7, 1])
    arrays["ranking/score"] = np.array([[1.0, 1 + 1e-9]])      # rises along the list, as float64
    with pytest.raises(InputError, match="ranking/score: rows 0 rise along the list"):
        evaluate(write(arrays), Options(protocol="class", ks=(1,)))


# --------------------------------------------------------------------------- bad lists


def test_an_item_listed_twice_is_an_input_error_naming_the_rows(write):
    """One relevant item named 20 times used to score AP 0.769 and P@10 1.0 (true 0.038 and 0.1)."""
    items = np.tile(np.arange(2, 22), (3, 1))
    items[1] = 0                                  # row 1 names relevant item 0 twenty times
    items[2, [3, 9]] = 5                          # row 2 names item 5 at positions 3 and 9
    arrays = class_lists(items, None, [7, 7, 7], [7] + [1] * 29)
    with pytest.raises(InputError, match=r"ranking/item: rows 1, 2 name a gallery item more than once "
                                         r"\(row 1: item 0 at positions 0, 1, 2"):
        evaluate(write(arrays, chunk_rows=1), Options(protocol="class", ks=(1, 10)))


def test_evaluate_refuses_indices_outside_the_gallery_in_any_chunk(write, tmp_path):
    """The tasks check their own rows as they read them (validation before the run checks structure only):
    bad rows in the second of two chunks still exit 2 with one line naming the array and the rows, and
    nothing is written."""
    items = np.tile(np.arange(4), (1024, 1))
    items[600, 2], items[700, 0] = 9, -3
    arrays = class_lists(items, None, np.zeros(1024), [0, 1, 0, 1, 0, 1])
    out = tmp_path / "report"
    proc = run("evaluate", write(arrays, chunk_rows=512), "--out", out, "--protocol", "class")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == ("evalcore: error: ranking/item: rows 600, 700 hold gallery "
                                                    "indices outside [0, 6) (use -1 only to pad)"), proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists()


def test_pads_are_not_duplicates(write):
    arrays = class_lists([[1, 0, -1, -1]], [[2.0, 1.0, np.nan, np.nan]], [7], [7, 1])
    row = evaluate(write(arrays), Options(protocol="class", ks=(1,))).per_query.to_pylist()[0]
    assert row["first_rank"] == 2


@pytest.mark.parametrize("scores, words", [
    ([[1.0, np.nan, 0.5]], "ranking/score: rows 0 hold NaN scores"),
    ([[1.0, 0.5, 0.7]], "ranking/score: rows 0 rise along the list"),
])
def test_nan_or_rising_scores_are_input_errors(write, scores, words):
    arrays = class_lists([[0, 1, 2]], scores, [7], [7, 1, 2])
    with pytest.raises(InputError, match=words):
        evaluate(write(arrays), Options(protocol="class", ks=(1,)))


def test_duplicates_exit_2_with_one_line_and_no_report(tmp_path, write):
    arrays = class_lists([[0, 0, 1]], None, [7], [7, 1])
    out = tmp_path / "report"
    proc = run("evaluate", write(arrays), "--out", out, "--ks", "1", "--workers", "1")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "ranking/item: rows 0" in lines[0] and "Traceback" not in proc.stderr
    assert not out.exists()


def test_cli_ties_flag_reaches_precomputed_lists(tmp_path, write):
    arrays = class_lists([[0, 1, 2, 3, 4, 5]], [[1.0] * 6], [7], [7, 7, 1, 2, 3, 4])
    path = write(arrays)
    maps = {}
    for ties in ("pessimistic", "optimistic"):
        out = tmp_path / ties
        proc = run("evaluate", path, "--out", out, "--ks", "1", "--workers", "1", "--ties", ties, "--quiet")
        assert proc.returncode == 0, proc.stderr
        maps[ties] = pq.read_table(out / "summary.parquet").column("map")[0].as_py()
        assert ties in json.loads((out / "run.json").read_text())["scores"]
    assert maps == pytest.approx({"pessimistic": (1 / 5 + 2 / 6) / 2, "optimistic": 1.0})
