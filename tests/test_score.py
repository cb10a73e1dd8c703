"""``evalcore score``: judged-only mAP against a brute-force reference, untrusted submissions, leaderboard."""
import json
import os
import subprocess
import sys
import unicodedata
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zarr

from evalcore.cli.main import main
from evalcore.io import challenge as ch
from evalcore.io import dataset as ds
from evalcore.jobs import standings

CLI = [str(Path(sys.executable).with_name("evalcore"))]
DIMS = 128


def run(*args, timeout=240):
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "EVALCORE_DEBUG": ""})


def unit(x):
    x = np.asarray(x, dtype=np.float64)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def make_truth(path, n_query, n_gallery, judged=50, seed=0):
    """Truth bundle (keys + qrels, no embeddings) and the hidden relevance, as arrays."""
    rng = np.random.default_rng(seed)
    qi, ii = [], []
    for q in range(n_query):
        items = rng.choice(n_gallery, size=judged, replace=False)
        qi.append(np.full(judged, q)), ii.append(items)
    qi, ii = np.concatenate(qi), np.concatenate(ii)
    rel = (rng.random(qi.size) < 0.3).astype(np.int8)
    rel[::judged] = 1                                   # every query has a relevant item
    rel[(rng.random(qi.size) < 0.02) & (rel == 0)] = -1  # a few junk judgements: left out of the ranking
    arrays = {"query/key": np.array([f"query-{i:05d}" for i in range(n_query)], object),
              "gallery/key": np.array([f"img-{i:07d}" for i in range(n_gallery)], object),
              "qrels/query": qi, "qrels/item": ii, "qrels/rel": rel}
    ds.write_dataset(path, arrays, {"protocol": "qrels", "dims": DIMS})
    return arrays


def good_submission(truth, n_gallery, seed=1, noise=0.6):
    """Features of a decent model: a query points at the mean of its relevant items, plus noise."""
    rng = np.random.default_rng(seed)
    gallery = unit(rng.standard_normal((n_gallery, DIMS)))
    n_query = len(truth["query/key"])
    query = np.zeros((n_query, DIMS))
    rel = truth["qrels/rel"] == 1
    np.add.at(query, truth["qrels/query"][rel], gallery[truth["qrels/item"][rel]])
    query = unit(unit(query) + noise * rng.standard_normal((n_query, DIMS)) / np.sqrt(DIMS) * 4)
    return query.astype(np.float32), gallery.astype(np.float32)


def reference_map(truth, query, gallery) -> tuple[float, np.ndarray]:
    """Brute force: per query, cosine scores of the judged (rel >= 0) items only, AP over them, mean.

    AP = (1/R) sum over relevant items of (relevant at or above it) / (its rank); among equal
    scores non-relevant items come first (pessimistic), then lower gallery index.
    """
    q = unit(np.asarray(query, np.float64))
    g = unit(np.asarray(gallery, np.float64))
    aps = []
    for i in range(len(q)):
        sel = (truth["qrels/query"] == i) & (truth["qrels/rel"] >= 0)
        items, rel = truth["qrels/item"][sel], truth["qrels/rel"][sel] == 1
        scores = g[items] @ q[i]
        order = sorted(range(len(items)), key=lambda k: (-scores[k], bool(rel[k]), items[k]))
        hits, ap = 0, 0.0
        for rank, k in enumerate(order, start=1):
            if rel[k]:
                hits += 1
                ap += hits / rank
        aps.append(ap / rel.sum())
    aps = np.array(aps)
    return float(np.mean(aps)), aps


def save_npy(folder: Path, query, gallery) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / "query.npy", query)
    np.save(folder / "gallery.npy", gallery)
    return folder


def save_zarr(path: Path, query, gallery) -> Path:
    root = zarr.open_group(str(path), mode="w")
    for side, x in (("query", query), ("gallery", gallery)):
        root.create_array(f"{side}/emb", data=np.asarray(x), chunks=(max(1, min(len(x), 4096)), x.shape[1]))
    return path


# --------------------------------------------------------------------------- full scoring


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    root = tmp_path_factory.mktemp("score")
    truth = make_truth(root / "truth.zarr", n_query=300, n_gallery=50_000, judged=50)
    query, gallery = good_submission(truth, 50_000)
    return root, truth, query, gallery


