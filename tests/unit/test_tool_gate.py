"""The one tool gate: flags, approval bound to exactly what runs, the error policy, callbacks, interrupts.

The graph, MCP and a fault's revert all run tools through it (their own tests show each
path end to end); here the gate alone, with plain LangChain tools.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import ToolException, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, interrupt

from gns3server.agent.gns3_copilot.agent.context_manager import create_pre_model_hook
from gns3server.agent.gns3_copilot.agent.gns3_copilot import AgentSettings, build_copilot_graph
from gns3server.agent.gns3_copilot.mcp.approvals import Approvals
from gns3server.agent.gns3_copilot.tools.approval import APPROVAL_KEY, ApprovalGrant, approval_digest
from gns3server.agent.gns3_copilot.tools.errors import TOOL_ERRORS, ToolError
from gns3server.agent.gns3_copilot.tools.gate import NOT_APPROVED, ToolGate, ToolOutcome
from tests.support.scripted_model import ScriptedChatModel

SEEN: list[Any] = []


@tool
async def push(device: str, commands: list[str], config: RunnableConfig) -> str:
    """Send configuration commands to a device."""
    SEEN.append((device, commands, (config.get("configurable") or {}).get(APPROVAL_KEY)))
    return f"{len(commands)} applied on {device}"


push.metadata = {"needs_confirmation": True}


@tool
def look(device: str) -> str:
    """Read a device."""
    return f"{device} looks fine"


look.metadata = {"read_only": True}


@tool
def shut(device: str) -> dict[str, Any]:
    """Shut a device's interface (half done, it says how to undo it)."""
    raise ToolError("the link went down half way", outcome={"undo": {"tool": "unshut", "args": {"device": device}}})


def call(name: str, call_id: str = "c1", **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id}


GRANT = {"approval_id": "a1", "approved_by": "alice", "approved_at": 5.0}


async def test_a_change_runs_only_under_an_approval_of_exactly_it() -> None:
    SEEN.clear()
    gate = ToolGate([push, look], errors=TOOL_ERRORS)
    change = call("push", device="R1", commands=["hostname R1"])
    assert gate.gated([change, call("look", "c2", device="R1")]) == [change]

    unapproved = await gate.run(change)
    assert (unapproved.status, unapproved.output) == ("error", NOT_APPROVED) and SEEN == []
    other = call("push", device="R1", commands=["hostname R1", "reload"])
    assert gate.verify({**GRANT, "digest": gate.digest([other], session_id="s1")}, [change], session_id="s1") is None
    assert gate.verify({**GRANT, "digest": gate.digest([change], session_id="s2")}, [change], session_id="s1") is None
    assert gate.verify(GRANT, [change], session_id="s1") is None  # no digest at all

    approved = gate.verify({**GRANT, "digest": gate.digest([change], session_id="s1")}, [change], session_id="s1")
    assert approved is not None
    refused = await gate.run(other, approved=approved)  # an approval covers its own calls, not a look-alike
    assert refused.output == NOT_APPROVED and SEEN == []
    ran = await gate.run(change, {"configurable": {"thread_id": "s1"}}, approved=approved)
    assert (ran.status, ran.output) == ("success", "1 applied on R1")
    # The tool finds who approved what, and when (the console audit records it).
    assert SEEN == [("R1", ["hostname R1"], {**GRANT, "digest": approved.grant.digest})]


async def test_a_read_only_gate_runs_read_only_tools_only() -> None:
    gate = ToolGate([push, look], read_only=True, restriction="in teaching mode")
    assert [t.name for t in gate.allowed] == ["look"] and gate.gated([call("push", device="R1", commands=[])]) == []
    refused = await gate.run(call("push", device="R1", commands=["x"]))
    assert refused.output == "Error: tool 'push' is not allowed in teaching mode (read-only tools only)."
    unknown = await gate.run(call("erase"))
    assert unknown.output == "Error: unknown tool 'erase'. Available tools: look."
    assert (await gate.run(call("look", device="R1"))).output == "R1 looks fine"


