"""Compact text rendering of a GNS3 topology for the system prompt.

Pure and synchronous: no I/O. Link ends are named by the topology model's
resolver (:func:`..gns3_client.topology.resolve_endpoint`), the same one that
builds the topology tool's answer. The input is the REST-shaped dict the topology fetch
produces: ``{"project_id", "name", "status", "nodes": [...], "links": [...]}``
with nodes and links exactly as GNS3's REST API returns them.

Levels, from most to least detailed; every level keeps node names, types,
status, consoles, CLI families (``cli=junos``, ``cli=ios?`` when only assumed: the
node dicts' ``cli`` and ``cli_assumed``, ``tools/families.py``) and every link
(``PC1 e0 <-> R1 e0``):

0. full: per node its position and every port, linked (``e0 -> R1 e0``) or free;
1. without positions and free ports;
2. one line per node;
3. nodes grouped by type, status and console host (``qemu stopped telnet
   127.0.0.1: R1:5000 R2:5001``), and the links.

Each level is never longer (in characters) than the one before it.

For big labs, :func:`render_focused` keeps level-0 detail for the nodes the
conversation is about and their neighbours and summarises the rest (one grouped
line per type/status, or just counts, and link counts between zones).

A link end that names an unknown node is rendered ``?<node_id[:8]> a<adapter>/p<port>``,
one on an unknown port of a known node ``<node> a<adapter>/p<port>``: reported,
not dropped.

Every value taken from GNS3 (names, types, hosts, filter values) is shown as data
(``as_data.py``): a name that is not plain is quoted and escaped, so a
name cannot end a line, start a heading or pass for a field of ours.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from ...as_data import as_data
from ...gns3_client.topology import node_label, node_text, port_label, resolve_endpoint

__all__ = ["FOCUS_LEVELS", "TOPOLOGY_LEVELS", "focus_nodes", "render_focused", "render_topology"]

TOPOLOGY_LEVELS = 4  # 0 full; 1 drop positions (x/y) and unlinked ports; 2 per-node one-liners; 3 counts plus links

_PortKey = tuple[Any, Any, Any]  # (node_id, adapter_number, port_number)


def render_topology(topology: Mapping[str, Any], level: int = 0) -> str:
    """Render ``topology`` at reduction ``level`` (0..TOPOLOGY_LEVELS-1) as compact lines."""
    if isinstance(level, bool) or not isinstance(level, int) or not 0 <= level < TOPOLOGY_LEVELS:
        raise ValueError(f"topology level must be an int in 0..{TOPOLOGY_LEVELS - 1}, got {level!r}")
    nodes = sorted(_mappings(topology.get("nodes")), key=lambda n: (_name(n), str(n.get("node_id", ""))))
    by_id = {n.get("node_id"): n for n in nodes}
    links = [_LinkView(link, by_id) for link in _mappings(topology.get("links"))]
    links.sort(key=lambda link: link.text)

    lines = [_header(topology, len(nodes), len(links))]
    if level <= 1:
        peers = _peers(links)
        lines.append("nodes:")
        for node in nodes:
            lines.append(_node_line(node, with_position=level == 0))
            ports = _ports_line(node, by_id, peers, with_free=level == 0)
            if ports:
                lines.append(ports)
    elif level == 2:
        lines.append("nodes:")
        lines.extend(_node_line(node, with_position=False) for node in nodes)
    else:
        lines.extend(_grouped_nodes(nodes))
    lines.append("links:" if links else "links: none")
    lines.extend(link.text for link in links)
    return "\n".join(lines)


class _LinkView:
    """A REST link with its endpoints resolved to names where possible."""

    __slots__ = ("ends", "labels", "text")

    def __init__(self, link: Mapping[str, Any], by_id: Mapping[Any, Mapping[str, Any]]) -> None:
        self.ends: list[_PortKey] = [
            (end.get("node_id"), end.get("adapter_number"), end.get("port_number"))
            for end in _mappings(link.get("nodes"))
        ]
        self.labels = [resolve_endpoint(end, by_id).label() for end in _mappings(link.get("nodes"))]
        text = " <-> ".join(self.labels + ["?"] * (2 - len(self.labels)))
        if link.get("suspend"):
            text += " [suspended]"
        filters = link.get("filters")
        if isinstance(filters, Mapping) and filters:
            text += " [filters " + " ".join(
                f"{as_data(name)}={','.join(as_data(v) for v in values) if isinstance(values, list) else as_data(values)}"
                for name, values in sorted(filters.items())
            ) + "]"
        self.text = text


def _mappings(value: Any) -> list[Mapping[str, Any]]:
    if not isinstance(value, Sequence) or isinstance(value, (str, bytes)):
        return []
    return [item for item in value if isinstance(item, Mapping)]


_name = node_label


def _value(value: Any) -> str:
    return "?" if value is None or value == "" else as_data(value)


def _header(topology: Mapping[str, Any], node_count: int, link_count: int) -> str:
    return (
        f"project {_value(topology.get('name'))} ({_value(topology.get('status'))})"
        f" id={_value(topology.get('project_id'))}: {node_count} nodes, {link_count} links"
    )


def _console(node: Mapping[str, Any]) -> str:
    kind = node.get("console_type")
    if kind in (None, "", "none"):
        return "no-console"
    return f"{_value(kind)} {_value(node.get('console_host'))}:{_value(node.get('console'))}"


def _cli(node: Mapping[str, Any]) -> str:
    """`` cli=junos`` (``cli=ios?`` when only assumed): the CLI family the console tools drive it as."""
    family = node.get("cli")
    if not family:
        return ""
    return f" cli={as_data(family)}{'?' if node.get('cli_assumed') else ''}"


def _node_line(node: Mapping[str, Any], *, with_position: bool) -> str:
    line = f"{node_text(node)} {_value(node.get('node_type'))} {_value(node.get('status'))} {_console(node)}{_cli(node)}"
    if with_position and ("x" in node or "y" in node):
        line += f" at {_value(node.get('x'))},{_value(node.get('y'))}"
    return line


def _label(port: Mapping[str, Any]) -> str:
    label = port_label(port)
    return as_data(label) if label else f"a{_value(port.get('adapter_number'))}/p{_value(port.get('port_number'))}"


def _peers(links: Sequence[_LinkView]) -> dict[_PortKey, list[str]]:
    """For each linked port, the labels of the far ends (a port may carry several)."""
    peers: dict[_PortKey, list[str]] = {}
    for link in links:
        if len(link.ends) != 2:
            continue
        for here, there in ((0, 1), (1, 0)):
            peers.setdefault(link.ends[here], []).append(link.labels[there])
    return peers


def _ports_line(
    node: Mapping[str, Any],
    by_id: Mapping[Any, Mapping[str, Any]],
    peers: Mapping[_PortKey, list[str]],
    *,
    with_free: bool,
) -> str:
    linked: list[str] = []
    free: list[str] = []
    for port in _mappings(node.get("ports")):
        key = (node.get("node_id"), port.get("adapter_number"), port.get("port_number"))
        label = _label(port)
        if key in peers:
            linked.extend(f"{label} -> {peer}" for peer in peers[key])
        else:
            free.append(label)
    parts = [", ".join(linked)] if linked else []
    if with_free and free:
        parts.append("free: " + " ".join(free))
    return "  " + "; ".join(parts) if parts else ""


def _grouped_nodes(nodes: Sequence[Mapping[str, Any]]) -> list[str]:
    """Nodes sharing type, status and console host on one line: ``qemu stopped telnet h: R1:5000 R2:5001``.

    A node alone in its group keeps its level-2 line, so that this level is never
    longer than level 2.
    """
    groups: dict[tuple[str, str, str, str], list[Mapping[str, Any]]] = {}
    for node in nodes:
        kind = node.get("console_type")
        has_console = kind not in (None, "", "none")
        console = f"{_value(kind)} {_value(node.get('console_host'))}" if has_console else "no-console"
        key = (_value(node.get("node_type")), _value(node.get("status")), console, _cli(node))
        groups.setdefault(key, []).append(node)
    lines = ["nodes:"]
    for (kind, status, console, cli), members in sorted(groups.items()):
        if len(members) == 1:
            lines.append(_node_line(members[0], with_position=False))
            continue
        names = (
            f"{node_text(n)}:{_value(n.get('console'))}" if console != "no-console" else node_text(n) for n in members
        )
        lines.append(f"{kind} {status} {console}{cli}: {' '.join(names)}")
    return lines


# ------------------------------------------------------------ focused rendering

FOCUS_LEVELS = 2  # 0: other nodes as grouped lines; 1: other nodes as counts only
_ZONE = re.compile(r"^[^\W\d_]+", re.UNICODE)


def focus_nodes(topology: Mapping[str, Any], text: str) -> set[str]:
    """Names of the nodes named in ``text`` (whole words, any case) and of their link neighbours."""
    nodes = _mappings(topology.get("nodes"))
    ids: dict[str, set[Any]] = {}
    for node in nodes:
        if _name(node):
            ids.setdefault(_name(node).lower(), set()).add(node.get("node_id"))
    if not ids:
        return set()
    # Longest names first, so that R1-core is found as itself; a name ends where a word does
    # ("R1-R2 link", "R1/e0" and "R1:e0" name R1, "R10" does not).
    pattern = "|".join(re.escape(name) for name in sorted(ids, key=len, reverse=True))
    found = re.findall(rf"(?<!\w)(?:{pattern})(?!\w)", text, re.IGNORECASE)
    named = set().union(*(ids[name.lower()] for name in found)) if found else set()
    if not named:
        return set()
    focus = set(named)
    for link in _mappings(topology.get("links")):
        ends = {end.get("node_id") for end in _mappings(link.get("nodes"))}
        if ends & named:
            focus |= ends
    return {_name(n) for n in nodes if n.get("node_id") in focus}


def _zone(node: Mapping[str, Any]) -> str:
    match = _ZONE.match(_name(node))
    return match.group(0) if match else _value(node.get("node_type"))


def render_focused(topology: Mapping[str, Any], focus: set[str], level: int = 0) -> str:
    """Full detail for the ``focus`` nodes (ports, consoles, every link), a summary of the rest.

    Level 0 lists the other nodes grouped by type, status and console host (names
    and console ports); level 1 gives their counts only. Links among the other
    nodes are counted per pair of zones (a zone is a name's leading letters,
    ``R`` for R17, else the node type); links of focus nodes are all listed.
    """
    if isinstance(level, bool) or not isinstance(level, int) or not 0 <= level < FOCUS_LEVELS:
        raise ValueError(f"focus level must be an int in 0..{FOCUS_LEVELS - 1}, got {level!r}")
    nodes = sorted(_mappings(topology.get("nodes")), key=lambda n: (_name(n), str(n.get("node_id", ""))))
    by_id = {n.get("node_id"): n for n in nodes}
    links = [_LinkView(link, by_id) for link in _mappings(topology.get("links"))]
    links.sort(key=lambda link: link.text)
    inside = [n for n in nodes if _name(n) in focus]
    outside = [n for n in nodes if _name(n) not in focus]
    inside_ids = {n.get("node_id") for n in inside}

    lines = [_header(topology, len(nodes), len(links))]
    lines.append(f"nodes in focus ({len(inside)}, named in the conversation and their neighbours):")
    peers = _peers(links)
    for node in inside:
        lines.append(_node_line(node, with_position=False))
        ports = _ports_line(node, by_id, peers, with_free=True)
        if ports:
            lines.append(ports)
    focus_links = [link for link in links if any(end[0] in inside_ids for end in link.ends)]
    lines.append("links of nodes in focus:" if focus_links else "links of nodes in focus: none")
    lines.extend(link.text for link in focus_links)

    lines.append(f"other nodes ({len(outside)}):")
    if level == 0:
        lines.extend(_grouped_nodes(outside)[1:])
    else:
        counts = Counter((_value(n.get("node_type")), _value(n.get("status"))) for n in outside)
        lines.extend(f"{kind} {status}: {count}" for (kind, status), count in sorted(counts.items()))
    zones: Counter[tuple[str, str]] = Counter()
    for link in links:
        if any(end[0] in inside_ids for end in link.ends):
            continue
        ends = [by_id.get(end[0]) for end in link.ends]
        names = sorted(_zone(n) if n is not None else "?" for n in ends)
        zones[(names[0], names[-1]) if names else ("?", "?")] += 1
    if zones:
        lines.append("links between other nodes, by zone: " + ", ".join(
            f"{a}<->{b} {count}" for (a, b), count in sorted(zones.items())))
    return "\n".join(lines)
