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
