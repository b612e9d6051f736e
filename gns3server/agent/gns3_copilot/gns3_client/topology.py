"""The structured topology of a GNS3 project.

:func:`fetch_topology` reads a project, its nodes and its links concurrently and
builds a :class:`Topology`: nodes with their console and ports, each port with
the endpoint it is linked to, links named ``nodeA portA <-> nodeB portB``. A link
endpoint that names an unknown node or port is kept and reported
(:attr:`Topology.unresolved_links`), never dropped.

The REST data the topology was built from stays available as
:meth:`Topology.as_rest` (``{"project_id", "name", "status", "nodes", "links"}``),
which is what the context manager's compact rendering takes.

:func:`resolve_endpoint` is the one place where a REST link end becomes a label
like ``PC1 e0``: the topology built here, the context manager's text rendering
(``agent/context/topology.py``) and the link tool (``tools/links.py``, which
names the link it changed and the ports a user may give) all use it, so the
model reads the same names in the system prompt, in the topology tool's answer
and in a link change's result. Labels show names as data (:func:`..as_data.as_data`:
a name that is not plain is quoted and escaped), so no name can pass for structure.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..as_data import as_data
from .client import GNS3Client, gather_cancelling

log = logging.getLogger(__name__)

__all__ = [
    "Endpoint", "Link", "Node", "Port", "Topology", "fetch_rest_topology", "fetch_topology", "find_port",
    "link_text", "node_label", "node_text", "port_label", "resolve_endpoint",
]


@dataclass(frozen=True)
class Endpoint:
    """One end of a link. ``node_name``/``port_name`` are None when unresolved."""

    node_id: str
    adapter_number: int | None
    port_number: int | None
    node_name: str | None = None
    port_name: str | None = None

    @property
    def resolved(self) -> bool:
        return self.node_name is not None and self.port_name is not None

    @property
    def port_text(self) -> str:
        """The port part of :meth:`label`: ``e0``, or ``a1/p0`` when the port is unknown."""
        if self.node_name is not None and self.port_name is not None:
            return as_data(self.port_name)
        return f"a{_num(self.adapter_number)}/p{_num(self.port_number)}"

    def label(self) -> str:
        """``PC1 e0``; ``?1a2b3c4d a0/p0`` for an unknown node; ``PC1 a1/p0`` for an unknown port."""
        unnamed = self.node_name is None or self.node_name == f"?{self.node_id[:8]}"  # node_label's stand-in
        node = _unnamed(self.node_id) if unnamed else as_data(self.node_name)
        return f"{node} {self.port_text}"


@dataclass(frozen=True)
class Port:
    """A node port with the far end of its link, if any."""

    name: str
    short_name: str
    adapter_number: int
    port_number: int
    link_type: str | None = None
    link_id: str | None = None
    peer: Endpoint | None = None


@dataclass(frozen=True)
class Node:
    """A node as the copilot needs it: identity, state, console and ports."""

    node_id: str
    name: str
    node_type: str | None
    status: str | None
    console_type: str | None
    console_host: str | None
    console: int | None
    x: int | None = None
    y: int | None = None
    ports: tuple[Port, ...] = ()


@dataclass(frozen=True)
class Link:
    """A link; ``text`` is ``nodeA portA <-> nodeB portB`` by names."""

    link_id: str
    endpoints: tuple[Endpoint, ...]
    link_type: str | None = None
    suspended: bool = False

    @property
    def resolved(self) -> bool:
        return len(self.endpoints) == 2 and all(e.resolved for e in self.endpoints)

    @property
    def text(self) -> str:
        labels = [e.label() for e in self.endpoints] + ["?"] * (2 - len(self.endpoints))
        return " <-> ".join(labels)


@dataclass(frozen=True)
class Topology:
    """A project's topology, plus the REST payloads it was built from."""

    project_id: str
    name: str | None
    status: str | None
    nodes: tuple[Node, ...]
    links: tuple[Link, ...]
    rest_nodes: tuple[Mapping[str, Any], ...] = field(default=(), repr=False, compare=False)
    rest_links: tuple[Mapping[str, Any], ...] = field(default=(), repr=False, compare=False)

    @property
    def unresolved_links(self) -> tuple[Link, ...]:
        return tuple(link for link in self.links if not link.resolved)

    def node(self, name: str) -> Node:
        """The node with this name (KeyError if none)."""
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)

    def as_rest(self) -> dict[str, Any]:
        """The REST-shaped dict the context manager's topology share accepts."""
        return {
            "project_id": self.project_id,
            "name": self.name,
            "status": self.status,
            "nodes": [dict(n) for n in self.rest_nodes],
            "links": [dict(link) for link in self.rest_links],
        }

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict: what the topology tool returns to the model."""
        return {
            "project_id": self.project_id,
            "name": self.name,
            "status": self.status,
            "nodes": [_node_dict(n) for n in self.nodes],
            "links": [
                {"link_id": link.link_id, "text": link.text, "link_type": link.link_type,
                 "suspended": link.suspended, "endpoints": [asdict(e) for e in link.endpoints]}
                for link in self.links
            ],
            "unresolved_links": [link.text for link in self.unresolved_links],
        }

    @classmethod
    def from_rest(
        cls,
        project: Mapping[str, Any],
        nodes: Sequence[Mapping[str, Any]],
        links: Sequence[Mapping[str, Any]],
    ) -> Topology:
        """Build from GNS3's REST payloads (tolerates missing optional keys)."""
        by_id = {n.get("node_id"): n for n in nodes}
        built_links = tuple(
            sorted((_build_link(link, by_id) for link in links), key=lambda link: (link.text, link.link_id))
        )
        peers: dict[tuple[str, int | None, int | None], tuple[str, Endpoint]] = {}
        for link in built_links:
            if len(link.endpoints) == 2:
                a, b = link.endpoints
                peers[(a.node_id, a.adapter_number, a.port_number)] = (link.link_id, b)
                peers[(b.node_id, b.adapter_number, b.port_number)] = (link.link_id, a)
        built_nodes = tuple(
            sorted((_build_node(n, peers) for n in nodes), key=lambda node: (node.name, node.node_id))
        )
        unresolved = [link.text for link in built_links if not link.resolved]
        if unresolved:
            log.warning("project %s: %d link endpoint(s) not resolved: %s",
                        project.get("project_id"), len(unresolved), "; ".join(unresolved))
        return cls(
            project_id=str(project.get("project_id", "")),
            name=project.get("name"),
            status=project.get("status"),
            nodes=built_nodes,
            links=built_links,
            rest_nodes=tuple(nodes),
            rest_links=tuple(links),
        )


