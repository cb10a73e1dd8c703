"""Hostile participants and careless organizers against challenge scoring (issue 35, findings 5-8, 10, 11 and
``score-service --timeout inf``): one submission never harms another team nor the service, archives are
bounded before they are unpacked, nothing evalcore did not write is removed, and a participant sees only the
public split. Scores are checked against the brute-force mAP of ``challenge_data``."""
import io
import json
import os
import resource
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from challenge_data import make_truth, reference_split_maps, save, submission

from evalcore.challenge import evalai
from evalcore.cli.main import main
from evalcore.errors import InputError
from evalcore.io import challenge as ch
from evalcore.io import ledger as lg
from evalcore.jobs import service as svc

REPO = Path(__file__).resolve().parents[1]
#: the command line in a process of its own
CLI = "import sys; from evalcore.cli.main import main; sys.exit(main(sys.argv[1:]))"
TESTS = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile_challenge")
    truth = make_truth(root / "truth.zarr")
    q, g = submission(truth)
    return root, truth, q, g


def service(subs, truth, out, *more) -> int:
    return main(["score-service", str(subs), "--truth", str(truth), "--out", str(out), "--once", *map(str, more)])


def rows_of(out) -> dict:
    return {(e.team, e.submission): e for e in lg.read_ledger(Path(out) / "organizer" / "ledger.parquet")}


