"""The four READMEs link only to what exists, and README.md stays a short page for users.

Every relative link in README.md, evalcore/README.md, jobs/README.md and deploy/README.md
names an existing file, every ``#anchor`` an existing heading of the file it points into
(GitHub's slug rule: lowercase, spaces to '-', punctuation other than '-' and '_' removed),
and README.md has at most 400 lines and a table of contents whose entries are its ``##`` headings.
"""
from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
READMES = ["README.md", "evalcore/README.md", "jobs/README.md", "deploy/README.md"]
MAX_LINES = 400

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def prose(text: str) -> str:
    """The text outside fenced code blocks (a link inside code is code, not a link)."""
    out, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            out.append(line)
    return "\n".join(out)


def headings(text: str) -> list[tuple[int, str]]:
    """(level, title) of every Markdown heading outside code blocks."""
    found = []
    for line in prose(text).splitlines():
        m = re.match(r"(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if m:
            found.append((len(m.group(1)), m.group(2)))
    return found


def slug(title: str) -> str:
    """GitHub's anchor: lowercase; inline code marks and punctuation other than '-' and '_' gone; spaces to '-'."""
    title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title).lower()
    title = re.sub(r"[^\w\- ]", "", title)
    return title.replace(" ", "-")


def anchors(path: pathlib.Path) -> set[str]:
    """Every heading's slug, repeated titles numbered -1, -2, ... as GitHub does."""
    seen: dict[str, int] = {}
    out = set()
    for _, title in headings(path.read_text()):
        s = slug(title)
        n = seen.get(s, 0)
        out.add(s if n == 0 else f"{s}-{n}")
        seen[s] = n + 1
    return out


def broken_links(name: str) -> list[str]:
    source = ROOT / name
    bad = []
    for target in LINK.findall(prose(source.read_text())):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):   # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (source.parent / path).resolve() if path else source
        if not dest.exists():
            bad.append(f"{name}: {target}: no file {path}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{name}: {target}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    return bad


@pytest.mark.parametrize("name", READMES)
def test_every_relative_link_and_anchor_exists(name):
    assert (ROOT / name).is_file(), f"missing {name}"
    bad = broken_links(name)
    assert not bad, "\n".join(bad)


def test_the_slug_rule():
    assert slug("Comparing runs: `evalcore compare`") == "comparing-runs-evalcore-compare"
    assert slug("BEIR / MTEB / sentence-transformers") == "beir--mteb--sentence-transformers"
    assert slug("Contributing: where a change goes") == "contributing-where-a-change-goes"


def test_the_readme_is_short():
    n = len((ROOT / "README.md").read_text().splitlines())
    assert n <= MAX_LINES, f"README.md has {n} lines, more than {MAX_LINES}"


def test_the_readme_has_a_table_of_contents_of_its_sections():
    text = (ROOT / "README.md").read_text()
    sections = [title for level, title in headings(text) if level == 2]
    toc_at = [i for i, (level, title) in enumerate(headings(text)) if title.lower() == "contents"]
    assert toc_at, "README.md has no '## Contents' heading"
    body = prose(text).split("## Contents", 1)[1].split("\n## ", 1)[0]
    entries = LINK.findall(body)
    wanted = ["#" + slug(title) for title in sections if title.lower() != "contents"]
    assert entries == wanted, f"table of contents {entries} is not the ## headings {wanted}"
