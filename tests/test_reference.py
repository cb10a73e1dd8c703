"""evalcore against the brute-force evaluator in tests/reference.py, on random data."""
import numpy as np
import pytest
from conftest import random_reid
from reference import cosine_scores, evaluate_all, relevance_class, relevance_reid

from evalcore.engine.evaluate import Options, evaluate

COLUMNS = ["n_relevant", "n_junk", "first_rank", "last_rank", "ap", "ap_trapz", "inp", "rr", "top1"]


def compare(result, expected, ks, extra=(), skip=()):
    rows = result.per_query.to_pylist()
    assert len(rows) == len(expected)
    names = COLUMNS + [f"{m}_at_{k}" for k in ks for m in ("hit", "recall", "precision")] + list(extra)
    mismatches = []
    for q, (got, want) in enumerate(zip(rows, expected)):
        if q in skip:
            continue
        for name in names:
            a, b = got[name], want[name]
            if a is None or b is None:
                ok = a is None and b is None
            elif isinstance(b, str):
                ok = a == b
            else:
                ok = abs(float(a) - float(b)) <= 1e-9 * max(1.0, abs(float(b)))
            if not ok:
                mismatches.append((q, name, a, b))
    assert not mismatches, f"{len(mismatches)} mismatches, first: {mismatches[:5]}"


def relevance(arrays, protocol):
    gj = arrays.get("gallery/junk")
    if protocol == "reid":
        return relevance_reid(arrays["query/label"], arrays["query/cam"], arrays["gallery/label"],
                              arrays["gallery/cam"], gj)
    return relevance_class(arrays["query/label"], arrays["gallery/label"], gj)


def reference(arrays, protocol, ks, ties="pessimistic", similarity="cosine", **kw):
    scores = cosine_scores(arrays["query/emb"], arrays["gallery/emb"], similarity)
    rel, junk = relevance(arrays, protocol)
    return evaluate_all(scores, rel, junk, ks, ties=ties, **kw)


def ambiguous_queries(arrays, protocol, gap=5e-7):
    """Queries where float32 rounding could reorder a relevant and a non-relevant item.

    The float64 reference and evalcore's float32 scores agree to ~1e-7; a
    relevant score that close to a negative one has no single right rank.
    """
    scores = cosine_scores(arrays["query/emb"], arrays["gallery/emb"])
    rel, junk = relevance(arrays, protocol)
    out = set()
    for i in range(scores.shape[0]):
        neg = np.sort(scores[i][~rel[i] & ~junk[i]])
        for t in scores[i][rel[i]]:
            j = np.searchsorted(neg, t)
            near = [abs(neg[x] - t) for x in (j - 1, j) if 0 <= x < len(neg)]
            if near and min(near) < gap:
                out.add(i)
                break
    return out


def quantized(arrays):
    """Embeddings on a 1/64 grid with |x| < 4: every float32 dot product of them is exact."""
    out = dict(arrays)
    for name in ("query/emb", "gallery/emb"):
        out[name] = (np.clip(np.round(arrays[name] * 16), -255, 255) / 64).astype(np.float32)
    return out


@pytest.mark.parametrize("protocol", ["reid", "class"])
@pytest.mark.parametrize("ties", ["pessimistic", "optimistic"])
def test_random_clustered_data_matches_brute_force(write, protocol, ties):
    rng = np.random.default_rng(7 if protocol == "reid" else 8)
    # Q and G span several query-row and 4096-column tiles
    arrays = random_reid(rng, n_query=600, n_gallery=9000, dims=12, n_ids=500)
    ks = (1, 5, 20)
    path = write(arrays, chunk_rows=300)
    result = evaluate(path, Options(protocol=protocol, ks=ks, ties=ties, map_at=10, threshold=0.8))
    expected = reference(arrays, protocol, ks, ties=ties, map_at=10, threshold=0.8)
    skip = ambiguous_queries(arrays, protocol)
    assert len(skip) < 0.15 * len(expected)
    compare(result, expected, ks, extra=("ap_at_10", "accepted", "outcome"), skip=skip)
    n_unknown = sum(e["n_relevant"] == 0 for e in expected)
    assert n_unknown > 10 and result.summary.column("n_unknown")[0].as_py() == n_unknown


