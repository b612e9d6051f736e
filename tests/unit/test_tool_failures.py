"""One convention for tools that act on several items: each item's outcome is data while one
succeeded; a call where every item failed raises, so that the model and the panel see "error".

Node actions against a fake GNS3 client, console batches against a fake IOS console and a
closed port (refused at once: no timeout involved), and the graph with the service's policy.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Self

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from gns3server.agent.gns3_copilot.agent.context_manager import create_pre_model_hook
from gns3server.agent.gns3_copilot.agent.gns3_copilot import AgentSettings, build_copilot_graph
from gns3server.agent.gns3_copilot.console import AuditLog, DeviceLocks, load_policy
from gns3server.agent.gns3_copilot.gns3_client.exceptions import GNS3ConflictError, GNS3PermissionError
from gns3server.agent.gns3_copilot.tools.console import ConfigCommandsTool, ShowCommandsTool
from gns3server.agent.gns3_copilot.tools.errors import ToolError, failure_outcome, model_message
from gns3server.agent.gns3_copilot.tools.gate import ToolErrorPolicy
from gns3server.agent.gns3_copilot.tools.nodes import NodeActionTool
from gns3server.agent.gns3_copilot.tools.permissions import PermissionRefused
from tests.support.scripted_model import ScriptedChatModel

from .console_fakes import FakeIOS

PID = "5a1c3f0e-8d2b-4c6a-9e7f-0123456789ab"
CONFIG = {"configurable": {"thread_id": "t1", "project_id": PID}}


class FakeGNS3:
    """What the node and console tools need of GNS3Client; ``refuse`` maps node names to GNS3's answer."""

    def __init__(self, nodes: list[dict[str, Any]], refuse: dict[str, Exception] | None = None) -> None:
        self._nodes = nodes
        self._refuse = refuse or {}
        self.acted: list[tuple[str, str]] = []

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def nodes(self, project_id: str) -> list[dict[str, Any]]:
        return self._nodes

    async def node_action(self, project_id: str, action: str, node_id: str | None = None) -> None:
        name = next(n["name"] for n in self._nodes if n["node_id"] == node_id)
        if name in self._refuse:
            raise self._refuse[name]
        self.acted.append((action, name))


def _node(name: str, port: int = 0) -> dict[str, Any]:
    return {"node_id": f"id-{name}", "name": name, "node_type": "dynamips", "status": "started",
            "console_type": "telnet", "console_host": "127.0.0.1", "console": port}


def _no_qemu() -> GNS3ConflictError:
    return GNS3ConflictError("qemu-system-x86_64 is not installed", status=409, method="POST", url="/v3/x")


def _denied() -> GNS3PermissionError:
    return GNS3PermissionError("Permission denied", status=403, method="POST", url="/v3/x")


def _node_tool(client: FakeGNS3) -> NodeActionTool:
    return NodeActionTool(client_factory=lambda: client, project_id=PID)


async def test_node_actions_report_each_node_while_one_succeeds() -> None:
    client = FakeGNS3([_node("R1"), _node("R2")], {"R2": _no_qemu()})
    result = await _node_tool(client).ainvoke({"action": "start", "nodes": ["R1", "R2"]})
    assert result == {"action": "start", "failed": 1, "results": [
        {"node": "R1", "status": "ok"},
        {"node": "R2", "status": "error", "error": "qemu-system-x86_64 is not installed"}]}
    assert client.acted == [("start", "R1")]


async def test_node_actions_failing_on_every_node_fail_as_a_whole() -> None:
    client = FakeGNS3([_node("R1"), _node("R2")], {"R1": _no_qemu(), "R2": _denied()})
    with pytest.raises(ToolError) as failed:
        await _node_tool(client).ainvoke({"action": "start", "nodes": ["R1", "R2"]})
    assert not isinstance(failed.value, PermissionRefused)  # not only refusals: the call failed
    assert str(failed.value).startswith("start R1, R2: every one failed\n- R1: qemu-system-x86_64 is not installed\n- R2: ")
    outcome = failure_outcome(failed.value)  # every node's result still travels with the error
    assert outcome is not None and outcome["failed"] == 2 and [r["node"] for r in outcome["results"]] == ["R1", "R2"]
    # Refused on every node is a refusal, as before.
    with pytest.raises(PermissionRefused):
        await _node_tool(FakeGNS3([_node("R1")], {"R1": _denied()})).ainvoke({"action": "stop", "nodes": ["R1"]})


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A port bound and never listening: a console there refuses the connection at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


@pytest.fixture
async def ios() -> Any:
    device = await FakeIOS().start()
    yield device
    await device.stop()


async def _allow(privilege: str, path: str) -> str:
    return "allowed"


