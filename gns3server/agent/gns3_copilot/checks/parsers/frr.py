"""FRRouting's vtysh, read through its JSON forms (``show ... json``)."""

from __future__ import annotations

from collections.abc import Sequence

from ..state import BGPPeer, Interface, Neighbor, Reading, Route, as_mapping
from . import Parsed, json_of, role_free


def interfaces(readings: Sequence[Reading]) -> Parsed:
    """``show interface json``: name -> operational and administrative status, addresses."""
    found = {}
    for name, body in as_mapping(json_of(readings[0])).items():
        body = as_mapping(body)
        addresses = tuple(str(a.get("address")) for a in body.get("ipAddresses") or [] if isinstance(a, dict))
        found[name] = Interface(name, body.get("operationalStatus") == "up" if "operationalStatus" in body else None,
                                body.get("administrativeStatus") == "up" if "administrativeStatus" in body else None,
                                addresses)
    if not found and not isinstance(json_of(readings[0]), dict):
        raise ValueError("show interface json: not an interface table")
    return found, {}


def ospf(readings: Sequence[Reading]) -> Parsed:
    """``show ip ospf neighbor json`` (and ``show ip ospf interface json``: the dead intervals)."""
    table = as_mapping(json_of(readings[0]))
    if "neighbors" not in table:
        raise ValueError("show ip ospf neighbor json: no neighbour table (is ospfd running?)")
    found = {}
    for router_id, entries in as_mapping(table["neighbors"]).items():
        for entry in entries if isinstance(entries, list) else []:
            entry = as_mapping(entry)
            dead = entry.get("routerDeadIntervalTimerDueMsec", entry.get("deadTimeMsecs"))
            found[router_id] = Neighbor(
                router_id, role_free(str(entry.get("nbrState") or entry.get("state") or "")),
                entry.get("ifaceAddress") or entry.get("address"),
                str(entry.get("ifaceName") or "").split(":")[0] or None,
                float(dead) / 1000 if isinstance(dead, (int, float)) else None,
            )
            break
    timers = {}
    if len(readings) > 1 and readings[1].ok:
        interfaces_ = as_mapping(as_mapping(json_of(readings[1])).get("interfaces"))
        deads = [float(i["timerDeadSecs"]) for i in map(as_mapping, interfaces_.values())
                 if isinstance(i.get("timerDeadSecs"), (int, float)) and i.get("nbrCount")]
        if deads:
            timers["ospf_dead"] = max(deads)
    return found, timers


def bgp(readings: Sequence[Reading]) -> Parsed:
    """``show bgp ipv4 unicast summary json``: peer -> state, AS, prefixes received."""
    table = as_mapping(json_of(readings[0]))
    if not table:
        return {}, {}  # vtysh answers {} when BGP is not configured
    if "peers" not in table:
        raise ValueError("show bgp ipv4 unicast summary json: no peer table")
    found = {}
    for address, peer in as_mapping(table["peers"]).items():
        peer = as_mapping(peer)
        received = peer.get("pfxRcd")
        found[address] = BGPPeer(address, str(peer.get("state") or ""), str(peer.get("remoteAs") or "") or None,
                                 int(received) if isinstance(received, int) else None)
    return found, {}


def routes(readings: Sequence[Reading]) -> Parsed:
    """``show ip route json``: prefix -> the routes selected for it (protocol, next hops)."""
    table = json_of(readings[0])
    if not isinstance(table, dict):
        raise ValueError("show ip route json: not a route table")
    found: dict[str, list[Route]] = {}
    for prefix, entries in table.items():
        for entry in entries if isinstance(entries, list) else []:
            entry = as_mapping(entry)
            if not entry.get("selected"):
                continue
            hops = [as_mapping(h) for h in entry.get("nexthops") or []]
            found.setdefault(prefix, []).append(Route(
                prefix, entry.get("protocol"),
                tuple(str(h["ip"]) for h in hops if h.get("ip") and h.get("active", True)),
                tuple(str(h["interfaceName"]) for h in hops if h.get("interfaceName")),
            ))
    return found, {}
