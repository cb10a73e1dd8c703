"""The Market-1501 evaluation that torchreid and fast-reid share, computed by ``evalcore.evaluate``.

Their definition (``eval_market1501`` in both tools), per query:

* rank the gallery by ascending distance;
* remove the gallery items with the query's identity *and* its camera
  (evalcore's ``reid`` protocol: those are junk);
* a query none of whose identity is left (R = 0) is skipped: it counts in
  neither the CMC nor the mAP; if every query is skipped the tools stop with
  an ``AssertionError``, here an ``InputError`` naming ``q_pids``;
* ``cmc[k-1]`` = the share of the counted queries whose first match is at
  rank <= k, for k = 1 .. min(max_rank, number of gallery items);
* ``AP = (1/R) * sum_i i / r_i`` over the query's matches at ranks r_i;
  fast-reid's ``INP = R / r_R`` (r_R: the rank of the last match).

Identities and cameras are compared as the tools compare them (equal values
match; ``-1`` is an identity like any other), coded once by
``evalcore.io.identities.code_identities``; a missing identity (None, NaN)
matches nothing, and a missing camera is refused.

Where the tools' code leaves a result unspecified, evalcore's is stated:

* **Ties.** The tools order equal distances by ``np.argsort``'s default
  sort, which is not stable: within a tie group the order depends on the
  numpy version and the CPU (numpy 2's SIMD sorts reorder even 8 equal
  values). evalcore counts a tie pessimistically (a match after every
  non-match it ties with), the lowest value any tie order gives, and the
  same on every machine; without a tie between a match and a non-match the
  numbers are the same.
* **Precision.** The distances are compared as given (float64 stays
  float64); the tools' Cython path first rounds them to float32, which can
  create ties. The CMC comes back as float32 (as theirs), AP and INP as
  float64, exact (their Cython path sums in float32).
* **Short lists.** A counted query whose list, after removal, is shorter
  than ``max_rank`` keeps CMC 1 past its end (it has found its match); the
  tools' Python path fails there and their Cython path reads stale memory.
* **Infinite distances** (a pair masked out) rank last, tied, as in the
  tools; NaN is refused.
* ``use_metric_cuhk03=True`` (CUHK03's single-gallery-shot metric) draws,
  per query and per repeat, one gallery image per identity (after the
  removal above) and averages the CMC of the ten drawn galleries; the AP
  stays Market-1501's AP on the whole gallery (as in the tools). The tools
  draw from numpy's global generator, unseeded, so two runs differ; evalcore
  draws from ``seed`` (default 0) by the rule of
  ``evalcore.core.single_shot``, the same numbers on every machine. Its CMC
  has min(max_rank, number of gallery items) points like the Market-1501
  one: past the number of gallery identities it stays 1 (the tools' Python
  path returns a shorter curve, their Cython path zeros there).
* ``use_cython`` is accepted and has no effect. The tools' note "number of
  gallery samples is quite small" is not printed.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from evalcore.api import evaluate
from evalcore.cuhk03_api import REPEATS, SingleShot, single_shot_protocol
from evalcore.errors import EvalcoreWarning, InputError, OptionError, foreign_reason, input_error
from evalcore.io.identities import NO_IDENTITY, code_identities

#: evalcore's parameter names -> the tools' (errors from evalcore.evaluate are re-worded with these)
THEIR_NAMES = {"distances": "distmat", "query_labels": "q_pids", "gallery_labels": "g_pids",
               "query_cams": "q_camids", "gallery_cams": "g_camids", "max_rank": "max_rank"}
#: integer distances convert to float64 exactly up to here
EXACT_INTEGER = 2 ** 53


@dataclass(frozen=True)
class Market1501:
    """The evaluation's numbers: ``cmc`` (float32, min(max_rank, G) points), and per counted query, in
    query order, ``ap`` and ``inp`` (float64)."""

    cmc: np.ndarray
    ap: np.ndarray
    inp: np.ndarray


def market1501(distmat, q_pids, g_pids, q_camids, g_camids, max_rank=50) -> Market1501:
    """Market-1501's CMC, AP and INP of the distance matrix (module docstring), exact, by evalcore's engine."""
    distances, top, q_codes, g_codes, q_cams, g_cams = their_inputs(distmat, q_pids, g_pids, q_camids, g_camids,
                                                                    max_rank)
    try:
        with warnings.catch_warnings():  # skipping the queries whose identity is not in the gallery is their rule
            warnings.filterwarnings("ignore", r".*queries have no relevant gallery item", EvalcoreWarning)
            result = evaluate(distances=distances, query_labels=q_codes, gallery_labels=g_codes, query_cams=q_cams,
                              gallery_cams=g_cams, protocol="reid", ks=(1,), max_rank=top, ties="pessimistic",
                              empty_queries="skip", metrics=["map", "minp", "first_rank"])
    except InputError as exc:
        raise exc.reworded(their_words).with_traceback(None) from None
    per_query = result.per_query.sort_by("query")
    counted = np.asarray(per_query.column("n_relevant")) > 0
    if not counted.any():
        raise OptionError("q_pids", "no query's identity appears in the gallery under another camera, so no query "
                         "can be evaluated (torchreid: 'all query identities do not appear in gallery')")
    points = sorted((row["k"], row["cmc"]) for row in result.cmc.to_pylist() if row["group"] == "all")
    cmc = np.array([value for _, value in points], dtype=np.float64)
    return Market1501(cmc=cmc.astype(np.float32),
                      ap=np.asarray(per_query.column("ap"), dtype=np.float64)[counted],
                      inp=np.asarray(per_query.column("inp"), dtype=np.float64)[counted])


def cuhk03(distmat, q_pids, g_pids, q_camids, g_camids, max_rank=50, seed=0) -> SingleShot:
    """CUHK03's single-gallery-shot CMC (torchreid's 10 repeats, drawn from ``seed``) and Market-1501's AP."""
    distances, top, q_codes, g_codes, q_cams, g_cams = their_inputs(distmat, q_pids, g_pids, q_camids, g_camids,
                                                                    max_rank)
    try:
        return single_shot_protocol(distances, q_codes, g_codes, q_cams, g_cams, repeats=REPEATS, seed=seed,
                                    max_rank=top, chunk_rows=None)
    except InputError as exc:
        raise exc.reworded(their_words).with_traceback(None) from None


