"""TREC compatibility: qrels and run import, --empty-queries, and trec_eval's own numbers on its test files.

The small cases are checked against counts done by hand in the comments; the
fixture cases against trec_eval's published output for its test files
(tests/fixtures/trec/).
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from evalcore.engine.evaluate import Options, evaluate
from evalcore.errors import InputError
from evalcore.io import dataset as ds
from evalcore.io.importers import import_to, read_trec, read_trec_run

CLI = [str(Path(sys.executable).with_name("evalcore"))]
TREC = Path(__file__).parent / "fixtures" / "trec"


def run(*args, timeout=240):
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "EVALCORE_DEBUG": ""})


def lines(path, text):
    path.write_text(text)
    return path


# --------------------------------------------------------------------------- import trec


def test_negative_judgement_is_judged_not_relevant_not_junk(tmp_path):
    """A -1 grade used to become junk (removed from the ranking), lifting the relevant item below it."""
    qrels = lines(tmp_path / "qrels", "q1 0 d1 -1\nq1 0 d2 1\nq1 0 d3 0\n")
    queries = lines(tmp_path / "queries", "q1\n")
    gallery = lines(tmp_path / "gallery", "d1\nd2\nd3\n")
    arrays, attrs = read_trec(qrels, queries=queries, gallery=gallery)
    assert arrays["qrels/rel"].tolist() == [0, 1, 0]
    assert attrs["protocol"] == "qrels"
    # ranked d1, d2, d3: d1 is judged non-relevant and stays, so d2 is at rank 2 (AP 0.5, trec_eval's value)
    arrays["ranking/item"] = np.array([[0, 1, 2]])
    path = tmp_path / "ds.zarr"
    ds.write_dataset(path, arrays, {"protocol": "qrels"})
    row = evaluate(path, Options(protocol="qrels", ks=(1,))).per_query.to_pylist()[0]
    assert (row["first_rank"], row["ap"], row["n_junk"]) == (2, 0.5, 0)


def test_grades_of_one_and_above_are_relevant(tmp_path):
    qrels = lines(tmp_path / "qrels", "q1 0 d1 2\nq1 0 d2 1\nq1 0 d3 0\nq1 0 d4 -2\n")
    arrays, _ = read_trec(qrels, queries=lines(tmp_path / "q", "q1\n"), gallery=lines(tmp_path / "g", "d1\nd2\nd3\nd4\n"))
    assert arrays["qrels/rel"].tolist() == [1, 1, 0, 0]


def test_judged_queries_absent_from_the_dataset_are_left_out_with_a_warning(tmp_path):
    qrels = lines(tmp_path / "qrels", "q1 0 d1 1\nq9 0 d1 1\nq9 0 d2 0\nq8 0 d2 1\n")
    out = tmp_path / "ds.zarr"
    proc = run("import", "trec", qrels, "--queries", lines(tmp_path / "q", "q1\n"),
               "--gallery", lines(tmp_path / "g", "d1\nd2\n"), "--out", out)
    assert proc.returncode == 0, proc.stderr
    assert "warning" in proc.stderr and "'q9' (line 2)" in proc.stderr and "'q8' (line 4)" in proc.stderr
    group = ds.open_dataset(out)
    assert ds.read(group, "qrels/query").tolist() == [0] and ds.read(group, "qrels/item").tolist() == [0]


def test_unknown_document_is_still_an_error(tmp_path):
    qrels = lines(tmp_path / "qrels", "q1 0 d1 1\nq1 0 d7 1\n")
    with pytest.raises(InputError, match=r"qrels: line 2, field docid: unknown document 'd7'"):
        read_trec(qrels, queries=lines(tmp_path / "q", "q1\n"), gallery=lines(tmp_path / "g", "d1\n"))


# --------------------------------------------------------------------------- import trec-run


RUN = """\
q1 Q0 dA 1 3.0 tag
q1 Q0 dB 2 2.0 tag
q1 Q0 dC 3 2.0 tag
q1 Q0 dD 4 1.0 tag
q2 Q0 dA 1 5.0 tag
q2 Q0 dB 2 4.0 tag
q3 Q0 dA 1 1.0 tag
"""
QRELS = """\
q1 0 dB 1
q1 0 dC 0
q1 0 dE 1
q2 0 dA 0
q4 0 dA 1
"""


def test_trec_run_becomes_rankings_scores_keys_and_qrels(tmp_path):
    arrays, attrs = read_trec_run(lines(tmp_path / "run", RUN), qrels=lines(tmp_path / "qrels", QRELS))
    assert arrays["query/key"].tolist() == ["q1", "q2"]                 # q3 unjudged, q4 without results
    assert arrays["gallery/key"].tolist() == ["dA", "dB", "dC", "dD", "dE"]
    assert arrays["ranking/item"].tolist() == [[0, 1, 2, 3], [0, 1, -1, -1]]
    np.testing.assert_array_equal(arrays["ranking/score"], np.array([[3, 2, 2, 1], [5, 4, np.nan, np.nan]], np.float32))
    assert list(zip(arrays["qrels/query"].tolist(), arrays["qrels/item"].tolist(), arrays["qrels/rel"].tolist())) == \
        [(0, 1, 1), (0, 2, 0), (0, 4, 1), (1, 0, 0)]
    assert attrs["protocol"] == "qrels" and attrs["trec_order"] == "score"


def test_trec_eval_order_breaks_ties_by_docno_descending_and_drops_scores(tmp_path):
    arrays, attrs = read_trec_run(lines(tmp_path / "run", RUN), qrels=lines(tmp_path / "qrels", QRELS),
                                  order="trec_eval")
    assert arrays["ranking/item"].tolist() == [[0, 2, 1, 3], [0, 1, -1, -1]]   # dC before dB (equal scores)
    assert "ranking/score" not in arrays and attrs["trec_order"] == "trec_eval"


@pytest.mark.parametrize("text, words", [
    ("q1 Q0 dA 1 3.0\n", r"run: line 1: 5 fields, expected 6 \(qid Q0 docno rank score tag\)"),
    ("q1 Q0 dA 1 3.0 t\nq1 Q0 dB 2 high t\n", r"run: line 2, field score: 'high' is not a number"),
    ("q1 Q0 dA 1 nan t\n", r"run: line 1, field score: 'nan' is not a finite number"),
    ("q1 Q0 dA 1 3.0 t\nq1 Q0 dB 2 2.0 t\nq1 Q0 dA 3 1.0 t\n",
     r"run: line 3, field docno: 'dA' listed twice for query 'q1' \(also line 1\)"),
])
def test_malformed_run_lines_exit_2_naming_file_and_line(tmp_path, text, words):
    out = tmp_path / "ds.zarr"
    proc = run("import", "trec-run", lines(tmp_path / "run", text), "--qrels", lines(tmp_path / "qrels", QRELS),
               "--out", out)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    import re
    assert re.search(words, proc.stderr), proc.stderr
    assert not out.exists()


def test_trec_run_needs_qrels(tmp_path):
    proc = run("import", "trec-run", lines(tmp_path / "run", RUN), "--out", tmp_path / "ds.zarr")
    assert proc.returncode == 2 and "--qrels" in proc.stderr


def test_import_help_documents_trec_run_and_duplicates():
    proc = run("import", "--help")
    assert proc.returncode == 0
    assert "trec-run" in proc.stdout and "--order" in proc.stdout and "listed twice" in proc.stdout


# --------------------------------------------------------------------------- --empty-queries


def empty_query_dataset(write):
    """q0: relevant at rank 2; q1: judged, nothing relevant; q2: not judged at all."""
    return write({"query/key": np.array(["q0", "q1", "q2"], dtype=object),
                  "gallery/key": np.array(["a", "b", "c"], dtype=object),
                  "ranking/item": np.array([[0, 1, 2], [0, 1, 2], [2, 1, 0]]),
                  "qrels/query": np.array([0, 0, 1]), "qrels/item": np.array([0, 1, 2]),
                  "qrels/rel": np.array([0, 1, 0], np.int8)}, attrs={"protocol": "qrels"})


def test_empty_queries_skip_leaves_the_judged_empty_query_out(write):
    result = evaluate(empty_query_dataset(write), Options(protocol="qrels", ks=(1, 2)))
    s = result.summary.to_pylist()[0]
    assert (s["n_evaluated"], s["n_unknown"], s["map"], s["precision_at_2"]) == (1, 2, 0.5, 0.5)
    assert result.per_query.column("ap").to_pylist() == [0.5, None, None]
    assert result.per_query.column("n_judged").to_pylist() == [2, 1, 0]


def test_empty_queries_zero_counts_judged_empty_queries_with_every_metric_0(write):
    result = evaluate(empty_query_dataset(write), Options(protocol="qrels", ks=(1, 2), empty_queries="zero"))
    s = result.summary.to_pylist()[0]
    # trec_eval: q0 and q1 count (q1 scores 0 everywhere); q2 has no judgement and is not a TREC query
    assert (s["n_evaluated"], s["n_unknown"]) == (2, 1)
    assert (s["map"], s["mrr"], s["precision_at_2"], s["recall_at_2"], s["hit_at_2"]) == (0.25, 0.25, 0.25, 0.5, 0.5)
    rows = result.per_query.to_pylist()
    assert [rows[1][c] for c in ("ap", "rr", "inp", "hit_at_1", "recall_at_2", "precision_at_2")] == [0.0] * 6
    assert rows[1]["first_rank"] is None and rows[2]["ap"] is None
    cmc = result.cmc.to_pylist()
    assert [c["cmc"] for c in cmc[:2]] == [0.0, 0.5]
    assert any("--empty-queries zero" in w for w in result.info["warnings"])


def test_empty_queries_zero_only_applies_to_qrels(tmp_path, write):
    path = write({"query/label": np.array([1]), "gallery/label": np.array([1]), "ranking/item": np.array([[0]])})
    with pytest.raises(InputError, match="--empty-queries: zero only applies to the qrels protocol"):
        evaluate(path, Options(protocol="class", ks=(1,), empty_queries="zero"))
    proc = run("evaluate", path, "--out", tmp_path / "r", "--ks", "1", "--empty-queries", "zero", "--workers", "1")
    assert proc.returncode == 2 and proc.stderr.strip().startswith("evalcore") or "--empty-queries" in proc.stderr
    assert "--empty-queries" in proc.stderr and not (tmp_path / "r").exists()
