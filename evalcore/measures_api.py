"""Measures outside the ranking of a gallery: GLDv2's recognition GAP and the recall of an ANN search.

    import evalcore
    r = evalcore.gap({"q1": ("eiffel", 0.9), "q2": None}, {"q1": {"eiffel"}, "q2": set()})
    r.gap, r.top1_accuracy, r.per_query
    a = evalcore.ann_recall(ann_ids, query=Q, gallery=G, k=10)
    a.recall, a.per_query

Each raises ``InputError`` whose message starts with the parameter at fault.
"""
from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from evalcore.core import ann, recognition
from evalcore.errors import EvalcoreWarning, OptionError, input_error

#: how many offending entries a message names before it says "..."
_SHOWN = 3


@dataclass(frozen=True)
class Recognition:
    """``gap``: Global Average Precision; ``top1_accuracy``; ``per_query``: one row per query of ``truth``."""
    gap: float
    top1_accuracy: float
    n_landmark_queries: int
    per_query: pa.Table

    @property
    def metrics(self) -> dict[str, float]:
        return {"gap": self.gap, "top1_accuracy": self.top1_accuracy}


def _shown(items: list) -> str:
    return ", ".join(repr(x) for x in items[:_SHOWN]) + (", ..." if len(items) > _SHOWN else "")


def _is_none(value: Any) -> bool:
    return value is None or (isinstance(value, numbers.Integral) and not isinstance(value, bool) and value < 0)


def _truth_entries(truth) -> tuple[list, list[frozenset]]:
    """(query keys, each query's landmark set); a mapping {key: landmark or collection}, or a sequence
    indexed 0..Q-1 (a negative integer or None: no landmark)."""
    if isinstance(truth, Mapping):
        keys = list(truth.keys())
        values = list(truth.values())
    else:
        try:
            values = list(np.asarray(truth).tolist()) if isinstance(truth, np.ndarray) else list(truth)
        except TypeError:
            raise OptionError("truth", f"{type(truth).__name__} is not a mapping or a sequence of landmarks") from None
        keys = list(range(len(values)))
    sets = []
    for key, value in zip(keys, values):
        if isinstance(value, (set, frozenset, list, tuple, np.ndarray)):
            members = np.asarray(value).tolist() if isinstance(value, np.ndarray) else list(value)
            try:
                sets.append(frozenset(m for m in members if not _is_none(m)))
            except TypeError:
                raise OptionError("truth", f"query {key!r}: landmarks {value!r} are not landmark ids "
                                 "(hashable values)") from None
        elif _is_none(value):
            sets.append(frozenset())
        else:
            try:
                sets.append(frozenset([value]))
            except TypeError:
                raise OptionError("truth", f"query {key!r}: landmark {value!r} is not a landmark id "
                                 "(a hashable value) or a collection of them") from None
    return keys, sets


def _one_prediction(key, value) -> tuple[Any, float] | None:
    """A prediction as (landmark, confidence), None for none: a pair, or the reference's {'class', 'score'}."""
    if value is None:
        return None
    if isinstance(value, Mapping) and "class" in value and "score" in value:
        landmark, confidence = value["class"], value["score"]
    else:
        try:
            landmark, confidence = value
        except (TypeError, ValueError):
            raise OptionError("predictions", f"query {key!r}: prediction {value!r} is not a pair "
                             "(landmark, confidence) or None") from None
    if _is_none(landmark):
        return None
    if isinstance(confidence, bool) or not isinstance(confidence, numbers.Real) or not math.isfinite(confidence):
        raise OptionError("predictions", f"query {key!r}: confidence {confidence!r} is not a finite number")
    try:
        hash(landmark)
    except TypeError:
        raise OptionError("predictions", f"query {key!r}: landmark {landmark!r} is not a landmark id "
                         "(a hashable value)") from None
    return landmark, float(confidence)


def _prediction_entries(predictions) -> dict:
    """{key: (landmark, confidence)}: a mapping, or a pair of sequences (landmarks, confidences) indexed
    0..Q-1 (a negative landmark or None: no prediction)."""
    if isinstance(predictions, Mapping):
        items = list(predictions.items())
    else:
        try:
            landmarks, confidences = predictions
            landmarks = np.asarray(landmarks).tolist() if isinstance(landmarks, np.ndarray) else list(landmarks)
            confidences = np.asarray(confidences).tolist() if isinstance(confidences, np.ndarray) \
                else list(confidences)
        except (TypeError, ValueError):
            raise OptionError("predictions", "give a mapping {query: (landmark, confidence)} or a pair of "
                             "sequences (landmarks, confidences)") from None
        if len(landmarks) != len(confidences):
            raise OptionError("predictions", f"{len(landmarks)} landmarks but {len(confidences)} confidences")
        items = list(enumerate(zip(landmarks, confidences)))
    out = {}
    for key, value in items:
        found = _one_prediction(key, value)
        if found is not None:
            out[key] = found
    return out


