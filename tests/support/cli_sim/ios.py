"""Cisco IOS played as a router: a running configuration that the commands typed change, and the state it implies.

No IOS image runs here, so this stands in for one where a copilot's change must be
exact: ``show running-config`` prints what the commands typed left (interfaces,
``router ospf``, ``router bgp``, static routes, each section in IOS's own order
whatever the typing order, ``no`` forms removing lines), and the state commands
(``show ip interface brief``, ``show ip ospf neighbor``, ``show ip bgp summary``,
``show ip route``, ``show ip ospf interface X``) are computed from it and from the
routers at the other end of the links (``ios.toml``'s peers): an OSPF adjacency
is Full only while the interface is up, covered by a ``network`` statement of the
peer's area and has the peer's hello and dead intervals; a BGP session is
Established only while the neighbour is configured with the peer's AS and not shut.

The prompts, modes, errors and layouts are IOS 15's (``ios.toml`` says where each
came from); the exec commands, abbreviations, paging and the console itself are the
transcript simulator's (:mod:`.device`, :mod:`.server`). Configuration lines are
taken in full words (interface names may be abbreviated, ``gi0/0``), as a copilot
and hier-config type them; IOS's abbreviations of configuration keywords are not.
A command a sub-mode does not know is tried in the global mode, which IOS does too
(``router bgp 65001`` typed in ``(config-if)#`` moves to ``(config-router)#``).
"""

from __future__ import annotations

import ipaddress
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .device import Device, Entry, Reply, Session, Transcript

TRANSCRIPT = Path(__file__).parent / "ios.toml"
_IP = r"\d{1,3}(?:\.\d{1,3}){3}"
_PHYSICAL = {"gigabitethernet": "GigabitEthernet", "loopback": "Loopback"}
_ORDER = {"Loopback": 0, "GigabitEthernet": 1}
_CONFIG_MODES = ("configuration", "config-if", "config-router")


def transcript() -> Transcript:
    return Transcript.read(TRANSCRIPT)


@dataclass(frozen=True)
class Rule:
    """One configuration command of a section: where IOS prints it and what its ``no`` form removes.

    ``slot`` (the pattern's groups filled in) is the line's place: a later line of the same
    slot replaces it (``ip ospf hello-interval 2`` replaces ``... 1``). ``negation`` is the
    ``no`` form without ``no``; it removes the slot, or with ``removes`` every slot starting
    so (``no neighbor X remote-as`` removes the neighbour and all its settings).
    """

    pattern: re.Pattern[str]
    slot: str
    rank: int
    negation: re.Pattern[str]
    removes: str = ""
    needs: str = ""  # a slot that must exist first (a neighbour's settings need its remote-as)
    needs_error: str = ""

    @property
    def words(self) -> tuple[str, ...]:
        """The command's keywords (up to its first argument), for the error's caret."""
        found = []
        for token in self.pattern.pattern.split(" "):
            if not re.fullmatch(r"[a-z][a-z-]*", token):
                break
            found.append(token)
        return tuple(found)


def _rule(pattern: str, slot: str, rank: int, negation: str, removes: str = "", needs: str = "",
          needs_error: str = "") -> Rule:
    return Rule(re.compile(pattern), slot, rank, re.compile(negation), removes, needs, needs_error)


