"""Landmark recognition (Google Landmarks v2): Global Average Precision and top-1 accuracy.

Each query has at most one prediction, a landmark and a confidence. The
predictions of all queries are ranked together by confidence, and

    GAP = (1/M) * sum_{i=1..N} P(i) * rel(i)

over the N predictions in that order: rel(i) = 1 when the i-th prediction is
one of its query's landmarks, P(i) = (correct predictions among the first i)
/ i, and M = the number of queries that have a landmark. A prediction for a
query without a landmark is a wrong prediction at its place; a query without
a prediction adds nothing but still counts in M (Perronnin, Liu and Renders'
micro-AP; the metric of the Google Landmark Recognition challenges).

    top-1 accuracy = (landmark queries whose prediction is right) / M

Pure arrays in, numbers out; reading the caller's mappings is the API's job.
"""
from __future__ import annotations

import numpy as np


def prediction_order(confidence: np.ndarray, key_rank: np.ndarray, landmark_rank: np.ndarray) -> np.ndarray:
    """The predictions' order: confidence descending, then query key ascending, then landmark ascending.

    The tie rule of the GLDv2 reference (Kaggle's convention), so equal
    confidences give one order whatever order the predictions came in.
    ``key_rank`` and ``landmark_rank`` are each prediction's place among the
    sorted keys and landmarks.
    """
    # np.lexsort sorts by its last key first; every key is a total order, so the result is unique
    return np.lexsort((landmark_rank, key_rank, -np.asarray(confidence, dtype=np.float64)))


def precision_at_positions(correct_in_order: np.ndarray) -> np.ndarray:
    """P(i) = (correct predictions among the first i) / i, for i = 1..N."""
    correct = np.asarray(correct_in_order, dtype=bool)
    return np.cumsum(correct) / np.arange(1, len(correct) + 1, dtype=np.float64)


def global_average_precision(correct_in_order: np.ndarray, n_landmark_queries: int) -> float:
    """GAP = (1/M) * sum_i P(i) * rel(i), the predictions in ``prediction_order``; M = ``n_landmark_queries``."""
    correct = np.asarray(correct_in_order, dtype=bool)
    return float(precision_at_positions(correct)[correct].sum() / n_landmark_queries)


def top1_accuracy(correct: np.ndarray, has_landmark: np.ndarray) -> float:
    """(landmark queries whose prediction is one of their landmarks) / (landmark queries), per query arrays."""
    has = np.asarray(has_landmark, dtype=bool)
    return float(np.count_nonzero(np.asarray(correct, dtype=bool) & has) / np.count_nonzero(has))
