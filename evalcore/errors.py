"""The errors evalcore raises on purpose: bad input (exit status 2) and a failed cluster (exit status 1).

Bad input is the one exception family the command line turns into exit status 2.

Every message starts with the name of what is wrong: an option
(``--max-rank: ...``, or ``max_rank: ...`` from the Python API), an array
(``gallery/label: rows 3, 7 ...``) or a file. The class and the fields are
chosen where the error is raised, never read back from the message:

    raise OptionError("--ks", "0 must list positive integers")
    raise ArrayError("query/emb", f"rows {rows_text(bad)} contain NaN or Inf", rows=bad)
    raise InputError("output x.zarr: already exists")      # names what is wrong in its own words

so code can tell the kinds apart without reading the message:

    try:
        evalcore.evaluate("ds.zarr")
    except evalcore.DatasetNotFoundError:     # also a FileNotFoundError
        ...
    except evalcore.ArrayError as exc:        # exc.array == "gallery/emb", exc.rows == [3, 7]
        ...
    except evalcore.OptionError as exc:       # exc.option == "--ks"
        ...

An option or array named inside the detail is a ``mention``, not text, so each reader's word for it is chosen
when the error is shown, by looking the word up, never by searching the message:

    raise OptionError("--rerank", "needs " + mention("--similarity") + " cosine")

The command line's words (``--max-rank``, ``query/label``) are the ones raised; the Python API shows the same
error in its parameters' words (``max_rank``, ``query_labels``) with ``reworded``: its subject and every
mention, each looked up whole.
"""
from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Self


def _same(word: str) -> str:
    return word


@dataclass(frozen=True)
class Mention:
    """An option or an array that an error's words name (``--depth``, ``query/emb``), kept as the command
    line's word so that each reader's word for it is chosen when the error is shown (``depth``,
    ``query_embeddings``, a job file's ``depth``). Joined to text with ``+``, it makes a ``Text``."""

    word: str

    def __str__(self) -> str:
        return self.word

    def __add__(self, other: Words) -> Text:
        return Text((self,)) + other

    def __radd__(self, other: str) -> Text:
        return Text((other, self))


@dataclass(frozen=True)
class Text:
    """An error's words: plain text and ``Mention``s, in order. ``shown(word)`` is the text with each mention
    as ``word(mention.word)``; ``str()`` shows the command line's words."""

    parts: tuple[str | Mention, ...] = ()

    @classmethod
    def of(cls, words: Words) -> Text:
        return words if isinstance(words, Text) else cls((words,))

    def __add__(self, other: Words) -> Text:
        return Text(self.parts + Text.of(other).parts)

    def __radd__(self, other: str) -> Text:
        return Text((other,) + self.parts)

    def shown(self, word: Callable[[str], str] = _same) -> str:
        return "".join(p if isinstance(p, str) else word(p.word) for p in self.parts)

    def __str__(self) -> str:
        return self.shown()

    def mentions(self) -> list[str]:
        """The words mentioned, in order."""
        return [p.word for p in self.parts if isinstance(p, Mention)]

    def reworded(self, word: Callable[[str], str]) -> Text:
        """Each mention's word through ``word`` (the plain text as it is)."""
        return Text(tuple(p if isinstance(p, str) else Mention(word(p.word)) for p in self.parts))

    def redacted(self, plain: Callable[[str], str]) -> Text:
        """The plain text through ``plain`` (the mentions as they are)."""
        return Text(tuple(plain(p) if isinstance(p, str) else p for p in self.parts))


#: what an error's words are given as: plain text, a mention, or both joined
Words = str | Mention | Text


def mention(word: str) -> Mention:
    """An option's flag (``--depth``) or an array's name (``query/emb``) inside an error's words."""
    return Mention(word)


def flag_of(keyword: str) -> Mention:
    """The mention of the flag that a reader's keyword is given by (``query_cams`` -> ``--query-cams``)."""
    return Mention("--" + keyword.replace("_", "-"))


