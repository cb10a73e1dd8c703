"""The layers of the package stay honest: imports only go down, and no module imports itself back.

Layer order (lowest first): errors (and types) < core < io < engine < render < api < compat < jobs < challenge
< cli,
where ``api`` is ``evalcore/__init__.py``, ``evalcore/api.py``, ``evalcore/trec_api.py``, ``evalcore/measures_api.py``
and ``evalcore/cuhk03_api.py``. Every
``evalcore.*`` import counts: module level, inside functions, relative, and
``importlib.import_module`` / ``__import__`` with a literal name. Importing
a submodule also runs its parent packages' ``__init__``; those implicit edges
are left out (the parent of everything is ``evalcore/__init__.py``), so only
imports written in the code are checked. Within a layer any import is allowed
as long as the modules form no cycle.
"""
from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "evalcore"
LAYERS = ("errors", "core", "io", "engine", "render", "api", "compat", "jobs", "challenge", "cli")


# --------------------------------------------------------------------------- the checker


def module_names(root: pathlib.Path) -> dict[str, pathlib.Path]:
    """Dotted module name -> file, for every .py file under the package folder ``root``."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = [root.name, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _known(name: str, modules) -> str | None:
    """``name`` if it is a module, else its longest prefix that is one (``from pkg import func``)."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        candidate = ".".join(parts[:n])
        if candidate in modules:
            return candidate
    return None


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imported_names(tree: ast.AST, module: str, is_package: bool):
    """Every module name a file imports, at any depth of the tree."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, module, is_package)
            yield from (f"{base}.{alias.name}" for alias in node.names)   # a submodule, or a name in base
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in ("import_module", "__import__"):
                yield node.args[0].value


def import_graph(root: pathlib.Path) -> dict[str, set[str]]:
    """module -> the package's modules it imports (edges to itself and to its parent packages left out)."""
    modules = module_names(root)
    graph = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        targets = {_known(name, modules) for name in imported_names(tree, module, path.name == "__init__.py")}
        graph[module] = {t for t in targets if t and t != module and not module.startswith(t + ".")}
    return graph


def layer_of(module: str) -> str | None:
    """The layer of a dotted module name of the package, None if it belongs to none."""
    parts = module.split(".")
    if len(parts) == 1 or parts[1] in ("api", "trec_api", "measures_api", "cuhk03_api"):
        return "api"
    if parts[1] in ("types", "declarations"):  # the option words and declarations: as low as the errors
        return "errors"
    return parts[1] if parts[1] in LAYERS else None


