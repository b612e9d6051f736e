"""Undo for the iproute2 commands a fault injection types on a Linux device.

Understood, word for word (anything else in a batch leaves it to be undone by
hand): ``ip link set [dev] IF up|down``; ``ip addr|address add|del A[/N]
[brd|broadcast B|+|-] [label L] dev IF`` and ``ip addr flush dev IF``;
``ip route add|del|delete|replace|change default|A/N [via G] [dev IF] [metric N]
[onlink]`` (IPv4 only). Before the change the device is read with commands the
read-only policy allows: the link state of every interface set up or down, the
IPv4 addresses of every interface readdressed, and the main routing table, which
every one of these changes can alter (a link set down or an address removed
takes the routes through it away). The restore puts all of that back whatever
the fault left: links up, each readdressed interface flushed and given its
addresses in the order read (so primaries stay primary), the ``boot`` and
``static`` routes flushed and re-added, links down last.

Commands are rebuilt only from values that parse (addresses, prefixes,
interface names of a strict form, known keywords); a state that cannot be put
back exactly (an address or route from DHCP or a routing daemon, a multipath or
special route, an option we do not know) gives no undo.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Sequence

# A Linux interface name as a command may carry it: at most 15 characters, no
# shell or ip(8) syntax (dev_valid_name also refuses "/", ":" and blanks).
_IFNAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,14}$")
_LABEL = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,14}(:[A-Za-z0-9_.-]+)?$")
_SAFE_LINE = re.compile(r"^[A-Za-z0-9_.:/+ -]*$")
_LINK = re.compile(r"^\d+:\s+([^\s@:]+)(?:@\S+)?:\s+<([A-Z0-9_,-]*)>")
_ADDR = re.compile(r"^\d+:\s+(\S+)\s+inet\s+(.*)$")
_ROUTES = "ip -o -4 route show table main"
_SCOPES = {"global", "link", "host", "site"}
_ROUTE_PROTOS = {"boot", "static"}  # what ip route add makes (boot) or an administrator marks static
_FOREVER = "valid_lft forever preferred_lft forever"
# Words ip(8) reads as keywords: an interface of that name would make a command ambiguous.
_KEYWORDS = {"dev", "up", "down", "via", "src", "metric", "proto", "scope", "label", "brd", "broadcast",
             "onlink", "default", "table", "linkdown", "dead", "peer", "secondary", "noprefixroute"}

Restore = Callable[[Sequence[str]], list[str] | None]


class _Unknown(ValueError):
    """A command or a device answer this module does not understand completely."""


def plan(commands: Sequence[str]) -> tuple[tuple[str, ...], Restore] | str:
    """The read-only commands to run first and what turns their outputs into the restore; or why not."""
    links: list[str] = []
    addressed: list[str] = []
    for command in commands:
        try:
            kind, interface = _change(command)
        except ValueError:  # _Unknown, or a value ipaddress refuses
            return f"the copilot cannot undo {command.strip()!r}"
        if interface is not None:  # a route names none: the routing table is always read
            target = links if kind == "link" else addressed
            if interface not in target:
                target.append(interface)
    snapshot = (
        *(f"ip -o link show dev {name}" for name in links),
        *(f"ip -o -4 addr show dev {name}" for name in addressed),
        _ROUTES,
    )

    def restore(outputs: Sequence[str]) -> list[str] | None:
        if len(outputs) != len(snapshot):
            return None
        try:
            return _restore(links, addressed, outputs)
        except ValueError:
            return None

    return snapshot, restore


def _change(command: str) -> tuple[str, str | None]:
    """What a command changes: ("link"|"addr", interface) or ("route", None); _Unknown otherwise."""
    if not _SAFE_LINE.match(command):
        raise _Unknown(command)
    words = command.split()
    if len(words) < 3 or words[0] != "ip":
        raise _Unknown(command)
    obj, verb, rest = words[1], words[2], words[3:]
    if obj == "link" and verb == "set":
        if rest[:1] == ["dev"]:
            rest = rest[1:]
        if len(rest) != 2 or rest[1] not in ("up", "down"):
            raise _Unknown(command)
        return "link", _interface(rest[0])
    if obj in ("addr", "address") and verb == "flush":
        if len(rest) != 2 or rest[0] != "dev":
            raise _Unknown(command)
        return "addr", _interface(rest[1])
    if obj in ("addr", "address") and verb in ("add", "del", "delete"):
        if not rest:
            raise _Unknown(command)
        ipaddress.IPv4Interface(_dotted_or_fail(rest[0]))
        options = _options(rest[1:], {"dev": _interface, "brd": _broadcast, "broadcast": _broadcast,
                                      "label": _label}, command)
        if "dev" not in options:
            raise _Unknown(command)
        return "addr", options["dev"]
    if obj == "route" and verb in ("add", "del", "delete", "replace", "change"):
        if not rest:
            raise _Unknown(command)
        if rest[0] != "default":
            _network(rest[0])
        _options([w for w in rest[1:] if w != "onlink"], {"via": _ipv4, "dev": _interface, "metric": _metric},
                 command)
        return "route", None
    raise _Unknown(command)


def _restore(links: list[str], addressed: list[str], outputs: Sequence[str]) -> list[str]:
    states = [_link_state(name, out) for name, out in zip(links, outputs)]
    addresses = [_addresses(name, out) for name, out in zip(addressed, outputs[len(links):])]
    routes = _routes(outputs[-1])
    commands = [f"ip link set dev {name} up" for name, up in zip(links, states) if up]
    for name, adds in zip(addressed, addresses):
        commands.append(f"ip -4 addr flush dev {name}")
        commands.extend(adds)
    commands += ["ip -4 route flush table main proto boot", "ip -4 route flush table main proto static", *routes]
    commands += [f"ip link set dev {name} down" for name, up in zip(links, states) if not up]
    return commands


def _link_state(name: str, output: str) -> bool:
    """Whether ``ip -o link show dev NAME`` says the link is administratively up."""
    lines = [line for line in output.splitlines() if line.strip()]
    found = _LINK.match(lines[0]) if len(lines) == 1 else None
    if found is None or found.group(1) != name:
        raise _Unknown(output)
    return "UP" in found.group(2).split(",")


def _addresses(name: str, output: str) -> list[str]:
    """The ``ip addr add`` commands that give NAME back the IPv4 addresses ``ip -o -4 addr show`` listed."""
    adds = []
    for line in output.splitlines():
        if not line.strip():
            continue
        found = _ADDR.match(line.strip())
        if found is None or found.group(1) != name:
            raise _Unknown(line)
        body, _, lifetimes = found.group(2).partition("\\")
        if " ".join(lifetimes.split()) != _FOREVER:  # a lease or a lifetime: not ours to pin
            raise _Unknown(line)
        words = body.split()
        if len(words) < 2:
            raise _Unknown(line)
        address, label, words = ipaddress.IPv4Interface(_dotted_or_fail(words[0])), _label(words[-1]), words[1:-1]
        parts = [f"ip addr add {address.with_prefixlen}"]
        while words:
            word = words.pop(0)
            if word == "brd" and words:
                parts.append(f"brd {_ipv4(words.pop(0))}")
            elif word == "scope" and words:
                parts.append(f"scope {_scope(words.pop(0))}")
            elif word == "noprefixroute":
                parts.append(word)
            elif word != "secondary":  # secondary follows from the order; anything else is unknown
                raise _Unknown(line)
        if label != name:
            parts.append(f"label {label}")
        adds.append(" ".join([*parts, f"dev {name}"]))
    return adds


def _routes(output: str) -> list[str]:
    """The ``ip route add`` commands for the main table's boot and static routes (kernel ones come back alone)."""
    adds = []
    for line in output.splitlines():
        words = line.split()
        if not words:
            continue
        dest = words[0] if words[0] == "default" else str(_network(words[0]))
        parts, proto = [f"ip route add {dest}"], "boot"
        rest = words[1:]
        while rest:
            word = rest.pop(0)
            if word in ("linkdown", "dead"):  # the carrier's state, not configuration
                continue
            if word == "onlink":
                parts.append(word)
                continue
            if not rest:
                raise _Unknown(line)
            value = rest.pop(0)
            if word == "proto":
                proto = value
            elif word == "via":
                parts.append(f"via {_ipv4(value)}")
            elif word == "dev":
                parts.append(f"dev {_interface(value)}")
            elif word == "src":
                parts.append(f"src {_ipv4(value)}")
            elif word == "scope":
                parts.append(f"scope {_scope(value)}")
            elif word == "metric":
                parts.append(f"metric {_metric(value)}")
            else:
                raise _Unknown(line)
        if proto == "kernel":
            continue
        if proto not in _ROUTE_PROTOS:  # DHCP, router advertisements, a routing daemon: theirs, not ours
            raise _Unknown(line)
        if proto == "static":
            parts.insert(1, "proto static")
        adds.append(" ".join(parts))
    return adds


