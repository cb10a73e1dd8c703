"""kill -9 of a real ``evalcore score-service`` process at random moments: after restarts every submission
is decided exactly once, none is lost, and each score is the brute-force one."""
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from challenge_data import make_truth, reference_split_maps, save, submission

from evalcore.io import ledger as lg

# with test_faults' kills and stalls in one test process, one after another (pyproject: --dist loadgroup)
pytestmark = pytest.mark.xdist_group("faults")

CLI = [str(Path(sys.executable).with_name("evalcore"))]


@pytest.mark.slow
def test_kill_9_at_random_points_loses_nothing_and_scores_nothing_twice(tmp_path):
    truth = make_truth(tmp_path / "truth.zarr")
    subs = {}
    for i in range(12):
        team, name = f"team-{i % 4}", f"run-{i}"
        subs[team, name] = submission(truth, seed=100 + i, noise=0.5 + 0.25 * i)
        save(tmp_path / "subs" / team / name, *subs[team, name])
    ledger = tmp_path / "out" / "organizer" / "ledger.parquet"
    command = [*CLI, "score-service", str(tmp_path / "subs"), "--truth", str(tmp_path / "truth.zarr"),
               "--out", str(tmp_path / "out"), "--poll", "0.2"]
    rng = random.Random(24)
    kills = 0  # kills that came while submissions were still undecided
    for _ in range(20):
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env={**os.environ, "EVALCORE_DEBUG": ""})
        # the scorer takes 1-1.5 s to start, then ~0.1 s a submission: kills within 1.2 s leave work undone on
        # a quiet machine too (a kill before the scorer has started counts all the same)
        time.sleep(rng.uniform(0.2, 1.2))
        complete = len(lg.read_ledger(ledger)) == len(subs)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        if complete:
            break
        kills += 1
    done = subprocess.run([*command, "--once"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    entries = lg.read_ledger(ledger)
    keys = [(e.team, e.submission) for e in entries]
    assert sorted(keys) == sorted(subs) and len(keys) == len(set(keys))
    for e in entries:
        assert e.status == "scored", e.reason
        assert e.split_map("public") == pytest.approx(reference_split_maps(truth, *subs[e.team, e.submission])["public"])
    board = pq.read_table(tmp_path / "out" / "leaderboard-main.parquet")
    assert sorted(zip(board.column("team").to_pylist(), board.column("submission").to_pylist())) == sorted(subs)
    assert kills >= 2
