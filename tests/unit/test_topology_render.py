"""The topology model (``gns3_client/topology.py``) and its compact, level-reduced text
(``agent/context/topology.py``): one resolver names link ends for both, and for the link tool (pure)."""

from __future__ import annotations

import logging
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gns3server.agent.gns3_copilot.agent.context.topology import TOPOLOGY_LEVELS, render_topology
from gns3server.agent.gns3_copilot.gns3_client.topology import Topology

PID = "5a1c3f0e-8d2b-4c6a-9e7f-0123456789ab"


def _node(node_id: str, name: str, node_type: str, ports: int, console: int | None, **extra: Any) -> dict[str, Any]:
    return {
        "node_id": node_id, "name": name, "node_type": node_type, "status": "stopped",
        "console_type": "telnet", "console_host": "127.0.0.1", "console": console,
        "x": 10, "y": -20, "properties": {"ram": 256}, "symbol": ":/symbols/router.svg",
        "ports": [{"name": f"Ethernet{i}", "short_name": f"e{i}", "adapter_number": i, "port_number": 0,
                   "link_type": "ethernet"} for i in range(ports)],
        **extra,
    }


def _link(link_id: str, *ends: tuple[str, int], **extra: Any) -> dict[str, Any]:
    return {"link_id": link_id, "link_type": "ethernet", "suspend": False, "filters": {},
            "nodes": [{"node_id": n, "adapter_number": a, "port_number": 0} for n, a in ends], **extra}


def _sample() -> dict[str, Any]:
    return {
        "project_id": PID, "name": "lab", "status": "opened",
        "nodes": [
            _node("r1", "R1", "qemu", 3, 5001),
            _node("pc2", "PC2", "vpcs", 1, 5003),
            _node("pc1", "PC1", "vpcs", 1, 5002),
            _node("sw1", "SW1", "ethernet_switch", 2, None, console_type="none", status="started"),
        ],
        "links": [
            _link("l1", ("pc1", 0), ("r1", 0)),
            _link("l2", ("r1", 1), ("pc2", 0), suspend=True),
            _link("l3", ("deadbeef-0000-4000-8000-000000000000", 0), ("sw1", 7),
                  filters={"packet_loss": [10]}),
        ],
    }


EXPECTED = {
    0: """\
project lab (opened) id=5a1c3f0e-8d2b-4c6a-9e7f-0123456789ab: 4 nodes, 3 links
nodes:
PC1 vpcs stopped telnet 127.0.0.1:5002 at 10,-20
  e0 -> R1 e0
PC2 vpcs stopped telnet 127.0.0.1:5003 at 10,-20
  e0 -> R1 e1
R1 qemu stopped telnet 127.0.0.1:5001 at 10,-20
  e0 -> PC1 e0, e1 -> PC2 e0; free: e2
SW1 ethernet_switch started no-console at 10,-20
  free: e0 e1
links:
?deadbeef a0/p0 <-> SW1 a7/p0 [filters packet_loss=10]
PC1 e0 <-> R1 e0
R1 e1 <-> PC2 e0 [suspended]""",
    1: """\
project lab (opened) id=5a1c3f0e-8d2b-4c6a-9e7f-0123456789ab: 4 nodes, 3 links
nodes:
PC1 vpcs stopped telnet 127.0.0.1:5002
  e0 -> R1 e0
PC2 vpcs stopped telnet 127.0.0.1:5003
  e0 -> R1 e1
R1 qemu stopped telnet 127.0.0.1:5001
  e0 -> PC1 e0, e1 -> PC2 e0
SW1 ethernet_switch started no-console
links:
?deadbeef a0/p0 <-> SW1 a7/p0 [filters packet_loss=10]
PC1 e0 <-> R1 e0
R1 e1 <-> PC2 e0 [suspended]""",
    2: """\
project lab (opened) id=5a1c3f0e-8d2b-4c6a-9e7f-0123456789ab: 4 nodes, 3 links
nodes:
PC1 vpcs stopped telnet 127.0.0.1:5002
PC2 vpcs stopped telnet 127.0.0.1:5003
R1 qemu stopped telnet 127.0.0.1:5001
SW1 ethernet_switch started no-console
links:
?deadbeef a0/p0 <-> SW1 a7/p0 [filters packet_loss=10]
PC1 e0 <-> R1 e0
R1 e1 <-> PC2 e0 [suspended]""",
    3: """\
project lab (opened) id=5a1c3f0e-8d2b-4c6a-9e7f-0123456789ab: 4 nodes, 3 links
nodes:
SW1 ethernet_switch started no-console
R1 qemu stopped telnet 127.0.0.1:5001
vpcs stopped telnet 127.0.0.1: PC1:5002 PC2:5003
links:
?deadbeef a0/p0 <-> SW1 a7/p0 [filters packet_loss=10]
PC1 e0 <-> R1 e0
R1 e1 <-> PC2 e0 [suspended]""",
}