def _places(values: list) -> np.ndarray:
    """Each value's place among the distinct values sorted; values that do not compare (1 and 'a') are
    sorted by type name, then value, so the order is still one and the same."""
    distinct = list(dict.fromkeys(values))
    try:
        ordered = sorted(distinct)
    except TypeError:
        ordered = sorted(distinct, key=lambda v: (type(v).__name__, repr(v)))
    place = {v: i for i, v in enumerate(ordered)}
    return np.array([place[v] for v in values], dtype=np.int64)


def _column(values: list) -> pa.Array:
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([None if v is None else str(v) for v in values], pa.string())


def gap(predictions, truth, *, ignore_non_landmark: bool = False) -> Recognition:
    """Global Average Precision (GAP) and top-1 accuracy of landmark recognition, as in Google Landmarks v2.

    ``predictions``: ``{query: (landmark, confidence)}`` (``None``: no
    prediction; the GLDv2 reference's ``{"class": ..., "score": ...}`` is read
    too), or a pair of sequences ``(landmarks, confidences)`` for queries 0..Q-1
    where a negative landmark means no prediction. ``truth``: ``{query:
    landmark or a collection of landmarks}`` (empty or ``None``: a
    non-landmark query), or a sequence for queries 0..Q-1 (a negative landmark:
    none). Every predicted query must be in ``truth``.

        GAP = (1/M) * sum_{i=1..N} P(i) * rel(i)

    the N predictions ranked by confidence, descending; rel(i) = 1 when the
    i-th is one of its query's landmarks, P(i) = the fraction of the first i
    that are; M = the queries with a landmark. A prediction for a non-landmark
    query is wrong at its place; a query without one adds nothing but counts
    in M. ``ignore_non_landmark=True`` drops the predictions for non-landmark
    queries first (the reference's ``ignore_non_gt_test_images``; the challenge
    rule is False). Equal confidences: query key ascending, then landmark
    ascending (the reference's order).

        top-1 accuracy = (landmark queries predicted right) / M

    ``per_query``, in ``truth``'s order: ``query``, ``key``, ``n_landmarks``,
    ``predicted``, ``confidence``, ``position`` (its place in the confidence
    order, 1-based; null when not counted), ``correct``, ``precision`` (P at
    its position), ``gap_term`` (P(i) rel(i) / M; they sum to ``gap``).
    """
    keys, sets = _truth_entries(truth)
    index = {}
    for i, key in enumerate(keys):
        try:
            index[key] = i
        except TypeError:
            raise OptionError("truth", f"query {key!r} is not a usable key (not hashable)") from None
    predicted = _prediction_entries(predictions)
    unknown = [key for key in predicted if key not in index]
    if unknown:
        raise OptionError("predictions", f"queries {_shown(unknown)} are not in truth")
    has_landmark = np.array([bool(s) for s in sets], dtype=bool)
    m = int(np.count_nonzero(has_landmark))
    if m == 0:
        raise OptionError("truth", "no query has a landmark, so GAP and top-1 accuracy are undefined")

    rows = np.array([index[key] for key in predicted], dtype=np.int64)
    if ignore_non_landmark:
        rows = rows[has_landmark[rows]]
    pred_landmark = [predicted[keys[r]][0] for r in rows]
    confidence = np.array([predicted[keys[r]][1] for r in rows], dtype=np.float64)
    order = recognition.prediction_order(confidence, _places([keys[r] for r in rows]), _places(pred_landmark))
    correct = np.array([landmark in sets[r] for landmark, r in zip(pred_landmark, rows)], dtype=bool)
    in_order = correct[order]
    value = recognition.global_average_precision(in_order, m)

    n = len(keys)
    is_correct = np.zeros(n, dtype=bool)
    is_correct[rows] = correct
    position = np.full(n, -1, dtype=np.int64)
    position[rows[order]] = np.arange(1, len(rows) + 1)
    precision = np.full(n, np.nan)
    precision[rows[order]] = recognition.precision_at_positions(in_order)
    counted = position > 0
    confidences: list = [None] * n
    landmarks: list = [None] * n
    for key, (landmark, conf) in predicted.items():
        landmarks[index[key]] = landmark
        confidences[index[key]] = conf
    per_query = pa.table({
        "query": pa.array(np.arange(n, dtype=np.int64)),
        "key": pa.array([str(k) for k in keys], pa.string()),
        "n_landmarks": pa.array(np.array([len(s) for s in sets], dtype=np.int64)),
        "predicted": _column(landmarks),
        "confidence": pa.array(confidences, pa.float64()),
        "position": pa.array(position, mask=~counted),
        "correct": pa.array(is_correct),
        "precision": pa.array(precision, mask=~counted),
        "gap_term": pa.array(np.where(is_correct & counted, np.nan_to_num(precision) / m, 0.0)),
    })
    return Recognition(value, recognition.top1_accuracy(is_correct, has_landmark), m, per_query)


