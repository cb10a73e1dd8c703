"""evalcore.io.identities.code_identities: equal values share a code across both sides, missing ones get -1.

The reference is the definition itself, pair by pair: two rows share a code
exactly when Python's == says their values are equal, and a row is -1
exactly when its value is None, NaN, or (unless negatives are identities) a
negative number.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from evalcore.errors import InputError
from evalcore.io.identities import code_identities


def missing(value, negative_is_identity):
    if value is None:
        return True
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        return False
    return math.isnan(value) or (not negative_is_identity and value < 0)


def python_equal(a, b) -> bool:
    """Python's == on plain values (a numpy scalar compared with a tuple would broadcast)."""
    plain = [v.item() if isinstance(v, np.generic) else v for v in (a, b)]
    return bool(plain[0] == plain[1])


def check_definition(q_values, g_values, negative_is_identity):
    q, g = code_identities(q_values, g_values, negative_is_identity=negative_is_identity)
    assert q.dtype == np.int64 and g.dtype == np.int64
    values, codes = [*q_values, *g_values], [*q.tolist(), *g.tolist()]
    assert len(codes) == len(values)
    for i, (a, code_a) in enumerate(zip(values, codes, strict=True)):
        assert (code_a == -1) == missing(a, negative_is_identity), (a, code_a)
        assert code_a >= -1
        if code_a == -1:
            continue
        for b, code_b in zip(values[i + 1:], codes[i + 1:], strict=True):
            if code_b != -1:
                assert (code_a == code_b) == python_equal(a, b), (a, b, code_a, code_b)
    return q, g


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("negative_is_identity", [False, True])
def test_codes_follow_equality_on_random_values_of_every_kind(seed, negative_is_identity):
    rng = np.random.default_rng(seed)
    pool = [0, 1, 2, -1, -7, 2.0, 2.5, -0.5, True, "a", "b", "", "1", None, float("nan"), (1, 2), (1, "x"),
            np.int64(5), np.float32(5.0), 2 ** 64 - 1]
    pick = lambda n: [pool[i] for i in rng.integers(0, len(pool), n)]  # noqa: E731
    check_definition(pick(30), pick(50), negative_is_identity)


@pytest.mark.parametrize("negative_is_identity", [False, True])
@pytest.mark.parametrize("make", [
    lambda rng: (rng.integers(-3, 10, 40), rng.integers(-3, 10, 60)),
    lambda rng: (rng.integers(0, 10, 40).astype(np.uint8), rng.integers(-3, 10, 60).astype(np.int16)),
    lambda rng: (rng.integers(-3, 10, 40) / 2, np.where(rng.random(60) < 0.2, np.nan, rng.integers(-3, 10, 60))),
    lambda rng: (np.array([f"p{v}" for v in rng.integers(0, 10, 40)]),
                 np.array([f"p{v}" for v in rng.integers(0, 10, 60)])),
    lambda rng: (np.array([f"p{v}".encode() for v in rng.integers(0, 10, 40)]),
                 np.array([f"p{v}".encode() for v in rng.integers(0, 10, 60)])),
    lambda rng: (np.array([f"p{v}" for v in rng.integers(0, 10, 40)], dtype=np.dtypes.StringDType()),
                 [f"p{v}" for v in rng.integers(0, 10, 60)]),
    lambda rng: (rng.integers(0, 10, 40), [str(v) for v in rng.integers(0, 10, 60)]),
    lambda rng: (rng.random(40) < 0.5, rng.integers(0, 3, 60)),
])
def test_codes_follow_equality_on_numpy_arrays_of_every_dtype(make, negative_is_identity):
    q, g = make(np.random.default_rng(1))
    check_definition(q.tolist() if isinstance(q, np.ndarray) else q,
                     g.tolist() if isinstance(g, np.ndarray) else g, negative_is_identity)
    a, b = code_identities(q, g, negative_is_identity=negative_is_identity)
    c, d = code_identities(list(q), list(g), negative_is_identity=negative_is_identity)
    # the array and its Python values partition the rows alike
    both, both_list = np.concatenate([a, b]), np.concatenate([c, d])
    assert ((both[:, None] == both[None, :]) == (both_list[:, None] == both_list[None, :])).all()


def test_integer_labels_keep_their_values_and_negatives_are_no_identity():
    q, g = code_identities(np.array([3, -1, 0, 2 ** 40]), np.array([-5, 7], dtype=np.int32))
    assert q.tolist() == [3, -1, 0, 2 ** 40] and g.tolist() == [-1, 7]


def test_negatives_kept_as_identities_match_each_other():
    q, g = code_identities([-1, 4], [-1, -1, 4, 9], negative_is_identity=True)
    assert q[0] == g[0] == g[1] >= 0 and q[1] == g[2] and len({*q.tolist(), *g.tolist()}) == 3


def test_unsigned_values_past_int64_are_coded_exactly():
    big = np.array([2 ** 64 - 1, 2 ** 64 - 2, 3], dtype=np.uint64)
    q, g = code_identities(big, np.array([2 ** 64 - 2], dtype=np.uint64))
    assert len(set(q.tolist())) == 3 and g[0] == q[1] and min(q) >= 0


def test_strings_get_the_same_codes_whatever_their_order():
    q1, g1 = code_identities(["b", "a"], ["c", "a"])
    q2, g2 = code_identities(["a", "b"], ["a", "c"])
    assert dict(zip(["b", "a", "c"], [*q1, g1[0]], strict=True)) == dict(zip(["a", "b", "c"], [*q2, g2[1]],
                                                                            strict=True))


def test_tensors_are_coded_like_their_values():
    torch = pytest.importorskip("torch")
    q, g = code_identities(torch.tensor([3, 1]), torch.tensor([1, 2]))
    assert q.tolist() == [3, 1] and g.tolist() == [1, 2]


@pytest.mark.parametrize("q, g, name", [
    ([[1], 2], [1], "query_labels"),
    ([1], [{"a": 1}], "gallery_labels"),
    (np.zeros((2, 2)), [1], "query_labels"),
    ([1], np.array(["2026-01-01"], dtype="datetime64[D]"), "gallery_labels"),
])
def test_values_that_cannot_be_identities_are_one_input_error(q, g, name):
    with pytest.raises(InputError) as info:
        code_identities(q, g)
    assert str(info.value).startswith(f"{name}: ") and "\n" not in str(info.value)
