"""How the command line talks to a person: plain-text help and one-line usage errors with "did you mean".

Standard library only: every command imports this before it parses (tests/test_startup.py).
"""
from __future__ import annotations

import argparse
import difflib
import re
import textwrap
from collections.abc import Iterable, Sequence

#: ``code``, :role:`target` and `text`: reStructuredText markup the docstrings the help borrows from use
_LITERAL = re.compile(r"``(.+?)``", re.S)
_ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")
_INTERPRETED = re.compile(r"`([^`\n]+)`")
#: argparse's wording of an error about one argument: "argument --k: expected one argument"
_ABOUT_ARGUMENT = re.compile(r"^argument ([^:]+): (.*)$", re.S)
_REQUIRED = re.compile(r"^the following arguments are required: (.*)$", re.S)
WIDTH = 79


def plain_text(text: str) -> str:
    """``text`` without reST markup: ````x```` -> x, ``:func:`x``` -> x, ```x``` -> x, a closing ``::`` -> ``:``.

    A paragraph whose lines share one indent (after a heading line indented less, if any) is filled again
    to WIDTH (the markup removed leaves ragged lines); a literal block (after ``::``) and a paragraph of
    mixed indents are kept as they are.
    """
    text = _INTERPRETED.sub(r"\1", _ROLE.sub(r"\1", _LITERAL.sub(r"\1", text)))
    out, literal = [], False
    for block in re.split(r"\n[ \t]*\n", text):
        was_literal, literal = literal, block.rstrip().endswith("::")
        if literal:
            block = block.rstrip()[:-1]
        out.append(block if was_literal else _refilled(block))
    return "\n\n".join(out)


def _refilled(block: str) -> str:
    lines = block.split("\n")
    indent = [len(line) - len(line.lstrip()) for line in lines]
    head = 1 if len(lines) > 1 and indent[0] < min(indent[1:]) else 0  # a heading line: ``mat`` over its text
    if len(set(indent[head:])) != 1:
        return block
    pad = " " * indent[head]
    body = textwrap.fill(" ".join(line.strip() for line in lines[head:]), WIDTH, initial_indent=pad,
                         subsequent_indent=pad, break_on_hyphens=False, break_long_words=False)
    return "\n".join(lines[:head] + [body])


class PlainText:
    """A help formatter mixin: descriptions and option help printed as plain text (``plain_text``)."""

    def _format_text(self, text):
        return super()._format_text(plain_text(text))  # type: ignore[misc]

    def _expand_help(self, action):
        return plain_text(super()._expand_help(action))  # type: ignore[misc]


class PlainHelp(PlainText, argparse.HelpFormatter):
    """argparse's default layout, plain text."""


class PlainRawHelp(PlainText, argparse.RawDescriptionHelpFormatter):
    """The description's own line breaks kept (its paragraphs refilled by ``plain_text``), plain text."""


# --------------------------------------------------------------------------- did you mean


def did_you_mean(given: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` with the known word closest to ``given`` (difflib's ratio >= 0.6), else ''."""
    close = difflib.get_close_matches(given, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def unknown_choice(action: argparse.Action, value: str) -> str:
    """The message for a value outside an argument's choices: a command, a positional word or an option's."""
    choices = [str(c) for c in action.choices or ()]
    hint = did_you_mean(value, choices)
    if isinstance(action, argparse._SubParsersAction):
        return f"unknown command {value!r}{hint}; the commands: {', '.join(choices)}"
    if action.option_strings:
        return f"{action.option_strings[-1]}: unknown value {value!r}{hint}; choose from {', '.join(choices)}"
    what = (action.metavar if isinstance(action.metavar, str) else action.dest).lower()
    return f"unknown {what} {value!r}{hint}; choose from {', '.join(choices)}"


def reworded(prog: str, message: str) -> str:
    """argparse's error ``message`` led by the argument it is about, without the program's name:
    ``argument --k: expected one argument`` -> ``--k: expected one argument``."""
    found = _REQUIRED.match(message)
    if found:
        return f"{found.group(1)}: required by {prog}"
    found = _ABOUT_ARGUMENT.match(message)
    if found:
        return f"{found.group(1)}: {found.group(2)}"
    return message


def unknown_argument(parser: argparse.ArgumentParser, extras: Sequence[str]) -> str:
    """The message for words ``parser`` (the command's own parser) does not take: the first option-like one,
    with the closest option the command has, else the first word."""
    options = [s for action in parser._actions for s in action.option_strings if s.startswith("--")]
    for word in extras:
        if word.startswith("-") and len(word) > 1:
            name = word.split("=", 1)[0]
            hint = did_you_mean(name, options) or f" ({parser.prog} --help lists its options)"
            return f"{name}: not an option of {parser.prog}{hint}"
    return f"unexpected argument {extras[0]!r} ({parser.prog} --help says what it takes)"


def command_parser(parser: argparse.ArgumentParser, command: str | None) -> argparse.ArgumentParser:
    """The parser of subcommand ``command`` (``parser`` itself when there is none)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            return action.choices[command]
    return parser
