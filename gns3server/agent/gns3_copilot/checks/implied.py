"""The checks a configuration change implies, from the state read before it and its commands.

Two kinds, both typed checks like any other:

* **what must not break**: every OSPF neighbour that was Full stays Full, every BGP
  session that was Established stays so, every interface that was up stays up,
  every address stays, for as long as the routing protocols need to notice a
  problem (``hold``: the longest OSPF dead interval or BGP hold time read, at least
  :data:`MIN_HOLD` seconds, at most the caller's cap) — unless the change itself
  names it (an interface or neighbour it shuts down, an address it replaces:
  breaking those is what was asked);
* **what the change asks for**: an address it sets is present, an interface it
  brings up (``no shutdown``, ``ip link set X up``) is up, within that same time.

Reading the commands is deliberately shallow (words, not a CLI grammar): it only
decides which of the baseline's facts the change is *meant* to touch, and erring
there makes a check more, or one less, never a change sent.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from .model import AddressPresent, BGPNeighbor, Check, InterfaceUp, OSPFNeighbor
from .state import DeviceState

__all__ = ["DEFAULT_HOLD", "MIN_HOLD", "Intent", "held_before", "implied_checks", "intent_of"]

BEFORE = "before the change"
"""The end of the ``why`` of a check that judges what the device held before the change."""

MIN_HOLD = 2.0
DEFAULT_HOLD = 10.0
"""When no timer could be read: how long the baseline's neighbours must hold."""
_IOS_MASK = re.compile(r"^ip address (\d+\.\d+\.\d+\.\d+) (\d+\.\d+\.\d+\.\d+)")
_PREFIXED = re.compile(r"(\d+\.\d+\.\d+\.\d+/\d{1,2})")
_VPCS_IP = re.compile(r"^ip (\d+\.\d+\.\d+\.\d+(?:/\d{1,2})?)(?:\s|$)")


@dataclass
class Intent:
    """What a batch of configuration commands means to touch (see the module's docstring)."""

    addresses: list[str] = field(default_factory=list)
    """Addresses it sets (``A/N`` or ``A``), by interface (None: the device's one)."""
    address_interfaces: dict[str, str | None] = field(default_factory=dict)
    readdressed: set[str] = field(default_factory=set)
    """Interfaces whose addresses it changes ("*": every one, e.g. VPCS's ``ip``, ``clear ip``)."""
    shut: set[str] = field(default_factory=set)
    brought_up: set[str] = field(default_factory=set)
    bgp_peers: set[str] = field(default_factory=set)
    """Peers it names (a ``neighbor X ...`` line of ``router bgp``)."""
    ospf_neighbors: set[str] = field(default_factory=set)
    """Neighbours it names (a ``neighbor X`` line of ``router ospf``)."""


def _words(command: str) -> list[str]:
    return command.strip().split()


def intent_of(family: str, commands: Sequence[str]) -> Intent:
    """What ``commands`` (a configuration batch for ``family``) mean to touch."""
    intent = Intent()
    section: str | None = None
    router = ""
    for raw in commands:
        line = raw.strip()
        words = _words(line)
        if not words:
            continue
        lowered = [w.casefold() for w in words]
        if family == "vpcs":
            found = _VPCS_IP.match(line)
            if found or lowered[:2] == ["clear", "ip"] or lowered[:2] == ["ip", "dhcp"]:
                intent.readdressed.add("*")
            if found:
                intent.addresses.append(found.group(1))
                intent.address_interfaces[found.group(1)] = None
            continue
        if family == "linux":
            _linux(intent, lowered)
            continue
        # The IOS family (IOS, FRR): an interface section, its lines; a neighbour line anywhere.
        if lowered[0] in ("interface", "int") and len(words) > 1:
            section = words[1]
            continue
        if lowered[0] in ("router", "line", "vrf", "exit", "end", "!"):
            section = None  # another section (or back to global): the interface's lines are over
            router = lowered[1] if lowered[0] == "router" and len(lowered) > 1 else ""
        if lowered[0] == "neighbor" or (lowered[:2] == ["no", "neighbor"]):
            target = words[1] if lowered[0] == "neighbor" else (words[2] if len(words) > 2 else "")
            (intent.ospf_neighbors if router.startswith("ospf") else intent.bgp_peers).add(target)
            continue
        if section is None:
            continue
        if lowered == ["shutdown"] or lowered[:1] == ["shut"]:
            intent.shut.add(section)
        elif lowered[:2] == ["no", "shutdown"] or lowered[:2] == ["no", "shut"]:
            intent.brought_up.add(section)
        elif lowered[:2] == ["ip", "address"] or lowered[:3] == ["no", "ip", "address"]:
            intent.readdressed.add(section)
            mask = _IOS_MASK.match(line)
            prefixed = _PREFIXED.search(line)
            if lowered[0] != "no" and (mask or prefixed):
                address = (str(ipaddress.ip_interface(f"{mask.group(1)}/{mask.group(2)}")) if mask
                           else prefixed.group(1) if prefixed else "")
                intent.addresses.append(address)
                intent.address_interfaces[address] = section
    return intent


