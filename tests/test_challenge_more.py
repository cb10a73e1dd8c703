"""The scoring service: crash loops (a submission that kills the scorer every time) and the service on a real
LocalCluster of 2 processes, against tests/challenge_data.py's brute force and the in-process service."""
import json
from pathlib import Path

import pytest
from challenge_data import make_truth, reference_split_maps, save, submission

from evalcore.cli.main import main
from evalcore.io import ledger as lg

#: imported by every Python process started with its folder on PYTHONPATH: in the scorer process, scoring a
#: submission whose path holds "crash" kills that process with SIGKILL (as the kernel's OOM killer would),
#: after noting the attempt in the file EVALCORE_TEST_CRASHES names
PLANTED = '''
import os, signal

def _plant():
    from evalcore.jobs import service
    real = service.score_checked

    def score_checked(truth, sub, fingerprint, *args, **kwargs):
        if "crash" in str(sub.path):
            with open(os.environ["EVALCORE_TEST_CRASHES"], "a") as fh:
                fh.write(f"{os.getpid()}\\n")
            os.kill(os.getpid(), signal.SIGKILL)
        return real(truth, sub, fingerprint, *args, **kwargs)

    service.score_checked = score_checked

_plant()
'''


def ledger(out) -> dict:
    return {(e.team, e.submission): e for e in lg.read_ledger(Path(out) / "organizer" / "ledger.parquet")}


def run_once(subs, truth, out, *more):
    return main(["score-service", str(subs), "--truth", str(truth), "--out", str(out), "--once", *map(str, more)])


@pytest.mark.slow
def test_a_submission_that_kills_the_scorer_is_retried_then_failed(tmp_path, monkeypatch):
    truth = make_truth(tmp_path / "truth.zarr")
    subs = {("team-a", "crash-1"): submission(truth, seed=1, noise=0.5),
            ("team-a", "good"): submission(truth, seed=2, noise=1.0),
            ("team-b", "fine"): submission(truth, seed=3, noise=2.0)}
    for (team, name), (q, g) in subs.items():
        save(tmp_path / "subs" / team / name, q, g)
    planted = tmp_path / "planted"
    planted.mkdir()
    (planted / "sitecustomize.py").write_text(PLANTED)
    crashes = tmp_path / "crashes.txt"
    monkeypatch.setenv("PYTHONPATH", str(planted))
    monkeypatch.setenv("EVALCORE_TEST_CRASHES", str(crashes))
    assert run_once(tmp_path / "subs", tmp_path / "truth.zarr", tmp_path / "out", "--retries", 2) == 0
    rows = ledger(tmp_path / "out")
    bad = rows["team-a", "crash-1"]
    assert bad.status == "failed"
    assert "died on it 3 time(s)" in bad.reason and "SIGKILL" in bad.reason and "--retries 2" in bad.reason
    pids = crashes.read_text().split()
    assert len(pids) == 3 and len(set(pids)) == 3  # the first try and 2 retries, each in a fresh scorer
    for key in (("team-a", "good"), ("team-b", "fine")):  # the service went on
        want = reference_split_maps(truth, *subs[key])
        assert rows[key].status == "scored"
        assert rows[key].split_map("public") == pytest.approx(want["public"], abs=1e-9)
    board = json.loads((tmp_path / "out" / "results" / "main" / bad.submission_id / "result.json").read_text())
    assert board["status"] == "failed"
    # a restart (the ledger lost, as if the service had died with the scorer) does not try it again
    (tmp_path / "out" / "organizer" / "ledger.parquet").unlink()
    assert run_once(tmp_path / "subs", tmp_path / "truth.zarr", tmp_path / "out", "--retries", 2) == 0
    assert len(crashes.read_text().split()) == 3
    assert ledger(tmp_path / "out")["team-a", "crash-1"].status == "failed"


