"""The facts a sentence states and a device output shows, in one comparable form.

Both sides are read with the same patterns, so that "10.0.0.1/24" in an answer
meets "IP/MASK : 10.0.0.1/24" in VPCS's ``show ip`` and "inet 10.0.0.1/24" in
Linux's ``ip addr``, and "Gi0/1" meets "GigabitEthernet0/1":

* **values**: IPv4 addresses and prefixes (a prefix length also meets its dotted
  mask on the same line: ``10.0.0.1 255.255.255.0``), MAC addresses (colon, dash
  and Cisco's dotted forms), interface names (abbreviations expanded);
* **states**, by family: an interface's ``up``/``down``, an OSPF adjacency
  (``Full``, ``2-Way``, ``Init`` ...), a BGP session (``Established``, ``Idle`` ...),
  whether a ping got answers, and a node's power state (``started``/``stopped``).

An output's states are read per line (a line holds one interface, one neighbour),
so that a claim about ``eth1`` is judged on ``eth1``'s line and not on ``eth0``'s;
ping results per command (a ping's summary line does not repeat the address).
Only what these patterns recognise is compared: anything else in a sentence is
not a fact here (see ``claims.py`` for what is then left unjudged).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "Family",
    "Value",
    "canonical_interface",
    "find_values",
    "line_states",
    "mask_of",
    "ping_states",
    "state_words",
]

ValueKind = Literal["ipv4", "prefix", "mac", "interface"]
Family = Literal["link", "ospf", "bgp", "reach", "power"]


@dataclass(frozen=True)
class Value:
    """A value in a text: its kind, its canonical form, where it is (``start``, ``end``)."""

    kind: ValueKind
    canonical: str
    start: int
    end: int
    text: str


_IPV4 = r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?:/\d{1,2})?(?![\w]|\.\d)"
_MAC = (
    r"(?<![\w:.-])(?:[0-9a-f]{2}(?::[0-9a-f]{2}){5}|[0-9a-f]{2}(?:-[0-9a-f]{2}){5}|"
    r"[0-9a-f]{4}\.[0-9a-f]{4}\.[0-9a-f]{4})(?![\w:-]|\.\w)"
)
# Long names and their usual abbreviations (IOS's and others'); Linux names as they are.
_LONG_NAMES = {
    "gigabitethernet": "gigabitethernet", "gi": "gigabitethernet", "ge": "gigabitethernet",
    "fastethernet": "fastethernet", "fa": "fastethernet",
    "tengigabitethernet": "tengigabitethernet", "te": "tengigabitethernet",
    "ethernet": "ethernet", "et": "ethernet", "e": "ethernet",
    "loopback": "loopback", "lo": "loopback",
    "serial": "serial", "se": "serial",
    "tunnel": "tunnel", "tu": "tunnel",
    "port-channel": "port-channel", "po": "port-channel",
    "vlan": "vlan", "vl": "vlan",
}
_NUMBERED = r"\d+(?:/\d+)*(?:\.\d+)?"
_INTERFACE = (
    r"(?<![\w/.-])(?:"
    r"(?P<long>gigabitethernet|fastethernet|tengigabitethernet|ethernet|loopback|serial|tunnel|port-channel|vlan)"
    rf"\s?(?P<long_n>{_NUMBERED})"
    rf"|(?P<short>gi|ge|fa|te|et|lo|se|tu|po|vl|e)(?P<short_n>{_NUMBERED})"
    r"|(?P<linux>(?:eth|ens|enp|eno|wlan|br|tun|tap|veth|bond|vxlan)[0-9a-z]*?\d+(?:\.\d+)?)"
    r"|(?P<lo>lo)"
    r")(?![\w/-])"
)
_VALUE = re.compile(rf"(?P<ipv4>{_IPV4})|(?P<mac>{_MAC})|(?P<interface>{_INTERFACE})", re.IGNORECASE)


def canonical_interface(text: str) -> str | None:
    """``Gi0/1`` -> ``gigabitethernet0/1``; ``eth0`` stays; None when ``text`` is no interface name."""
    match = re.fullmatch(_INTERFACE, text.strip(), re.IGNORECASE)
    return _interface_of(match) if match else None


def _interface_of(match: re.Match[str]) -> str:
    if match.group("long"):
        return _LONG_NAMES[match.group("long").lower()] + match.group("long_n")
    if match.group("short"):
        return _LONG_NAMES[match.group("short").lower()] + match.group("short_n")
    return (match.group("linux") or match.group("lo")).lower()


def _mac(text: str) -> str:
    digits = re.sub(r"[^0-9a-f]", "", text.lower())
    return ":".join(digits[i:i + 2] for i in range(0, 12, 2))


def find_values(text: str) -> list[Value]:
    """Every value in ``text``, in order."""
    found: list[Value] = []
    for match in _VALUE.finditer(text):
        raw = match.group(0)
        if match.group("ipv4"):
            address, _, length = raw.partition("/")
            if not _valid_ipv4(address) or (length and int(length) > 32):
                continue
            found.append(Value("prefix" if length else "ipv4", raw, match.start(), match.end(), raw))
        elif match.group("mac"):
            found.append(Value("mac", _mac(raw), match.start(), match.end(), raw))
        else:
            inner = re.fullmatch(_INTERFACE, raw, re.IGNORECASE)
            assert inner is not None
            found.append(Value("interface", _interface_of(inner), match.start(), match.end(), raw))
    return found


def _valid_ipv4(text: str) -> bool:
    try:
        ipaddress.IPv4Address(text)
    except ValueError:
        return False
    return True


def mask_of(length: int) -> str:
    """The dotted mask of a prefix length: 24 -> 255.255.255.0."""
    return str(ipaddress.IPv4Network(f"0.0.0.0/{length}").netmask)


# -------------------------------------------------------------------- states

# What a sentence may say, per family: the word (or phrase) and the state it means.
_CLAIM_STATES: dict[Family, tuple[tuple[str, str], ...]] = {
    "ospf": (
        (r"full(?:y adjacent)?", "full"), (r"2-?way|two-?way", "2-way"), (r"init", "init"),
        (r"exstart", "exstart"), (r"exchange", "exchange"), (r"loading", "loading"), (r"attempt", "attempt"),
        (r"down", "down"),
    ),
    "bgp": (
        (r"established|up", "established"), (r"idle", "idle"), (r"active", "active"), (r"connect", "connect"),
        (r"opensent", "opensent"), (r"openconfirm", "openconfirm"), (r"down", "idle"),
    ),
    "link": ((r"up", "up"), (r"down|shut ?down|shut|administratively down|disabled", "down"), (r"enabled", "up")),
    "reach": (
        ((r"unreachable|not reachable|cannot reach|can't reach|can not reach|no repl(?:y|ies)|times? out|timed out|"
         r"fails? to (?:ping|reach)|cannot ping|can't ping|100% (?:packet )?loss"), "unreachable"),
        ((r"reachable|reach(?:es)?|can ping|pings? (?:succeed|work|fine)|(?:gets?|got) repl(?:y|ies)|"
         r"repl(?:y|ies|ied)|answers?|responds?|0% (?:packet )?loss|ping (?:is )?successful|successfully ping(?:s|ed)?"),
         "reachable"),
    ),
    "power": (
        (r"started|running|powered on|booted|up and running|online", "started"),
        (r"stopped|powered off|shut off|offline|not running", "stopped"),
        (r"suspended|paused", "suspended"),
        (r"up", "started"), (r"down", "stopped"),
    ),
}
_COMPILED = {
    family: tuple((re.compile(rf"(?<![\w-])(?:{words})(?![\w-])", re.IGNORECASE), state) for words, state in pairs)
    for family, pairs in _CLAIM_STATES.items()
}
_NEGATION = re.compile(r"(?:\bnot|\bno longer|n't|\bnever)\s+(?:\w+\s+){0,2}$", re.IGNORECASE)
OPPOSITE = {
    "link": {"up": "down", "down": "up"},
    "reach": {"reachable": "unreachable", "unreachable": "reachable"},
    "power": {"started": "stopped", "stopped": "started"},
}
"""The families with two states: "not up" is "down"."""


@dataclass(frozen=True)
class StateWord:
    """A state a sentence states, where, and whether it is negated ("is not up")."""

    family: Family
    state: str
    start: int
    end: int
    negated: bool


def state_words(text: str, families: Iterable[Family]) -> list[StateWord]:
    """The states of ``families`` that ``text`` states, longest phrases first, not overlapping."""
    found: list[StateWord] = []
    taken: list[tuple[int, int]] = []
    for family in families:
        for pattern, state in _COMPILED[family]:
            for match in pattern.finditer(text):
                span = (match.start(), match.end())
                if any(a < span[1] and span[0] < b for a, b in taken):
                    continue
                phrase = match.group(0).lower()
                negated = bool(_NEGATION.search(text[: match.start()])) and not phrase.startswith(("not ", "no "))
                taken.append(span)
                found.append(StateWord(family, state, span[0], span[1], negated))
    return sorted(found, key=lambda s: s.start)


_OSPF_LINE = re.compile(r"(?<![\w-])(full|2-?way|init|exstart|exchange|loading|attempt|down)(?:/[\w-]+)?(?![\w-])", re.IGNORECASE)
_BGP_WORD = re.compile(r"(?<![\w-])(established|idle|active|connect|opensent|openconfirm)(?![\w-])", re.IGNORECASE)
# A row of a BGP summary table (FRR, IOS): neighbour, version 4, AS ..., then Up/Down and
# State/PfxRcd: a number of prefixes (or FRR's "(Policy)") while Established, else the state.
_BGP_ROW = re.compile(r"^\s*\S+\s+4\s+\d+(?:\.\d+)?\s+(?:\d+\s+){5}\S+\s+(?P<state>\(Policy\)|\d+|[A-Za-z]+(?: \(Admin\))?)")
_LINK_WORD = re.compile(r"(?<![\w-])(up|down|administratively down|lower_up|no-carrier)(?![\w-])", re.IGNORECASE)
_FLAGS = re.compile(r"<([A-Z_,]+)>")


def line_states(line: str, family: Family) -> set[str]:
    """The states of ``family`` an output line shows (empty: the line says nothing of it)."""
    if family == "ospf":
        return {m.group(1).lower().replace("2way", "2-way") for m in _OSPF_LINE.finditer(line)}
    if family == "bgp":
        row = _BGP_ROW.match(line)
        if row:
            state = row.group("state")
            return {"established"} if state == "(Policy)" or state.isdigit() else {state.split()[0].lower()}
        return {m.group(1).lower() for m in _BGP_WORD.finditer(line)}
    if family == "link":
        states: set[str] = set()
        flags = _FLAGS.search(line)
        if flags:
            states.add("up" if "UP" in flags.group(1).split(",") else "down")
        for match in _LINK_WORD.finditer(line[flags.end():] if flags else line):
            word = match.group(1).lower()
            states.add("up" if word in ("up", "lower_up") else "down")
        return states
    return set()


_PING_ANSWERED = re.compile(r"bytes from|\b0(?:\.0+)?% packet loss|success rate is [1-9]|!{2,}", re.IGNORECASE)
_PING_UNANSWERED = re.compile(
    r"100(?:\.0+)?% packet loss|not reachable|unreachable|\btimeout\b|timed out|success rate is 0 percent|\.{5}", re.IGNORECASE
)


def ping_states(output: str) -> set[str]:
    """What a ping's output shows: ``reachable`` (answers came), ``unreachable``, both, or nothing."""
    states = set()
    if _PING_ANSWERED.search(output):
        states.add("reachable")
    if _PING_UNANSWERED.search(output):
        states.add("unreachable")
    return states
