"""Graded qrels through the paths the first pass left untested (issue 22), against a full sort written here.

* the whole-gallery scan (embeddings and a given score matrix): tied scores are
  planted as duplicate gallery rows (integer vectors under ``dot``, so every
  score is an exact integer and equal rows tie exactly); among tied relevant
  items the order by grade (pessimistic: lowest grade first; optimistic:
  highest first) decides which gain sits at which rank, so nDCG checks it;
* judged-only qrels (``rank_pairs``): each query ranked among its judged items;
* ``--rel-level`` and ``--depth`` from the command line, a nightly job file and
  the API, and their bad values (exit 2 / InputError naming the option).

The reference sorts every candidate of a query by (score descending, tie
rule, index) and computes each measure from that list by its textbook
definition (trec_eval's for bpref).
"""
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

import evalcore
from evalcore.cli.main import main
from evalcore.errors import InputError
from evalcore.io import dataset as ds

CLI = [str(Path(sys.executable).with_name("evalcore"))]
KS = (1, 3, 5, 10)
METRICS = "map,rprec,ndcg,ndcg@k,map_cut@k,mrr@k,precision@k,recall@k"


def planted_ties(seed: int, n_query: int = 30, n_base: int = 9, dims: int = 3, copies: tuple = (1, 5)) -> dict:
    """Integer query and gallery rows; each gallery row repeated ``copies`` times (exact ties), graded qrels
    (-1..3) that judge several copies of one row per query with different grades."""
    rng = np.random.default_rng(seed)

    def nonzero_rows(n):
        rows = rng.integers(-2, 3, size=(n, dims))
        rows[~rows.any(axis=1), 0] = 1
        return rows

    base = nonzero_rows(n_base)
    gallery = np.repeat(base, rng.integers(*copies, size=n_base), axis=0)
    gallery = gallery[rng.permutation(len(gallery))]
    query = nonzero_rows(n_query)
    rows, items, rels = [], [], []
    for q in range(n_query):
        judged = rng.choice(len(gallery), size=int(rng.integers(3, 12)), replace=False)
        for g in judged:
            rows.append(q)
            items.append(int(g))
            rels.append(int(rng.choice([-1, 0, 0, 1, 2, 3])))
    return {"query/emb": query.astype(np.float32), "gallery/emb": gallery.astype(np.float32),
            "qrels/query": np.array(rows, np.int64), "qrels/item": np.array(items, np.int64),
            "qrels/rel": np.array(rels, np.int8)}


def grades_of(arrays: dict) -> list[dict]:
    out: list[dict] = [{} for _ in range(len(arrays["query/emb"]))]
    for q, g, r in zip(arrays["qrels/query"], arrays["qrels/item"], arrays["qrels/rel"]):
        out[int(q)][int(g)] = int(r)
    return out


def reference_order(scores_row, grade: dict, ties: str, judged_only: bool) -> list[int]:
    """The candidates (not junk; only judged ones when judged_only), score descending; among equal scores
    non-relevant first, then relevant by grade ascending (pessimistic), or the reverse (optimistic)."""
    sign = 1 if ties == "pessimistic" else -1
    items = [i for i in range(len(scores_row)) if grade.get(i, 0) >= 0 and (not judged_only or i in grade)]
    return sorted(items, key=lambda i: (-scores_row[i], sign * max(grade.get(i, 0), 0), i))


