"""``evalcore bench --shape challenge`` on a tiny shape: both ways score the generated submission, the printed
mAP is the brute force of tests/challenge_data.py, and the figures are printed (not judged: performance is
measured, not timed in tests)."""
import re

import numpy as np
import pytest
from challenge_data import reference_split_maps

from evalcore.cli.main import main
from evalcore.io import dataset as ds
from evalcore.jobs import bench_challenge


@pytest.mark.slow
def test_bench_challenge_scores_both_ways_and_prints_the_figures(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(bench_challenge.SHAPES, "challenge", (60, 3000, 16))
    assert main(["bench", "--shape", "challenge", "--repeat", "2", "--data-dir", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    folder = tmp_path / "bench-challenge"
    truth = ds.open_dataset(str(folder / "truth.zarr"))
    arrays = {name: ds.read(truth, name) for name in ("query/key", "gallery/key", "qrels/query", "qrels/item",
                                                       "qrels/rel")}
    sub = folder / "subs" / "team-a" / "run-1"
    want = reference_split_maps(arrays, np.load(sub / "query.npy"), np.load(sub / "gallery.npy"))["all"]
    found = re.search(r"mAP (\d\.\d+) \(\|diff\| (\S+)\)", text)
    assert found, text
    assert float(found[1]) == pytest.approx(want, abs=1e-6) and float(found[2]) == 0.0
    for label in ("score-service (check, score, files, ledger)", "evalcore score (whole process)"):
        line = next(line for line in text.splitlines() if label in line)
        assert re.search(r"\d+\.\d\d s \(\d+\.\d\d-\d+\.\d\d, n=2\) +[\d,]+ submissions/hour", line), line
    assert re.search(r"service / score = \d\.\d\d \(\d\.\d\d-\d\.\d\d\)", text)
    assert not (folder / "outs").exists()  # every result folder of the timed runs is removed
