"""What a worker process keeps between the tasks of one run, as an object with a byte budget.

A run's tasks come to a worker one after another; reading and normalising
the same gallery rows for each would cost more than ranking them. So a
process holds one ``RunCache`` (the cache of the run it is working for):
normalised gallery blocks grouped by the span they cover (the whole gallery
or one shard) within a byte budget, least recently used span out first, and
the small gallery-side arrays (labels, cameras, junk). A new run replaces the
cache, so a rewritten dataset is never served stale, and ``forget_run`` drops
it when the run ends, so its memory is given back (in-process runs, and on
every worker of a cluster).
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

Span = tuple[int, int]


class RunCache:
    """Gallery blocks by span, kept while their bytes fit ``budget``; gallery-side arrays by name."""

    def __init__(self, run_id: str, budget: int):
        self.run_id = run_id
        self.budget = int(budget)
        self._spans: OrderedDict[Span, tuple[int, dict]] = OrderedDict()
        self._side: dict[tuple[str, ...], dict] = {}
        self._lock = threading.Lock()

    @property
    def nbytes(self) -> int:
        """Bytes reserved by the spans held (a span reserves its whole size when first asked for)."""
        return sum(n for n, _ in self._spans.values())

    def span(self, span: Span, nbytes: int) -> dict | None:
        """The block store of ``span`` (filled by the caller), or None when the span alone exceeds the budget.

        Making room drops the least recently used spans: a worker that owns
        two shards keeps both when they fit, the last one used otherwise.
        """
        if not self.budget or nbytes > self.budget:
            return None
        with self._lock:
            if span in self._spans:
                self._spans.move_to_end(span)
                return self._spans[span][1]
            while self._spans and self.nbytes + nbytes > self.budget:
                self._spans.popitem(last=False)
            store: dict = {}
            self._spans[span] = (nbytes, store)
            return store

    def spans(self) -> list[Span]:
        """The spans held, least recently used first."""
        return list(self._spans)

    def side(self, names: tuple[str, ...], load: Callable[[], dict]) -> dict:
        """Gallery-side arrays ``names``, loaded once per run."""
        with self._lock:
            if names not in self._side:
                self._side[names] = load()
            return self._side[names]

    def clear(self) -> None:
        with self._lock:
            self._spans.clear()
            self._side.clear()


_current: RunCache | None = None
_registry_lock = threading.Lock()


def run_cache(run_id: str, budget: int) -> RunCache:
    """This process's cache for ``run_id``: the one it holds, or a new one that replaces it.

    Every task of a run asks with the same budget; a caller that only wants
    the side arrays asks with 0, which leaves the budget as it is.
    """
    global _current
    with _registry_lock:
        if _current is None or _current.run_id != run_id:
            if _current is not None:
                _current.clear()
            _current = RunCache(run_id, budget)
        _current.budget = max(_current.budget, int(budget))
        return _current


def current() -> RunCache | None:
    """The cache this process holds, if any (for tests and diagnostics)."""
    return _current


def forget_run(run_id: str) -> None:
    """Drop what this process kept for ``run_id``: the run has ended."""
    global _current
    with _registry_lock:
        if _current is not None and _current.run_id == run_id:
            _current.clear()
            _current = None
