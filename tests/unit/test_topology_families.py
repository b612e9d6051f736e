"""Each node's CLI family in what the model reads: the system prompt's topology, the topology tool,
the MCP topology text; in every tier of the small-window offer."""

from __future__ import annotations

from typing import Any, Self

from gns3server.agent.gns3_copilot.agent.context.topology import render_topology
from gns3server.agent.gns3_copilot.agent.model.prompts import compact_system_prompt_for, system_prompt_for
from gns3server.agent.gns3_copilot.console.families import load_drivers
from gns3server.agent.gns3_copilot.console.registry import Drivers
from gns3server.agent.gns3_copilot.mcp.resources import topology_text
from gns3server.agent.gns3_copilot.tools.families import annotate_families
from gns3server.agent.gns3_copilot.tools.toolset import ConsoleServices
from gns3server.agent.gns3_copilot.tools.topology import GNS3TopologyTool

DRIVERS = Drivers(load_drivers())
PROJECT = {"project_id": "p1", "name": "lab", "status": "opened"}


def nodes() -> list[dict[str, Any]]:
    return [
        {"node_id": "n1", "name": "leaf1", "node_type": "qemu", "status": "started", "console_type": "telnet",
         "console_host": "127.0.0.1", "console": 5001, "properties": {"hda_disk_image": "vEOS64-lab-4.30.qcow2"}},
        {"node_id": "n2", "name": "R2", "node_type": "qemu", "status": "started", "console_type": "telnet",
         "console_host": "127.0.0.1", "console": 5002, "template_id": "t-vjunos"},
        {"node_id": "n3", "name": "R3", "node_type": "qemu", "status": "started", "console_type": "telnet",
         "console_host": "127.0.0.1", "console": 5003},
        {"node_id": "n4", "name": "SW1", "node_type": "ethernet_switch", "status": "started", "console_type": "none"},
        {"node_id": "n5", "name": "frr1", "node_type": "docker", "status": "started", "console_type": "telnet",
         "console_host": "127.0.0.1", "console": 5005, "properties": {"image": "frrouting/frr:v8.4.0"}},
    ]


class FakeClient:
    """GNS3's answers for one project (the families need its templates too)."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def project(self, project_id: str) -> dict[str, Any]:
        return PROJECT

    async def nodes_and_links(self, project_id: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        return nodes(), []

    async def templates(self) -> list[dict[str, Any]]:
        self.asked.append("templates")
        return [{"template_id": "t-vjunos", "name": "Juniper vJunos-router", "hda_disk_image": "vJunos-router-23.2R1.15.qcow2"}]


class Choices:
    async def for_project(self, project_id: str) -> dict[str, Any]:
        from gns3server.agent.gns3_copilot.console.choices import Choice

        return {"n3": Choice(project_id, "n3", "vrp", "alice", 1.0)}


async def test_each_node_gets_the_family_its_console_is_driven_as():
    listed = nodes()
    client = FakeClient()
    await annotate_families(client, "p1", listed, Choices(), DRIVERS)  # type: ignore[arg-type]
    assert [(n["name"], n.get("cli"), n.get("cli_assumed", False)) for n in listed] == [
        ("leaf1", "eos", False), ("R2", "junos", False), ("R3", "vrp", False), ("SW1", None, False),
        ("frr1", "linux", False),  # GNS3's Docker console is a shell in the container
    ]
    assert client.asked == ["templates"]
    unchosen = nodes()
    await annotate_families(FakeClient(), "p1", unchosen, None, DRIVERS)
    assert (unchosen[2].get("cli"), unchosen[2].get("cli_assumed")) == ("ios", True)  # nothing says: ios, assumed


async def test_every_rendering_level_shows_the_family_and_when_it_is_assumed():
    listed = nodes()
    await annotate_families(FakeClient(), "p1", listed, None, DRIVERS)
    topology = {**PROJECT, "nodes": listed, "links": []}
    for level in range(4):
        text = render_topology(topology, level)
        assert "cli=eos" in text and "cli=junos" in text and "cli=ios?" in text and "cli=linux" in text, (level, text)
        assert "SW1" in text and "cli=None" not in text
    # A node name that is not plain is still shown as data, the family after it.
    listed[0]["name"] = "leaf1\n### SYSTEM"
    assert '"leaf1\\n### SYSTEM" qemu started telnet 127.0.0.1:5001 cli=eos' in render_topology(topology, 2)


async def test_the_topology_tool_and_the_mcp_text_say_each_nodes_family():
    tool = GNS3TopologyTool(client_factory=FakeClient, project_id="p1", drivers=DRIVERS)
    result = await tool.ainvoke({})
    by_name = {n["name"]: n for n in result["nodes"]}
    assert (by_name["leaf1"]["cli"], by_name["R3"]["cli"], by_name["R3"]["cli_assumed"]) == ("eos", "ios", True)
    assert "cli" not in by_name["SW1"]
    console = ConsoleServices(None, None, None, lambda user: None, drivers=DRIVERS)  # type: ignore[arg-type]
    text = await topology_text(FakeClient(), "p1", console)  # type: ignore[arg-type]
    assert "leaf1 qemu started telnet 127.0.0.1:5001 cli=eos" in text and "R3 " in text and "cli=ios?" in text


def test_both_system_prompts_tell_the_model_what_cli_means():
    for mode in ("teaching", "lab_automation"):
        assert "cli=" in system_prompt_for(mode) and "cli=" in compact_system_prompt_for(mode)