def upward_imports(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(importer, imported) pairs where the imported module sits in a higher layer."""
    rank = {layer: i for i, layer in enumerate(LAYERS)}
    return sorted((a, b) for a, targets in graph.items() for b in targets
                  if layer_of(a) and layer_of(b) and rank[layer_of(b)] > rank[layer_of(a)])


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


# --------------------------------------------------------------------------- the checker can fail


def test_checker_finds_a_cycle_and_an_upward_import_in_a_synthetic_graph():
    graph = {"evalcore.core.a": {"evalcore.core.b"}, "evalcore.core.b": {"evalcore.core.c"},
             "evalcore.core.c": {"evalcore.core.a", "evalcore.errors"},
             "evalcore.io.d": {"evalcore.core.a", "evalcore.engine.e"}, "evalcore.engine.e": {"evalcore.io.d"},
             "evalcore.errors": set()}
    assert cycles(graph) == [["evalcore.core.a", "evalcore.core.b", "evalcore.core.c"],
                             ["evalcore.engine.e", "evalcore.io.d"]]
    assert upward_imports(graph) == [("evalcore.io.d", "evalcore.engine.e")]


def test_checker_passes_a_downward_acyclic_graph():
    graph = {"evalcore": {"evalcore.engine.e"}, "evalcore.engine.e": {"evalcore.io.d", "evalcore.core.a"},
             "evalcore.io.d": {"evalcore.core.a"}, "evalcore.core.a": {"evalcore.errors"}, "evalcore.errors": set()}
    assert cycles(graph) == [] and upward_imports(graph) == []


def test_checker_reads_function_level_relative_and_dynamic_imports_from_files(tmp_path):
    root = tmp_path / "evalcore"
    for folder in ("core", "engine", "cli"):
        (root / folder).mkdir(parents=True)
        (root / folder / "__init__.py").write_text("")
    (root / "__init__.py").write_text("from evalcore.errors import InputError\n")
    (root / "errors.py").write_text("class InputError(ValueError):\n    pass\n")
    (root / "core" / "a.py").write_text("from . import b\n\n\ndef late():\n    from evalcore.engine import run\n")
    (root / "core" / "b.py").write_text("from ..core.a import late\n")
    (root / "engine" / "run.py").write_text("import importlib\n\nimportlib.import_module('evalcore.cli.main')\n")
    (root / "cli" / "main.py").write_text("def main():\n    __import__('evalcore.engine.run')\n")
    graph = import_graph(root)
    assert graph["evalcore.core.a"] == {"evalcore.core.b", "evalcore.engine.run"}
    assert graph["evalcore.core.b"] == {"evalcore.core.a"}
    assert graph["evalcore.engine.run"] == {"evalcore.cli.main"}
    assert graph["evalcore"] == {"evalcore.errors"}
    assert cycles(graph) == [["evalcore.cli.main", "evalcore.engine.run"], ["evalcore.core.a", "evalcore.core.b"]]
    assert upward_imports(graph) == [("evalcore.core.a", "evalcore.engine.run"),
                                     ("evalcore.engine.run", "evalcore.cli.main")]


# --------------------------------------------------------------------------- the package itself


@pytest.fixture(scope="module")
def graph():
    return import_graph(PACKAGE)


def test_every_module_of_the_package_belongs_to_a_layer(graph):
    assert [m for m in graph if layer_of(m) is None] == []


def test_no_module_imports_a_higher_layer(graph):
    assert upward_imports(graph) == []


def test_the_modules_import_each_other_without_cycles(graph):
    assert cycles(graph) == []


# --------------------------------------------------------------------------- what lives where


def defined_in(root: pathlib.Path, name: str) -> list[str]:
    """The files (relative to ``root``'s parent) whose top level defines the function ``name``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        if any(isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name
               for node in tree.body):
            found.append(path.relative_to(root.parent).as_posix())
    return found


def test_defined_in_finds_top_level_functions_only(tmp_path):
    root = tmp_path / "evalcore"
    (root / "io").mkdir(parents=True)
    (root / "io" / "a.py").write_text("def atomic_write(path, data):\n    pass\n")
    (root / "io" / "b.py").write_text("class C:\n    def atomic_write(self):\n        pass\n")
    (root / "c.py").write_text("from evalcore.io.a import atomic_write\n")
    assert defined_in(root, "atomic_write") == ["evalcore/io/a.py"]


def test_io_imports_no_program(graph):
    """Reading and writing (io) never reaches up to the programs (jobs, challenge adapters, command line)."""
    programs = ("jobs", "challenge", "cli")
    assert sorted((a, b) for a, targets in graph.items() for b in targets
                  if layer_of(a) == "io" and layer_of(b) in programs) == []


@pytest.mark.parametrize("name", ["atomic_write", "locked"])
def test_file_helpers_are_defined_once_in_io_files(name):
    assert defined_in(PACKAGE, name) == ["evalcore/io/files.py"]


@pytest.mark.parametrize("name,home", [
    ("gate_checks", "evalcore/jobs/gates.py"), ("check_gates", "evalcore/jobs/gates.py"),
    ("best_per_team", "evalcore/jobs/standings.py"), ("ranked", "evalcore/jobs/standings.py"),
    ("rank_split", "evalcore/jobs/standings.py"), ("leaderboard_table", "evalcore/jobs/standings.py"),
    ("update_leaderboard", "evalcore/jobs/standings.py"), ("result_record", "evalcore/jobs/standings.py"),
])
def test_policy_is_defined_once_above_io(name, home):
    """What decides a gate or a ranking is a program's policy: one definition, in the jobs layer."""
    assert defined_in(PACKAGE, name) == [home]
