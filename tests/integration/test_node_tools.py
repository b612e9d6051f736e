"""The lab-changing tools, called directly against a real gns3-server."""

from __future__ import annotations

import pydantic
import pytest

from gns3server.agent.gns3_copilot.agent.policies.modes import tools_for_mode
from gns3server.agent.gns3_copilot.gns3_client import (
    GNS3ConflictError,
    GNS3NotFoundError,
)
from gns3server.agent.gns3_copilot.tools.errors import ToolError
from gns3server.agent.gns3_copilot.tools.toolset import RunContext, build_tools
from tests.support.gns3_admin import OwnSessionClient

pytestmark = pytest.mark.integration


@pytest.fixture
async def tools(gns3_server, gns3_project):
    token = await gns3_server.token()
    context = RunContext(lambda: OwnSessionClient(gns3_server.base_url, token=token), gns3_project["project_id"], "admin", "s")
    built = build_tools(context)
    return {t.name: t for t in built}


async def test_teaching_mode_keeps_only_read_only_tools(tools):
    assert {t.name for t in tools_for_mode(list(tools.values()), "teaching")} == {"gns3_topology", "gns3_list_templates"}


async def test_list_templates_with_and_without_category(tools):
    everything = await tools["gns3_list_templates"].ainvoke({})
    assert {"name": "VPCS", "type": "vpcs", "category": "guest"} in everything
    guests = await tools["gns3_list_templates"].ainvoke({"category": "guest"})
    assert guests and all(t["category"] == "guest" for t in guests) and len(guests) < len(everything)


async def test_create_nodes_link_and_act_on_them(tools, gns3_client, gns3_project):
    project_id = gns3_project["project_id"]
    a = await tools["gns3_create_node"].ainvoke({"template": "vpcs", "name": "A"})
    b = await tools["gns3_create_node"].ainvoke({"template": "VPCS", "name": "B", "x": 50, "y": -20})
    assert (a["name"], a["node_type"], a["ports"]) == ("A", "vpcs", ["e0"]) and b["name"] == "B"
    link = await tools["gns3_create_link"].ainvoke({"node_a": "A", "port_a": "e0", "node_b": "B", "port_b": "Ethernet0"})
    assert link["link"] == "A e0 <-> B Ethernet0"
    assert len(await gns3_client.links(project_id)) == 1

    # VPCS cannot start here (no uBridge): the call failed on every node, GNS3's reason given per node.
    with pytest.raises(ToolError) as not_started:
        await tools["gns3_node_action"].ainvoke({"action": "start", "nodes": ["A", "b"]})
    lines = str(not_started.value).split("\n")
    assert lines[0] == "start A, B: every one failed" and [line[:5] for line in lines[1:]] == ["- A: ", "- B: "]
    assert all(len(line) > 5 for line in lines[1:])
    for action in ("stop", "suspend"):
        result = await tools["gns3_node_action"].ainvoke({"action": action, "nodes": ["A"]})
        assert result == {"action": action, "results": [{"node": "A", "status": "ok"}], "failed": 0}
    with pytest.raises(ToolError, match="reload A: every one failed\n- A: VPCS"):  # it starts VPCS again
        await tools["gns3_node_action"].ainvoke({"action": "reload", "nodes": ["A"]})
    stopped = await tools["gns3_node_action"].ainvoke({"action": "stop", "nodes": ["all"]})
    assert stopped == {"action": "stop", "nodes": "all", "status": "ok"}
    assert {n["status"] for n in await gns3_client.nodes(project_id)} == {"stopped"}


async def test_names_that_do_not_exist_are_explained(tools):
    with pytest.raises(ToolError, match=r"no node named 'ghost' \(available: none\)"):
        await tools["gns3_node_action"].ainvoke({"action": "start", "nodes": ["ghost"]})
    with pytest.raises(ToolError, match="no template named 'Cisco 9000'.*VPCS"):
        await tools["gns3_create_node"].ainvoke({"template": "Cisco 9000"})
    await tools["gns3_create_node"].ainvoke({"template": "VPCS", "name": "C"})
    # GNS3's errors are the tool's to translate: a ToolError quoting them, the original as its cause.
    with pytest.raises(ToolError, match="no port 'e7'") as caught:
        await tools["gns3_create_link"].ainvoke({"node_a": "C", "port_a": "e7", "node_b": "C", "port_b": "e0"})
    assert isinstance(caught.value.__cause__, GNS3NotFoundError)


async def test_a_port_in_use_is_a_gns3_conflict(tools):
    for name in ("D", "E", "F"):
        await tools["gns3_create_node"].ainvoke({"template": "VPCS", "name": name})
    await tools["gns3_create_link"].ainvoke({"node_a": "D", "port_a": "e0", "node_b": "E", "port_b": "e0"})
    with pytest.raises(ToolError, match="409") as caught:
        await tools["gns3_create_link"].ainvoke({"node_a": "D", "port_a": "e0", "node_b": "F", "port_b": "e0"})
    assert isinstance(caught.value.__cause__, GNS3ConflictError)


async def test_bad_arguments_are_rejected_before_any_request(tools):
    with pytest.raises(pydantic.ValidationError, match="action"):
        await tools["gns3_node_action"].ainvoke({"action": "explode", "nodes": ["A"]})
    with pytest.raises(pydantic.ValidationError, match="nodes"):
        await tools["gns3_node_action"].ainvoke({"action": "start", "nodes": []})
