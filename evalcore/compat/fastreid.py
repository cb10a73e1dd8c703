"""fast-reid's ``evaluate_rank``, computed exactly by evalcore: ``from evalcore.compat.fastreid import evaluate_rank``.

Same signature and return value as ``fastreid.evaluation.rank.evaluate_rank``
(``all_cmc, all_AP, all_INP``) and the same definition (Market-1501's rule,
as torchreid's, plus INP = R / rank of the last match, the term of mINP).
``all_AP`` and ``all_INP`` hold one value per counted query, in query order:
fast-reid's Python path returns lists and its Cython path float32 arrays;
here they are float64 arrays, exact, and ``np.mean`` of each gives the mAP and
mINP fast-reid reports. Ties and precision: ``evalcore.compat.market1501``.
"""
from __future__ import annotations

import numpy as np

from evalcore.compat.market1501 import cuhk03, market1501


def evaluate_rank(distmat, q_pids, g_pids, q_camids, g_camids, max_rank=50, use_metric_cuhk03=False,
                  use_cython=True, *, seed=0):
    """CMC, per-query AP and per-query INP of the distance matrix, as fast-reid defines them.

    Returns ``(all_cmc, all_AP, all_INP)``: ``all_cmc`` float32 of
    min(max_rank, num_gallery) points; ``all_AP``, ``all_INP`` float64, one
    per query whose identity appears in the gallery under another camera.
    ``use_metric_cuhk03=True``: as fast-reid, returns ``(all_cmc, mAP)``,
    CUHK03's single-gallery-shot CMC (ten repeats drawn from ``seed``, an
    extra keyword, default 0) and the mean Market-1501 AP
    (``evalcore.compat.market1501``). ``use_cython`` has no effect.

    >>> import numpy as np
    >>> distmat = np.array([[0.1, 0.4, 0.3], [0.2, 0.1, 0.5]], dtype=np.float32)
    >>> cmc, all_AP, all_INP = evaluate_rank(distmat, [1, 2], [1, 2, 2], [0, 0], [1, 1, 0])
    >>> cmc.tolist(), all_AP.tolist(), all_INP.tolist()
    ([1.0, 1.0, 1.0], [1.0, 1.0], [1.0, 1.0])
    """
    del use_cython  # one exact path
    if use_metric_cuhk03:  # fast-reid's eval_cuhk03 returns two values, not three
        drawn = cuhk03(distmat, q_pids, g_pids, q_camids, g_camids, max_rank, seed)
        return drawn.cmc.astype(np.float32), np.float64(drawn.ap.mean())
    found = market1501(distmat, q_pids, g_pids, q_camids, g_camids, max_rank)
    return found.cmc, found.ap, found.inp
