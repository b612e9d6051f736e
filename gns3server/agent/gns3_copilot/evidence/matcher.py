"""Claims judged against the reads of their turn: verified, contradicted, or not verified.

Each fact of a claim (``claims.py``) is looked for in the reads of its device in
the same turn (``reads.py``), with the patterns of ``facts.py``:

* a **value** is verified when a read of the device shows it. When the sentence
  says what the value is (its gateway, address, router id) and the device's
  output has lines saying that (``GATEWAY : ...``, ``default via ...``,
  ``router identifier ...``), those lines decide: another value there is a
  **contradiction**;
* a **state** is judged on the output lines of its anchor (the neighbour's line,
  the interface's line; the ping to that address): the state stated there is
  verified, another state of the same family there is a contradiction ("Full"
  stated, ``Init/DROther`` read), no state there is not verified. A node's power
  state comes from GNS3 (its status) or from its console (one that answered is
  running; one GNS3 calls stopped and that refused the connection is stopped);
* a **link** to another node comes from GNS3's topology (the node's ports).

A claim is **unverified** when no tool read its device in the turn (for a value
or a device state: no read of its console; GNS3's node status says nothing of
addresses), or when it cites an evidence id the turn does not have;
**unsupported** (also shown as not verified) when the device was read but the
reads do not show the fact; **contradicted** when a read shows otherwise; else
**verified**, with the ids of the reads that show it. The worst fact decides.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

from ..as_data import as_data
from .claims import Claim, Fact
from .facts import OPPOSITE, Value, canonical_interface, find_values, line_states, mask_of, ping_states
from .reads import Evidence

__all__ = ["NOT_VERIFIED", "Judgement", "Verdict", "judge", "judge_all"]

Verdict = Literal["verified", "contradicted", "unsupported", "unverified"]
NOT_VERIFIED: frozenset[Verdict] = frozenset({"unsupported", "unverified"})
_RANK: dict[Verdict, int] = {"verified": 0, "unsupported": 1, "unverified": 2, "contradicted": 3}
_QUOTE = 120

# Lines of an output that say what a value is (the sentence's role words, in the devices' own words).
_ADDRESS = ("ipv4:", "prefix:")
_ROLE_LINES: dict[str, tuple[re.Pattern[str], tuple[str, ...]]] = {
    "gateway": (re.compile(r"gateway|default via|^\s*default\b|\bgw\b|0\.0\.0\.0/0", re.IGNORECASE), _ADDRESS),
    "router_id": (re.compile(r"router[- ]id\b|router identifier", re.IGNORECASE), _ADDRESS),
    "address": (re.compile(r"ip/mask|\binet\b|internet address|ip address", re.IGNORECASE), _ADDRESS),
    "mac": (re.compile(r"\bmac\b|link/ether|hardware (?:address|is)", re.IGNORECASE), ("mac:",)),
}
_SINGLE_VALUED = frozenset({"gateway", "router_id"})
"""Roles a device has one value of: another value on their lines contradicts, wherever else the value is."""


@dataclass(frozen=True)
class Judgement:
    """A claim's verdict, the evidence it rests on (ids), and why, in words for the user."""

    claim: Claim
    verdict: Verdict
    evidence: tuple[str, ...] = ()
    reason: str = ""

    def public(self) -> dict[str, object]:
        return {
            "text": self.claim.text, "message_id": self.claim.message_id, "devices": list(self.claim.devices),
            "verdict": self.verdict, "evidence": list(self.evidence), "reason": self.reason,
        }


