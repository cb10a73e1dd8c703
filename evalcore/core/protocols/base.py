"""The protocol interface: what a protocol reads, how it checks it, how it builds a chunk's ``Truth``.

A protocol is one module in this package holding one ``Protocol`` subclass,
registered once (``registry.register``). It reads through a ``ChunkReader``
(the io layer's ``DatasetReader`` implements it over a Zarr group; tests may
hand it plain arrays), so the module stays free of storage and engine code.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar
from typing import Protocol as Interface

import numpy as np

from evalcore.core.protocols.truth import Truth
from evalcore.errors import InputError, first_problem, input_error, rows_text


class ChunkReader(Interface):
    """The dataset as a protocol sees it."""

    def has(self, name: str) -> bool:
        """Does the dataset hold the array ``name`` (``query/label``, ``qrels/rel``, ...)?"""
        ...

    def read(self, name: str, rows: slice | np.ndarray | None = None) -> np.ndarray:
        """Rows of array ``name`` (all of them when ``rows`` is None)."""
        ...

    def length(self, name: str) -> int:
        """The number of rows of array ``name``."""
        ...

    @property
    def n_queries(self) -> int:
        """Q, from the first array that has one row per query."""
        ...

    def gallery(self, names: tuple[str, ...]) -> dict[str, np.ndarray]:
        """Whole gallery-side arrays (``label``, ``cam`` int64, ``junk`` bool; ``label_index`` with ``label``),
        those present among ``names``; the engine keeps them for the run, so every chunk does not read them."""
        ...


class TruthOptions(Interface):
    """The options a protocol reads (the engine's ``Options`` has them)."""

    @property
    def protocol(self) -> str: ...

    @property
    def judged_only(self) -> bool: ...

    @property
    def radius(self) -> float | None: ...


class Protocol(ABC):
    """Who is relevant and who is junk for each query (README, Protocols)."""

    #: the ``--protocol`` word
    name: str
    #: arrays the protocol needs besides the embeddings (or rankings, or scores)
    arrays: tuple[str, ...]
    #: options that apply to this protocol alone; elsewhere they are an input error
    takes_radius: ClassVar[bool] = False
    takes_judged_only: ClassVar[bool] = False
    takes_empty_zero: ClassVar[bool] = False

    @abstractmethod
    def load(self, reader: ChunkReader, options: TruthOptions, q0: int, q1: int, n_gallery: int) -> Truth:
        """The truth of queries q0..q1, checked as it is read (InputError naming the array and rows)."""

    def validate(self, reader: ChunkReader, n_query: int | None, n_gallery: int | None) -> list[InputError]:
        """Every problem of the protocol's own arrays over the whole dataset (``evalcore validate``);
        sizes are None where the dataset does not tell them."""
        return []

    def top1_columns(self, reader: ChunkReader, q0: int, q1: int, top1: np.ndarray) -> dict[str, np.ndarray]:
        """Extra per-query float columns about each query's rank-1 item (NaN where there is none)."""
        return {}

    def implied_by(self, names) -> bool:
        """Do arrays with these names carry this protocol's query-side truth (importers name the protocol)?"""
        return all(a in names for a in self.arrays if not a.startswith("gallery/"))


def raise_first(problems: list[InputError]) -> None:
    """The first problem, saying how many more there are."""
    if problems:
        raise first_problem(problems)


def out_of_range(name: str, what: str, values: np.ndarray, rows: np.ndarray | None, n: int) -> list[InputError]:
    """One error for the rows of ``name`` whose index is not in [0, n) (``rows``: their row numbers,
    None for 0, 1, ...)."""
    if not values.size or (int(values.min()) >= 0 and int(values.max()) < n):
        return []
    bad = np.flatnonzero((values < 0) | (values >= n))
    rows = np.arange(values.size) if rows is None else rows
    return [input_error(name, f"rows {rows_text(rows[bad])} hold {what} index {int(values[bad[0]])}"
                        f"{' ...' if bad.size > 1 else ''}, outside [0, {n})", rows=rows[bad])]
