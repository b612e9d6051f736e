"""The MCP face of the copilot's tools (no server): definitions, read-only sets, prompts, resource URIs."""

from __future__ import annotations

from typing import Any

import pytest

from gns3server.agent.gns3_copilot.console import AuditLog, DeviceLocks, load_policy
from gns3server.agent.gns3_copilot.mcp.approvals import Approvals
from gns3server.agent.gns3_copilot.mcp.auth import Caller
from gns3server.agent.gns3_copilot.mcp.keys import MCPKey
from gns3server.agent.gns3_copilot.mcp.prompts import get_prompt
from gns3server.agent.gns3_copilot.mcp.resources import ResourceError, project_of
from gns3server.agent.gns3_copilot.mcp.tools import ToolGateway
from gns3server.agent.gns3_copilot.tools.toolset import ConsoleServices

PROJECT = "0c2f6f4a-6f49-4a5e-9a43-2f6a1b2c3d4e"


def key(scope: str) -> MCPKey:
    return MCPKey("k1", "u1", "laptop", scope, "gns3c_mcp_abc", 0.0, None, None, None)  # type: ignore[arg-type]


async def no_projects(caller: Caller) -> list[Any]:
    raise AssertionError("no project list expected")


@pytest.fixture
async def gateway(tmp_path):
    audit = AuditLog(tmp_path)
    async def never(privilege: str, path: str) -> str:
        raise AssertionError("no permission check expected")

    console = ConsoleServices(policy=load_policy(), locks=DeviceLocks(), audit=audit, permissions=lambda user: never)
    yield ToolGateway(console, lambda token: pytest.fail("no GNS3 call expected"), Approvals(), projects=no_projects)
    await audit.close()


async def test_definitions_follow_the_tools_metadata(gateway):
    full = {t.name: t for t in await gateway.definitions(Caller("u1", "alice", False, key=key("full")))}
    read_only = {t.name for t in await gateway.definitions(Caller("u1", "alice", False, key=key("read_only")))}
    token = {t.name for t in await gateway.definitions(Caller("u1", "alice", False))}
    assert token == set(full) and read_only < set(full)
    assert read_only == {name for name, t in full.items() if t.annotations.readOnlyHint}
    assert {"gns3_config_commands", "gns3_node_action", "gns3_create_node", "gns3_create_link",
            "gns3_update_link"} == set(full) - read_only
    config = full["gns3_config_commands"].inputSchema
    assert {"device", "commands", "project_id", "approval_id"} <= set(config["properties"])
    assert "project_id" not in config["required"] and "device" in config["required"]
    topology = full["gns3_topology"].inputSchema
    assert "project_id" in topology["properties"] and "project_id" not in topology.get("required", [])
    assert "approval_id" not in full["gns3_show_commands"].inputSchema["properties"]


async def test_a_read_only_key_cannot_call_what_it_does_not_list(gateway):
    caller = Caller("u1", "alice", False, key=key("read_only"))
    result = await gateway.call(caller, object(), "gns3_config_commands", {"device": "R1", "commands": ["x"]})
    assert result.isError and "read-only" in result.content[0].text
    assert caller.audit_session == "mcp:key:laptop" and Caller("u1", "a", False).audit_session == "mcp:token"


def test_prompts_fill_in_and_name_a_missing_argument():
    text = get_prompt("troubleshoot_connectivity", {"project_id": PROJECT, "device_a": "R1", "device_b": "PC3"})
    assert "R1 cannot reach PC3" in text.messages[0].content.text
    with pytest.raises(ValueError, match="device_b: required"):
        get_prompt("troubleshoot_connectivity", {"project_id": PROJECT, "device_a": "R1", "device_b": " "})
    with pytest.raises(ValueError, match="Unknown prompt"):
        get_prompt("nope", {})


def test_resource_uris():
    assert project_of(f"gns3://projects/{PROJECT}/topology") == PROJECT
    for bad in ("gns3://projects/x/topology", f"gns3://projects/{PROJECT}/nodes", "file:///etc/passwd"):
        with pytest.raises(ResourceError, match="Unknown resource"):
            project_of(bad)
