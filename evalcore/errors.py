"""The errors evalcore raises on purpose: bad input (exit status 2) and a failed cluster (exit status 1).

Bad input is the one exception family the command line turns into exit status 2.

Every message starts with the name of what is wrong: an option
(``--max-rank: ...``, or ``max_rank: ...`` from the Python API), an array
(``gallery/label: rows 3, 7 ...``) or a file. ``InputError(message)`` becomes
the matching subclass on its own, so code can tell the kinds apart without
reading the message:

    try:
        evalcore.evaluate("ds.zarr")
    except evalcore.DatasetNotFoundError:     # also a FileNotFoundError
        ...
    except evalcore.ArrayError as exc:        # exc.array == "gallery/emb", exc.rows == [3, 7]
        ...
    except evalcore.OptionError as exc:       # exc.option == "--ks"
        ...
"""
from __future__ import annotations

import re

#: a command-line flag, or a Python parameter name (the API words its errors so)
_OPTION = re.compile(r"^(--[a-z][a-z0-9-]*|[a-z][a-z0-9_]*)(?=:)")
#: a dataset array, or the API parameter it came from (``gallery_labels``)
_ARRAY = re.compile(r"^((?:query|gallery|qrels|ranking|scores)/[a-z_]+)(?=[:\s])")
_LEAD = re.compile(r"^([^\s:]+)")
_ROWS = re.compile(r"\brows? ((?:\d+, )*\d+)")


class InputError(ValueError):
    """Bad input or usage: the message names the array, file or option and what is wrong."""

    def __new__(cls, message: str = "", *args):
        if cls is InputError:
            cls = _kind(str(message))
        base = FileNotFoundError if issubclass(cls, FileNotFoundError) else ValueError  # OSError has its own layout
        return base.__new__(cls, message, *args)


class OptionError(InputError):
    """A bad option or parameter; ``.option`` names it (``--max-rank``, or ``max_rank`` from Python)."""

    @property
    def option(self) -> str | None:
        found = _LEAD.match(str(self))
        return found.group(1) if found else None


class ArrayError(InputError):
    """A bad dataset array; ``.array`` names it, ``.rows`` lists the rows the message names (maybe the first few)."""

    @property
    def array(self) -> str | None:
        found = _LEAD.match(str(self))
        return found.group(1) if found else None

    @property
    def rows(self) -> list[int]:
        found = _ROWS.search(str(self))
        return [int(r) for r in found.group(1).split(", ")] if found else []


class DatasetNotFoundError(InputError, FileNotFoundError):
    """No dataset at the path or URL given."""


class EvalcoreWarning(UserWarning):
    """What a reader of the results should know (queries left out of the means, arrays no protocol used, runs
    compared under different options): each is also in ``run["warnings"]`` (``Comparison.warnings``)."""


# --------------------------------------------------------------------------- not the input's fault
# (here, not beside the cluster code, so the command line can catch them without importing distributed)


class ClusterError(RuntimeError):
    """The cluster, not the input, made the run fail (exit status 1; the message is the whole story)."""


class ClusterUnreachable(ClusterError):
    """The scheduler given by --scheduler did not answer, or the connection to it was lost (exit status 1)."""


class WorkerFailed(ClusterError):
    """Workers kept dying while running a task: out of memory (the message says so and what to change) or crashed."""


class WorkerStalled(ClusterError):
    """A worker held a task far longer than the run's stall limit and the task could not run elsewhere
    (no other worker answered, or it stalled on more than one): the message names the worker and the queries."""


def _kind(message: str) -> type[InputError]:
    if _ARRAY.match(message):
        return ArrayError
    if message.startswith("dataset ") and "no Zarr group found" in message:
        return DatasetNotFoundError
    if _OPTION.match(message):
        return OptionError
    return InputError


def rows_text(rows, limit: int = 5) -> str:
    """The rows an error names: ``3, 7, 9`` or ``3, 7, 9, 12, 15, ... (40 rows)`` past ``limit``."""
    rows = [int(r) for r in rows]
    shown = ", ".join(str(r) for r in rows[:limit])
    return shown + (f", ... ({len(rows)} rows)" if len(rows) > limit else "")
