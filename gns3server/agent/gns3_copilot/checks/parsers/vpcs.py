"""VPCS, read from ``show ip`` and ``ping``'s lines (VPCS has no structured output)."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence

from ..state import Interface, PingResult, Reading, Route
from . import Parsed

_FIELD = re.compile(r"^([A-Z/ :]+?)\s*:\s*(.*)$")
# "10.0.0.2 icmp_seq=1 ttl=64 time=0.094 ms" (VPCS 0.5), "84 bytes from 10.0.0.2 icmp_seq=1 ..." (0.6+)
_REPLY = re.compile(r"^(?:\d+ bytes from )?(\S+?):? icmp_seq=\d+", re.MULTILINE)
_SENT = re.compile(r"icmp_seq=\d+|not reachable|timeout", re.IGNORECASE)
INTERFACE = "eth0"
"""VPCS's one interface (as VPCS and GNS3 name its port)."""


def _fields(reading: Reading) -> dict[str, str]:
    fields = {}
    for line in reading.output.splitlines():
        found = _FIELD.match(line.strip())
        if found:
            fields[found.group(1).strip()] = found.group(2).strip()
    if "IP/MASK" not in fields:
        raise ValueError(f"{reading.command!r}: not a show ip answer")
    return fields


def interfaces(readings: Sequence[Reading]) -> Parsed:
    """``show ip``: the one interface, always up, with its address (none while it is 0.0.0.0/0)."""
    address = ipaddress.ip_interface(_fields(readings[0])["IP/MASK"])
    addresses = () if int(address.ip) == 0 else (str(address),)
    return {INTERFACE: Interface(INTERFACE, True, True, addresses)}, {}


def routes(readings: Sequence[Reading]) -> Parsed:
    """``show ip``: the connected subnet, and the default route through the gateway when one is set."""
    fields = _fields(readings[0])
    address = ipaddress.ip_interface(fields["IP/MASK"])
    found: dict[str, list[Route]] = {}
    if int(address.ip):
        found[str(address.network)] = [Route(str(address.network), "connected", (), (INTERFACE,))]
        gateway = fields.get("GATEWAY", "0.0.0.0")
        if gateway and int(ipaddress.ip_address(gateway)):
            found["0.0.0.0/0"] = [Route("0.0.0.0/0", "static", (gateway,), (INTERFACE,))]
    return found, {}


def ping(reading: Reading, target: str) -> PingResult:
    """``ping T -c N``: each reply is a line with ``icmp_seq``; lost ones say ``timeout`` or ``not reachable``."""
    text = reading.output
    replies = [m for m in _REPLY.finditer(text) if m.group(1) == target]
    attempts = len(_SENT.findall(text))
    if attempts == 0:
        raise ValueError(f"{reading.command!r}: no ping answer")
    return PingResult(target, max(attempts, len(replies)), len(replies))
