"""Hostile submissions to ``evalcore score-service``: each a ``rejected`` row with its reason, nothing written
outside ``--out``, and the service goes on to score the good submission beside them."""
import os
import pickle
from pathlib import Path

import numpy as np
import pytest
from challenge_data import make_truth, reference_split_maps, save, submission

from evalcore.cli.main import main
from evalcore.io import ledger as lg
from evalcore.jobs import service as svc


def tree(root: Path, skip: Path) -> dict:
    """Every entry under ``root`` but ``skip``: (kind, size, mtime_ns), links not followed."""
    out = {}
    for folder, dirs, files in os.walk(root):
        if Path(folder) == skip or skip in Path(folder).parents:
            continue
        for name in dirs + files:
            if Path(folder) / name == skip:
                continue
            st = (Path(folder) / name).lstat()
            out[str(Path(folder) / name)] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return out


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    truth = make_truth(root / "truth.zarr")
    q, g = submission(truth)
    subs = root / "subs"
    save(subs / "good" / "1", q, g)
    secret = root / "secret"
    secret.mkdir()
    np.save(secret / "gallery.npy", g)
    np.save(secret / "query.npy", q)
    # a symbolic link to a file outside the submission
    sym = save(subs / "sym" / "1", q, g)
    (sym / "gallery.npy").unlink()
    (sym / "gallery.npy").symlink_to(secret / "gallery.npy")
    # the whole submission a link to a folder outside
    (subs / "symdir").mkdir()
    (subs / "symdir" / "1").symlink_to(secret)
    # a hard link to a file outside
    hard = save(subs / "hard" / "1", q, g)
    (hard / "query.npy").unlink()
    os.link(secret / "query.npy", hard / "query.npy")
    # a team name with path components
    save(subs / "evil\\..\\x" / "1", q, g)
    # files that are not what their names say: text, and a pickled object array
    text = save(subs / "text" / "1", q, g)
    (text / "query.npy").write_text("definitely not numpy\n")
    pick = save(subs / "pickle" / "1", q, g)
    with open(pick / "gallery.npy", "wb") as fh:
        np.lib.format.write_array(fh, np.array([{"a": 1}] * 3, dtype=object), allow_pickle=True)
    with open(pick / "payload.pkl", "wb") as fh:
        pickle.dump({"x": 1}, fh)
    # a submission "folder" that is a file, and a team "folder" that is a file
    (subs / "file").mkdir()
    (subs / "file" / "1").write_bytes(b"PK\x03\x04 a zip, say")
    (subs / "teamfile").write_text("")
    # a FIFO: reading it would block the service
    fifo = save(subs / "fifo" / "1", q, g)
    os.mkfifo(fifo / "extra")
    before = tree(root, root / "scored")
    assert main(["score-service", str(subs), "--truth", str(root / "truth.zarr"), "--out", str(root / "scored"),
                 "--once"]) == 0
    rows = {(e.team, e.submission): e for e in lg.read_ledger(root / "scored" / "organizer" / "ledger.parquet")}
    return root, truth, q, g, rows, before


@pytest.mark.parametrize("key, words", [
    (("sym", "1"), "symbolic link"), (("symdir", "1"), "symbolic link"), (("hard", "1"), "hard link"),
    (("evil\\..\\x", "1"), "path components"), (("text", "1"), "not a .npy file"),
    (("pickle", "1"), "Python objects"), (("file", "1"), "is a file, not a folder"),
    (("teamfile", "-"), "not a folder"), (("fifo", "1"), "not a regular file")])
def test_each_hostile_submission_is_rejected_with_its_reason(hostile, key, words):
    rows = hostile[4]
    assert rows[key].status == "rejected"
    assert words in rows[key].reason and "\n" not in rows[key].reason


def test_the_good_submission_beside_them_is_scored(hostile):
    root, truth, q, g, rows, before = hostile
    assert rows["good", "1"].status == "scored"
    assert rows["good", "1"].split_map("public") == pytest.approx(reference_split_maps(truth, q, g)["public"])
    assert len(rows) == 10


def test_nothing_outside_out_was_written(hostile):
    root, truth, q, g, rows, before = hostile
    assert tree(root, root / "scored") == before


class WriterMeanwhile(svc.Scorer):
    """The real scorer, with a participant still writing a file into the submission while it is checked."""

    def ask(self, request, timeout):
        if request[0] == "check":
            (Path(request[1]) / "gallery.npy").write_bytes((Path(request[1]) / "gallery.npy").read_bytes())
            os.utime(Path(request[1]) / "gallery.npy", ns=(1, 1))
        return super().ask(request, timeout)


def test_a_submission_written_while_read_is_rejected(tmp_path):
    truth = make_truth(tmp_path / "truth.zarr")
    save(tmp_path / "subs" / "a" / "1", *submission(truth))
    config = svc.ServiceConfig(tmp_path / "subs", str(tmp_path / "truth.zarr"), tmp_path / "out", once=True)
    scorer = WriterMeanwhile(config)
    scorer.start()
    try:
        e = svc.decide(config, scorer, svc.Candidate("a", "1", tmp_path / "subs" / "a" / "1"), [])
    finally:
        scorer.stop()
    assert e.status == "rejected" and "changed while it was read" in e.reason
