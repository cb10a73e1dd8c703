"""The job files of jobs/: batch evaluation and challenge scoring scripts, run as a user runs them."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from conftest import random_reid
from test_score import good_submission, make_truth, reference_map

import evalcore
from evalcore.io import dataset as ds

JOBS = Path(__file__).parents[1] / "jobs"
ENV = {**os.environ, "EVALCORE": str(Path(sys.executable).with_name("evalcore"))}


def job(script, *args, timeout=300):
    return subprocess.run(["bash", str(JOBS / script), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=ENV)


def test_batch_evaluates_every_listed_dataset_and_keeps_going_past_bad_input(tmp_path):
    rng = np.random.default_rng(3)
    for name in ("model-a", "model-b"):
        ds.write_dataset(tmp_path / f"{name}.zarr", random_reid(rng, n_query=80, n_gallery=600, dims=8))
    ds.write_dataset(tmp_path / "broken.zarr", {"query/emb": np.ones((3, 4), np.float32)})  # no gallery
    listing = tmp_path / "list.txt"
    listing.write_text(f"# models of this week\n{tmp_path}/model-a.zarr\n\n{tmp_path}/broken.zarr\n"
                       f"{tmp_path}/model-b.zarr   # the new one\n")
    done = job("batch-evaluate.sh", listing, tmp_path / "reports", "--protocol", "reid")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "evaluated 3 dataset(s), exit 2" in done.stdout
    assert "gallery" in done.stderr  # the bad dataset's own message
    for name in ("model-a", "model-b"):
        report = evalcore.read_report(tmp_path / "reports" / name)
        direct = evalcore.evaluate(str(tmp_path / f"{name}.zarr"), protocol="reid")
        assert report["per_query"].equals(direct.per_query)
    assert not (tmp_path / "reports" / "broken").exists()
    again = job("batch-evaluate.sh", listing, tmp_path / "reports", "--protocol", "reid")
    assert again.returncode == 2  # a rerun replaces the reports it wrote
    assert sorted(p.name for p in (tmp_path / "reports").iterdir()) == ["model-a", "model-b"]


def test_scoring_job_scores_each_submission_once_and_ranks_them(tmp_path):
    n_query, n_gallery = 40, 800
    truth = make_truth(tmp_path / "truth.zarr", n_query, n_gallery, judged=20)
    subs = tmp_path / "submissions"
    expected = {}
    for team, noise in (("team-a", 0.3), ("team-b", 1.2)):
        query, gallery = good_submission(truth, n_gallery, seed=len(team) + int(noise * 10), noise=noise)
        (subs / team / "run-1").mkdir(parents=True)
        np.save(subs / team / "run-1" / "query.npy", query)
        np.save(subs / team / "run-1" / "gallery.npy", gallery)
        expected[team] = reference_map(truth, query, gallery)[0]
    (subs / "team-c" / "bad").mkdir(parents=True)
    np.save(subs / "team-c" / "bad" / "query.npy", np.ones((n_query, 3), np.float32))  # wrong dims, no gallery
    done = job("score-submissions.sh", tmp_path / "truth.zarr", subs, tmp_path / "scored")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "scored 2 submission(s), 0 already scored, exit 2" in done.stdout
    board = pq.read_table(tmp_path / "scored" / "leaderboard.parquet").to_pylist()
    assert sorted(r["team"] for r in board) == ["team-a", "team-b"]
    for row in board:
        assert abs(row["score"] - expected[row["team"]]) < 1e-6
    again = job("score-submissions.sh", tmp_path / "truth.zarr", subs, tmp_path / "scored")
    assert "scored 0 submission(s), 2 already scored" in again.stdout
    assert len(pq.read_table(tmp_path / "scored" / "leaderboard.parquet")) == 2


def test_job_scripts_say_how_to_call_them():
    for script in ("batch-evaluate.sh", "score-submissions.sh"):
        done = job(script)
        assert done.returncode == 2 and done.stderr.startswith("usage:"), done.stderr
