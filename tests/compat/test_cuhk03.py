"""CUHK03's single-gallery-shot protocol: evalcore.cuhk03 and evaluate_rank(..., use_metric_cuhk03=True).

The reference is torchreid's ``eval_cuhk03`` (torchreid/metrics/rank.py, and
fast-reid's copy in fastreid/evaluation/rank.py) re-written below from its
definition: per query, sort the gallery by distance, remove the items of the
query's identity and camera, skip a query with no match left, then for each
of the repeats keep one image per gallery identity, take the cumulative
match curve of the kept images, clip at 1, cut at max_rank, average over the
repeats; AP on the whole (unsampled) sorted list. torchreid draws its images
with ``np.random.choice``; here the reference is handed the images evalcore's
sampler drew, so the two must agree to the last bit of float64. Ties: the
reference sorts a match after every non-match at the same distance
(evalcore's pessimistic rule; torchreid's argsort leaves that order open).
The draw itself is checked against the documented formula written again
with Python integers, and SplitMix64 against its published first output.
"""
from __future__ import annotations

import inspect
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import evalcore
from evalcore.compat import fastreid, torchreid
from evalcore.core.single_shot import identity_groups, sample_gallery, splitmix64
from evalcore.errors import InputError

MASK = (1 << 64) - 1


# --------------------------------------------------------------------------- references


