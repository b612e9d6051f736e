"""Checks judged on readings: pure functions, no I/O, so a graded lab runs them unchanged.

* :func:`commands_for` — the read-only commands a device's checks need, in its family;
* :func:`state_of` — readings in, the device's parsed :class:`~.state.DeviceState` out;
* :func:`evaluate` — one check on one state: a :class:`Verdict` with the values read
  (``observed``) and the readings they came from (``evidence``);
* :class:`Timeline` — a check judged over successive readings, for its ``within``
  (it may take that long to come true) and ``hold`` (it must stay true that long).

Parsing is CPU work (whole routing tables, TextFSM): callers on an event loop run
:func:`state_of` in a worker thread.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .families import ASPECTS, StateReads, reads_for
from .model import AddressPresent, BGPNeighbor, Check, InterfaceUp, OSPFNeighbor, Ping, RouteTo, check_key
from .state import DeviceState, Reading, refs

log = logging.getLogger(__name__)

__all__ = ["Status", "Timeline", "Verdict", "aspect_of", "commands_for", "evaluate", "state_of"]

Status = Literal["pass", "fail", "unknown"]
"""``unknown``: the state the check needs could not be read (the reason is in ``observed``)."""


@dataclass(frozen=True)
class Verdict:
    """A check's outcome: what was expected, what was read, and from which readings."""

    check: Check
    status: Status
    observed: str
    evidence: list[dict[str, Any]] = field(default_factory=list)
    at: float | None = None
    """When the deciding reading came (the time of its evidence)."""

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    def as_dict(self) -> dict[str, Any]:
        return {"check": self.check.model_dump(exclude_defaults=True) | {"kind": self.check.kind},
                "subject": f"{self.check.device}: {self.check.subject()}", "status": self.status,
                "expected": self.check.expected(), "observed": self.observed, "evidence": self.evidence,
                "at": self.at}


def aspect_of(check: Check) -> str:
    if isinstance(check, (InterfaceUp, AddressPresent)):
        return "interfaces"
    if isinstance(check, OSPFNeighbor):
        return "ospf"
    if isinstance(check, BGPNeighbor):
        return "bgp"
    if isinstance(check, RouteTo):
        return "routes"
    return f"ping:{check.target}"


def commands_for(family: str, aspects: Iterable[str]) -> list[str]:
    """The commands that read ``aspects`` (``ping:<target>`` included) in ``family``, each once, in order."""
    reads = reads_for(family)
    commands: list[str] = []
    for aspect in aspects:
        if aspect.startswith("ping:"):
            wanted = [reads.ping.format(target=aspect[5:])] if reads.ping else []
        else:
            read = reads.aspects.get(aspect)
            wanted = list(read.commands) if read else []
        commands += [c for c in wanted if c not in commands]
    return commands


def state_of(device: str, family: str, readings: Sequence[Reading], aspects: Iterable[str] | None = None) -> DeviceState:
    """The device's state parsed from ``readings`` (the answers of :func:`commands_for`'s commands).

    ``aspects``: those to parse (default: every aspect the family reads, and every
    ping read). An aspect whose commands failed, or whose answer does not parse, is
    in ``errors`` with the reason.
    """
    reads = reads_for(family)
    by_command = {r.command: r for r in readings}
    wanted = list(aspects) if aspects is not None else list(reads.aspects)
    if aspects is None and reads.ping:
        prefix = reads.ping.split("{target}")[0]
        wanted += [f"ping:{_ping_target(reads, r.command)}" for r in readings
                   if r.command.startswith(prefix) and _ping_target(reads, r.command)]
    state = DeviceState(device, family)
    for aspect in wanted:
        if aspect.startswith("ping:"):
            _read_ping(state, reads, aspect, by_command)
            continue
        read = reads.aspects.get(aspect)
        if read is None:
            state.errors[aspect] = reads.why_not(aspect)
            continue
        got = [by_command.get(c) for c in read.commands]
        missing = [c for c, r in zip(read.commands, got) if (r is None or not r.ok) and c not in read.optional]
        if missing:
            failed = by_command.get(missing[0])
            state.errors[aspect] = f"{missing[0]!r} " + (f"failed ({failed.status})" if failed else "was not read")
            continue
        used = [r if r is not None else Reading(device, c, 0.0, "not_run") for c, r in zip(read.commands, got)]
        try:
            value, timers = read.parse(used)
        except (ValueError, KeyError, TypeError) as exc:
            state.errors[aspect] = str(exc)
            continue
        setattr(state, aspect, value)
        state.timers.update(timers)
        state.sources[aspect] = refs([r for r in used if r.ok])
    return state


def _ping_target(reads: StateReads, command: str) -> str:
    assert reads.ping is not None
    before, _, after = reads.ping.partition("{target}")
    if not command.startswith(before) or (after and not command.endswith(after)):
        return ""
    return command[len(before):len(command) - len(after)] if after else command[len(before):]


def _read_ping(state: DeviceState, reads: StateReads, aspect: str, by_command: Mapping[str, Reading]) -> None:
    target = aspect[5:]
    if reads.ping is None or reads.parse_ping is None:
        state.errors[aspect] = reads.why_not("ping")
        return
    reading = by_command.get(reads.ping.format(target=target))
    if reading is None or reading.status not in ("ok", "error"):  # a ping that reaches nobody may say so as an error
        state.errors[aspect] = f"the ping to {target} " + (f"failed ({reading.status})" if reading else "was not run")
        return
    try:
        state.pings[target] = reads.parse_ping(reading, target)
    except ValueError as exc:
        state.errors[aspect] = str(exc)
        return
    state.sources[aspect] = [reading.ref()]