_NEIGHBOR_FIRST = "% Specify remote-as or peer-group commands first"
RULES: dict[str, tuple[Rule, ...]] = {
    "interface": (
        _rule(r"description (?P<v>.+)", "description", 0, r"description(?: .*)?"),
        _rule(rf"ip address (?P<ip>{_IP}) (?P<mask>{_IP})", "ip address", 1, r"ip address(?: .*)?"),
        _rule(r"ip ospf (?P<p>cost|dead-interval|hello-interval|priority) (?P<v>\d+)", "ip ospf {p}", 2,
              r"ip ospf (?P<p>cost|dead-interval|hello-interval|priority)(?: \d+)?"),
        _rule(r"ip ospf network (?P<v>point-to-point|broadcast)", "ip ospf network", 2, r"ip ospf network(?: \S+)?"),
        _rule(r"shutdown", "shutdown", 3, r"shutdown"),
        _rule(r"duplex (?P<v>auto|full|half)", "duplex", 4, r"duplex(?: \S+)?"),
        _rule(r"speed (?P<v>auto|10|100|1000)", "speed", 5, r"speed(?: \S+)?"),
        _rule(r"media-type (?P<v>rj45|sfp)", "media-type", 6, r"media-type(?: \S+)?"),
    ),
    "ospf": (
        _rule(rf"router-id (?P<v>{_IP})", "router-id", 0, rf"router-id(?: {_IP})?"),
        _rule(r"passive-interface (?P<v>\S+)", "passive-interface {v}", 1, r"passive-interface (?P<v>\S+)"),
        _rule(rf"network (?P<n>{_IP}) (?P<w>{_IP}) area (?P<a>\d+)", "network {n} {w} area {a}", 2,
              rf"network (?P<n>{_IP}) (?P<w>{_IP}) area (?P<a>\d+)"),
    ),
    "bgp": (
        _rule(rf"bgp router-id (?P<v>{_IP})", "bgp router-id", 0, rf"bgp router-id(?: {_IP})?"),
        _rule(r"bgp log-neighbor-changes", "bgp log-neighbor-changes", 1, r"bgp log-neighbor-changes"),
        _rule(rf"network (?P<n>{_IP})(?: mask (?P<m>{_IP}))?", "network {n}", 2, rf"network (?P<n>{_IP})(?: mask {_IP})?"),
        _rule(rf"neighbor (?P<x>{_IP}) remote-as (?P<v>\d+)", "neighbor {x} 0 remote-as", 3,
              rf"neighbor (?P<x>{_IP})(?: remote-as(?: \d+)?)?", removes="neighbor {x} "),
        _rule(rf"neighbor (?P<x>{_IP}) description (?P<v>.+)", "neighbor {x} 1 description", 3,
              rf"neighbor (?P<x>{_IP}) description(?: .*)?", needs="neighbor {x} 0 remote-as", needs_error=_NEIGHBOR_FIRST),
        _rule(rf"neighbor (?P<x>{_IP}) shutdown", "neighbor {x} 2 shutdown", 3, rf"neighbor (?P<x>{_IP}) shutdown",
              needs="neighbor {x} 0 remote-as", needs_error=_NEIGHBOR_FIRST),
        _rule(rf"neighbor (?P<x>{_IP}) timers (?P<k>\d+) (?P<h>\d+)", "neighbor {x} 3 timers", 3,
              rf"neighbor (?P<x>{_IP}) timers(?: \d+ \d+)?", needs="neighbor {x} 0 remote-as",
              needs_error=_NEIGHBOR_FIRST),
    ),
    "global": (
        _rule(rf"ip route (?P<p>{_IP}) (?P<m>{_IP}) (?P<h>\S+)", "ip route {p} {m} {h}", 0,
              rf"ip route (?P<p>{_IP}) (?P<m>{_IP}) (?P<h>\S+)"),
    ),
}


def _natural(text: str) -> tuple[Any, ...]:
    """A sort key reading numbers as numbers (10.0.12.2 before 10.255.0.1, Gi0/2 before Gi0/10)."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text))


@dataclass
class Section:
    """One section of the running configuration (or the global lines): its lines by slot."""

    kind: str  # interface, ospf, bgp, global
    header: str
    lines: dict[str, str] = field(default_factory=dict)

    def rendered(self) -> list[str]:
        """The lines in IOS's order for the section (by rank, then by slot), indented."""
        def rank(slot: str) -> tuple[Any, ...]:
            rule = next(r for r in RULES[self.kind] if r.pattern.fullmatch(self.lines[slot]))
            return (rule.rank, _natural(slot))
        body = [self.lines[slot] for slot in sorted(self.lines, key=rank)]
        if self.kind == "interface" and "ip address" not in self.lines:
            at = sum(1 for slot in self.lines if slot == "description")
            body.insert(at, "no ip address")
        return body if self.kind == "global" else [self.header, *(" " + line for line in body)]

    def apply(self, line: str) -> str | None:
        """Apply a configuration line of this section: "" done, an error line, or None (not a line of it)."""
        negated = line.startswith("no ")
        text = line[3:] if negated else line
        for rule in RULES[self.kind]:
            found = (rule.negation if negated else rule.pattern).fullmatch(text)
            if found is None:
                continue
            groups = {k: v for k, v in found.groupdict().items() if v is not None}
            if negated:
                if rule.removes:
                    prefix = rule.removes.format(**groups)
                    for slot in [s for s in self.lines if s.startswith(prefix)]:
                        del self.lines[slot]
                else:
                    self.lines.pop(rule.slot.format(**groups), None)
                return ""
            if rule.needs and rule.needs.format(**groups) not in self.lines:
                return rule.needs_error
            self.lines[rule.slot.format(**groups)] = text
            return ""
        return None