@dataclass(frozen=True)
class AnnRecall:
    """``recall``: the mean of ``per_query``; ``hits`` per query; ``k``."""
    recall: float
    per_query: np.ndarray
    hits: np.ndarray
    k: int

    @property
    def metrics(self) -> dict[str, float]:
        return {f"ann_recall@{self.k}": self.recall}


def _id_matrix(name: str, value) -> np.ndarray:
    try:
        ids = np.asarray(value)
    except Exception:
        raise input_error(name, "not an array of gallery indices") from None
    if ids.ndim != 2:
        raise input_error(name, f"shape {ids.shape}; expected (queries, k) gallery indices")
    if ids.dtype.kind not in "iu":
        raise input_error(name, f"dtype {ids.dtype}; expected integer gallery indices (-1 for none)")
    ids = ids.astype(np.int64)
    bad = np.flatnonzero((ids < -1).any(axis=1))
    if bad.size:
        raise input_error(name, f"rows {_shown(bad.tolist())} hold indices below -1 (-1 means none)")
    return ids


def _check_k(k, width: int) -> int:
    k = width if k is None else k
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or not 1 <= int(k) <= width:
        raise OptionError("k", f"{k!r} must be an integer from 1 to the ANN list's {width} columns")
    return int(k)


def _kth_scores(query, gallery, k: int, similarity: str, threads: int | None) -> tuple[np.ndarray, np.ndarray,
                                                                                          np.ndarray]:
    """(each query's exact k-th canonical score, the normalised query and gallery rows), by ``neighbors``."""
    from evalcore.api import neighbors
    from evalcore.core.scan.embeddings import normalize_rows

    table = neighbors(query=query, gallery=gallery, k=k, similarity=similarity, threads=threads)
    scores = table.column("score").to_numpy().reshape(-1, k)
    if similarity == "euclidean":  # the table's squared distances as canonical scores (higher is better)
        scores = -scores
    sides = [normalize_rows(np.asarray(x), similarity) for x in (query, gallery)]
    return scores[:, k - 1], sides[0], sides[1]


