"""One leaderboard model (``jobs.standings``): ``evalcore score``'s board and the service's ledger views rank
the same submissions in the same order.

The rule (README, Challenge scoring): a higher score first; no score (null or NaN) last; among equal scores
the earlier submission, then the team name, then the submission name; a team ranks once, by its best.
The reference below sorts by that rule written out directly, apart from the code under test.
"""
import datetime as dt
import itertools
import math
import random

import pyarrow as pa

from evalcore.io import challenge as ch
from evalcore.io import ledger as lg
from evalcore.jobs import standings

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def reference_order(subs):
    """(team, submission) of each team's best, best first, by the rule itself: brute force over all pairs."""
    def better(a, b):  # a ranks before b
        sa = a["score"] is not None and not math.isnan(a["score"])
        sb = b["score"] is not None and not math.isnan(b["score"])
        if sa != sb:
            return sa
        if sa and a["score"] != b["score"]:
            return a["score"] > b["score"]
        return (a["when"], a["team"], a["submission"]) < (b["when"], b["team"], b["submission"])

    best = {}
    for s in subs:
        if s["team"] not in best or better(s, best[s["team"]]):
            best[s["team"]] = s
    leaders = list(best.values())
    ordered = [x for x in leaders if all(x is y or better(x, y) for y in leaders)]
    while len(ordered) < len(leaders):  # selection: the one that beats every other one left
        left = [x for x in leaders if x not in ordered]
        ordered.append(next(x for x in left if all(x is y or better(x, y) for y in left)))
    return [(x["team"], x["submission"]) for x in ordered]


def submissions(seed, n=40):
    """Random submissions with ties on purpose: few scores, few times, same team and time twice."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        score = rng.choice([0.25, 0.5, 0.5, 0.75, None, math.nan])
        out.append({"team": rng.choice("abcdef"), "submission": f"s{rng.randrange(6)}", "score": score,
                    "when": T0 + dt.timedelta(seconds=rng.choice([0, 0, 60, 120])), "fingerprint": f"{i:064x}"})
    return out


def board_table(subs):
    return pa.Table.from_pylist([{"team": s["team"], "submission": s["submission"], "fingerprint": s["fingerprint"],
                                  "score": s["score"], "n_queries": 1, "n_evaluated": 1, "scored_at": s["when"]}
                                 for s in subs], schema=ch.LEADERBOARD_SCHEMA)


def entries(subs):
    return [lg.Entry(phase="p", team=s["team"], submission=s["submission"], status="scored", reason="",
                     received_at=s["when"], finished_at=s["when"], fingerprint=s["fingerprint"],
                     map=s["score"], split_maps=(("public", s["score"]),)) for s in subs]


def test_score_board_and_service_views_rank_as_the_rule_says():
    for seed in range(30):
        subs = submissions(seed)
        want = reference_order(subs)
        got_board = [(r["team"], r["submission"]) for r in standings.best_per_team(board_table(subs)).to_pylist()]
        assert got_board == want, seed
        ranked = [(e.team, e.submission) for rank, e in standings.ranked(entries(subs), "public") if rank]
        scored = [t for t in want if any(s["team"] == t[0] and s["submission"] == t[1] and s["score"] is not None
                                         and not math.isnan(s["score"]) for s in subs)]
        assert ranked == scored, seed       # the service ranks only the teams with a score, in the same order


def test_equal_score_and_time_rank_by_team_then_submission_whatever_the_row_order():
    rows = [{"team": "a", "submission": name, "score": 0.5, "when": T0, "fingerprint": name * 8}
            for name in ("z", "m", "b")]
    for order in itertools.permutations(rows):
        best = standings.best_per_team(board_table(order)).to_pylist()
        assert [(r["team"], r["submission"]) for r in best] == [("a", "b")]
        ranked = standings.ranked(entries(order), "public")
        assert [(rank, e.submission) for rank, e in ranked][0] == (1, "b")


def test_a_nan_score_is_not_ranked_by_the_service():
    subs = [{"team": "a", "submission": "x", "score": math.nan, "when": T0, "fingerprint": "1"},
            {"team": "b", "submission": "y", "score": 0.1, "when": T0, "fingerprint": "2"}]
    ranked = standings.ranked(entries(subs), "public")
    assert [(rank, e.team) for rank, e in ranked] == [(1, "b"), (None, "a")]
