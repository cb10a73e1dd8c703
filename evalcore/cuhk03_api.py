"""``evalcore.cuhk03``: CUHK03's single-gallery-shot CMC, seeded and exact, with Market-1501's mAP.

The protocol (torchreid's ``eval_cuhk03``; definition and the draw in
``evalcore.core.single_shot``): per query, the gallery items of its identity
and camera are removed, a query with none of its identity left is skipped,
and ``repeats`` times one kept gallery item per identity is drawn; the CMC is
averaged over the repeats and the counted queries. The AP is not sampled:
torchreid computes it on the whole gallery (after removal), which is
Market-1501's AP, computed here by ``evalcore.evaluate`` (``reid`` protocol,
ties pessimistic). The draws come from ``seed`` alone (not numpy's global
generator), so the numbers are the same on every machine and for every
``chunk_rows``.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from evalcore.api import evaluate
from evalcore.core import single_shot
from evalcore.errors import EvalcoreWarning, OptionError, input_error
from evalcore.io.identities import NO_IDENTITY, code_identities

#: torchreid's number of repeats
REPEATS = 10
#: the most repeats accepted (the work grows with queries x repeats x identities)
MAX_REPEATS = 10_000
#: drawn entries (query x repeat x identity) held at once: bounds memory to ~100 MB
BLOCK_ENTRIES = 1 << 22


@dataclass(frozen=True)
class SingleShot:
    """CUHK03's numbers. ``cmc`` float64, min(max_rank, G) points: ``cmc[k-1]`` the share of (counted query,
    repeat) pairs whose match ranks <= k in the drawn gallery; ``ap`` float64, Market-1501's AP of each counted
    query on the whole gallery; ``queries`` the counted query rows (ascending); ``ranks`` (counted, repeats)
    int64, the match's rank in each drawn gallery; ``seed`` and ``repeats`` as used."""

    cmc: np.ndarray
    ap: np.ndarray
    queries: np.ndarray
    ranks: np.ndarray
    seed: int
    repeats: int

    @property
    def map(self) -> float:
        """The mean AP over the counted queries."""
        return float(self.ap.mean())


def cuhk03(*, distances, query_labels, gallery_labels, query_cams, gallery_cams, repeats: int = REPEATS,
           seed: int = 0, max_rank: int = 50, chunk_rows: int | None = None) -> SingleShot:
    """CUHK03's single-gallery-shot CMC and the mAP of the (Q, G) distance matrix (lower is better).

    Identities and cameras as in ``evalcore.evaluate`` (integers, a negative
    label: no identity; or any hashable values); every row needs a camera.
    ``repeats`` draws per query (torchreid: 10), from ``seed`` (an integer in
    [0, 2**64)); ``chunk_rows`` bounds the query rows held at once and does
    not change the result. Raises ``InputError`` naming the parameter, also
    when no query has an item of its identity under another camera.

    >>> import numpy as np, evalcore
    >>> d = np.array([[0.1, 0.2, 0.3, 0.4]])
    >>> r = evalcore.cuhk03(distances=d, query_labels=[7], gallery_labels=[7, 8, 8, 9], query_cams=[0],
    ...                     gallery_cams=[1, 1, 1, 1], max_rank=3)
    >>> r.cmc.tolist(), r.map
    ([1.0, 1.0, 1.0], 1.0)
    """
    from evalcore.api import as_given
    q_labels, g_labels = code_identities(as_given(query_labels), as_given(gallery_labels))
    q_cams, g_cams = code_identities(as_given(query_cams), as_given(gallery_cams), negative_is_identity=True,
                                     names=("query_cams", "gallery_cams"))
    return single_shot_protocol(distances, q_labels, g_labels, q_cams, g_cams, repeats=repeats, seed=seed,
                                max_rank=max_rank, chunk_rows=chunk_rows)


