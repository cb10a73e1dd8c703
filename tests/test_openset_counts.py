"""The open-set counts printed beside FPIR and FNIR reproduce them (issue 35, finding 4).

FPIR is over the unknown queries (R = 0) only and FNIR over the known ones,
so the counts printed beside each rate are split the same way: known queries
accepted with a correct rank 1, accepted with a wrong one, rejected; unknown
queries accepted, rejected. Every check recomputes the rates from the counts
as printed (terminal, report.html) or stored (summary.parquet,
threshold_sweep.parquet), and the counts themselves by brute force from
per_query.parquet's own columns (accepted, outcome, n_relevant, top1_score,
first_rank), not from the code under test.
"""
import os
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import random_reid

from evalcore.core import openset
from evalcore.io import dataset as ds

CLI = [str(Path(sys.executable).with_name("evalcore"))]
THRESHOLD = 0.8
SPLIT = ("known_accepted_correct", "known_accepted_wrong", "known_rejected", "unknown_accepted", "unknown_rejected")
LABEL = {"known_accepted_correct": "known accepted correct", "known_accepted_wrong": "known accepted wrong",
         "known_rejected": "known rejected", "unknown_accepted": "unknown accepted",
         "unknown_rejected": "unknown rejected"}


def cli(*args, timeout=120):
    done = subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "EVALCORE_DEBUG": ""})
    assert done.returncode == 0, done.stderr
    return done.stdout


def brute_force(rows: list[dict]) -> dict[str, int]:
    """The five counts from per-query rows: known = n_relevant > 0, correct = the outcome says so (TP, FN)."""
    out = dict.fromkeys(SPLIT, 0)
    for r in rows:
        known, accepted, correct = r["n_relevant"] > 0, r["accepted"], r["outcome"] in ("TP", "FN")
        assert accepted == (r["outcome"] in ("TP", "FP"))
        if known:
            out["known_accepted_correct" if accepted and correct else
                "known_accepted_wrong" if accepted else "known_rejected"] += 1
        else:
            out["unknown_accepted" if accepted else "unknown_rejected"] += 1
    return out


def groups_of(rows: list[dict]) -> dict[str, list[dict]]:
    """Row "all", then one per query/group value (when the rows have one), as the summary has them."""
    out: dict[str, list[dict]] = {}
    for r in rows:
        if r.get("group") is not None:
            out.setdefault(r["group"], []).append(r)
    return {"all": rows, **out}


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """A real run with unknown queries, known queries accepted with a wrong rank 1, and groups; its stdout."""
    tmp = tmp_path_factory.mktemp("openset")
    data = random_reid(np.random.default_rng(35), n_query=400, n_gallery=1500, dims=16, unknown=0.2, spread=1.0)
    ds.write_dataset(tmp / "ds.zarr", data)
    out = tmp / "report"
    stdout = cli("evaluate", tmp / "ds.zarr", "--out", out, "--protocol", "reid", "--threshold", THRESHOLD,
                 "--sweep", "--workers", "1")
    rows = pq.read_table(out / "per_query.parquet").to_pylist()
    every = brute_force(rows)
    # the case the finding is about: every kind of query is there, in every group
    for name, sel in groups_of(rows).items():
        assert all(v > 0 for v in brute_force(sel).values()), (name, brute_force(sel))
    assert every["known_accepted_wrong"] > 0 and every["unknown_accepted"] > 0
    return out, stdout, rows


# --------------------------------------------------------------------------- the terminal


def text_tables(text: str) -> list[tuple[list[str], list[dict[str, str]]]]:
    """Every aligned table of the text: (header labels, rows as {label: cell}); columns cut where the rule's
    dashes are, so labels with spaces stay whole."""
    lines = text.splitlines()
    tables = []
    for i in range(1, len(lines)):
        rule = lines[i]
        if not rule.startswith("-") or set(rule) - {"-", " "}:
            continue
        spans, start = [], None
        for j, ch in enumerate(rule + " "):
            if ch == "-" and start is None:
                start = j
            elif ch == " " and start is not None:
                spans.append((start, j))
                start = None
        cut = lambda line, spans=spans: [line[a:b].strip() for a, b in spans]  # noqa: E731
        header = cut(lines[i - 1])
        body = []
        for line in lines[i + 1:]:
            if not line.strip():
                break
            body.append(dict(zip(header, cut(line))))
        tables.append((header, body))
    return tables


