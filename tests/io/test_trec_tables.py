"""Qrels and runs as users hold them (issue 37, item 2): mappings, pyarrow/pandas tables, TREC paths and ranx-like
objects give trec_eval's numbers, and bad values are one line naming the parameter.

Expected values: trec_eval 10.0-rc3 (usnistgov/trec_eval) built with its print files' ``%6.4f`` changed to
``%.17g``, run as ``trec_eval -q -m map -m bpref -m ndcg_cut.3 -m P.3 -m num_rel_ret -m num_ret QRELS RUN`` on the
files below (three queries of tests/test_trec_command.py's random draw: ties at score 0.5 in q1, which trec_eval
breaks by docno descending; negative grades, two of them ranked in q2; q3 with no relevant document ranked).
"""
import math

import numpy as np
import pyarrow as pa
import pytest

import evalcore
from evalcore.errors import InputError
from evalcore.io import trec_tables

QRELS = """\
q1 0 d11 1
q1 0 d10 2
q1 0 d02 -1
q1 0 d09 3
q1 0 d01 1
q1 0 d06 2
q1 0 d03 0
q2 0 d01 -1
q2 0 d09 3
q2 0 d10 2
q2 0 d04 0
q2 0 d07 -1
q2 0 d12 3
q2 0 d08 2
q3 0 d11 0
q3 0 d05 1
q3 0 d10 0
q3 0 d01 0
q3 0 d12 0
q3 0 d03 2
q3 0 d06 3
"""
RUN = """\
q1 Q0 d12 1 0.5 tag
q1 Q0 d07 2 0.3 tag
q1 Q0 d08 3 0.3 tag
q1 Q0 d03 4 0.4 tag
q1 Q0 d01 5 0.5 tag
q1 Q0 d10 6 0.5 tag
q1 Q0 d04 7 0.3 tag
q1 Q0 d11 8 0.5 tag
q2 Q0 d01 1 0.1 tag
q2 Q0 d06 2 0.1 tag
q2 Q0 d11 3 0.2 tag
q2 Q0 d09 4 0.3 tag
q2 Q0 d03 5 0.2 tag
q2 Q0 d07 6 0.5 tag
q3 Q0 d08 1 0.3 tag
q3 Q0 d12 2 0.2 tag
q3 Q0 d02 3 0.1 tag
q3 Q0 d09 4 0.4 tag
q3 Q0 d01 5 0.2 tag
"""
MEASURES = ["map", "bpref", "ndcg_cut.3", "P.3", "num_rel_ret", "num_ret"]
EXPECTED = {
    "num_ret": {"q1": 8, "q2": 6, "q3": 5, "all": 19},
    "num_rel_ret": {"q1": 3, "q2": 1, "q3": 0, "all": 4},
    "map": {"q1": 0.3833333333333333, "q2": 0.125, "q3": 0.0, "all": 0.16944444444444443},
    "bpref": {"q1": 0.59999999999999998, "q2": 0.25, "q3": 0.0, "all": 0.28333333333333333},
    "P_3": {"q1": 0.66666666666666663, "q2": 0.33333333333333331, "q3": 0.0, "all": 0.33333333333333331},
    "ndcg_cut_3": {"q1": 0.30995311664203284, "q2": 0.32120430189708038, "q3": 0.0, "all": 0.2103858061797044},
}


def as_dict(text: str, value_field: int, kind) -> dict:
    out: dict = {}
    for line in text.splitlines():
        fields = line.split()
        out.setdefault(fields[0], {})[fields[2]] = kind(fields[value_field])
    return out


QRELS_DICT, RUN_DICT = as_dict(QRELS, 3, int), as_dict(RUN, 4, float)


def as_table(mapping: dict, names: tuple[str, str, str]) -> pa.Table:
    rows = [(q, d, v) for q, docs in mapping.items() for d, v in docs.items()]
    return pa.table({names[0]: [r[0] for r in rows], names[1]: [r[1] for r in rows], names[2]: [r[2] for r in rows]})


