"""The graded measures wherever metrics show (issue 22): terminal, report.html, CMC, ``evalcore metrics``, nightly.

A graded qrels dataset with planted ties (``test_graded_paths.planted_ties``)
goes through ``evalcore evaluate --judged-only --out``; every summary value
shown is checked against the mean of the per-query reference written in
``test_graded_paths`` (a full sort and the textbook definitions), printed to
4 decimals, under the label the registry gives it.
"""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from test_graded_paths import KS, planted_ties, reference_table

from evalcore.cli.main import main
from evalcore.io import dataset as ds

CLI = [str(Path(sys.executable).with_name("evalcore"))]
NEW = "ndcg,ndcg@k,bpref,rprec,map_cut@k,mrr@k"
#: summary column -> (its label, the reference's per-query column)
SHOWN = {"ndcg": ("nDCG", "ndcg"), "bpref": ("bpref", "bpref"), "rprec": ("R-precision", "rprec"),
         **{f"ndcg_at_{k}": (f"nDCG@{k}", f"ndcg_at_{k}") for k in KS},
         **{f"map_cut_{k}": (f"MAP cut {k}", f"ap_cut_{k}") for k in KS},
         **{f"mrr_at_{k}": (f"MRR@{k}", f"rr_at_{k}") for k in KS}}


def cli(*args):
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=240,
                          env={**os.environ, "EVALCORE_DEBUG": ""})


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("surfaces")
    arrays = planted_ties(11)
    ds.write_dataset(root / "ties.zarr", arrays, {"protocol": "qrels", "similarity": "dot"})
    rows = [r for r in reference_table(arrays, "pessimistic", 1, None, judged_only=True) if r is not None]
    means = {summary: sum(r[column] for r in rows) / len(rows) for summary, (_, column) in SHOWN.items()}
    return root, means


def test_terminal_summary_and_report_page_show_the_graded_measures(tmp_path, graded):
    root, means = graded
    out = tmp_path / "r"
    done = cli("evaluate", root / "ties.zarr", "--out", out, "--judged-only", "--ks", ",".join(map(str, KS)),
               "--metrics", NEW + ",hit@k")
    assert done.returncode == 0, done.stderr
    summary = [r for r in pq.read_table(out / "summary.parquet").to_pylist() if r["group"] == "all"][0]
    assert list(summary) == ["group", "n_queries", "n_evaluated", "n_unknown", "rprec", "ndcg", "bpref",
                             *[f"{m}_{k}" for k in KS for m in ("hit_at", "ndcg_at", "map_cut", "mrr_at")]]
    for name, want in means.items():
        assert summary[name] == pytest.approx(want, rel=1e-12), name

    # terminal: each label above its value, to 4 decimals
    tables = done.stdout.split("\n\n")
    shown = {}
    for block in tables:
        lines = [line for line in block.splitlines() if line.strip() and not line.startswith("-")]
        if len(lines) >= 2 and lines[0].startswith("group"):
            heads = re.split(r"\s{2,}", lines[0].strip())
            values = re.split(r"\s{2,}", lines[1].strip())
            shown.update(zip(heads, values))
    for name, (label, _) in SHOWN.items():
        assert shown.get(label) == f"{means[name]:.4f}", (label, shown)

    # report.html: the Metrics table has every summary column under its label, with the reference's value
    # (a wide summary wraps into several tables of at most SUMMARY_COLUMNS metrics: read them all)
    html = (out / "report.html").read_text()
    table, labels = {}, {}
    for block in re.findall(r"<table.*?</table>", html, re.S):
        head = re.findall(r'<th title="([^"]+)">([^<]+)</th>', block)
        row = re.search(r"<tbody>\s*<tr><td>all</td>(.*?)</tr>", block, re.S)
        if not head or row is None:
            continue
        values = re.findall(r'<td class="num">([^<]+)</td>', row.group(1))
        table.update(zip([title for title, _ in head][1:], values))
        labels.update(head)
    for name, (label, _) in SHOWN.items():
        assert labels[name] == label and table[name] == f"{means[name]:.4f}", name
    # the CMC (hit@k among the metrics) is drawn
    assert pq.read_table(out / "cmc.parquet").num_rows > 0
    assert 'alt="CMC' in html and "No CMC data" not in html


