"""The claims an answer makes about devices: sentences that name a device and state a fact.

An answer (Markdown) is cut into sentences: each line outside code blocks, each
table row, each sentence of a paragraph (``.``, ``!``, ``;`` end one). A sentence
is a **claim** when it names a device of the project as its subject and states a
fact of ``facts.py`` about it (a value, a state, a link to another node). Left
out, so that the panel marks what the answer asserts and nothing else:

* questions, offers and instructions ("Shall I ...?", "Run ``show ip`` on PC1",
  "Let me check R2"), hedged or conditional sentences ("R1 should be up", "if
  R2 is down ..."): they assert nothing about the lab;
* code blocks (commands to type, quoted configuration);
* sentences that name no device (nothing to attribute them to), unless they
  cite evidence ids (``[E3]``), whose devices they are then about.

A device named right after "ping", "to", "reach", "with", "via", "neighbour" ...
is the *target* of the sentence, not its subject ("PC1 can ping PC2": a claim
about PC1). Each fact belongs to the nearest subject before it (else the first
after it); a state's *anchor* is the nearest value that says what it is the
state of (``2.2.2.2`` in "neighbour 2.2.2.2 is Full", ``eth0`` in "eth0 is up").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from .facts import Family, StateWord, Value, find_values, state_words

__all__ = ["Claim", "Fact", "cited_ids", "claims_of", "mentioned", "sentences"]

FactKind = Literal["value", "state", "peer"]


@dataclass(frozen=True)
class Fact:
    """One thing a claim states about ``device``."""

    device: str
    kind: FactKind
    value: Value | None = None
    """A value stated (``value``), or the anchor of a state (None: the device itself)."""
    state: StateWord | None = None
    role: str | None = None
    """What a value is said to be (``gateway``, ``address``, ``router_id``, ``mask``), when the sentence says."""
    peer: str | None = None
    """``peer``: the node the device is said to be linked to."""
    negated: bool = False


@dataclass(frozen=True)
class Claim:
    """A sentence of an answer that states facts about devices."""

    text: str
    """The sentence as plain text (Markdown marks removed), as the panel finds it in the answer."""
    devices: tuple[str, ...]
    facts: tuple[Fact, ...]
    cited: tuple[str, ...] = ()
    """Evidence ids the sentence cites (``[E3]``)."""
    message_id: str = ""
    targets: tuple[str, ...] = field(default=())


_FENCE = re.compile(r"^\s*(```|~~~)")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
_LIST_MARK = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+|^\s*>+\s*|^\s*#{1,6}\s+")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_TAG = re.compile(r"<[^>]{0,200}>")
_EMPHASIS = re.compile(r"\*\*|__|(?<!\w)[*_](?=\S)|(?<=\S)[*_](?!\w)|`")
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+(?=\S)")
CITATION = re.compile(r"[\[(]\s*(?:evidence\s*:?\s*)?(E\d+(?:\s*[,;/]\s*E\d+)*)\s*[\])]", re.IGNORECASE)

# Sentences that assert nothing about the lab: offers, instructions, hedges, conditions.
_NOT_ASSERTED = re.compile(
    r"^(?:let me|let's|i(?:'ll| will| can| could| would| am going to|'m going to)|shall|would you|do you|should i|"
    r"can you|could you|please|try|run|check|use|type|enter|open|ask|make sure|remove|delete|add|configure|"
    r"set|start|stop|reload|restart|verify|look|see|connect|note|to )\b"
    r"|\b(?:should|would|could|might|may|maybe|perhaps|probably|likely|possibly|if|unless|whether|"
    r"expected to|supposed to|needs? to|have to|has to|going to|will)\b",
    re.IGNORECASE,
)
_TARGET_BEFORE = re.compile(
    r"(?:\bto|\btowards?|\bping(?:s|ed|ing)?|\breach(?:es|ed|ing)?|\bvia|\bwith|\bneighbou?rs?(?: of)?|"
    r"\bpeers?(?: of)?|\bbehind|\bthan|\bagainst)\s*(?:\w+\s+)?$",
    re.IGNORECASE,
)
_LINKED = re.compile(r"\b(?:linked|connected|cabled|attached|wired)\s+(?:\w+\s+){0,2}?(?:to|with)\s*$", re.IGNORECASE)
_NEGATED_BEFORE = re.compile(r"(?:\bnot|n't|\bno longer|\bnever)\s+(?:\w+\s+){0,3}$", re.IGNORECASE)
_OSPF = re.compile(r"\bospf\b|adjacen|\bfull\b|\bdr\b|\bbdr\b", re.IGNORECASE)
_BGP = re.compile(r"\bbgp\b|\bpeering\b|\bestablished\b|\b[ei]bgp\b", re.IGNORECASE)
_REACH = re.compile(r"\bping|reach|\brepl(?:y|ies|ied)\b|\brespond|packet loss|\banswers?\b", re.IGNORECASE)
_LINK_CONTEXT = re.compile(r"\binterfaces?\b|\bports?\b|line protocol|link state", re.IGNORECASE)
_ROLES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("gateway", re.compile(r"\b(?:gateway|default (?:route|gw)|default via)\b", re.IGNORECASE)),
    ("router_id", re.compile(r"\b(?:router[- ]id|router identifier|rid)\b", re.IGNORECASE)),
    ("mask", re.compile(r"\b(?:net)?mask\b", re.IGNORECASE)),
    ("address", re.compile(r"\b(?:ip|ipv4|address(?:ed)?|addresses)\b", re.IGNORECASE)),
    ("mac", re.compile(r"\b(?:mac|hardware address)\b", re.IGNORECASE)),
)
# An interface whose name no known scheme has (``peer0``, ``wan1``, ``ge-0/0/0``): a name with a digit, said to be
# up or down, or named an interface, port or link. Without it, "R1's peer0 is up" read as R1 itself being up.
_NAME = r"[A-Za-z][\w.-]*\d[\w./-]*"
_UNKNOWN_INTERFACE = re.compile(
    rf"(?<![\w/.-])(?P<name>{_NAME})(?:\s+(?:interface|port|link))?\s+(?:is|was|are|stays|remains|went|goes)\s+"
    r"(?:(?:not|still|now|also)\s+)*(?:up|down|administratively down)\b"
    rf"|\b(?:interfaces?|ports?|links?)\s+(?P<named>{_NAME})(?![\w/.-])",
    re.IGNORECASE,
)
# Names with a digit that are protocols or numbers, not interfaces.
_NOT_INTERFACE = re.compile(r"(?:ospf|bgp|rip|eigrp|is-?is|ipv\d|v\d|as\d|e\d)\w*|\d.*", re.IGNORECASE)
_ROLE_KINDS = {"mac": ("mac",)}
"""The kinds of value each role is of (the others: addresses)."""
_ROLE_WINDOW = 28  # characters before a value in which its role word must be


def plain(markdown: str) -> str:
    """A line of Markdown as the reader sees it: links by their text, no emphasis, no tags."""
    text = _LINK.sub(r"\1", markdown)
    text = _TAG.sub("", text)
    text = _EMPHASIS.sub("", text)
    return " ".join(text.split())


def sentences(answer: str) -> list[str]:
    """The answer's sentences as plain text: outside code blocks, one per table row or sentence."""
    found: list[str] = []
    fenced = False
    for line in answer.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced or not line.strip() or _TABLE_RULE.match(line):
            continue
        if line.strip().startswith("|"):
            cells = [plain(c) for c in line.strip().strip("|").split("|")]
            found.append(", ".join(c for c in cells if c))
            continue
        text = plain(_LIST_MARK.sub("", line))
        found.extend(s.strip() for s in _SENTENCE_END.split(text) if s.strip())
    return found


