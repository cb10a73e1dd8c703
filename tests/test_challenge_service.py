"""``evalcore score-service`` and ``evalcore leaderboard``: splits, statuses, duplicates, the daily limit,
timeouts, against the brute-force mAP of tests/challenge_data.py."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from challenge_data import make_truth, reference_split_maps, save, submission

from evalcore.cli.main import main
from evalcore.io import ledger as lg

CLI = [str(Path(sys.executable).with_name("evalcore"))]


def service(subs, truth, out, *more):
    return main(["score-service", str(subs), "--truth", str(truth), "--out", str(out), "--once", *map(str, more)])


def ledger(out) -> dict:
    return {(e.team, e.submission): e for e in lg.read_ledger(Path(out) / "organizer" / "ledger.parquet")}


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    """Three teams (one submitting twice) scored by one pass of the service."""
    root = tmp_path_factory.mktemp("svc")
    truth = make_truth(root / "truth.zarr")
    subs = {("team-a", "run-1"): submission(truth, seed=1, noise=0.5),
            ("team-a", "run-2"): submission(truth, seed=5, noise=2.0),
            ("team-b", "first"): submission(truth, seed=2, noise=1.5),
            ("team-c", "x"): submission(truth, seed=3, noise=4.0)}
    for (team, name), (q, g) in subs.items():
        save(root / "subs" / team / name, q, g)
    assert service(root / "subs", root / "truth.zarr", root / "scored") == 0
    return root, truth, subs


def test_every_split_matches_brute_force(scored):
    root, truth, subs = scored
    rows = ledger(root / "scored")
    assert set(rows) == set(subs)
    for key, (q, g) in subs.items():
        want = reference_split_maps(truth, q, g)
        e = rows[key]
        assert e.status == "scored" and e.reason == ""
        assert dict(e.split_maps) == pytest.approx({"private": want["private"], "public": want["public"]}, abs=1e-9)
        assert e.map == pytest.approx(want["all"], abs=1e-9)


def test_participant_files_never_hold_a_private_number(scored):
    root, truth, subs = scored
    private, public = [], []
    for q, g in subs.values():
        want = reference_split_maps(truth, q, g)
        private += [want["private"], want["all"]]
        public.append(want["public"])
    visible = [p for p in (root / "scored").rglob("*") if p.is_file() and "organizer" not in p.relative_to(
        root / "scored").parts]
    assert any(p.name == "result.json" for p in visible) and any(p.suffix == ".html" for p in visible)
    found_public = False
    for p in visible:
        if p.suffix == ".parquet":
            values = [v for c in pq.read_table(p).columns if str(c.type) == "double" for v in c.to_pylist()]
            assert not any(v is not None and abs(v - x) < 1e-12 for v in values for x in private), p
            found_public |= any(v is not None and abs(v - x) < 1e-12 for v in values for x in public)
        else:
            text = p.read_text()
            for x in private:  # every spelling a number may take in text: repr, 6 and 4 decimals
                for shown in (repr(x), f"{x:.6f}", f"{x:.4f}"):
                    assert shown not in text, (p, shown)
    assert found_public
    result = json.loads(next(p for p in visible if p.name == "result.json").read_text())
    assert result["split"] == "public" and "private" not in json.dumps(result)


def test_leaderboard_reveal_ranks_by_private_and_public_by_public(scored, capsys):
    root, truth, subs = scored
    best = {}
    for split in ("public", "private"):
        per_team = {}
        for (team, _name), (q, g) in subs.items():
            v = reference_split_maps(truth, q, g)[split]
            per_team[team] = max(per_team.get(team, -1), v)
        best[split] = sorted(per_team, key=lambda t: -per_team[t])
    for reveal in (False, True):
        assert main(["leaderboard", str(root / "scored")] + (["--reveal"] if reveal else [])) == 0
        table = pq.read_table(root / "scored" / ("organizer/leaderboard-main-revealed.parquet" if reveal
                                                 else "leaderboard-main.parquet"))
        ranked = [r for r in table.to_pylist() if r["rank"] is not None]
        assert [r["team"] for r in sorted(ranked, key=lambda r: r["rank"])] == best["private" if reveal else "public"]
        assert ("map_private" in table.column_names) == reveal
        printed = capsys.readouterr().out
        assert printed.index(best["private" if reveal else "public"][0]) < printed.index(
            best["private" if reveal else "public"][-1])


def test_an_unknown_phase_is_named(scored, capsys):
    root = scored[0]
    assert main(["leaderboard", str(root / "scored"), "--phase", "final"]) == 2
    assert "--phase" in capsys.readouterr().err


def test_statuses_duplicates_daily_limit_and_phases(tmp_path):
    truth = make_truth(tmp_path / "truth.zarr")
    q, g = submission(truth)
    save(tmp_path / "subs" / "a" / "1", q, g)
    save(tmp_path / "subs" / "e" / "2", q, g)                # identical to a/1: not scored again
    save(tmp_path / "subs" / "b" / "1", q[:-1], g)           # a query missing: rejected
    save(tmp_path / "subs" / "c" / "1", *submission(truth, seed=7))
    save(tmp_path / "subs" / "c" / "2", *submission(truth, seed=8))  # over the limit of one a day
    bad = q.copy()
    bad[3] *= 2
    save(tmp_path / "subs" / "d" / "1", bad, g)              # not normalised
    assert service(tmp_path / "subs", tmp_path / "truth.zarr", tmp_path / "out", "--max-per-day", 1) == 0
    rows = ledger(tmp_path / "out")
    status = {k: e.status for k, e in rows.items()}
    assert status == {("a", "1"): "scored", ("e", "2"): "rejected", ("b", "1"): "rejected",
                      ("c", "1"): "scored", ("c", "2"): "rejected", ("d", "1"): "rejected"}
    assert "identical" in rows["e", "2"].reason and rows["e", "2"].fingerprint == rows["a", "1"].fingerprint
    assert "query.npy" in rows["b", "1"].reason and "missing" in rows["b", "1"].reason
    assert "daily limit" in rows["c", "2"].reason
    assert "query.npy" in rows["d", "1"].reason and "row 3" in rows["d", "1"].reason
    # only scored rows rank; the rest are listed with their reason
    board = pq.read_table(tmp_path / "out" / "leaderboard-main.parquet").to_pylist()
    assert sorted(r["team"] for r in board if r["rank"] is not None) == ["a", "c"]
    assert all(r["reason"] for r in board if r["status"] != "scored")
    # a second pass decides nothing again; a second phase keeps its own rows and leaderboard
    before = (tmp_path / "out" / "organizer" / "ledger.parquet").read_bytes()
    assert service(tmp_path / "subs", tmp_path / "truth.zarr", tmp_path / "out", "--max-per-day", 1) == 0
    assert (tmp_path / "out" / "organizer" / "ledger.parquet").read_bytes() == before
    assert service(tmp_path / "subs", tmp_path / "truth.zarr", tmp_path / "out", "--phase", "final") == 0
    entries = lg.read_ledger(tmp_path / "out" / "organizer" / "ledger.parquet")
    assert sorted(e.phase for e in entries).count("final") == 6 and len(entries) == 12
    final = pq.read_table(tmp_path / "out" / "leaderboard-final.parquet").to_pylist()
    assert {r["phase"] for r in final} == {"final"} and len(final) == 6


def test_a_submission_past_the_timeout_is_stopped_and_the_service_goes_on(tmp_path):
    truth = make_truth(tmp_path / "truth.zarr")
    for team in ("a", "b"):
        save(tmp_path / "subs" / team / "1", *submission(truth))
    assert service(tmp_path / "subs", tmp_path / "truth.zarr", tmp_path / "out", "--timeout", "0.001") == 0
    rows = ledger(tmp_path / "out")
    assert {e.status for e in rows.values()} == {"timed_out"}
    assert all("--timeout" in e.reason for e in rows.values())


def test_a_submission_without_marker_waits_until_settled(tmp_path):
    truth = make_truth(tmp_path / "truth.zarr")
    save(tmp_path / "subs" / "a" / "1", *submission(truth), ready=False)
    assert service(tmp_path / "subs", tmp_path / "truth.zarr", tmp_path / "out", "--settle", 3600) == 0
    assert ledger(tmp_path / "out") == {}
    assert service(tmp_path / "subs", tmp_path / "truth.zarr", tmp_path / "out", "--settle", 0) == 0
    assert ledger(tmp_path / "out")["a", "1"].status == "scored"


def test_bad_options_exit_2_with_one_line(tmp_path):
    truth = make_truth(tmp_path / "truth.zarr")
    (tmp_path / "subs").mkdir()
    for more, word in ((["--timeout", "0"], "--timeout"), (["--max-per-day", "0"], "--max-per-day"),
                       (["--phase", "../x"], "--phase")):
        r = subprocess.run([*CLI, "score-service", str(tmp_path / "subs"), "--truth", str(tmp_path / "truth.zarr"),
                            "--out", str(tmp_path / "out"), "--once", *more], capture_output=True, text=True,
                           env={**os.environ, "EVALCORE_DEBUG": ""}, timeout=120)
        assert r.returncode == 2 and word in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()
    del truth
    assert np.isfinite(1.0)


def test_a_pass_says_which_submission_it_scores_and_how_long_it_took(tmp_path, capsys):
    # the service's progress: a line as each ready submission starts, one as it is decided (its seconds)
    truth = make_truth(tmp_path / "truth.zarr")
    for team, seed in (("team-a", 1), ("team-b", 2)):
        save(tmp_path / "subs" / team / "run", *submission(truth, seed=seed, noise=1.0))
    assert service(tmp_path / "subs", tmp_path / "truth.zarr", tmp_path / "scored") == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if " / " in line]
    assert [line.split(": ", 1)[1].split(" (")[0] for line in lines] == ["scoring", "scored", "scoring", "scored"]
    assert lines[0].endswith("'team-a' / 'run': scoring (1 of 2 ready)")
    assert lines[2].endswith("'team-b' / 'run': scoring (2 of 2 ready)")
    want = reference_split_maps(truth, *submission(truth, seed=1, noise=1.0))["public"]
    assert f"public mAP {want:.6f}) in " in lines[1] and lines[1].endswith(" s")
    # a second pass finds nothing new to score and says nothing per submission
    assert service(tmp_path / "subs", tmp_path / "truth.zarr", tmp_path / "scored") == 0
    assert " / " not in capsys.readouterr().out