def joined(words: Iterable[Words], separator: str = ", ") -> Text:
    """``words`` one after another, ``separator`` between them (mentions kept)."""
    out = Text()
    for i, w in enumerate(words):
        out = out + w if i == 0 else out + separator + w
    return out


class InputError(ValueError):
    """Bad input or usage: the message names the array, file or option and what is wrong.

    ``subject`` is what is wrong (an option, an array, a file; None when ``detail`` names it in its own words),
    ``text`` what is wrong with it (``Text``: plain words and mentions), ``detail`` that text as shown,
    ``rows`` the rows the message names (maybe the first few); the message is ``"{subject}: {detail}"``."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        base = FileNotFoundError if issubclass(cls, FileNotFoundError) else ValueError  # OSError has its own layout
        return base.__new__(cls)

    def __init__(self, message: Words = "", *, subject: str | None = None, rows: Iterable[int] = ()) -> None:
        self.subject = subject
        self.text = Text.of(message)
        self.rows = [int(r) for r in rows]
        super().__init__(self.message)

    @property
    def detail(self) -> str:
        return self.text.shown()

    @property
    def message(self) -> str:
        return f"{self.subject}: {self.detail}" if self.subject else self.detail

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[Any, ...]:
        # the fields, not the constructor's arguments, cross to and from Dask worker processes
        return _rebuild, (type(self), self.subject, self.text, self.rows)

    def reworded(self, word: Callable[[str], str]) -> InputError:
        """The same error (class, rows, every other field) with its subject and each mention in its text looked
        up whole through ``word``: how the Python API (or a job file) shows an error raised in the command
        line's words. The plain text is not searched."""
        return self._replaced(None if self.subject is None else word(self.subject), self.text.reworded(word))

    def redacted(self, plain: Callable[[str], str]) -> InputError:
        """The same error with ``plain`` applied to its subject and the plain parts of its text (the mentions
        as they are): a public page's copy, its paths cut (``ledger.public_reason``)."""
        return self._replaced(None if self.subject is None else plain(self.subject), self.text.redacted(plain))

    def followed_by(self, more: int, advice: Words = "") -> InputError:
        """This error, its detail saying how many more problems were found: ``... (and 2 more problem(s))``,
        with ``advice`` (``; run `evalcore validate```) before the closing parenthesis."""
        if more <= 0:
            return self
        return self._replaced(self.subject, self.text + f" (and {more} more problem(s)" + advice + ")")

    def _replaced(self, subject: str | None, text: Text) -> InputError:
        # a copy by ``__reduce__``: the class and every field (an UnknownNameError's ``name`` too), no traceback
        exc = copy.copy(self)
        exc.subject, exc.text = subject, text
        exc.args = (exc.message,)
        return exc


def first_problem(problems: list[InputError], advice: Words = "") -> InputError:
    """The first of ``problems`` (not empty), saying how many more there are."""
    return problems[0].followed_by(len(problems) - 1, advice)


def _rebuild(cls: type[InputError], subject: str | None, detail: Words, rows: Iterable[int]) -> InputError:
    exc = cls.__new__(cls)
    InputError.__init__(exc, detail, subject=subject, rows=rows)
    return exc


class OptionError(InputError):
    """A bad option or parameter; ``.option`` names it (``--max-rank``, or ``max_rank`` from Python)."""

    def __init__(self, option: str, detail: Words) -> None:
        super().__init__(detail, subject=option)

    @property
    def option(self) -> str | None:
        return self.subject


class ArrayError(InputError):
    """A bad dataset array; ``.array`` names it, ``.rows`` lists the rows the message names (maybe the first few)."""

    def __init__(self, array: str, detail: Words, rows: Iterable[int] = ()) -> None:
        super().__init__(detail, subject=array, rows=rows)

    @property
    def array(self) -> str | None:
        return self.subject


class UnknownNameError(OptionError):
    """An option names something evalcore does not have (a metric, a measure): ``.name`` is the name given,
    so a caller can offer the closest known one."""

    def __init__(self, option: str, name: str, detail: Words) -> None:
        super().__init__(option, detail)
        self.name = name

    def __reduce__(self) -> tuple[Any, ...]:
        return _unknown_name, (self.subject, self.name, self.text)


