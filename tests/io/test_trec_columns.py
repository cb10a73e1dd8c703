"""The columnar TREC readers (issue 22, item 5) against a plain line-by-line reader written here.

The reference splits each line as trec_eval does (C ``isspace`` runs, lines
ending at ``\\n``, blank and ``#`` lines skipped, run fields after the sixth
ignored) and orders results as ``import trec-run`` documents it. Files are
random: mixed whitespace, blank and comment lines, non-ASCII docnos, queries
interleaved or in blocks, tied scores, and the file read in pieces of a few
bytes so that every piece boundary case comes up. A malformed line put at a
random place must be reported at the line the reference finds first.
"""
import re

import numpy as np
import pytest

from evalcore.errors import InputError
from evalcore.io.importers import trec

SPLIT = re.compile(r"[ \t\n\v\f\r]+")
SCORE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def records(text: str, fields: int, more: bool):
    """(line number, fields) of the kept lines, or ("bad", line) at the first line with a wrong field count."""
    for number, line in enumerate(text.split("\n"), start=1):
        parts = [p for p in SPLIT.split(line) if p]
        if not parts or parts[0].startswith("#"):
            continue
        if len(parts) < fields or (len(parts) > fields and not more):
            yield number, None
            return
        yield number, parts[:fields]


def reference(run_text: str, qrels_text: str, order: str, complete: bool):
    """(arrays, first bad line or None) as import trec-run defines them, by plain dicts and sorts."""
    judged: dict = {}
    for number, f in records(qrels_text, 4, False):
        if f is None or not re.fullmatch(r"[+-]?[0-9]+", f[3]):
            return None, ("qrels", number)
        rel = int(f[3]) if int(f[3]) >= 0 else -2  # negative: in the pool, not judged (contract v4; was 0)
        if rel > 127:
            return None, ("qrels", number)
        seen = judged.setdefault(f[0], {})
        if f[2] in seen and seen[f[2]][0] != rel:
            return None, ("qrels", number)
        seen.setdefault(f[2], (rel, number))
    runs: dict = {}
    first: dict = {}
    for number, f in records(run_text, 6, True):
        if f is None or not SCORE.fullmatch(f[4]) or not np.isfinite(float(f[4])):
            return None, ("run", number)
        if first.setdefault((f[0], f[2]), number) != number:
            return None, ("run", number)
        runs.setdefault(f[0], []).append((f[2], float(f[4])))
    qids = sorted(q for q in judged if q in runs or complete)
    ranked = {}
    for q in qids:
        results = runs.get(q, [])
        if order == "trec_eval":
            results = sorted(results, key=lambda r: r[0].encode(), reverse=True)
        ranked[q] = sorted(results, key=lambda r: -r[1])
    gids = sorted({d for q in qids for d, _ in ranked[q]} | {d for q in qids for d in judged[q]})
    gpos = {g: i for i, g in enumerate(gids)}
    k = max(len(r) for r in ranked.values())
    item = np.full((len(qids), k), -1)
    score = np.full((len(qids), k), np.nan)
    for i, q in enumerate(qids):
        item[i, :len(ranked[q])] = [gpos[d] for d, _ in ranked[q]]
        score[i, :len(ranked[q])] = [s for _, s in ranked[q]]
    pairs = sorted((i, gpos[d], rel) for i, q in enumerate(qids) for d, (rel, _) in judged[q].items())
    return {"query/key": qids, "gallery/key": gids, "ranking/item": item, "ranking/score": score,
            "qrels/query": [p[0] for p in pairs], "qrels/item": [p[1] for p in pairs],
            "qrels/rel": [p[2] for p in pairs]}, None


def gap(rng) -> str:
    return "".join(rng.choice([" ", "\t", "\v", "\f", "\r", "  "]) for _ in range(rng.integers(1, 3)))


def random_files(rng):
    # control bytes other than whitespace belong to a field, as C isspace says
    docs = [f"d{i}" for i in range(60)] + ["d\u00a0x", "\u00e9t\u00e9", "D9", "d10b", "d\x01c", "\x1fe", "e\x7f"]
    run_lines, qrels_lines = [], []
    for q in range(12):
        qid = str(rng.integers(1, 40)) + "q" if q % 5 == 4 else f"{q * 7 % 13}"
        listed = rng.choice(docs, rng.integers(1, 15), replace=False)
        scores = np.sort(rng.integers(0, 5, listed.size) / 2)[::-1] if q % 2 else rng.integers(0, 5, listed.size) / 2
        run_lines += [f"{qid} Q0 {d} {r} {s} tag" + (" x y" if r % 3 == 0 else "")
                      for r, (d, s) in enumerate(zip(listed, scores))]
        if q % 4 != 3:
            qrels_lines += [f"{qid} 0 {d} {g}" for d, g in zip(rng.choice(docs, 5, replace=False),
                                                                rng.integers(-1, 4, 5))]
    qrels_lines += [f"{q} 0 d1 1" for q in ("77", "78")]      # judged, never in the run
    if rng.random() < 0.5:
        rng.shuffle(run_lines)                              # queries interleaved
    return run_lines, qrels_lines


