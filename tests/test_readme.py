"""README's Python examples run as written: every ``>>>`` line in README.md is a doctest,
and so is every one in evalcore/README.md, jobs/README.md and deploy/README.md.

A user copies them first; an example that no longer runs, or prints another number, fails here.
"""
from __future__ import annotations

import doctest
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
OTHERS = ["evalcore/README.md", "jobs/README.md", "deploy/README.md"]


def test_every_readme_example_runs_as_written():
    text = README.read_text()
    parser = doctest.DocTestParser()
    test = parser.get_doctest(text, {}, "README.md", str(README), 0)
    assert test.examples, "README.md has no >>> examples"
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} README examples failed (see the output)"


@pytest.mark.parametrize("name", OTHERS)
def test_every_example_of_the_other_readmes_runs_as_written(name):
    path = ROOT / name
    assert path.is_file(), f"missing {name}"
    test = doctest.DocTestParser().get_doctest(path.read_text(), {}, name, str(path), 0)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} {name} examples failed (see the output)"
