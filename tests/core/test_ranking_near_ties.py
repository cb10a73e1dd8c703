"""Exact ranks from the tiled kernel (core/ranking.py rank_by_embeddings) with planted near-ties.

Embeddings are dyadic (few mantissa bits), so every product and partial sum
is exact in float32: the float64 brute-force scores equal the float32 scores
whatever order BLAS sums in, and ties planted as equal or 1 ulp apart stay
exactly that. Relevant items and the negatives tied with them sit in
different 4096-column gallery tiles, so the rank must be settled across tiles.
"""
import numpy as np
import pytest

from evalcore.core import ranking
from evalcore.core.protocols import class_truth
from evalcore.core.ranking import TILE_COLS, rank_by_embeddings

E23, E24 = 2.0 ** -23, 2.0 ** -24
QUERY = np.array([[1.0, 1.0, 0.5, 0.25], [0.25, 0.5, 1.0, 1.0], [1.0, 0.0, 0.0, 0.0]])
QUERY_LABEL = np.array([100, 101, 7])   # the third query's label has no gallery item: unknown


class InMemoryGallery:
    """The gallery interface of rank_by_embeddings over one array, in TILE_COLS blocks."""

    def __init__(self, rows):
        self.data = np.ascontiguousarray(rows, dtype=np.float32)
        self.n_rows = len(rows)

    def blocks(self):
        for g0 in range(0, self.n_rows, TILE_COLS):
            yield g0, self.data[g0:g0 + TILE_COLS]

    def rows(self, idx):
        return self.data[np.asarray(idx)]


def planted_gallery(seed=0):
    """Filler of small dyadic scores, and planted rows: (gallery rows, labels, junk)."""
    rng = np.random.default_rng(seed)
    g = TILE_COLS + 900
    rows = rng.integers(-4, 5, (g, 4)) / 16.0           # filler: scores multiples of 1/64, |s| <= 0.69
    labels = np.full(g, -1)
    labels[rng.choice(g, 30, replace=False)] = 100
    labels[rng.choice(g, 30, replace=False)] = 101
    junk = rng.random(g) < 0.01
    t1 = TILE_COLS                                    # first column of the second tile

    def plant(index, row, label=-1, is_junk=False):
        rows[index], labels[index], junk[index] = row, label, is_junk

    # query 0: relevant scoring exactly 1 in tile 0; negatives at 1, 1 + 1 ulp, 1 - 1 ulp in tile 1
    plant(7, [0.5, 0.5, 0, 0], 100)
    plant(t1 + 3, [0.5, 0.5, 0, 0])
    plant(t1 + 4, [0.5, 0.5 + E23, 0, 0])
    plant(t1 + 5, [0.5, 0.5 - E24, 0, 0])
    plant(t1 + 6, [0.5, 0.5 + E23, 0, 0], is_junk=True)      # above it, but gallery/junk
    # query 0: relevant scoring exactly 0.5 in tile 1, among many filler scores equal to 0.5
    plant(t1 + 10, [0.25, 0.25, 0, 0], 100)
    # query 1: relevant scoring exactly 1 in tile 1; negatives at 1, 1 + 1 ulp, 1 - 1 ulp in tile 0
    # (every planted row scores exactly for every query: no partial sum needs more than 24 bits)
    plant(t1 + 20, [0, 0, 0.5, 0.5], 101)
    plant(11, [0, 0, 0.5, 0.5])
    plant(12, [0, 0, 0.5, 0.5 + E23])
    plant(14, [0, 0, 0.5 - E24, 0.5])
    # a relevant pair scoring the same for query 1 in both tiles
    plant(15, [0, 0, 0.25, 0.5], 101)
    plant(t1 + 21, [0, 0, 0.25, 0.5], 101)
    return rows.astype(np.float32), labels, junk


def brute_force(query, gallery, relevant, junk, ties):
    """Full float64 score matrix and a full sort per query (score desc, tie policy, index)."""
    scores = query.astype(np.float64) @ gallery.astype(np.float64).T
    out = []
    for i in range(len(query)):
        keep = np.flatnonzero(~junk)
        rel = relevant[i][keep]
        tie = rel if ties == "pessimistic" else ~rel
        order = np.lexsort((keep, tie, -scores[i][keep]))
        ranks = (np.flatnonzero(rel[order]) + 1).tolist()
        top = keep[order[0]]
        out.append({"ranks": ranks, "top1": int(top), "top1_score": float(scores[i, top]),
                    "relevant_score": float(scores[i][keep][rel].max()) if rel.any() else None})
    return out