@dataclass(frozen=True)
class Peer:
    """The router at the other end of one interface (``ios.toml``'s ``[[config.peers]]``)."""

    interface: str
    address: str
    router_id: str
    ospf_area: str
    ospf_hello: int
    ospf_dead: int
    ospf_network: str
    ospf_routes: tuple[str, ...]
    asn: int
    bgp_routes: tuple[str, ...]


def interface_name(typed: str) -> str | None:
    """The interface's full name (``gi0/0`` -> ``GigabitEthernet0/0``), None for a type IOSv has not."""
    found = re.fullmatch(r"([A-Za-z]+)\s*(\d+(?:/\d+)*)", typed)
    if found is None:
        return None
    kind = found[1].casefold()
    names = [full for low, full in _PHYSICAL.items() if low.startswith(kind)]
    return f"{names[0]}{found[2]}" if len(names) == 1 else None


class RunningConfig:
    """The router's configuration: global lines, interfaces, routing processes, static routes."""

    def __init__(self, hostname: str, startup: str) -> None:
        self.hostname = hostname
        self.sections: dict[str, Section] = {}
        self.statics = Section("global", "")
        current: Section | None = None
        for raw in startup.strip("\n").splitlines():
            if raw.startswith(" ") and current is not None:
                line = raw.strip()
                if line != "no ip address":
                    assert current.apply(line) == "", raw
                continue
            current = self.enter(raw.strip(), boot=True)
            if current is None:
                assert self.statics.apply(raw.strip()) == "", raw

    def enter(self, header: str, boot: bool = False) -> Section | None:
        """The section ``header`` opens (made if new, as IOS makes a loopback or a process), or None.
        ``boot``: the startup configuration, which names the physical interfaces the router has."""
        words = header.split()
        if words[0] == "interface" and len(words) >= 2:
            name = interface_name("".join(words[1:]))
            if name is None:
                return None
            key = f"interface {name}"
            if key not in self.sections:
                if not (boot or name.startswith("Loopback")):
                    return None  # IOSv has the physical interfaces it booted with
                self.sections[key] = Section("interface", key)
            return self.sections[key]
        if header.startswith("router ospf ") and re.fullmatch(r"router ospf \d+", header):
            return self.sections.setdefault(header, Section("ospf", header))
        if header.startswith("router bgp ") and re.fullmatch(r"router bgp \d+", header):
            return self.sections.setdefault(header, Section("bgp", header))
        return None

    def bgp(self) -> Section | None:
        return next((s for s in self.sections.values() if s.kind == "bgp"), None)

    def interfaces(self) -> list[Section]:
        found = [s for s in self.sections.values() if s.kind == "interface"]
        return sorted(found, key=lambda s: (_ORDER.get(re.sub(r"[\d/]+$", "", s.header[10:]), 9),
                                            _natural(s.header)))

    def body(self) -> list[str]:
        """Interfaces, routing processes, then the global lines IOS prints after them and the static routes."""
        lines: list[str] = []
        routers = sorted((s for s in self.sections.values() if s.kind != "interface"),
                         key=lambda s: (s.kind != "ospf", _natural(s.header)))
        for section in [*self.interfaces(), *routers]:
            lines += [*section.rendered(), "!"]
        lines += ["ip forward-protocol nd", "!", "!", "no ip http server", "no ip http secure-server"]
        lines += self.statics.rendered()
        return [*lines, "!"]


