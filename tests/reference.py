"""A brute-force evaluator written independently of evalcore, for the tests.

It does what the field's evaluate.py scripts do: the full score matrix, a
full sort of every row, and a per-query loop. Scores are computed with the
same float32 numbers evalcore uses (``score_matrix`` below is a plain product
that the tests feed with evalcore's own canonical scores when exact ties
matter, or with well-separated data otherwise).
"""
from __future__ import annotations

import numpy as np


def cosine_scores(query: np.ndarray, gallery: np.ndarray, similarity: str = "cosine") -> np.ndarray:
    q = np.asarray(query, dtype=np.float64)
    g = np.asarray(gallery, dtype=np.float64)
    if similarity == "cosine":
        q = q / np.linalg.norm(q, axis=1, keepdims=True)
        g = g / np.linalg.norm(g, axis=1, keepdims=True)
    return q @ g.T


def relevance_reid(ql, qc, gl, gc, gjunk=None):
    """(relevant, junk) boolean matrices under the Market-1501 rule."""
    same = (ql[:, None] == gl[None, :]) & (ql[:, None] >= 0)
    same_cam = qc[:, None] == gc[None, :]
    rel, junk = same & ~same_cam, same & same_cam
    if gjunk is not None:
        junk = junk | gjunk[None, :]
        rel = rel & ~gjunk[None, :]
    return rel, junk


def relevance_class(ql, gl, gjunk=None):
    rel = (ql[:, None] == gl[None, :]) & (ql[:, None] >= 0)
    junk = np.zeros_like(rel)
    if gjunk is not None:
        junk = junk | gjunk[None, :]
        rel = rel & ~gjunk[None, :]
    return rel, junk


def evaluate_query(scores, rel, junk, ks, ties="pessimistic", map_at=None, threshold=None):
    """Every per-query column for one query, from a full sort (the conventional way)."""
    keep = ~junk
    idx = np.nonzero(keep)[0]
    s = scores[idx]
    r = rel[idx]
    # sort by score descending; ties: pessimistic puts non-relevant first, then lowest index
    tie_key = r.astype(int) if ties == "pessimistic" else (~r).astype(int)
    order = np.lexsort((idx, tie_key, -s))
    ranked_rel = r[order]
    R = int(r.sum())
    out = {"n_relevant": R, "n_junk": int(junk.sum())}
    out["top1"] = int(idx[order[0]]) if len(order) else None
    out["top1_score"] = float(s[order[0]]) if len(order) else None
    out["relevant_score"] = float(s[r].max()) if R else None
    if R == 0:
        for k in ["first_rank", "last_rank", "ap", "ap_trapz", "inp", "rr"]:
            out[k] = None
        for k in ks:
            out[f"hit_at_{k}"] = out[f"recall_at_{k}"] = out[f"precision_at_{k}"] = None
        if map_at:
            out[f"ap_at_{map_at}"] = None
    else:
        ranks = np.nonzero(ranked_rel)[0] + 1
        i = np.arange(1, R + 1)
        out["first_rank"] = int(ranks[0])
        out["last_rank"] = int(ranks[-1])
        out["ap"] = float(np.mean(i / ranks))
        p_before = np.where(ranks > 1, (i - 1) / np.maximum(ranks - 1, 1), 1.0)
        out["ap_trapz"] = float(np.mean((i / ranks + p_before) / 2))
        out["inp"] = R / ranks[-1]
        out["rr"] = 1 / ranks[0]
        for k in ks:
            n = int((ranks <= k).sum())
            out[f"hit_at_{k}"] = float(ranks[0] <= k)
            out[f"recall_at_{k}"] = n / R
            out[f"precision_at_{k}"] = n / k
        if map_at:
            sel = ranks <= map_at
            out[f"ap_at_{map_at}"] = float((i[sel] / ranks[sel]).sum() / min(R, map_at))
    if threshold is not None:
        accepted = out["top1_score"] is not None and out["top1_score"] >= threshold
        correct = out.get("first_rank") == 1
        out["accepted"] = bool(accepted)
        out["outcome"] = ("TP" if correct else "FP") if accepted else ("FN" if correct else "TN")
    return out


def evaluate_all(scores, rel, junk, ks, **kw):
    return [evaluate_query(scores[i], rel[i], junk[i], ks, **kw) for i in range(scores.shape[0])]