def evaluate(check: Check, state: DeviceState) -> Verdict:
    """``check`` judged on ``state`` (one reading in time)."""
    aspect = aspect_of(check)
    evidence = state.evidence(aspect)
    at = max((e["at"] for e in evidence), default=None)
    if aspect in state.errors:
        return Verdict(check, "unknown", f"not read: {state.errors[aspect]}", evidence, at)
    status, observed = _judge(check, state)
    if status is None:
        return Verdict(check, "unknown", f"not read: {state.family} state has no {aspect}", evidence, at)
    return Verdict(check, "pass" if status else "fail", observed, evidence, at)


def _judge(check: Check, state: DeviceState) -> tuple[bool | None, str]:
    if isinstance(check, InterfaceUp):
        if state.interfaces is None:
            return None, ""
        interface = state.interfaces.get(check.interface)
        if interface is None:
            return False, f"no interface {check.interface} (has {', '.join(sorted(state.interfaces)) or 'none'})"
        word = "up" if interface.up else "down" if interface.up is False else "unknown"
        if interface.admin_up is False:
            word = "administratively down"
        return bool(interface.up), word
    if isinstance(check, AddressPresent):
        if state.interfaces is None:
            return None, ""
        where = [state.interfaces[check.interface]] if check.interface in state.interfaces else (
            [] if check.interface else list(state.interfaces.values()))
        held = [f"{i.name} {a}" for i in where for a in i.addresses]
        for interface in where:
            for address in interface.addresses:
                ip, _, length = address.partition("/")
                if ip == check.ip and (check.prefix_length is None or not length or int(length) == check.prefix_length):
                    return True, f"{interface.name} has {address}"
        if check.interface and not where:
            return False, f"no interface {check.interface}"
        return False, "addresses: " + (", ".join(held) if held else "none")
    if isinstance(check, OSPFNeighbor):
        if state.ospf is None:
            return None, ""
        found = state.ospf.get(check.neighbor) or next(
            (n for n in state.ospf.values() if n.address == check.neighbor), None)
        if found is None:
            return False, "not a neighbour" + (f" (neighbours: {', '.join(sorted(state.ospf))})" if state.ospf else "")
        return found.state.casefold() == check.state.casefold(), found.state
    if isinstance(check, BGPNeighbor):
        if state.bgp is None:
            return None, ""
        peer = state.bgp.get(check.peer)
        if peer is None:
            return False, "not a configured peer"
        said = peer.state + (f", {peer.prefixes} prefixes received" if peer.prefixes is not None else "")
        return peer.state.casefold() == check.state.casefold(), said
    if isinstance(check, RouteTo):
        if state.routes is None:
            return None, ""
        routes = state.routes.get(check.prefix, [])
        if not routes:
            return False, "no route"
        said = "; ".join(f"{r.protocol or '?'} via {', '.join(r.next_hops) or ', '.join(r.interfaces) or 'connected'}"
                         for r in routes)
        ok = any((check.via is None or check.via in r.next_hops)
                 and (check.protocol is None or (r.protocol or "").casefold() == check.protocol.casefold())
                 for r in routes)
        return ok, said
    assert isinstance(check, Ping)
    result = state.pings.get(check.target)
    if result is None:
        return None, ""
    return result.received >= check.min_replies, f"{result.received}/{result.sent} replies"


class Timeline:
    """One check judged over successive readings, from the moment ``start`` (a change ended then).

    It passes once it has been true without a break for ``hold`` seconds, the first
    true reading at most ``within`` seconds after ``start``; it fails once that can
    no longer happen. Feed it each reading's verdict with :meth:`add` until
    :attr:`decided`; :meth:`final` is the verdict (the last one read, for a check
    still open when the readings stopped).
    """

    def __init__(self, check: Check, start: float) -> None:
        self.check = check
        self.start = start
        self.since: float | None = None
        self.last: Verdict | None = None
        self.fails = 0
        self.result: Verdict | None = None

    @property
    def key(self) -> str:
        return check_key(self.check)

    @property
    def decided(self) -> bool:
        return self.result is not None

    def add(self, verdict: Verdict, now: float) -> None:
        if self.result is not None:
            return
        self.last = verdict
        deadline = self.start + self.check.within
        if verdict.passed:
            if self.since is None:  # a streak from the first reading on counts from the start itself
                self.since = self.start if self.fails == 0 else now
            if self.since <= deadline and now - self.since >= self.check.hold:
                self.result = verdict
            return
        self.fails += 1
        self.since = None
        if now >= deadline:
            held = "" if self.check.hold == 0 else f" (it must hold for {self.check.hold:g}s)"
            self.result = verdict if self.check.within == 0 and not held else Verdict(
                verdict.check, verdict.status,
                f"{verdict.observed}{held}" + (f"; not true within {self.check.within:g}s" if self.check.within else ""),
                verdict.evidence, verdict.at)

    def final(self) -> Verdict:
        if self.result is not None:
            return self.result
        if self.last is None:
            return Verdict(self.check, "unknown", "never read")
        if self.last.passed:
            return Verdict(self.check, "fail", f"{self.last.observed}, but not held for {self.check.hold:g}s "
                           "before the readings stopped", self.last.evidence, self.last.at)
        return self.last


def needed_aspects(checks: Iterable[Check]) -> list[str]:
    """The aspects these checks are judged on, each once."""
    return list(dict.fromkeys(aspect_of(c) for c in checks))


__all__ += ["ASPECTS", "needed_aspects"]
