"""What was read from a device (:class:`Reading`) and the state parsed from it (:class:`DeviceState`).

A reading is one command's answer, identifiable by device, command and time
(:meth:`Reading.ref`): every verdict names the readings it was decided on, so a
claim about a device can always point at what the device said. A device's state
holds one entry per *aspect* (interfaces, OSPF neighbours, BGP peers, routes,
pings), each with the readings it came from, or why it could not be read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["Aspect", "BGPPeer", "DeviceState", "Interface", "Neighbor", "PingResult", "Reading", "Route"]

Aspect = str
"""``interfaces``, ``ospf``, ``bgp``, ``routes``, ``ping:<target>``."""


@dataclass(frozen=True)
class Reading:
    """One command's answer: the line sent, when the answer came, and what it said."""

    device: str
    command: str
    at: float
    status: str = "ok"
    output: str = ""
    data: Any = None
    """The answer parsed, when the CLI answered JSON (then ``output`` may be empty)."""

    def ref(self) -> dict[str, Any]:
        """What identifies this reading (a verdict's evidence, an answer's citation)."""
        return {"device": self.device, "command": self.command, "at": self.at}

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True)
class Interface:
    name: str
    up: bool | None
    """Operationally up (carrier and administratively up); None when the CLI does not say."""
    admin_up: bool | None = None
    addresses: tuple[str, ...] = ()
    """``A/N`` where the CLI gives the prefix length, else ``A``."""


@dataclass(frozen=True)
class Neighbor:
    """An OSPF neighbour: its router id, state (``Full``; the DR role after ``/`` dropped)."""

    router_id: str
    state: str
    address: str | None = None
    interface: str | None = None
    dead_seconds: float | None = None
    """Time left before it is declared dead, as read."""


@dataclass(frozen=True)
class BGPPeer:
    address: str
    state: str
    remote_as: str | None = None
    prefixes: int | None = None


@dataclass(frozen=True)
class Route:
    prefix: str
    protocol: str | None
    next_hops: tuple[str, ...] = ()
    interfaces: tuple[str, ...] = ()


@dataclass(frozen=True)
class PingResult:
    target: str
    sent: int
    received: int


@dataclass
class DeviceState:
    """A device's state as read at one moment (see the module's docstring)."""

    device: str
    family: str
    interfaces: dict[str, Interface] | None = None
    ospf: dict[str, Neighbor] | None = None
    bgp: dict[str, BGPPeer] | None = None
    routes: dict[str, list[Route]] | None = None
    pings: dict[str, PingResult] = field(default_factory=dict)
    timers: dict[str, float] = field(default_factory=dict)
    """What bounds how long a change may take to show: ``ospf_dead`` (the longest dead interval), ``bgp_hold``."""
    sources: dict[Aspect, list[dict[str, Any]]] = field(default_factory=dict)
    """The readings each aspect was parsed from (:meth:`Reading.ref`)."""
    errors: dict[Aspect, str] = field(default_factory=dict)
    """Why an aspect could not be read (a command failed, a family that has no such state)."""

    def evidence(self, aspect: Aspect) -> list[dict[str, Any]]:
        return list(self.sources.get(aspect, ()))

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def refs(readings: Sequence[Reading]) -> list[dict[str, Any]]:
    return [r.ref() for r in readings]


def as_mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