def _console_tools(nodes: list[dict[str, Any]], tmp_path: Path, **extra: Any) -> tuple[ShowCommandsTool, ConfigCommandsTool]:
    common: dict[str, Any] = {
        "client_factory": lambda: FakeGNS3(nodes), "project_id": PID, "policy": load_policy(), "locks": DeviceLocks(),
        "audit": AuditLog(tmp_path), "authorize": _allow, "user": "alice", "session_id": "s1", "timeout": 60,
    }
    return ShowCommandsTool(**common), ConfigCommandsTool(**common, **extra)


async def test_show_commands_fail_as_a_whole_only_when_every_device_failed(ios, closed_port, tmp_path) -> None:
    show, _ = _console_tools([_node("R1", ios.port), _node("R2", closed_port), _node("R3", closed_port)], tmp_path)
    mixed = await show.ainvoke({"devices": ["R1", "R2"], "commands": ["show version"]}, CONFIG)
    assert [d["status"] for d in mixed["devices"]] == ["error", "failed"]  # R1 answered (an error line): data
    with pytest.raises(ToolError) as unreachable:
        await show.ainvoke({"devices": ["R2", "R3"], "commands": ["show version"]}, CONFIG)
    assert str(unreachable.value).startswith("the commands on R2, R3: every one failed\n- R2: ")
    outcome = failure_outcome(unreachable.value)
    assert outcome is not None and [d["status"] for d in outcome["devices"]] == ["failed", "failed"]
    with pytest.raises(ToolError) as blocked:
        await show.ainvoke({"devices": ["R1"], "commands": ["configure terminal"]}, CONFIG)
    outcome = failure_outcome(blocked.value)
    assert outcome is not None and outcome["devices"][0]["results"][0]["status"] == "blocked"
    said = model_message(blocked.value)  # the model reads why, then what each command's fate was
    assert said is not None and "blocked by the console policy" in said and '"status": "blocked"' in said
    assert ios.received.count("configure terminal") == 0  # nothing was sent


async def test_a_config_batch_that_failed_is_an_error_with_what_it_did(ios, closed_port, tmp_path) -> None:
    _, config = _console_tools([_node("R1", ios.port), _node("R2", closed_port)], tmp_path, record_undo=True)
    with pytest.raises(ToolError) as unreachable:
        await config.ainvoke({"device": "R2", "commands": ["hostname R9"]}, CONFIG)
    assert str(unreachable.value).startswith("the configuration of R2 failed: ")
    outcome = failure_outcome(unreachable.value)
    assert outcome is not None and outcome["status"] == "failed" and "undo_unknown" in outcome
    with pytest.raises(ToolError) as blocked:
        await config.ainvoke({"device": "R1", "commands": ["reload"]}, CONFIG)
    outcome = failure_outcome(blocked.value)
    assert outcome is not None and outcome["undo_unknown"] == "nothing was changed"
    done = await config.ainvoke({"device": "R1", "commands": ["hostname R7"]}, CONFIG)
    assert done["status"] == "ok" and ios.hostname == "R7"


async def test_the_model_and_the_panel_see_a_call_that_failed_on_every_node_as_an_error() -> None:
    """Through the graph with the service's policy: status error, the reasons in the text."""
    client = FakeGNS3([_node("R1"), _node("R2"), _node("R3")], {"R1": _no_qemu(), "R2": _no_qemu()})
    tool = _node_tool(client)
    model = ScriptedChatModel()
    model.enqueue(AIMessage("", tool_calls=[
        {"name": tool.name, "args": {"action": "start", "nodes": ["R1", "R2"]}, "id": "all", "type": "tool_call"},
        {"name": tool.name, "args": {"action": "start", "nodes": ["R1", "R3"]}, "id": "mixed", "type": "tool_call"},
    ]), "Only R3 started.")

    async def no_topology(project_id: str) -> None:
        return None

    hook = create_pre_model_hook("S {{topology_info}}", lambda s: None, lambda: {"context_limit": 16}, lambda: [tool])
    settings = AgentSettings(
        tools=[tool], mode="lab_automation", bind_tools=lambda tools: model.bind_tools(tools), pre_model_hook=hook,
        load_topology=no_topology, is_context_length_error=lambda exc: False,
        tool_errors=ToolErrorPolicy(message=model_message, outcome=failure_outcome),
    )
    graph = build_copilot_graph(settings, InMemorySaver())
    seen = [e async for e in graph.astream({"messages": [("user", "start them")], "llm_calls": 0}, CONFIG,
                                           stream_mode="custom")]
    answers = {m.tool_call_id: m for m in (await graph.aget_state(CONFIG)).values["messages"]
               if isinstance(m, ToolMessage)}
    ends = {e["tool_call_id"]: e["status"] for e in seen if e["type"] == "tool_end"}
    assert ends == {"all": "error", "mixed": "success"}
    assert (answers["all"].status, answers["mixed"].status) == ("error", "success")
    assert answers["all"].content.startswith("Error: start R1, R2: every one failed\n- R1: qemu-system-x86_64")