@pytest.mark.parametrize("level", range(TOPOLOGY_LEVELS))
def test_each_level_renders_as_specified(level: int) -> None:
    assert render_topology(_sample(), level) == EXPECTED[level]


def test_default_level_is_full() -> None:
    assert render_topology(_sample()) == EXPECTED[0]


@pytest.mark.parametrize("level", [-1, TOPOLOGY_LEVELS, True, 1.0, "1", None])
def test_level_out_of_range_is_refused(level: Any) -> None:
    with pytest.raises(ValueError, match="topology level"):
        render_topology(_sample(), level)


def test_order_of_nodes_and_links_does_not_matter() -> None:
    shuffled = _sample()
    rng = random.Random(7)
    rng.shuffle(shuffled["nodes"])
    rng.shuffle(shuffled["links"])
    for level in range(TOPOLOGY_LEVELS):
        assert render_topology(shuffled, level) == EXPECTED[level]


def test_missing_optional_keys_are_tolerated() -> None:
    topology = {
        "nodes": [{"node_id": "0123456789"}, {"node_id": "n2", "name": "PC9", "ports": [{"adapter_number": 0}]}],
        "links": [{"nodes": [{"node_id": "n2"}]}, {"nodes": [{"node_id": "0123456789", "adapter_number": 1}]}, {}],
    }
    expected_links = ["?01234567 a1/p? <-> ?", "PC9 a?/p? <-> ?", "? <-> ?"]
    for level in range(TOPOLOGY_LEVELS):
        lines = render_topology(topology, level).splitlines()
        assert lines[0] == "project ? (?) id=?: 2 nodes, 3 links"
        if level < 3:
            assert "?01234567 ? ? no-console" in lines and "PC9 ? ? no-console" in lines
        else:
            assert "? ? no-console: ?01234567 PC9" in lines
        assert sorted(lines[-3:]) == sorted(expected_links)


def test_peers_keep_names_that_look_like_the_link_syntax() -> None:
    """Node names may contain " [" or " <-> " (GNS3 allows any text): peers are not re-parsed, and
    such names are quoted, so that the line's own " <-> " and "[suspended]" stay the only ones."""
    topology = {
        "nodes": [_node("a", "R1 [core]", "qemu", 1, 5001), _node("b", "Edge <-> WAN", "qemu", 1, 5002)],
        "links": [_link("l1", ("a", 0), ("b", 0), suspend=True)],
    }
    lines = render_topology(topology, 0).splitlines()
    assert '  e0 -> "Edge <-> WAN" e0' in lines and '  e0 -> "R1 [core]" e0' in lines
    assert '"R1 [core]" e0 <-> "Edge <-> WAN" e0 [suspended]' in lines


def test_empty_topology() -> None:
    text = render_topology({"project_id": PID, "name": "empty", "status": "opened", "nodes": [], "links": []}, 3)
    assert text == f"project empty (opened) id={PID}: 0 nodes, 0 links\nnodes:\nlinks: none"


