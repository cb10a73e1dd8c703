"""``reid`` (the Market-1501 rule): relevant = same label from another camera; junk = same label, same camera."""
from __future__ import annotations

import numpy as np

from evalcore.core.protocols.base import ChunkReader, Protocol, TruthOptions
from evalcore.core.protocols.labels import LABEL_SIDE, label_candidates
from evalcore.core.protocols.registry import register
from evalcore.core.protocols.truth import Truth, truth_from_pairs


def reid_truth(query_label, query_cam, gallery_label, gallery_cam, gallery_junk=None, index=None) -> Truth:
    """relevant(q) = {g : label(g) = label(q) >= 0, cam(g) != cam(q)};
    junk(q) = {g : label(g) = label(q) >= 0, cam(g) = cam(q)}."""
    rows, items = label_candidates(query_label, gallery_label, index)
    same_cam = gallery_cam[items] == query_cam[rows]
    return truth_from_pairs(len(query_label), rows[~same_cam], items[~same_cam],
                            rows[same_cam], items[same_cam], gallery_junk)


class ReidProtocol(Protocol):
    name = "reid"
    arrays = ("query/label", "gallery/label", "query/cam", "gallery/cam")

    def load(self, reader: ChunkReader, options: TruthOptions, q0: int, q1: int, n_gallery: int) -> Truth:
        g = reader.gallery(LABEL_SIDE)
        rows = slice(q0, q1)
        query_label = reader.read("query/label", rows).astype(np.int64)
        query_cam = reader.read("query/cam", rows).astype(np.int64)
        return reid_truth(query_label, query_cam, g["label"], g["cam"], g.get("junk"), index=g["label_index"])


REID = register(ReidProtocol())