def test_scores_match_brute_force_and_result_reveals_no_annotation(big):
    root, truth, query, gallery = big
    sub = save_npy(root / "subs" / "run-1", query, gallery)
    out = root / "results" / "alpha-1"
    result = run("score", sub, "--truth", root / "truth.zarr", "--out", out, "--team", "alpha", "--workers", "1",
                 "--quiet")
    assert result.returncode == 0, result.stderr
    want, want_ap = reference_map(truth, query, gallery)
    record = json.loads((out / "result.json").read_text())
    assert abs(record["score"] - want) <= 1e-9
    assert want > 0.5
    # the organizer's report: every query's AP as the reference's
    per_query = pq.read_table(out / "organizer" / "per_query.parquet")
    assert np.allclose(per_query.column("ap").to_numpy(), want_ap, rtol=0, atol=1e-9)
    run_json = json.loads((out / "organizer" / "run.json").read_text())
    assert run_json["options"]["judged_only"] and run_json["options"]["protocol"] == "qrels"
    assert run_json["options"]["similarity"] == "cosine"

    # the participant's file: these keys and nothing from the annotations
    assert set(record) == {"team", "submission", "fingerprint", "score", "n_queries", "n_evaluated", "timestamp"}
    assert record["team"] == "alpha" and record["submission"] == "run-1"
    assert record["n_queries"] == record["n_evaluated"] == 300
    assert all(not isinstance(v, (list, dict)) for v in record.values())
    assert len(record["fingerprint"]) == 64
    assert sorted(p.name for p in out.iterdir()) == ["organizer", "result.json"]
    text = (out / "result.json").read_text()
    for key in list(truth["gallery/key"][truth["qrels/item"]]) + list(truth["query/key"]):
        assert key not in text
    for word in ("rel", "qrels", "item", "ap\"", "per_query", "key"):
        assert word not in text

    # the leaderboard and each team's best
    board = pq.read_table(root / "results" / "leaderboard.parquet").to_pylist()
    assert [(r["team"], r["submission"], r["fingerprint"]) for r in board] == \
        [("alpha", "run-1", record["fingerprint"])]
    assert abs(board[0]["score"] - want) <= 1e-9 and board[0]["n_queries"] == 300
    best = pq.read_table(root / "results" / "leaderboard_best.parquet").to_pylist()
    assert [r["team"] for r in best] == ["alpha"]
    assert not [p for p in root.rglob("*") if p.name.startswith(".") and "score" in p.name]  # temp data gone


def test_constant_submission_scores_no_better_than_chance(big):
    root, truth, query, gallery = big
    n_gallery = len(gallery)
    const = np.zeros((1, DIMS), np.float32)
    const[0, 3] = 1.0
    sub = save_zarr(root / "subs" / "constant.zarr", np.repeat(const, len(query), 0), np.repeat(const, n_gallery, 0))
    out = root / "results" / "beta-1"
    result = run("score", sub, "--truth", root / "truth.zarr", "--out", out, "--team", "beta", "--workers", "1",
                 "--quiet")
    assert result.returncode == 0, result.stderr
    constant = json.loads((out / "result.json").read_text())["score"]
    rng = np.random.default_rng(5)
    random_scores = [reference_map(truth, unit(rng.standard_normal(query.shape)),
                                   unit(rng.standard_normal(gallery.shape)))[0] for _ in range(3)]
    good = reference_map(truth, query, gallery)[0]
    assert constant <= np.mean(random_scores) + 0.02
    assert constant < good - 0.2
    assert abs(constant - reference_map(truth, np.repeat(const, len(query), 0),
                                        np.repeat(const, n_gallery, 0))[0]) <= 1e-9
    board = pq.read_table(root / "results" / "leaderboard.parquet")
    best = pq.read_table(root / "results" / "leaderboard_best.parquet").to_pylist()
    if board.num_rows == 2:                     # after the full-scoring test: alpha's model is best
        assert [r["team"] for r in best] == ["alpha", "beta"]


# --------------------------------------------------------------------------- bad submissions


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad")
    truth = make_truth(root / "truth.zarr", n_query=20, n_gallery=300, judged=30, seed=3)
    query, gallery = good_submission(truth, 300, seed=4)
    board = root / "results" / "leaderboard.parquet"
    standings.update_leaderboard(board, {"team": "earlier", "submission": "s", "fingerprint": "f" * 64, "score": 0.5,
                                  "n_queries": 20, "n_evaluated": 20, "scored_at": ch.utc_now()})
    return root, query, gallery