def nest(folder: Path, levels: int) -> None:
    """``folder/d/d/.../d``, ``levels`` deep, made through directory descriptors (no path gets too long)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        for _ in range(levels):
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- 5. score shows the public split only


def test_score_with_a_split_truth_shows_the_public_split_alone(data, tmp_path, capsys):
    root, truth, q, g = data
    save(tmp_path / "sub", q, g, ready=False)
    assert main(["score", str(tmp_path / "sub"), "--truth", str(root / "truth.zarr"), "--out",
                 str(tmp_path / "r"), "--team", "a"]) == 0
    printed = capsys.readouterr().out
    want = reference_split_maps(truth, q, g)
    n_public = int(np.sum(truth["query/split"] == "public"))
    record = json.loads((tmp_path / "r" / "result.json").read_text())
    assert record["score"] == pytest.approx(want["public"])
    assert (record["n_queries"], record["n_evaluated"]) == (n_public, n_public)
    board = pq.read_table(tmp_path / "leaderboard.parquet").to_pylist()
    assert board[0]["score"] == pytest.approx(want["public"]) and board[0]["n_queries"] == n_public
    # neither the all-queries mAP nor the private one reaches the participant
    for hidden in (want["all"], want["private"]):
        assert f"{hidden:.6f}" not in printed and f"{hidden:.6f}" not in json.dumps(record)
    assert f"{want['public']:.6f}" in printed


# --------------------------------------------------------------------------- 6. a deep or huge tree


@pytest.fixture
def deep_tmp(tmp_path):
    """``tmp_path``, emptied with ``rm -rf`` afterwards: pytest's own clean-up of old temporary folders
    (shutil.rmtree, recursive) would fail on a tree 1,100 levels deep, in every later session."""
    yield tmp_path
    subprocess.run(["rm", "-rf", str(tmp_path)], check=True, timeout=60)


def test_a_deeply_nested_submission_is_rejected_and_the_service_goes_on(data, deep_tmp):
    root, truth, q, g = data
    tmp_path = deep_tmp
    nest(save(tmp_path / "subs" / "deep" / "1", q, g), 1100)
    save(tmp_path / "subs" / "later" / "1", q[::-1].copy(), g)
    save(tmp_path / "subs" / "good" / "1", q, g)
    assert service(tmp_path / "subs", root / "truth.zarr", tmp_path / "out") == 0
    rows = rows_of(tmp_path / "out")
    assert rows["deep", "1"].status == "rejected" and "levels deep" in rows["deep", "1"].reason
    assert rows["good", "1"].status == "scored"
    assert rows["good", "1"].split_map("public") == pytest.approx(reference_split_maps(truth, q, g)["public"])
    assert rows["later", "1"].status == "scored"


def test_a_submission_with_too_many_entries_is_rejected(data, tmp_path, monkeypatch):
    root, truth, q, g = data
    monkeypatch.setattr(svc, "MAX_ENTRIES", 40, raising=False)
    many = save(tmp_path / "subs" / "many" / "1", q, g)
    for i in range(60):
        (many / f"extra{i}.txt").write_text("")
    save(tmp_path / "subs" / "good" / "1", q, g)
    assert service(tmp_path / "subs", root / "truth.zarr", tmp_path / "out") == 0
    rows = rows_of(tmp_path / "out")
    assert rows["many", "1"].status == "rejected" and "more than 40 files and folders" in rows["many", "1"].reason
    assert rows["good", "1"].status == "scored"


# --------------------------------------------------------------------------- 7. hard links into another team


@pytest.mark.skipif(os.geteuid() != 0, reason="the teams' own users are made with chown, which needs root")
@pytest.mark.parametrize("victim, linker", [("alpha", "zulu"), ("zulu", "alpha")])
def test_a_hard_link_to_another_teams_file_harms_only_the_linker(data, tmp_path, victim, linker):
    """Each team writes as its own user (uids 4001, 4002); the linker hard-links the victim's query.npy into its
    folder. Whichever is decided first, the victim is scored and the linker rejected."""
    root, truth, q, g = data
    subs = tmp_path / "subs"
    mine = save(subs / victim / "1", q, g)
    theirs = save(subs / linker / "1", q, g)
    (theirs / "query.npy").unlink()
    os.link(mine / "query.npy", theirs / "query.npy")
    for team, uid in ((victim, 4001), (linker, 4002)):
        for folder, _dirs, files in os.walk(subs / team):
            os.chown(folder, uid, uid)
            for name in files:
                if not (team == linker and name == "query.npy"):  # the link stays the victim's file
                    os.chown(Path(folder) / name, uid, uid)
    assert (theirs / "query.npy").stat().st_uid == 4001
    assert service(subs, root / "truth.zarr", tmp_path / "out") == 0
    rows = rows_of(tmp_path / "out")
    assert rows[victim, "1"].status == "scored", rows[victim, "1"].reason
    assert rows[victim, "1"].split_map("public") == pytest.approx(reference_split_maps(truth, q, g)["public"])
    assert rows[linker, "1"].status == "rejected" and "hard link" in rows[linker, "1"].reason


def test_two_names_of_one_file_inside_one_submission_are_accepted(data, tmp_path):
    root, truth, q, g = data
    sub = save(tmp_path / "subs" / "a" / "1", q, g)
    os.link(sub / "query.npy", sub / "copy-of-query.npy")
    assert service(tmp_path / "subs", root / "truth.zarr", tmp_path / "out") == 0
    assert rows_of(tmp_path / "out")["a", "1"].status == "scored"


# --------------------------------------------------------------------------- 8. archives given to the adapters


def zip_bytes(members: dict, compression=zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as zf:
        for name, payload in members.items():
            zf.writestr(name, payload)
    return buf.getvalue()


def npy_bytes(array) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


BOMB_BYTES = 64 << 20


def write_bomb(path: Path, q) -> None:
    """A small .zip whose gallery.npy unpacks to 64 MiB of zeros (a valid .npy header first)."""
    header = npy_bytes(np.zeros((BOMB_BYTES // 64, 16), np.float32))[:128]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("query.npy", npy_bytes(q))
        with zf.open("gallery.npy", "w", force_zip64=True) as fh:
            fh.write(header)
            block = bytes(1 << 20)
            for _ in range(BOMB_BYTES >> 20):
                fh.write(block)


BOUNDED_EVALAI = """
import resource, sys
resource.setrlimit(resource.RLIMIT_FSIZE, (16 << 20, 16 << 20))  # no file of more than 16 MiB may be written
from evalcore.challenge import evalai
from evalcore.errors import InputError
try:
    evalai.evaluate(sys.argv[1], sys.argv[2], "test")
except InputError as exc:
    print("InputError:", exc)
