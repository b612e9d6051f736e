"""How each CLI family's state is read for checks: which commands answer which aspect, parsed how.

Pure data, one :class:`StateReads` per family (keyed by the console driver's name),
so a family adds its reads by adding an entry (``docs/changes.md``, "Adding a
family"). An aspect the family has no way to read is listed in ``unsupported``
with the reason a check on it is reported with (never a guess).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from .parsers import Parsed, frr, ios, linux, vpcs
from .state import PingResult, Reading

__all__ = ["ASPECTS", "FAMILY_READS", "AspectRead", "StateReads", "reads_for"]

ASPECTS = ("interfaces", "ospf", "bgp", "routes")
"""The aspects a device's state is read in (pings are read per target)."""


@dataclass(frozen=True)
class AspectRead:
    """The read-only commands that answer an aspect, and the parser of their answers (in order).

    ``optional`` commands may fail without failing the aspect (FRR's OSPF interface
    table, read for its dead intervals only).
    """

    commands: tuple[str, ...]
    parse: Callable[[Sequence[Reading]], Parsed]
    optional: tuple[str, ...] = ()


@dataclass(frozen=True)
class StateReads:
    family: str
    aspects: Mapping[str, AspectRead]
    ping: str | None = None
    """The ping command, with ``{target}`` (it must end by itself: the read-only policy refuses others)."""
    parse_ping: Callable[[Reading, str], PingResult] | None = None
    unsupported: Mapping[str, str] = field(default_factory=dict)
    """Aspect (or ``ping``) -> why this family cannot read it."""

    def why_not(self, aspect: str) -> str:
        return self.unsupported.get(aspect) or f"{self.family} devices have no {aspect} the copilot can read"


def _frozen(**aspects: AspectRead) -> Mapping[str, AspectRead]:
    return MappingProxyType(aspects)


FRR = StateReads(
    "frr",
    _frozen(
        interfaces=AspectRead(("show interface json",), frr.interfaces),
        ospf=AspectRead(("show ip ospf neighbor json", "show ip ospf interface json"), frr.ospf,
                        optional=("show ip ospf interface json",)),
        bgp=AspectRead(("show bgp ipv4 unicast summary json",), frr.bgp),
        routes=AspectRead(("show ip route json",), frr.routes),
    ),
    unsupported=MappingProxyType({"ping": "vtysh's ping never ends by itself (it takes no count); "
                                          "ping from a host instead"}),
)

IOS = StateReads(
    "ios",
    _frozen(
        interfaces=AspectRead(("show ip interface brief",), ios.interfaces),
        ospf=AspectRead(("show ip ospf neighbor",), ios.ospf),
        bgp=AspectRead(("show ip bgp summary",), ios.bgp),
        routes=AspectRead(("show ip route",), ios.routes),
    ),
    ping="ping {target} repeat 3 timeout 1",
    parse_ping=ios.ping,
)

LINUX = StateReads(
    "linux",
    _frozen(
        interfaces=AspectRead(("ip -j addr show",), linux.interfaces),
        routes=AspectRead(("ip -j route show",), linux.routes),
    ),
    ping="ping -c 3 -W 1 {target}",
    parse_ping=linux.ping,
    unsupported=MappingProxyType({"ospf": "a Linux host runs no OSPF of its own (an FRR router: driver frr)",
                                  "bgp": "a Linux host runs no BGP of its own (an FRR router: driver frr)"}),
)

VPCS = StateReads(
    "vpcs",
    _frozen(
        interfaces=AspectRead(("show ip",), vpcs.interfaces),
        routes=AspectRead(("show ip",), vpcs.routes),
    ),
    ping="ping {target} -c 3",
    parse_ping=vpcs.ping,
    unsupported=MappingProxyType({"ospf": "VPCS runs no routing protocol", "bgp": "VPCS runs no routing protocol"}),
)

FAMILY_READS: Mapping[str, StateReads] = MappingProxyType({r.family: r for r in (FRR, IOS, LINUX, VPCS)})


def reads_for(family: str) -> StateReads:
    """The family's reads; one the checks know nothing of reads nothing (every aspect unsupported)."""
    return FAMILY_READS.get(family) or StateReads(
        family, MappingProxyType({}), unsupported=MappingProxyType({}))