def write_header(path: Path, shape, descr="<f4", data: bytes = b""):
    with open(path, "wb") as fh:
        np.lib.format.write_array_header_1_0(fh, {"descr": descr, "fortran_order": False, "shape": shape})
        fh.write(data)


def bad_cases():
    """(case, make(folder, query, gallery) -> submission path, words the message must hold)."""

    def npy(fn):
        def make(folder, q, g):
            q, g = q.copy(), g.copy()
            fn(q, g)
            return save_npy(folder, q, g)
        return make

    def nan(q, g):
        g[7, 3] = np.nan

    def inf(q, g):
        q[2, 0] = np.inf

    def norm(q, g):
        g[[5, 9]] *= 1.01

    def lying_header(folder, q, g):
        save_npy(folder, q, g)
        write_header(folder / "gallery.npy", (300, DIMS), data=g[:100].tobytes())  # says 300 rows, holds 100
        return folder

    def header_too_small(folder, q, g):
        save_npy(folder, q, g)
        write_header(folder / "gallery.npy", (200, DIMS), data=g.tobytes())        # says 200 rows, holds 300
        return folder

    def truncated(folder, q, g):
        save_npy(folder, q, g)
        data = (folder / "query.npy").read_bytes()
        (folder / "query.npy").write_bytes(data[:-100])
        return folder

    def pickled(folder, q, g):
        save_npy(folder, q, g)
        obj = np.empty((20, DIMS), dtype=object)
        obj[:] = 0.0
        np.save(folder / "query.npy", obj, allow_pickle=True)
        return folder

    def zarr_nan(folder, q, g):
        g = g.copy()
        g[11, 0] = np.nan
        return save_zarr(folder.with_suffix(".zarr"), q, g)

    def zarr_int(folder, q, g):
        return save_zarr(folder.with_suffix(".zarr"), q, (g * 100).astype(np.int32))

    def zarr_missing(folder, q, g):
        root = zarr.open_group(str(folder.with_suffix(".zarr")), mode="w")
        root.create_array("query/emb", data=q)
        return folder.with_suffix(".zarr")

    def zarr_pickle_filter(folder, q, g):
        import numcodecs

        root = zarr.open_group(str(folder.with_suffix(".zarr")), mode="w", zarr_format=2)
        for side, x in (("query", q), ("gallery", g)):
            root.create_array(f"{side}/emb", shape=x.shape, dtype="f4", filters=[numcodecs.Pickle()],
                              compressors=None)[:] = x
        return folder.with_suffix(".zarr")

    return [
        ("nan", npy(nan), ["gallery.npy", "NaN", "row 7"]),
        ("inf", npy(inf), ["query.npy", "Inf", "row 2"]),
        ("wrong-dim", lambda f, q, g: save_npy(f, q[:, :64].copy(), g[:, :64].copy()), ["query.npy", "64", "128"]),
        ("missing-rows", lambda f, q, g: save_npy(f, q, g[:-3]), ["gallery.npy", "297", "3 missing"]),
        ("extra-rows", lambda f, q, g: save_npy(f, np.vstack([q, q[:1]]), g), ["query.npy", "21", "1 extra"]),
        ("norm-off", npy(norm), ["gallery.npy", "2 row(s)", "row 5", "normalised"]),
        ("pickle", pickled, ["query.npy", "object"]),
        ("int-dtype", lambda f, q, g: save_npy(f, (q * 100).astype(np.int64), g), ["query.npy", "int64"]),
        ("float128", lambda f, q, g: save_npy(f, q, g.astype(np.longdouble)), ["gallery.npy", "float"]),
        ("lying-header", lying_header, ["gallery.npy", "header", "(300, 128)"]),
        ("header-too-small", header_too_small, ["gallery.npy", "header", "too many"]),
        ("truncated", truncated, ["query.npy", "truncated"]),
        ("zarr-nan", zarr_nan, ["gallery/emb", "NaN", "row 11"]),
        ("zarr-int", zarr_int, ["gallery/emb", "int32"]),
        ("zarr-missing", zarr_missing, ["gallery/emb", "missing"]),
        ("zarr-pickle-filter", zarr_pickle_filter, ["query/emb", "pickle"]),
    ]


