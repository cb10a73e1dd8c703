"""``evalcore bench --shape trec`` times ``evalcore trec`` beside pytrec_eval's whole process: the printed
ratio is the rounds' ratio, and evalcore trec's means are pytrec_eval's (the reference: the same files,
trec_eval's rules in both) as trec_eval prints them, to 4 decimals. Timings themselves are not checked."""
import importlib.util
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

CLI = [str(Path(sys.executable).with_name("evalcore"))]


@pytest.mark.skipif(importlib.util.find_spec("pytrec_eval") is None, reason="pytrec_eval is the reference")
def test_bench_trec_times_evalcore_trec_beside_pytrec_eval_and_their_means_agree():
    proc = subprocess.run([*CLI, "bench", "--shape", "trec", "--queries", "200", "--repeat", "2"],
                          capture_output=True, text=True, timeout=600, env={**os.environ, "EVALCORE_DEBUG": ""})
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    rounds = [tuple(map(float, r)) for r in re.findall(r"trec ([\d.]+) s, pytrec_eval ([\d.]+) s", out)]
    assert len(rounds) == 2
    ratio = re.search(r"pytrec_eval / evalcore trec +median ([\d.]+) +\(min-max ([\d.]+)-([\d.]+);", out)
    ratios = [p / t for t, p in rounds]
    assert float(ratio.group(1)) == pytest.approx(statistics.median(ratios), abs=0.011)
    assert float(ratio.group(2)) == pytest.approx(min(ratios), abs=0.011)
    assert float(ratio.group(3)) == pytest.approx(max(ratios), abs=0.011)
    assert re.search(r"evalcore trec +median +[\d.]+ s +\(min-max [\d.]+-[\d.]+\) +largest process [\d,]+ MiB", out)
    ours = dict(re.findall(r"(\w+) ([\d.]+)", out.split("evalcore trec means:")[1].splitlines()[0]))
    theirs = dict(re.findall(r"(\w+) ([\d.]+)", out.split("pytrec_eval means:")[1].splitlines()[0]))
    assert set(ours) == set(theirs) == {"map", "recip_rank", "P_10", "recall_100"}
    for name, value in theirs.items():
        assert ours[name] == f"{float(value):6.4f}".strip(), name
