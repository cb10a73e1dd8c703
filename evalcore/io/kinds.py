"""Input kinds: how a dataset's queries are ranked, one registry (README, evalcore/README.md "Input kinds").

A kind owns the arrays that choose it, the array with one row per query, the
scan backend that ranks it (``core.scan``) and what it supports. Code above
asks the kind (``kind.backend``, ``kind.features``), never compares its name
or an array name as a string, so a new kind is one ``register`` call:

    kinds.register(InputKind("ranking/pairs", "ranking/pair_query", ("ranking/pair_query",), backend="pairs",
                             features=False, description="..."))

Which kind a dataset is follows ``PRECEDENCE`` (a given score matrix first,
then precomputed lists, then embeddings): the first whose arrays are all there.
"""
from __future__ import annotations

from dataclasses import dataclass

import zarr

from evalcore.errors import OptionError, mention
from evalcore.io import dataset as ds
from evalcore.types import LIST_ITEMS, LIST_SCORES


@dataclass(frozen=True)
class InputKind:
    """One way a dataset gives its rankings."""

    #: run.json's ``ranked_by`` (the array that ranks, or "embeddings")
    name: str
    #: one row per query: its Zarr row chunks set the default task size
    query_array: str
    #: the arrays whose presence chooses this kind (all of them)
    arrays: tuple[str, ...]
    #: the ``core.scan`` backend that ranks a chunk (None: the rows are rankings already, read as lists)
    backend: str | None
    #: the rows are feature vectors: re-ranking, query expansion, database augmentation, gallery shards, a
    #: similarity, threads splitting the gallery's columns
    features: bool
    #: the arrays read beside ``arrays`` when present (optional)
    optional: tuple[str, ...] = ()
    description: str = ""

    def present(self, group: zarr.Group) -> bool:
        """Does ``group`` hold every array that chooses this kind?"""
        return all(ds.has(group, name) for name in self.arrays)

    def needs_features(self, option: str, what: str = "") -> None:
        """OptionError naming ``option`` unless the rows are feature vectors."""
        if not self.features:
            raise OptionError(option, f"{what or 'needs'} " + mention("query/emb") + " and " + mention("gallery/emb")
                              + " (this dataset is ranked by " + mention(self.name) + ")")


KINDS: dict[str, InputKind] = {}
#: the order in which a dataset's arrays choose its kind (the first present wins)
PRECEDENCE: list[str] = []


def register(kind: InputKind, before: str | None = None) -> InputKind:
    """Add ``kind`` to the registry (tried before ``before``, else last) and return it."""
    if kind.name in KINDS:
        raise ValueError(f"input kind {kind.name!r} is registered already")
    KINDS[kind.name] = kind
    PRECEDENCE.insert(PRECEDENCE.index(before) if before in PRECEDENCE else len(PRECEDENCE), kind.name)
    return kind


def unregister(name: str) -> None:
    """Remove a kind (tests that add one take it out again)."""
    KINDS.pop(name, None)
    if name in PRECEDENCE:
        PRECEDENCE.remove(name)


def get(name: str) -> InputKind:
    """The registered kind of that ``ranked_by`` name."""
    return KINDS[name]


def kind_of(group: zarr.Group) -> InputKind | None:
    """The kind ``group``'s arrays give (``PRECEDENCE``), or None when none is complete."""
    return next((KINDS[name] for name in PRECEDENCE if KINDS[name].present(group)), None)


SCORES = register(InputKind(
    "scores/value", "scores/value", ("scores/value",), backend="scores", features=False,
    description="a given Q x G score (or distance) matrix, compared exactly as stored"))
LISTS = register(InputKind(
    LIST_ITEMS, LIST_ITEMS, (LIST_ITEMS,), backend=None, features=False, optional=(LIST_SCORES,),
    description="precomputed top-K lists of gallery rows, best first (ranking/score: their scores, for ties)"))
EMBEDDINGS = register(InputKind(
    "embeddings", "query/emb", ("query/emb", "gallery/emb"), backend="embeddings", features=True,
    description="query and gallery embeddings, ranked exactly by the canonical score of the similarity"))
