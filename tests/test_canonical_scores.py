"""A score depends only on its two vectors (README, "The canonical score").

The reference here is independent of the code: float64 matrix products,
and for every pair within a generous margin of a float32 rounding midpoint
the exact sum as a ``fractions.Fraction``, rounded to the nearest float32 (ties
to even) by comparing the candidates. Rankings are brute force: a full sort
per query by (score descending, tie policy, gallery index).
"""
from fractions import Fraction

import numpy as np
import pytest

import evalcore
from evalcore.core.canonical import canonical_block, canonical_pairs, exact_score

E24 = 2.0 ** -24


# --------------------------------------------------------------------------- the reference


def nearest_float32(x: Fraction) -> np.float32:
    """The float32 nearest to the exact rational x, ties to the even significand."""
    guess = np.float32(float(x))
    candidates = {guess, np.nextafter(guess, np.float32(np.inf)), np.nextafter(guess, np.float32(-np.inf))}
    best = min(abs(Fraction(float(c)) - x) for c in candidates)
    tied = [c for c in candidates if abs(Fraction(float(c)) - x) == best]
    if len(tied) == 1:
        return tied[0]
    return next(c for c in tied if int(np.array(c, np.float32).view(np.uint32)) % 2 == 0)


def reference_scores(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Canonical scores of every (a[i], b[j]): float64 products, exact rationals where rounding is close."""
    s = a.astype(np.float64) @ b.astype(np.float64).T
    out = s.astype(np.float32)
    ulp = np.abs(np.spacing(out)).astype(np.float64)
    # distance to the nearest midpoint between float32 neighbours, against a margin far above float64 error
    frac = np.abs((s - out.astype(np.float64)) / ulp)
    close = np.abs(frac - 0.5) < 1e-3
    for i, j in zip(*np.nonzero(close)):
        exact = sum((Fraction(float(x)) * Fraction(float(y)) for x, y in zip(a[i], b[j])), Fraction(0))
        out[i, j] = nearest_float32(exact)
    return out


def normalised(x: np.ndarray) -> np.ndarray:
    """Rows as the contract normalises them: x * float32(1 / ||x||), the norm summed in float64."""
    x = x.astype(np.float32)
    scale = (1.0 / np.sqrt(np.einsum("ij,ij->i", x, x, dtype=np.float64))).astype(np.float32)
    return x * scale[:, None]


def brute_force(scores: np.ndarray, relevant: np.ndarray, ties: str) -> list[dict]:
    """first_rank, ap, top1, top1_score per query from a full sort of the reference scores."""
    out = []
    for i in range(len(scores)):
        tie = relevant[i] if ties == "pessimistic" else ~relevant[i]
        order = np.lexsort((np.arange(scores.shape[1]), tie, -scores[i].astype(np.float64)))
        ranks = np.flatnonzero(relevant[i][order]) + 1
        ap = float(np.mean(np.arange(1, len(ranks) + 1) / ranks)) if len(ranks) else None
        out.append({"first_rank": int(ranks[0]) if len(ranks) else None, "ap": ap, "top1": int(order[0]),
                    "top1_score": float(scores[i, order[0]])})
    return out


def planted(seed: int, n_query=30, n_gallery=4105, dims=32, n_labels=12):
    """Random rows with exact duplicates of relevant rows under other labels, and 1-ulp near-duplicates."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_query, dims)).astype(np.float32)
    g = rng.standard_normal((n_gallery, dims)).astype(np.float32)
    ql = rng.integers(0, n_labels, n_query)
    gl = rng.integers(0, n_labels, n_gallery)
    # queries close to some gallery rows, so duplicates of those land near the top
    q[: n_query // 2] = g[rng.choice(n_gallery, n_query // 2, replace=False)] + 0.05 * q[: n_query // 2]
    src = rng.choice(n_gallery, 300, replace=False)
    dst = rng.choice(np.setdiff1d(np.arange(n_gallery), src), 300, replace=False)
    g[dst[:200]] = g[src[:200]]                                            # exact duplicates
    g[dst[200:]] = g[src[200:]]
    g[dst[200:], 0] = np.nextafter(g[dst[200:], 0], np.float32(np.inf))    # one ulp off
    gl[dst] = (gl[src] + 1) % n_labels
    return q, g, ql, gl


def per_query(result, names=("first_rank", "ap", "top1", "top1_score")):
    return {n: result.per_query.column(n).to_pylist() for n in names}


# --------------------------------------------------------------------------- the score itself


def test_a_sum_on_a_float32_midpoint_rounds_by_the_exact_value_not_the_float64_one():
    # 1 + 2**-24 is the midpoint of 1 and the next float32; the third product (2**-60) is below float64's
    # resolution at 1, so a float64 sum lands exactly on the midpoint and would round to even (1.0)
    a = np.array([[1.0, E24, 2.0 ** -30]], np.float32)
    for tail, want in ((1.0, np.nextafter(np.float32(1), np.float32(2))), (-1.0, np.float32(1.0)),
                       (0.0, np.float32(1.0))):
        b = np.array([[1.0, 1.0, tail * 2.0 ** -30]], np.float32)
        assert exact_score(a[0], b[0]) == want
        assert canonical_pairs(a, b, [0], [0])[0] == want
        assert canonical_block(a, b)[0, 0] == want
        assert nearest_float32(Fraction(1) + Fraction(1, 2 ** 24) + Fraction(int(tail), 2 ** 60)) == want


@pytest.mark.parametrize("dims", [3, 64, 513])
def test_canonical_scores_equal_the_exact_reference_on_random_rows(dims):
    rng = np.random.default_rng(dims)
    a = normalised(rng.standard_normal((40, dims)))
    b = normalised(rng.standard_normal((300, dims)))
    want = reference_scores(a, b)
    ia, ib = np.meshgrid(np.arange(40), np.arange(300), indexing="ij")
    assert np.array_equal(canonical_pairs(a, b, ia.ravel(), ib.ravel()).reshape(40, 300), want)
    assert np.array_equal(canonical_block(a, b), want)
    few = rng.choice(ia.size, 500, replace=False)  # the loop over pairs, not the block
    assert np.array_equal(canonical_pairs(a, b, ia.ravel()[few], ib.ravel()[few]), want.ravel()[few])


def test_canonical_scores_do_not_depend_on_row_order_or_what_else_is_scored():
    rng = np.random.default_rng(5)
    a = normalised(rng.standard_normal((7, 300)))
    b = normalised(rng.standard_normal((5000, 300)))
    whole = canonical_block(a, b)
    perm = rng.permutation(len(b))
    assert np.array_equal(canonical_block(a, b[perm]), whole[:, perm])
    assert np.array_equal(canonical_block(a[3:4], b[17:18]), whole[3:4, 17:18])


# --------------------------------------------------------------------------- rankings


@pytest.mark.parametrize("ties", ["pessimistic", "optimistic"])
@pytest.mark.parametrize("seed", [0, 1])
def test_ranks_equal_a_brute_force_ranking_of_exact_scores_with_planted_duplicates(seed, ties):
    q, g, ql, gl = planted(seed)
    r = evalcore.evaluate(query=q, gallery=g, query_labels=ql, gallery_labels=gl, protocol="class", ties=ties)
    scores = reference_scores(normalised(q), normalised(g))
    want = brute_force(scores, ql[:, None] == gl[None, :], ties)
    got = per_query(r)
    for name in ("first_rank", "top1", "top1_score"):
        assert got[name] == [w[name] for w in want], name
    assert got["ap"] == pytest.approx([w["ap"] for w in want], abs=1e-15)


def test_results_are_bit_identical_under_a_permutation_of_the_gallery():
    q, g, ql, gl = planted(2)
    perm = np.random.default_rng(9).permutation(len(g))
    a = evalcore.evaluate(query=q, gallery=g, query_labels=ql, gallery_labels=gl, protocol="class")
    b = evalcore.evaluate(query=q, gallery=g[perm], query_labels=ql, gallery_labels=gl[perm], protocol="class")
    for name in ("n_relevant", "first_rank", "last_rank", "ap", "inp", "hit_at_1", "recall_at_10", "top1_score",
                 "relevant_score"):
        assert a.per_query.column(name).equals(b.per_query.column(name)), name
    assert a.summary.equals(b.summary)
    # rank 1 is the same row: the lowest index among tied rows, so compare the rows, not the indices
    top_a = np.array(a.per_query.column("top1").to_pylist())
    top_b = perm[np.array(b.per_query.column("top1").to_pylist())]
    assert np.array_equal(g[top_a], g[top_b])


@pytest.mark.parametrize("n_gallery", [4097, 4105, 8191])
def test_narrow_last_gallery_tiles_give_exact_ranks(n_gallery):
    q, g, ql, gl = planted(3, n_gallery=n_gallery, dims=48)
    r = evalcore.evaluate(query=q, gallery=g, query_labels=ql, gallery_labels=gl, protocol="class")
    want = brute_force(reference_scores(normalised(q), normalised(g)), ql[:, None] == gl[None, :], "pessimistic")
    assert per_query(r, ("first_rank", "top1", "top1_score")) == {
        n: [w[n] for w in want] for n in ("first_rank", "top1", "top1_score")}


def test_short_query_tiles_give_the_rows_a_longer_run_gives():
    q, g, ql, gl = planted(4, n_query=1100, n_gallery=4200, dims=40)
    whole = evalcore.evaluate(query=q, gallery=g, query_labels=ql, gallery_labels=gl, protocol="class")
    for n in (1, 513, 700):
        part = evalcore.evaluate(query=q[:n], gallery=g, query_labels=ql[:n], gallery_labels=gl, protocol="class")
        assert part.per_query.equals(whole.per_query.slice(0, n)), n


def test_a_float16_copy_gives_the_results_of_float32_rows_of_equal_values():
    q, g, ql, gl = planted(5, dims=64)
    q16, g16 = q.astype(np.float16), g.astype(np.float16)
    a = evalcore.evaluate(query=q16, gallery=g16, query_labels=ql, gallery_labels=gl, protocol="class")
    b = evalcore.evaluate(query=q16.astype(np.float32), gallery=g16.astype(np.float32), query_labels=ql,
                          gallery_labels=gl, protocol="class")
    assert a.per_query.equals(b.per_query) and a.summary.equals(b.summary)


@pytest.mark.parametrize("similarity", ["cosine", "dot"])
def test_a_constant_submission_scores_exactly_the_tie_formula(similarity):
    """37 queries against 4,105 identical gallery rows (the narrow last tile that once split the tie)."""
    rng = np.random.default_rng(6)
    n_gallery = 4105
    q = rng.standard_normal((37, 512)).astype(np.float32)
    g = np.tile(rng.standard_normal(512).astype(np.float32), (n_gallery, 1))
    ql, gl = rng.integers(0, 20, 37), rng.integers(0, 20, n_gallery)
    for ties in ("pessimistic", "optimistic"):
        r = evalcore.evaluate(query=q, gallery=g, query_labels=ql, gallery_labels=gl, protocol="class", ties=ties,
                              similarity=similarity)
        n_rel = np.array(r.per_query.column("n_relevant").to_pylist())
        ap = r.per_query.column("ap").to_pylist()
        for n, got in zip(n_rel, ap):
            k = np.arange(1, n + 1)
            want = float(np.mean(k / (n_gallery - n + k))) if ties == "pessimistic" else 1.0
            assert got == pytest.approx(want, rel=1e-14, abs=0)
        # rank 1 among the tie: the lowest index of the side the policy puts first
        top1 = r.per_query.column("top1").to_pylist()
        for i in range(37):
            side = np.flatnonzero((gl == ql[i]) == (ties == "optimistic"))
            assert top1[i] == side[0]
        # every row ties: rank 1, relevant or not, scores exactly what the best relevant item scores
        top_scores = r.per_query.column("top1_score").to_pylist()
        best_relevant = r.per_query.column("relevant_score").to_pylist()
        assert all(t == b for t, b, n in zip(top_scores, best_relevant, n_rel) if n)


@pytest.mark.parametrize("ties", ["pessimistic", "optimistic"])
def test_a_collapsed_submission_ranks_as_its_exact_scores(ties):
    """Gallery rows drawn from 3 vectors plus noise of 1e-6: every pair's estimate is undecided, so tiles
    turn dense (computed canonically first) and many sums need the double-double pass."""
    rng = np.random.default_rng(7)
    q = rng.standard_normal((40, 64)).astype(np.float32)
    centres = rng.standard_normal((3, 64))
    g = (centres[rng.integers(0, 3, 8300)] + rng.normal(0, 1e-6, (8300, 64))).astype(np.float32)
    g[5000:5010] = g[10:20]  # and exact duplicates
    ql, gl = rng.integers(0, 5, 40), rng.integers(0, 5, 8300)
    r = evalcore.evaluate(query=q, gallery=g, query_labels=ql, gallery_labels=gl, protocol="class", ties=ties)
    want = brute_force(reference_scores(normalised(q), normalised(g)), ql[:, None] == gl[None, :], ties)
    got = per_query(r)
    for name in ("first_rank", "top1", "top1_score"):
        assert got[name] == [w[name] for w in want], name
    assert got["ap"] == pytest.approx([w["ap"] for w in want], abs=1e-15)


def test_results_do_not_depend_on_the_blas_kernel(tmp_path):
    """The same data in two processes whose OpenBLAS picks different CPU kernels (OPENBLAS_CORETYPE; numpy's
    wheels choose at run time), whose matrix products differ in the last bits: identical tables."""
    import os
    import subprocess
    import sys

    import pyarrow.parquet as pq

    q, g, ql, gl = planted(8, n_query=200, n_gallery=4500, dims=256)
    np.savez(tmp_path / "data.npz", q=q, g=g, ql=ql, gl=gl)
    script = ("import sys, numpy as np, evalcore, pyarrow.parquet as pq; d = np.load(sys.argv[1]); "
              "r = evalcore.evaluate(query=d['q'], gallery=d['g'], query_labels=d['ql'], gallery_labels=d['gl'], "
              "protocol='class'); pq.write_table(r.per_query, sys.argv[2])")
    tables = []
    for core in ("Haswell", "Nehalem"):
        out = tmp_path / f"{core}.parquet"
        subprocess.run([sys.executable, "-c", script, str(tmp_path / "data.npz"), str(out)], check=True,
                       env={**os.environ, "OPENBLAS_CORETYPE": core})
        tables.append(pq.read_table(out))
    assert tables[0].equals(tables[1])
