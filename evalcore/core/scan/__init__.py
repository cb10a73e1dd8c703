"""Scan backends (``base``: the interface), registered by name.

``embeddings``: float32 products on the tile grid find candidates, canonical
scores decide (CPU). ``scores``: a given score or distance matrix, compared
exactly as given. A new backend is one module here and one entry below.
"""
from __future__ import annotations

from typing import Any

from evalcore.core.scan.base import ScanBackend, rank
from evalcore.core.scan.embeddings import EMBEDDINGS
from evalcore.core.scan.scores import SCORES

__all__ = ["BACKENDS", "backend", "rank"]

#: name -> backend
BACKENDS: dict[str, ScanBackend[Any, Any, Any]] = {
    EMBEDDINGS.name: EMBEDDINGS,
    SCORES.name: SCORES,
}


def backend(name: str) -> ScanBackend[Any, Any, Any]:
    """The registered backend called ``name``."""
    try:
        return BACKENDS[name]
    except KeyError:
        raise ValueError(f"scan backend {name!r} is not registered (known: {', '.join(sorted(BACKENDS))})") from None
