"""Warnings reach Python's ``warnings`` as ``evalcore.EvalcoreWarning``, in the Python parameters' words
(issue 37 item 4); the command line prints each once, with its flags; torchreid's drop-in stays silent
where torchreid skips queries without a word."""
from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import evalcore
from evalcore.compat.fastreid import evaluate_rank as fastreid_rank
from evalcore.compat.torchreid import evaluate_rank as torchreid_rank
from evalcore.io import dataset as ds

CLI = [str(Path(sys.executable).with_name("evalcore"))]


def evalcore_warnings(records) -> list[str]:
    return [str(r.message) for r in records if issubclass(r.category, evalcore.EvalcoreWarning)]


def unknown_query_arrays() -> dict:
    """Two queries; the second's label (9) is nowhere in the gallery: an unknown query."""
    gallery = np.eye(4, dtype=np.float32)
    return {"query": gallery[[0, 2]] + 0.1, "gallery": gallery, "query_labels": np.array([0, 9]),
            "gallery_labels": np.array([0, 1, 2, 3])}


def qrels_dataset(path):
    """q0: relevant at rank 2; q1: judged, nothing relevant; q2: not judged at all."""
    ds.write_dataset(path, {"query/key": np.array(["q0", "q1", "q2"], dtype=object),
                            "gallery/key": np.array(["a", "b", "c"], dtype=object),
                            "ranking/item": np.array([[0, 1, 2], [0, 1, 2], [2, 1, 0]]),
                            "qrels/query": np.array([0, 0, 1]), "qrels/item": np.array([0, 1, 2]),
                            "qrels/rel": np.array([0, 1, 0], np.int8)}, {"protocol": "qrels"})
    return path


def cli(*args):
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=240,
                          env={**os.environ, "EVALCORE_DEBUG": ""})


def test_unknown_queries_warn_naming_threshold_and_the_command_line_prints_it_once_with_its_flag(tmp_path):
    with pytest.warns(evalcore.EvalcoreWarning, match=r"1 of 2 queries have no relevant gallery item") as records:
        result = evalcore.evaluate(**unknown_query_arrays())
    said = evalcore_warnings(records)
    assert len(said) == 1 and "pass threshold= to score them" in said[0] and "--" not in said[0]
    assert records[0].filename == __file__  # stacklevel: the user's line, not evalcore's
    assert result.warnings == said  # run["warnings"] in the same words

    arrays = unknown_query_arrays()
    path = tmp_path / "ds.zarr"
    ds.write_dataset(path, {"query/emb": arrays["query"], "gallery/emb": arrays["gallery"],
                            "query/label": arrays["query_labels"], "gallery/label": arrays["gallery_labels"]})
    done = cli("evaluate", path, "--out", tmp_path / "out", "--quiet")
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if "no relevant gallery item" in line]
    assert len(lines) == 1 and lines[0].startswith("evalcore: warning: 1 of 2 queries")
    assert "pass --threshold to" in lines[0]
    assert "EvalcoreWarning" not in done.stderr


def test_judged_empty_queries_warn_naming_empty_queries(tmp_path):
    path = qrels_dataset(tmp_path / "q.zarr")
    with pytest.warns(evalcore.EvalcoreWarning, match=r"1 judged queries have no relevant item") as records:
        evalcore.evaluate(path, ks=(1, 2), max_rank=3, empty_queries="zero")
    said = evalcore_warnings(records)
    assert any('(empty_queries="zero")' in w for w in said)
    assert not any("--" in w for w in said)
    # under skip: the note that trec_eval counts the judged ones as 0 names the parameter too
    with pytest.warns(evalcore.EvalcoreWarning, match=r"2 of 3 queries have no relevant") as records:
        evalcore.evaluate(path, ks=(1, 2), max_rank=3)
    said = evalcore_warnings(records)
    assert any('1 of them are judged, which trec_eval counts as 0 (empty_queries="zero")' in w for w in said)
    assert not any("--" in w for w in said)


def test_a_max_rank_past_the_gallery_warns_naming_max_rank():
    arrays = {**unknown_query_arrays(), "query_labels": np.array([0, 2])}
    with pytest.warns(evalcore.EvalcoreWarning, match=r"^max_rank=100000 is more than the 4 gallery items"):
        evalcore.evaluate(**arrays, max_rank=100000)