async def test_failures_come_back_through_the_error_policy_and_callbacks_see_every_outcome() -> None:
    seen: list[ToolOutcome] = []

    async def record(outcome: ToolOutcome) -> None:
        seen.append(outcome)

    gate = ToolGate([look, shut], errors=TOOL_ERRORS, after=[record])
    failed = await gate.run(call("shut", device="R1"))
    assert failed.status == "error" and isinstance(failed.error, ToolError)
    assert failed.output == f"Error: {failed.reason}" and failed.reason.startswith("the link went down half way")
    assert failed.undo == {"tool": "unshut", "args": {"device": "R1"}}
    invalid = await gate.run(call("look"))  # the tool's own schema refuses it
    assert invalid.output.startswith("Error: invalid arguments for look: device") and gate.invalid_arguments(call("look"))
    rejected = await gate.refuse(call("shut", "c3", device="R2"), "Rejected.", status="rejected")
    assert [(o.name, o.status) for o in seen] == [("shut", "error"), ("look", "error"), ("shut", "rejected")]
    assert seen[-1] is rejected


async def test_a_before_callback_refuses_a_call_with_its_reason() -> None:
    async def no_r2(tool_call: Any) -> None:
        if tool_call["args"].get("device") == "R2":
            raise ToolException("R2 is being graded; nothing was sent")

    gate = ToolGate([look], before=[no_r2])
    assert (await gate.run(call("look", device="R1"))).status == "success"
    refused = await gate.run(call("look", device="R2"))
    assert (refused.status, refused.output) == ("error", "Error: R2 is being graded; nothing was sent")


def test_one_digest_format_whoever_asks() -> None:
    calls = [call("push", device="R1", commands=["hostname R1"])]
    # The agent's digest is the one stored with a paused session by earlier releases: it still matches.
    stored = json.dumps({"session_id": "s1", "calls": calls}, sort_keys=True, separators=(",", ":"),
                        ensure_ascii=False, default=str)
    assert approval_digest(calls, session_id="s1") == "sha256:" + hashlib.sha256(stored.encode()).hexdigest()
    # MCP's approvals are bound in the same format, to the project (an MCP call has no call id).
    asked = Approvals().request(user_id="u1", credential_id="k1", via="mcp:token", tool="push", project_id="p1",
                                arguments=calls[0]["args"])
    assert asked.digest == approval_digest([{**calls[0], "id": ""}], project_id="p1")
    assert asked.digest.startswith("sha256:") and asked.digest != approval_digest(calls, project_id="p2")
    assert ApprovalGrant.from_mapping({"digest": asked.digest}) == ApprovalGrant("", asked.digest, "", 0.0)


async def test_an_interrupt_raised_inside_a_tool_pauses_the_run_instead_of_failing_the_call() -> None:
    @tool
    def ask_first(device: str) -> str:
        """Ask the user which interface, then read it."""
        answer = interrupt({"question": f"which interface of {device}?"})
        return f"{device} {answer} is up"

    model = ScriptedChatModel()
    hook = create_pre_model_hook("System.", lambda s: None, lambda: {"context_limit": 16}, lambda: [ask_first])

    async def no_topology(project_id: str) -> None:
        return None

    settings = AgentSettings(tools=[ask_first], mode="lab_automation", bind_tools=model.bind_tools,
                             pre_model_hook=hook, load_topology=no_topology, is_context_length_error=lambda e: False)
    graph = build_copilot_graph(settings, InMemorySaver())
    config = {"configurable": {"thread_id": "t1", "project_id": "p1"}}
    model.enqueue(AIMessage("", tool_calls=[call("ask_first", device="R1")]))
    updates = [u async for u in graph.astream({"messages": [HumanMessage("go")], "llm_calls": 0}, config,
                                              stream_mode="updates")]
    assert [u["__interrupt__"][0].value for u in updates if "__interrupt__" in u] == [
        {"question": "which interface of R1?"}]
    model.enqueue("R1's e0 is up.")
    _ = [u async for u in graph.astream(Command(resume="e0"), config, stream_mode="updates")]
    answered = (await graph.aget_state(config)).values["messages"][2]
    assert (answered.content, answered.status) == ("R1 e0 is up", "success")
