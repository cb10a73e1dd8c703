"""torchreid's ``evaluate_rank``, computed exactly by evalcore: ``from evalcore.compat.torchreid import evaluate_rank``.

Same signature and return value as ``torchreid.metrics.rank.evaluate_rank``
(``all_cmc, mAP``) and the same definition (Market-1501's rule: a gallery
image of the query's identity and camera is removed; a query whose identity
is left nowhere in the gallery is skipped). Where torchreid leaves the
result unspecified (the order of tied distances) or differs by path
(float32 rounding in its Cython code), ``evalcore.compat.market1501`` says
what evalcore does: ties count pessimistically, distances are compared as
given. Identities and cameras may be any hashable values (strings, too).
"""
from __future__ import annotations

import numpy as np

from evalcore.compat.market1501 import cuhk03, market1501


def evaluate_rank(distmat, q_pids, g_pids, q_camids, g_camids, max_rank=50, use_metric_cuhk03=False,
                  use_cython=True, *, seed=0):
    """CMC and mAP of the (num_query, num_gallery) distance matrix, as torchreid defines them.

    Returns ``(all_cmc, mAP)``: ``all_cmc`` float32 of min(max_rank,
    num_gallery) points, ``all_cmc[k-1]`` the share of counted queries with a
    match at rank <= k; ``mAP`` the mean AP over the counted queries.
    ``use_metric_cuhk03=True``: CUHK03's single-gallery-shot CMC (ten
    repeats of one gallery image per identity, drawn from ``seed``, an extra
    keyword, default 0: the same numbers on every machine) and the same mAP.
    ``use_cython`` has no effect. Raises ``InputError`` naming the
    parameter (``distmat``, ``q_pids``, ...), also when no query counts
    (where torchreid raises ``AssertionError``).

    >>> import numpy as np
    >>> distmat = np.array([[0.1, 0.4, 0.3], [0.2, 0.1, 0.5]], dtype=np.float32)
    >>> cmc, mAP = evaluate_rank(distmat, ["ann", "bob"], ["ann", "bob", "bob"], [0, 0], [1, 1, 0], max_rank=3)
    >>> cmc.tolist(), round(float(mAP), 4)
    ([1.0, 1.0, 1.0], 1.0)
    """
    del use_cython  # one exact path
    if use_metric_cuhk03:
        drawn = cuhk03(distmat, q_pids, g_pids, q_camids, g_camids, max_rank, seed)
        return drawn.cmc.astype(np.float32), np.float64(drawn.ap.mean())
    found = market1501(distmat, q_pids, g_pids, q_camids, g_camids, max_rank)
    return found.cmc, np.float64(found.ap.mean())
