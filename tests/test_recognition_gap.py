"""GLDv2's Global Average Precision and top-1 accuracy (evalcore.gap), issue 38 / CONTRACT §18.

Expected values: the GLDv2 reference's own tests, tensorflow/models
research/delf/delf/python/datasets/google_landmarks_dataset/metrics_test.py
(commit 3dacd474364813781c0154d881055502ce09d79c), inputs and expected
values copied; and a brute force of the definition written here.
"""
from __future__ import annotations

import math
import random

import numpy as np
import pytest

import evalcore

# --- metrics_test.py's _CreateRecognitionSolution / _CreateRecognitionPredictions, verbatim values
SOLUTION = {
    "0123456789abcdef": [0, 12],
    "0223456789abcdef": [100, 200, 300],
    "0323456789abcdef": [1],
    "0423456789abcdef": [],
    "0523456789abcdef": [],
}
PREDICTIONS = {
    "0223456789abcdef": {"class": 0, "score": 0.01},
    "0323456789abcdef": {"class": 1, "score": 10.0},
    "0423456789abcdef": {"class": 150, "score": 15.0},
}


def test_published_global_average_precision():
    # testGlobalAveragePrecisionWorks: expected_gap = 0.166667
    assert evalcore.gap(PREDICTIONS, SOLUTION).gap == pytest.approx(0.166667, abs=1e-6)


def test_published_global_average_precision_ignoring_non_landmark_queries():
    # testGlobalAveragePrecisionIgnoreNonGroundTruthWorks: expected_gap = 0.333333
    assert evalcore.gap(PREDICTIONS, SOLUTION, ignore_non_landmark=True).gap == pytest.approx(0.333333, abs=1e-6)


def test_published_top1_accuracy():
    # testTop1AccuracyWorks: expected_accuracy = 0.333333
    assert evalcore.gap(PREDICTIONS, SOLUTION).top1_accuracy == pytest.approx(0.333333, abs=1e-6)


def test_pairs_read_as_the_references_dicts():
    pairs = {key: (p["class"], p["score"]) for key, p in PREDICTIONS.items()}
    r = evalcore.gap(pairs, {k: set(v) for k, v in SOLUTION.items()})
    assert r.gap == pytest.approx(1 / 6) and r.top1_accuracy == pytest.approx(1 / 3)


def brute_gap(predictions: dict, truth: dict, ignore: bool = False) -> tuple[float, float]:
    """The definition, written out: sort by (-confidence, key, landmark), walk, sum P(i) at the right ones."""
    m = sum(1 for v in truth.values() if v)
    items = sorted(((-c, key, lm) for key, (lm, c) in predictions.items() if lm is not None),
                   key=lambda t: (t[0], t[1], t[2]))
    seen = right = 0
    total = 0.0
    for _, key, lm in items:
        if ignore and not truth[key]:
            continue
        seen += 1
        if lm in truth[key]:
            right += 1
            total += right / seen
    top1 = sum(1 for key, v in truth.items() if v and key in predictions and predictions[key][0] in v)
    return total / m, top1 / m


def random_case(seed: int) -> tuple[dict, dict]:
    rng = random.Random(seed)
    n = rng.randint(1, 60)
    truth = {}
    for i in range(n):
        r = rng.random()
        truth[f"q{i:03d}"] = set() if r < 0.3 else set(rng.sample(range(8), rng.randint(1, 3)))
    if not any(truth.values()):
        truth["q000"] = {1}
    preds = {}
    for key in truth:
        if rng.random() < 0.8:
            # coarse confidences, so many ties: the key, then landmark order decides
            preds[key] = (rng.randrange(8), rng.choice([0.1, 0.2, 0.5, 0.9, 1.0]))
    return preds, truth


@pytest.mark.parametrize("seed", range(40))
def test_equal_to_the_definition_on_random_predictions_with_ties(seed):
    preds, truth = random_case(seed)
    for ignore in (False, True):
        expected_gap, expected_top1 = brute_gap(preds, truth, ignore)
        r = evalcore.gap(preds, truth, ignore_non_landmark=ignore)
        assert r.gap == pytest.approx(expected_gap, rel=1e-12, abs=1e-15)
        assert r.top1_accuracy == pytest.approx(expected_top1, rel=1e-12, abs=1e-15)
        assert math.fsum(r.per_query.column("gap_term").to_pylist()) == pytest.approx(expected_gap, abs=1e-12)


