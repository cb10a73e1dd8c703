"""Label matching shared by the ``class`` and ``reid`` protocols: one sort of the gallery labels, a range per query."""
from __future__ import annotations

import numpy as np

#: the gallery side the label protocols keep for a run (one cache entry for ``class`` and ``reid``)
LABEL_SIDE = ("label", "cam", "junk")

def label_index(gallery_label: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(order, sorted labels): one stable sort of the gallery labels, reusable across chunks."""
    order = np.argsort(gallery_label, kind="stable")
    return order, gallery_label[order]


def label_candidates(query_label: np.ndarray, gallery_label: np.ndarray, index=None):
    """Pairs (query row, gallery index) that share a non-negative label.

    A range per query in the sorted gallery labels: no loop over the gallery,
    no Q x G comparison.
    """
    order, sorted_labels = index if index is not None else label_index(gallery_label)
    lo = np.searchsorted(sorted_labels, query_label, side="left")
    hi = np.searchsorted(sorted_labels, query_label, side="right")
    hi = np.where(query_label < 0, lo, hi)  # a negative label is no identity
    counts = hi - lo
    rows = np.repeat(np.arange(len(query_label), dtype=np.int64), counts)
    starts = np.repeat(lo - (np.cumsum(counts) - counts), counts)
    items = order[np.arange(rows.size, dtype=np.int64) + starts]
    return rows, items.astype(np.int64)
