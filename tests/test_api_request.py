"""evaluate's request in three parts (issue 36 item 3): what is evaluated (Data), how (How: the evaluation
options) and where (Where: the execution). The keyword form of evalcore.evaluate stays, and names exactly the
parts' fields; no other function takes more than 12 parameters."""
from __future__ import annotations

import ast
import inspect
from dataclasses import fields
from pathlib import Path

import evalcore
from evalcore import api, declarations
from evalcore.engine.options import Options

PACKAGE = Path(evalcore.__file__).parent


def test_evaluate_s_keywords_are_the_three_parts_fields_and_the_inputs():
    parameters = set(inspect.signature(evalcore.evaluate).parameters)
    parts = {"source", "storage_options"} | set(api.How.names()) | set(api.Where.names())
    inputs = set(api.ARRAY_PARAMETERS) | {api.DISTANCES} | set(api.QRELS_PARAMETERS)
    assert parameters == parts | inputs, (parameters ^ (parts | inputs))
    assert {f.name for f in fields(api.Data)} == {"source", "arrays", "storage_options"}


def test_every_evaluation_option_is_declared_and_in_how():
    declared = {d.name for d in declarations.DECLARATIONS if d.part == "evaluation" and d.api}
    assert set(api.How.names()) == declared
    assert not set(api.How.names()) & set(api.Where.names())
    # How's options reach the engine by name: every Options field but the two the dataset may choose
    engine_fields = {f.name for f in fields(Options)}
    assert set(api.ENGINE_OPTIONS) == engine_fields - {"protocol", "similarity"}
    assert set(api.ENGINE_OPTIONS) <= declared
    assert set(api.PYTHON_VALUES) <= set(api.ENGINE_OPTIONS)


def test_evaluate_s_work_takes_its_request_in_three_parts():
    assert list(inspect.signature(api._evaluate).parameters) == ["what", "how", "where"]


#: keyword-only recipes for synthetic data and charts, older than the rule; kept, not to be joined
KNOWN_LONG = {("jobs/synthetic.py", "write_clustered"), ("render/svg.py", "line_chart")}


def test_no_function_takes_more_than_12_parameters_but_evaluate_and_compiled_kernels():
    found = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            a = node.args
            names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs) if x.arg not in ("self", "cls")]
            compiled = any("njit" in ast.unparse(d) or "jit(" in ast.unparse(d) for d in node.decorator_list)
            where = (str(path.relative_to(PACKAGE)), node.name)
            if len(names) > 12 and not compiled and where not in KNOWN_LONG and where != ("api.py", "evaluate"):
                found.append(f"{where[0]}:{node.lineno} {node.name} ({len(names)})")
    assert found == []