class RanxLike:
    """What ranx's Qrels and Run offer evalcore: ``to_dict()``."""

    def __init__(self, mapping):
        self.mapping = mapping

    def to_dict(self):
        return {q: dict(docs) for q, docs in self.mapping.items()}


@pytest.fixture
def paths(tmp_path):
    (tmp_path / "qrels").write_text(QRELS)
    (tmp_path / "run").write_text(RUN)
    return str(tmp_path / "qrels"), str(tmp_path / "run")


def forms(paths):
    """name -> (qrels, run) in that form."""
    return {
        "paths": paths,
        "dicts": (QRELS_DICT, RUN_DICT),
        "arrow": (as_table(QRELS_DICT, ("qid", "docno", "rel")), as_table(RUN_DICT, ("qid", "docno", "score"))),
        "beir columns": (as_table(QRELS_DICT, ("query-id", "corpus-id", "score")),
                         as_table(RUN_DICT, ("query_id", "doc_id", "score"))),
        "ranx": (RanxLike(QRELS_DICT), RanxLike(RUN_DICT)),
        "mixed": (paths[0], RUN_DICT),
    }


def assert_trec_eval_values(result) -> None:
    wrong = []
    for measure, values in EXPECTED.items():
        for qid, value in values.items():
            got = result.aggregate[measure] if qid == "all" else result.per_query[qid][measure]
            if not math.isclose(got, value, rel_tol=1e-12, abs_tol=1e-15):
                wrong.append((measure, qid, got, value))
    assert wrong == []


@pytest.mark.parametrize("form", ["paths", "dicts", "arrow", "beir columns", "ranx", "mixed"])
def test_every_form_gives_trec_eval_s_numbers_and_the_importer_s_arrays(paths, form):
    qrels, run = forms(paths)[form]
    assert_trec_eval_values(evalcore.trec(qrels, run, MEASURES))
    want, _ = trec_tables.trec_arrays(*paths)
    got, _ = trec_tables.trec_arrays(qrels, run)
    assert list(got) == list(want)
    for name in want:
        assert np.array_equal(got[name], want[name]), name


def test_pandas_frames_give_the_same_numbers():
    pd = pytest.importorskip("pandas")
    qrels = pd.DataFrame([(q, d, g) for q, docs in QRELS_DICT.items() for d, g in docs.items()],
                         columns=["query_id", "doc_id", "relevance"])
    run = pd.DataFrame([(q, d, s) for q, docs in RUN_DICT.items() for d, s in docs.items()],
                       columns=["qid", "docno", "score"])
    assert_trec_eval_values(evalcore.trec(qrels, run, MEASURES))


def test_negative_grades_are_in_the_pool_not_judged_and_integer_ids_are_read_as_text():
    arrays, _ = trec_tables.trec_arrays({"1": {"a": -1, "b": -7, "c": 2, "d": 0}}, {"1": {"a": 2.0, "c": 1.0}})
    assert sorted(arrays["qrels/rel"].tolist()) == [-2, -2, 0, 2]
    table = pa.table({"qid": [1, 1], "docno": ["a", "c"], "score": [2.0, 1.0]})
    same, _ = trec_tables.trec_arrays({"1": {"a": -1, "b": -7, "c": 2, "d": 0}}, table)
    assert all(np.array_equal(same[k], arrays[k]) for k in arrays)


def test_queries_with_no_entries_are_left_out_as_trec_eval_never_sees_them():
    run = {**RUN_DICT, "q4": {}}
    qrels = {**QRELS_DICT, "q5": {}}
    arrays, _ = trec_tables.trec_arrays(qrels, run)
    assert arrays["query/key"].tolist() == ["q1", "q2", "q3"]