def printed_rate_tables(text: str, rate: str) -> list[dict[str, str]]:
    """The rows of the one table that prints ``rate``."""
    found = [body for header, body in text_tables(text) if rate in header]
    assert len(found) == 1, text
    return found[0]


def check_printed(text: str, rows: list[dict]):
    """The counts printed beside FNIR and FPIR give those rates (4 decimals, as printed) and are the brute-force
    counts of each group."""
    want = {name: brute_force(sel) for name, sel in groups_of(rows).items()}
    fnir_rows = printed_rate_tables(text, "FNIR")
    fpir_rows = printed_rate_tables(text, "FPIR")
    assert {r["group"] for r in fnir_rows} == {r["group"] for r in fpir_rows} == set(want)
    for r in fnir_rows:
        ok, wrong, rejected = (int(r[LABEL[c]]) for c in SPLIT[:3])
        assert r["FNIR"] == f"{(wrong + rejected) / (ok + wrong + rejected):.4f}", r
        assert (ok, wrong, rejected) == tuple(want[r["group"]][c] for c in SPLIT[:3]), r
    for r in fpir_rows:
        accepted, rejected = (int(r[LABEL[c]]) for c in SPLIT[3:])
        assert r["FPIR"] == f"{accepted / (accepted + rejected):.4f}", r
        assert (accepted, rejected) == tuple(want[r["group"]][c] for c in SPLIT[3:]), r


def test_evaluate_prints_counts_that_reproduce_the_rates_beside_them(report):
    out, stdout, rows = report
    check_printed(stdout, rows)


def test_show_prints_counts_that_reproduce_the_rates_beside_them(report):
    out, _, rows = report
    check_printed(cli("show", out), rows)


@pytest.mark.slow
def test_demo_prints_counts_that_reproduce_the_rates_beside_them(tmp_path):
    """The issue's own example: the demo's open-set line (57 unknown queries, known ones accepted wrong)."""
    stdout = cli("demo", "--out", tmp_path / "demo", "--dims", 32, "--workers", 1)
    rows = pq.read_table(tmp_path / "demo" / "report" / "per_query.parquet").to_pylist()
    counts = brute_force(rows)
    assert counts["known_accepted_wrong"] > 0 and counts["unknown_accepted"] > 0
    check_printed(stdout, rows)


# --------------------------------------------------------------------------- summary.parquet


def test_summary_columns_are_the_brute_force_counts_and_give_the_rates(report):
    out, _, rows = report
    summary = {r["group"]: r for r in pq.read_table(out / "summary.parquet").to_pylist()}
    for name, sel in groups_of(rows).items():
        s, want = summary[name], brute_force(sel)
        assert {c: s[c] for c in SPLIT} == want
        n_known = want["known_accepted_correct"] + want["known_accepted_wrong"] + want["known_rejected"]
        n_unknown = want["unknown_accepted"] + want["unknown_rejected"]
        assert s["fpir"] == want["unknown_accepted"] / n_unknown
        assert s["rejection_accuracy"] == want["unknown_rejected"] / n_unknown
        assert s["fnir"] == (want["known_accepted_wrong"] + want["known_rejected"]) / n_known
        # the contract's matrix over all queries stays, under its old names
        outcomes = [r["outcome"] for r in sel]
        assert (s["tp"], s["fp"], s["fn"], s["tn"]) == tuple(outcomes.count(o) for o in ("TP", "FP", "FN", "TN"))
    assert all(pq.read_schema(out / "summary.parquet").field(c).type == "int64" for c in SPLIT)