"""


def test_an_archive_bomb_is_refused_before_it_is_unpacked_evalai(data, tmp_path):
    root, truth, q, g = data
    write_bomb(tmp_path / "bomb.zip", q)
    assert (tmp_path / "bomb.zip").stat().st_size < 1 << 20
    # as EvalAI's worker calls the script, in a process that may not write a file over 16 MiB
    r = subprocess.run([sys.executable, "-c", BOUNDED_EVALAI, str(root / "truth.zarr"), str(tmp_path / "bomb.zip")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith("InputError: submission bomb.zip") and "bytes" in r.stdout


def codabench(tmp_path, truth_dir: Path, upload: Path, limit_bytes: int | None = None):
    shutil.copytree(truth_dir, tmp_path / "input" / "ref" / "truth.zarr")
    (tmp_path / "input" / "res").mkdir(parents=True)
    shutil.copy(upload, tmp_path / "input" / "res" / upload.name)
    (tmp_path / "output").mkdir()

    def bounded():
        if limit_bytes is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    # as the Codabench compute worker runs metadata.yaml's command
    return subprocess.run([sys.executable, str(REPO / "jobs" / "codabench" / "score.py"), str(tmp_path / "input"),
                           str(tmp_path / "output")], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "EVALCORE_DEBUG": ""}, preexec_fn=bounded)


def test_an_archive_bomb_is_refused_before_it_is_unpacked_codabench(data, tmp_path):
    root, truth, q, g = data
    write_bomb(tmp_path / "bomb.zip", q)
    r = codabench(tmp_path, root / "truth.zarr", tmp_path / "bomb.zip", limit_bytes=16 << 20)
    assert r.returncode == 2, r.stderr[-2000:]
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("evalcore: error: submission bomb.zip")
    assert not list((tmp_path / "output").iterdir())


def test_an_archive_listing_too_many_members_is_refused(data, tmp_path):
    root, truth, q, g = data
    members = {"query.npy": npy_bytes(q), "gallery.npy": npy_bytes(g)}
    members.update({f"junk/{i}": b"" for i in range(1500)})
    (tmp_path / "many.zip").write_bytes(zip_bytes(members))
    with pytest.raises(InputError, match=r"many.zip: lists 1502 members"):
        evalai.evaluate(str(root / "truth.zarr"), str(tmp_path / "many.zip"), "test")


def damage(kind: str, q, g) -> bytes:
    """A .zip of the two arrays, damaged in one way."""
    members = {"query.npy": npy_bytes(q), "gallery.npy": npy_bytes(g)}
    if kind == "crc":  # stored: flip one byte of gallery.npy's data, past its header
        raw = bytearray(zip_bytes(members, zipfile.ZIP_STORED))
        at = raw.index(members["gallery.npy"][:200]) + 500
        raw[at] ^= 0xFF
        return bytes(raw)
    raw = bytearray(zip_bytes(members))
    with zipfile.ZipFile(io.BytesIO(bytes(raw))) as zf:
        info = zf.getinfo("gallery.npy")
    local = info.header_offset
    name_len, extra_len = int.from_bytes(raw[local + 26:local + 28], "little"), \
        int.from_bytes(raw[local + 28:local + 30], "little")
    data_at = local + 30 + name_len + extra_len
    central = raw.index(b"PK\x01\x02", raw.index(b"PK\x01\x02") + 4)  # the second entry: gallery.npy's
    if kind == "deflate":  # garbage inside the compressed stream
        for i in range(data_at + 10, data_at + 60):
            raw[i] = 0xFF
    elif kind == "encrypted":  # the "encrypted" flag bit, in both headers
        raw[local + 6] |= 0x01
        raw[central + 8] |= 0x01
    elif kind == "method":  # compression method 99, unknown to zipfile
        raw[local + 8:local + 10] = (99).to_bytes(2, "little")
        raw[central + 10:central + 12] = (99).to_bytes(2, "little")
    return bytes(raw)


@pytest.mark.parametrize("kind", ["crc", "deflate", "encrypted", "method"])
def test_a_damaged_archive_is_one_input_error_naming_archive_and_member_evalai(data, tmp_path, kind):
    root, truth, q, g = data
    (tmp_path / "up.zip").write_bytes(damage(kind, q, g))
    with pytest.raises(InputError) as caught:
        evalai.evaluate(str(root / "truth.zarr"), str(tmp_path / "up.zip"), "test")
    text = str(caught.value)
    assert "up.zip" in text and "gallery.npy" in text and "\n" not in text
    assert str(tmp_path) not in text


@pytest.mark.parametrize("kind", ["crc", "encrypted"])
def test_a_damaged_archive_is_exit_2_and_one_line_codabench(data, tmp_path, kind):
    root, truth, q, g = data
    (tmp_path / "up.npz").write_bytes(damage(kind, q, g))
    r = codabench(tmp_path, root / "truth.zarr", tmp_path / "up.npz")
    assert r.returncode == 2, r.stderr[-2000:]
    assert r.stderr.count("\n") == 1 and "up.npz" in r.stderr and "gallery.npy" in r.stderr
    assert str(tmp_path) not in r.stderr
    assert not list((tmp_path / "output").iterdir())


# --------------------------------------------------------------------------- 10. fingerprint and public reasons


def test_big_endian_numbers_have_the_little_endian_fingerprint_and_are_not_scored_again(data, tmp_path):
    root, truth, q, g = data
    save(tmp_path / "subs" / "a" / "1", q, g)
    save(tmp_path / "subs" / "a" / "2", q.astype(">f4"), g.astype(">f4"))
    assert np.load(tmp_path / "subs" / "a" / "2" / "query.npy").dtype.str == ">f4"
    assert service(tmp_path / "subs", root / "truth.zarr", tmp_path / "out") == 0
    rows = rows_of(tmp_path / "out")
    assert rows["a", "1"].status == "scored"
    assert rows["a", "2"].status == "rejected" and "same fingerprint" in rows["a", "2"].reason
    assert rows["a", "2"].fingerprint == rows["a", "1"].fingerprint


def test_public_reasons_carry_no_server_path(data, tmp_path):
    root, truth, q, g = data
    missing = save(tmp_path / "subs" / "a" / "1", q, g)
    (missing / "gallery.npy").unlink()
    outside = tmp_path / "secret.npy"
    np.save(outside, g)
    linked = save(tmp_path / "subs" / "b" / "1", q, g)
    (linked / "gallery.npy").unlink()
    (linked / "gallery.npy").symlink_to(outside)
    assert service(tmp_path / "subs", root / "truth.zarr", tmp_path / "out") == 0
    rows = rows_of(tmp_path / "out")
    assert rows["a", "1"].status == rows["b", "1"].status == "rejected"
    board = pq.read_table(tmp_path / "out" / "leaderboard-main.parquet").to_pylist()
    page = (tmp_path / "out" / "leaderboard-main.html").read_text()
    results = [(tmp_path / "out" / "results" / "main" / e.submission_id / "result.json").read_text()
               for e in rows.values()]
    assert {r["team"] for r in board} == {"a", "b"}
    for text in [r["reason"] for r in board] + [page] + results:
        assert str(tmp_path) not in text and "/tmp" not in text
    assert any("gallery.npy" in r["reason"] for r in board)


# --------------------------------------------------------------------------- 11. --out/.work


def test_an_unmarked_work_folder_is_refused_and_kept(data, tmp_path, capsys):
    root, truth, q, g = data
    save(tmp_path / "subs" / "a" / "1", q, g)
    (tmp_path / "out" / ".work").mkdir(parents=True)
    (tmp_path / "out" / ".work" / "notes.txt").write_text("mine")
    assert service(tmp_path / "subs", root / "truth.zarr", tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and ".work" in err
    assert (tmp_path / "out" / ".work" / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [".work"]  # nothing written


def test_a_marked_work_folder_loses_only_the_scorers_leftovers(data, tmp_path):
    root, truth, q, g = data
    save(tmp_path / "subs" / "a" / "1", q, g)
    work = tmp_path / "out" / ".work"
    work.mkdir(parents=True)
    (work / ".evalcore-work").write_text("")  # what a scorer that spilled a big submission leaves
    (work / "spill-x1y2").mkdir()
    (work / "spill-x1y2" / "submission.zarr").write_text("")
    (work / "notes.txt").write_text("mine")
    assert service(tmp_path / "subs", root / "truth.zarr", tmp_path / "out") == 0
    assert not (work / "spill-x1y2").exists()
    assert (work / "notes.txt").read_text() == "mine"
    assert rows_of(tmp_path / "out")["a", "1"].status == "scored"


# --------------------------------------------------------------------------- 15. --timeout and the waits


@pytest.mark.parametrize("option, value", [("--timeout", "inf"), ("--timeout", "1e300"), ("--poll", "nan"),
                                           ("--settle", "inf"), ("--poll", "inf")])
def test_seconds_options_are_checked_before_anything_is_written(data, tmp_path, option, value):
    root, truth, q, g = data
    save(tmp_path / "subs" / "a" / "1", q, g)
    r = subprocess.run([sys.executable, "-c", CLI, "score-service", str(tmp_path / "subs"), "--truth",
                        str(root / "truth.zarr"), "--out", str(tmp_path / "out"), "--once", option, value],
                       capture_output=True, text=True, timeout=120, env={**os.environ, "EVALCORE_DEBUG": ""})
    assert r.returncode == 2, r.stderr[-2000:]
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(f"evalcore: error: {option}")
    assert not (tmp_path / "out").exists()


def test_fingerprint_helper_matches_across_byte_orders(data, tmp_path):
    root, truth, q, g = data
    fps = []
    for order in ("<f4", ">f4"):
        save(tmp_path / order.replace("<", "le").replace(">", "be"), q.astype(order), g.astype(order), ready=False)
        sub = ch.open_submission(tmp_path / order.replace("<", "le").replace(">", "be"))
        fps.append(ch.check_submission(sub, len(q), len(g), q.shape[1]))
    assert fps[0] == fps[1]


def test_the_work_folder_the_scorer_makes_is_marked_and_accepted_at_the_next_start(data, tmp_path):
    root, truth, q, g = data
    save(tmp_path / "subs" / "a" / "1", q, g)
    work = svc.make_work(tmp_path / "out" / ".work")  # as the scorer makes it for a big submission
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [".work"]
    (work / "spill-left-by-a-kill").mkdir()
    assert service(tmp_path / "subs", root / "truth.zarr", tmp_path / "out") == 0
    assert work.is_dir() and not (work / "spill-left-by-a-kill").exists()


def test_a_truth_that_does_not_open_is_one_line_before_anything_is_written(data, tmp_path):
    root, truth, q, g = data
    save(tmp_path / "subs" / "a" / "1", q, g)
    r = subprocess.run([sys.executable, "-c", CLI, "score-service", str(tmp_path / "subs"), "--truth",
                        str(tmp_path / "none.zarr"), "--out", str(tmp_path / "out"), "--once"],
                       capture_output=True, text=True, timeout=120, env={**os.environ, "EVALCORE_DEBUG": ""})
    assert r.returncode == 2, r.stderr[-2000:]
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("evalcore: error: --truth")
    assert not (tmp_path / "out").exists()


def test_a_folder_the_service_cannot_list_is_that_submissions_rejection(data, tmp_path, monkeypatch):
    """A team makes a folder of its submission unreadable to the service (faked: the tests run as root)."""
    root, truth, q, g = data
    locked = save(tmp_path / "subs" / "a" / "1", q, g) / "locked"
    locked.mkdir()
    save(tmp_path / "subs" / "b" / "1", q, g)
    real = os.scandir

    def scandir(path="."):
        if Path(path) == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    assert service(tmp_path / "subs", root / "truth.zarr", tmp_path / "out") == 0
    rows = rows_of(tmp_path / "out")
    assert rows["a", "1"].status == "rejected" and "locked: cannot be listed" in rows["a", "1"].reason
    assert rows["b", "1"].status == "scored"