def test_left_out_queries_are_named_by_entry_not_line():
    _, attrs = trec_tables.trec_arrays(QRELS_DICT, {**RUN_DICT, "q9": {"d01": 1.0}})
    assert attrs[trec_tables.WARNINGS] == ["run: queries without judgements in qrels are left out: 'q9' (entry 20)"]


@pytest.mark.parametrize(("qrels", "run", "message"), [
    (QRELS_DICT, {"q1": {"d1": float("nan")}}, "run: score nan of query 'q1', document 'd1' is not a finite number"),
    (QRELS_DICT, {"q1": {"d1": float("inf")}}, "run: score inf of query 'q1', document 'd1' is not a finite number"),
    (QRELS_DICT, {"q1": {"d1": "0.5"}}, "run: score '0.5' of query 'q1', document 'd1' is not a number"),
    ({"q1": {"d1": 1.5}}, RUN_DICT, "qrels: grade 1.5 of query 'q1', document 'd1' is not an integer"),
    ({"q1": {"d1": 1, "d2": "2"}}, RUN_DICT, "qrels: grade '2' of query 'q1', document 'd2' is not an integer"),
    ({"q1": {"d1": 128}}, RUN_DICT, "qrels: grade 128 of query 'q1', document 'd1' is above 127"),
    ({"q1": {"d1": 1 << 70}}, RUN_DICT, f"qrels: grade {1 << 70} of query 'q1', document 'd1' is not an integer"),
    ({1: {"d1": 1}}, RUN_DICT, "qrels: query id 1 is int, not str"),
    ({"q1": {3: 1}}, RUN_DICT, "qrels: document id 3 of query 'q1' is int, not str"),
    ({"q1": [("d1", 1)]}, RUN_DICT, "qrels: query 'q1' holds list, not a mapping"),
    (QRELS_DICT, {}, "run: no results"),
    (QRELS_DICT, 42, "run: int is not a mapping"),
    (QRELS_DICT, pa.table({"qid": ["q1"], "doc": ["d1"]}), "run: no column for the score"),
    (QRELS_DICT, pa.table({"qid": ["q1"], "doc": ["d1"], "score": [1.0], "sim": [1.0]}),
     "run: columns score, sim both for the score"),
    (QRELS_DICT, pa.table({"qid": ["q1"], "doc": ["d1"], "score": [None]}, schema=pa.schema(
        [("qid", pa.string()), ("doc", pa.string()), ("score", pa.float64())])), "run: column score, row 0: missing"),
    (QRELS_DICT, pa.table({"qid": ["q1", "q1"], "doc": ["d1", "d1"], "score": [1.0, 2.0]}),
     "run: rows 0 and 1: document 'd1' listed twice for query 'q1'"),
    (pa.table({"qid": ["q1", "q1"], "doc": ["d1", "d1"], "rel": [1, 2]}), RUN_DICT,
     "qrels: rows 0 and 1: document 'd1' graded twice, differently, for query 'q1'"),
])
def test_bad_values_are_one_input_error_naming_the_parameter(qrels, run, message):
    with pytest.raises(InputError) as error:
        trec_tables.trec_arrays(qrels, run)
    assert str(error.value).startswith(message), str(error.value)
    assert "\n" not in str(error.value)


def test_a_pair_graded_twice_alike_is_kept_once_as_the_file_reader_keeps_it():
    table = pa.table({"qid": ["q1", "q1", "q1"], "docno": ["d10", "d10", "d11"], "rel": [2, 2, 1]})
    arrays, _ = trec_tables.trec_arrays(table, {"q1": {"d10": 1.0, "d11": 0.5}})
    assert arrays["qrels/rel"].tolist() == [2, 1]


def test_too_many_entries_are_refused_before_any_work(monkeypatch):
    monkeypatch.setattr(trec_tables, "MAX_ENTRIES", 5)
    with pytest.raises(InputError, match=r"^qrels: 21 entries, more than 5$"):
        trec_tables.trec_arrays(QRELS_DICT, RUN_DICT)