class IOSDevice(Device):
    """An IOS router's state, shared by its console sessions (``events``: one line per configuration change)."""

    def __init__(self, transcript: Transcript, *, seconds_per_unit: float | None = None) -> None:
        super().__init__(transcript, seconds_per_unit=seconds_per_unit)
        config = transcript.config
        self.config = RunningConfig(transcript.hostname, config["startup"])
        self.startup = RunningConfig(transcript.hostname, config["startup"])
        self.peers = tuple(Peer(**{**p, "ospf_routes": tuple(p["ospf_routes"]), "bgp_routes": tuple(p["bgp_routes"])})
                           for p in config.get("peers", ()))
        self.changed_at = time.gmtime()
        self.booted = time.monotonic()

    def session(self) -> Session:
        return IOSSession(self)

    # What show running-config prints.
    def running_config(self) -> str:
        config = self.transcript.config
        head = config["head"].strip("\n").format(host=self.config.hostname)
        text = "\n".join([head, *self.config.body(), config["tail"].strip("\n")])
        stamp = time.strftime("%H:%M:%S UTC %a %b %d %Y", self.changed_at)
        return (f"Building configuration...\n\nCurrent configuration : {len(text) + 1} bytes\n!\n"
                f"! Last configuration change at {stamp}\n!\n{text}")

    # The state the configuration and the peers imply.
    def _interface(self, name: str) -> Section | None:
        return self.config.sections.get(f"interface {name}")

    def _address(self, section: Section) -> ipaddress.IPv4Interface | None:
        line = section.lines.get("ip address")
        if line is None:
            return None
        _ip, _address, address, mask = line.split()
        return ipaddress.IPv4Interface(f"{address}/{mask}")

    def link_up(self, section: Section) -> tuple[str, str]:
        """The interface's status and protocol, as ``show ip interface brief`` says them."""
        if "shutdown" in section.lines:
            return "administratively down", "down"
        name = section.header.split()[1]
        if name.startswith("Loopback") or any(p.interface == name for p in self.peers):
            return "up", "up"
        return "down", "down"

    def _ospf_value(self, section: Section, name: str, default: str) -> str:
        line = section.lines.get(f"ip ospf {name}")
        return line.split()[-1] if line else default

    def ospf_area(self, section: Section) -> tuple[str, str] | None:
        """The OSPF process and area a ``network`` statement puts the interface in, if any."""
        address = self._address(section)
        if address is None:
            return None
        for process in (s for s in self.config.sections.values() if s.kind == "ospf"):
            for line in process.lines.values():
                words = line.split()
                if words[0] != "network":
                    continue
                wildcard = int(ipaddress.IPv4Address(words[2]))
                if int(address.ip) & ~wildcard == int(ipaddress.IPv4Address(words[1])) & ~wildcard:
                    return process.header.split()[2], words[4]
        return None

    def intervals(self, section: Section) -> tuple[int, int]:
        hello = int(self._ospf_value(section, "hello-interval", "10"))
        return hello, int(self._ospf_value(section, "dead-interval", str(4 * hello)))

    def adjacent(self, peer: Peer) -> bool:
        section = self._interface(peer.interface)
        if section is None or self.link_up(section)[1] != "up":
            return False
        address, area = self._address(section), self.ospf_area(section)
        if address is None or area is None or ipaddress.IPv4Address(peer.address) not in address.network:
            return False
        network = self._ospf_value(section, "network", "broadcast")
        return area[1] == peer.ospf_area and self.intervals(section) == (peer.ospf_hello, peer.ospf_dead) \
            and network == peer.ospf_network

    def bgp_state(self, peer: Peer) -> str:
        """The State/PfxRcd column for the peer: prefixes received, or why not."""
        bgp = self.config.bgp()
        assert bgp is not None
        remote = bgp.lines.get(f"neighbor {peer.address} 0 remote-as")
        if remote is None:
            return ""
        if f"neighbor {peer.address} 2 shutdown" in bgp.lines:
            return "Idle (Admin)"
        section = self._interface(peer.interface)
        if section is None or self.link_up(section)[1] != "up" or int(remote.split()[-1]) != peer.asn:
            return "Idle" if section is not None and self.link_up(section)[1] == "up" else "Active"
        return str(len(peer.bgp_routes))

    def uptime(self) -> str:
        seconds = int(time.monotonic() - self.booted) + 3600
        return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class IOSSession(Session):
    """One console connection to the router: exec commands from the transcript, configuration applied."""

    device: IOSDevice

    def __init__(self, device: IOSDevice) -> None:
        super().__init__(device)
        self.section: Section | None = None

    def prompt(self) -> str:
        return self.t.modes[self.mode].format(host=self.device.config.hostname)

    def handle(self, line: str, now: float) -> Reply:
        if self.mode not in _CONFIG_MODES:
            return super().handle(line, now)
        text = " ".join(line.split())
        if not text:
            return Reply()
        if text == "end":
            self.mode, self.section = "privilege_exec", None
            return Reply()
        if text == "exit":
            self.mode = "privilege_exec" if self.mode == "configuration" else "configuration"
            self.section = None
            return Reply()
        if text.startswith("do "):
            mode, self.mode = self.mode, "privilege_exec"
            try:
                return super().handle(text[3:], now)
            finally:
                self.mode = mode
        if self.section is not None:
            done = self.section.apply(text)
            if done is not None:
                return self._changed(done)
        return self._global(text)

    def _changed(self, error: str) -> Reply:
        if not error:
            self.device.changed_at = time.gmtime()
            self.device.events.append("configured")
        return Reply(error)

    def _global(self, text: str) -> Reply:
        """A line of the global configuration mode (a sub-mode's unknown line falls back here, as on IOS)."""
        config = self.device.config
        negated = text.startswith("no ")
        body = text[3:] if negated else text
        words = body.split()
        if words[0] == "hostname" and len(words) == 2 and not negated:
            config.hostname = words[1]
            return self._leave_section(self._changed(""))
        if words[0] in ("interface", "router") and len(words) >= 2:
            header = body if words[0] == "router" else f"interface {' '.join(words[1:])}"
            if negated:
                section = config.enter(header)
                if section is None or (section.kind == "interface" and not section.header.startswith("interface Loop")):
                    return self._invalid(text, 1)
                del config.sections[section.header]
                return self._leave_section(self._changed(""))
            bgp = config.bgp()
            if words[:2] == ["router", "bgp"] and bgp is not None and bgp.header != body:
                return Reply(f"% BGP is already running; AS is {bgp.header.split()[2]}")
            section = config.enter(header)
            if section is None:
                return self._invalid(text, 1 if words[0] == "interface" else 2)
            self.section, self.mode = section, "config-if" if section.kind == "interface" else "config-router"
            return self._changed("")
        done = config.statics.apply(text)
        if done is not None:
            return self._leave_section(self._changed(done))
        return self._invalid(text, self._known_words(text))

    def _leave_section(self, reply: Reply) -> Reply:
        self.section, self.mode = None, "configuration"
        return reply

    def _known_words(self, text: str) -> int:
        """How many words of ``text`` a command of the current mode (or the global one) starts with."""
        words = text.split()
        kinds = ["global", self.section.kind] if self.section is not None else ["global"]
        known = [("hostname",), ("interface",), ("router", "ospf"), ("router", "bgp"), ("end",), ("exit",)]
        known += [rule.words for kind in kinds for rule in RULES[kind]]
        if words and words[0] == "no":
            words = words[1:]
            offset = 1
        else:
            offset = 0
        best = 0
        for keywords in known:
            common = 0
            while common < min(len(words), len(keywords)) and words[common] == keywords[common]:
                common += 1
            best = max(best, common)
        return best + offset

    def _invalid(self, text: str, index: int) -> Reply:
        words = text.split()
        if index >= len(words):
            return Reply(self.t.errors["incomplete"].rstrip("\n") + "\n")
        offset = len(self.prompt()) + sum(len(w) + 1 for w in words[:index])
        return Reply(self.t.errors["config"].format(caret=" " * offset + "^"))

    # The exec commands whose answers are the router's state.
    def render(self, entry: Entry, line: str) -> str:
        device = self.device
        if entry.render == "running":
            return device.running_config()
        if entry.render == "interfaces":
            return self._brief()
        if entry.render == "ospf_neighbors":
            return self._ospf_neighbors()
        if entry.render == "ospf_interface":
            return self._ospf_interface(line.split()[-1])
        if entry.render == "bgp_summary":
            return self._bgp_summary()
        if entry.render == "routes":
            return self._routes()
        return super().render(entry, line)

    def _brief(self) -> str:
        device = self.device
        rows = [f"{'Interface':<27}{'IP-Address':<16}OK? Method {'Status':<22}Protocol"]
        for section in device.config.interfaces():
            address = device._address(section)
            name = section.header.split()[1]
            kept = device.startup.sections.get(section.header)
            method = "NVRAM" if kept is not None and kept.lines.get("ip address") == section.lines.get("ip address") \
                else "manual"
            if address is None and method == "manual":
                method = "unset"
            status, protocol = device.link_up(section)
            rows.append(f"{name:<27}{str(address.ip) if address else 'unassigned':<16}YES {method:<7}{status:<22}"
                        f"{protocol}")
        return "\n".join(rows)

    def _ospf_neighbors(self) -> str:
        device = self.device
        if not any(s.kind == "ospf" for s in device.config.sections.values()):
            return ""
        rows = [f"{'Neighbor ID':<16}{'Pri':<6}{'State':<16}{'Dead Time':<12}{'Address':<16}Interface"]
        for peer in device.peers:
            if device.adjacent(peer):
                section = device._interface(peer.interface)
                assert section is not None
                dead = device.intervals(section)[1] - 1
                state = "FULL/  -" if peer.ospf_network == "point-to-point" else "FULL/DR"
                rows.append(f"{peer.router_id:<15}{0:>4}   {state:<16}00:00:{dead:02d}    {peer.address:<16}"
                            f"{peer.interface}")
        return "\n".join(rows)

    def _ospf_interface(self, typed: str) -> str:
        device = self.device
        name = interface_name(typed)
        section = device._interface(name) if name else None
        if section is None:
            return self._invalid_exec(typed)
        status, protocol = device.link_up(section)
        head = f"{name} is {status}, line protocol is {protocol} "
        area, address = device.ospf_area(section), device._address(section)
        if area is None or address is None:
            return f"{head}\n  OSPF not enabled on this interface"
        hello, dead = device.intervals(section)
        network = device._ospf_value(section, "network", "broadcast")
        kind = "POINT_TO_POINT" if network == "point-to-point" else "BROADCAST"
        router_id = self._router_id()
        adjacent = [p for p in device.peers if p.interface == name and device.adjacent(p)]
        lines = [
            head,
            f"  Internet Address {address.with_prefixlen}, Area {area[1]}, Attached via Network Statement",
            f"  Process ID {area[0]}, Router ID {router_id}, Network Type {kind}, Cost: 1",
            "  Topology-MTID    Cost    Disabled    Shutdown      Topology Name",
            "        0           1         no          no            Base",
            f"  Transmit Delay is 1 sec, State {kind}",
            f"  Timer intervals configured, Hello {hello}, Dead {dead}, Wait {dead}, Retransmit 5",
            "    oob-resync timeout 40",
            "    Hello due in 00:00:00",
            "  Supports Link-local Signaling (LLS)",
            "  Cisco NSF helper support enabled",
            "  IETF NSF helper support enabled",
            "  Index 1/2/2, flood queue length 0",
            "  Next 0x0(0)/0x0(0)/0x0(0)",
            "  Last flood scan length is 1, maximum is 1",
            "  Last flood scan time is 0 msec, maximum is 0 msec",
            f"  Neighbor Count is {len(adjacent)}, Adjacent neighbor count is {len(adjacent)} ",
            *(f"    Adjacent with neighbor {p.router_id}" for p in adjacent),
            "  Suppress hello for 0 neighbor(s)",
        ]
        return "\n".join(lines)

    def _invalid_exec(self, typed: str) -> str:
        line = f"show ip ospf interface {typed}"
        offset = len(self.prompt()) + len(line) - len(typed)
        return self.t.errors["unknown"].format(caret=" " * offset + "^").rstrip("\n")

    def _router_id(self) -> str:
        for process in self.device.config.sections.values():
            for slot in ("router-id", "bgp router-id"):
                if slot in process.lines:
                    return process.lines[slot].split()[-1]
        return "0.0.0.0"

    def _bgp_summary(self) -> str:
        device = self.device
        bgp = device.config.bgp()
        if bgp is None:
            return "% BGP not active"
        asn = bgp.header.split()[2]
        router_id = bgp.lines.get("bgp router-id", "bgp router-id 0.0.0.0").split()[-1]
        states = [(peer, device.bgp_state(peer)) for peer in device.peers]
        configured = sorted((slot.split()[1], line.split()[-1]) for slot, line in bgp.lines.items()
                            if slot.endswith(" 0 remote-as"))
        received = sum(int(s) for _p, s in states if s.isdigit())
        entries = len([line for line in bgp.lines.values() if line.startswith("network ")]) + received
        lines = [
            f"BGP router identifier {router_id}, local AS number {asn}",
            "BGP table version is 3, main routing table version 3",
            f"{entries} network entries using {entries * 144} bytes of memory",
            f"{entries} path entries using {entries * 84} bytes of memory",
            f"{entries}/{entries} BGP path/bestpath attribute entries using {entries * 152} bytes of memory",
            "1 BGP AS-PATH entries using 24 bytes of memory",
            "0 BGP route-map cache entries using 0 bytes of memory",
            "0 BGP filter-list cache entries using 0 bytes of memory",
            f"BGP using {entries * 380 + 24} total bytes of memory",
            "BGP activity 2/0 prefixes, 2/0 paths, scan interval 60 secs",
            "",
            "Neighbor        V           AS MsgRcvd MsgSent   TblVer  InQ OutQ Up/Down  State/PfxRcd",
        ]
        by_address = {peer.address: state for peer, state in states}
        for address, remote in configured:
            state = by_address.get(address) or "Active"
            up = device.uptime() if state.isdigit() else "never"
            lines.append(f"{address:<16}4{remote:>13}{12:>8}{12:>8}{3:>9}{0:>5}{0:>5} {up:<8} {state:>12}")
        return "\n".join(lines)

    def _routes(self) -> str:
        device = self.device
        routes: list[tuple[ipaddress.IPv4Network, str, str]] = []  # prefix, code, the rest of the line
        for section in device.config.interfaces():
            address = device._address(section)
            name = section.header.split()[1]
            if address is None or device.link_up(section)[1] != "up":
                continue
            routes.append((address.network, "C", f"is directly connected, {name}"))
            if address.network.prefixlen < 32:
                routes.append((ipaddress.IPv4Network(f"{address.ip}/32"), "L", f"is directly connected, {name}"))
        for line in device.config.statics.lines.values():
            _ip, _route, prefix, mask, hop = line.split()
            network = ipaddress.IPv4Network(f"{prefix}/{mask}")
            if re.fullmatch(_IP, hop):
                routes.append((network, "S", f"[1/0] via {hop}"))
            else:
                routes.append((network, "S", f"is directly connected, {hop}"))
        uptime = device.uptime()
        for peer in device.peers:
            if device.adjacent(peer):
                routes += [(ipaddress.IPv4Network(p), "O", f"[110/2] via {peer.address}, {uptime}, {peer.interface}")
                           for p in peer.ospf_routes]
            if device.config.bgp() is not None and device.bgp_state(peer).isdigit():
                routes += [(ipaddress.IPv4Network(p), "B", f"[20/0] via {peer.address}, {uptime}")
                           for p in peer.bgp_routes]
        legend = [
            "Codes: L - local, C - connected, S - static, R - RIP, M - mobile, B - BGP",
            "       D - EIGRP, EX - EIGRP external, O - OSPF, IA - OSPF inter area ",
            "       N1 - OSPF NSSA external type 1, N2 - OSPF NSSA external type 2",
            "       E1 - OSPF external type 1, E2 - OSPF external type 2",
            "       i - IS-IS, su - IS-IS summary, L1 - IS-IS level-1, L2 - IS-IS level-2",
            "       ia - IS-IS inter area, * - candidate default, U - per-user static route",
            "       o - ODR, P - periodic downloaded static route, H - NHRP, l - LISP",
            "       a - application route",
            "       + - replicated route, % - next hop override, p - overrides from PfR",
            "",
            "Gateway of last resort is not set",
            "",
        ]
        return "\n".join(legend + _route_table(routes))