def splitmix64_reference(z: int) -> int:
    """Vigna's splitmix64.c next() on state z - gamma, with Python integers."""
    z = (z + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def draw_reference(seed: int, query: int, repeat: int, key: int) -> int:
    h = splitmix64_reference(seed)
    h = splitmix64_reference((h + query) & MASK)
    h = splitmix64_reference((h + repeat) & MASK)
    return splitmix64_reference((h + key) & MASK)


def pessimistic_order(row, matches):
    """Ascending distance, a match after the non-matches it ties with."""
    return np.lexsort((matches.astype(np.int8), row))


def cuhk03_reference(distmat, q_pids, g_pids, q_camids, g_camids, max_rank, drawn):
    """torchreid's eval_cuhk03 with the random images replaced by ``drawn[q]`` ((repeats, J) gallery rows, the
    images kept for query q). Returns (all_cmc float64, per-query AP list, counted query rows)."""
    num_q, num_g = distmat.shape
    max_rank = min(max_rank, num_g)
    all_cmc, all_ap, rows = [], [], []
    for q in range(num_q):
        order = pessimistic_order(distmat[q], g_pids == q_pids[q])
        keep = ~((g_pids[order] == q_pids[q]) & (g_camids[order] == q_camids[q]))
        raw_cmc = (g_pids[order] == q_pids[q])[keep].astype(np.int64)
        if not raw_cmc.any():
            continue
        kept_rows = order[keep]
        cmc = np.zeros(max_rank)
        for images in drawn[q]:
            mask = np.isin(kept_rows, images)
            assert mask.sum() == len(images)  # every drawn image is a kept one
            curve = np.minimum(raw_cmc[mask].cumsum(), 1)[:max_rank]
            cmc += np.pad(curve, (0, max_rank - curve.size), constant_values=1)  # evalcore: 1 past the end
        all_cmc.append(cmc / len(drawn[q]))
        hits = raw_cmc.cumsum()
        all_ap.append(float((hits / np.arange(1, raw_cmc.size + 1) * raw_cmc).sum() / raw_cmc.sum()))
        rows.append(q)
    return np.mean(all_cmc, axis=0), all_ap, rows


def drawn_images(q_pids, g_pids, q_camids, g_camids, repeats, seed):
    """evalcore's draws for every query as {query row: (repeats, J) gallery rows} (identities coded >= 0)."""
    codes = {v: i for i, v in enumerate(sorted(set(q_pids.tolist()) | set(g_pids.tolist())))}
    q_codes = np.array([codes[v] for v in q_pids.tolist()], dtype=np.int64)
    g_codes = np.array([codes[v] for v in g_pids.tolist()], dtype=np.int64)
    groups = identity_groups(g_codes)
    items, _, counted = sample_gallery(groups, np.asarray(g_camids), np.arange(q_codes.size), q_codes,
                                       np.asarray(q_camids), repeats, seed)
    return {q: items[q] for q in range(q_codes.size) if counted[q]}


def random_reid(seed, num_q=30, num_g=200, ids=20, cams=3, ties=False):
    """Distances (distinct values, or many ties); pids with -1 (an identity in torchreid) and queries whose
    identity is missing from the gallery."""
    rng = np.random.default_rng(seed)
    distmat = rng.integers(0, 6, (num_q, num_g)).astype(np.float64) if ties else rng.random((num_q, num_g))
    q_pids = rng.integers(-1, ids + 3, num_q)
    g_pids = rng.integers(-1, ids, num_g)
    return distmat, q_pids, g_pids, rng.integers(0, cams, num_q), rng.integers(0, cams, num_g)


# --------------------------------------------------------------------------- the draw


def test_splitmix64_gives_its_published_first_output():
    # splitmix64.c (Vigna, prng.di.unimi.it): state 0 -> first output 0xe220a8397b1dcdaf
    assert splitmix64_reference(0) == 0xE220A8397B1DCDAF
    assert int(splitmix64(np.uint64(0))) == 0xE220A8397B1DCDAF


@pytest.mark.parametrize("seed", [0, 1, 2 ** 64 - 1])
def test_each_draw_is_the_documented_formula(seed):
    distmat, q_pids, g_pids, q_camids, g_camids = random_reid(3)
    drawn = drawn_images(q_pids, g_pids, q_camids, g_camids, 4, seed)
    for q, images in drawn.items():
        for r, row in enumerate(images):
            for item in row:
                same = np.flatnonzero(g_pids == g_pids[item])  # the identity's gallery rows, ascending
                kept = same[~((g_pids[same] == q_pids[q]) & (g_camids[same] == q_camids[q]))]
                u = draw_reference(seed, q, r, int(same[0]))
                assert item == kept[u % kept.size]
            assert sorted(g_pids[row].tolist()) == sorted(set(g_pids.tolist()))  # one image per identity


def test_the_draw_is_uniform_over_the_identitys_kept_images():
    g_pids, g_camids = np.array([0, 0, 0, 0, 1, 1, 1]), np.array([1, 2, 3, 0, 1, 1, 1])
    groups = identity_groups(g_pids)
    items, _, counted = sample_gallery(groups, g_camids, np.array([5]), np.array([1]), np.array([0]), 4000, 7)
    assert counted.tolist() == [True]
    counts = np.bincount(items[0, :, 0], minlength=4)  # identity 0: 1000 expected each, sd ~27
    assert counts.sum() == 4000 and (np.abs(counts - 1000) < 140).all()
    counts = np.bincount(items[0, :, 1], minlength=7)[4:]
    assert (np.abs(counts - 4000 / 3) < 160).all()


# --------------------------------------------------------------------------- the numbers


@pytest.mark.parametrize("seed, ties", [(0, False), (1, False), (2, True), (3, True), (12345, False)])
def test_cuhk03_equals_torchreids_definition_on_the_same_draws(seed, ties):
    distmat, q_pids, g_pids, q_camids, g_camids = random_reid(seed, ties=ties)
    got = evalcore.cuhk03(distances=distmat, query_labels=q_pids + 1, gallery_labels=g_pids + 1,
                          query_cams=q_camids, gallery_cams=g_camids, repeats=10, seed=seed, max_rank=15)
    drawn = drawn_images(q_pids, g_pids, q_camids, g_camids, 10, seed)
    want_cmc, want_ap, rows = cuhk03_reference(distmat, q_pids, g_pids, q_camids, g_camids, 15, drawn)
    assert 0 < len(rows) < len(q_pids)  # some queries skipped
    assert got.queries.tolist() == rows and got.cmc.shape == (15,)
    np.testing.assert_allclose(got.cmc, want_cmc, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(got.ap, want_ap, rtol=1e-12, atol=0)
    assert got.map == pytest.approx(np.mean(want_ap), rel=1e-12)

    cmc, mAP = torchreid.evaluate_rank(distmat, q_pids, g_pids, q_camids, g_camids, 15, True, seed=seed)
    assert cmc.dtype == np.float32
    np.testing.assert_allclose(cmc, want_cmc.astype(np.float32), rtol=1e-6, atol=0)
    assert mAP == pytest.approx(np.mean(want_ap), rel=1e-12)


def test_a_gallery_with_fewer_identities_than_max_rank_keeps_cmc_1_past_them():
    distmat, q_pids, g_pids, q_camids, g_camids = random_reid(4, ids=6)
    got = evalcore.cuhk03(distances=distmat, query_labels=q_pids + 1, gallery_labels=g_pids + 1,
                          query_cams=q_camids, gallery_cams=g_camids, seed=4, max_rank=20)
    drawn = drawn_images(q_pids, g_pids, q_camids, g_camids, 10, 4)
    want_cmc, _, _ = cuhk03_reference(distmat, q_pids, g_pids, q_camids, g_camids, 20, drawn)
    np.testing.assert_allclose(got.cmc, want_cmc, rtol=1e-12, atol=1e-15)
    assert got.cmc[6:].tolist() == [1.0] * 14 and got.cmc[5] < 1  # 7 identities (with -1): rank <= 7


def test_compat_calls_as_torchreid_and_fastreid_users_write_them():
    distmat, q_pids, g_pids, q_camids, g_camids = random_reid(5, num_g=300, ids=60)
    drawn = drawn_images(q_pids, g_pids, q_camids, g_camids, 10, 0)  # seed 0: the default
    want_cmc, want_ap, _ = cuhk03_reference(distmat, q_pids, g_pids, q_camids, g_camids, 50, drawn)
    for module in (torchreid, fastreid):
        for got in (module.evaluate_rank(distmat, q_pids, g_pids, q_camids, g_camids, 50, True),
                    module.evaluate_rank(distmat, q_pids, g_pids, q_camids, g_camids, use_metric_cuhk03=True)):
            cmc, mAP = got  # two values, fast-reid's eval_cuhk03 too
            np.testing.assert_allclose(cmc, want_cmc.astype(np.float32), rtol=1e-6, atol=0)
            assert cmc.shape == (50,) and mAP == pytest.approx(np.mean(want_ap), rel=1e-12)
    # identities as strings: the same partition, the same draws
    strings = torchreid.evaluate_rank(distmat, [f"p{v}" for v in q_pids], [f"p{v}" for v in g_pids],
                                      q_camids, g_camids, 50, True)
    np.testing.assert_array_equal(strings[0], torchreid.evaluate_rank(distmat, q_pids, g_pids, q_camids,
                                                                      g_camids, 50, True)[0])


def test_the_same_seed_gives_the_same_numbers_for_every_chunking_and_other_seeds_differ():
    distmat, q_pids, g_pids, q_camids, g_camids = random_reid(6, num_q=40, ties=True)
    args = dict(distances=distmat, query_labels=q_pids + 1, gallery_labels=g_pids + 1, query_cams=q_camids,
                gallery_cams=g_camids, max_rank=10)
    first = evalcore.cuhk03(**args, seed=9)
    for chunk_rows in (1, 3, 17, 1000):
        again = evalcore.cuhk03(**args, seed=9, chunk_rows=chunk_rows)
        np.testing.assert_array_equal(again.ranks, first.ranks)
        assert again.cmc.tobytes() == first.cmc.tobytes() and again.ap.tobytes() == first.ap.tobytes()
    # the queries in another order of processing: query 7 alone draws what it drew among all
    alone = evalcore.cuhk03(**{**args, "distances": distmat[:8], "query_labels": q_pids[:8] + 1,
                               "query_cams": q_camids[:8]}, seed=9)
    np.testing.assert_array_equal(alone.ranks, first.ranks[:alone.queries.size])
    others = [evalcore.cuhk03(**args, seed=s) for s in (10, 11)]
    assert all(not np.array_equal(o.ranks, first.ranks) for o in others)
    assert all(o.ap.tobytes() == first.ap.tobytes() for o in others)  # the AP is not sampled
    more = evalcore.cuhk03(**args, seed=9, repeats=25)
    np.testing.assert_array_equal(more.ranks[:, :10], first.ranks)  # repeat r's draw does not depend on how many


# --------------------------------------------------------------------------- the signature and bad input


def test_seed_is_an_extra_keyword_after_torchreids_parameters():
    for module in (torchreid, fastreid):
        parameters = list(inspect.signature(module.evaluate_rank).parameters.values())
        assert [p.name for p in parameters][-3:] == ["use_metric_cuhk03", "use_cython", "seed"]
        assert parameters[-1].kind is inspect.Parameter.KEYWORD_ONLY and parameters[-1].default == 0


@pytest.mark.parametrize("change, name", [
    (dict(repeats=0), "repeats"),
    (dict(repeats=True), "repeats"),
    (dict(repeats=10 ** 9), "repeats"),
    (dict(seed=-1), "seed"),
    (dict(seed=2 ** 64), "seed"),
    (dict(seed=1.5), "seed"),
    (dict(chunk_rows=0), "chunk_rows"),
    (dict(max_rank=0), "max_rank"),
    (dict(distances=np.zeros(3)), "distances"),
    (dict(distances=np.full((2, 3), np.nan)), "distances"),
    (dict(query_labels=[1, 2, 3]), "query_labels"),
    (dict(gallery_cams=[0, None, 1]), "gallery_cams"),
    (dict(query_labels=[5, 6]), "query_labels"),                   # no query has a match
    (dict(query_cams=[1, 1], gallery_cams=[1, 1, 1]), "query_labels"),  # matches only under the own camera
])
def test_bad_input_is_one_input_error_naming_the_parameter(change, name):
    args = dict(distances=np.array([[0.1, 0.2, 0.3], [0.3, 0.2, 0.1]]), query_labels=[1, 2],
                gallery_labels=[1, 2, 2], query_cams=[0, 0], gallery_cams=[1, 1, 1])
    with pytest.raises(InputError) as info:
        evalcore.cuhk03(**{**args, **change})
    assert str(info.value).startswith(f"{name}: ") and "\n" not in str(info.value)


@pytest.mark.parametrize("change, name", [
    (dict(seed=-1), "seed"),
    (dict(q_pids=[5, 6]), "q_pids"),
    (dict(distmat=np.full((2, 3), np.nan)), "distmat"),
    (dict(q_camids=[None, 1]), "q_camids"),
])
def test_compat_bad_input_names_the_tools_parameter(change, name):
    args = dict(distmat=np.array([[0.1, 0.2, 0.3], [0.3, 0.2, 0.1]]), q_pids=[1, 2], g_pids=[1, 2, 2],
                q_camids=[0, 0], g_camids=[1, 1, 1], use_metric_cuhk03=True)
    for module in (torchreid, fastreid):
        with pytest.raises(InputError) as info:
            module.evaluate_rank(**{**args, **change})
        assert str(info.value).startswith(f"{name}: ") and "\n" not in str(info.value)


def test_the_draws_are_held_block_by_block_in_bounded_memory():
    # 100 queries x 20,000 identities x 10 repeats = 20M draws (at once: over 400 MB more; in blocks: ~100 MB)
    script = textwrap.dedent("""
        import resource, numpy as np, evalcore
        rng = np.random.default_rng(0)
        args = dict(distances=rng.random((100, 20000)).astype(np.float32),
                    query_labels=rng.integers(0, 20000, 100), gallery_labels=np.arange(20000),
                    query_cams=np.zeros(100, int), gallery_cams=np.ones(20000, int))
        evalcore.cuhk03(**args, repeats=1)  # imports and the AP's engine warm: what grows next is the draws
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        r = evalcore.cuhk03(**args, repeats=10)
        print(r.ranks.shape[1], (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    repeats, grown_mib = map(int, done.stdout.split()[-2:])
    assert repeats == 10 and grown_mib < 200
