"""What a change changed on a device: its configuration (a unified diff) and its state (fact by fact).

Pure functions over two captures: the configuration lines before and after (what
the family's profile calls configuration), and two :class:`~..checks.DeviceState`.
A state diff lists each fact that appeared, went or changed (an OSPF neighbour
``Full`` -> gone, an interface ``up`` -> ``down``, a route's next hops), per aspect.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any

from ..checks import DeviceState

__all__ = ["config_diff", "state_diff"]

CONTEXT_LINES = 1
MAX_DIFF_LINES = 200


def config_diff(before: Sequence[str], after: Sequence[str]) -> list[str]:
    """The unified diff of two configurations (one context line; at most :data:`MAX_DIFF_LINES`)."""
    lines = [line.rstrip("\n") for line in difflib.unified_diff(
        list(before), list(after), "before", "after", n=CONTEXT_LINES, lineterm="")]
    if len(lines) > MAX_DIFF_LINES:
        lines = [*lines[:MAX_DIFF_LINES], f"... {len(lines) - MAX_DIFF_LINES} more diff lines"]
    return lines


def _facts(state: DeviceState) -> dict[str, dict[str, str]]:
    """Each aspect's items as short texts (what a person compares)."""
    facts: dict[str, dict[str, str]] = {}
    if state.interfaces is not None:
        facts["interfaces"] = {
            name: ("up" if i.up else "down" if i.up is False else "?") + (f" {' '.join(i.addresses)}" if i.addresses else "")
            for name, i in state.interfaces.items()}
    if state.ospf is not None:
        facts["ospf"] = {rid: n.state for rid, n in state.ospf.items()}
    if state.bgp is not None:
        facts["bgp"] = {address: p.state for address, p in state.bgp.items()}
    if state.routes is not None:
        facts["routes"] = {
            prefix: "; ".join(f"{r.protocol or '?'} via {','.join(r.next_hops) or ','.join(r.interfaces) or '-'}"
                              for r in routes) for prefix, routes in state.routes.items()}
    return facts


def state_diff(before: DeviceState, after: DeviceState) -> list[dict[str, Any]]:
    """Each fact that differs: ``{"aspect", "item", "before", "after"}`` (None: absent on that side).

    An aspect read on one side only is reported once, as not comparable.
    """
    was, now = _facts(before), _facts(after)
    changes: list[dict[str, Any]] = []
    for aspect in dict.fromkeys([*was, *now]):
        if aspect not in was or aspect not in now:
            missing = "before" if aspect not in was else "after"
            changes.append({"aspect": aspect, "item": "*", "before": None, "after": None,
                            "note": f"not read {missing} the change"})
            continue
        old: Mapping[str, str] = was[aspect]
        new: Mapping[str, str] = now[aspect]
        for item in sorted(set(old) | set(new)):
            if old.get(item) != new.get(item):
                changes.append({"aspect": aspect, "item": item, "before": old.get(item), "after": new.get(item)})
    return changes