def _linux(intent: Intent, words: list[str]) -> None:
    """iproute2: ``ip link set [dev] X up|down``, ``ip addr add|del A dev X``, ``ip addr flush dev X``."""
    if words[:1] != ["ip"] or len(words) < 3:
        return
    obj, verb, rest = words[1], words[2], words[3:]
    device = rest[rest.index("dev") + 1] if "dev" in rest[:-1] else None
    if obj == "link" and verb == "set":
        name = device or (rest[0] if rest else None)
        if name and "down" in rest:
            intent.shut.add(name)
        elif name and "up" in rest:
            intent.brought_up.add(name)
    elif obj in ("addr", "address", "a") and device:
        intent.readdressed.add(device)
        if verb == "add" and rest and _PREFIXED.fullmatch(rest[0]):
            intent.addresses.append(rest[0])
            intent.address_interfaces[rest[0]] = device


def _hold(baseline: DeviceState, cap: float) -> float:
    timers = [t for t in (baseline.timers.get("ospf_dead"), baseline.timers.get("bgp_hold")) if t]
    hold = (max(timers) + 1.0) if timers else DEFAULT_HOLD
    return max(MIN_HOLD, min(hold, cap))


def held_before(check: Check) -> bool:
    """Whether ``check`` judges something the device held before the change (what a rollback must
    bring back), not something the change asked for (what a rollback takes away)."""
    return check.why.endswith(BEFORE)


def implied_checks(baseline: DeviceState, commands: Sequence[str], *, cap: float = 60.0) -> list[Check]:
    """The checks ``commands`` imply on the device whose state before them is ``baseline``."""
    intent = intent_of(baseline.family, commands)
    hold = _hold(baseline, cap)
    device = baseline.device
    checks: list[Check] = []
    shut = {s.casefold() for s in intent.shut}
    for neighbor in (baseline.ospf or {}).values():
        if neighbor.state.casefold() == "full" and (neighbor.interface or "").casefold() not in shut \
                and not {neighbor.router_id, neighbor.address or ""} & intent.ospf_neighbors:
            checks.append(OSPFNeighbor(device=device, neighbor=neighbor.router_id, hold=hold,
                                       why=f"was Full {BEFORE}"))
    for peer in (baseline.bgp or {}).values():
        if peer.state.casefold() == "established" and peer.address not in intent.bgp_peers:
            checks.append(BGPNeighbor(device=device, peer=peer.address, hold=hold,
                                      why=f"was Established {BEFORE}"))
    for interface in (baseline.interfaces or {}).values():
        if interface.name.casefold() in shut:
            continue
        if interface.up:
            checks.append(InterfaceUp(device=device, interface=interface.name, hold=hold,
                                      why=f"was up {BEFORE}"))
        if "*" in intent.readdressed or interface.name in intent.readdressed:
            continue
        for address in interface.addresses:
            if ":" in address:
                continue  # IPv6 link-local addresses come and go with the link
            checks.append(AddressPresent(device=device, address=address, interface=interface.name, hold=hold,
                                         why=f"was there {BEFORE}"))
    for address in intent.addresses:
        checks.append(AddressPresent(device=device, address=address, interface=intent.address_interfaces.get(address),
                                     within=hold, why="set by the change"))
    for name in intent.brought_up:
        checks.append(InterfaceUp(device=device, interface=name, within=hold, why="brought up by the change"))
    return checks