def cited_ids(sentence: str) -> tuple[str, ...]:
    """The evidence ids a sentence cites, in order, once each (``[E3]``, ``(E3, E4)``)."""
    ids: list[str] = []
    for match in CITATION.finditer(sentence):
        ids += [part.strip().upper() for part in re.split(r"[,;/]", match.group(1))]
    return tuple(dict.fromkeys(ids))


def _device_pattern(names: Sequence[str]) -> re.Pattern[str] | None:
    """Names with a digit match in any case ("pc1"); plain words only as written ("Internet")."""
    parts = []
    for name in sorted({n for n in names if n.strip()}, key=len, reverse=True):
        escaped = re.escape(name)
        parts.append(escaped if not any(c.isdigit() for c in name) else f"(?i:{escaped})")
    if not parts:
        return None
    return re.compile(rf"(?<![\w.-])(?:{'|'.join(parts)})(?![\w-])")


def mentioned(answer: str, names: Sequence[str]) -> set[str]:
    """The devices of ``names`` an answer names anywhere (as the names are written in ``names``)."""
    pattern = _device_pattern(names)
    if pattern is None:
        return set()
    canonical = {n.casefold(): n for n in names}
    return {canonical.get(m.group(0).casefold(), m.group(0)) for m in pattern.finditer(answer)}


@dataclass(frozen=True)
class _Mention:
    name: str
    start: int
    end: int
    target: bool
    linked: bool