async def fetch_topology(client: GNS3Client, project_id: str) -> Topology:
    """Fetch a project, its nodes and its links concurrently and build the topology.

    Reading has no side effect: a closed project is reported as such (GNS3 lists
    no nodes for it) rather than opened behind the user's back.
    """
    project, (nodes, links) = await _fetch(client, project_id)
    return Topology.from_rest(project, nodes, links)


async def fetch_rest_topology(client: GNS3Client, project_id: str) -> dict[str, Any]:
    """The same payloads as :meth:`Topology.as_rest`, without resolving them: for the
    context manager, which renders (and resolves) them itself on every model call."""
    project, (nodes, links) = await _fetch(client, project_id)
    return {
        "project_id": str(project.get("project_id", "")), "name": project.get("name"), "status": project.get("status"),
        "nodes": list(nodes), "links": list(links),
    }


async def _fetch(client: GNS3Client, project_id: str) -> list[Any]:
    """The project and (nodes, links), fetched concurrently."""
    return await gather_cancelling(client.project(project_id), client.nodes_and_links(project_id))


def _num(value: int | None) -> str:
    return "?" if value is None or value == "" else as_data(value)


def _unnamed(node_id: Any) -> str:
    """How a node without a (known) name is shown: ``?`` and the start of its id."""
    return "?" + as_data(str(node_id or "")[:8]) if node_id else "?"


