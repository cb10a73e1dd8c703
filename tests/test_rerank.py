"""Re-ranked evaluation (``--rerank``) against a dense float64 transcription of the reference function.

The reference (tests/rerank_reference.py) builds the whole (Q + G)^2 matrix
and sorts it; the per-query metrics here come from a full sort of its final
distances (tests/reference.py), with the cosine scores computed in the test
(the contract's normalisation, then a float64 product rounded to float32).
"""
from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import random_reid
from reference import evaluate_all, relevance_class, relevance_reid
from rerank_reference import distances_from_cosine, re_ranking

import evalcore
from evalcore.cli.main import main
from evalcore.errors import InputError

EXACT = ["first_rank", "last_rank", "top1", "n_relevant"]
#: sums of i / r_i: the ranks are integers, only the order of the additions may differ from np.mean's
SUMS = ["ap", "ap_trapz", "inp", "hit_at_5", "recall_at_5"]


def unit_rows(x: np.ndarray) -> np.ndarray:
    """x * float32(1 / ||x||), the norm summed in float64 (CONTRACT §4)."""
    x = np.asarray(x, dtype=np.float32)
    scale = (1.0 / np.sqrt((x.astype(np.float64) ** 2).sum(axis=1))).astype(np.float32)
    return x * scale[:, None]


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine scores as float32 numbers: the float64 product of the normalised rows, rounded once."""
    return (unit_rows(a).astype(np.float64) @ unit_rows(b).astype(np.float64).T).astype(np.float32).astype(np.float64)


def reference_rows(arrays: dict, protocol: str, params=(20, 6, 0.3), ties="pessimistic"):
    q, g = arrays["query/emb"], arrays["gallery/emb"]
    d_qg = distances_from_cosine(cosines(q, g))
    final = re_ranking(d_qg, distances_from_cosine(cosines(q, q)), distances_from_cosine(cosines(g, g)), *params)
    if protocol == "reid":
        rel, junk = relevance_reid(arrays["query/label"], arrays["query/cam"], arrays["gallery/label"],
                                   arrays["gallery/cam"], arrays.get("gallery/junk"))
    else:
        rel, junk = relevance_class(arrays["query/label"], arrays["gallery/label"], arrays.get("gallery/junk"))
    rows = evaluate_all(-final, rel, junk, (1, 5), ties=ties)
    return rows, final, cosines(q, g)


def run(arrays: dict, protocol: str, params=(20, 6, 0.3), **kw) -> evalcore.Result:
    # cameras only where the protocol reads them: given to class they are an input error (issue 35)
    cams = dict(query_cams=arrays["query/cam"], gallery_cams=arrays["gallery/cam"]) if protocol == "reid" else {}
    return evalcore.evaluate(query=arrays["query/emb"], gallery=arrays["gallery/emb"],
                             query_labels=arrays["query/label"], gallery_labels=arrays["gallery/label"],
                             **cams, gallery_junk=arrays.get("gallery/junk"), protocol=protocol, ks=(1, 5),
                             rerank=params, **kw)


def assert_equal_to_reference(result: evalcore.Result, arrays: dict, protocol: str, params=(20, 6, 0.3),
                              ties="pessimistic") -> None:
    expected, final, cos = reference_rows(arrays, protocol, params, ties)
    got = result.per_query.to_pylist()
    assert len(got) == len(expected)
    for i, (row, ref) in enumerate(zip(got, expected)):
        for name in EXACT:
            assert row[name] == ref[name], (i, name, row[name], ref[name])
        for name in SUMS:
            assert row[name] == pytest.approx(ref[name], rel=1e-13, abs=0) if ref[name] is not None \
                else row[name] is None, (i, name, row[name], ref[name])
        top1 = ref["top1"]
        assert row["top1_rerank_distance"] == final[i, top1]
        assert row["top1_score"] == cos[i, top1]  # the cosine score of the re-ranked rank 1
    assert result.run["options"]["rerank"] == list(params) or tuple(result.run["options"]["rerank"]) == params


@pytest.mark.parametrize("protocol", ["reid", "class"])
def test_metrics_equal_the_dense_reference(protocol):
    arrays = random_reid(np.random.default_rng(7), n_query=90, n_gallery=700, n_ids=40, spread=0.8)
    result = run(arrays, protocol)
    assert_equal_to_reference(result, arrays, protocol)
    # re-ranking changes the order: the test would notice a plain ranking
    plain = run(arrays, protocol, None)
    assert plain.per_query.column("ap").to_pylist() != result.per_query.column("ap").to_pylist()


def test_other_parameters_optimistic_ties_and_chunks():
    arrays = random_reid(np.random.default_rng(8), n_query=70, n_gallery=500, n_ids=30, spread=0.8)
    result = run(arrays, "reid", (8, 3, 0.5), ties="optimistic", chunk_rows=16)
    assert_equal_to_reference(result, arrays, "reid", (8, 3, 0.5), ties="optimistic")


def test_exact_ties():
    """Copies of gallery rows and of queries: equal final distances, broken by the tie policy and index."""
    arrays = random_reid(np.random.default_rng(9), n_query=40, n_gallery=300, n_ids=20, spread=0.8,
                         global_junk=0.0)
    g = arrays["gallery/emb"]
    g[150:300] = g[0:150]  # every gallery row twice
    arrays["query/emb"][20:40] = arrays["query/emb"][0:20]
    for ties in ("pessimistic", "optimistic"):
        result = run(arrays, "class", (10, 4, 0.3), ties=ties)
        assert_equal_to_reference(result, arrays, "class", (10, 4, 0.3), ties=ties)
    expected, final, _ = reference_rows(arrays, "class", (10, 4, 0.3))
    assert (final[:, :150] == final[:, 150:]).mean() > 0.5  # the case really has exact ties


@pytest.mark.parametrize("bad, word", [("0,6,0.3", "k1"), ("20,0,0.3", "k2"), ("20,6,1.5", "lambda"),
                                       ("20,6,-0.1", "lambda"), ("20,6", "k1,k2,lambda"), ("a,b,c", "k1")])
def test_bad_parameters_exit_2_naming_the_option(write, tmp_path, capsys, bad, word):
    path = write(random_reid(np.random.default_rng(1), n_query=10, n_gallery=50))
    code = main(["evaluate", str(path), "--out", str(tmp_path / "out"), "--rerank", bad])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and err[0].startswith("evalcore: --rerank") or "--rerank" in err[-1]
    assert word in err[-1]
    assert not (tmp_path / "out").exists()


def test_bad_parameters_in_the_api():
    arrays = random_reid(np.random.default_rng(1), n_query=10, n_gallery=50)
    with pytest.raises(InputError, match="rerank: lambda"):
        run(arrays, "reid", (20, 6, 2.0))
    with pytest.raises(InputError, match="rerank: .*must not exceed"):
        run(arrays, "reid", (100, 6, 0.3))
    with pytest.raises(InputError, match="rerank: needs similarity cosine"):
        run(arrays, "reid", (20, 6, 0.3), similarity="dot")


def test_command_line_writes_the_reranked_report(write, tmp_path):
    arrays = random_reid(np.random.default_rng(5), n_query=50, n_gallery=300, n_ids=20, spread=0.8)
    path = write(arrays, chunk_rows=20)
    out = tmp_path / "out"
    assert main(["evaluate", str(path), "--out", str(out), "--protocol", "reid", "--ks", "1,5",
                 "--rerank", "12,4,0.4", "--quiet"]) == 0
    import pyarrow.parquet as pq

    got = pq.read_table(out / "per_query.parquet").to_pylist()
    expected, _, _ = reference_rows(arrays, "reid", (12, 4, 0.4))
    assert [r["first_rank"] for r in got] == [r["first_rank"] for r in expected]
    assert [r["last_rank"] for r in got] == [r["last_rank"] for r in expected]
    assert json.loads((out / "run.json").read_text())["options"]["rerank"] == [12, 4, 0.4]


def test_cluster_of_processes_equals_threads(write, monkeypatch):
    """Neighbour search and chunks as tasks on a real LocalCluster of 2 processes: the same tables as threads.
    The cluster's chunks take the search's estimates from the workers (search tasks of 256 rows, chunks of
    300 that straddle them); the threads multiply their own (nothing kept)."""
    from evalcore.engine import rerank as engine_rerank

    arrays = random_reid(np.random.default_rng(11), n_query=1100, n_gallery=1500, n_ids=80, spread=0.8)
    path = write(arrays, chunk_rows=512)
    monkeypatch.setattr(engine_rerank, "KEPT_ESTIMATES_BYTES", 0)
    threads = evalcore.evaluate(path, protocol="reid", rerank=(20, 6, 0.3))
    monkeypatch.undo()
    monkeypatch.setattr(engine_rerank, "SEARCH_ROWS", 256)
    cluster = evalcore.evaluate(path, protocol="reid", rerank=(20, 6, 0.3), workers=2, chunk_rows=300)
    assert cluster.run["workers"] == 2 and threads.run["execution"] != cluster.run["execution"]
    assert len(cluster.run["chunks"]) >= 2
    # the chunks read the kept blocks on the workers (those that ran elsewhere multiplied their own)
    assert cluster.run["rerank_chunks_from_estimates"] >= 1 and threads.run["rerank_chunks_from_estimates"] == 0
    assert cluster.per_query.equals(threads.per_query)
    assert cluster.summary.equals(threads.summary)


@pytest.mark.parametrize("threads", [1, 2])
def test_kept_estimates_change_nothing(write, monkeypatch, threads):
    """The chunks' scan from the search's kept query x gallery estimates, and from its own products (nothing
    kept): the same tables, equal to the reference; the kept ones are really used."""
    from evalcore.engine import rerank as engine_rerank
    from evalcore.engine import schedule
    from evalcore.engine.evaluate import Options
    from evalcore.engine.evaluate import evaluate as engine_evaluate

    arrays = random_reid(np.random.default_rng(12), n_query=130, n_gallery=900, n_ids=40, spread=0.8)
    path = write(arrays, chunk_rows=50)
    options = Options(protocol="reid", ks=(1, 5), rerank=(20, 6, 0.3))
    used = []
    rows_of = schedule.estimate_rows
    monkeypatch.setattr(schedule, "estimate_rows", lambda *a: used.append(rows_of(*a)) or used[-1])
    monkeypatch.setattr(engine_rerank, "SEARCH_ROWS", 64)  # query rows over three search tasks
    kept = engine_evaluate(path, options, threads=threads, chunk_rows=50)
    assert used and all(u is not None and u.shape[1] == 900 for u in used)
    used.clear()
    monkeypatch.setattr(engine_rerank, "KEPT_ESTIMATES_BYTES", 130 * 900 * 4 - 1)
    own = engine_evaluate(path, options, threads=threads, chunk_rows=50)
    assert used and all(u is None for u in used)
    assert kept.run["rerank_chunks_from_estimates"] == len(kept.run["chunks"]) >= 1
    assert own.run["rerank_chunks_from_estimates"] == 0
    assert kept.per_query.equals(own.per_query) and kept.summary.equals(own.summary)
    assert_equal_to_reference(kept, arrays, "reid")


@pytest.mark.parametrize("params", [(20, 6, 0.3), (5, 1, 0.0), (7, 9, 1.0)])
def test_every_final_distance_equals_the_reference_bit_for_bit(params):
    """The sparse model's final distance of every (query, gallery) pair against the dense reference's matrix."""
    from evalcore.core import rerank as rr
    from evalcore.core.scan.neighbors import ArrayColumns, search

    arrays = random_reid(np.random.default_rng(12), n_query=60, n_gallery=400, n_ids=25, spread=0.8)
    q, g = arrays["query/emb"], arrays["gallery/emb"]
    rows = np.concatenate([unit_rows(q), unit_rows(g)])
    _, expected, cos = reference_rows(arrays, "class", params)
    model = rr.build_model(rows, len(q), search(rows, 0, ArrayColumns(rows), max(params[0] + 1, params[1])),
                           rr.RerankParams(*params))
    shared = model.shared(0, len(q))
    jac = np.ones(expected.shape)
    jac[np.repeat(np.arange(len(q)), np.diff(shared.indptr)), shared.cols] = rr.jaccard(shared.vals)
    got = rr.final_distance(jac, rr.original_distance(cos, model.scale[:len(q), None]), params[2])
    np.testing.assert_array_equal(got, expected)
    assert (jac < 1).any() and (jac == 1).any()


def test_set_scores_from_the_lists_equal_computed_ones():
    """The model's scores of (row, set member) pairs: taken from the row's nearest list where the member is
    on it, computed otherwise; both ways give canonical_pairs' value exactly, and both ways are taken."""
    from evalcore.core import rerank as rr
    from evalcore.core.canonical import canonical_pairs
    from evalcore.engine.rerank import nearest_here

    arrays = random_reid(np.random.default_rng(13), n_query=80, n_gallery=600, n_ids=30, spread=0.8)
    x = unit_rows(np.concatenate([arrays["query/emb"], arrays["gallery/emb"]]))
    x[600:640] = x[100:140]  # exact duplicates: equal scores on the lists
    nearest, _ = nearest_here(x, 21)
    indptr, members = rr.k_reciprocal_csr(nearest.ids, 20)
    ia = np.repeat(np.arange(len(x)), np.diff(indptr))
    got = rr.set_scores(x, nearest, ia, members)
    assert np.array_equal(got, canonical_pairs(x, x, ia, members))
    listed = (nearest.ids[ia] == members[:, None]).any(axis=1)
    assert 0 < listed.sum() < len(ia)
