"""Rules of the code itself, read with ``ast`` (issue 36): no ordinary function takes more than 12 parameters,
an exception is never read back out of ``str(exc)``: evalcore's own errors are shown from their fields
(``exc.message``, ``exc.subject``/``exc.detail``), another library's through ``errors.foreign_reason``; and an
error's text names another option or an array only as a ``mention``, so each reader's word is chosen when it is
shown."""
from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

import evalcore

PACKAGE = Path(evalcore.__file__).parent

#: the most parameters an ordinary function takes (self and cls not counted)
MAX_PARAMETERS = 12
#: the generated keyword form of evaluate: every option by name, the request in three parts behind it
LONG_ALLOWED = {("api.py", "evaluate")}
#: where an exception's text may be read: the helper that decides how foreign text is shown, and the
#: modules that read a library's message to tell its failures apart (the dataset's store, the input kinds)
STR_EXC_ALLOWED = {("errors.py", "foreign_reason"), ("io/dataset.py", None), ("io/kinds.py", None)}


def _compiled(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Decorated with numba's ``njit``/``jit`` (``@njit``, ``@numba.njit(cache=True)``): its arguments are arrays."""
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name in ("njit", "jit"):
            return True
    return False


def parameter_count(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> int:
    a = node.args
    named = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg) if x is not None]
    return len([n for n in named if n not in ("self", "cls")])


def long_functions(source: str, where: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        n = parameter_count(node)
        if n > MAX_PARAMETERS and not _compiled(node) and (where, node.name) not in LONG_ALLOWED:
            found.append(f"{where}:{node.lineno} {node.name} ({n} parameters)")
    return found


def _rooted_at(expr: ast.expr, name: str) -> bool:
    """``exc``, or a call on it (``exc.reworded(...)``)."""
    while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
        expr = expr.func.value
    return isinstance(expr, ast.Name) and expr.id == name


#: names that hold an exception wherever they are (a helper's parameter, say), caught there or not
EXCEPTION_NAMES = frozenset({"exc", "err", "error", "exception"})


def exception_texts(source: str, where: str) -> list[str]:
    """``str(exc)`` of an exception (a name an ``except ... as`` caught, or one of EXCEPTION_NAMES) outside
    STR_EXC_ALLOWED."""
    if (where, None) in STR_EXC_ALLOWED:
        return []
    found = []

    def visit(node: ast.AST, function: str | None, caught: frozenset[str]) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            function, caught = node.name, EXCEPTION_NAMES
        if isinstance(node, ast.ExceptHandler) and node.name:
            caught = caught | {node.name}
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "str"
                and len(node.args) == 1 and any(_rooted_at(node.args[0], name) for name in caught)
                and (where, function) not in STR_EXC_ALLOWED):
            found.append(f"{where}:{node.lineno} {ast.unparse(node)}")
        for child in ast.iter_child_nodes(node):
            visit(child, function, caught)

    visit(ast.parse(source), None, EXCEPTION_NAMES)
    return found


#: the error constructors, and the position of the argument that holds their words
ERROR_WORDS_AT = {"InputError": 0, "OptionError": 1, "ArrayError": 1, "input_error": 1, "DatasetNotFoundError": 1,
                  "UnknownNameError": 2}
#: a flag (``--max-rank``) or a dataset array (``query/emb``) written out in an error's plain text
NAMED_IN_TEXT = re.compile(r"(?<![\w-])--[a-z][a-z-]*[a-z]|(?<![\w/.])(?:query|gallery|qrels|ranking|scores)/[a-z_]+")


def _text_pieces(expr: ast.expr, formatted: bool = True):
    """The literal text of an error's words: string constants and (``formatted``) the constant parts of
    f-strings, joined by ``+``, chosen by ``... if ... else ...`` or a method's receiver (``"...".strip()``); a
    call's arguments are the callee's business."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        yield expr.value
    elif isinstance(expr, ast.JoinedStr) and formatted:
        yield from (v.value for v in expr.values if isinstance(v, ast.Constant))
    elif isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        yield from _text_pieces(expr.left, formatted)
        yield from _text_pieces(expr.right, formatted)
    elif isinstance(expr, ast.IfExp):
        yield from _text_pieces(expr.body, formatted)
        yield from _text_pieces(expr.orelse, formatted)
    elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
        yield from _text_pieces(expr.func.value, formatted)


def _error_words(source: str):
    """(line, expression) of the words of every error constructed in ``source``: the argument at
    ERROR_WORDS_AT, or the ``message=``/``detail=`` keyword."""
    for node in ast.walk(ast.parse(source)):
        name = getattr(node.func, "id", getattr(node.func, "attr", "")) if isinstance(node, ast.Call) else ""
        if name in ERROR_WORDS_AT:
            at = ERROR_WORDS_AT[name]
            for expr in node.args[at:at + 1] + [k.value for k in node.keywords if k.arg in ("message", "detail")]:
                yield node.lineno, expr


def unmentioned_names(source: str, where: str) -> list[str]:
    """Flags and arrays written into an error's plain text instead of ``mention(...)``: Python would be shown
    the command line's word for them."""
    return [f"{where}:{line} {hit}" for line, expr in _error_words(source) for text in _text_pieces(expr)
            for hit in NAMED_IN_TEXT.findall(text)]