@pytest.mark.parametrize("case, make, words", bad_cases(), ids=[c[0] for c in bad_cases()])
def test_bad_submission_exits_2_and_writes_nothing(small, capsys, case, make, words):
    root, query, gallery = small
    sub = make(root / "subs" / case, query, gallery)
    results = root / "results"
    before = {p.name: p.read_bytes() for p in results.iterdir() if p.is_file()}
    code = main(["score", str(sub), "--truth", str(root / "truth.zarr"), "--out", str(results / case),
                 "--team", "gamma", "--workers", "1"])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and err.startswith("evalcore: error: ")
    assert all(w in err for w in words), err
    assert {p.name: p.read_bytes() for p in results.iterdir() if p.is_file()} == before   # leaderboard as it was
    assert not [p for p in results.iterdir() if p.is_dir()]                               # no out, no temp folder


def test_bad_submission_through_the_real_command_line(small):
    root, query, gallery = small
    sub = root / "subs" / "cli-nan"
    q = query.copy()
    q[4, 1] = np.nan
    save_npy(sub, q, gallery)
    result = run("score", sub, "--truth", root / "truth.zarr", "--out", root / "results" / "cli", "--team", "g",
                 "--workers", "1")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "evalcore: error: query.npy: 1 row(s) contain NaN or Inf (first: row 4)"]
    assert not (root / "results" / "cli").exists()