@pytest.mark.slow
def test_service_on_a_local_cluster_of_two_processes_equals_the_in_process_service(tmp_path):
    truth = make_truth(tmp_path / "truth.zarr")
    subs = {("team-a", "one"): submission(truth, seed=4, noise=0.5),
            ("team-b", "two"): submission(truth, seed=5, noise=1.5),
            ("team-c", "three"): submission(truth, seed=6, noise=3.0)}
    for (team, name), (q, g) in subs.items():
        save(tmp_path / "subs" / team / name, q, g)
    assert run_once(tmp_path / "subs", tmp_path / "truth.zarr", tmp_path / "here") == 0
    assert run_once(tmp_path / "subs", tmp_path / "truth.zarr", tmp_path / "cluster", "--workers", 2) == 0
    here, cluster = ledger(tmp_path / "here"), ledger(tmp_path / "cluster")
    assert set(here) == set(cluster) == set(subs)
    for key, (q, g) in subs.items():
        want = reference_split_maps(truth, q, g)
        assert cluster[key].status == here[key].status == "scored"
        assert cluster[key].map == here[key].map and cluster[key].split_maps == here[key].split_maps
        assert cluster[key].map == pytest.approx(want["all"], abs=1e-9)
    # the organizer's per-query reports are the same too
    import pyarrow.parquet as pq
    for key in subs:
        sid = here[key].submission_id
        a = pq.read_table(tmp_path / "here" / "organizer" / "main" / sid / "per_query.parquet")
        b = pq.read_table(tmp_path / "cluster" / "organizer" / "main" / sid / "per_query.parquet")
        assert a.select(["query", "ap", "split"]).equals(b.select(["query", "ap", "split"]))


def test_a_scorer_that_dies_while_starting_is_one_clear_line(tmp_path, monkeypatch, capsys):
    make_truth(tmp_path / "truth.zarr")
    (tmp_path / "subs").mkdir()
    planted = tmp_path / "planted"
    planted.mkdir()
    (planted / "sitecustomize.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    monkeypatch.setenv("PYTHONPATH", str(planted))  # only new processes import it: here, the scorer
    assert run_once(tmp_path / "subs", tmp_path / "truth.zarr", tmp_path / "out") == 1
    err = capsys.readouterr().err
    assert "the scorer process ended (signal 9 (SIGKILL)) while loading the truth and starting" in err
    assert "Traceback" not in err


def test_a_truth_the_scorer_refuses_is_that_error_with_its_class_and_fields(tmp_path, monkeypatch, capsys):
    """The scorer loads the truth again in its own process: an InputError there crosses to the service as itself
    (pickled with its fields), not as text the service would sort by its first words."""
    truth = make_truth(tmp_path / "truth.zarr")
    save(tmp_path / "subs" / "team-a" / "1", *submission(truth))
    planted = tmp_path / "planted"
    planted.mkdir()
    (planted / "sitecustomize.py").write_text(
        "from evalcore.errors import ArrayError\nfrom evalcore.jobs import service\n\n"
        "def load_truth(path):\n    raise ArrayError('gallery/emb', 'rows 3, 7 are planted', rows=[3, 7])\n\n"
        "service.load_truth = load_truth\n")
    monkeypatch.setenv("PYTHONPATH", str(planted))  # only new processes import it: here, the scorer
    from evalcore.errors import ArrayError
    from evalcore.jobs import service

    scorer = service.Scorer(service.ServiceConfig(tmp_path / "subs", str(tmp_path / "truth.zarr"), tmp_path / "o",
                                                  timeout=60.0, once=True))
    try:
        with pytest.raises(ArrayError) as caught:
            scorer.start()
    finally:
        scorer.stop()
    assert caught.value.array == "gallery/emb" and caught.value.rows == [3, 7]
    assert caught.value.message == "gallery/emb: rows 3, 7 are planted"
    assert run_once(tmp_path / "subs", tmp_path / "truth.zarr", tmp_path / "out") == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-1] == "evalcore: error: gallery/emb: rows 3, 7 are planted", lines