def _unknown_interfaces(text: str, values: Sequence[Value], spans: Sequence[tuple[int, int]]) -> list[Value]:
    """Interfaces ``text`` names that ``find_values`` does not know (see ``_UNKNOWN_INTERFACE``), as values
    whose canonical form is the name as written, lower case (the matcher finds it in output lines as a word)."""
    taken = [(v.start, v.end) for v in values] + list(spans)
    found: list[Value] = []
    for match in _UNKNOWN_INTERFACE.finditer(text):
        group = "name" if match.group("name") else "named"
        start, end = match.span(group)
        name = match.group(group)
        if _NOT_INTERFACE.fullmatch(name) or any(a < end and start < b for a, b in taken):
            continue
        taken.append((start, end))
        found.append(Value("interface", name.lower(), start, end, name))
    return found


def _families(sentence: str, values: Sequence[Value]) -> list[Family]:
    families: list[Family] = []
    if _OSPF.search(sentence):
        families.append("ospf")
    if _BGP.search(sentence):
        families.append("bgp")
    if _REACH.search(sentence):
        families.append("reach")
    if any(v.kind == "interface" for v in values) or _LINK_CONTEXT.search(sentence):
        families.append("link")
    families.append("power")
    return families


def _role(sentence: str, value: Value) -> str | None:
    before = sentence[max(0, value.start - _ROLE_WINDOW): value.start]
    found = [(m.end(), role) for role, pattern in _ROLES for m in pattern.finditer(before)
             if value.kind in _ROLE_KINDS.get(role, ("ipv4", "prefix"))]
    return max(found)[1] if found else None


_ANCHOR_KINDS: dict[Family, tuple[str, ...]] = {
    "ospf": ("ipv4", "prefix", "interface"), "bgp": ("ipv4", "prefix"), "link": ("interface",),
    "reach": ("ipv4", "prefix"), "power": (),
}


def _anchor(state: StateWord, values: Sequence[Value]) -> Value | None:
    kinds = _ANCHOR_KINDS[state.family]
    near = [(min(abs(v.end - state.start), abs(v.start - state.end)), v) for v in values if v.kind in kinds]
    return min(near, key=lambda pair: pair[0])[1] if near else None


def _owner(position: int, subjects: Sequence[_Mention]) -> str | None:
    before = [m for m in subjects if m.start <= position]
    if before:
        return before[-1].name
    return subjects[0].name if subjects else None


def claims_of(answer: str, devices: Sequence[str], message_id: str = "") -> list[Claim]:
    """The claims of ``answer`` about ``devices`` (node names), in order."""
    pattern = _device_pattern(devices)
    canonical = {n.casefold(): n for n in devices}
    found: list[Claim] = []
    for sentence in sentences(answer):
        claim = _claim(sentence, pattern, canonical, message_id)
        if claim is not None:
            found.append(claim)
    return found


def _claim(sentence: str, pattern: re.Pattern[str] | None, canonical: dict[str, str], message_id: str) -> Claim | None:
    if sentence.rstrip().endswith("?") or _NOT_ASSERTED.search(sentence):
        return None
    cited = cited_ids(sentence)
    text = CITATION.sub(lambda m: " " * len(m.group(0)), sentence)  # positions kept, ids not read as values
    mentions: list[_Mention] = []
    for match in pattern.finditer(text) if pattern is not None else ():
        before = text[: match.start()]
        mentions.append(_Mention(canonical.get(match.group(0).casefold(), match.group(0)), match.start(), match.end(),
                                 bool(_TARGET_BEFORE.search(before)), bool(_LINKED.search(before))))
    subjects = [m for m in mentions if not m.target]
    if not subjects and not cited:
        return None
    spans = [(m.start, m.end) for m in mentions]
    values = [v for v in find_values(text) if not any(a <= v.start < b for a, b in spans)]
    values = sorted([*values, *_unknown_interfaces(text, values, spans)], key=lambda v: v.start)
    states = state_words(text, _families(text, values))
    facts: list[Fact] = []
    owner = (lambda at: _owner(at, subjects)) if subjects else (lambda at: "")
    anchors: set[Value] = set()
    for state in states:
        device = owner(state.start)
        if device is None:
            continue
        anchor = _anchor(state, values)
        if anchor is not None:
            anchors.add(anchor)
        facts.append(Fact(device, "state", anchor, state, negated=state.negated))
    for value in values:
        device = owner(value.start)
        if device is None or value in anchors or _NEGATED_BEFORE.search(text[: value.start]):
            continue
        facts.append(Fact(device, "value", value, role=_role(text, value)))
    for mention in mentions:
        if mention.linked:
            device = owner(mention.start)
            if device is not None and device != mention.name:
                negated = bool(_NEGATED_BEFORE.search(text[: mention.start]))
                facts.append(Fact(device, "peer", peer=mention.name, negated=negated))
    if not facts:
        return None
    about = tuple(dict.fromkeys(f.device for f in facts if f.device))
    targets = tuple(dict.fromkeys(m.name for m in mentions if m.target and m.name not in about))
    return Claim(" ".join(sentence.split()), about, tuple(facts), cited, message_id, targets)