class _Read:
    """One read, its lines and values worked out once."""

    def __init__(self, evidence: Evidence) -> None:
        self.evidence = evidence
        self.lines = evidence.output.splitlines()

    @property
    def id(self) -> str:
        return self.evidence.evidence_id

    @property
    def answered(self) -> bool:
        return self.evidence.source == "console" and self.evidence.status in ("ok", "error")

    @cached_property
    def line_values(self) -> list[set[str]]:
        return [_comparable(find_values(line)) for line in self.lines]

    @cached_property
    def values(self) -> set[str]:
        return set().union(*self.line_values) if self.lines else set()

    def shows(self, value: Value) -> bool:
        return _shown(value, self.values) or bool(self._named(value))

    def lines_with(self, value: Value) -> list[str]:
        return [line for line, found in zip(self.lines, self.line_values) if _shown(value, found)] or self._named(value)

    def _named(self, value: Value) -> list[str]:
        """The lines naming an interface as a word, for a name no scheme of ``facts`` knows (``peer0@if2:``)."""
        if value.kind != "interface" or canonical_interface(value.text) is not None:
            return []
        word = re.compile(rf"(?<![\w/.-]){re.escape(value.canonical)}(?![\w/-])", re.IGNORECASE)
        return [line for line in self.lines if word.search(line)]

    def label(self) -> str:
        return f"{as_data(self.evidence.device)} `{self.evidence.command}` ({self.id})"


def _comparable(values: Iterable[Value]) -> set[str]:
    """The forms a value can be met in: an address with and without its length, a length's dotted mask."""
    forms: set[str] = set()
    listed = list(values)
    for value in listed:
        forms.add(f"{value.kind}:{value.canonical.lower()}")
        if value.kind == "prefix":
            address, length = value.canonical.split("/")
            forms.add(f"ipv4:{address}")
            forms.add(f"ipv4:{mask_of(int(length))}")
            forms.add(f"length:{address}/{length}")
    masks = [v.canonical for v in listed if v.kind == "ipv4" and _is_mask(v.canonical)]
    for value in listed:  # "10.0.0.1 255.255.255.0" on one line is 10.0.0.1/24
        if value.kind == "ipv4" and not _is_mask(value.canonical):
            for mask in masks:
                forms.add(f"length:{value.canonical}/{_length(mask)}")
    return forms


def _is_mask(text: str) -> bool:
    bits = "".join(f"{int(part):08b}" for part in text.split("."))
    return text != "0.0.0.0" and "01" not in bits


def _length(mask: str) -> int:
    return "".join(f"{int(part):08b}" for part in mask.split(".")).count("1")


def _shown(value: Value, forms: set[str]) -> bool:
    if value.kind == "prefix":
        address, length = value.canonical.split("/")
        return f"prefix:{value.canonical}" in forms or f"length:{address}/{length}" in forms
    return f"{value.kind}:{value.canonical.lower()}" in forms


@dataclass
class _Outcome:
    verdict: Verdict
    ids: list[str] = field(default_factory=list)
    reason: str = ""


def _quote(line: str) -> str:
    line = " ".join(line.split())
    return line if len(line) <= _QUOTE else line[: _QUOTE - 1] + "…"


def _ids(reads: Iterable[_Read]) -> list[str]:
    return list(dict.fromkeys(r.id for r in reads))


def _judge_value(fact: Fact, reads: Sequence[_Read]) -> _Outcome:
    value = fact.value
    assert value is not None
    role, kinds = _ROLE_LINES.get(fact.role or "", (None, ()))
    lines = [(r, line, found) for r in reads for line, found in zip(r.lines, r.line_values)]
    if role is not None:
        role_lines = [(r, line, found) for r, line, found in lines if role.search(line)]
        holding = [(r, line) for r, line, found in role_lines if _shown(value, found)]
        if holding:
            return _Outcome("verified", _ids(r for r, _ in holding), f"{holding[0][0].label()}: {_quote(holding[0][1])}")
        other = [(r, line) for r, line, found in role_lines if any(f.startswith(kinds) for f in found)]
        # Elsewhere: on a line that is not another role's (an address on the GATEWAY line is no address).
        others = [p for name, (p, _) in _ROLE_LINES.items() if name != fact.role]
        elsewhere = [r for r, line, found in lines if _shown(value, found) and not any(p.search(line) for p in others)]
        if other and (fact.role in _SINGLE_VALUED or not elsewhere):
            return _Outcome("contradicted", _ids(r for r, _ in other),
                            f"{other[0][0].label()} shows {_quote(other[0][1])}, not {value.text}")
        if elsewhere:
            return _Outcome("verified", _ids(elsewhere), f"{elsewhere[0].label()} shows {value.text}")
    showing = [r for r in reads if r.shows(value)]
    if showing:
        return _Outcome("verified", _ids(showing), f"{showing[0].label()} shows {value.text}")
    return _Outcome("unsupported", _ids(reads), f"{_device_reads(fact.device, reads)} do not show {value.text}")


