"""trec_eval's rules, written from its documentation for the tests that compare evalcore.trec with trec_eval's
printouts: its flags as evalcore.trec's keywords, the rankings it scores, and a comparison at full precision."""
from __future__ import annotations

import math

import evalcore


def keywords(flags: str) -> dict:
    """evalcore.trec's keywords for trec_eval's flags (-c, -J, -M N, -l N)."""
    out: dict = {}
    for flag in flags.split():
        if flag == "-c":
            out["complete"] = True
        elif flag == "-J":
            out["judged_only"] = True
        elif flag.startswith("-M"):
            out["depth"] = int(flag[2:])
        elif flag.startswith("-l"):
            out["rel_level"] = int(flag[2:])
    return out


def by_measure(qrels, run, measures, flags: str) -> dict:
    """{printed measure: {qid or 'all': value}} from evalcore.trec with trec_eval's ``flags``."""
    result = evalcore.trec(qrels, run, measures, **keywords(flags))
    return {m: {**{q: values[m] for q, values in result.per_query.items()}, "all": result.aggregate[m]}
            for m in result.measures}


def assert_close(got: dict, want: dict, where: str) -> None:
    """Every value of ``want`` ({measure: {qid: value}}) in ``got`` to 1e-12 (trec_eval's full-precision build)."""
    wrong = [(m, q, got.get(m, {}).get(q), v) for m in want for q, v in want[m].items()
             if got.get(m, {}).get(q) is None or not math.isclose(got[m][q], v, rel_tol=1e-12, abs_tol=1e-15)]
    assert not wrong, (where, wrong[:5])


def trec_rankings(qrels_text: str, run_text: str, flags: str) -> dict:
    """{qid: (grades of the ranked documents, best first (None: not in the qrels); every grade the qrels give
    the query)} by trec_eval's rules: scores descending, equal ones by docno descending; -M cuts, then -J keeps
    the documents graded >= 0; the queries judged and with results (-c: judged ones without results too)."""
    grades: dict = {}
    for line in qrels_text.splitlines():
        if line:
            qid, _, doc, grade = line.split()
            grades.setdefault(qid, {})[doc] = int(grade)
    listed: dict = {}
    for line in run_text.splitlines():
        if line:
            qid, _, doc, _, score, _ = line.split()
            listed.setdefault(qid, []).append((float(score), doc))
    depth = keywords(flags).get("depth")
    out = {}
    for qid, judged in grades.items():
        if qid not in listed and "-c" not in flags:
            continue
        ranking = [judged.get(doc) for _, doc in sorted(listed.get(qid, []), reverse=True)][:depth]
        if "-J" in flags:
            ranking = [g for g in ranking if g is not None and g >= 0]
        out[qid] = (ranking, list(judged.values()))
    return out
