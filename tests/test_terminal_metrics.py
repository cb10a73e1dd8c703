"""The terminal summary shows every metric that was asked for (issue 37 item 4: `--metrics map,recall@100
--ks 10,100` printed mAP alone), wrapped into several tables within the width."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from evalcore.io import dataset as ds

CLI = [str(Path(sys.executable).with_name("evalcore"))]
#: the metrics asked for, as summary.parquet names them -> the label the terminal prints
ASKED = {"map": "mAP", "mrr": "MRR", "recall_at_10": "recall@10", "recall_at_100": "recall@100",
         "precision_at_10": "precision@10", "hit_at_100": "hit@100", "ndcg_at_10": "nDCG@10"}
METRICS = "map,mrr,recall@10,recall@100,precision@10,hit@100,ndcg@10"


def cli(*args):
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=240,
                          env={**os.environ, "EVALCORE_DEBUG": ""})


def printed_tables(text: str) -> dict[str, str]:
    """Every summary table's ``all`` row as {header label: cell}: a table is a header line over a rule of
    dashes, whose runs of dashes give the columns' spans."""
    lines = text.splitlines()
    cells = {}
    for i in range(1, len(lines) - 1):
        rule = lines[i]
        if not rule or set(rule) - {"-", " "}:
            continue
        spans, start = [], None
        for j, ch in enumerate(rule + " "):
            if ch == "-" and start is None:
                start = j
            elif ch != "-" and start is not None:
                spans.append((start, j))
                start = None
        header, row = lines[i - 1], lines[i + 1]
        if not header.startswith("group") or not row.startswith("all"):
            continue  # the worst queries' table
        for a, b in spans:
            cells[header[a:b].strip()] = row[a:b].strip()
    return cells


def test_evaluate_and_show_print_every_metric_asked_for(tmp_path):
    rng = np.random.default_rng(3)
    path = tmp_path / "ds.zarr"
    ds.write_dataset(path, {"query/emb": rng.standard_normal((30, 8)).astype(np.float32),
                            "gallery/emb": rng.standard_normal((300, 8)).astype(np.float32),
                            "query/label": rng.integers(0, 6, 30), "gallery/label": rng.integers(0, 6, 300)})
    out = tmp_path / "out"
    done = cli("evaluate", path, "--out", out, "--metrics", METRICS, "--ks", "10,100")
    assert done.returncode == 0, done.stderr
    summary = pq.read_table(out / "summary.parquet").to_pylist()[0]
    shown = cli("show", out)
    assert shown.returncode == 0, shown.stderr
    for printed in (done.stdout, shown.stdout):
        assert max(len(line) for line in printed.splitlines()) <= 100  # wrapped, not one wide line
        cells = printed_tables(printed)
        for column, label in ASKED.items():
            assert label in cells, f"{label} missing from:\n{printed}"
            assert abs(float(cells[label]) - summary[column]) <= 5e-5, label