def _device_reads(device: str, reads: Sequence[_Read]) -> str:
    ids = ", ".join(_ids(reads))
    return f"{as_data(device)}'s reads in this turn ({ids})" if device else f"the cited reads ({ids})"


def _polarity(stated: str, negated: bool, read: set[str], family: str) -> Verdict:
    """Verified, contradicted or unsupported: the state stated (or its negation) against the states read."""
    if not read:
        return "unsupported"
    opposite = OPPOSITE.get(family, {})
    if negated and stated in opposite:
        stated, negated = opposite[stated], False
    if negated:
        return "contradicted" if stated in read else "verified"
    return "verified" if stated in read else "contradicted"


def _judge_power(fact: Fact, reads: Sequence[_Read]) -> _Outcome:
    state = fact.state
    assert state is not None
    seen: dict[str, list[_Read]] = {}
    for read in reads:
        ev = read.evidence
        if ev.source == "gns3":
            match = re.search(r"status (\w+)", ev.output)
            if match:
                seen.setdefault(match.group(1).lower(), []).append(read)
        elif read.answered:
            seen.setdefault("started", []).append(read)
        elif ev.status == "failed" and re.search(r"\bstopped\b", ev.output, re.IGNORECASE):
            seen.setdefault("stopped", []).append(read)
    verdict = _polarity(state.state, state.negated, set(seen), "power")
    if verdict == "unsupported":
        return _Outcome(verdict, _ids(reads), f"{_device_reads(fact.device, reads)} do not show whether it runs")
    backing = [r for reads_of_state in seen.values() for r in reads_of_state]
    gns3 = next((r for r in backing if r.evidence.source == "gns3"), None)
    if gns3 is not None:
        said = f"GNS3 ({gns3.id}): {_quote(gns3.lines[0])}"
    else:
        said = f"{backing[0].label()} " + ("answered" if backing[0].answered else "could not be read")
    return _Outcome(verdict, _ids(backing), said)


def _judge_ping(fact: Fact, reads: Sequence[_Read], targets: Sequence[str]) -> _Outcome:
    state, anchor = fact.state, fact.value
    assert state is not None
    pings = [r for r in reads if r.evidence.command.strip().lower().startswith("ping")]
    if anchor is not None:
        pings = [r for r in pings if r.shows(anchor) or anchor.canonical.split("/")[0] in r.evidence.command]
    elif targets:
        named = [r for r in pings if any(t.lower() in r.evidence.command.lower() for t in targets)]
        pings = named or pings
    if not pings:
        to = f" to {anchor.text}" if anchor is not None else ""
        return _Outcome("unsupported", _ids(reads), f"no ping from {fact.device or 'the cited device'}{to} was read in this turn")
    read = set().union(*(ping_states(r.evidence.output) for r in pings))
    verdict = _polarity(state.state, state.negated, read, "reach")
    shown = next((line for r in pings for line in r.lines if ping_states(line)), pings[0].lines[0] if pings[0].lines else "")
    return _Outcome(verdict, _ids(pings), f"{pings[0].label()}: {_quote(shown)}")


def _judge_line_state(fact: Fact, reads: Sequence[_Read]) -> _Outcome:
    state, anchor = fact.state, fact.value
    assert state is not None
    family = state.family
    lines: list[tuple[_Read, str]] = []
    for read in reads:
        candidates = read.lines_with(anchor) if anchor is not None else read.lines
        lines += [(read, line) for line in candidates if line_states(line, family)]
    if not lines:
        about = f" for {anchor.text}" if anchor is not None else ""
        return _Outcome("unsupported", _ids(reads), f"{_device_reads(fact.device, reads)} show no {_FAMILY_NAMES[family]}{about}")
    seen = set().union(*(line_states(line, family) for _, line in lines))
    verdict = _polarity(state.state, state.negated, seen, family)
    if verdict == "contradicted":
        lines = [(r, line) for r, line in lines if state.state not in line_states(line, family)] or lines
    else:
        lines = [(r, line) for r, line in lines if state.state in line_states(line, family)] or lines
    return _Outcome(verdict, _ids(r for r, _ in lines), f"{lines[0][0].label()}: {_quote(lines[0][1])}")


