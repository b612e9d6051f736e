"""Structured topology and its renderings against a real gns3-server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from gns3_labs import ROUTER_ADAPTERS, build_lab, lab_plan

from gns3server.agent.gns3_copilot.agent.context.topology import TOPOLOGY_LEVELS, render_topology
from gns3server.agent.gns3_copilot.agent.context_manager import count_tokens
from gns3server.agent.gns3_copilot.gns3_client import Topology, fetch_topology
from tests.support.gns3_admin import AdminClient

pytestmark = pytest.mark.integration


def _rest_link_texts(nodes: list[dict[str, Any]], links: list[dict[str, Any]]) -> set[str]:
    """``A e0 <-> B e1`` for every link, computed straight from the REST payloads."""
    by_id = {n["node_id"]: n for n in nodes}
    texts = set()
    for link in links:
        ends = []
        for end in link["nodes"]:
            node = by_id[end["node_id"]]
            port = next(p for p in node["ports"]
                        if (p["adapter_number"], p["port_number"]) == (end["adapter_number"], end["port_number"]))
            ends.append(f"{node['name']} {port['short_name']}")
        texts.add(" <-> ".join(ends))
    return texts


def _assert_matches_rest(topology: Topology, project: dict[str, Any],
                         nodes: list[dict[str, Any]], links: list[dict[str, Any]]) -> None:
    assert (topology.project_id, topology.name, topology.status) == (
        project["project_id"], project["name"], project["status"])
    assert {lk.text for lk in topology.links} == _rest_link_texts(nodes, links)
    assert {lk.link_id for lk in topology.links} == {lk["link_id"] for lk in links}
    assert topology.unresolved_links == ()
    rest_by_name = {n["name"]: n for n in nodes}
    assert [n.name for n in topology.nodes] == sorted(rest_by_name)
    pairs = {frozenset(lk.text.split(" <-> ")) for lk in topology.links}
    linked_ports = 0
    for node in topology.nodes:
        rest = rest_by_name[node.name]
        assert (node.node_id, node.node_type, node.status) == (rest["node_id"], rest["node_type"], rest["status"])
        assert (node.console_type, node.console_host, node.console) == (
            rest["console_type"], rest["console_host"], rest["console"])
        assert [(p.name, p.short_name, p.adapter_number, p.port_number) for p in node.ports] == [
            (p["name"], p["short_name"], p["adapter_number"], p["port_number"]) for p in rest["ports"]]
        for port in node.ports:
            if port.peer is not None:
                linked_ports += 1
                assert frozenset({f"{node.name} {port.short_name}", port.peer.label()}) in pairs
    assert linked_ports == 2 * len(links)
    rest = topology.as_rest()
    assert rest["project_id"] == project["project_id"]
    assert sorted(rest["nodes"], key=lambda n: n["node_id"]) == sorted(nodes, key=lambda n: n["node_id"])
    assert sorted(rest["links"], key=lambda lk: lk["link_id"]) == sorted(links, key=lambda lk: lk["link_id"])


def _assert_rendering_keeps_essentials(text: str, nodes: list[dict[str, Any]], link_texts: set[str]) -> None:
    lines = text.splitlines()
    for node in nodes:
        assert node["name"] in text and node["node_type"] in text and node["status"] in text
        assert f"{node['console_type']} {node['console_host']}" in text
        assert str(node["console"]) in text
    for link_text in link_texts:
        assert link_text in lines
    assert not text.lstrip().startswith(("{", "["))


async def test_topology_matches_rest(gns3_client: AdminClient, small_lab: dict[str, Any]) -> None:
    pid = small_lab["project_id"]
    topology = await fetch_topology(gns3_client, pid)
    project = await gns3_client.project(pid)
    nodes, links = await gns3_client.nodes_and_links(pid)
    assert len(nodes) == 4 and len(links) == len(lab_plan(4).links) == 4
    _assert_matches_rest(topology, project, nodes, links)

    router = topology.node("R1")
    assert router.node_type == "qemu" and len(router.ports) == ROUTER_ADAPTERS
    assert {p.short_name: p.peer.label() for p in router.ports if p.peer} == {
        "e0": "PC1 e0", "e1": "R2 e2", "e3": "R2 e3"}
    as_dict = topology.to_dict()
    assert json.loads(json.dumps(as_dict)) == as_dict
    assert sorted(lk["text"] for lk in as_dict["links"]) == sorted(_rest_link_texts(nodes, links))


async def test_renderings_at_each_level(gns3_client: AdminClient, small_lab: dict[str, Any]) -> None:
    topology = await fetch_topology(gns3_client, small_lab["project_id"])
    nodes, links = list(topology.rest_nodes), list(topology.rest_links)
    link_texts = _rest_link_texts(nodes, links)  # type: ignore[arg-type]
    renderings = [render_topology(topology.as_rest(), level) for level in range(TOPOLOGY_LEVELS)]
    for text in renderings:
        _assert_rendering_keeps_essentials(text, nodes, link_texts)  # type: ignore[arg-type]
    full, no_free, one_line, counts = renderings
    assert " at 0,0" in full and "free: e2 e4 e5" in full
    assert " at " not in no_free and "free:" not in no_free and "  e0 -> PC1 e0, e1 -> R2 e2, e3 -> R2 e3" in no_free
    assert " -> " not in one_line
    console = {n["name"]: n["console"] for n in nodes}
    assert f"qemu stopped telnet 127.0.0.1: R1:{console['R1']} R2:{console['R2']}" in counts.splitlines()
    sizes = [count_tokens(text) for text in renderings]
    assert sizes == sorted(sizes, reverse=True), sizes


async def test_closed_project_is_reported_not_opened(gns3_client: AdminClient, small_lab: dict[str, Any]) -> None:
    pid = small_lab["project_id"]
    await gns3_client.close_project(pid)
    topology = await fetch_topology(gns3_client, pid)
    assert topology.status == "closed"
    assert render_topology(topology.as_rest()).startswith(f"project {small_lab['name']} (closed) id={pid}:")
    assert (await gns3_client.project(pid))["status"] == "closed"


@pytest.fixture(scope="module")
async def big_lab(gns3_server: Any) -> AsyncIterator[tuple[str, list[dict[str, Any]], list[dict[str, Any]]]]:
    """A 200-node / 300-link project, built once for this module."""
    async with gns3_server.client() as client:
        project = await client.create_project("big-lab-200")
        try:
            nodes, links = await build_lab(client, project["project_id"], 200)
            yield project["project_id"], nodes, links
        finally:
            await client.delete_project(project["project_id"])


async def test_200_nodes_300_links(gns3_client: AdminClient, big_lab: tuple[str, Any, Any]) -> None:
    pid, created_nodes, created_links = big_lab
    assert len(created_nodes) == 200 and len(created_links) == 300
    topology = await fetch_topology(gns3_client, pid)
    project = await gns3_client.project(pid)
    nodes, links = await gns3_client.nodes_and_links(pid)
    assert len(topology.nodes) == 200 and len(topology.links) == 300
    assert {n.name for n in topology.nodes} == {f"R{i}" for i in range(1, 101)} | {f"PC{i}" for i in range(1, 101)}
    assert {lk.text for lk in topology.links} == {f"{a} {pa} <-> {b} {pb}" for a, pa, b, pb in lab_plan(200).links}
    _assert_matches_rest(topology, project, nodes, links)


async def test_200_node_renderings_fit_the_target(gns3_client: AdminClient, big_lab: tuple[str, Any, Any]) -> None:
    pid = big_lab[0]
    topology = await fetch_topology(gns3_client, pid)
    rest = topology.as_rest()
    raw_tokens = count_tokens(json.dumps(rest["nodes"] + rest["links"]))
    link_texts = {lk.text for lk in topology.links}
    sizes = []
    for level in range(TOPOLOGY_LEVELS):
        text = render_topology(rest, level)
        _assert_rendering_keeps_essentials(text, rest["nodes"], link_texts)
        sizes.append(count_tokens(text))
    assert sizes[0] <= 0.25 * raw_tokens, (sizes, raw_tokens)
    assert sizes == sorted(sizes, reverse=True), sizes