#: a replacement field (``{name}``, ``{n:,}``, ``{x!r}``) in a plain string: an f-string that lost its ``f`` when
#: its text was split around a mention
LOST_F = re.compile(r"\{[A-Za-z_][\w.]*(![rsa])?(:[^{}\s]*)?\}")


def unformatted_fields(source: str, where: str) -> list[str]:
    """``{name}`` written in a plain string (not an f-string) of an error's words: shown as braces, not the
    value."""
    return [f"{where}:{line} {m.group(0)}" for line, expr in _error_words(source)
            for text in _text_pieces(expr, formatted=False) for m in LOST_F.finditer(text)]


def _package_files():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE).as_posix(), path.read_text()


def test_no_ordinary_function_takes_more_than_12_parameters():
    found = [line for where, source in _package_files() for line in long_functions(source, where)]
    assert found == [], "group the parameters into a small frozen dataclass:\n" + "\n".join(found)


def test_no_exception_is_read_back_out_of_its_text():
    found = [line for where, source in _package_files() for line in exception_texts(source, where)]
    assert found == [], ("use the fields of an evalcore error (exc.message, exc.subject, exc.detail) or "
                         "errors.foreign_reason(exc) for another library's:\n" + "\n".join(found))


def test_an_error_names_options_and_arrays_as_mentions():
    found = [line for where, source in _package_files() for line in unmentioned_names(source, where)]
    assert found == [], ("write mention(\"--flag\") or mention(\"query/emb\") into the error's words, so Python "
                         "is shown its parameter's name:\n" + "\n".join(found))


def test_no_error_s_words_hold_a_field_of_an_f_string_that_lost_its_f():
    found = [line for where, source in _package_files() for line in unformatted_fields(source, where)]
    assert found == [], "an f-string split around a mention lost its f:\n" + "\n".join(found)


def test_the_lost_f_rule_is_not_vacuous():
    source = textwrap.dedent("""
        raise OptionError("--ks", "under " + mention("--ties") + " the limit is {LIMIT:.3g} ({n!r} rows)")
        raise OptionError("--ks", "under " + mention("--ties") + f" the limit is {LIMIT:.3g}")
        raise OptionError("qrels", "give a mapping {query: (document, grade)}")
    """)
    assert [line.split(" ", 1)[1] for line in unformatted_fields(source, "x.py")] == ["{LIMIT:.3g}", "{n!r}"]


def test_the_mention_rule_is_not_vacuous():
    source = textwrap.dedent("""
        raise OptionError("--ks", "use --depth with query/emb")
        raise InputError(f"--out {out}: pass " + mention("--overwrite") + " or move query/emb")
        raise ArrayError("gallery/emb", "fine" if ok else f"{n} rows, not --max-rank", rows=[1])
        raise input_error(name, detail="see ranking/item")
        raise OptionError("--ks", "use " + mention("--depth") + f" ({x} rows of " + mention("query/emb") + ")")
        raise OptionError("--ks", describe("--depth"))
        raise OptionError("--ks", f"{x} needs --depth".strip())
        print("--depth query/emb")
        raise InputError("a path like data/query/emb is not an array name")
    """)
    assert [line.split(" ", 1)[1] for line in unmentioned_names(source, "x.py")] == [
        "--depth", "query/emb", "--out", "query/emb", "--max-rank", "ranking/item", "--depth"]


def test_the_checkers_are_not_vacuous():
    thirteen = ", ".join(f"a{i}" for i in range(13))
    source = textwrap.dedent(f"""
        import numba
        from numba import njit

        def long({thirteen}): pass
        def twelve(self, {", ".join(f"a{i}" for i in range(12))}): pass
        def star(a, *args, b, c, d, e, f, g, h, i, j, k, **kwargs): pass
        @njit(cache=True)
        def kernel({thirteen}): pass
        @numba.njit
        def kernel2({thirteen}): pass
        class C:
            def method(self, {thirteen}): pass
    """)
    assert [line.split()[1] for line in long_functions(source, "x.py")] == ["long", "star", "method"]
    assert long_functions("def evaluate(" + thirteen + "): pass", "api.py") == []
    source = textwrap.dedent("""
        def f():
            try:
                pass
            except ValueError as exc:
                a = str(exc)
                b = str(exc.reworded(len)).strip()
                c = str(other)
                d = exc.message
            try:
                pass
            except OSError as oops:
                e = str(oops)
            return str(oops)   # not caught here, and not an exception's usual name

        def foreign_reason(exc):
            return str(exc)
    """)
    flagged = exception_texts(source, "x.py")
    assert [line.split(" ", 1)[1] for line in flagged] == ["str(exc)", "str(exc.reworded(len))", "str(oops)",
                                                          "str(exc)"]
    assert exception_texts(source, "errors.py") == ["errors.py:6 str(exc)", "errors.py:7 str(exc.reworded(len))",
                                                    "errors.py:13 str(oops)"]
    assert exception_texts(source, "io/dataset.py") == []
