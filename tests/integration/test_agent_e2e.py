"""End to end: the copilot service against a real gns3-server and a real OpenAI client.

Everything is real except the LLM, which is the OpenAI-compatible stub on
loopback: the provider client (ChatOpenAI via the model factory) streams from
it, parses tool calls and maps its faults; tools act on the GNS3 server through
its REST API with the user's JWT; conversations persist in SQLite.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from gns3server.agent.gns3_copilot.agent.context.counting import TokenCounter
from gns3server.agent.gns3_copilot.api.history import session_history
from gns3server.agent.gns3_copilot.service.copilot import CopilotService, User
from gns3server.agent.gns3_copilot.service.errors import SessionBusyError
from gns3server.agent.gns3_copilot.service.storage import open_sqlite_storage
from tests.support.copilot_service import copilot_service, running_copilot
from tests.support.openai_stub import (
    OpenAIStub,
    context_length_exceeded,
    hang,
    rate_limited,
    reply,
    server_error,
    tool_call,
)
from tests.support.streams import collect, text_of

pytestmark = pytest.mark.integration


@pytest.fixture
async def stub():
    async with OpenAIStub(api_key="sk-e2e-secret") as server:
        yield server


@pytest.fixture
async def admin(gns3_server) -> User:
    return User("admin-id", "admin", await gns3_server.token(), is_superadmin=True)


@pytest.fixture
async def copilot(tmp_path, gns3_server):
    async with running_copilot(tmp_path / "copilot", gns3_server.base_url) as service:
        yield service


def llm(stub: OpenAIStub, **extra: Any) -> dict[str, Any]:
    return {
        "provider": "openai",
        "model": "stub-model",
        "base_url": stub.base_url,
        "api_key": "sk-e2e-secret",
        "context_limit": 16,
        "max_retries": 0,
        "timeout": 20,  # generous for a busy machine; only a test wanting a timeout sets a short one
        **extra,
    }


async def test_multi_turn_conversation_with_real_tools(copilot, stub, admin, gns3_client, gns3_project):
    project_id = gns3_project["project_id"]
    await gns3_client.create_node(project_id, name="PC1", node_type="vpcs")

    # Turn 1: the model reads the topology, then answers.
    stub.enqueue(reply(tool_calls=[tool_call("gns3_topology", {"project_id": project_id})]), "You have one PC, PC1.")
    record, stream = await copilot.chat(admin, project_id, "What is in my lab?", llm_config=llm(stub))
    seen = await collect(stream)
    assert seen[-1]["status"] == "completed"
    topology_end = next(e for e in seen if e["type"] == "tool_end")
    assert topology_end["status"] == "success" and '"PC1"' in topology_end["output"]
    first = stub.requests[0]
    assert first["stream"] is True and {t["function"]["name"] for t in first["tools"]} >= {"gns3_topology", "gns3_create_link"}
    assert "PC1 vpcs" in first["messages"][0]["content"]  # live topology in the system prompt
    assert stub.requests[1]["messages"][-1]["role"] == "tool"
    assert text_of(seen) == "You have one PC, PC1."

    # Turn 2: two parallel node creations from a template, then a link, then a start that GNS3 refuses.
    stub.enqueue(
        reply(tool_calls=[
            tool_call("gns3_create_node", {"template": "VPCS", "name": "PC8"}),
            tool_call("gns3_create_node", {"template": "vpcs", "name": "PC9", "x": 100}),
        ]),
        reply(tool_calls=[tool_call("gns3_create_link", {"node_a": "PC8", "port_a": "e0", "node_b": "PC9", "port_b": "Ethernet0"})]),
        reply(tool_calls=[tool_call("gns3_node_action", {"action": "start", "nodes": ["PC8"]})]),
        "PC8 and PC9 are linked, but PC8 could not start.",
    )
    _, stream = await copilot.chat(admin, project_id, "Add PC8 and PC9, link them and start PC8",
                                   session_id=record.session_id, llm_config=llm(stub))
    seen = await collect(stream)
    assert seen[-1]["status"] == "completed"
    calls = [e for e in seen if e["type"] == "tool_call"]
    assert [c["name"] for c in calls[:2]] == ["gns3_create_node"] * 2 and calls[0]["tool_call_id"] != calls[1]["tool_call_id"]
    nodes, links = await gns3_client.nodes_and_links(project_id)
    assert {n["name"] for n in nodes} == {"PC1", "PC8", "PC9"}
    by_id = {n["node_id"]: n["name"] for n in nodes}
    assert [{by_id[e["node_id"]] for e in link["nodes"]} for link in links] == [{"PC8", "PC9"}]
    # Its only node did not start: the call failed, GNS3's reason said to the model and the panel.
    start = next(e for e in seen if e["type"] == "tool_end" and e["name"] == "gns3_node_action")
    assert start["status"] == "error" and start["output"].startswith("Error: start PC8: every one failed\n- PC8: ")
    start_result = stub.requests[-1]["messages"][-1]
    assert start_result["role"] == "tool" and start_result["content"] == start["output"]

    history = await session_history(copilot, admin, record.session_id)
    assert [m["role"] for m in history].count("user") == 2
    assert history[-1] == {**history[-1], "role": "assistant", "content": "PC8 and PC9 are linked, but PC8 could not start."}


async def test_conversation_survives_restart(tmp_path, gns3_server, stub, admin, gns3_project):
    project_id = gns3_project["project_id"]
    storage = await open_sqlite_storage(tmp_path / "restart")
    service = copilot_service(storage, gns3_server.base_url)
    stub.enqueue("Noted: R1 is the core router.")
    record, stream = await service.chat(admin, project_id, "R1 is my core router", llm_config=llm(stub))
    await collect(stream)
    await service.close()
    await service.agent.aclose()
    await storage.close()

    storage = await open_sqlite_storage(tmp_path / "restart")
    service = copilot_service(storage, gns3_server.base_url)
    try:
        stub.enqueue("R1.")
        _, stream = await service.chat(admin, project_id, "Which is my core router?",
                                       session_id=record.session_id, llm_config=llm(stub))
        assert (await collect(stream))[-1]["status"] == "completed"
        sent = [(m["role"], m["content"]) for m in stub.requests[-1]["messages"][1:]]
        assert sent == [("user", "R1 is my core router"), ("assistant", "Noted: R1 is the core router."),
                        ("user", "Which is my core router?")]
    finally:
        await service.close()
        await service.agent.aclose()
        await storage.close()


async def test_abort_mid_stream_and_busy(copilot, stub, admin, gns3_project):
    project_id = gns3_project["project_id"]
    stub.enqueue(reply("Let me explain OSPF areas in detail...", hold_after=3))
    record, stream = await copilot.chat(admin, project_id, "Explain OSPF", llm_config=llm(stub))
    seen: list[dict[str, Any]] = []
    async for event in stream:
        seen.append(event)
        if event["type"] == "content" and [e["type"] for e in seen].count("content") == 1:
            with pytest.raises(SessionBusyError):
                await copilot.chat(admin, project_id, "again", session_id=record.session_id, llm_config=llm(stub))
            await copilot.abort(admin, record.session_id)
    assert [e["type"] for e in seen][-2:] == ["abort", "done"]
    partial = text_of(seen)
    assert partial and "Let me explain OSPF areas in detail...".startswith(partial)
    stub.release()
    stub.enqueue("Short version: areas limit LSA flooding.")
    _, stream = await copilot.chat(admin, project_id, "short version?", session_id=record.session_id, llm_config=llm(stub))
    assert (await collect(stream))[-1]["status"] == "completed"
    sent = [(m["role"], m["content"]) for m in stub.requests[-1]["messages"][1:]]
    assert sent == [("user", "Explain OSPF"), ("assistant", partial), ("user", "short version?")]


@pytest.mark.parametrize(
    ("fault", "code", "timeout"),
    [
        (rate_limited(), "llm_rate_limited", 20),
        (server_error(), "llm_server_error", 20),
        (hang(), "llm_timeout", 1),  # the server never answers: only this one must time out
    ],
)
async def test_provider_faults_end_with_a_clean_error(copilot, stub, admin, gns3_project, fault, code, timeout):
    stub.enqueue(fault)
    record, stream = await copilot.chat(admin, gns3_project["project_id"], "hi",
                                        llm_config=llm(stub, timeout=timeout))
    seen = await collect(stream)
    assert [e["type"] for e in seen][-2:] == ["error", "done"]
    assert seen[-2]["code"] == code and "sk-e2e" not in seen[-2]["message"]
    stub.enqueue("back")
    _, stream = await copilot.chat(admin, gns3_project["project_id"], "again", session_id=record.session_id,
                                   llm_config=llm(stub))
    assert (await collect(stream))[-1]["status"] == "completed"


async def test_rate_limit_is_retried_when_allowed(copilot, stub, admin, gns3_project):
    stub.enqueue(rate_limited(), "after retry")
    _, stream = await copilot.chat(admin, gns3_project["project_id"], "hi", llm_config=llm(stub, max_retries=2))
    seen = await collect(stream)
    assert seen[-1]["status"] == "completed" and text_of(seen) == "after retry"
    assert len(stub.requests) == 2


async def test_context_length_rejection_is_retried_tighter(copilot, stub, admin, gns3_project):
    stub.enqueue(context_length_exceeded(), "fits")
    _, stream = await copilot.chat(admin, gns3_project["project_id"], "hi", llm_config=llm(stub))
    seen = await collect(stream)
    reports = [e["report"] for e in seen if e["type"] == "context"]
    assert seen[-1]["status"] == "completed" and len(stub.requests) == 2
    assert reports[1]["budget"] < reports[0]["budget"]


async def test_long_history_is_trimmed_before_it_reaches_the_provider(copilot, stub, admin, gns3_project):
    project_id = gns3_project["project_id"]
    stub.enqueue("first")
    record, stream = await copilot.chat(admin, project_id, "start", llm_config=llm(stub))
    await collect(stream)
    old = []
    for i in range(300):
        old += [HumanMessage(f"old question {i} " + "vlan " * 40), AIMessage(f"old answer {i} " + "ospf " * 60)]
    graph_state = {"messages": old}
    await update_history(copilot, record.session_id, graph_state)
    assert len(await copilot.messages(admin, record.session_id)) == 602

    stub.enqueue("trimmed answer")
    _, stream = await copilot.chat(admin, project_id, "latest question", session_id=record.session_id,
                                   llm_config=llm(stub, context_limit=8))
    seen = await collect(stream)
    report = next(e["report"] for e in seen if e["type"] == "context")
    sent = stub.requests[-1]["messages"]
    assert report["messages_in"] == 603 and report["messages_dropped"] > 500
    assert sent[0]["role"] == "system" and sent[1]["role"] == "user" and sent[-1]["content"] == "latest question"
    assert len(sent) == report["messages_out"] + 1 < 100
    # 8K x balanced, corrected by the usage the stub reported on the first run, and never
    # past the window minus the reply's room (a factor below 1 used to give it the whole window)
    assert report["answer_tokens"] == 1000
    assert report["total_tokens"] <= report["budget"] == min(int(6000 / report["token_scale"]), 8000 - 1000)
    counter = TokenCounter()
    assert sum(counter.text(m["content"] or "") for m in sent) < report["total_tokens"]


async def update_history(service: CopilotService, session_id: str, values: dict[str, Any]) -> None:
    """Append stored messages to a session, as many earlier runs would have."""
    from gns3server.agent.gns3_copilot.agent.gns3_copilot import AgentSettings, build_copilot_graph

    async def no_topology(project_id: str) -> None:
        return None

    settings = AgentSettings(
        tools=[], mode="teaching", bind_tools=lambda tools: None, pre_model_hook=lambda s: s,
        load_topology=no_topology, is_context_length_error=lambda exc: False,
    )
    graph = build_copilot_graph(settings, service._storage.checkpointer)
    await graph.aupdate_state({"configurable": {"thread_id": session_id}}, values, as_node="llm_call")


async def test_unparseable_tool_arguments_get_an_error_result(copilot, stub, admin, gns3_project):
    stub.enqueue(reply(tool_calls=[tool_call("gns3_list_templates", 'category=router')]), "Sorry, retrying.")
    _, stream = await copilot.chat(admin, gns3_project["project_id"], "templates?", llm_config=llm(stub))
    seen = await collect(stream)
    assert seen[-1]["status"] == "completed"
    answer = stub.requests[-1]["messages"][-1]
    assert answer["role"] == "tool" and "not valid JSON" in answer["content"]
    assert answer["tool_call_id"] == stub.requests[-1]["messages"][-2]["tool_calls"][0]["id"]
