"""torchmetrics' retrieval metrics, computed by evalcore: ``from evalcore.compat.torchmetrics import RetrievalMAP``.

For flat ``preds``, ``target`` and ``indexes`` (the query of each row), as
torchmetrics' users hold them. The functional forms take one query per call,
as torchmetrics' do: ``retrieval_average_precision(preds, target,
top_k=None)``, ``retrieval_reciprocal_rank``, ``retrieval_normalized_dcg``,
``retrieval_precision(..., adaptive_k=False)``, ``retrieval_recall``,
``retrieval_hit_rate``, ``retrieval_r_precision(preds, target)``,
``retrieval_fall_out``. The module classes (``RetrievalMAP``,
``RetrievalMRR``, ``RetrievalNormalizedDCG``, ``RetrievalPrecision``,
``RetrievalRecall``, ``RetrievalHitRate``, ``RetrievalRPrecision``,
``RetrievalFallOut``) take torchmetrics' constructor parameters
(``empty_target_action``, ``ignore_index``, ``top_k``, ``aggregation``,
``adaptive_k``) and have ``update(preds, target, indexes)``, ``compute()``,
``reset()`` and ``metric(preds, target, indexes=...)`` (the batch's value,
the batch kept for ``compute``). Inputs: numpy arrays, lists or torch
tensors (read through ``.detach().cpu().numpy()``; torch is never imported),
of any shape, flattened. Each returns a numpy float64 where torchmetrics
returns a 0-d tensor (``float(x)`` reads both).

torchmetrics' definitions (1.8), per query of n rows sorted by ``preds``
(cast to float32 first, as torchmetrics casts them), k = ``top_k`` (None:
n), R the rows with target 1:

- AP: (1/h) * sum over the relevant rows ranked r_i <= k of i / r_i, h the
  relevant rows within k (not R: torchmetrics' AP@k divides by those found);
- RR: 1/r_1 when the first relevant row ranks r_1 <= k, else 0;
- precision: hits in the top k / k (``adaptive_k``: / min(k, n); no top_k:
  / n); recall: hits in the top k / R;
- hit rate: 1 when a relevant row ranks within k; R-precision: hits in the
  top R / R; fall-out: non-relevant rows in the top k / the non-relevant rows;
- nDCG: the target as gain (graded targets allowed), ties averaged (each
  group of equal ``preds`` shares its gains over its places, as
  torchmetrics and scikit-learn's ``ndcg_score`` do), over the ideal DCG,
  both cut at k (evalcore's ``ndcg_avg@k``); 0 when the ideal is 0.

AP, RR, precision and recall count a relevant row whose pred is 0 or less
as not relevant (torchmetrics 1.8's rule; before 1.8 it counted), recall's
R still counting it. A query without a relevant row scores 0 in a
functional call; the classes apply ``empty_target_action`` (``neg`` 0,
``pos`` 1, ``skip`` left out, ``error``), to queries without a relevant row,
or for fall-out without a non-relevant one (its default is ``pos``), and
aggregate the per-query values by ``mean`` (exact, float64), ``median``
(the lower middle value, as ``torch.median``), ``min``, ``max`` or a
callable (given the values as a numpy array and ``dim=None``); 0 when every
query was skipped. ``ignore_index`` drops the rows whose target equals it.

What differs:

- **Ties**: torchmetrics orders equal ``preds`` by ``torch.topk`` /
  ``torch.argsort``, whose order among equal values is unspecified (it
  varies with the device and the size); evalcore ranks non-relevant rows
  first among equal ``preds`` (``ties="pessimistic"``), the lowest value any
  order gives. nDCG is tie-averaged in both, so there it is torchmetrics'.
- **Values**: computed in float64 (torchmetrics sums in float32, so the
  last digits can differ, ~1e-7); a NaN pred is an error; a target must be
  0/1 (nDCG: an integer grade 0..127, evalcore's gains), where torchmetrics
  takes floats within [0, 1]; ``top_k=0`` is an error (torchmetrics' AP and
  RR read it as None). Errors are ``InputError`` (a ``ValueError``, as
  torchmetrics raises) naming the parameter: ``preds``, ``target``,
  ``indexes``, ``top_k``, ...
- torchmetrics' ``Metric`` keywords (``dist_sync_on_step``, ...) are
  accepted and have no effect; the states hold numpy arrays in this process.

Every call ranks all its queries at once, as ``evalcore.evaluate`` ranks
precomputed rankings with scores under qrels (``core.ranking.rank_by_lists``,
``core.lists.rank_lists``, the registry's metrics), without a dataset around
them: each query's rows are one list, scores float32 (equal preds form
evalcore's tie groups), its relevant rows the qrels. The lists are padded to
the longest query's rows: memory is Q x that length (12 bytes a place).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from evalcore.errors import InputError, OptionError, foreign_reason, input_error, rows_text

__all__ = ["RetrievalFallOut", "RetrievalHitRate", "RetrievalMAP", "RetrievalMRR", "RetrievalNormalizedDCG",
           "RetrievalPrecision", "RetrievalRPrecision", "RetrievalRecall", "retrieval_average_precision",
           "retrieval_fall_out", "retrieval_hit_rate", "retrieval_normalized_dcg", "retrieval_precision",
           "retrieval_r_precision", "retrieval_recall", "retrieval_reciprocal_rank"]

#: torchmetrics metric -> (evalcore metrics read, relevant rows with pred <= 0 not relevant, graded target)
_METRICS: dict[str, tuple[tuple[str, ...], bool, bool]] = {
    "average_precision": (("map_cut@k", "precision@k"), True, False),
    "reciprocal_rank": (("mrr@k",), True, False),
    "precision": (("precision@k",), True, False),
    "recall": (("precision@k",), True, False),
    "hit_rate": (("hit@k",), False, False),
    "r_precision": (("rprec",), False, False),
    "fall_out": (("precision@k",), False, False),
    "normalized_dcg": (("ndcg_avg@k",), False, True),
}
#: evalcore's grades are int8: nDCG's gains reach 127
MAX_GRADE = 127
EMPTY_TARGET_ACTIONS = ("neg", "pos", "skip", "error")
AGGREGATIONS = ("mean", "median", "min", "max")
#: torchmetrics ``Metric``'s keywords: accepted, no effect here
METRIC_KWARGS = frozenset({"compute_on_cpu", "dist_sync_on_step", "process_group", "dist_sync_fn",
                           "distributed_available_fn", "sync_on_compute", "compute_with_cache"})


@dataclass(frozen=True)
class Rows:
    """Checked rows: ``preds`` float32, ``target`` int64 (0/1, or grades), ``indexes`` int64, all flat."""

    preds: np.ndarray
    target: np.ndarray
    indexes: np.ndarray


# --------------------------------------------------------------------------- inputs


def as_array(value, name: str) -> np.ndarray:
    """``value`` (torch tensor, numpy array, list) as a numpy array; torch tensors through ``.detach().cpu()``."""
    if value is None:
        raise input_error(name, "is None")
    if hasattr(value, "detach"):
        value = value.detach().cpu()
        try:
            value = value.numpy()
        except TypeError:   # a dtype numpy lacks (bfloat16): as float32, torchmetrics' own cast
            value = value.float().numpy()
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise input_error(name, f"is not an array of numbers ({foreign_reason(exc)})") from None
    if array.dtype.kind not in "biuf":
        raise input_error(name, f"is not an array of numbers (dtype {array.dtype})")
    if array.ndim == 0 or array.size == 0:
        raise input_error(name, f"must be non-empty and not a scalar (shape {array.shape})")
    return array


def checked_rows(preds, target, indexes=None, *, graded: bool = False, ignore_index=None) -> Rows:
    """The rows as torchmetrics checks them: same shapes, rows whose target is ``ignore_index`` dropped, preds
    real (cast to float32, torchmetrics' precision), target binary (``graded``: integer grades 0..127),
    indexes integers. Errors name the parameter."""
    p = as_array(preds, "preds")
    t = as_array(target, "target")
    if t.shape != p.shape:
        raise input_error("target", f"shape {t.shape} differs from preds' {p.shape}")
    if indexes is None:
        i = np.zeros(p.size, dtype=np.int64)
    else:
        i = as_array(indexes, "indexes")
        if i.shape != p.shape:
            raise input_error("indexes", f"shape {i.shape} differs from preds' {p.shape}")
        if i.dtype.kind not in "iu":
            raise input_error("indexes", f"must be integers (the query of each row), not {i.dtype}")
    p, t, i = p.reshape(-1), t.reshape(-1), i.reshape(-1).astype(np.int64)
    if ignore_index is not None:
        kept = t != ignore_index
        p, t, i = p[kept], t[kept], i[kept]
        if not p.size:
            raise input_error("target", f"every row's target is ignore_index ({ignore_index}): nothing is left")
    if p.dtype.kind == "b":
        raise input_error("preds", "must be scores (floats), not booleans")
    with np.errstate(over="ignore"):   # beyond float32's range: +-inf, as torch's .float() gives
        scores = p.astype(np.float32)
    nan = np.flatnonzero(np.isnan(scores))
    if nan.size:
        raise input_error("preds", f"NaN at rows {rows_text(nan)}", rows=nan)
    return Rows(scores, _grades(t, graded), i)


def _grades(t: np.ndarray, graded: bool) -> np.ndarray:
    """The target as int64: 0/1, or (``graded``) integer grades 0..127."""
    top = MAX_GRADE if graded else 1
    bad = np.flatnonzero(~np.isfinite(t) | (t != np.round(t)) | (t < 0) | (t > top)) if t.dtype.kind == "f" \
        else np.flatnonzero((t < 0) | (t > top))
    if bad.size:
        want = f"integer grades from 0 to {MAX_GRADE} (evalcore's gains)" if graded else \
            "binary values (0/1, False/True)"
        raise input_error("target", f"must hold {want}; rows {rows_text(bad)} hold {t[bad[0]]!r}", rows=bad)
    return t.astype(np.int64)


def checked_top_k(top_k) -> int | None:
    """``top_k``: None or a positive integer."""
    if top_k is None:
        return None
    if isinstance(top_k, (bool, np.bool_)) or not isinstance(top_k, (int, np.integer)) or top_k < 1:
        raise OptionError("top_k", f"{top_k!r} is not a positive integer or None")
    return int(top_k)


def _checked_flag(value, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise OptionError(name, f"{value!r} is not True or False")
    return bool(value)


# --------------------------------------------------------------------------- evalcore's evaluation


@dataclass(frozen=True)
class Queries:
    """The rows grouped by query (ascending ``indexes``): per query its rows ``n`` and relevant rows ``r``."""

    ids: np.ndarray
    code: np.ndarray
    n: np.ndarray
    r: np.ndarray


def queries_of(rows: Rows) -> Queries:
    """The query of each row (codes 0..Q-1 in ascending ``indexes``, torchmetrics' order) and its counts."""
    ids, code = np.unique(rows.indexes, return_inverse=True)
    code = code.reshape(-1)
    return Queries(ids, code, np.bincount(code, minlength=ids.size),
                   np.bincount(code, weights=rows.target > 0, minlength=ids.size).astype(np.int64))


def per_query(metric: str, rows: Rows, groups: Queries, top_k: int | None, adaptive_k: bool = False) -> np.ndarray:
    """torchmetrics' ``metric`` of every query (module docstring), in ``groups``' order."""
    needs, positive_only, _ = _METRICS[metric]
    grades = np.where(rows.preds > 0, rows.target, 0) if positive_only else rows.target
    k = top_k or int(groups.n.max())   # no top_k: the whole of every query (k >= each query's n)
    got = _evaluate(rows.preds, grades, groups, needs, k)
    n, r = groups.n, groups.r
    if metric in ("precision", "recall", "fall_out", "average_precision"):
        hits = np.rint(got["precision@k"] * k)   # relevant rows within k (a count: k * hits / k)
    if metric == "average_precision":   # map_cut = (1/R') sum i/r_i, R' the relevant rows with pred > 0
        found = np.bincount(groups.code, weights=grades > 0, minlength=n.size)
        return _ratio(got["map_cut@k"] * found, hits)
    if metric == "precision":
        return hits / (n if top_k is None else np.minimum(top_k, n) if adaptive_k else top_k)
    if metric == "recall":
        return _ratio(hits, r)
    if metric == "fall_out":
        return _ratio(np.minimum(k, n) - hits, n - r)
    return got[needs[0]]


def _ratio(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    return np.divide(a, b, out=np.zeros_like(a), where=b > 0)


def row_order(code: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """The rows by query code, then by float32 score, descending: one stable sort of a 64-bit key, the code
    above the score's bits (mapped so that unsigned order is the floats' order, then reversed); 3x a lexsort."""
    bits = (scores.astype(np.float32) + np.float32(0)).view(np.uint32).astype(np.uint64)   # + 0: -0.0 is 0.0
    ascending = np.where(bits >> 31, ~bits & 0xFFFFFFFF, bits | 0x80000000)
    return np.argsort((code.astype(np.uint64) << 32) | (0xFFFFFFFF - ascending), kind="stable")


def _evaluate(scores: np.ndarray, grades: np.ndarray, groups: Queries, metrics: tuple[str, ...],
              k: int) -> dict[str, np.ndarray]:
    """``metrics`` (at cut-off ``k``) of every query, as ``evalcore.evaluate`` computes them for precomputed
    rankings with scores (``ranking/item``, ``ranking/score``) under qrels, without the dataset around them.

    Each query's rows, sorted by score (descending; equal scores in any order: ``rank_by_lists`` orders each
    tie group by ``ties``), are one list of local items 0..n-1, padded with -1; its rows graded >= 1 are its
    relevant items, the grade their gain. A query without a relevant row counts 0 (the callers apply their
    own rule).
    """
    from evalcore.core import registry
    from evalcore.core.lists import rank_lists
    from evalcore.core.protocols.truth import truth_from_pairs
    from evalcore.core.ranking import rank_by_lists

    n_q, width = groups.n.size, int(groups.n.max())
    order = row_order(groups.code, scores)
    query = groups.code[order]
    place = np.arange(order.size) - (np.cumsum(groups.n) - groups.n)[query]
    items = np.full((n_q, width), -1, dtype=np.int64)
    items[query, place] = place
    ranked = np.full((n_q, width), -np.inf, dtype=np.float32)
    ranked[query, place] = scores[order]
    relevant = grades[order] > 0
    none = np.zeros(0, dtype=np.int64)
    truth = truth_from_pairs(n_q, query[relevant], place[relevant], none, none, None,
                             rel_gain=grades[order][relevant])
    lists = rank_lists(rank_by_lists(items, ranked, truth, ties="pessimistic", n_gallery=width), truth)
    columns = registry.run_columns(list(metrics), (k,), None)
    values = registry.compute(columns, lists.indptr, lists.ranks, lists.n_relevant, np.ones(n_q, dtype=bool),
                              lists)
    found = {c.spec: np.nan_to_num(values[c.name]) for c in columns}
    return {metric: found[metric.replace("@k", f"@{k}")] for metric in metrics}


def _one_query(metric: str, preds, target, top_k, adaptive_k: bool = False) -> np.float64:
    rows = checked_rows(preds, target, graded=_METRICS[metric][2])
    return np.float64(per_query(metric, rows, queries_of(rows), checked_top_k(top_k), adaptive_k)[0])


# --------------------------------------------------------------------------- functional forms


def retrieval_average_precision(preds, target, top_k=None) -> np.float64:
    """AP of one query: (1/h) * sum over relevant rows ranked r_i <= top_k (pred > 0) of i / r_i, h of them
    found (0 if none).

    >>> float(retrieval_average_precision([0.2, 0.3, 0.5], [True, False, True]))
    0.8333333333333333
    """
    return _one_query("average_precision", preds, target, top_k)


def retrieval_reciprocal_rank(preds, target, top_k=None) -> np.float64:
    """RR of one query: 1/r_1, r_1 the rank of the first relevant row (pred > 0), 0 past top_k."""
    return _one_query("reciprocal_rank", preds, target, top_k)


def retrieval_normalized_dcg(preds, target, top_k=None) -> np.float64:
    """nDCG@top_k of one query, the target (0..127) as gain, equal preds sharing their gains (ties averaged)."""
    return _one_query("normalized_dcg", preds, target, top_k)


def retrieval_precision(preds, target, top_k=None, adaptive_k=False) -> np.float64:
    """Precision of one query: relevant rows (pred > 0) in the top k / k (``adaptive_k``: / min(k, n); k = n
    without top_k)."""
    return _one_query("precision", preds, target, top_k, _checked_flag(adaptive_k, "adaptive_k"))


def retrieval_recall(preds, target, top_k=None) -> np.float64:
    """Recall of one query: relevant rows (pred > 0) in the top k / all relevant rows."""
    return _one_query("recall", preds, target, top_k)


def retrieval_hit_rate(preds, target, top_k=None) -> np.float64:
    """Hit rate of one query: 1 when a relevant row ranks within top_k, else 0."""
    return _one_query("hit_rate", preds, target, top_k)


def retrieval_r_precision(preds, target) -> np.float64:
    """R-precision of one query: relevant rows in the top R / R (R the relevant rows; 0 if none)."""
    return _one_query("r_precision", preds, target, None)


def retrieval_fall_out(preds, target, top_k=None) -> np.float64:
    """Fall-out of one query: non-relevant rows in the top k / all non-relevant rows (0 if none)."""
    return _one_query("fall_out", preds, target, top_k)


# --------------------------------------------------------------------------- module classes


def aggregate(values: np.ndarray, aggregation) -> np.float64:
    """The per-query values combined as torchmetrics combines them (``median``: the lower middle value)."""
    from evalcore.core.metrics import exact_mean

    if not values.size:
        return np.float64(0.0)
    if callable(aggregation):
        return np.float64(float(aggregation(values, dim=None)))
    if aggregation == "mean":
        return np.float64(exact_mean(values))
    if aggregation == "median":   # torch.median: the lower of the two middle values
        return np.float64(np.sort(values)[(values.size - 1) // 2])
    return np.float64(values.min() if aggregation == "min" else values.max())


class _RetrievalMetric:
    """torchmetrics' ``RetrievalMetric``: rows gathered by ``update``, grouped by ``indexes`` in ``compute``."""

    _metric = ""
    #: what a query lacks when ``empty_target_action`` applies to it
    _empty_word = "relevant"
    higher_is_better = True
    is_differentiable = False

    def __init__(self, empty_target_action: str = "neg", ignore_index: int | None = None,
                 top_k: int | None = None, aggregation: str | Callable = "mean", **kwargs) -> None:
        if empty_target_action not in EMPTY_TARGET_ACTIONS:
            raise OptionError("empty_target_action", f"{empty_target_action!r} is not one of "
                              f"{', '.join(EMPTY_TARGET_ACTIONS)}")
        if ignore_index is not None and (isinstance(ignore_index, (bool, np.bool_))
                                         or not isinstance(ignore_index, (int, np.integer))):
            raise OptionError("ignore_index", f"{ignore_index!r} is not an integer or None")
        if not (callable(aggregation) or aggregation in AGGREGATIONS):
            raise OptionError("aggregation", f"{aggregation!r} is not one of {', '.join(AGGREGATIONS)} "
                              "or a callable")
        unknown = sorted(set(kwargs) - METRIC_KWARGS)
        if unknown:
            raise OptionError(unknown[0], "unexpected keyword argument (torchmetrics' Metric takes "
                              f"{', '.join(sorted(METRIC_KWARGS))})")
        self.empty_target_action = empty_target_action
        self.ignore_index = ignore_index
        self.top_k = checked_top_k(top_k)
        self.aggregation = aggregation
        self.reset()

    def reset(self) -> None:
        """Forget every row given so far."""
        self._batches: list[Rows] = []

    def update(self, preds, target, indexes) -> None:
        """Keep a batch of rows (``indexes``: each row's query; a query may span batches)."""
        if indexes is None:
            raise input_error("indexes", "is None: give each row's query")
        self._batches.append(checked_rows(preds, target, indexes, graded=_METRICS[self._metric][2],
                                          ignore_index=self.ignore_index))

    def compute(self) -> np.float64:
        """The aggregate over the queries of every row kept (``empty_target_action`` for empty queries)."""
        if not self._batches:
            raise InputError("nothing to compute: call update(preds, target, indexes) first", subject="compute()")
        rows = Rows(*(np.concatenate([getattr(b, f) for b in self._batches]) for f in ("preds", "target", "indexes")))
        return self._value(rows)

    def __call__(self, preds, target, indexes=None) -> np.float64:
        """torchmetrics' ``forward``: the value of this batch alone; the batch is kept for ``compute``."""
        if indexes is None:
            raise input_error("indexes", "is None: give each row's query")
        rows = checked_rows(preds, target, indexes, graded=_METRICS[self._metric][2], ignore_index=self.ignore_index)
        value = self._value(rows)
        self._batches.append(rows)
        return value

    forward = __call__

    def _empty(self, groups: Queries) -> np.ndarray:
        """The queries ``empty_target_action`` applies to: those without a relevant row."""
        return groups.r == 0

    def _value(self, rows: Rows) -> np.float64:
        groups = queries_of(rows)
        values = per_query(self._metric, rows, groups, self.top_k, getattr(self, "adaptive_k", False))
        empty = self._empty(groups)
        if empty.any():
            if self.empty_target_action == "error":
                raise input_error("target", f"queries {rows_text(groups.ids[empty])} (indexes) have no "
                                  f"{self._empty_word} row (empty_target_action='error')")
            values = values[~empty] if self.empty_target_action == "skip" else \
                np.where(empty, 1.0 if self.empty_target_action == "pos" else 0.0, values)
        return aggregate(values, self.aggregation)



class RetrievalMAP(_RetrievalMetric):
    """torchmetrics' ``RetrievalMAP``: the aggregate of each query's AP (``retrieval_average_precision``).

    >>> RetrievalMAP()([0.2, 0.3, 0.5, 0.1, 0.3, 0.5, 0.2], [0, 0, 1, 0, 1, 0, 1], indexes=[0, 0, 0, 1, 1, 1, 1])
    np.float64(0.7916666666666666)
    """

    _metric = "average_precision"


class RetrievalMRR(_RetrievalMetric):
    """torchmetrics' ``RetrievalMRR``: the aggregate of each query's RR (``retrieval_reciprocal_rank``)."""

    _metric = "reciprocal_rank"


class RetrievalNormalizedDCG(_RetrievalMetric):
    """torchmetrics' ``RetrievalNormalizedDCG``: each query's tie-averaged nDCG (``retrieval_normalized_dcg``)."""

    _metric = "normalized_dcg"


class RetrievalPrecision(_RetrievalMetric):
    """torchmetrics' ``RetrievalPrecision`` (``retrieval_precision``), with ``adaptive_k``."""

    _metric = "precision"

    def __init__(self, empty_target_action: str = "neg", ignore_index: int | None = None,
                 top_k: int | None = None, adaptive_k: bool = False, aggregation: str | Callable = "mean",
                 **kwargs) -> None:
        super().__init__(empty_target_action, ignore_index, top_k, aggregation, **kwargs)
        self.adaptive_k = _checked_flag(adaptive_k, "adaptive_k")


class RetrievalRecall(_RetrievalMetric):
    """torchmetrics' ``RetrievalRecall`` (``retrieval_recall``)."""

    _metric = "recall"


class RetrievalHitRate(_RetrievalMetric):
    """torchmetrics' ``RetrievalHitRate`` (``retrieval_hit_rate``)."""

    _metric = "hit_rate"


class RetrievalRPrecision(_RetrievalMetric):
    """torchmetrics' ``RetrievalRPrecision`` (``retrieval_r_precision``; no ``top_k``)."""

    _metric = "r_precision"

    def __init__(self, empty_target_action: str = "neg", ignore_index: int | None = None,
                 aggregation: str | Callable = "mean", **kwargs) -> None:
        super().__init__(empty_target_action, ignore_index, None, aggregation, **kwargs)


class RetrievalFallOut(_RetrievalMetric):
    """torchmetrics' ``RetrievalFallOut`` (``retrieval_fall_out``): lower is better; ``empty_target_action``
    (default ``pos``) applies to queries without a non-relevant row."""

    _metric = "fall_out"
    higher_is_better = False
    _empty_word = "non-relevant"

    def __init__(self, empty_target_action: str = "pos", ignore_index: int | None = None,
                 top_k: int | None = None, aggregation: str | Callable = "mean", **kwargs) -> None:
        super().__init__(empty_target_action, ignore_index, top_k, aggregation, **kwargs)

    def _empty(self, groups: Queries) -> np.ndarray:
        return groups.r == groups.n