def _classful(network: ipaddress.IPv4Network) -> ipaddress.IPv4Network:
    first = int(str(network.network_address).split(".")[0])
    length = 8 if first < 128 else 16 if first < 192 else 24
    return ipaddress.IPv4Network(f"{network.network_address}/{length}", strict=False)


def _route_table(routes: list[tuple[ipaddress.IPv4Network, str, str]]) -> list[str]:
    """IOS's route lines: grouped under their classful network where subnetted, masks shown where they vary."""
    groups: dict[ipaddress.IPv4Network, list[tuple[ipaddress.IPv4Network, str, str]]] = {}
    for route in sorted(routes, key=lambda r: (int(r[0].network_address), r[0].prefixlen)):
        groups.setdefault(_classful(route[0]), []).append(route)
    lines: list[str] = []
    for major, members in groups.items():
        masks = {r[0].prefixlen for r in members}
        if masks == {major.prefixlen}:
            lines += [f"{code:<6}{net.with_prefixlen} {rest}" for net, code, rest in members]
            continue
        subnets = len({r[0] for r in members})
        if len(masks) > 1:
            lines.append(f"      {major.with_prefixlen} is variably subnetted, {subnets} subnets, {len(masks)} masks")
            lines += [f"{code:<9}{net.with_prefixlen} {rest}" for net, code, rest in members]
        else:
            (mask,) = masks
            lines.append(f"      {major.network_address}/{mask} is subnetted, {subnets} subnets")
            lines += [f"{code:<9}{net.network_address} {rest}" for net, code, rest in members]
    return lines
