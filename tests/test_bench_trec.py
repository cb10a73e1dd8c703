"""``evalcore bench --shape trec``: runs, prints its figures, and its evalcore means equal a brute-force
reference written here on the same generated files (pessimistic ties, trec_eval's R = 0 rule)."""
import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from evalcore.jobs import bench_trec

CLI = [str(Path(sys.executable).with_name("evalcore"))]


def reference_means(run_path, qrels_path):
    """map, recip_rank, P_10 over the queries with results and judgements; within equal scores the
    non-relevant first (--ties pessimistic); a query with nothing relevant scores 0 (--empty-queries zero)."""
    grades = defaultdict(dict)
    for line in open(qrels_path):
        q, _, d, g = line.split()
        grades[q][d] = int(g)
    runs = defaultdict(list)
    for line in open(run_path):
        q, _, d, _, s, _ = line.split()
        runs[q].append((d, float(s)))
    aps, rrs, p10 = [], [], []
    for q in sorted(set(runs) & set(grades)):
        rel = {d for d, g in grades[q].items() if g >= 1}
        ranked = sorted(runs[q], key=lambda r: (-r[1], r[0] in rel))
        hits = [i for i, (d, _) in enumerate(ranked, start=1) if d in rel]
        aps.append(sum(n / r for n, r in enumerate(hits, start=1)) / len(rel) if rel else 0.0)
        rrs.append(1 / hits[0] if hits else 0.0)
        p10.append(sum(r <= 10 for r in hits) / 10)
    return {"map": sum(aps) / len(aps), "recip_rank": sum(rrs) / len(rrs), "P_10": sum(p10) / len(p10)}


def test_bench_trec_prints_medians_and_the_reference_means(tmp_path):
    proc = subprocess.run([*CLI, "bench", "--shape", "trec", "--queries", "300", "--repeat", "2"],
                          capture_output=True, text=True, timeout=600, env={**os.environ, "EVALCORE_DEBUG": ""})
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "300 queries x top-100 (30,000 run lines" in out
    assert len(re.findall(r"round: import [\d.]+ s, evaluate [\d.]+ s", out)) == 2
    assert re.search(r"import \+ evaluate +median +[\d.]+ s +\(min-max [\d.]+-[\d.]+\) +largest process [\d,]+ MiB",
                     out)
    have = bench_trec.importlib.util.find_spec("pytrec_eval") is not None
    assert ("pytrec_eval / evalcore" in out) if have else ("skipped (pytrec_eval is not importable here)" in out)
    printed = dict(re.findall(r"(map|recip_rank|P_10) ([\d.]+)", out.split("evalcore means:")[1].splitlines()[0]))
    run_path, qrels_path = bench_trec.write_trec_files(str(tmp_path), 300)   # the same seed: the same files
    want = reference_means(run_path, qrels_path)
    for name, value in want.items():
        assert float(printed[name]) == pytest.approx(value, abs=5e-7), name


def test_bench_trec_rejects_a_bad_count():
    proc = subprocess.run([*CLI, "bench", "--shape", "trec", "--queries", "0"], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "EVALCORE_DEBUG": ""})
    assert proc.returncode == 2 and "--queries" in proc.stderr and "Traceback" not in proc.stderr


def test_bench_trec_past_top_100_computes_every_measure_without_pytrec(tmp_path):
    proc = subprocess.run([*CLI, "bench", "--shape", "trec", "--queries", "40", "--top", "150", "--repeat", "1"],
                          capture_output=True, text=True, timeout=600, env={**os.environ, "EVALCORE_DEBUG": ""})
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "40 queries x top-150 (6,000 run lines" in out
    assert "pytrec_eval whole process    not run past top-100" in out
    printed = dict(re.findall(r"(map|recip_rank|P_10) ([\d.]+)", out.split("evalcore means:")[1].splitlines()[0]))
    run_path, qrels_path = bench_trec.write_trec_files(str(tmp_path), 40, top=150)
    lines = open(run_path).read().splitlines()
    assert len(lines) == 6000 and len({(x.split()[0], x.split()[2]) for x in lines}) == 6000   # no repeats
    for name, value in reference_means(run_path, qrels_path).items():
        assert float(printed[name]) == pytest.approx(value, abs=5e-7), name
