"""αQE and DBA (``--query-expansion``, ``--database-augmentation``) against a dense float64 reference.

The reference here builds the full similarity matrices in float64 (each
pair's products summed elementwise, so identical or mirrored rows give
identical numbers), sorts every row with CONTRACT §4's rule (higher score
first, then the lower index), sums itself plus the K best weighted by
max(s, 0)^alpha, renormalises, and then ranks the new vectors by brute force
(tests/reference.py).
"""
from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import random_reid
from reference import cosine_scores, evaluate_all, relevance_class, relevance_reid

import evalcore
from evalcore.cli.main import main
from evalcore.errors import InputError


def unit64(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x / np.sqrt((x ** 2).sum(axis=1, keepdims=True))


def similarities(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Every pair's dot product, summed per pair (no BLAS blocking: equal pairs give equal numbers)."""
    return (a[:, None, :] * b[None, :, :]).sum(axis=2)


def nearest(sims: np.ndarray, k: int, exclude_self: bool = False) -> np.ndarray:
    """Each row's k best columns: highest similarity first, ties to the lower index; optionally not itself."""
    out = []
    for i, row in enumerate(sims):
        order = np.lexsort((np.arange(len(row)), -row))
        if exclude_self:
            order = order[order != i]
        out.append(order[:k])
    return np.array(out)


def expand(rows: np.ndarray, others: np.ndarray, k: int, alpha: float, exclude_self: bool = False) -> np.ndarray:
    """Each row plus its k nearest ``others`` weighted by max(s, 0)^alpha, best first, L2-normalised."""
    sims = similarities(rows, others)
    ids = nearest(sims, k, exclude_self)
    new = rows.copy()
    for i in range(len(rows)):
        for j in ids[i]:
            new[i] += max(sims[i, j], 0.0) ** alpha * others[j]
    return unit64(new)


def reference_rows(arrays: dict, protocol: str, qe=None, dba=None, ties="pessimistic"):
    q, g = unit64(arrays["query/emb"]), unit64(arrays["gallery/emb"])
    if dba is not None:
        g = expand(g, g, dba[0], dba[1], exclude_self=True)
    if qe is not None:
        q = expand(q, g, qe[0], qe[1])
    if protocol == "reid":
        rel, junk = relevance_reid(arrays["query/label"], arrays["query/cam"], arrays["gallery/label"],
                                   arrays["gallery/cam"], arrays.get("gallery/junk"))
    else:
        rel, junk = relevance_class(arrays["query/label"], arrays["gallery/label"], arrays.get("gallery/junk"))
    return evaluate_all(cosine_scores(q, g), rel, junk, (1, 5), ties=ties)


def check_rows(got, expected):
    assert [r["first_rank"] for r in got] == [r["first_rank"] for r in expected]
    assert [r["last_rank"] for r in got] == [r["last_rank"] for r in expected]
    assert [r["top1"] for r in got] == [r["top1"] for r in expected]
    for name in ("ap", "ap_trapz", "inp"):
        assert [r[name] for r in got] == pytest.approx([r[name] for r in expected], abs=1e-12), name


def api_args(arrays: dict, protocol: str) -> dict:
    out = dict(query=arrays["query/emb"], gallery=arrays["gallery/emb"], query_labels=arrays["query/label"],
               gallery_labels=arrays["gallery/label"], gallery_junk=arrays.get("gallery/junk"), protocol=protocol,
               ks=(1, 5))
    if protocol == "reid":
        out.update(query_cams=arrays["query/cam"], gallery_cams=arrays["gallery/cam"])
    return out


SMALL = random_reid(np.random.default_rng(31), n_query=40, n_gallery=300, n_ids=20, spread=0.9)


@pytest.mark.parametrize("protocol", ["reid", "class"])
@pytest.mark.parametrize("qe,dba", [((1, 3.0), None), ((5, 0.0), None), ((5, 3.0), None),
                                    (None, (1, 0.0)), (None, (5, 3.0)), ((5, 3.0), (5, 3.0)), ((1, 0.0), (5, 3.0)),
                                    # every item a neighbour: negative similarities clamped (odd ALPHA, and 0)
                                    ((300, 3.0), None), ((300, 0.0), (299, 1.0))])
def test_per_query_metrics_equal_the_dense_reference(protocol, qe, dba):
    result = evalcore.evaluate(**api_args(SMALL, protocol), query_expansion=qe, database_augmentation=dba)
    expected = reference_rows(SMALL, protocol, qe, dba)
    check_rows(result.per_query.to_pylist(), expected)
    assert result.run["options"].get("query_expansion") == qe
    assert result.run["options"].get("database_augmentation") == dba


def test_the_expansion_changes_the_ranking():
    """Guards the test above: with K = 5 the expanded ranking is not the plain one."""
    plain = evalcore.evaluate(**api_args(SMALL, "reid"))
    expanded = evalcore.evaluate(**api_args(SMALL, "reid"), query_expansion=(5, 3), database_augmentation=(5, 3))
    assert plain.per_query.column("ap").to_pylist() != expanded.per_query.column("ap").to_pylist()
    assert reference_rows(SMALL, "reid") != reference_rows(SMALL, "reid", (5, 3.0), (5, 3.0))


def tied_dataset(rng) -> dict:
    """Gallery rows in mirrored pairs (dimension 1 negated) and exact duplicates; queries with 0 in dimension 1,
    so both members of a pair have exactly the same score for every query; the pairs' labels differ."""
    half = rng.standard_normal((60, 6))
    mirror = half.copy()
    mirror[:, 1] *= -1
    gallery = np.concatenate([half, mirror, half[:20]]).astype(np.float32)
    labels = np.concatenate([np.arange(60) % 7, (np.arange(60) + 1) % 7, np.arange(20) % 7])
    query = rng.standard_normal((25, 6)).astype(np.float32)
    query[:, 1] = 0
    return {"query/emb": query, "gallery/emb": gallery, "query/label": (np.arange(25) % 7).astype(np.int64),
            "gallery/label": labels.astype(np.int64)}


@pytest.mark.parametrize("ties", ["pessimistic", "optimistic"])
@pytest.mark.parametrize("qe,dba", [((3, 3.0), None), ((5, 1.0), (3, 3.0)), (None, (1, 3.0))])
def test_exact_ties_follow_the_lowest_index_rule(ties, qe, dba):
    arrays = tied_dataset(np.random.default_rng(5))
    result = evalcore.evaluate(**api_args(arrays, "class"), ties=ties, query_expansion=qe, database_augmentation=dba)
    check_rows(result.per_query.to_pylist(), reference_rows(arrays, "class", qe, dba, ties=ties))


def test_command_line_and_run_json(write, tmp_path):
    arrays = random_reid(np.random.default_rng(32), n_query=50, n_gallery=400, n_ids=20, spread=0.9)
    path = write(arrays, chunk_rows=16)
    out = tmp_path / "out"
    assert main(["evaluate", str(path), "--out", str(out), "--protocol", "reid", "--ks", "1,5", "--quiet",
                 "--query-expansion", "4,3", "--database-augmentation", "2,1.5"]) == 0
    check_rows(pq.read_table(out / "per_query.parquet").to_pylist(),
               reference_rows(arrays, "reid", (4, 3.0), (2, 1.5)))
    options = json.loads((out / "run.json").read_text())["options"]
    assert options["query_expansion"] == [4, 3.0] and options["database_augmentation"] == [2, 1.5]


@pytest.mark.parametrize("option", ["--query-expansion", "--database-augmentation"])
@pytest.mark.parametrize("bad", ["0,3", "-2,3", "2.5,3", "2,-1", "2,nan", "2", "x,y", "2,3,4", "500,1"])
def test_bad_values_exit_2_naming_the_option(write, tmp_path, capsys, option, bad):
    path = write(random_reid(np.random.default_rng(2), n_query=5, n_gallery=50))
    code = main(["evaluate", str(path), "--out", str(tmp_path / "out"), "--quiet", option, bad])
    err = capsys.readouterr().err
    assert code == 2 and option in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_dba_needs_one_other_gallery_row_per_neighbour(capsys, tmp_path, write):
    """K = G is fine for αQE but DBA has only G - 1 other rows."""
    path = write(random_reid(np.random.default_rng(2), n_query=5, n_gallery=50))
    assert main(["evaluate", str(path), "--out", str(tmp_path / "a"), "--quiet", "--query-expansion", "50,1"]) == 0
    assert main(["evaluate", str(path), "--out", str(tmp_path / "b"), "--quiet",
                 "--database-augmentation", "50,1"]) == 2
    assert "--database-augmentation: K = 50 exceeds the 49 other gallery rows" in capsys.readouterr().err


def test_api_errors_name_the_parameter():
    args = api_args(SMALL, "reid")
    with pytest.raises(InputError, match="query_expansion"):
        evalcore.evaluate(**args, query_expansion=(0, 3))
    with pytest.raises(InputError, match="database_augmentation"):
        evalcore.evaluate(**args, database_augmentation="3")
    with pytest.raises(InputError, match="query_expansion.*cosine"):
        evalcore.evaluate(**args, similarity="dot", query_expansion=(3, 3))


def test_cluster_of_processes_equals_threads(write):
    """The neighbour searches as tasks on a real LocalCluster of 2 processes, the expanded dataset scattered to
    them: the same tables as threads in this process."""
    arrays = random_reid(np.random.default_rng(33), n_query=700, n_gallery=2600, n_ids=80, spread=0.8)
    path = write(arrays, chunk_rows=512)
    kw = dict(protocol="reid", query_expansion=(5, 3), database_augmentation=(4, 3))
    threads = evalcore.evaluate(path, **kw)
    cluster = evalcore.evaluate(path, **kw, workers=2, chunk_rows=512)
    assert cluster.run["workers"] == 2 and threads.run["execution"] != cluster.run["execution"]
    assert len(cluster.run["chunks"]) >= 2
    assert cluster.per_query.equals(threads.per_query)
    assert cluster.summary.equals(threads.summary)
    assert cluster.run["fingerprint"] == threads.run["fingerprint"] == evalcore.evaluate(path).run["fingerprint"]


def test_rerank_applies_to_the_expanded_vectors():
    """DBA and αQE first, then k-reciprocal re-ranking of the new vectors: the dense references of both, chained."""
    from test_rerank import reference_rows as rerank_reference

    q, g = unit64(SMALL["query/emb"]), unit64(SMALL["gallery/emb"])
    g = expand(g, g, 3, 3.0, exclude_self=True)
    q = expand(q, g, 4, 3.0)
    expanded = {**SMALL, "query/emb": q.astype(np.float32), "gallery/emb": g.astype(np.float32)}
    expected, _, _ = rerank_reference(expanded, "reid", (10, 4, 0.3))
    result = evalcore.evaluate(**api_args(SMALL, "reid"), query_expansion=(4, 3), database_augmentation=(3, 3),
                               rerank=(10, 4, 0.3))
    check_rows(result.per_query.to_pylist(), expected)


def test_no_queries_and_other_rankings():
    """No query rows: an empty report; a given score matrix has no vectors to expand (InputError naming the parameter)."""
    args = api_args(SMALL, "class")
    empty = evalcore.evaluate(**{**args, "query": SMALL["query/emb"][:0], "query_labels": SMALL["query/label"][:0]},
                              query_expansion=(3, 3), database_augmentation=(2, 3))
    assert empty.per_query.num_rows == 0
    with pytest.raises(InputError, match="query_expansion: needs query and gallery .this dataset is ranked by scores"):
        evalcore.evaluate(scores=cosine_scores(SMALL["query/emb"], SMALL["gallery/emb"]),
                          query_labels=SMALL["query/label"], gallery_labels=SMALL["gallery/label"],
                          query_expansion=(3, 3))


def test_a_vector_cancelled_by_its_neighbour_is_an_input_error():
    """ALPHA = 0 weighs an exactly opposite neighbour 1: x + (-x) has no direction."""
    q = np.array([[1.0, 2.0, 3.0]], np.float32)
    with pytest.raises(InputError, match="query_expansion: the expanded vector of row 0 is zero"):
        evalcore.evaluate(query=q, gallery=-q, query_labels=[0], gallery_labels=[0], query_expansion=(1, 0))
    ok = evalcore.evaluate(query=q, gallery=-q, query_labels=[0], gallery_labels=[0], query_expansion=(1, 1))
    assert ok.per_query.column("first_rank").to_pylist() == [1]