# -- properties over generated topologies -----------------------------------------

NAMES = st.text(alphabet="ABCRSWPQ0123456789-", min_size=1, max_size=6)


@st.composite
def topologies(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(NAMES, min_size=0, max_size=12, unique=True))
    nodes = []
    for i, name in enumerate(names):
        node = _node(f"id-{i:04d}", name, draw(st.sampled_from(["vpcs", "qemu", "docker"])),
                     draw(st.integers(1, 4)), draw(st.one_of(st.none(), st.integers(5000, 5999))))
        node["status"] = draw(st.sampled_from(["started", "stopped", "suspended"]))
        node["console_type"] = draw(st.sampled_from(["telnet", "vnc", "none", None]))
        if draw(st.booleans()):
            del node["x"], node["y"]
        nodes.append(node)
    free = [(n["node_id"], p["adapter_number"]) for n in nodes for p in n["ports"]]
    free = draw(st.permutations(free))
    links = [_link(f"l{i}", free[2 * i], free[2 * i + 1]) for i in range(draw(st.integers(0, len(free) // 2)))]
    for i in range(draw(st.integers(0, 2))):  # dangling ends: unknown node ids
        links.append(_link(f"x{i}", ("ffffffff-dead", i), free[0] if free else ("gone", 0)))
    return {"project_id": PID, "name": "gen", "status": "opened", "nodes": nodes, "links": links}


@settings(max_examples=150, deadline=None)
@given(topologies())
def test_every_level_keeps_names_consoles_and_every_link(topology: dict[str, Any]) -> None:
    link_lines = render_topology(topology, 0).splitlines()[-len(topology["links"]):] if topology["links"] else []
    assert len(link_lines) == len(topology["links"])
    for level in range(TOPOLOGY_LEVELS):
        text = render_topology(topology, level)
        lines = text.splitlines()
        for node in topology["nodes"]:
            assert node["name"] in text and node["node_type"] in text and node["status"] in text
            if node["console_type"] in ("telnet", "vnc"):
                assert f"{node['console_type']} 127.0.0.1" in text
        for link_line in link_lines:
            assert link_line in lines
        assert lines[-len(link_lines) - 1] == ("links:" if link_lines else "links: none")
        for link in topology["links"]:
            if link["nodes"][0]["node_id"] == "ffffffff-dead":
                assert any(line.startswith("?ffffffff a") for line in link_lines)


@settings(max_examples=150, deadline=None)
@given(topologies())
def test_levels_never_grow(topology: dict[str, Any]) -> None:
    sizes = [len(render_topology(topology, level)) for level in range(TOPOLOGY_LEVELS)]
    assert sizes == sorted(sizes, reverse=True)


# -- one resolver: the model and the text name every link end alike ----------------

def _rendered_links(topology: dict[str, Any]) -> list[str]:
    lines = render_topology(topology, 2).splitlines()
    return lines[len(lines) - len(topology["links"]):] if topology["links"] else []


def _model_links(topology: dict[str, Any]) -> list[str]:
    built = Topology.from_rest(topology, topology["nodes"], topology["links"])
    return sorted(link.text for link in built.links)


def test_topology_reports_unresolved_endpoints(caplog: pytest.LogCaptureFixture) -> None:
    nodes = [{"node_id": "n1", "name": "PC1", "node_type": "vpcs", "status": "stopped",
              "ports": [{"name": "Ethernet0", "short_name": "e0", "adapter_number": 0, "port_number": 0}]}]
    links = [
        {"link_id": "a", "nodes": [{"node_id": "n1", "adapter_number": 0, "port_number": 0},
                                   {"node_id": "deadbeef-gone", "adapter_number": 1, "port_number": 0}]},
        {"link_id": "b", "nodes": [{"node_id": "n1", "adapter_number": 3, "port_number": 0}]},
    ]
    with caplog.at_level(logging.WARNING):
        topology = Topology.from_rest({"project_id": PID, "name": "p", "status": "opened"}, nodes, links)
    assert [link.text for link in topology.links] == ["PC1 a3/p0 <-> ?", "PC1 e0 <-> ?deadbeef a1/p0"]
    assert len(topology.unresolved_links) == 2
    assert topology.to_dict()["unresolved_links"] == ["PC1 a3/p0 <-> ?", "PC1 e0 <-> ?deadbeef a1/p0"]
    assert topology.node("PC1").ports[0].peer.label() == "?deadbeef a1/p0"  # type: ignore[union-attr]
    assert "2 link endpoint(s) not resolved" in caplog.text
    assert topology.as_rest()["links"] == links
    assert _rendered_links(topology.as_rest()) == ["PC1 a3/p0 <-> ?", "PC1 e0 <-> ?deadbeef a1/p0"]


def test_odd_ends_are_named_alike_by_the_model_and_the_text() -> None:
    """A nameless node, a port with no names, a port the node does not have, an unknown node."""
    nodes = [
        _node("a1b2c3d4-0000", "", "vpcs", 1, 5001),
        _node("r1", "R1", "qemu", 2, 5002),
    ]
    nodes[1]["ports"][1] = {"adapter_number": 1, "port_number": 0}
    links = [_link("l1", ("a1b2c3d4-0000", 0), ("r1", 1)), _link("l2", ("r1", 7), ("0badc0de-99", 2))]
    topology = {"project_id": PID, "name": "odd", "status": "opened", "nodes": nodes, "links": links}
    expected = ["?a1b2c3d4 e0 <-> R1 a1/p0", "R1 a7/p0 <-> ?0badc0de a2/p0"]
    assert sorted(_rendered_links(topology)) == expected
    assert _model_links(topology) == expected


@settings(max_examples=100, deadline=None)
@given(topologies())
def test_model_and_text_name_every_link_alike(topology: dict[str, Any]) -> None:
    assert sorted(_rendered_links(topology)) == _model_links(topology)


def test_the_link_tool_names_links_and_ports_as_the_topology_does() -> None:
    """tools/links.py resolves ends with the one resolver: a nameless port and one the node lacks included."""
    from gns3server.agent.gns3_copilot.tools.errors import ToolError
    from gns3server.agent.gns3_copilot.tools.links import _find_link

    nodes = [_node("r1", "R1", "qemu", 2, 5001), _node("r2", "R2", "qemu", 3, 5002)]
    nodes[0]["ports"][1] = {"adapter_number": 1, "port_number": 0}
    links = [_link("l1", ("r1", 0), ("r2", 0)), _link("l2", ("r1", 1), ("r2", 1)), _link("l3", ("r1", 7), ("r2", 2))]
    topology = {"project_id": PID, "name": "odd", "status": "opened", "nodes": nodes, "links": links}
    expected = ["R1 a1/p0 <-> R2 e1", "R1 a7/p0 <-> R2 e2", "R1 e0 <-> R2 e0"]
    assert _model_links(topology) == expected
    with pytest.raises(ToolError) as several:
        _find_link(links, nodes, "R1", "R2", None)
    assert str(several.value) == (
        "R1 and R2 share several links (R1 e0 <-> R2 e0; R1 a1/p0 <-> R2 e1; R1 a7/p0 <-> R2 e2); say which with port_a"
    )
    # A port is found by the name the text shows it with, by its own names, or by GNS3's label.
    assert _find_link(links, nodes, "R1", "R2", "a1/p0")["link_id"] == "l2"
    assert _find_link(links, nodes, "R1", "R2", "A7/P0")["link_id"] == "l3"
    assert _find_link(links, nodes, "R1", "R2", "Ethernet0")["link_id"] == "l1"
    links[0]["nodes"][0]["label"] = {"text": "uplink"}
    assert _find_link(links, nodes, "R1", "R2", "uplink")["link_id"] == "l1"