def evalcore_ranks(ties, seed=0, gallery_class=InMemoryGallery):
    gallery, labels, junk = planted_gallery(seed)
    truth = class_truth(QUERY_LABEL, labels, junk)
    ranked = rank_by_embeddings(QUERY.astype(np.float32), 0, truth, gallery_class(gallery), n_query=len(QUERY),
                                similarity="dot", ties=ties, gallery_junk=junk)
    relevant = (QUERY_LABEL[:, None] == labels[None, :]) & ~junk[None, :]
    return ranked, brute_force(QUERY, gallery, relevant, junk, ties)


def test_planted_scores_are_exact_in_float32():
    gallery, _, _ = planted_gallery()
    float32 = (QUERY.astype(np.float32) @ gallery.T).astype(np.float64)
    assert np.array_equal(float32, QUERY @ gallery.astype(np.float64).T)
    s = QUERY[0] @ gallery[TILE_COLS + 4].astype(np.float64)
    assert s == 1 + E23 and np.float32(s) == np.nextafter(np.float32(1), np.float32(2))


@pytest.mark.parametrize("ties", ["pessimistic", "optimistic"])
def test_ranks_across_tiles_equal_brute_force_with_near_ties(ties):
    ranked, want = evalcore_ranks(ties)
    got = [ranked.ranks[ranked.indptr[i]:ranked.indptr[i + 1]].tolist() for i in range(len(QUERY))]
    assert got == [w["ranks"] for w in want]
    assert ranked.near_ties > 0        # the planted ties went through the exact comparison


@pytest.mark.parametrize("ties", ["pessimistic", "optimistic"])
def test_rank_one_and_best_relevant_score_equal_brute_force_with_near_ties(ties):
    ranked, want = evalcore_ranks(ties)
    assert ranked.top1.tolist() == [w["top1"] for w in want]
    assert ranked.top1_score.tolist() == [w["top1_score"] for w in want]
    got_rel = [None if np.isnan(v) else v for v in ranked.relevant_score.tolist()]
    assert got_rel == [w["relevant_score"] for w in want]


def test_pessimistic_ties_rank_the_tied_negative_first_and_optimistic_after():
    # query 0's relevant at 1.0 (item 7) meets negatives at 1 + 1 ulp (one, one junk) and exactly 1 (one)
    pess, _ = evalcore_ranks("pessimistic")
    opt, _ = evalcore_ranks("optimistic")
    assert pess.ranks[pess.indptr[0]] == 3 and opt.ranks[opt.indptr[0]] == 2


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_ranks_equal_brute_force_for_other_fillers(seed):
    for ties in ("pessimistic", "optimistic"):
        ranked, want = evalcore_ranks(ties, seed)
        got = [ranked.ranks[ranked.indptr[i]:ranked.indptr[i + 1]].tolist() for i in range(len(QUERY))]
        assert got == [w["ranks"] for w in want]


@pytest.mark.parametrize("ties", ["pessimistic", "optimistic"])
@pytest.mark.parametrize("seed", [0, 1])
def test_ranks_are_the_same_when_the_matrix_product_is_off_in_the_last_bits(ties, seed, monkeypatch):
    """Another BLAS library, CPU or device sums in another order: every tile score moved by up to one ulp
    (within the error bound at D = 4) must change nothing, since every decision is on canonical scores."""
    rng = np.random.default_rng(seed)

    def jittered(qtile, gtile, out):
        s = np.matmul(qtile, gtile.T, out=out)
        step = rng.integers(-1, 2, s.shape)
        s[...] = np.where(step > 0, np.nextafter(s, np.float32(np.inf)),
                          np.where(step < 0, np.nextafter(s, np.float32(-np.inf)), s))
        return s

    clean, want = evalcore_ranks(ties, seed)
    monkeypatch.setattr(ranking, "tile_scores", jittered)
    ranked, _ = evalcore_ranks(ties, seed)
    got = [ranked.ranks[ranked.indptr[i]:ranked.indptr[i + 1]].tolist() for i in range(len(QUERY))]
    assert got == [w["ranks"] for w in want]
    assert ranked.top1.tolist() == clean.top1.tolist() == [w["top1"] for w in want]
    assert ranked.top1_score.tolist() == clean.top1_score.tolist()