_FAMILY_NAMES = {"ospf": "OSPF adjacency", "bgp": "BGP session state", "link": "interface state"}


def _judge_peer(fact: Fact, reads: Sequence[_Read]) -> _Outcome:
    topology = [r for r in reads if r.evidence.source == "gns3"]
    if not topology:
        return _Outcome("unverified", [], f"GNS3's topology of {as_data(fact.device)} was not read")
    peer = as_data(fact.peer or "").lower()  # as the node's read names it (``reads.node_read``)
    linked = [(r, line) for r in topology for line in r.lines if f"linked to {peer} " in line.lower() + " "]
    wired = linked != []
    verdict: Verdict = "verified" if wired != fact.negated else "contradicted"
    if linked:
        return _Outcome(verdict, _ids(r for r, _ in linked), f"GNS3 ({linked[0][0].id}): {_quote(linked[0][1])}")
    ports = [line for r in topology for line in r.lines if "linked to" in line]
    shown = "; ".join(_quote(p) for p in ports[:3]) if ports else "no port of it is linked"
    return _Outcome(verdict, _ids(topology), f"GNS3 ({topology[0].id}): {shown}")


def _needs_console(fact: Fact) -> bool:
    """A fact only the device itself can show (GNS3 knows a node's status, ports and links, not its state)."""
    if fact.kind == "peer":
        return False
    if fact.kind == "value":
        return fact.value is not None and fact.value.kind != "interface"
    return fact.state is not None and fact.state.family != "power"


def _judge_fact(fact: Fact, reads: Sequence[_Read], targets: Sequence[str]) -> _Outcome:
    if fact.kind == "peer":
        return _judge_peer(fact, reads)
    if fact.kind == "value":
        return _judge_value(fact, reads)
    assert fact.state is not None
    if fact.state.family == "power":
        return _judge_power(fact, reads)
    if fact.state.family == "reach":
        return _judge_ping(fact, reads, targets)
    return _judge_line_state(fact, reads)


def judge(claim: Claim, turn: Sequence[Evidence]) -> Judgement:
    """``claim`` against the reads of its turn."""
    return _judge(claim, [_Read(e) for e in turn])


def judge_all(claims: Sequence[Claim], turn: Sequence[Evidence]) -> list[Judgement]:
    """Every claim against the same reads (each read's lines and values worked out once)."""
    reads = [_Read(e) for e in turn]
    return [_judge(claim, reads) for claim in claims]


def _judge(claim: Claim, reads: Sequence[_Read]) -> Judgement:
    by_id = {r.id: r for r in reads}
    unknown = [i for i in claim.cited if i not in by_id]
    if unknown:
        return Judgement(claim, "unverified", (), f"cites {', '.join(unknown)}, which no tool read in this turn")
    cited = [by_id[i] for i in claim.cited]
    outcomes: list[_Outcome] = []
    for fact in claim.facts:
        if fact.device:
            own = [r for r in reads if r.evidence.device.casefold() == fact.device.casefold()]
            own += [r for r in cited if r not in own and r.evidence.device.casefold() == fact.device.casefold()]
        else:
            own = cited
        console = [r for r in own if r.evidence.source == "console"]
        if not own or (_needs_console(fact) and not console):
            failed = next((r for r in console if r.evidence.status == "failed"), None)
            reason = (f"{as_data(fact.device)}'s console could not be read ({failed.id}): {_quote(failed.evidence.output)}"
                      if failed else f"no tool read {as_data(fact.device)} in this turn")
            outcomes.append(_Outcome("unverified", [failed.id] if failed else [], reason))
            continue
        outcomes.append(_judge_fact(fact, own, claim.targets))
    worst = max(outcomes, key=lambda o: _RANK[o.verdict])
    ids: list[str] = []
    for outcome in outcomes:
        if outcome.verdict == worst.verdict or worst.verdict == "verified":
            ids += outcome.ids
    if worst.verdict == "verified":
        reason = "; ".join(dict.fromkeys(o.reason for o in outcomes if o.reason))
    else:
        reason = worst.reason
    return Judgement(claim, worst.verdict, tuple(dict.fromkeys(ids)), reason)