def single_shot_protocol(distances, q_labels: np.ndarray, g_labels: np.ndarray, q_cams: np.ndarray,
                         g_cams: np.ndarray, *, repeats: int, seed: int, max_rank: int,
                         chunk_rows: int | None) -> SingleShot:
    """``cuhk03`` on identities and cameras already coded to int64 (labels: -1 no identity)."""
    repeats, seed, chunk_rows = checked_parameters(repeats, seed, chunk_rows)
    shape = np.shape(distances)
    if len(shape) != 2:
        raise OptionError("distances", f"must be 2-D (queries, gallery items), got shape {shape}")
    for name, values, size in (("query_labels", q_labels, shape[0]), ("gallery_labels", g_labels, shape[1]),
                               ("query_cams", q_cams, shape[0]), ("gallery_cams", g_cams, shape[1])):
        if values.shape != (size,):
            raise input_error(name, f"has {values.size} rows, the distance matrix {size}")
        if name.endswith("cams") and (values == NO_IDENTITY).any():
            row = int(np.flatnonzero(values == NO_IDENTITY)[0])
            raise input_error(name, f"row {row} has no camera (None or NaN); the same-camera rule needs "
                             "every row's camera", rows=[row])
    if isinstance(max_rank, (bool, np.bool_)) or not isinstance(max_rank, (int, np.integer)) or max_rank < 1:
        raise OptionError("max_rank", f"{max_rank!r} must be a positive integer")
    if shape[1] == 0:
        raise OptionError("gallery_labels", "the gallery is empty, so no query identity can appear in it")
    top = int(min(max_rank, shape[1]))
    ap, counted_rows = market_ap(distances, q_labels, g_labels, q_cams, g_cams, top, chunk_rows)
    queries, ranks = drawn_ranks(distances, q_labels, g_labels, q_cams, g_cams, repeats, seed, chunk_rows)
    if not np.array_equal(queries, counted_rows):  # one rule in two places: say so loudly if they ever part
        raise AssertionError("cuhk03: the counted queries of the AP and of the draws differ")
    return SingleShot(cmc=single_shot.cmc_points(ranks, top), ap=ap, queries=queries, ranks=ranks, seed=seed,
                      repeats=repeats)


def checked_parameters(repeats, seed, chunk_rows) -> tuple[int, int, int | None]:
    """``repeats`` in 1 .. MAX_REPEATS, ``seed`` in [0, 2**64), ``chunk_rows`` None or positive: as ints."""
    def integer(value) -> bool:
        return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
    if not integer(repeats) or not 1 <= repeats <= MAX_REPEATS:
        raise OptionError("repeats", f"{repeats!r} must be an integer from 1 to {MAX_REPEATS}")
    if not integer(seed) or not 0 <= seed < 2 ** 64:
        raise OptionError("seed", f"{seed!r} must be an integer from 0 to 2**64 - 1")
    if chunk_rows is not None and (not integer(chunk_rows) or chunk_rows < 1):
        raise OptionError("chunk_rows", f"{chunk_rows!r} must be a positive integer")
    return int(repeats), int(seed), None if chunk_rows is None else int(chunk_rows)


def market_ap(distances, q_labels, g_labels, q_cams, g_cams, top: int, chunk_rows) -> tuple[np.ndarray, np.ndarray]:
    """Market-1501's AP of every query with a relevant item (``reid`` rule), by ``evaluate``: (ap, query rows)."""
    with warnings.catch_warnings():  # skipping the queries whose identity is not in the gallery is the rule
        warnings.filterwarnings("ignore", r".*queries have no relevant gallery item", EvalcoreWarning)
        result = evaluate(distances=distances, query_labels=q_labels, gallery_labels=g_labels, query_cams=q_cams,
                          gallery_cams=g_cams, protocol="reid", ks=(1,), max_rank=top, ties="pessimistic",
                          empty_queries="skip", metrics=["map"], chunk_rows=chunk_rows)
    per_query = result.per_query.sort_by("query")
    counted = np.asarray(per_query.column("n_relevant")) > 0
    if not counted.any():
        raise OptionError("query_labels", "no query's identity appears in the gallery under another camera, so no "
                         "query can be evaluated")
    rows = np.asarray(per_query.column("query"), dtype=np.int64)[counted]
    return np.asarray(per_query.column("ap"), dtype=np.float64)[counted], rows


def drawn_ranks(distances, q_labels, g_labels, q_cams, g_cams, repeats: int, seed: int,
                chunk_rows) -> tuple[np.ndarray, np.ndarray]:
    """The counted query rows and the match's rank in each of their drawn galleries, (counted, repeats),
    block by block of query rows (each query's draws are its own, so the blocks do not matter)."""
    groups = single_shot.identity_groups(g_labels)
    width = max(1, BLOCK_ENTRIES // (repeats * groups.labels.size))
    block = min(chunk_rows or width, width)
    found_rows, found_ranks = [], []
    for start in range(0, q_labels.size, block):
        rows = np.arange(start, min(start + block, q_labels.size), dtype=np.int64)
        items, match_group, counted = single_shot.sample_gallery(groups, g_cams, rows, q_labels[rows],
                                                                 q_cams[rows], repeats, seed)
        if not counted.any():
            continue
        block_distances = np.asarray(distances[start:start + rows.size])[counted]
        found_rows.append(rows[counted])
        found_ranks.append(single_shot.match_ranks(block_distances, items[counted], match_group[counted]))
    if not found_rows:
        return np.empty(0, np.int64), np.empty((0, repeats), np.int64)
    return np.concatenate(found_rows), np.concatenate(found_ranks)