@pytest.mark.parametrize("protocol", ["reid", "class"])
def test_exact_scores_match_brute_force_on_every_query(write, protocol):
    """Under `dot` with grid-valued embeddings scores are exact: no query is excused."""
    rng = np.random.default_rng(11)
    arrays = quantized(random_reid(rng, n_query=520, n_gallery=8500, dims=12))
    ks = (1, 5, 20)
    result = evaluate(write(arrays, chunk_rows=200), Options(protocol=protocol, ks=ks, similarity="dot",
                                                             threshold=10.0, map_at=7))
    compare(result, reference(arrays, protocol, ks, similarity="dot", threshold=10.0, map_at=7), ks,
            extra=("ap_at_7", "accepted", "outcome", "top1_score", "relevant_score"))


@pytest.mark.parametrize("ties", ["pessimistic", "optimistic"])
def test_exact_ties_follow_the_tie_policy(write, ties):
    """Small integer vectors under `dot`: scores are exact, so many relevant/non-relevant ties."""
    rng = np.random.default_rng(3)
    q, g = 300, 5000
    arrays = {
        "query/emb": rng.integers(-2, 3, (q, 4)).astype(np.float32),
        "gallery/emb": rng.integers(-2, 3, (g, 4)).astype(np.float32),
        "query/label": rng.integers(0, 30, q), "gallery/label": rng.integers(-1, 30, g),
        "query/cam": rng.integers(0, 3, q), "gallery/cam": rng.integers(0, 3, g),
    }
    ks = (1, 3, 10)
    result = evaluate(write(arrays), Options(protocol="reid", ks=ks, ties=ties, similarity="dot"))
    compare(result, reference(arrays, "reid", ks, ties=ties, similarity="dot"), ks)


def test_constant_submission_ranks_relevant_items_last(write):
    rng = np.random.default_rng(4)
    q, g = 50, 700
    arrays = {"query/emb": np.ones((q, 8), np.float32) * 0.3, "gallery/emb": np.ones((g, 8), np.float32) * 0.7,
              "query/label": rng.integers(0, 10, q), "gallery/label": rng.integers(0, 10, g)}
    result = evaluate(write(arrays), Options(protocol="class", ks=(1,)))
    rows = result.per_query.to_pylist()
    for row in rows:
        assert row["first_rank"] == g - row["n_relevant"] + 1
    assert result.summary.column("hit_at_1")[0].as_py() == 0.0


def test_float16_embeddings_match_float32_of_the_same_values(write):
    rng = np.random.default_rng(5)
    arrays = random_reid(rng, n_query=200, n_gallery=3000, dims=32, dtype=np.float16)
    as32 = dict(arrays, **{k: arrays[k].astype(np.float32) for k in ("query/emb", "gallery/emb")})
    a = evaluate(write(arrays, name="f16.zarr"), Options(protocol="reid", ks=(1, 5)))
    b = evaluate(write(as32, name="f32.zarr"), Options(protocol="reid", ks=(1, 5)))
    assert a.per_query.drop_columns([]).equals(b.per_query)
    compare(a, reference(as32, "reid", (1, 5)), (1, 5))


def test_readers_accept_other_integer_float_and_string_dtypes(tmp_path, write):
    """int32/uint16 labels and cameras, float64 embeddings and fixed-width keys read like the writers' dtypes."""
    import warnings

    import zarr

    rng = np.random.default_rng(12)
    arrays = random_reid(rng, n_query=120, n_gallery=900, dims=8, n_ids=60)
    arrays.pop("query/group")
    arrays["query/key"] = np.array([f"q{i}" for i in range(120)], dtype=object)
    base = evaluate(write(arrays, name="base.zarr"), Options(protocol="reid", ks=(1, 5)))
    other = {**arrays, "query/label": arrays["query/label"].astype(np.int32),
             "gallery/label": arrays["gallery/label"].astype(np.int32),
             "query/cam": arrays["query/cam"].astype(np.uint16), "gallery/cam": arrays["gallery/cam"].astype(np.uint16),
             "query/emb": arrays["query/emb"].astype(np.float64),
             "gallery/emb": arrays["gallery/emb"].astype(np.float64),
             "query/key": arrays["query/key"].astype("U8")}
    root = zarr.open_group(str(tmp_path / "other.zarr"), mode="w")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, values in other.items():
            root.create_array(name, data=values)
    assert root["query/label"].dtype == np.int32 and root["query/key"].dtype.kind == "U"
    result = evaluate(tmp_path / "other.zarr", Options(protocol="reid", ks=(1, 5)))
    assert result.per_query.equals(base.per_query)