def reference_measures(order: list[int], grade: dict, level: int, depth: int | None) -> dict | None:
    """Every measure of one query from its ranked list (best first), by definition; None when no grade is >= 1,
    only the nDCGs when R = 0 at the level (contract v4: nDCG ignores the level, as trec_eval's does; this
    reference used to return None there, the old rule)."""
    listed = order[:depth] if depth else order
    relevant = {i for i, g in grade.items() if g >= level}
    big_r = len(relevant)
    hits = [j + 1 for j, i in enumerate(listed) if i in relevant]
    ideal = sorted((g for g in grade.values() if g >= 1), reverse=True)
    if not ideal:
        return None

    def dcg(k=None):
        return sum(grade[i] / math.log2(j + 2) for j, i in enumerate(listed[:k] if k else listed)
                   if grade.get(i, 0) >= 1)

    def idcg(k=None):
        return sum(g / math.log2(j + 2) for j, g in enumerate(ideal[:k] if k else ideal))

    out = {"ndcg": dcg() / idcg(), **{f"ndcg_at_{k}": dcg(k) / idcg(k) for k in KS}}
    if not big_r:
        return out
    out.update({"ap": sum((n + 1) / h for n, h in enumerate(hits)) / big_r,
                "rprec": sum(h <= big_r for h in hits) / big_r})
    for k in KS:
        out[f"ap_cut_{k}"] = sum((n + 1) / h for n, h in enumerate(hits) if h <= k) / big_r
        out[f"rr_at_{k}"] = 1 / hits[0] if hits and hits[0] <= k else 0.0
        out[f"precision_at_{k}"] = sum(h <= k for h in hits) / k
        out[f"recall_at_{k}"] = sum(h <= k for h in hits) / big_r
    # bpref (trec_eval): N judged items below the level; n judged non-relevant items above each relevant one
    n_nonrel = sum(1 for g in grade.values() if 0 <= g < level)
    total, above = 0.0, 0
    for i in listed:
        if i in relevant:
            total += 1.0 if above == 0 else 1.0 - min(above, big_r) / min(n_nonrel, big_r)
        elif 0 <= grade.get(i, -1) < level:
            above += 1
    out["bpref"] = total / big_r
    return out


def reference_table(arrays: dict, ties: str, level: int, depth: int | None, judged_only: bool) -> list:
    scores = arrays["query/emb"].astype(np.int64) @ arrays["gallery/emb"].astype(np.int64).T
    grades = grades_of(arrays)
    return [reference_measures(reference_order(scores[q], grades[q], ties, judged_only), grades[q], level, depth)
            for q in range(len(scores))]


def assert_equal_to_reference(per_query, want: list) -> None:
    rows = per_query.to_pylist()
    assert len(rows) == len(want)
    checked = 0
    for q, (row, ref) in enumerate(zip(rows, want)):
        for column, value in (ref or {}).items():
            if column not in row:
                continue
            checked += 1
            assert row[column] == pytest.approx(value, rel=1e-12, abs=1e-15), (q, column, row[column], value)
        if ref is None:
            assert row["ndcg"] is None, q
        if ref is None or "ap" not in ref:
            assert row["ap"] is None, q
    assert checked > 100


def tied_relevant_with_different_grades(arrays: dict) -> int:
    """How many queries have two relevant items of different grades at the same score (what the test needs)."""
    scores = arrays["query/emb"].astype(np.int64) @ arrays["gallery/emb"].astype(np.int64).T
    found = 0
    for q, grade in enumerate(grades_of(arrays)):
        by_score: dict = {}
        for i, g in grade.items():
            if g >= 1:
                by_score.setdefault(int(scores[q, i]), set()).add(g)
        found += any(len(gs) > 1 for gs in by_score.values())
    return found


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    arrays = planted_ties(5)
    assert tied_relevant_with_different_grades(arrays) >= 5
    path = tmp_path_factory.mktemp("graded") / "ties.zarr"
    ds.write_dataset(path, arrays, {"protocol": "qrels", "similarity": "dot"})
    return path, arrays


@pytest.mark.parametrize("ties", ["pessimistic", "optimistic"])
@pytest.mark.parametrize("level, depth", [(1, None), (2, None), (2, 6)])
@pytest.mark.parametrize("given", ["embeddings", "scores/value"])
def test_scan_orders_tied_relevant_items_by_grade(tmp_path, dataset, ties, level, depth, given):
    _, arrays = dataset
    path, _ = dataset
    if given == "scores/value":   # the same exact integer scores given as a matrix (core/scan/scores)
        path = tmp_path / "scores.zarr"
        ds.write_dataset(path, {**{k: v for k, v in arrays.items() if k.startswith("qrels/")},
                                "scores/value": arrays["query/emb"] @ arrays["gallery/emb"].T}, {"protocol": "qrels"})
    result = evalcore.evaluate(str(path), ks=KS, ties=ties, metrics=METRICS.split(","), rel_level=level,
                               depth=depth)
    assert_equal_to_reference(result.per_query, reference_table(arrays, ties, level, depth, judged_only=False))


@pytest.mark.parametrize("ties", ["pessimistic", "optimistic"])
def test_sharded_scan_orders_tied_relevant_items_by_grade(tmp_path, ties):
    """G > 2 tiles, three gallery shards: each shard's counts merged, then finished with the grade order."""
    arrays = planted_ties(9, copies=(900, 1200))
    assert tied_relevant_with_different_grades(arrays) >= 5
    path = tmp_path / "big.zarr"
    ds.write_dataset(path, arrays, {"protocol": "qrels", "similarity": "dot"}, chunk_rows=1024)
    result = evalcore.evaluate(str(path), ks=KS, ties=ties, metrics=METRICS.split(","), gallery_shards=3)
    assert len(result.run["gallery_shards"]) == 3
    assert_equal_to_reference(result.per_query, reference_table(arrays, ties, 1, None, judged_only=False))