def test_cutoffs_past_the_lists_warn(tmp_path):
    path = qrels_dataset(tmp_path / "q.zarr")
    with pytest.warns(evalcore.EvalcoreWarning, match=r"cut-off 5 is past the ranking lists' length"):
        evalcore.evaluate(path, ks=(5,), max_rank=3)


def test_a_datasets_arrays_another_protocol_uses_warn(tmp_path):
    arrays = unknown_query_arrays()
    path = tmp_path / "ds.zarr"
    ds.write_dataset(path, {"query/emb": arrays["query"], "gallery/emb": arrays["gallery"],
                            "query/label": np.array([0, 2]), "gallery/label": arrays["gallery_labels"],
                            "query/cam": np.array([0, 0]), "gallery/cam": np.array([1, 1, 1, 1])})
    with pytest.warns(evalcore.EvalcoreWarning, match=r"query/cam, gallery/cam: not used by protocol 'class'"):
        evalcore.evaluate(path, protocol="class", max_rank=4)


def test_compare_warns_when_the_runs_options_differ(tmp_path):
    arrays = {**unknown_query_arrays(), "query_labels": np.array([0, 2])}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = evalcore.evaluate(**arrays, max_rank=4)
        b = evalcore.evaluate(**arrays, max_rank=4, ties="optimistic")
    with pytest.warns(evalcore.EvalcoreWarning, match=r"run2 and run1 were evaluated with different options") as rec:
        evalcore.compare(a, b, resamples=100, permutations=100)
    assert rec[0].filename == __file__
    # the command line prints it once, not again through Python's warnings
    a.save(tmp_path / "a")
    b.save(tmp_path / "b")
    done = cli("compare", tmp_path / "a", tmp_path / "b", "--resamples", 100, "--permutations", 100)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if "evaluated with different options" in line]
    assert len(lines) == 1 and lines[0].startswith("evalcore: warning: ")
    assert "EvalcoreWarning" not in done.stderr


@pytest.mark.parametrize("evaluate_rank", [torchreid_rank, fastreid_rank])
def test_the_reid_drop_ins_skip_queries_without_a_word_as_torchreid_does(evaluate_rank):
    distances = np.random.default_rng(0).random((3, 4))
    given = {"query_labels": np.array([1, 2, 7]), "gallery_labels": np.array([1, 2, 2, 1]),
             "query_cams": np.array([0, 0, 0]), "gallery_cams": np.array([1, 1, 0, 1])}
    # the same data through evaluate says that query 7 has no match...
    with pytest.warns(evalcore.EvalcoreWarning, match=r"1 of 3 queries have no relevant gallery item"):
        evalcore.evaluate(distances=distances, protocol="reid", max_rank=3, **given)
    # ... which torchreid skips without a word, and so does its drop-in
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        evaluate_rank(distances, given["query_labels"], given["gallery_labels"], given["query_cams"],
                      given["gallery_cams"], max_rank=3)
    assert evalcore_warnings(records) == []


def test_evalcore_trec_says_what_it_leaves_out_as_an_evalcore_warning_and_the_drop_ins_stay_silent():
    qrels = {"q1": {"d1": 1, "d2": 0}}
    run = {"q1": {"d1": 0.9, "d2": 0.1}, "q9": {"d1": 0.5}}    # q9 has no judgements: trec_eval leaves it out
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = evalcore.trec(qrels, run, measures=["map"])
    said = [str(w.message) for w in caught if issubclass(w.category, evalcore.EvalcoreWarning)]
    assert said == result.warnings == ["run: queries without judgements in qrels are left out: 'q9' (entry 3)"]
    assert result.aggregate["map"] == 1.0
    from evalcore.compat.pytrec_eval import RelevanceEvaluator
    with warnings.catch_warnings():
        warnings.simplefilter("error", evalcore.EvalcoreWarning)    # pytrec_eval says nothing: nor does its drop-in
        assert RelevanceEvaluator(qrels, {"map"}).evaluate(run) == {"q1": {"map": 1.0}}
