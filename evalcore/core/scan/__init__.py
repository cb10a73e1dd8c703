"""Scan backends (``base``: the interface), registered by name.

``embeddings``: float32 products on the tile grid find candidates, canonical
scores decide (CPU). ``scores``: a given score or distance matrix, compared
exactly as given. ``rerank``: the final distance of k-reciprocal
re-ranking, folded like given distances. Searches: ``neighbors``, the exact
top-k and farthest column of each row. A new backend is one module here and one entry below.
"""
from __future__ import annotations

from typing import Any

from evalcore.core.scan.base import ScanBackend, SearchBackend, rank
from evalcore.core.scan.embeddings import EMBEDDINGS
from evalcore.core.scan.neighbors import NEIGHBORS
from evalcore.core.scan.rerank import RERANK
from evalcore.core.scan.scores import SCORES

__all__ = ["BACKENDS", "SEARCHES", "backend", "rank"]

#: name -> backend
BACKENDS: dict[str, ScanBackend[Any, Any, Any]] = {
    EMBEDDINGS.name: EMBEDDINGS,
    SCORES.name: SCORES,
    RERANK.name: RERANK,
}

#: name -> top-k search (``base.SearchBackend``)
SEARCHES: dict[str, SearchBackend[Any, Any, Any]] = {
    NEIGHBORS.name: NEIGHBORS,
}


def backend(name: str) -> ScanBackend[Any, Any, Any]:
    """The registered backend called ``name``."""
    try:
        return BACKENDS[name]
    except KeyError:
        raise ValueError(f"scan backend {name!r} is not registered (known: {', '.join(sorted(BACKENDS))})") from None
