"""Approvals bound to what runs: one id, one digest of the exact calls, one use, an expiry.

The service runs on real SQLite storage with a scripted model (as in test_service);
the graph-level tests resume the agent directly with decisions a client could not
make through the service (a foreign digest), to show the agent itself refuses them.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from gns3server.agent.gns3_copilot.agent.assembly import AgentAssembly
from gns3server.agent.gns3_copilot.agent.context_manager import create_pre_model_hook
from gns3server.agent.gns3_copilot.agent.gns3_copilot import AgentSettings, build_copilot_graph
from gns3server.agent.gns3_copilot.service.copilot import CopilotService
from gns3server.agent.gns3_copilot.service.errors import (
    ApprovalExpiredError,
    ApprovalNotPendingError,
    ConfirmationPendingError,
    NoPendingConfirmationError,
)
from gns3server.agent.gns3_copilot.tools.approval import APPROVAL_KEY, PendingApproval
from gns3server.agent.gns3_copilot.tools.approval import approval_digest as digest_within
from gns3server.agent.gns3_copilot.tools.gate import NOT_APPROVED as MISMATCHED_RESULT
from tests.support.scripted_model import ScriptedChatModel
from tests.support.streams import collect
from tests.unit.test_service import ALICE, LLM, FakeClient, fake_topology

SENT: list[tuple[str, tuple[str, ...], Any]] = []


def approval_digest(session_id: str, calls: list[dict[str, Any]]) -> str:
    """The digest the agent binds an approval of ``calls`` in a session to."""
    return digest_within(calls, session_id=session_id)


@tool
async def push_config(device: str, commands: list[str], config: RunnableConfig, driver: str | None = None) -> str:
    """Send configuration commands to a device."""
    SENT.append((device, tuple(commands), (config.get("configurable") or {}).get(APPROVAL_KEY)))
    return f"{len(commands)} command(s) applied on {device}"


push_config.metadata = {"needs_confirmation": True}


def push(call_id: str, *commands: str, device: str = "R1") -> dict[str, Any]:
    return {"name": "push_config", "args": {"device": device, "commands": list(commands)}, "id": call_id}


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def model():
    SENT.clear()
    return ScriptedChatModel()


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def service(storage, model, clock) -> CopilotService:
    agent = AgentAssembly(
        tools_factory=lambda context: [push_config],
        bind_tools=lambda tools, config: model.bind_tools(tools),
        is_context_length_error=lambda exc: False,
        client_factory=FakeClient,
        load_topology=fake_topology,
    )
    return CopilotService(storage, agent, approval_seconds=120.0, clock=clock)


async def pause(service, model, *calls) -> tuple[str, dict[str, Any]]:
    model.enqueue(AIMessage("Changing R1.", tool_calls=list(calls)))
    record, stream = await service.chat(ALICE, "p1", "change R1", llm_config=LLM)
    seen = await collect(stream)
    assert seen[-1]["status"] == "waiting_confirmation", seen
    return record.session_id, seen[-2]


def test_the_digest_binds_session_device_driver_and_the_exact_commands():
    base = approval_digest("s1", [push("c1", "ip 10.0.0.1/24")])
    assert base.startswith("sha256:") and base == approval_digest("s1", [push("c1", "ip 10.0.0.1/24")])
    variants = [
        approval_digest("s2", [push("c1", "ip 10.0.0.1/24")]),
        approval_digest("s1", [push("c1", "ip 10.0.0.2/24")]),
        approval_digest("s1", [push("c1", "ip 10.0.0.1/24", "save")]),
        approval_digest("s1", [push("c1", "ip 10.0.0.1/24", device="R2")]),
        approval_digest("s1", [push("c2", "ip 10.0.0.1/24")]),
        approval_digest("s1", [{**push("c1", "ip 10.0.0.1/24"), "args": {"device": "R1", "commands": ["ip 10.0.0.1/24"],
                                                                        "driver": "linux"}}]),
        approval_digest("s1", [push("c1", "ip 10.0.0.1/24"), push("c2", "save")]),
    ]
    assert base not in variants and len(set(variants)) == len(variants)


async def test_the_confirm_event_names_the_approval_and_its_digest(service, model, clock):
    session_id, confirm = await pause(service, model, push("c1", "hostname R1"))
    assert confirm["approval_id"] and confirm["expires_at"] == clock.now + 120
    assert confirm["digest"] == approval_digest(session_id, [push("c1", "hostname R1")])
    record = await service.session(ALICE, session_id)
    assert PendingApproval.from_stored(record.pending_value).public() == {
        k: confirm[k] for k in ("approval_id", "digest", "expires_at")}

    model.enqueue("Done.")
    clock.now += 30
    _, stream = await service.confirm(ALICE, session_id, True, llm_config=LLM, approval_id=confirm["approval_id"])
    assert (await collect(stream))[-1]["status"] == "completed"
    # The tool ran under the approval: who approved it, when, and the digest (the audit records these).
    assert SENT == [("R1", ("hostname R1",), {"approval_id": confirm["approval_id"], "digest": confirm["digest"],
                                              "approved_by": "alice", "approved_at": clock.now})]


async def test_an_approval_is_used_once(service, model):
    session_id, first = await pause(service, model, push("c1", "hostname R1"))
    # Approved; the model then asks for another change: a new approval, another id and digest.
    model.enqueue(AIMessage("And one more.", tool_calls=[push("c2", "no ip domain-lookup")]))
    _, stream = await service.confirm(ALICE, session_id, True, llm_config=LLM, approval_id=first["approval_id"])
    second = (await collect(stream))[-2]
    assert second["type"] == "confirm" and second["approval_id"] != first["approval_id"]
    assert second["digest"] != first["digest"] and len(SENT) == 1

    # The first approval, replayed, does not approve the second set of calls.
    with pytest.raises(ApprovalNotPendingError, match="not the one session"):
        await service.confirm(ALICE, session_id, True, llm_config=LLM, approval_id=first["approval_id"])
    assert len(SENT) == 1 and (await service.session(ALICE, session_id)).pending_calls[0]["tool_call_id"] == "c2"

    model.enqueue("Left as it is.")
    _, stream = await service.confirm(ALICE, session_id, False, llm_config=LLM, approval_id=second["approval_id"])
    assert (await collect(stream))[-1]["status"] == "completed" and len(SENT) == 1
    with pytest.raises(ApprovalNotPendingError, match="already used"):
        await service.confirm(ALICE, session_id, True, llm_config=LLM, approval_id=second["approval_id"])
    with pytest.raises(NoPendingConfirmationError):
        await service.confirm(ALICE, session_id, True, llm_config=LLM)


async def test_an_expired_approval_can_only_be_rejected(service, model, clock):
    session_id, confirm = await pause(service, model, push("c1", "hostname R1"))
    clock.now = confirm["expires_at"]
    with pytest.raises(ApprovalExpiredError, match="expired"):
        await service.confirm(ALICE, session_id, True, llm_config=LLM, approval_id=confirm["approval_id"])
    with pytest.raises(ConfirmationPendingError, match="expired"):
        await service.chat(ALICE, "p1", "hello?", session_id=session_id, llm_config=LLM)
    assert SENT == [] and (await service.session(ALICE, session_id)).pending is not None  # still there, to reject

    model.enqueue("Nothing was changed.")
    _, stream = await service.confirm(ALICE, session_id, False, llm_config=LLM)
    assert (await collect(stream))[-1]["status"] == "completed" and SENT == []
    assert (await service.session(ALICE, session_id)).pending is None


async def test_an_approval_stored_before_approvals_had_ids_can_only_be_rejected(service, model, storage):
    session_id, _ = await pause(service, model, push("c1", "hostname R1"))
    await storage.sessions.set_pending(session_id, [{"tool_call_id": "c1", "name": "push_config", "args": {}}])
    with pytest.raises(ApprovalExpiredError):
        await service.confirm(ALICE, session_id, True, llm_config=LLM)
    model.enqueue("OK.")
    _, stream = await service.confirm(ALICE, session_id, False, llm_config=LLM)
    assert (await collect(stream))[-1]["status"] == "completed" and SENT == []


# --------------------------------------------------------------- the agent itself


def make_graph(model):
    hook = create_pre_model_hook("System.", lambda s: None, lambda: {"context_limit": 16}, lambda: [push_config])

    async def no_topology(project_id: str) -> None:
        return None

    settings = AgentSettings(
        tools=[push_config], mode="lab_automation", bind_tools=lambda tools: model.bind_tools(tools),
        pre_model_hook=hook, load_topology=no_topology, is_context_length_error=lambda exc: False,
    )
    return build_copilot_graph(settings, InMemorySaver())


CONFIG = {"configurable": {"thread_id": "t1", "project_id": "p1"}}


async def paused_graph(model, *calls):
    graph = make_graph(model)
    model.enqueue(AIMessage("", tool_calls=list(calls)))
    interrupts = [u async for u in graph.astream({"messages": [HumanMessage("go")], "llm_calls": 0}, CONFIG,
                                                  stream_mode="updates") if "__interrupt__" in u]
    (payload,) = [i["__interrupt__"][0].value for i in interrupts]
    return graph, payload


async def test_the_agent_runs_nothing_under_an_approval_of_other_calls(model):
    graph, payload = await paused_graph(model, push("c1", "hostname R1"))
    assert payload["digest"] == approval_digest("t1", [push("c1", "hostname R1")])
    foreign = approval_digest("t1", [push("c1", "hostname R1", "reload")])  # what another request would carry
    model.enqueue("Not applied.")
    resume = Command(resume={"approved": True, "approval": {"approval_id": "a", "digest": foreign}})
    _ = [u async for u in graph.astream(resume, CONFIG, stream_mode="updates")]
    tool_message = (await graph.aget_state(CONFIG)).values["messages"][2]
    assert tool_message.content == MISMATCHED_RESULT and tool_message.status == "error" and SENT == []


async def test_the_pause_holds_only_the_digest_and_the_session_the_one_record_of_the_request(service, model, storage):
    session_id, confirm = await pause(service, model, push("c1", "hostname R1"))
    snapshot = await storage.checkpointer.aget_tuple({"configurable": {"thread_id": session_id}})
    paused = [value for _, channel, value in snapshot.pending_writes if channel == "__interrupt__"]
    assert [[i.value for i in interrupts] for interrupts in paused] == [[{"digest": confirm["digest"]}]]
    stored = PendingApproval.from_stored((await service.session(ALICE, session_id)).pending_value)
    assert stored.calls == confirm["calls"] and stored.public() == {k: confirm[k] for k in stored.public()}


async def test_the_agent_runs_nothing_on_an_approval_without_a_digest(model):
    graph, _ = await paused_graph(model, push("c1", "hostname R1"))
    model.enqueue("Not applied.")
    _ = [u async for u in graph.astream(Command(resume={"approved": True}), CONFIG, stream_mode="updates")]
    assert (await graph.aget_state(CONFIG)).values["messages"][2].content == MISMATCHED_RESULT and SENT == []
