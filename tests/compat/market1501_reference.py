"""An independent brute-force Market-1501 evaluation, written from torchreid's and fast-reid's definition.

Per query: order the gallery by distance (equal distances: non-matches
first, the pessimistic order; on distinct distances this is np.argsort's
order), drop the items with the query's pid and camid, skip the query if no
match is left, CMC = clipped cumulative sum, AP = sum of precision at each
match / number of matches, INP = matches / position of the last match.
Identities and cameras are compared with Python's ==, element by element, so
strings and mixed values work as they do in torchreid's Python path.
"""
from __future__ import annotations

import numpy as np


def market1501_reference(distmat, q_pids, g_pids, q_camids, g_camids, max_rank):
    """(cmc float64 of min(max_rank, G) points, [AP per counted query], [INP per counted query])."""
    distmat = np.asarray(distmat)
    num_q, num_g = distmat.shape
    max_rank = min(max_rank, num_g)
    all_cmc, all_ap, all_inp = [], [], []
    for i in range(num_q):
        match = np.array([g_pids[j] == q_pids[i] for j in range(num_g)], dtype=bool)
        same_cam = np.array([g_camids[j] == q_camids[i] for j in range(num_g)], dtype=bool)
        order = np.lexsort((match, distmat[i]))  # by distance, then non-matches (False) before matches
        keep = ~(match & same_cam)[order]
        raw = match[order][keep].astype(np.int64)
        if not raw.any():
            continue
        hits = np.cumsum(raw)
        cmc = np.minimum(hits, 1).astype(np.float64)
        # past the end of a short list the query has found its match: the curve stays at 1
        cmc = np.concatenate([cmc, np.ones(max(0, max_rank - cmc.size))])[:max_rank]
        all_cmc.append(cmc)
        positions = np.flatnonzero(raw) + 1
        all_ap.append(float(np.sum(hits[positions - 1] / positions) / raw.sum()))
        all_inp.append(float(raw.sum() / positions[-1]))
    assert all_cmc, "no query has a match"
    return np.mean(all_cmc, axis=0), all_ap, all_inp