def node_label(node: Mapping[str, Any]) -> str:
    """A node's name; ``?<node_id[:8]>`` when it has none."""
    name = node.get("name")
    return str(name) if name not in (None, "") else f"?{str(node.get('node_id') or '')[:8]}"


def node_text(node: Mapping[str, Any]) -> str:
    """A node's name as shown to the model (:func:`..as_data.as_data`); ``?<node_id[:8]>`` when it has none."""
    name = node.get("name")
    return as_data(name) if name not in (None, "") else _unnamed(node.get("node_id"))


def port_label(port: Mapping[str, Any]) -> str | None:
    """A port's short name (``e0``), else its name; None when it has neither."""
    label = port.get("short_name") or port.get("name")
    return str(label) if label not in (None, "") else None


def find_port(node: Mapping[str, Any], end: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The port of ``node`` that a REST link end names (by adapter and port number); None if it has none."""
    wanted = (end.get("adapter_number"), end.get("port_number"))
    return next(
        (p for p in node.get("ports") or [] if (p.get("adapter_number"), p.get("port_number")) == wanted), None
    )


def resolve_endpoint(end: Mapping[str, Any], nodes_by_id: Mapping[Any, Mapping[str, Any]]) -> Endpoint:
    """A REST link end (``node_id``, ``adapter_number``, ``port_number``) with its node's and port's names."""
    node_id, adapter, number = end.get("node_id"), end.get("adapter_number"), end.get("port_number")
    node = nodes_by_id.get(node_id)
    if node is None:
        return Endpoint(node_id=str(node_id or ""), adapter_number=adapter, port_number=number)
    port = find_port(node, end)
    return Endpoint(
        node_id=str(node_id), adapter_number=adapter, port_number=number, node_name=node_label(node),
        port_name=port_label(port) if port is not None else None,
    )


def link_text(link: Mapping[str, Any], nodes_by_id: Mapping[Any, Mapping[str, Any]]) -> str:
    """A REST link as :attr:`Link.text` names it: ``PC1 e0 <-> R1 e0``."""
    return _build_link(link, nodes_by_id).text


def _build_link(link: Mapping[str, Any], nodes_by_id: Mapping[Any, Mapping[str, Any]]) -> Link:
    endpoints = [resolve_endpoint(end, nodes_by_id) for end in link.get("nodes") or []]
    return Link(
        link_id=str(link.get("link_id", "")),
        endpoints=tuple(endpoints),
        link_type=link.get("link_type"),
        suspended=bool(link.get("suspend", False)),
    )


_Peers = Mapping[tuple[str, int | None, int | None], tuple[str, Endpoint]]


def _build_node(node: Mapping[str, Any], peers: _Peers) -> Node:
    node_id = str(node.get("node_id", ""))
    ports = []
    for port in node.get("ports") or []:
        adapter, number = port.get("adapter_number"), port.get("port_number")
        link_id, peer = peers.get((node_id, adapter, number), (None, None))
        ports.append(
            Port(
                name=str(port.get("name", "")),
                short_name=port_label(port) or "",
                adapter_number=adapter,
                port_number=number,
                link_type=port.get("link_type"),
                link_id=link_id,
                peer=peer,
            )
        )
    return Node(
        node_id=node_id,
        name=node_label(node),
        node_type=node.get("node_type"),
        status=node.get("status"),
        console_type=node.get("console_type"),
        console_host=node.get("console_host"),
        console=node.get("console"),
        x=node.get("x"),
        y=node.get("y"),
        ports=tuple(ports),
    )


def _node_dict(node: Node) -> dict[str, Any]:
    return {
        "node_id": node.node_id,
        "name": node.name,
        "node_type": node.node_type,
        "status": node.status,
        "console": {"type": node.console_type, "host": node.console_host, "port": node.console},
        "x": node.x,
        "y": node.y,
        "ports": [
            {
                "name": p.name,
                "short_name": p.short_name,
                "adapter_number": p.adapter_number,
                "port_number": p.port_number,
                "link_id": p.link_id,
                "linked_to": p.peer.label() if p.peer is not None else None,
            }
            for p in node.ports
        ],
    }
