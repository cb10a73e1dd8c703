"""Which protocol the arrays choose when none is given, and which given arrays a protocol leaves unused.

The rule (README, Protocols): an array that only one protocol reads (cameras:
``reid``; ``lat``/``lon``: ``geo``; ``x``/``y``: ``xy``; ``qrels/*``:
``qrels``) chooses that protocol when none is given; labels, read by both
``reid`` and ``class``, choose nothing. Built from the registered protocols'
``arrays``, so a new protocol takes part without an edit here.
"""
from __future__ import annotations

from collections.abc import Iterable

from evalcore.core.protocols.registry import PROTOCOLS, get
from evalcore.errors import OptionError, Text, joined, mention


def choosing_arrays() -> dict[str, str]:
    """array -> the one protocol that reads it, for every array exactly one registered protocol reads."""
    readers: dict[str, list[str]] = {}
    for protocol in PROTOCOLS.values():
        for name in protocol.arrays:
            readers.setdefault(name, []).append(protocol.name)
    return {name: found[0] for name, found in readers.items() if len(found) == 1}


def inferred_protocol(names: Iterable[str]) -> str | None:
    """The protocol chosen by the arrays among ``names`` that only it reads; None when there are none.
    Arrays that choose two different protocols are an InputError naming them (the protocol must be given)."""
    chosen: dict[str, list[str]] = {}
    present = set(names)
    for name, protocol in choosing_arrays().items():
        if name in present:
            chosen.setdefault(protocol, []).append(name)
    if len(chosen) > 1:
        which = joined((joined(map(mention, arrays)) + f" choose {protocol!r}" for protocol, arrays in chosen.items()),
                       "; ")
        raise OptionError("--protocol", "the arrays disagree on the protocol (" + which + "); give the protocol")
    return next(iter(chosen), None)


def unused_arrays(names: Iterable[str], protocol: str) -> list[str]:
    """The arrays among ``names`` that some protocol reads but ``protocol`` does not (query/cam under class)."""
    read = set(get(protocol).arrays)
    any_reads = {name for p in PROTOCOLS.values() for name in p.arrays}
    return [name for name in names if name in any_reads and name not in read]


def unused_message(names: list[str], protocol: str) -> Text:
    """The input error (or, for a dataset's own arrays, the warning: ``str()`` of it) for arrays ``protocol``
    does not read."""
    chooses = choosing_arrays()
    hint = sorted({chooses[n] for n in names if n in chooses})
    instead = f" (they choose {' or '.join(map(repr, hint))}: give that protocol, or leave it out)" if hint else ""
    return (joined(map(mention, names)) + f": not used by protocol {protocol!r}, which would ignore "
            f"{'it' if len(names) == 1 else 'them'}{instead}")
