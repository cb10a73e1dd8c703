"""evalcore leaderboard --ci: error bars and ties with the leader, from the ranking split's queries alone,
against scipy's percentile bootstrap and permutation test of the brute-force APs (tests/challenge_data.py)."""
import numpy as np
import pytest
from challenge_data import make_truth, reference_aps, save, submission

from evalcore.cli.main import main


def run_once(subs, truth, out):
    return main(["score-service", str(subs), "--truth", str(truth), "--out", str(out), "--once"])


def test_leaderboard_error_bars_and_ties_from_the_public_queries_alone(tmp_path, capsys):
    """--ci: each ranked row's interval against scipy's percentile bootstrap of the brute-force APs of the public
    queries, and the tie mark against scipy's sign-flip permutation test of the paired AP differences; the
    public board's numbers do not move when only private queries change."""
    from scipy import stats

    truth = make_truth(tmp_path / "truth.zarr", n_query=90)
    public = truth["query/split"] == "public"
    best = submission(truth, seed=11, noise=0.3)
    subs = {("team-a", "best"): best,
            ("team-b", "far"): submission(truth, seed=12, noise=6.0)}
    # team-c: the leader's vectors with a handful of queries disturbed: not distinguishable on the public split
    q = best[0].copy()
    q[[1, 2]] = q[[2, 1]]
    subs["team-c", "near"] = (q, best[1])
    # team-d: the leader's public vectors, its private ones ruined: the public board must not see a difference
    q = best[0].copy()
    q[~public] = submission(truth, seed=13, noise=8.0)[0][~public]
    subs["team-d", "private-ruined"] = (q, best[1])
    for (team, name), (qq, g) in subs.items():
        save(tmp_path / "subs" / team / name, qq, g)
    assert run_once(tmp_path / "subs", tmp_path / "truth.zarr", tmp_path / "out") == 0
    assert main(["leaderboard", str(tmp_path / "out"), "--ci"]) == 0
    printed = capsys.readouterr().out
    import pyarrow.parquet as pq
    board = {(r["team"]): r for r in pq.read_table(tmp_path / "out" / "leaderboard-main.parquet").to_pylist()}
    aps = {team: reference_aps(truth, *subs[team, name])[public] for team, name in subs}
    rng = np.random.default_rng(5)
    for team, row in board.items():
        ref = stats.bootstrap((aps[team],), np.mean, n_resamples=10_000, method="percentile", random_state=rng)
        assert row["map_public_low"] == pytest.approx(ref.confidence_interval.low, abs=0.01)
        assert row["map_public_high"] == pytest.approx(ref.confidence_interval.high, abs=0.01)
        assert row["map_public_low"] <= row["map_public"] <= row["map_public_high"]
        assert not any(k.startswith("map_private") for k in row)
    leader = next(t for t, r in board.items() if r["rank"] == 1)
    assert board[leader]["tied_with_leader"] is None
    for team, row in board.items():
        if team == leader:
            continue
        d = aps[team] - aps[leader]
        p = stats.permutation_test((d,), np.mean, permutation_type="samples", n_resamples=20_000,
                                   random_state=rng).pvalue
        assert p > 0.2 or p < 0.01, (team, p)  # the planted cases are far from the 0.05 boundary
        assert row["tied_with_leader"] == (p > 0.05), (team, p)
    assert board["team-b"]["tied_with_leader"] is False
    assert board["team-c"]["tied_with_leader"] is True or board["team-c"]["rank"] == 1
    assert "=" in printed and "intervals: 0.95 percentile bootstrap of the public split" in printed
    assert np.array_equal(aps["team-d"], aps["team-a"])  # the public view of team-d is the leader's
