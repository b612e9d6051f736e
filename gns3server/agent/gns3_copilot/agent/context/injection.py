"""Putting the live topology into the system prompt, within its own token share.

The topology is the one part of the prompt that grows with the lab, so it gets a
fixed share of the message budget (:data:`TOPOLOGY_SHARE`) instead of squeezing
out the conversation. A topology dict (as GNS3's REST API returns it) is rendered
compactly and, when too big, reduced level by level (see ``topology.py``): after
level 1, if the conversation names nodes of the lab, those nodes and their
neighbours keep full detail and the rest is summarised (``render_focused``); past
the last level, or for a pre-rendered string, whole lines are dropped from the
end. Each reduction adds a note telling the model that the topology tool has the
rest, so nothing is cut silently and nothing is cut mid-line.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .counting import TokenCounter
from .topology import FOCUS_LEVELS, TOPOLOGY_LEVELS, focus_nodes, render_focused, render_topology

log = logging.getLogger(__name__)

TOPOLOGY_PLACEHOLDER = "{{topology_info}}"
NO_TOPOLOGY_TEXT = "(No topology information available)"
TOPOLOGY_HEADING = "### CURRENT TOPOLOGY"
# Fraction of the message budget (input budget minus tools) the topology may use.
TOPOLOGY_SHARE = 0.25
REDUCED_NOTE = "(Topology reduced to fit the context window: {what}. Call the topology tool for full details.)"
_LEVEL_NAMES = {
    1: "positions and unlinked ports left out",
    2: "one line per node",
    3: "node counts and links only",
}
_FOCUS_NAMES = {
    0: "full detail for the nodes in focus, other nodes grouped",
    1: "full detail for the nodes in focus, other nodes counted",
}


@dataclass(frozen=True)
class TopologyText:
    """The topology as injected, and how it was obtained."""

    text: str
    tokens: int
    level: int | None  # rendering level for a dict, None for a string or no topology
    reduced: bool
    node_names: list[str]
    available: bool
    focus: tuple[str, ...] = ()  # nodes kept in full detail when the rest was summarised


def _node_names(topology: Mapping[str, Any]) -> list[str]:
    return [str(n.get("name", "?")) for n in topology.get("nodes") or [] if isinstance(n, Mapping)]


def _cut_lines(text: str, max_tokens: int, counter: TokenCounter, what: str) -> str:
    """Drop whole lines from the end until the text and its note fit ``max_tokens``."""
    lines = text.splitlines()
    lo, hi = 0, len(lines)  # invariant: keeping `lo` lines fits
    def build(keep: int) -> str:
        omitted = len(lines) - keep
        note = REDUCED_NOTE.format(what=f"{what}, {omitted} more line(s) left out")
        return "\n".join([*lines[:keep], note])
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if counter.known_text(build(mid)) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    return build(lo)


def fit_topology(
    topology: Any, max_tokens: int, counter: TokenCounter, mentions: str | Callable[[], str] = ""
) -> TopologyText:
    """Render ``topology`` (None, a string or a REST-shaped dict) within ``max_tokens``.

    ``mentions`` is the recent conversation (questions, answers, tool-call
    arguments), or what gives it: nodes it names are the ones kept in detail when
    the lab is too big (only then is it asked for).
    """
    if topology is None:
        return TopologyText(NO_TOPOLOGY_TEXT, counter.known_text(NO_TOPOLOGY_TEXT), None, False, [], False)
    if isinstance(topology, Mapping):
        names = _node_names(topology)

        def candidates() -> Iterator[tuple[str, int, tuple[str, ...]]]:
            """The renderings to try, in order: generated as tried, so that what a lab shown whole
            never needs (the conversation's node names) is never read."""
            for depth in range(TOPOLOGY_LEVELS):
                said = (mentions() if callable(mentions) else mentions) if depth == 2 else ""
                focused = focus_nodes(topology, said) if said else set()
                for focus_level in range(FOCUS_LEVELS) if focused else ():
                    yield f"focus{focus_level}", focus_level, tuple(sorted(focused))
                yield "level", depth, ()

        tried: list[tuple[str, int, tuple[str, ...]]] = []
        text = ""
        for kind, level, focus in candidates():
            tried.append((kind, level, focus))
            if kind == "level":
                text = render_topology(topology, level)
                if level:
                    text = f"{text}\n{REDUCED_NOTE.format(what=_LEVEL_NAMES.get(level, f'level {level}'))}"
            else:
                text = f"{render_focused(topology, set(focus), level)}\n{REDUCED_NOTE.format(what=_FOCUS_NAMES[level])}"
            tokens = counter.known_text(text)
            if tokens <= max_tokens:
                if kind == "level":
                    return TopologyText(text, tokens, level, level > 0, names, True)
                return TopologyText(text, tokens, None, True, names, True, focus)
        focus = next((f for kind, _, f in tried if f), ())
        if focus:  # the nodes in focus come first: cutting lines from the end keeps them
            last = FOCUS_LEVELS - 1
            text = _cut_lines(render_focused(topology, set(focus), last), max_tokens, counter, _FOCUS_NAMES[last])
            return TopologyText(text, counter.known_text(text), None, True, names, True, focus)
        last = TOPOLOGY_LEVELS - 1
        text = _cut_lines(render_topology(topology, last), max_tokens, counter, _LEVEL_NAMES.get(last, "reduced"))
        return TopologyText(text, counter.known_text(text), last, True, names, True)
    text = str(topology)
    tokens = counter.known_text(text)
    if tokens <= max_tokens:
        return TopologyText(text, tokens, None, False, [], True)
    text = _cut_lines(text, max_tokens, counter, "text cut")
    return TopologyText(text, counter.known_text(text), None, True, [], True)


def inject(system_prompt: str, topology_text: str) -> str:
    """Replace the placeholder; a prompt without one gets a topology section appended."""
    if TOPOLOGY_PLACEHOLDER in system_prompt:
        return system_prompt.replace(TOPOLOGY_PLACEHOLDER, topology_text)
    return f"{system_prompt.rstrip()}\n\n{TOPOLOGY_HEADING}\n{topology_text}"