@pytest.mark.parametrize("seed", range(10))
def test_order_of_the_inputs_does_not_matter(seed):
    preds, truth = random_case(seed)
    rng = random.Random(seed + 100)
    shuffled_preds = dict(rng.sample(list(preds.items()), len(preds)))
    shuffled_truth = dict(rng.sample(list(truth.items()), len(truth)))
    assert evalcore.gap(shuffled_preds, shuffled_truth).gap == evalcore.gap(preds, truth).gap


def test_ties_are_broken_by_key_then_landmark():
    # equal confidences: "a" (wrong) before "b" (right) by key, so P = 1/2 at "b"; M = 2
    truth = {"a": {1}, "b": {2}}
    r = evalcore.gap({"b": (2, 0.5), "a": (9, 0.5)}, truth)
    assert r.gap == pytest.approx(0.25)
    assert r.per_query.column("position").to_pylist() == [1, 2]


def test_arrays_equal_mappings():
    rng = np.random.default_rng(3)
    q = 50
    truth = rng.integers(-1, 6, q)              # negative: a non-landmark query
    landmarks = rng.integers(-1, 6, q)          # negative: no prediction
    conf = rng.choice([0.25, 0.5, 0.75], q)
    r = evalcore.gap((landmarks, conf), truth)
    as_dicts = evalcore.gap({i: (int(lm), float(c)) if lm >= 0 else None for i, (lm, c) in enumerate(zip(landmarks, conf))},
                            {i: ({int(t)} if t >= 0 else set()) for i, t in enumerate(truth)})
    expected = brute_gap({i: (int(lm), float(c)) for i, (lm, c) in enumerate(zip(landmarks, conf)) if lm >= 0},
                         {i: ({int(t)} if t >= 0 else set()) for i, t in enumerate(truth)})
    assert (r.gap, r.top1_accuracy) == (as_dicts.gap, as_dicts.top1_accuracy)
    assert r.gap == pytest.approx(expected[0], rel=1e-12)


def test_per_query_table():
    r = evalcore.gap(PREDICTIONS, SOLUTION)
    t = r.per_query.to_pydict()
    assert t["key"] == list(SOLUTION)
    assert t["n_landmarks"] == [2, 3, 1, 0, 0]
    assert t["predicted"] == [None, 0, 1, 150, None]
    # confidence order: 0423 (15.0) first, 0323 (10.0), 0223 (0.01)
    assert t["position"] == [None, 3, 2, 1, None]
    assert t["correct"] == [False, False, True, False, False]
    assert t["precision"][2] == pytest.approx(0.5)


@pytest.mark.parametrize("predictions, truth, starts", [
    ({"x": (1, 0.5)}, {"a": {1}}, "predictions: queries 'x' are not in truth"),
    ({"a": (1, float("nan"))}, {"a": {1}}, "predictions: query 'a': confidence nan"),
    ({"a": (1, "high")}, {"a": {1}}, "predictions: query 'a': confidence 'high'"),
    ({"a": 3}, {"a": {1}}, "predictions: query 'a': prediction 3 is not a pair"),
    ({"a": (1, 0.5)}, {"a": set()}, "truth: no query has a landmark"),
    ({"a": ([1], 0.5)}, {"a": {1}}, "predictions: query 'a': landmark [1]"),
    (([1, 2], [0.5]), [1, 2], "predictions: 2 landmarks but 1 confidences"),
    (5, [1], "predictions: give a mapping"),
    ({}, 5, "truth: int is not a mapping"),
    ({"a": (1, 0.5)}, {"a": [[1]]}, "truth: query 'a': landmarks [[1]] are not landmark ids"),
    ({"a": (1, 0.5)}, {"a": {"x": 1}}, "truth: query 'a': landmark {'x': 1} is not a landmark id"),
])
def test_bad_input_is_one_line_naming_the_parameter(predictions, truth, starts):
    with pytest.raises(evalcore.InputError) as caught:
        evalcore.gap(predictions, truth)
    message = str(caught.value)
    assert message.startswith(starts) and "\n" not in message
