"""αQE and DBA: each vector replaced by the weighted, renormalised sum of itself and its K nearest neighbours.

    x' = (x + Σ_{j=1..K} w_j n_j) / ||x + Σ_j w_j n_j||,    w_j = max(s_j, 0)^α   (0^0 = 1)

where n_1 .. n_K are x's K nearest rows of the other side (exact top-k on
canonical scores s_j, ties to the lower index: ``core.scan.neighbors``) as
normalised, and x itself counts with weight 1 (its cosine with itself).
Negative similarities are clamped to 0 before the power, as the
landmark-retrieval implementations do, so an odd α never subtracts a
neighbour; α = 0 is the plain average query expansion (every weight 1).

DBA (database-side augmentation) applies this to every gallery row with its
K nearest *other* gallery rows (the row itself is removed from its list);
αQE to every query with its K nearest gallery rows (after DBA, of the
augmented gallery). The sum runs in float64, self first and then the
neighbours best first, elementwise only: the result depends on the lists
alone, not on BLAS, order or chunking, and identical rows with identical
lists get identical vectors (so exact ties stay ties).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Expansion:
    """One expansion's parameters: ``k`` neighbours (>= 1) weighted by similarity^``alpha`` (>= 0)."""

    k: int
    alpha: float


def expansion_weights(scores: np.ndarray, alpha: float) -> np.ndarray:
    """w = max(s, 0)^α in float64, with 0^0 = 1 (α = 0: every neighbour counts 1)."""
    return np.power(np.maximum(scores.astype(np.float64), 0.0), float(alpha))


def without_self(ids: np.ndarray, scores: np.ndarray, r0: int) -> tuple[np.ndarray, np.ndarray]:
    """Lists of k + 1 rows of a side searched against itself, as its k nearest *other* rows: row r0 + i's
    own index is removed where it appears, else the last entry (then k others all rank above it)."""
    n, width = ids.shape
    keep = ids != (r0 + np.arange(n, dtype=np.int64))[:, None]
    keep[keep.all(axis=1), -1] = False
    return ids[keep].reshape(n, width - 1), scores[keep].reshape(n, width - 1)


def expand_rows(rows: np.ndarray, neighbours: np.ndarray, ids: np.ndarray, scores: np.ndarray,
                alpha: float) -> np.ndarray:
    """x' for normalised float32 ``rows`` with lists ``ids`` (n, K) into ``neighbours`` (normalised rows) and
    their canonical ``scores``: float32 rows of the renormalised float64 sum (module docstring). A row whose
    sum is zero (possible only with α = 0 and an exactly opposite neighbour) comes back as NaN."""
    acc = rows.astype(np.float64)
    weights = expansion_weights(scores, alpha)
    for j in range(ids.shape[1]):  # best first, one neighbour at a time: a fixed order of float64 sums
        acc += weights[:, j, None] * neighbours[ids[:, j]].astype(np.float64)
    norms = np.sqrt(np.einsum("ij,ij->i", acc, acc))
    with np.errstate(invalid="ignore", divide="ignore"):
        return (acc / norms[:, None]).astype(np.float32)
