"""Cisco IOS, read as text through ntc-templates' TextFSM templates (IOS has no JSON on most images).

ntc-templates is the library network engineers maintain for exactly this; the
templates are IOS's (``cisco_ios``). Parsing reads the template index from disk:
these run in a worker thread, as every parser does (``..evaluate.state_of``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ..state import BGPPeer, Interface, Neighbor, PingResult, Reading, Route
from . import Parsed, role_free

PLATFORM = "cisco_ios"
# IOS's one-letter route codes (the legend of show ip route) as protocol names.
_PROTOCOLS = {"C": "connected", "L": "local", "S": "static", "O": "ospf", "B": "bgp", "R": "rip", "D": "eigrp",
              "i": "isis"}


def _rows(reading: Reading, command: str) -> list[dict[str, Any]]:
    from ntc_templates.parse import parse_output  # reads its index from disk: only when parsing

    try:
        # Its rows name the template's values in lower case (NEIGHBOR_ID is "neighbor_id").
        rows: list[dict[str, Any]] = parse_output(platform=PLATFORM, command=command, data=reading.output)
    except Exception as exc:  # noqa: BLE001  (TextFSM's and ntc-templates' own errors alike)
        raise ValueError(f"{reading.command!r}: not the answer its template reads ({exc})") from None
    return rows


def _seconds(text: str) -> float | None:
    found = re.fullmatch(r"(\d+):(\d+):(\d+)", text.strip())
    return None if found is None else float(int(found[1]) * 3600 + int(found[2]) * 60 + int(found[3]))


def interfaces(readings: Sequence[Reading]) -> Parsed:
    """``show ip interface brief``: up when line and protocol are up; the address without its mask
    (the brief table has none)."""
    found = {}
    for row in _rows(readings[0], "show ip interface brief"):
        name, status = str(row["interface"]), str(row["status"])
        address = str(row.get("ip_address") or "")
        addresses = (address,) if re.fullmatch(r"\d+\.\d+\.\d+\.\d+", address) else ()
        found[name] = Interface(name, status == "up" and row.get("proto") == "up",
                                status != "administratively down", addresses)
    return found, {}


def ospf(readings: Sequence[Reading]) -> Parsed:
    """``show ip ospf neighbor``: neighbour id -> state, and the time left before it is declared dead.

    The dead interval itself is not in the table: with IOS's default ratio (dead = 4 x hello)
    the time left just before a hello is three quarters of it, so it is at most 4/3 of the
    longest time left read.
    """
    found = {}
    for row in _rows(readings[0], "show ip ospf neighbor"):
        found[str(row["neighbor_id"])] = Neighbor(str(row["neighbor_id"]), role_free(str(row["state"])),
                                                  str(row.get("ip_address") or "") or None,
                                                  str(row.get("interface") or "") or None, _seconds(str(row["dead_time"])))
    left = [n.dead_seconds for n in found.values() if n.dead_seconds is not None]
    return found, ({"ospf_dead": max(left) * 4 / 3} if left else {})


def bgp(readings: Sequence[Reading]) -> Parsed:
    """``show ip bgp summary``: a number in State/PfxRcd is an Established session (prefixes received)."""
    found = {}
    for row in _rows(readings[0], "show ip bgp summary"):
        state = str(row["state_or_prefixes_received"])
        established = state.isdigit()
        found[str(row["bgp_neighbor"])] = BGPPeer(str(row["bgp_neighbor"]), "Established" if established else state,
                                                  str(row.get("neighbor_as") or "") or None,
                                                  int(state) if established else None)
    return found, {}


def routes(readings: Sequence[Reading]) -> Parsed:
    """``show ip route``: prefix -> its routes (protocol from IOS's codes, next hops, interfaces)."""
    found: dict[str, list[Route]] = {}
    for row in _rows(readings[0], "show ip route"):
        prefix = f"{row['network']}/{row['prefix_length']}"
        hop, interface = str(row.get("nexthop_ip") or ""), str(row.get("nexthop_if") or "")
        found.setdefault(prefix, []).append(Route(prefix, _PROTOCOLS.get(str(row["protocol"]), str(row["protocol"])),
                                                  (hop,) if hop else (), (interface,) if interface else ()))
    return found, {}


def ping(reading: Reading, target: str) -> PingResult:
    """``ping T repeat N``: "Success rate is P percent (R/S)"."""
    rows = _rows(reading, "ping")
    if not rows or not str(rows[0].get("success_qty") or "").isdigit():
        raise ValueError(f"{reading.command!r}: no success rate in its answer")
    return PingResult(target, int(rows[0]["sent_qty"]), int(rows[0]["success_qty"]))
