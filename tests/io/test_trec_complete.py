"""trec_eval's -c (``import trec-run --complete``) against its published outputs (issue 22).

trec_eval's test folder (usnistgov/trec_eval, ``test/``) runs
``-m all_trec -q -c qrels.test results.trunc`` (``out.test.aqc``) and the same
with ``-M100`` (``out.test.aqcM``); results.trunc has no line for query 302
and 84 of 303's 500. The expected values below are those printed outputs,
4 decimals, written by hand.
"""
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from evalcore.engine.evaluate import Options, evaluate
from evalcore.io import dataset as ds
from evalcore.io import importers
from evalcore.io.importers.checks import WARNINGS

CLI = [str(Path(sys.executable).with_name("evalcore"))]
TREC = Path(__file__).parent.parent / "fixtures" / "trec"
NAMES = ("map", "Rprec", "bpref", "recip_rank", "P_5", "P_10", "recall_5", "recall_10", "ndcg", "ndcg_cut_5",
         "ndcg_cut_10", "map_cut_10", "map_cut_100", "success_1", "success_5", "success_10")
#: trec_eval's name -> (our per-query column, our summary column)
OURS = {"map": ("ap", "map"), "Rprec": ("rprec", "rprec"), "bpref": ("bpref", "bpref"),
        "recip_rank": ("rr", "mrr"), "P_5": ("precision_at_5", "precision_at_5"),
        "P_10": ("precision_at_10", "precision_at_10"), "recall_5": ("recall_at_5", "recall_at_5"),
        "recall_10": ("recall_at_10", "recall_at_10"), "ndcg": ("ndcg", "ndcg"),
        "ndcg_cut_5": ("ndcg_at_5", "ndcg_at_5"), "ndcg_cut_10": ("ndcg_at_10", "ndcg_at_10"),
        "map_cut_10": ("ap_cut_10", "map_cut_10"), "map_cut_100": ("ap_cut_100", "map_cut_100"),
        "success_1": ("hit_at_1", "hit_at_1"), "success_5": ("hit_at_5", "hit_at_5"),
        "success_10": ("hit_at_10", "hit_at_10")}
METRICS = ("map", "rprec", "bpref", "mrr", "precision@5", "precision@10", "recall@5", "recall@10", "ndcg", "ndcg@5",
           "ndcg@10", "map_cut@10", "map_cut@100", "hit@1", "hit@5", "hit@10")
ZERO = " ".join(["0.0000"] * len(NAMES))
#: out.test.aqc (-c), in the order of NAMES
AQC = {
    "301": "0.0324 0.1456 0.1230 0.1667 0.0000 0.2000 0.0000 0.0042 0.1584 0.0000 0.1518 0.0010 0.0118 "
           "0.0000 0.0000 1.0000",
    "302": ZERO,
    "303": "0.2723 0.4000 0.3300 0.3333 0.6000 0.4000 0.3000 0.4000 0.4730 0.4469 0.3633 0.2005 0.2723 "
           "0.0000 1.0000 1.0000",
    "all": "0.1016 0.1819 0.1510 0.1667 0.2000 0.2000 0.1000 0.1347 0.2105 0.1490 0.1717 0.0671 0.0947 "
           "0.0000 0.3333 0.6667",
}
#: out.test.aqcM (-c -M100)
AQCM = {
    "301": "0.0118 0.0485 0.0456 0.1667 0.0000 0.2000 0.0000 0.0042 0.0670 0.0000 0.1518 0.0010 0.0118 "
           "0.0000 0.0000 1.0000",
    "302": ZERO,
    "303": AQC["303"],
    "all": "0.0947 0.1495 0.1252 0.1667 0.2000 0.2000 0.1000 0.1347 0.1800 0.1490 0.1717 0.0671 0.0947 "
           "0.0000 0.3333 0.6667",
}


def printed(result) -> dict:
    got = {row["key"]: {t: row[c] for t, (c, _) in OURS.items()} for row in result.per_query.to_pylist()}
    summary = result.summary.to_pylist()[0]
    got["all"] = {t: summary[s] for t, (_, s) in OURS.items()}
    return {q: " ".join(f"{v[name]:.4f}" for name in NAMES) for q, v in got.items()}


@pytest.mark.parametrize("depth, published", [(None, AQC), (100, AQCM)])
def test_complete_equals_trec_eval_c_on_its_truncated_run(tmp_path, depth, published):
    out = tmp_path / "ds.zarr"
    summary = importers.import_to("trec-run", [TREC / "results.trunc"], out, qrels=str(TREC / "qrels.test"),
                                  order="trec_eval", complete=True)
    assert not summary.get("warnings")                   # 302 is kept, not left out
    result = evaluate(out, Options(protocol="qrels", ks=(1, 5, 10, 100), empty_queries="zero", metrics=METRICS,
                                   depth=depth))
    assert printed(result) == published
    assert result.summary.to_pylist()[0]["n_evaluated"] == 3  # trec_eval's num_q


def test_without_complete_the_query_without_results_is_left_out_with_a_warning(tmp_path):
    """trec_eval without -c: the mean over 301 and 303 only (as today's default)."""
    arrays, attrs = importers.read_trec_run(TREC / "results.trunc", qrels=TREC / "qrels.test", order="trec_eval")
    assert arrays["query/key"].tolist() == ["301", "303"]
    assert any("'302'" in w and "without results" in w for w in attrs[WARNINGS])
    with_c, _ = importers.read_trec_run(TREC / "results.trunc", qrels=TREC / "qrels.test", order="trec_eval",
                                        complete=True)
    assert with_c["query/key"].tolist() == ["301", "302", "303"]
    assert (with_c["ranking/item"][1] == -1).all()       # an empty ranking
    assert set(with_c["qrels/query"].tolist()) == {0, 1, 2}
    # the rows of 301 and 303 are the same documents in the same order
    keys, keys_c = arrays["gallery/key"], with_c["gallery/key"]
    for row, row_c in ((0, 0), (1, 2)):
        got = [keys_c[i] for i in with_c["ranking/item"][row_c] if i >= 0]
        assert got == [keys[i] for i in arrays["ranking/item"][row] if i >= 0]


def test_complete_through_the_command_line(tmp_path):
    data, report = tmp_path / "ds.zarr", tmp_path / "report"
    env = {**os.environ, "EVALCORE_DEBUG": ""}
    proc = subprocess.run([*CLI, "import", "trec-run", str(TREC / "results.trunc"), "--qrels",
                           str(TREC / "qrels.test"), "--order", "trec_eval", "--complete", "--out", str(data)],
                          capture_output=True, text=True, env=env, timeout=240)
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr
    assert ds.dataset_attributes(ds.open_dataset(data)).get("trec_complete") is True
    proc = subprocess.run([*CLI, "evaluate", str(data), "--out", str(report), "--ks", "5,10", "--empty-queries",
                           "zero", "--quiet"], capture_output=True, text=True, env=env, timeout=240)
    assert proc.returncode == 0, proc.stderr
    summary = pq.read_table(report / "summary.parquet").to_pylist()[0]
    assert (f"{summary['map']:.4f}", f"{summary['precision_at_10']:.4f}", summary["n_evaluated"]) == \
        ("0.1016", "0.2000", 3)
