"""evalcore score --ci: error bars and ties with the leader on leaderboard_best.parquet, against scipy's
percentile bootstrap and permutation test of the brute-force APs (tests/challenge_data.py)."""
import datetime as dt

import numpy as np
import pyarrow.parquet as pq
import pytest
from challenge_data import make_truth, reference_aps, save, submission

from evalcore.cli.main import main
from evalcore.io import challenge as ch
from evalcore.jobs import standings


def score(tmp_path, team, name, *extra):
    return main(["score", str(tmp_path / "subs" / team / name), "--truth", str(tmp_path / "truth.zarr"),
                 "--out", str(tmp_path / "scored" / team / name), "--team", team, "--quiet",
                 "--leaderboard", str(tmp_path / "scored" / "leaderboard.parquet"), *extra])


def test_score_ci_error_bars_and_ties_against_scipy(tmp_path, capsys):
    from scipy import stats

    truth = make_truth(tmp_path / "truth.zarr", n_query=80, splits=False)
    best = submission(truth, seed=11, noise=0.3)
    q = best[0].copy()
    q[[1, 2]] = q[[2, 1]]  # the leader with two queries swapped: not distinguishable from it
    subs = {("team-a", "best"): best, ("team-b", "far"): submission(truth, seed=12, noise=6.0),
            ("team-b", "worse"): submission(truth, seed=14, noise=9.0), ("team-c", "near"): (q, best[1])}
    # a row written before leaderboards kept the report: it gets no error bars, and nothing fails
    board = tmp_path / "scored" / "leaderboard.parquet"
    board.parent.mkdir(parents=True)
    standings.update_leaderboard(board, {"team": "team-old", "submission": "s", "fingerprint": "f" * 64, "score": 0.01,
                                  "n_queries": 80, "n_evaluated": 80,
                                  "scored_at": dt.datetime(2026, 1, 1, tzinfo=dt.UTC)})
    for (team, name), (qq, g) in subs.items():
        save(tmp_path / "subs" / team / name, qq, g, ready=False)
        assert score(tmp_path, team, name, "--ci") == 0
    printed = capsys.readouterr().out
    rows = {r["team"]: r for r in pq.read_table(ch.best_path(board)).to_pylist()}
    assert rows["team-b"]["submission"] == "far"  # best per team, as without --ci
    assert rows["team-old"]["score_ci_low"] is None and rows["team-old"]["tied_with_leader"] is None
    aps = {(team, name): reference_aps(truth, *subs[team, name]) for team, name in subs}
    rng = np.random.default_rng(3)
    for team in ("team-a", "team-b", "team-c"):
        row = rows[team]
        assert row["score"] == pytest.approx(aps[team, row["submission"]].mean(), abs=1e-6)
        ref = stats.bootstrap((aps[team, row["submission"]],), np.mean, n_resamples=10_000, method="percentile",
                              random_state=rng)
        assert row["score_ci_low"] == pytest.approx(ref.confidence_interval.low, abs=0.01)
        assert row["score_ci_high"] == pytest.approx(ref.confidence_interval.high, abs=0.01)
        assert row["score_ci_low"] <= row["score"] <= row["score_ci_high"]
    first = pq.read_table(ch.best_path(board)).to_pylist()[0]
    assert first["tied_with_leader"] is None and first["team"] in ("team-a", "team-c")
    leader = aps[first["team"], first["submission"]]
    for team in ("team-a", "team-b", "team-c"):
        if team == first["team"]:
            continue
        d = aps[team, rows[team]["submission"]] - leader
        p = stats.permutation_test((d,), np.mean, permutation_type="samples", n_resamples=20_000,
                                   random_state=rng).pvalue
        assert p > 0.2 or p < 0.01, (team, p)  # the planted cases are far from the 0.05 boundary
        assert rows[team]["tied_with_leader"] == (p > 0.05), (team, p)
    assert rows["team-b"]["tied_with_leader"] is False
    assert "intervals: 0.95 percentile bootstrap" in printed and "=" in printed


def test_score_ci_bad_options_exit_2_before_anything_is_written(tmp_path, capsys):
    truth = make_truth(tmp_path / "truth.zarr", n_query=20, splits=False)
    save(tmp_path / "subs" / "t" / "s", *submission(truth), ready=False)
    for extra, named in ((["--resamples", "100"], "--resamples: only with --ci"),
                         (["--ci", "1.5"], "--ci"), (["--ci", "0.9", "--resamples", "0"], "--resamples")):
        assert score(tmp_path, "t", "s", *extra) == 2
        assert named in capsys.readouterr().err
        assert not (tmp_path / "scored").exists()


def test_score_without_ci_keeps_the_board_plain(tmp_path):
    truth = make_truth(tmp_path / "truth.zarr", n_query=20, splits=False)
    save(tmp_path / "subs" / "t" / "s", *submission(truth), ready=False)
    assert score(tmp_path, "t", "s") == 0
    best = pq.read_table(ch.best_path(tmp_path / "scored" / "leaderboard.parquet"))
    assert "score_ci_low" not in best.column_names
    assert best.column("report").to_pylist() == [str(tmp_path / "scored" / "t" / "s" / "organizer")]