def test_no_cmc_where_no_metric_enters_it(tmp_path, graded):
    root, means = graded
    out = tmp_path / "r"
    done = cli("evaluate", root / "ties.zarr", "--out", out, "--judged-only", "--ks", "10", "--metrics",
               "ndcg@10,bpref", "--quiet")
    assert done.returncode == 0, done.stderr
    assert pq.read_table(out / "cmc.parquet").num_rows == 0
    html = (out / "report.html").read_text()
    assert 'alt="CMC' not in html and "No CMC data" not in html  # the plot is left out, not an empty box
    summary = pq.read_table(out / "summary.parquet").to_pylist()[0]
    assert summary["ndcg_at_10"] == pytest.approx(means["ndcg_at_10"], rel=1e-12)


def test_the_result_shows_its_own_measures(graded):
    import evalcore
    root, means = graded
    result = evalcore.evaluate(str(root / "ties.zarr"), judged_only=True, ks=(5,), metrics=["ndcg@5", "bpref"])
    assert repr(result) == (f"<evalcore.Result 30 queries: bpref={means['bpref']:.4f}, "
                            f"ndcg_at_5={means['ndcg_at_5']:.4f}>")


def test_evalcore_metrics_lists_the_graded_measures_aligned():
    done = cli("metrics")
    assert done.returncode == 0, done.stderr
    lines = {line.split()[0]: line for line in done.stdout.splitlines()}
    want = {"ndcg": "ndcg", "ndcg@k": "ndcg_at_{k}", "bpref": "bpref", "rprec": "rprec",
            "map_cut@k": "ap_cut_{k} -> map_cut_{k}", "mrr@k": "rr_at_{k} -> mrr_at_{k}"}
    for name, columns in want.items():
        assert lines[name].split("  ")[0].startswith(name) and columns in lines[name], lines[name]
    starts = {re.search(r"(higher|lower) is better", line).start() for line in lines.values()}
    assert len(starts) == 1, done.stdout      # the direction column lines up on every line


def nightly_job(root: Path, tmp_path: Path, gates: str) -> Path:
    job = tmp_path / "job.toml"
    job.write_text(f'reports = "{tmp_path / "reports"}"\nhistory = "{tmp_path / "history"}"\n'
                   'trend_metrics = ["ndcg_at_10", "bpref", "map_cut_5"]\n'
                   f'[[evaluation]]\nname = "graded"\ndataset = "{root / "ties.zarr"}"\nks = [5, 10]\n'
                   f'judged_only = true\nmetrics = ["ndcg", "ndcg@k", "bpref", "map_cut@k", "mrr@k"]\n' + gates)
    return job


GATES = ("[gates.ndcg_at_10]\nmax_drop_previous = 0.0\n[gates.bpref]\nmax_drop_previous = 0.0\n"
         "[gates.map_cut_5]\nmax_drop_previous = 0.0\n[gates.mrr_at_10]\nmax_drop_previous = 0.0\n")


def test_nightly_gates_and_trends_on_graded_measures(tmp_path, graded, capsys):
    root, means = graded
    job = nightly_job(root, tmp_path, GATES)
    for day in ("2025-01-01", "2025-01-02"):
        assert main(["nightly", str(job), "--date", day, "--quiet"]) == 0
    printed = capsys.readouterr().out
    # the console line names the evaluation's own measures (it has no map or hit@1)
    assert f"graded: ndcg {means['ndcg']:.4f}, bpref {means['bpref']:.4f}" in printed, printed
    gates = json.loads((tmp_path / "reports" / "2025-01-02" / "gates.json").read_text())
    assert {c["metric"] for c in gates["checks"]} == {"ndcg_at_10", "bpref", "map_cut_5", "mrr_at_10"}
    assert gates["failed"] == 0 and all(c["passed"] for c in gates["checks"])
    for check in gates["checks"]:
        assert check["new"] == pytest.approx(means[check["metric"]], rel=1e-12) and check["higher_is_better"]
    trend = (tmp_path / "reports" / "2025-01-02" / "trend.html").read_text()
    for label in ("nDCG@10", "bpref", "MAP cut 5"):
        assert f"{label} per run date" in trend


@pytest.mark.parametrize("gate, words", [("ndcg_at_7", ["ndcg_at_7", "ndcg_at_10"]),
                                         ("map_cut", ["map_cut", "map_cut_5"]),
                                         ("hit_at_5", ["hit_at_5", "not a metric"])])
def test_nightly_refuses_gates_on_graded_names_the_evaluation_does_not_write(tmp_path, graded, capsys, gate,
                                                                             words):
    root, _ = graded
    job = nightly_job(root, tmp_path, f"[gates.{gate}]\nmax_drop_previous = 0.0\n")
    assert main(["nightly", str(job), "--date", "2025-01-01", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and all(w in err for w in words), err
    assert not (tmp_path / "reports").exists()