def test_sweep_rows_carry_the_counts_of_each_rate(report):
    """threshold_sweep.parquet: at every threshold the split counts are a direct count and give FPIR and FNIR."""
    out, _, rows = report
    sweep = pq.read_table(out / "threshold_sweep.parquet").to_pylist()
    for r in sweep:
        sel = groups_of(rows)[r["group"]]
        want = dict.fromkeys(SPLIT, 0)
        for q in sel:
            score = -np.inf if q["top1_score"] is None else q["top1_score"]
            accepted, known = score >= r["threshold"], q["n_relevant"] > 0
            correct = q["first_rank"] == 1
            key = (("known_accepted_correct" if correct else "known_accepted_wrong") if accepted else
                   "known_rejected") if known else ("unknown_accepted" if accepted else "unknown_rejected")
            want[key] += 1
        assert {c: r[c] for c in SPLIT} == want, r
        assert r["fpir"] == pytest.approx(want["unknown_accepted"] / (want["unknown_accepted"]
                                                                      + want["unknown_rejected"]), abs=1e-15)
        assert r["fnir"] == pytest.approx((want["known_accepted_wrong"] + want["known_rejected"])
                                          / sum(want[c] for c in SPLIT[:3]), abs=1e-15)


def test_sweep_counts_against_a_direct_count_on_ties():
    """openset.sweep on many equal scores: each split count at each threshold, counted directly."""
    rng = np.random.default_rng(4)
    score = np.round(rng.random(500), 1)
    known = rng.random(500) < 0.7
    correct = known & (rng.random(500) < 0.6)
    pts = openset.sweep(score, correct, known)
    for i, t in enumerate(pts["threshold"]):
        accepted = score >= t
        want = [(known & accepted & correct).sum(), (known & accepted & ~correct).sum(), (known & ~accepted).sum(),
                (~known & accepted).sum(), (~known & ~accepted).sum()]
        assert [int(pts[c][i]) for c in SPLIT] == want


# --------------------------------------------------------------------------- report.html


class Tables(HTMLParser):
    """Every <table> of a page: (caption = the last <h3> before it, header cells, body rows)."""

    def __init__(self):
        super().__init__()
        self.tables, self.heading, self._cell, self._in_h3 = [], "", None, False

    def handle_starttag(self, tag, attrs):
        if tag == "h3":
            self._in_h3, self.heading = True, ""
        elif tag == "table":
            self.tables.append((self.heading, [], []))
        elif tag == "tr" and self.tables:
            self.tables[-1][2].append([])
        elif tag in ("td", "th"):
            self._cell = ""

    def handle_endtag(self, tag):
        if tag == "h3":
            self._in_h3 = False
        elif tag in ("td", "th") and self._cell is not None:
            header, body = self.tables[-1][1], self.tables[-1][2]
            (header if tag == "th" else body[-1]).append(self._cell)
            self._cell = None

    def handle_data(self, data):
        if self._in_h3:
            self.heading += data
        if self._cell is not None:
            self._cell += data


def test_report_html_puts_each_rate_beside_the_counts_it_comes_from(report):
    out, _, rows = report
    parser = Tables()
    parser.feed((out / "report.html").read_text())
    want = {name: brute_force(sel) for name, sel in groups_of(rows).items()}
    for rate, counts, formula in (("FNIR", SPLIT[:3], lambda c: (c[1] + c[2]) / sum(c)),
                                  ("FPIR", SPLIT[3:], lambda c: c[0] / sum(c))):
        found = [(h, head, [r for r in body if r]) for h, head, body in parser.tables if rate in head]
        assert len(found) == 1, rate
        heading, head, body = found[0]
        assert rate in heading  # the heading states the rule
        assert {r[0] for r in body} == set(want)
        for r in body:
            cells = dict(zip(head, r))
            shown = [int(cells[LABEL[c]]) for c in counts]
            assert shown == [want[r[0]][c] for c in counts]
            assert cells[rate] == f"{formula(shown):.4f}"
