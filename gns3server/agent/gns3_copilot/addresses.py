"""Whether an IP address is public: the one classifier of the copilot.

Two places judge addresses: the outbound policy (``api/endpoints.py``: may an
ordinary user make the server call it?) and the server-kind classifier
(``agent/server/kind.py``, through ``agent/server/local.py``: is it the lab's own
machine?). Both ask :func:`is_public` (and the policy :func:`describe`) here.

``is_global`` alone is not the answer. Several IPv6 forms carry an IPv4
address, and a packet to them ends up at that IPv4 address (through a NAT64
translator, a 6to4 or Teredo relay, or a dual-stack socket); Python reports most
of them as global whatever they carry. So an address that carries one is judged
by the IPv4 address(es) it carries, by the IPv4 rules:

* IPv4-mapped ``::ffff:a.b.c.d`` and IPv4-translated ``::ffff:0:a.b.c.d``;
* IPv4-compatible ``::a.b.c.d`` (deprecated);
* NAT64: the well-known ``64:ff9b::/96`` and the local-use ``64:ff9b:1::/48``
  (RFC 8215), whose IPv4 address sits where RFC 6052 puts it for the prefix
  length the operator chose: every placement possible within the /48 is judged;
* 6to4 ``2002::/16`` (the relay's IPv4 address);
* Teredo ``2001::/32`` (its server's and its client's IPv4 addresses).

Otherwise an address is public when it is global and none of loopback,
link-local, private, site-local (``fec0::/10``, deprecated and never routed),
multicast, reserved or unspecified.
"""

from __future__ import annotations

import ipaddress

__all__ = ["IPAddress", "carried_ipv4", "describe", "is_public", "parse_address"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_TRANSLATED = ipaddress.IPv6Network("::ffff:0:0:0/96")
_COMPATIBLE = ipaddress.IPv6Network("::/96")
_NAT64_WELL_KNOWN = ipaddress.IPv6Network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")
_SITE_LOCAL = ipaddress.IPv6Network("fec0::/10")
# RFC 6052, section 2.2: for each prefix length, the bit ranges holding the IPv4 address
# (bits 64-71, the "u" octet, are always skipped). Lengths below 48 cannot occur inside the /48.
# The /96 placement (the usual one) first, so that a refusal names the address most likely meant.
_RFC6052_PLACEMENTS = {96: ((96, 128),), 64: ((72, 104),), 56: ((56, 64), (72, 96)), 48: ((48, 64), (72, 88))}


def parse_address(text: str) -> IPAddress:
    """An address as written in a URL or by a resolver (``[...]`` and an IPv6 zone id dropped); ValueError if not one."""
    return ipaddress.ip_address(text.strip("[]").split("%", 1)[0])


def _bits(value: int, start: int, end: int) -> int:
    """Bits ``start``..``end`` (0 = most significant) of a 128-bit value."""
    return (value >> (128 - end)) & ((1 << (end - start)) - 1)


def _rfc6052(address: ipaddress.IPv6Address, prefix_length: int) -> ipaddress.IPv4Address:
    value = int(address)
    carried = 0
    for start, end in _RFC6052_PLACEMENTS[prefix_length]:
        carried = (carried << (end - start)) | _bits(value, start, end)
    return ipaddress.IPv4Address(carried)


def carried_ipv4(address: IPAddress) -> tuple[ipaddress.IPv4Address, ...]:
    """The IPv4 address(es) an IPv6 address carries (see the module's list); () when it carries none."""
    if not isinstance(address, ipaddress.IPv6Address):
        return ()
    low = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.ipv4_mapped is not None:
        return (address.ipv4_mapped,)
    if address in _TRANSLATED or address in _NAT64_WELL_KNOWN:
        return (low,)
    if address in _COMPATIBLE and int(address) > 1:  # not :: nor ::1, which are what they say
        return (low,)
    if address in _NAT64_LOCAL:
        return tuple(dict.fromkeys(_rfc6052(address, length) for length in _RFC6052_PLACEMENTS))
    if address.sixtofour is not None:
        return (address.sixtofour,)
    if address.teredo is not None:
        return address.teredo
    return ()


def _plainly_public(address: IPAddress) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address in _SITE_LOCAL:
        return False
    return address.is_global and not (
        address.is_multicast or address.is_private or address.is_loopback or address.is_link_local
        or address.is_reserved or address.is_unspecified
    )


def is_public(address: IPAddress) -> bool:
    """Whether ``address`` (and every IPv4 address it carries) is a public, unicast, routed address."""
    carried = carried_ipv4(address)
    if carried:
        return all(_plainly_public(ipv4) for ipv4 in carried)
    return _plainly_public(address)


def _kind(address: IPAddress) -> str:
    if isinstance(address, ipaddress.IPv6Address) and address in _SITE_LOCAL:
        return "a site-local address"
    for attribute, words in (
        ("is_unspecified", "the unspecified address"),
        ("is_loopback", "a loopback address"),
        ("is_link_local", "a link-local address"),
        ("is_private", "a private address"),
        ("is_multicast", "a multicast address"),
        ("is_reserved", "a reserved address"),
    ):
        if getattr(address, attribute):
            return words
    return "an address that is not public"


def describe(address: IPAddress) -> str:
    """Why ``address`` is not public, in words: ``a loopback address``, ``an IPv6 address carrying
    10.0.0.1 (a private address)``."""
    hidden = next((ipv4 for ipv4 in carried_ipv4(address) if not _plainly_public(ipv4)), None)
    if hidden is not None:
        return f"an IPv6 address carrying {hidden} ({_kind(hidden)})"
    return _kind(address)