def test_out_folder_and_team_are_checked_first(small, capsys):
    root, query, gallery = small
    sub = save_npy(root / "subs" / "ok", query, gallery)
    taken = root / "taken"
    taken.mkdir(exist_ok=True)
    (taken / "x").write_text("earlier")
    args = ["score", str(sub), "--truth", str(root / "truth.zarr"), "--workers", "1"]
    assert main([*args, "--out", str(taken), "--team", "t"]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert main([*args, "--out", str(root / "results" / "t"), "--team", "bad\nname"]) == 2
    assert "--team" in capsys.readouterr().err
    assert main([*args, "--out", str(root / "results" / "t"), "--team", "t", "--stall-timeout", "never"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("evalcore: error: --stall-timeout: 'never' is not a number"), err
    assert not (root / "results" / "t").exists()


# --------------------------------------------------------------------------- pure helpers


def test_check_norms_counts_and_first_rows():
    block = np.tile(np.eye(4, dtype=np.float32)[:1], (6, 1))
    block[2] *= 1.002
    block[4, 0] = np.nan
    block[5] *= 0.5
    found = ch.check_norms(block, start=100)
    assert (found.nonfinite, found.first_nonfinite, found.off, found.first_off) == (1, 104, 2, 102)
    assert ch.check_norms(np.float16(block[:2]), 0).off == 0
    total = ch.NormCheck()
    total.add(ch.check_norms(block[:3], 0))
    total.add(ch.check_norms(block[3:], 3))
    assert (total.nonfinite, total.first_nonfinite, total.off, total.first_off) == (1, 4, 2, 2)
    with pytest.raises(Exception, match=r"gallery.npy: 1 row\(s\) contain NaN or Inf \(first: row 4\)"):
        total.raise_if_any("gallery.npy")


def test_float16_and_fortran_order_are_accepted_with_one_fingerprint(small):
    root, query, gallery = small
    a = ch.open_submission(save_npy(root / "subs" / "f16", query.astype(np.float16), gallery.astype(np.float16)))
    b = ch.open_submission(save_npy(root / "subs" / "f16-fortran", np.asfortranarray(query.astype(np.float16)),
                                    np.asfortranarray(gallery.astype(np.float16))))
    c = ch.open_submission(save_zarr(root / "subs" / "f16.zarr", query.astype(np.float16),
                                     gallery.astype(np.float16)))
    prints = {ch.check_submission(s, len(query), len(gallery), DIMS) for s in (a, b, c)}
    assert len(prints) == 1
    assert ch.check_submission(ch.open_submission(save_npy(root / "subs" / "f32", query, gallery)),
                               len(query), len(gallery), DIMS) not in prints


def test_codec_allow_list():
    meta = {"codecs": ({"name": "bytes", "configuration": {"endian": "little"}},
                       {"name": "zstd", "configuration": {"level": 0}})}
    ch.check_codecs("query/emb", meta)
    with pytest.raises(Exception, match="pickle"):
        ch.check_codecs("query/emb", {"dtype": "<f4", "filters": [{"id": "pickle"}], "compressor": None})
    with pytest.raises(Exception, match="vlen"):
        ch.check_codecs("query/emb", {"codecs": [{"name": "vlen-utf8", "configuration": {}}]})


def test_best_per_team():
    t = [ch.utc_now().replace(year=2025, month=1, day=d) for d in (1, 2, 3, 4)]
    table = pa.Table.from_pylist([
        {"team": "a", "submission": "1", "fingerprint": "x", "score": 0.5, "n_queries": 1, "n_evaluated": 1,
         "scored_at": t[0]},
        {"team": "a", "submission": "2", "fingerprint": "y", "score": 0.7, "n_queries": 1, "n_evaluated": 1,
         "scored_at": t[1]},
        {"team": "b", "submission": "3", "fingerprint": "z", "score": 0.7, "n_queries": 1, "n_evaluated": 1,
         "scored_at": t[0]},
        {"team": "c", "submission": "4", "fingerprint": "w", "score": None, "n_queries": 1, "n_evaluated": 0,
         "scored_at": t[3]},
    ], schema=ch.LEADERBOARD_SCHEMA)
    best = standings.best_per_team(table).to_pylist()
    assert [(r["team"], r["submission"]) for r in best] == [("b", "3"), ("a", "2"), ("c", "4")]


# --------------------------------------------------------------------------- team names in Unicode NFC

COMPOSED, DECOMPOSED = "\u00e9quipe", "e\u0301quipe"     # "équipe" typed two ways


def test_a_team_name_typed_composed_or_decomposed_is_one_team():
    assert COMPOSED != DECOMPOSED
    assert ch.check_team(DECOMPOSED) == ch.check_team(COMPOSED) == unicodedata.normalize("NFC", DECOMPOSED)
    assert ch.check_label("--name", "run-e\u0301") == "run-\u00e9"


def test_leaderboard_rows_of_both_spellings_are_one_team(tmp_path):
    board = tmp_path / "leaderboard.parquet"
    row = {"submission": "s", "n_queries": 1, "n_evaluated": 1, "scored_at": ch.utc_now()}
    standings.update_leaderboard(board, {**row, "team": DECOMPOSED, "fingerprint": "a", "score": 0.5})
    standings.update_leaderboard(board, {**row, "team": COMPOSED, "fingerprint": "a", "score": 0.6})   # same submission
    standings.update_leaderboard(board, {**row, "team": DECOMPOSED, "fingerprint": "b", "score": 0.7})
    table = ch.read_leaderboard(board).to_pylist()
    assert sorted((r["team"], r["fingerprint"], r["score"]) for r in table) == [(COMPOSED, "a", 0.6),
                                                                               (COMPOSED, "b", 0.7)]
    assert [(r["team"], r["score"]) for r in pq.read_table(ch.best_path(board)).to_pylist()] == [(COMPOSED, 0.7)]


def test_a_leaderboard_written_before_normalisation_joins_the_spellings(tmp_path):
    board = tmp_path / "leaderboard.parquet"
    when = ch.utc_now()
    pq.write_table(pa.Table.from_pylist([
        {"team": DECOMPOSED, "submission": "s", "fingerprint": "a", "score": 0.5, "n_queries": 1, "n_evaluated": 1,
         "scored_at": when},
        {"team": COMPOSED, "submission": "t", "fingerprint": "b", "score": 0.4, "n_queries": 1, "n_evaluated": 1,
         "scored_at": when}], schema=ch.LEADERBOARD_SCHEMA), board)
    assert {r["team"] for r in ch.read_leaderboard(board).to_pylist()} == {COMPOSED}
    assert [r["score"] for r in standings.best_per_team(ch.read_leaderboard(board)).to_pylist()] == [0.5]


def test_scoring_under_both_spellings_lands_on_one_team(small, tmp_path):
    root, query, gallery = small
    sub = save_npy(tmp_path / "subs" / "e\u0301t\u00e9", query, gallery)   # a decomposed folder name too
    board = tmp_path / "results" / "leaderboard.parquet"
    for i, team in enumerate((COMPOSED, DECOMPOSED)):
        assert main(["score", str(sub), "--truth", str(root / "truth.zarr"), "--out", str(tmp_path / "results" / str(i)),
                     "--team", team, "--quiet"]) == 0
        result = json.loads((tmp_path / "results" / str(i) / "result.json").read_text())
        assert (result["team"], result["submission"]) == (COMPOSED, "\u00e9t\u00e9")
    rows = pq.read_table(board).to_pylist()
    assert len(rows) == 1 and rows[0]["team"] == COMPOSED          # the same submission of the same team, once
    assert [r["team"] for r in pq.read_table(ch.best_path(board)).to_pylist()] == [COMPOSED]
