"""The worked examples (tests/fixtures/vectors) in-process through ``evalcore.engine.evaluate.evaluate``.

Each example is written to a real Zarr store with ``write_dataset`` and
evaluated without a cluster; its hand-computed per-query rows, summary row
and CMC must come out. (tests/test_cli.py runs the same examples through the
command line on worker processes.)
"""
import math
import pathlib

import pytest
from conftest import load_vector, vector_arrays

from evalcore.engine.evaluate import Options, evaluate
from evalcore.io.dataset import write_dataset

VECTORS = sorted(p.stem for p in (pathlib.Path(__file__).parents[1] / "fixtures" / "vectors").glob("*.json"))


def same(got, want):
    if want is None or got is None:
        return got is None and want is None
    if isinstance(want, (bool, str)):
        return got == want
    return math.isclose(float(got), float(want), rel_tol=1e-12, abs_tol=1e-15)


def options(case):
    o = dict(case["options"])
    o["ks"] = tuple(o["ks"])
    return Options(max_rank=5, **o)


def test_every_worked_example_is_run_here():
    assert len(VECTORS) == 11


@pytest.mark.parametrize("chunk_rows", [None, 1])
@pytest.mark.parametrize("name", VECTORS)
def test_worked_example_in_process(tmp_path, name, chunk_rows):
    case = load_vector(name)
    path = tmp_path / f"{name}.zarr"
    write_dataset(path, vector_arrays(case), chunk_rows=chunk_rows)
    result = evaluate(path, options(case))
    want = case["expected"]
    rows = result.per_query.to_pylist()
    assert len(rows) == len(want["per_query"])
    bad = [(w["query"], col, got[col], val) for w, got in zip(want["per_query"], rows) for col, val in w.items()
           if not same(got[col], val)]
    assert not bad, bad
    summary = [r for r in result.summary.to_pylist() if r["group"] == "all"][0]
    assert [(col, summary[col], val) for col, val in want["summary"].items() if not same(summary[col], val)] == []
    cmc = [r["cmc"] for r in result.cmc.to_pylist() if r["group"] == "all"]
    assert len(cmc) == 5 and all(same(a, b) for a, b in zip(cmc, want["cmc"]))
