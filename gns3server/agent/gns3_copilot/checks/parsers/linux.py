"""A Linux host read with iproute2's JSON (``ip -j``) and ping's summary line."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..state import Interface, PingResult, Reading, Route, as_mapping
from . import Parsed, json_of

# iputils: "3 packets transmitted, 3 received, 0% packet loss"; busybox: "..., 3 packets received, ...".
_PING_SUMMARY = re.compile(r"(\d+) packets transmitted, (\d+) (?:packets )?received")


def interfaces(readings: Sequence[Reading]) -> Parsed:
    """``ip -j addr show``: every link (up: ``LOWER_UP`` and ``UP``; admin: ``UP``) and its addresses."""
    links = json_of(readings[0])
    if not isinstance(links, list):
        raise ValueError("ip -j addr show: not a list of links")
    found = {}
    for link in map(as_mapping, links):
        name = str(link.get("ifname") or "")
        if not name:
            continue
        flags = set(link.get("flags") or [])
        addresses = tuple(f"{a['local']}/{a['prefixlen']}" for a in map(as_mapping, link.get("addr_info") or [])
                          if a.get("local") and a.get("prefixlen") is not None)
        operstate = str(link.get("operstate") or "")
        up = "UP" in flags and ("LOWER_UP" in flags or operstate == "UP")
        found[name] = Interface(name, up, "UP" in flags, addresses)
    return found, {}


def routes(readings: Sequence[Reading]) -> Parsed:
    """``ip -j route show``: the main table (``default`` is 0.0.0.0/0)."""
    table = json_of(readings[0])
    if not isinstance(table, list):
        raise ValueError("ip -j route show: not a list of routes")
    found: dict[str, list[Route]] = {}
    for route in map(as_mapping, table):
        if "linkdown" in (route.get("flags") or []):
            continue  # the kernel keeps it, but sends nothing through it
        destination = str(route.get("dst") or "")
        prefix = "0.0.0.0/0" if destination == "default" else destination if "/" in destination else f"{destination}/32"
        hops = [str(route["gateway"])] if route.get("gateway") else []
        found.setdefault(prefix, []).append(
            Route(prefix, route.get("protocol"), tuple(hops), (str(route["dev"]),) if route.get("dev") else ()))
    return found, {}


def ping(reading: Reading, target: str) -> PingResult:
    """``ping -c N ...``'s summary line (iputils or busybox)."""
    found = _PING_SUMMARY.search(reading.output)
    if found is None:
        raise ValueError(f"{reading.command!r}: no ping summary in its answer")
    return PingResult(target, int(found.group(1)), int(found.group(2)))
