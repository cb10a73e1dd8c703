"""The platform adapters, called as the platforms' workers call them, against the brute-force mAP:
EvalAI's ``evaluate(annotation, submission, phase_codename, submission_metadata=...)`` and Codabench's
``python3 score.py INPUT OUTPUT`` with INPUT/ref and INPUT/res."""
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from challenge_data import make_truth, reference_split_maps, save, submission

from evalcore.challenge import evalai
from evalcore.errors import InputError

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("adapters")
    truth = make_truth(root / "truth.zarr")
    q, g = submission(truth)
    return root, truth, q, g


def test_evalai_returns_every_split_in_its_layout(data, tmp_path):
    root, truth, q, g = data
    np.savez(tmp_path / "upload.npz", query=q, gallery=g)
    # as EvalAI's submission worker calls the challenge's evaluation script
    out = evalai.evaluate(str(root / "truth.zarr"), str(tmp_path / "upload.npz"), "test",
                          submission_metadata={"status": "running", "participant_team_name": "a"})
    want = reference_split_maps(truth, q, g)
    assert [list(r) for r in out["result"]] == [["public"], ["private"]]
    assert out["result"][0]["public"]["mAP"] == pytest.approx(want["public"])
    assert out["result"][1]["private"]["mAP"] == pytest.approx(want["private"])
    assert out["submission_result"] == out["result"][0]["public"]


def test_evalai_takes_a_zip_with_a_folder_and_split_codenames(data, tmp_path):
    root, truth, q, g = data
    save(tmp_path / "run", q, g, ready=False)
    with zipfile.ZipFile(tmp_path / "upload.zip", "w") as zf:
        for name in ("query.npy", "gallery.npy"):
            zf.write(tmp_path / "run" / name, f"run/{name}")
    out = evalai.evaluate(root / "truth.zarr", tmp_path / "upload.zip", "dev",
                          split_codenames={"public": "test_public", "private": "test_private"})
    assert [list(r)[0] for r in out["result"]] == ["test_public", "test_private"]
    assert out["submission_result"]["mAP"] == pytest.approx(reference_split_maps(truth, q, g)["public"])


def test_evalai_refuses_a_bad_upload_with_one_line(data, tmp_path):
    root, truth, q, g = data
    np.savez(tmp_path / "upload.npz", query=q[:-2], gallery=g)
    with pytest.raises(InputError, match="query.npy: 38 rows"):
        evalai.evaluate(str(root / "truth.zarr"), str(tmp_path / "upload.npz"), "test")
    (tmp_path / "notzip.zip").write_text("hello")
    with pytest.raises(InputError, match="not a folder, a .zip or a .npz"):
        evalai.evaluate(str(root / "truth.zarr"), str(tmp_path / "notzip.zip"), "test")


def codabench(tmp_path, root, fill_res) -> subprocess.CompletedProcess:
    shutil.copytree(root / "truth.zarr", tmp_path / "input" / "ref" / "truth.zarr")
    (tmp_path / "input" / "res").mkdir(parents=True)
    fill_res(tmp_path / "input" / "res")
    (tmp_path / "output").mkdir()
    # as the Codabench compute worker runs metadata.yaml's command
    return subprocess.run([sys.executable, str(REPO / "jobs" / "codabench" / "score.py"),
                           str(tmp_path / "input"), str(tmp_path / "output")], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "EVALCORE_DEBUG": ""})


def test_codabench_scoring_program_writes_public_scores_only(data, tmp_path):
    root, truth, q, g = data
    r = codabench(tmp_path, root, lambda res: save(res, q, g, ready=False))
    assert r.returncode == 0, r.stderr
    want = reference_split_maps(truth, q, g)
    scores = json.loads((tmp_path / "output" / "scores.json").read_text())
    assert scores == {"map_public": pytest.approx(want["public"])}
    text = (tmp_path / "output" / "scores.txt").read_text()
    assert text.startswith("map_public: ") and float(text.split(": ")[1]) == pytest.approx(want["public"])
    assert repr(want["private"]) not in text and "private" not in text


def test_codabench_refuses_a_bad_submission_with_exit_2(data, tmp_path):
    root, truth, q, g = data
    r = codabench(tmp_path, root, lambda res: save(res, q, g * 2, ready=False))
    assert r.returncode == 2 and "gallery.npy" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "output" / "scores.json").exists()