def _neighbor_table(table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """(ids, scores), each (Q, depth), from ``evalcore.neighbors``' table: rows by query, then rank 1..depth."""
    missing = [c for c in ("query", "rank", "item", "score") if c not in table.column_names]
    if missing:
        raise OptionError("exact_ids", f"the table lacks {', '.join(missing)} (give evalcore.neighbors' table)")
    query = table.column("query").to_numpy(zero_copy_only=False)
    rank = table.column("rank").to_numpy(zero_copy_only=False)
    n = int(query.max()) + 1 if len(query) else 0
    depth = len(query) // n if n else 0
    if not n or n * depth != len(query) or (query != np.repeat(np.arange(n), depth)).any() or \
            (rank != np.tile(np.arange(1, depth + 1), n)).any():
        raise OptionError("exact_ids", "the table's rows are not queries 0..Q-1 each with ranks 1..depth in order")
    return (table.column("item").to_numpy(zero_copy_only=False).reshape(n, depth),
            table.column("score").to_numpy(zero_copy_only=False).reshape(n, depth))


def ann_recall(ann_ids, *, query=None, gallery=None, k: int | None = None, similarity: str = "cosine",
               exact_ids=None, exact_scores=None, tolerance: float = 0.0, threads: int | None = None) -> AnnRecall:
    """Recall@k of an approximate nearest-neighbour result against the exact neighbours, ties counted.

    ``ann_ids``: (Q, K) gallery indices, best first (-1: an empty slot); its
    first ``k`` columns are measured (``k`` defaults to K). An id is a hit when
    its exact score ties or beats the exact k-th neighbour's score s_k:

        recall@k = #{distinct ids among the first k : score >= s_k} / k

    (big-ann-benchmarks' knn recall with distance ties). Exact neighbours from
    ``query`` and ``gallery`` embeddings: ``evalcore.neighbors`` on canonical
    scores (``similarity`` cosine, dot or euclidean), the ANN ids scored the same way, so
    identical gallery rows tie exactly. Or precomputed: ``exact_ids`` (Q, K'
    >= k, best first) and their ``exact_scores`` (scores or distances, ordered
    as the ids; or ``exact_ids`` = the table ``evalcore.neighbors`` returns,
    computed deeper than k); then the ids counted are the first k plus those after them
    whose score is within ``tolerance`` of the k-th (0: equal; big-ann-benchmarks
    uses 1e-6). A tie run reaching the end of that list is warned about: tied
    items beyond it cannot count.
    """
    ids = _id_matrix("ann_ids", ann_ids)
    k = _check_k(k, ids.shape[1])
    ids = ids[:, :k]
    embeddings = query is not None or gallery is not None
    precomputed = exact_ids is not None or exact_scores is not None
    if embeddings and precomputed:
        raise OptionError("exact_ids", "give query and gallery embeddings or exact_ids and exact_scores, not both")
    if embeddings:
        if query is None or gallery is None:
            raise input_error('query' if query is None else 'gallery', "missing (the exact neighbours need "
                             "query and gallery embeddings)")
        n_query, n_gallery = np.shape(query)[0], np.shape(gallery)[0]
        if n_query != len(ids):
            raise OptionError("ann_ids", f"{len(ids)} rows but query has {n_query}")
        if (ids >= n_gallery).any():
            raise OptionError("ann_ids", f"indices beyond the gallery's {n_gallery} rows")
        kth, q, g = _kth_scores(query, gallery, k, similarity, threads)
        from evalcore.core.scan.embeddings import pair_scores

        valid = ids >= 0
        rows = np.broadcast_to(np.arange(len(ids))[:, None], ids.shape)
        scores = np.full(ids.shape, -np.inf, dtype=np.float32)
        scores[valid] = pair_scores(q, g, rows[valid], ids[valid], similarity)
        hits = ann.hits_by_score(ids, scores, kth)
    elif precomputed:
        if isinstance(exact_ids, pa.Table):
            if exact_scores is not None:
                raise OptionError("exact_scores", "the neighbours table given as exact_ids carries the scores")
            exact_ids, exact_scores = _neighbor_table(exact_ids)
        if exact_ids is None or exact_scores is None:
            raise input_error('exact_ids' if exact_ids is None else 'exact_scores', "missing (give both)")
        true_ids = _id_matrix("exact_ids", exact_ids)
        true_scores = np.asarray(exact_scores)
        if true_scores.shape != true_ids.shape:
            raise OptionError("exact_scores", f"shape {true_scores.shape}, not exact_ids' {true_ids.shape}")
        if true_scores.dtype.kind not in "fiu" or not np.isfinite(true_scores).all():
            raise OptionError("exact_scores", "must be finite numbers")
        if len(true_ids) != len(ids):
            raise OptionError("exact_ids", f"{len(true_ids)} rows but ann_ids has {len(ids)}")
        if true_ids.shape[1] < k:
            raise OptionError("exact_ids", f"{true_ids.shape[1]} columns, fewer than k={k}")
        if isinstance(tolerance, bool) or not isinstance(tolerance, numbers.Real) or \
                not (math.isfinite(tolerance) and tolerance >= 0):
            raise OptionError("tolerance", f"{tolerance!r} must be a finite number >= 0")
        end = ann.tie_end(true_scores, k, float(tolerance))
        reaching = np.count_nonzero(end == true_ids.shape[1]) if true_ids.shape[1] > k else 0
        if reaching:
            warnings.warn(f"exact_ids: {reaching} queries' ties at the k-th score reach the end of the "
                          f"{true_ids.shape[1]} columns; tied items beyond them cannot count", EvalcoreWarning,
                          stacklevel=2)
        hits = ann.hits_in_ground_truth(ids, true_ids, end)
    else:
        raise OptionError("query", "missing (give query and gallery embeddings, or exact_ids and exact_scores)")
    per_query = ann.recall_at_k(hits, k)
    return AnnRecall(float(per_query.mean()) if len(per_query) else math.nan, per_query, hits, k)
