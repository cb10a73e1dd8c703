"""``evalcore bench --shape beir`` on a tiny shape: its printed figures agree with each other and with an
independent brute force written here on the same generated files (the whole corpus ranked by cosine in float64
with numpy; nDCG@10, recall@100 and AP from their definitions, trec_eval's conventions: gain = grade, R = the
judged relevant documents). Timings are not checked, only that the ratio printed is the rounds' ratio."""
import math
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from evalcore.jobs import bench_beir

CLI = [str(Path(sys.executable).with_name("evalcore"))]
SHAPE = {"queries": 30, "gallery": 2000, "dims": 8, "top": 150}


def brute_force(folder, top):
    """(means {ndcg_cut_10, recall_100, map} of the exact ranking, the same of the top-``top`` lists, relevant
    documents ranked past ``top``, relevant documents in all)."""
    import json

    query, corpus = np.load(f"{folder}/query.npy"), np.load(f"{folder}/corpus.npy")
    ids = json.load(open(f"{folder}/ids.json"))
    qrels = json.load(open(f"{folder}/qrels.json"))
    q = query.astype(np.float64) / np.linalg.norm(query.astype(np.float64), axis=1, keepdims=True)
    c = corpus.astype(np.float64) / np.linalg.norm(corpus.astype(np.float64), axis=1, keepdims=True)
    scores = q @ c.T
    exact, cut, missed, relevant_all = [], [], 0, 0
    for row, qid in enumerate(ids["query"]):
        order = np.argsort(-scores[row], kind="stable")
        rank_of = {ids["corpus"][j]: r for r, j in enumerate(order, start=1)}
        relevant = {d: g for d, g in qrels[qid].items() if g >= 1}
        relevant_all += len(relevant)
        ideal = sorted(relevant.values(), reverse=True)
        idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal[:10]))
        for store, limit in ((exact, len(order)), (cut, top)):
            ranks = sorted(rank_of[d] for d in relevant if rank_of[d] <= limit)
            dcg = sum(relevant[d] / math.log2(rank_of[d] + 1) for d in relevant if rank_of[d] <= min(10, limit))
            store.append((dcg / idcg, sum(r <= 100 for r in ranks) / len(relevant),
                          sum(i / r for i, r in enumerate(ranks, start=1)) / len(relevant)))
        missed += sum(rank_of[d] > top for d in relevant)
    names = ("ndcg_cut_10", "recall_100", "map")
    mean = lambda rows: {n: float(np.mean([r[i] for r in rows])) for i, n in enumerate(names)}  # noqa: E731
    return mean(exact), mean(cut), missed, relevant_all


def test_bench_beir_prints_consistent_figures(tmp_path):
    pytest.importorskip("pytrec_eval")   # the pipeline bench times is BEIR's: top-k, then pytrec_eval
    proc = subprocess.run([*CLI, "bench", "--shape", "beir", "--repeat", "2",
                           *[x for k, v in SHAPE.items() for x in (f"--{k}", str(v))]],
                          capture_output=True, text=True, timeout=600, env={**os.environ, "EVALCORE_DEBUG": ""})
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "30 queries x 2,000 documents x 8 dims" in out and "top-150 per query" in out
    rounds = [tuple(map(float, r)) for r in re.findall(r"round: evalcore ([\d.]+) s, pipeline ([\d.]+) s", out)]
    assert len(rounds) == 2
    ratio = float(re.search(r"pipeline / evalcore +median ([\d.]+)", out).group(1))
    assert ratio == pytest.approx(statistics.median(b / a for a, b in rounds), abs=0.011)

    def means(label):
        line = next(x for x in out.splitlines() if label in x)
        return {k: float(v) for k, v in re.findall(r"(ndcg_cut_10|recall_100|map) ([\d.]+)", line)}

    bench_beir.write_beir_files(str(tmp_path), SHAPE["queries"], SHAPE["gallery"], SHAPE["dims"])  # same seed
    exact, cut, missed, relevant = brute_force(str(tmp_path), SHAPE["top"])
    for name, value in exact.items():
        assert means("evalcore means")[name] == pytest.approx(value, abs=2e-6), name
    for name, value in cut.items():
        assert means("pipeline means")[name] == pytest.approx(value, abs=2e-6), name
    found = re.search(r"top-150 run misses: ([\d,]+) of ([\d,]+)", out)
    assert (int(found.group(1).replace(",", "")), int(found.group(2).replace(",", ""))) == (missed, relevant)
    assert missed > 0   # the shape has relevant documents past the cut: the two evaluations differ there


def test_bench_beir_rejects_a_bad_count():
    proc = subprocess.run([*CLI, "bench", "--shape", "beir", "--gallery", "0"], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "EVALCORE_DEBUG": ""})
    assert proc.returncode == 2 and "--gallery" in proc.stderr and "Traceback" not in proc.stderr