@pytest.mark.parametrize("ties", ["pessimistic", "optimistic"])
@pytest.mark.parametrize("level, depth", [(1, None), (2, None), (1, 4), (3, 5)])
def test_judged_only_graded_measures_match_the_reference(dataset, ties, level, depth):
    path, arrays = dataset
    result = evalcore.evaluate(str(path), ks=KS, ties=ties, judged_only=True, rel_level=level, depth=depth,
                               metrics=[*METRICS.split(","), "bpref"])
    assert "bpref" in result.per_query.column_names
    assert_equal_to_reference(result.per_query, reference_table(arrays, ties, level, depth, judged_only=True))


# --------------------------------------------------------------------------- --rel-level and --depth given


def cli(*args):
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=240,
                          env={**os.environ, "EVALCORE_DEBUG": ""})


def test_rel_level_and_depth_on_the_command_line(tmp_path, dataset):
    path, arrays = dataset
    out = tmp_path / "r"
    done = cli("evaluate", path, "--out", out, "--ks", "1,3,5,10", "--metrics", METRICS, "--rel-level", "2",
               "--depth", "5")
    assert done.returncode == 0, done.stderr
    assert_equal_to_reference(pq.read_table(out / "per_query.parquet"),
                              reference_table(arrays, "pessimistic", 2, 5, judged_only=False))


@pytest.mark.parametrize("option, value", [("--rel-level", "0"), ("--rel-level", "two"), ("--rel-level", "1.5"),
                                           ("--depth", "0"), ("--depth", "-3"), ("--depth", "5.5")])
def test_bad_rel_level_or_depth_exits_2_naming_the_option(tmp_path, dataset, capsys, option, value):
    path, _ = dataset
    out = tmp_path / "r"
    assert main(["evaluate", str(path), "--out", str(out), option, value]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and option in err, err
    assert not out.exists()


def test_rel_level_and_depth_in_the_api(dataset):
    path, arrays = dataset
    result = evalcore.evaluate(str(path), ks=KS, metrics=METRICS.split(","), rel_level=3, depth=4)
    assert_equal_to_reference(result.per_query, reference_table(arrays, "pessimistic", 3, 4, judged_only=False))
    for bad in ({"rel_level": 0}, {"depth": -1}, {"rel_level": 2.5}, {"depth": True}):
        name = next(iter(bad))
        with pytest.raises(InputError, match=name.replace("_", "[-_]")):
            evalcore.evaluate(str(path), **bad)


def nightly_job(tmp_path: Path, dataset_path, extra: str) -> Path:
    job = tmp_path / "job.toml"
    job.write_text(f'reports = "{tmp_path / "reports"}"\nhistory = "{tmp_path / "history"}"\n'
                   f'[[evaluation]]\nname = "graded"\ndataset = "{dataset_path}"\nks = [1, 3, 5, 10]\n'
                   f'metrics = {METRICS.split(",")!r}\n'.replace("'", '"') + extra)
    return job


def test_rel_level_and_depth_in_a_nightly_job_file(tmp_path, dataset):
    path, arrays = dataset
    job = nightly_job(tmp_path, path, "rel_level = 2\ndepth = 5\n")
    assert main(["nightly", str(job), "--date", "2025-01-01", "--quiet"]) == 0
    table = pq.read_table(tmp_path / "reports" / "2025-01-01" / "graded" / "per_query.parquet")
    assert_equal_to_reference(table, reference_table(arrays, "pessimistic", 2, 5, judged_only=False))


@pytest.mark.parametrize("extra, name", [("rel_level = 0\n", "rel_level"), ('depth = "5"\n', "depth"),
                                         ("depth = 0\n", "depth"), ("rel_level = 1.5\n", "rel_level")])
def test_bad_rel_level_or_depth_in_a_job_file_exits_2(tmp_path, dataset, capsys, extra, name):
    path, _ = dataset
    job = nightly_job(tmp_path, path, extra)
    assert main(["nightly", str(job), "--date", "2025-01-01", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and name in err, err
    assert not (tmp_path / "reports").exists()