def _unknown_name(option: str, name: str, detail: Words) -> UnknownNameError:
    return UnknownNameError(option, name, detail)


class DatasetNotFoundError(InputError, FileNotFoundError):
    """No dataset at the path or URL given (``subject`` is ``dataset <path>``)."""

    def __init__(self, subject: str, detail: Words) -> None:
        super().__init__(detail, subject=subject)


#: the sides a dataset array's name starts with (``query/emb``): a subject of this form is an array
ARRAY_SIDES = ("query", "gallery", "qrels", "ranking", "scores")


def is_flag(word: str) -> bool:
    """Is ``word`` a command-line flag (``--max-rank``)?"""
    return word.startswith("--") and word[2:].replace("-", "_").isidentifier()


def input_error(subject: str, detail: Words, rows: Iterable[int] = ()) -> InputError:
    """The error about ``subject`` where the subject is only known at run time (``f"{name}: ..."``): an
    ``ArrayError`` for a dataset array (``gallery/label``), an ``OptionError`` for a flag (``--ks``) or a Python
    parameter (``gallery_labels``), else an ``InputError`` naming it."""
    side, _, rest = subject.partition("/")
    if side in ARRAY_SIDES and rest.isidentifier():
        return ArrayError(subject, detail, rows)
    if is_flag(subject) or subject.isidentifier():
        return OptionError(subject, detail)
    return InputError(detail, subject=subject, rows=rows)


#: how many characters of another library's reason an evalcore message quotes (``foreign_reason``)
FOREIGN_REASON_LIMIT = 200


def foreign_reason(exc: BaseException, *, named: bool = False, limit: int = FOREIGN_REASON_LIMIT) -> str:
    """What another library (pyarrow, numpy, zarr, tomllib, the OS) said when it failed, as an evalcore message
    quotes it: the first line of the exception's text, whitespace folded to single spaces, cut to ``limit``
    characters (``...`` ending a cut one); with ``named``, after the exception's class (``ArrowInvalid: ...``).
    An exception that said nothing is its class name.

    The one place the text of an exception that is not evalcore's is read. An evalcore error is shown from its
    fields instead (``exc.message``, or ``exc.subject`` and ``exc.detail`` chosen for the reader); given one,
    this returns its ``message``."""
    if isinstance(exc, InputError):
        return exc.message
    lines = str(exc).strip().splitlines()
    text = " ".join(lines[0].split()) if lines else ""
    if len(text) > limit:
        text = text[:max(limit - 3, 0)].rstrip() + "..."
    if not text:
        return type(exc).__name__
    return f"{type(exc).__name__}: {text}" if named else text


class EvalcoreWarning(UserWarning):
    """What a reader of the results should know (queries left out of the means, arrays no protocol used, runs
    compared under different options): each is also in ``run["warnings"]`` (``Comparison.warnings``)."""


# --------------------------------------------------------------------------- not the input's fault
# (here, not beside the cluster code, so the command line can catch them without importing distributed)


class ClusterError(RuntimeError):
    """The cluster, not the input, made the run fail (exit status 1; the message is the whole story)."""


class ClusterUnreachable(ClusterError):
    """The scheduler given by --scheduler did not answer, or the connection to it was lost (exit status 1)."""


class WorkerFailed(ClusterError):
    """Workers kept dying while running a task: out of memory (the message says so and what to change) or crashed."""


class WorkerStalled(ClusterError):
    """A worker held a task far longer than the run's stall limit and the task could not run elsewhere
    (no other worker answered, or it stalled on more than one): the message names the worker and the queries."""


def rows_text(rows: Iterable[Any], limit: int = 5) -> str:
    """The rows an error names: ``3, 7, 9`` or ``3, 7, 9, 12, 15, ... (40 rows)`` past ``limit``."""
    rows = [int(r) for r in rows]
    shown = ", ".join(str(r) for r in rows[:limit])
    return shown + (f", ... ({len(rows)} rows)" if len(rows) > limit else "")
