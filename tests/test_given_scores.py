"""Given scores (``scores=``, ``distances=``, ``scores/value``): the values as given, ranked exactly.

References live here: the canonical scores of embeddings (``test_canonical_scores``:
float64 products, exact rationals near a float32 midpoint) so the given-score
path can be held to the embedding path bit for bit; a full sort per query on
float64 values for ties and near-ties; and torchreid's ``evaluate_rank`` CMC/mAP
rule (Market-1501), re-implemented below from its documented behaviour.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import zarr
from test_canonical_scores import normalised, reference_scores

import evalcore
from evalcore.core import scan
from evalcore.core.protocols import class_truth
from evalcore.core.scan.base import TILE_COLS
from evalcore.core.scan.scores import ScoreQueries
from evalcore.engine.evaluate import Options
from evalcore.engine.evaluate import evaluate as engine_evaluate
from evalcore.engine.gallery import ScoreBlocks

CLI = [str(Path(sys.executable).with_name("evalcore"))]
#: the columns that hold scores: the given-score path reports the values given, which for distances differ
SCORE_COLUMNS = ["top1_score", "relevant_score"]


def labelled(seed: int, n_query: int, n_gallery: int, dims: int = 16, n_ids: int = 25):
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((n_ids, dims))
    ql, gl = rng.integers(0, n_ids + 3, n_query), rng.integers(0, n_ids, n_gallery)   # some queries unknown
    q = (centres[ql % n_ids] + 0.8 * rng.standard_normal((n_query, dims))).astype(np.float32)
    g = (centres[gl] + 0.8 * rng.standard_normal((n_gallery, dims))).astype(np.float32)
    g[40:60] = g[0:20]                                              # exact duplicates: canonical ties
    return {"query": q, "gallery": g, "query_labels": ql, "gallery_labels": gl,
            "query_cams": rng.integers(0, 4, n_query), "gallery_cams": rng.integers(0, 4, n_gallery),
            "gallery_junk": rng.random(n_gallery) < 0.02,
            "query_groups": np.array([f"g{i % 3}" for i in range(n_query)], dtype=object)}


def brute_force(values: np.ndarray, relevant: np.ndarray, junk: np.ndarray, ties: str) -> dict:
    """first_rank, ap, top1 and top1_score per query from a full sort of float64 values (higher is better)."""
    out: dict = {"first_rank": [], "ap": [], "top1": [], "top1_score": []}
    for i in range(len(values)):
        keep = np.flatnonzero(~junk[i])
        rel = relevant[i, keep]
        tie = rel if ties == "pessimistic" else ~rel
        order = np.lexsort((keep, tie, -values[i, keep].astype(np.float64)))
        ranks = np.flatnonzero(rel[order]) + 1
        out["first_rank"].append(int(ranks[0]) if len(ranks) else None)
        out["ap"].append(float(np.mean(np.arange(1, len(ranks) + 1) / ranks)) if len(ranks) else None)
        out["top1"].append(int(keep[order[0]]) if len(keep) else None)
        out["top1_score"].append(float(values[i, keep[order[0]]]) if len(keep) else None)
    return out


def columns(result, names=("first_rank", "ap", "top1", "top1_score")) -> dict:
    return {n: result.per_query.column(n).to_pylist() for n in names}


def assert_matches(got: dict, want: dict) -> None:
    """Ranks, rank 1 and its score exactly; AP to the last bits (evalcore sums correctly rounded, the
    reference with np.mean)."""
    for name in ("first_rank", "top1", "top1_score"):
        assert got[name] == want[name], name
    assert [x is None for x in got["ap"]] == [x is None for x in want["ap"]]
    assert [x for x in got["ap"] if x is not None] == pytest.approx([x for x in want["ap"] if x is not None],
                                                                    rel=0, abs=1e-15)


# --------------------------------------------------------------------------- the same numbers as embeddings


@pytest.mark.parametrize("protocol, ties", [("class", "pessimistic"), ("reid", "optimistic"), ("reid", "pessimistic")])
def test_canonical_scores_given_as_scores_give_the_embedding_results_bit_for_bit(protocol, ties):
    data = labelled(1, 530, 4200)
    q, g = data.pop("query"), data.pop("gallery")
    if protocol != "reid":  # cameras given to a protocol that ignores them are an input error (issue 35)
        data = {k: v for k, v in data.items() if not k.endswith("_cams")}
    s = reference_scores(normalised(q), normalised(g))       # float32: the canonical scores, exactly
    a = evalcore.evaluate(query=q, gallery=g, protocol=protocol, ties=ties, **data)
    b = evalcore.evaluate(scores=s, protocol=protocol, ties=ties, **data)
    assert b.per_query.equals(a.per_query)
    assert b.summary.equals(a.summary) and b.cmc.equals(a.cmc)
    assert b.run["ranked_by"] == "scores/value" and b.run["scores"].startswith("given: scores/value (float32 scores)")
    # widened to float64 they are the same numbers: the same results again
    c = evalcore.evaluate(scores=s.astype(np.float64), protocol=protocol, ties=ties, **data)
    assert c.per_query.equals(a.per_query)


def dot_dataset(seed: int, nq: int, ng: int, protocol: str) -> dict:
    """Small-integer embeddings under dot: every score an exact small integer, with many exact ties."""
    rng = np.random.default_rng(seed)
    arrays = {"query/emb": rng.integers(-2, 3, (nq, 4)).astype(np.float32),
              "gallery/emb": rng.integers(-2, 3, (ng, 4)).astype(np.float32),
              "gallery/junk": rng.random(ng) < 0.03}
    if protocol == "qrels":
        q = rng.integers(0, nq, 6 * nq)
        g = rng.integers(0, ng, 6 * nq)
        pairs = np.unique(np.stack([q, g], 1), axis=0)
        arrays.update({"qrels/query": pairs[:, 0], "qrels/item": pairs[:, 1],
                       "qrels/rel": rng.choice([-1, 0, 1], len(pairs), p=[0.1, 0.5, 0.4]).astype(np.int8)})
    else:
        arrays.update({f"{side}/{axis}": rng.integers(0, 50, n).astype(np.float64)
                       for side, n in (("query", nq), ("gallery", ng)) for axis in "xy"})
    return arrays


@pytest.mark.parametrize("protocol, judged_only, ties", [("qrels", False, "pessimistic"), ("qrels", True, "optimistic"),
                                                         ("qrels", True, "pessimistic"), ("xy", False, "optimistic")])
def test_every_protocol_ranks_given_scores_as_it_ranks_the_same_exact_scores_from_embeddings(
        tmp_path, protocol, judged_only, ties):
    arrays = dot_dataset(5, 600, 1500, protocol)
    emb = tmp_path / "emb.zarr"
    evalcore.write_dataset(emb, arrays, chunk_rows=256)
    given = {k: v for k, v in arrays.items() if not k.endswith("/emb")}
    given["scores/value"] = arrays["query/emb"].astype(np.float64) @ arrays["gallery/emb"].astype(np.float64).T
    sco = tmp_path / "scores.zarr"
    evalcore.write_dataset(sco, given, chunk_rows=256)
    options = Options(protocol=protocol, ties=ties, judged_only=judged_only, radius=None, ks=(1, 5))
    a = engine_evaluate(str(emb), replace(options, similarity="dot"))
    b = engine_evaluate(str(sco), options)
    assert b.per_query.equals(a.per_query)
    assert b.summary.equals(a.summary)
    assert b.info["ranked_by"] == "scores/value" and len(b.info["chunks"]) > 1


# --------------------------------------------------------------------------- exactly as given


@pytest.mark.parametrize("ties", ["pessimistic", "optimistic"])
def test_a_constant_score_matrix_scores_exactly_the_tie_formula(ties):
    rng = np.random.default_rng(2)
    n_query, n_gallery = 41, 4105                 # a narrow last gallery tile
    ql, gl = rng.integers(0, 20, n_query), rng.integers(0, 20, n_gallery)
    r = evalcore.evaluate(scores=np.full((n_query, n_gallery), 0.25), query_labels=ql, gallery_labels=gl, ties=ties)
    n_rel = r.per_query.column("n_relevant").to_pylist()
    for n, got in zip(n_rel, r.per_query.column("ap").to_pylist()):
        k = np.arange(1, n + 1)
        want = float(np.mean(k / (n_gallery - n + k))) if ties == "pessimistic" else 1.0
        assert got == pytest.approx(want, rel=1e-14, abs=0)
    for i, top1 in enumerate(r.per_query.column("top1").to_pylist()):  # the lowest index of the side put first
        assert top1 == np.flatnonzero((gl == ql[i]) == (ties == "optimistic"))[0]
    assert set(r.per_query.column("top1_score").to_pylist()) == {0.25}


def test_float64_values_closer_than_float32_rank_apart_and_are_reported_as_given():
    rng = np.random.default_rng(3)
    n_query, n_gallery = 30, 5000
    s = rng.random((n_query, n_gallery)) * 0.5
    ql = np.arange(n_query) % 10
    gl = rng.integers(10, 20, n_gallery)          # nothing relevant but the planted items
    for i in range(n_query):
        rel = 7 + i
        gl[rel] = ql[i]
        s[i, rel] = 0.75
        s[i, 4100 + i] = np.nextafter(0.75, 1.0)  # a negative one float64 ulp above, in another tile
        s[i, 900 + i] = np.nextafter(0.75, 0.0)   # and one just below
    planted = np.arange(n_query)
    assert (s.astype(np.float32)[planted, 4100 + planted] == np.float32(0.75)).all()   # float32 would tie them
    assert (s.astype(np.float32)[planted, 900 + planted] == np.float32(0.75)).all()
    for ties in ("pessimistic", "optimistic"):
        r = evalcore.evaluate(scores=s, query_labels=ql, gallery_labels=gl, ties=ties)
        want = brute_force(s, ql[:, None] == gl[None, :], np.zeros(s.shape, bool), ties)
        assert_matches(columns(r), want)
        assert r.per_query.column("first_rank").to_pylist() == [2] * n_query   # whatever the tie policy
        assert all(t == np.nextafter(0.75, 1.0) for t in r.per_query.column("top1_score").to_pylist())


def test_float16_values_are_widened_exactly():
    rng = np.random.default_rng(4)
    s = rng.integers(-8, 8, (50, 600)).astype(np.float16) / np.float16(8)       # many exact ties
    ql, gl = rng.integers(0, 6, 50), rng.integers(0, 6, 600)
    a = evalcore.evaluate(scores=s, query_labels=ql, gallery_labels=gl)
    b = evalcore.evaluate(scores=s.astype(np.float64), query_labels=ql, gallery_labels=gl)
    assert a.per_query.equals(b.per_query)
    assert_matches(columns(a), brute_force(s.astype(np.float64), ql[:, None] == gl[None, :],
                                           np.zeros(s.shape, bool), "pessimistic"))


@pytest.mark.parametrize("ties", ["pessimistic", "optimistic"])
def test_distances_rank_as_the_negated_scores_and_are_reported_as_given(ties):
    data = labelled(6, 300, 4500)
    q, g = data.pop("query"), data.pop("gallery")
    s = reference_scores(normalised(q), normalised(g)).astype(np.float64)
    s[:, 100:200] = s[:, 0:100]                      # exact ties across columns
    by_scores = evalcore.evaluate(scores=s, protocol="reid", ties=ties, **data)
    by_distances = evalcore.evaluate(distances=-s, protocol="reid", ties=ties, **data)
    assert by_distances.per_query.drop_columns(SCORE_COLUMNS).equals(by_scores.per_query.drop_columns(SCORE_COLUMNS))
    assert by_distances.summary.equals(by_scores.summary)
    for name in SCORE_COLUMNS:
        a, b = by_scores.per_query.column(name).to_pylist(), by_distances.per_query.column(name).to_pylist()
        assert b == [None if x is None else -x for x in a]
    assert "distances" in by_distances.run["scores"] and by_distances.run["higher_is_better"] is False


# --------------------------------------------------------------------------- torchreid's numbers


def torchreid_evaluate_rank(distmat, q_pids, g_pids, q_camids, g_camids, max_rank=50):
    """torchreid's Market-1501 evaluation as documented: per query, gallery sorted by ascending distance;
    gallery items of the query's identity seen by the query's camera are removed; a query with no match
    left is skipped; CMC counts a hit at k when the first match is at rank <= k; AP is the mean over the
    matches of the precision at each match. Returns (cmc[:max_rank], mAP)."""
    cmcs, aps = [], []
    for i in range(len(distmat)):
        order = np.argsort(distmat[i])
        keep = ~((g_pids[order] == q_pids[i]) & (g_camids[order] == q_camids[i]))
        hits = (g_pids[order][keep] == q_pids[i]).astype(np.int64)
        if not hits.any():
            continue
        found = np.cumsum(hits)
        cmc = np.minimum(found, 1)
        cmcs.append(np.pad(cmc, (0, max(0, max_rank - len(cmc))), mode="edge")[:max_rank])
        precision = found / np.arange(1, len(hits) + 1)
        aps.append(float((precision * hits).sum() / hits.sum()))
    return np.mean(cmcs, axis=0), float(np.mean(aps))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_torchreid_cmc_and_map_on_the_same_distance_matrix(dtype):
    rng = np.random.default_rng(7)
    n_query, n_gallery, n_ids = 400, 3000, 120
    q_pids, g_pids = rng.integers(0, n_ids + 10, n_query), rng.integers(0, n_ids, n_gallery)
    q_camids, g_camids = rng.integers(0, 6, n_query), rng.integers(0, 6, n_gallery)
    # continuous distances, closer within an identity: no ties
    distmat = rng.random((n_query, n_gallery)) + np.where(q_pids[:, None] == g_pids[None, :], 0.0, 0.4)
    distmat = distmat.astype(dtype)
    for row in distmat:       # float32 rounding can make two equal: move the later one up an ulp, until none are
        while True:
            order = np.argsort(row, kind="stable")
            dup = order[1:][row[order][1:] == row[order][:-1]]
            if not dup.size:
                break
            row[dup] = np.nextafter(row[dup], dtype(np.inf))
    assert all(len(np.unique(row)) == n_gallery for row in distmat)
    cmc, mean_ap = torchreid_evaluate_rank(distmat, q_pids, g_pids, q_camids, g_camids)
    r = evalcore.evaluate(distances=distmat, query_labels=q_pids, gallery_labels=g_pids, query_cams=q_camids,
                          gallery_cams=g_camids, protocol="reid", max_rank=50)
    assert r.metrics["map"] == pytest.approx(mean_ap, rel=1e-12)
    assert r.metrics["hit_at_1"] == pytest.approx(cmc[0], rel=1e-12)
    got = r.cmc.filter(np.array(r.cmc.column("group").to_pylist()) == "all").column("cmc").to_pylist()
    assert got == pytest.approx(cmc.tolist(), rel=1e-12)
    assert r.metrics["n_evaluated"] == sum(1 for i in range(n_query) if (
        (g_pids == q_pids[i]) & (g_camids != q_camids[i])).any())
    assert 0.05 < mean_ap < 0.95 and r.metrics["n_unknown"] > 0    # neither trivial nor empty


# --------------------------------------------------------------------------- the scan itself


class NumpyScores:
    """A ScoreSource over a numpy matrix, in blocks of ``width`` columns."""

    def __init__(self, values, q0, q1, width):
        self.data, self.q0, self.q1, self.width = values, q0, q1, width
        self.n_rows = values.shape[1]
        self.widest = 0

    def blocks(self, start=0, stop=None):
        stop = self.n_rows if stop is None else stop
        for g0 in range(start, stop, self.width):
            block = self.data[self.q0:self.q1, g0:min(stop, g0 + self.width)]
            self.widest = max(self.widest, block.shape[1])
            yield g0, block

    def values(self, rows, items):
        return self.data[np.asarray(rows) + self.q0, items]


@pytest.mark.parametrize("width, threads", [(TILE_COLS, 1), (1000, 1), (3 * TILE_COLS, 3)])
def test_the_scores_backend_gives_the_same_ranks_for_any_block_width_and_column_split(width, threads):
    rng = np.random.default_rng(8)
    values = rng.integers(0, 40, (70, 3 * TILE_COLS + 77)).astype(np.float64) / 4   # many exact ties
    ql, gl = rng.integers(0, 5, 70), rng.integers(0, 5, values.shape[1])
    junk = rng.random(values.shape[1]) < 0.05
    truth = class_truth(ql[10:60], gl, junk)
    source = NumpyScores(values, 10, 60, width)
    ranked = scan.rank(scan.backend("scores"), ScoreQueries(10, 50), truth, source, ties="pessimistic",
                       gallery_junk=junk, threads=threads)
    want = brute_force(values[10:60], ql[10:60, None] == gl[None, :], np.broadcast_to(junk, (50, len(gl))),
                       "pessimistic")
    first = [int(ranked.ranks[a]) if b > a else None for a, b in zip(ranked.indptr[:-1], ranked.indptr[1:])]
    assert first == want["first_rank"]
    assert ranked.top1.tolist() == want["top1"] and ranked.top1_score.tolist() == want["top1_score"]
    assert source.widest <= width


def test_a_task_reads_its_rows_a_bounded_block_at_a_time(tmp_path):
    rng = np.random.default_rng(9)
    s = rng.random((1100, 40000)).astype(np.float16)
    group = evalcore.write_dataset(tmp_path / "ds.zarr", {"scores/value": s, "gallery/label": np.zeros(40000, int),
                                                         "query/label": np.zeros(1100, int)}, chunk_rows=1024)
    chunks = group["scores/value"].chunks
    assert chunks[0] == 1024 and chunks[0] * chunks[1] * 2 <= 64 << 20 and chunks[1] < 40000
    reader = ScoreBlocks(group, 512, 1024, block_bytes=4 << 20)
    seen = 0
    for g0, block in reader.blocks():
        assert block.shape[0] == 512 and block.nbytes <= max(4 << 20, 512 * chunks[1] * 2)
        assert np.array_equal(block, s[512:1024, g0:g0 + block.shape[1]])
        seen += block.shape[1]
    assert seen == 40000


# --------------------------------------------------------------------------- where it runs and what it reads


def test_numpy_dask_and_zarr_inputs_and_a_written_dataset_give_the_same_report(tmp_path):
    da = pytest.importorskip("dask.array")
    rng = np.random.default_rng(10)
    s = rng.standard_normal((700, 5000))
    ql, gl = rng.integers(0, 30, 700), rng.integers(0, 30, 5000)
    a = evalcore.evaluate(scores=s, query_labels=ql, gallery_labels=gl)
    b = evalcore.evaluate(scores=da.from_array(s, chunks=(128, 1000)), query_labels=ql, gallery_labels=gl)
    z = zarr.create_array(zarr.storage.MemoryStore(), shape=s.shape, chunks=(300, 2000), dtype="float64")
    z[...] = s
    c = evalcore.evaluate(scores=z, query_labels=ql, gallery_labels=gl)
    path = tmp_path / "ds.zarr"
    evalcore.write_dataset(path, {"scores/value": da.from_array(s, chunks=(100, 5000)), "query/label": ql,
                                  "gallery/label": gl}, chunk_rows=256)
    assert str(zarr.open_group(path)["scores/value"].dtype) == "float64"
    d = evalcore.evaluate(str(path), chunk_rows=256)
    for other in (b, c, d):
        assert other.per_query.equals(a.per_query) and other.summary.equals(a.summary)
    assert len(d.run["chunks"]) == 2


@pytest.mark.cluster
def test_a_two_worker_local_cluster_gives_the_in_process_numbers(tmp_path):
    rng = np.random.default_rng(11)
    n_query, n_gallery = 1200, 6000
    d = rng.random((n_query, n_gallery)).astype(np.float32)
    d[:, 3000:3500] = d[:, 0:500]                     # ties
    arrays = {"scores/value": d, "query/label": rng.integers(0, 50, n_query),
              "gallery/label": rng.integers(0, 50, n_gallery), "query/cam": rng.integers(0, 3, n_query),
              "gallery/cam": rng.integers(0, 3, n_gallery)}
    path = tmp_path / "ds.zarr"
    evalcore.write_dataset(path, arrays, {"protocol": "reid"}, chunk_rows=512,
                           array_attrs={"scores/value": {"higher_is_better": False}})
    here = evalcore.evaluate(str(path))
    there = evalcore.evaluate(str(path), workers=2, memory_limit="1GiB")
    assert there.run["execution"].startswith("local cluster, 2")
    assert there.per_query.equals(here.per_query) and there.summary.equals(here.summary)
    assert here.run["higher_is_better"] is False and len(here.run["chunks"]) >= 2


def run_cli(*args):
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=240,
                          env={**os.environ, "EVALCORE_DEBUG": ""})


def test_a_scores_dataset_through_the_command_line(tmp_path):
    data = labelled(12, 260, 3000)
    q, g = data.pop("query"), data.pop("gallery")
    s = reference_scores(normalised(q), normalised(g))
    arrays = {"scores/value": -s.astype(np.float64), "query/label": data["query_labels"],
              "gallery/label": data["gallery_labels"], "query/cam": data["query_cams"],
              "gallery/cam": data["gallery_cams"], "gallery/junk": data["gallery_junk"]}
    path = tmp_path / "ds.zarr"
    evalcore.write_dataset(path, arrays, {"protocol": "reid"},
                           array_attrs={"scores/value": {"higher_is_better": False}})
    checked = run_cli("validate", path)
    assert checked.returncode == 0 and "scores/value (260, 3000)" in checked.stdout, checked.stderr
    done = run_cli("evaluate", path, "--out", tmp_path / "report", "--quiet")
    assert done.returncode == 0, done.stderr
    data.pop("query_groups")
    want = evalcore.evaluate(query=q, gallery=g, protocol="reid", **data)
    got = pq.read_table(tmp_path / "report" / "per_query.parquet")
    assert got.drop_columns(SCORE_COLUMNS).equals(want.per_query.drop_columns(SCORE_COLUMNS))
    assert got.column("top1_score").to_pylist() == [None if x is None else -x
                                                   for x in want.per_query.column("top1_score").to_pylist()]
    run = json.loads((tmp_path / "report" / "run.json").read_text())
    assert run["scores"].startswith("given: scores/value (float64 distances") and run["ranked_by"] == "scores/value"


def test_bad_given_values_in_a_dataset_exit_2_naming_the_array_and_rows(tmp_path):
    rng = np.random.default_rng(13)
    s = rng.random((600, 900))
    s[3, 10], s[550, 899] = np.nan, -np.inf
    path = tmp_path / "ds.zarr"
    evalcore.write_dataset(path, {"scores/value": s, "query/label": rng.integers(0, 5, 600),
                                  "gallery/label": rng.integers(0, 5, 900)}, chunk_rows=512)
    for args in (("validate", path), ("evaluate", path, "--out", tmp_path / "report")):
        done = run_cli(*args)
        assert done.returncode == 2
        # validate lists every bad row; a run stops at the first task that meets one
        rows = "3, 550" if args[0] == "validate" else "(3|550)"
        assert re.search(rf"scores/value: rows {rows} hold NaN or infinite values", done.stderr), done.stderr
        assert "Traceback" not in done.stderr
    assert not (tmp_path / "report").exists()
    both = tmp_path / "both.zarr"
    evalcore.write_dataset(both, {"scores/value": rng.random((4, 5)), "query/emb": np.ones((4, 3), np.float32),
                                  "gallery/emb": np.ones((5, 3), np.float32), "query/label": np.zeros(4, int),
                                  "gallery/label": np.zeros(5, int)})
    done = run_cli("evaluate", both, "--out", tmp_path / "report")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "scores/value: give the score matrix or query/emb and gallery/emb to rank by, not both" in done.stderr
    wrong = tmp_path / "wrong.zarr"
    evalcore.write_dataset(wrong, {"scores/value": rng.random((4, 5)), "query/label": np.zeros(3, int),
                                   "gallery/label": np.zeros(5, int)})
    done = run_cli("validate", wrong)
    assert done.returncode == 2 and "scores/value: 4 rows (one per query), but query/label has 3" in done.stderr


# --------------------------------------------------------------------------- input errors in the API


def test_input_errors_name_the_parameter():
    rng = np.random.default_rng(14)
    s = rng.random((6, 9))
    ql, gl = np.zeros(6, int), np.zeros(9, int)
    bad = s.copy()
    bad[4, 2] = np.nan
    cases = [
        (dict(scores=bad), evalcore.ArrayError, "scores: rows 4 hold NaN or infinite values"),
        (dict(distances=np.where(np.isnan(bad), np.inf, bad)), evalcore.ArrayError,
         "distances: rows 4 hold NaN or infinite values"),
        (dict(scores=s[0]), evalcore.InputError, "scores: must be 2-D (queries, gallery items), got shape (9,)"),
        (dict(scores=s, distances=s), evalcore.InputError, "distances: give scores or distances, not both"),
        (dict(scores=s, query=np.ones((6, 2)), gallery=np.ones((9, 2))), evalcore.InputError,
         "scores: give scores or the query and gallery embeddings, not both"),
        (dict(scores=(s * 10).astype(np.int64)), evalcore.InputError,
         "scores: dtype int64 is not float16, float32 or float64"),
        (dict(scores=s, similarity="dot"), evalcore.OptionError, "similarity: does not apply to given scores"),
        (dict(distances=s, threshold=0.5), evalcore.OptionError, "threshold: open-set decisions need scores"),
        (dict(distances=s, sweep=True), evalcore.OptionError, "sweep: the open-set sweep needs scores"),
    ]
    for kwargs, kind, words in cases:
        kwargs = {"query_labels": ql, "gallery_labels": gl, **kwargs}
        with pytest.raises(kind) as caught:
            evalcore.evaluate(**kwargs)
        assert str(caught.value).startswith(words), str(caught.value)
        assert "\n" not in str(caught.value)
    with pytest.raises(evalcore.InputError, match=r"^query_labels: 5 rows, but scores has 6 rows$"):
        evalcore.evaluate(scores=s, query_labels=ql[:5], gallery_labels=gl)
    with pytest.raises(evalcore.InputError, match=r"^gallery_labels: 8 rows, but distances has 9 columns$"):
        evalcore.evaluate(distances=s, query_labels=ql, gallery_labels=gl[:8])
    # the same scores, finite, are fine, and a threshold applies to scores
    r = evalcore.evaluate(scores=s, query_labels=ql, gallery_labels=gl, threshold=0.5)
    assert r.per_query.num_rows == 6
