"""Graded relevance against trec_eval's own published outputs (issue 22).

The expected values are trec_eval's printed numbers in its test folder
(usnistgov/trec_eval, ``test/out.test.aq``: ``-m all_trec -q`` on qrels.test and
results.test; ``test/out.test.aql``: the same with ``-l2`` on qrels.rel_level,
grades -1..4), written here by hand, 4 decimals. Runs are imported with
``--order trec_eval`` and evaluated under ``--empty-queries zero`` (trec_eval's
rules, README: TREC).
"""
from pathlib import Path

import pytest

from evalcore.engine.evaluate import Options, evaluate
from evalcore.io import importers

TREC = Path(__file__).parent.parent / "fixtures" / "trec"
MEASURES = ("ndcg", "bpref", "rprec", "ndcg@5", "ndcg@10", "ndcg@20", "map_cut@10", "map_cut@100", "mrr", "map")
#: trec_eval's name -> (our per-query column, our summary column)
OURS = {"ndcg": ("ndcg", "ndcg"), "bpref": ("bpref", "bpref"), "Rprec": ("rprec", "rprec"),
        "ndcg_cut_5": ("ndcg_at_5", "ndcg_at_5"), "ndcg_cut_10": ("ndcg_at_10", "ndcg_at_10"),
        "ndcg_cut_20": ("ndcg_at_20", "ndcg_at_20"), "map_cut_10": ("ap_cut_10", "map_cut_10"),
        "map_cut_100": ("ap_cut_100", "map_cut_100"), "recip_rank": ("rr", "mrr"), "map": ("ap", "map")}
NAMES = ("map", "Rprec", "bpref", "recip_rank", "ndcg", "ndcg_cut_5", "ndcg_cut_10", "ndcg_cut_20", "map_cut_10",
         "map_cut_100")

#: out.test.aq, in the order of NAMES, per query and "all"
AQ = {
    "301": "0.0324 0.1456 0.1230 0.1667 0.1584 0.0000 0.1518 0.1985 0.0010 0.0118",
    "302": "0.4175 0.5065 0.4712 1.0000 0.6617 0.8304 0.7530 0.8082 0.0768 0.3983",
    "303": "0.0858 0.0000 0.0000 0.0526 0.3862 0.0000 0.0000 0.0509 0.0000 0.0764",
    "all": "0.1785 0.2174 0.1981 0.4064 0.4021 0.2768 0.3016 0.3525 0.0259 0.1622",
}
#: out.test.aql (-l2 on qrels.rel_level)
AQL = {
    "301": "0.0003 0.0000 0.0000 0.0033 0.1396 0.0000 0.0439 0.0746 0.0000 0.0000",
    "302": "0.4175 0.5065 0.4712 1.0000 0.6617 0.8304 0.7530 0.8082 0.0768 0.3983",
    "303": "0.0823 0.0000 0.0000 0.0526 0.3669 0.0000 0.0000 0.0585 0.0000 0.0729",
    "all": "0.1667 0.1688 0.1571 0.3520 0.3894 0.2768 0.2656 0.3138 0.0256 0.1571",
}


def trec_eval_numbers(tmp_path, qrels: str, rel_level: int) -> dict:
    out = tmp_path / "ds.zarr"
    importers.import_to("trec-run", [TREC / "results.test"], out, qrels=str(TREC / qrels), order="trec_eval")
    result = evaluate(out, Options(protocol="qrels", ks=(5, 10, 20, 100), empty_queries="zero",
                                   metrics=MEASURES, rel_level=rel_level))
    got = {row["key"]: {t: row[c] for t, (c, _) in OURS.items()} for row in result.per_query.to_pylist()}
    summary = result.summary.to_pylist()[0]
    got["all"] = {t: summary[s] for t, (_, s) in OURS.items()}
    return {q: " ".join(f"{v[name]:.4f}" for name in NAMES) for q, v in got.items()}


def test_graded_measures_equal_trec_eval_on_its_test_files(tmp_path):
    assert trec_eval_numbers(tmp_path, "qrels.test", 1) == AQ


def test_rel_level_2_on_graded_qrels_equals_trec_eval_l2(tmp_path):
    assert trec_eval_numbers(tmp_path, "qrels.rel_level", 2) == AQL


@pytest.mark.parametrize("option, value", [("rel_level", 0), ("depth", 0), ("rel_level", 1.5)])
def test_bad_rel_level_or_depth_is_an_input_error_naming_it(tmp_path, option, value):
    from evalcore.errors import InputError
    with pytest.raises(InputError, match="--" + option.replace("_", "-")):
        Options(protocol="qrels", **{option: value}).checked()


#: trec_eval's out.test.aq (qrels.test, results.test: 500 documents a query): P1000 and recall1000 per query and
#: overall, and map and ndcg, which map_cut_1000 and ndcg_cut_1000 equal on lists shorter than 1000 (R < 1000)
PAST_END = {"301": {"precision_at_1000": 0.0710, "recall_at_1000": 0.1498, "ap_cut_1000": 0.0324,
                    "ndcg_at_1000": 0.1584, "rr_at_1000": 0.1667},
            "302": {"precision_at_1000": 0.0500, "recall_at_1000": 0.6494, "ap_cut_1000": 0.4175,
                    "ndcg_at_1000": 0.6617, "rr_at_1000": 1.0},
            "303": {"precision_at_1000": 0.0100, "recall_at_1000": 1.0, "ap_cut_1000": 0.0858,
                    "ndcg_at_1000": 0.3862, "rr_at_1000": 0.0526},
            "all": {"precision_at_1000": 0.0437, "recall_at_1000": 0.5997, "map_cut_1000": 0.1785,
                    "ndcg_at_1000": 0.4021, "mrr_at_1000": 0.4064}}


def test_cut_offs_past_the_lists_end_equal_trec_eval_p1000_on_500_item_lists(tmp_path):
    """--ks 1000 on top-500 lists: the missing places count as not relevant, as trec_eval's P_1000 does."""
    import json
    import os
    import subprocess
    import sys

    import pyarrow.parquet as pq

    cli = [str(Path(sys.executable).with_name("evalcore"))]
    env = {**os.environ, "EVALCORE_DEBUG": ""}
    data, out = tmp_path / "t.zarr", tmp_path / "r"
    done = subprocess.run([*cli, "import", "trec-run", str(TREC / "results.test"), "--qrels",
                           str(TREC / "qrels.test"), "--order", "trec_eval", "--out", str(data)],
                          capture_output=True, text=True, env=env, timeout=240)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([*cli, "evaluate", str(data), "--out", str(out), "--ks", "5,1000", "--empty-queries",
                           "zero", "--metrics", "precision@k,recall@k,map_cut@k,ndcg@k,mrr@k"],
                          capture_output=True, text=True, env=env, timeout=240)
    assert done.returncode == 0, done.stderr
    rows = {r["key"]: r for r in pq.read_table(out / "per_query.parquet").to_pylist()}
    rows["all"] = [r for r in pq.read_table(out / "summary.parquet").to_pylist() if r["group"] == "all"][0]
    got = {q: {c: round(rows[q][c], 4) for c in want} for q, want in PAST_END.items()}
    assert got == PAST_END
    warnings = json.loads((out / "run.json").read_text())["warnings"]
    assert [w for w in warnings if "cut-off 1000 is past" in w and "K = 500" in w], warnings