def their_inputs(distmat, q_pids, g_pids, q_camids, g_camids, max_rank):
    """The tools' arguments checked and coded: (distances, min(max_rank, G), q/g identity codes, q/g cameras)."""
    distances = distance_matrix(distmat)
    top = checked_max_rank(max_rank, distances.shape[1])
    q_codes, g_codes = code_identities(q_pids, g_pids, negative_is_identity=True, names=("q_pids", "g_pids"))
    q_cams, g_cams = code_identities(q_camids, g_camids, negative_is_identity=True, names=("q_camids", "g_camids"))
    for name, cams in (("q_camids", q_cams), ("g_camids", g_cams)):
        missing = np.flatnonzero(cams == NO_IDENTITY)
        if missing.size:
            raise input_error(name, f"row {int(missing[0])} has no camera (None or NaN); the same-camera rule "
                             "needs every image's camera", rows=[int(missing[0])])
    return distances, top, q_codes, g_codes, q_cams, g_cams


def distance_matrix(distmat) -> np.ndarray:
    """``distmat`` as a 2-D float array (numpy, lists, CPU torch tensors; integers exactly as float64)."""
    try:
        distances = np.asarray(distmat)
    except (TypeError, ValueError, RuntimeError) as exc:  # a CUDA or grad-holding torch tensor, ragged lists
        raise OptionError("distmat", f"cannot be read as an array ({foreign_reason(exc)})") from None
    if distances.ndim != 2:
        raise OptionError("distmat", f"must be 2-D (queries, gallery items), got shape {distances.shape}")
    if distances.dtype.kind in "iu":
        if distances.size and max(abs(int(distances.min())), abs(int(distances.max()))) > EXACT_INTEGER:
            raise OptionError("distmat", "integer distances beyond 2**53 cannot be compared exactly as floats")
        distances = distances.astype(np.float64)
    if distances.dtype.kind != "f":
        raise OptionError("distmat", f"dtype {distances.dtype} is not a float or integer type")
    return without_infinities(distances)


def without_infinities(distances: np.ndarray) -> np.ndarray:
    """+inf (-inf) as the dtype's largest (lowest) finite value: the same order, which evalcore compares exactly.

    ReID code masks pairs out with an infinite distance (they rank last, tied
    with each other); evalcore refuses non-finite scores, so they become the
    extreme finite value, unless a finite value already sits there (then the
    order would change, and the matrix is refused).
    """
    infinite = np.isinf(distances)
    if not infinite.any():
        return distances
    top = np.finfo(distances.dtype).max
    finite = distances[~infinite]
    if np.abs(finite).max(initial=0) == top:
        raise OptionError("distmat", f"holds infinite distances and finite ones at +-{top} (the dtype's limit), "
                         "which cannot be told apart exactly")
    return np.where(infinite, np.copysign(top, distances), distances).astype(distances.dtype)


def checked_max_rank(max_rank, n_gallery: int) -> int:
    """min(max_rank, G), as the tools cut it; max_rank must be a positive integer and the gallery not empty."""
    if isinstance(max_rank, (bool, np.bool_)) or not isinstance(max_rank, (int, np.integer)) or max_rank < 1:
        raise OptionError("max_rank", f"{max_rank!r} must be a positive integer")
    if n_gallery == 0:
        raise OptionError("g_pids", "the gallery is empty, so no query identity can appear in it")
    return int(min(max_rank, n_gallery))


def their_words(word: str) -> str:
    """A word an evalcore error names (its subject, a mention) as the tools' parameter (``query_labels`` ->
    ``q_pids``)."""
    return THEIR_NAMES.get(word, word)