def _options(words: list[str], known: dict[str, Callable[[str], str]], command: str) -> dict[str, str]:
    """``KEY VALUE`` pairs, each key known and given once, each value valid."""
    if len(words) % 2:
        raise _Unknown(command)
    options: dict[str, str] = {}
    for key, value in zip(words[::2], words[1::2]):
        if key not in known or key in options:
            raise _Unknown(command)
        options[key] = known[key](value)
    return options


def _dotted(text: str) -> bool:
    return bool(re.match(r"^\d{1,3}(\.\d{1,3}){3}(/\d{1,2})?$", text))


def _dotted_or_fail(text: str) -> str:
    if not _dotted(text):
        raise _Unknown(text)
    return text


def _interface(text: str) -> str:
    if not _IFNAME.match(text) or text in _KEYWORDS:
        raise _Unknown(text)
    return text


def _label(text: str) -> str:
    if not _LABEL.match(text) or len(text) > 15:
        raise _Unknown(text)
    return text


def _ipv4(text: str) -> str:
    return str(ipaddress.IPv4Address(_dotted_or_fail(text)))


def _network(text: str) -> ipaddress.IPv4Network:
    return ipaddress.IPv4Network(_dotted_or_fail(text))


def _broadcast(text: str) -> str:
    return text if text in ("+", "-") else _ipv4(text)


def _scope(text: str) -> str:
    if text not in _SCOPES:
        raise _Unknown(text)
    return text


def _metric(text: str) -> str:
    if not text.isdigit() or int(text) > 0xFFFFFFFF:
        raise _Unknown(text)
    return str(int(text))
