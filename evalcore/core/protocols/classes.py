"""``class``: relevant = the same (non-negative) label (README, Protocols)."""
from __future__ import annotations

import numpy as np

from evalcore.core.protocols.base import ChunkReader, Protocol, TruthOptions
from evalcore.core.protocols.labels import LABEL_SIDE, label_candidates
from evalcore.core.protocols.registry import register
from evalcore.core.protocols.truth import Truth, truth_from_pairs


def class_truth(query_label, gallery_label, gallery_junk=None, index=None) -> Truth:
    """relevant(q) = {g : label(g) = label(q) >= 0}; no per-query junk."""
    rows, items = label_candidates(query_label, gallery_label, index)
    empty = np.empty(0, dtype=np.int64)
    return truth_from_pairs(len(query_label), rows, items, empty, empty, gallery_junk)


class ClassProtocol(Protocol):
    name = "class"
    arrays = ("query/label", "gallery/label")

    def load(self, reader: ChunkReader, options: TruthOptions, q0: int, q1: int, n_gallery: int) -> Truth:
        g = reader.gallery(LABEL_SIDE)
        query_label = reader.read("query/label", slice(q0, q1)).astype(np.int64)
        return class_truth(query_label, g["label"], g.get("junk"), index=g["label_index"])


CLASS = register(ClassProtocol())