def as_text(rng, lines) -> str:
    out = []
    for line in lines:
        if rng.random() < 0.1:
            out.append(rng.choice(["", "   ", "# a comment line", "#x y"]))
        out.append(gap(rng)[:rng.integers(0, 2)] + line.replace(" ", gap(rng)) + gap(rng)[:rng.integers(0, 2)])
    return "\n".join(out) + rng.choice(["", "\n"])


@pytest.mark.parametrize("seed", range(12))
def test_columnar_readers_equal_the_line_reference(tmp_path, monkeypatch, seed):
    rng = np.random.default_rng(seed)
    monkeypatch.setattr(trec, "PIECE_BYTES", int(rng.choice([7, 64, 1 << 24])))
    run_lines, qrels_lines = random_files(rng)
    run_text, qrels_text = as_text(rng, run_lines), as_text(rng, qrels_lines)
    (tmp_path / "run").write_text(run_text, encoding="utf-8")
    (tmp_path / "qrels").write_text(qrels_text, encoding="utf-8")
    for order in ("score", "trec_eval"):
        for complete in (False, True):
            want, _ = reference(run_text, qrels_text, order, complete)
            got, _ = trec.read_trec_run(tmp_path / "run", qrels=tmp_path / "qrels", order=order, complete=complete)
            assert got["query/key"].tolist() == want["query/key"]
            assert got["gallery/key"].tolist() == want["gallery/key"]
            np.testing.assert_array_equal(got["ranking/item"], want["ranking/item"])
            if order == "score":
                np.testing.assert_array_equal(got["ranking/score"], want["ranking/score"])
            for name in ("qrels/query", "qrels/item", "qrels/rel"):
                assert got[name].tolist() == want[name], name


BAD_RUN = ["q Q0 dX 1 1_5 t", "q Q0 dX 1 nan t", "q Q0 dX 1 1e999 t", "q Q0 dX 1", "q Q0 d1 1 0.5 t"]
BAD_QRELS = ["q 0 d1 x", "q 0 d1 300", "q 0 d1", "q 0 d1 1 extra", "q 0 d1 -0", "q 0 d1 2"]


@pytest.mark.parametrize("seed", range(16))
def test_the_first_malformed_line_is_the_one_reported(tmp_path, monkeypatch, seed):
    rng = np.random.default_rng(100 + seed)
    monkeypatch.setattr(trec, "PIECE_BYTES", int(rng.choice([7, 64, 1 << 24])))
    run_lines, qrels_lines = random_files(rng)
    run_lines = [*run_lines, "q Q0 d1 1 0.25 t"]
    qrels_lines = [*qrels_lines, "q 0 d1 1"]
    for _ in range(rng.integers(1, 3)):                     # one or two bad lines somewhere
        if rng.random() < 0.5:
            run_lines.insert(int(rng.integers(0, len(run_lines) + 1)), str(rng.choice(BAD_RUN)))
        else:
            qrels_lines.insert(int(rng.integers(0, len(qrels_lines) + 1)), str(rng.choice(BAD_QRELS)))
    run_text, qrels_text = as_text(rng, run_lines), as_text(rng, qrels_lines)
    (tmp_path / "run").write_text(run_text, encoding="utf-8")
    (tmp_path / "qrels").write_text(qrels_text, encoding="utf-8")
    _, bad = reference(run_text, qrels_text, "score", False)
    if bad is None:  # the inserted lines happened to be acceptable (e.g. a repeated equal judgement)
        trec.read_trec_run(tmp_path / "run", qrels=tmp_path / "qrels")
        return
    with pytest.raises(InputError, match=rf"^{tmp_path / bad[0]}: line {bad[1]}[:,] "):
        trec.read_trec_run(tmp_path / "run", qrels=tmp_path / "qrels")


@pytest.mark.parametrize("seed", range(4))
def test_pair_order_is_the_lexsort_of_rows_then_items(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 3000))
    rows = np.sort(rng.integers(0, 50, n)) if seed % 2 else rng.integers(0, 50, n)  # grouped, or not
    items = rng.integers(0, 40, n)   # repeats: the order among equal pairs must stay the input's
    for n_items in (40, 1 << 60):    # one key; and past int64, the lexsort itself
        assert np.array_equal(trec.pair_order(rows, items, n_items), np.lexsort((items, rows)))
