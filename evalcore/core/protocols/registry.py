"""The protocols by name: each module registers its one ``Protocol`` here, once."""
from __future__ import annotations

from evalcore.core.protocols.base import Protocol, TruthOptions
from evalcore.errors import OptionError, mention

#: name -> protocol, in registration order (importers try them in this order: ``reid`` before ``class``)
PROTOCOLS: dict[str, Protocol] = {}


def register(protocol: Protocol) -> Protocol:
    if protocol.name in PROTOCOLS:
        raise ValueError(f"protocol {protocol.name!r} registered twice")
    PROTOCOLS[protocol.name] = protocol
    return protocol


def names() -> tuple[str, ...]:
    return tuple(PROTOCOLS)


def get(name: str) -> Protocol:
    """The protocol called ``name``; InputError naming the known ones otherwise."""
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise OptionError("--protocol", f"{name!r} is not one of {', '.join(PROTOCOLS)}") from None


def _those(flag: str) -> str:
    """'the geo and xy protocols' / 'the qrels protocol': the protocols an option applies to."""
    found = [p.name for p in PROTOCOLS.values() if getattr(p, flag)]
    return f"the {' and '.join(found)} protocol{'s' if len(found) > 1 else ''}"


def option_problems(options: TruthOptions, empty_queries: str = "skip") -> OptionError | None:
    """The first option given to a protocol it does not apply to, as its error (None: all apply)."""
    protocol = get(options.protocol)
    if options.radius is not None and not protocol.takes_radius:
        return OptionError("--radius", f"only applies to {_those('takes_radius')}, not {protocol.name!r}")
    if options.judged_only and not protocol.takes_judged_only:
        return OptionError("--judged-only", f"only applies to {_those('takes_judged_only')}, not {protocol.name!r}")
    if empty_queries == "zero" and not protocol.takes_empty_zero:
        return OptionError("--empty-queries", f"zero only applies to {_those('takes_empty_zero')}, not "
                           f"{protocol.name!r} (there a query with no relevant item is an open-set query; see "
                           + mention("--threshold") + ")")
    return None


def implied(names) -> str | None:
    """The protocol whose query-side arrays are all among ``names``, the most specific one (``reid``, with
    labels and cameras, before ``class``, with labels alone), or None."""
    found = [p for p in PROTOCOLS.values() if p.implied_by(names)]
    return max(found, key=lambda p: len(p.arrays)).name if found else None
