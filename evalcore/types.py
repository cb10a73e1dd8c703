"""The contract's words for options, as types: one place that lists each choice.

Checked at the door (``Options.checked``, the command line's ``choices``);
inside, the strings are trusted.
"""
from __future__ import annotations

from typing import Literal, get_args

Protocol = Literal["reid", "class", "qrels", "geo", "xy"]
Similarity = Literal["cosine", "dot", "euclidean"]
Ties = Literal["pessimistic", "optimistic", "average"]
EmptyQueries = Literal["skip", "zero"]

PROTOCOLS: tuple[str, ...] = get_args(Protocol)
SIMILARITIES: tuple[str, ...] = get_args(Similarity)
TIES: tuple[str, ...] = get_args(Ties)
EMPTY_QUERIES: tuple[str, ...] = get_args(EmptyQueries)

#: the arrays of precomputed lists (the lists input kind, ``io.kinds.LISTS``): gallery rows best first, and
#: optionally their scores (ties among equal scores)
LIST_ITEMS, LIST_SCORES = "ranking/item", "ranking/score"
