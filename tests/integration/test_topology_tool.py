"""GNS3TopologyTool against a real gns3-server: results, and errors as results."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from gns3_process import GNS3ServerProcess
from langchain_core.messages import ToolMessage

from gns3server.agent.gns3_copilot.gns3_client import GNS3APIError, GNS3Client, fetch_topology
from gns3server.agent.gns3_copilot.tools import GNS3TopologyTool
from gns3server.agent.gns3_copilot.tools.errors import ToolError
from tests.support.gns3_admin import OwnSessionClient

pytestmark = pytest.mark.integration


def _tool(base_url: str, token: str) -> GNS3TopologyTool:
    return GNS3TopologyTool(client_factory=lambda: OwnSessionClient(base_url, token=token, timeout=10))


async def test_tool_returns_the_structured_topology(
    gns3_server: GNS3ServerProcess, gns3_client: GNS3Client, small_lab: dict[str, Any]
) -> None:
    pid = small_lab["project_id"]
    tool = _tool(gns3_server.base_url, await gns3_server.token())
    result = await tool.ainvoke({"project_id": pid})
    assert result == (await fetch_topology(gns3_client, pid)).to_dict()
    assert json.loads(json.dumps(result)) == result
    assert result["name"] == small_lab["name"] and len(result["nodes"]) == 4
    assert "PC1 e0 <-> R1 e0" in {link["text"] for link in result["links"]}
    assert result["unresolved_links"] == []

    # As the agent's tools node calls it: a ToolMessage answering the call.
    message = await tool.ainvoke(
        {"type": "tool_call", "id": "call-1", "name": tool.name, "args": {"project_id": pid}})
    assert isinstance(message, ToolMessage) and message.tool_call_id == "call-1"
    assert json.loads(message.content)["project_id"] == pid  # type: ignore[arg-type]


async def test_sync_run_is_for_scripts(gns3_server: GNS3ServerProcess, small_lab: dict[str, Any]) -> None:
    pid = small_lab["project_id"]
    tool = _tool(gns3_server.base_url, await gns3_server.token())
    from_thread = await asyncio.to_thread(tool._run, project_id=pid)  # a script: no loop running
    assert from_thread == await tool.ainvoke({"project_id": pid})
    with pytest.raises(ToolError, match="ainvoke"):
        tool._run(project_id=pid)


@pytest.mark.parametrize(
    ("case", "status", "error_type", "said"),
    [
        ("unknown project", 404, "GNS3NotFoundError", "404"),
        # A refused login is said plainly (docs/console.md, Permissions).
        ("invalid token", 401, "GNS3AuthenticationError", "GNS3 no longer accepts your login"),
    ],
)
async def test_tool_reports_api_errors(
    gns3_server: GNS3ServerProcess, gns3_project: dict[str, Any], case: str, status: int, error_type: str, said: str
) -> None:
    token = "invalid" if case == "invalid token" else await gns3_server.token()
    pid = "00000000-0000-4000-8000-000000000000" if case == "unknown project" else gns3_project["project_id"]
    with pytest.raises(ToolError) as caught:
        await _tool(gns3_server.base_url, token).ainvoke({"project_id": pid})
    cause = caught.value.__cause__
    assert isinstance(cause, GNS3APIError) and cause.status == status and type(cause).__name__ == error_type
    assert said in str(caught.value)

