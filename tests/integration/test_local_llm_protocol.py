"""Local-server protocol quirks, end to end through the real OpenAI client.

The OpenAI-compatible stub plays the server behaviours seen with llama-cpp-python
(empty 200 bodies for streamed tool calls, cut streams, 500s); the copilot runs
against a real gns3-server with real tools. The real llama-cpp server is driven by
``test_local_llm_server.py``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage

from gns3server.agent.gns3_copilot.agent.policies.loop_guard import REPEATED_FAILURE_LIMIT
from gns3server.agent.gns3_copilot.api.history import session_history
from gns3server.agent.gns3_copilot.service.copilot import User
from tests.support.copilot_service import running_copilot
from tests.support.openai_stub import OpenAIStub, cut_stream, empty_stream, reply, server_error, tool_call
from tests.support.streams import collect, text_of

pytestmark = pytest.mark.integration


@pytest.fixture
async def stub():
    async with OpenAIStub() as server:
        yield server


@pytest.fixture
async def admin(gns3_server) -> User:
    return User("admin-id", "admin", await gns3_server.token(), is_superadmin=True)


@pytest.fixture
async def copilot(tmp_path, gns3_server):
    async with running_copilot(tmp_path / "copilot", gns3_server.base_url) as service:
        yield service


def llm(stub: OpenAIStub, **extra: Any) -> dict[str, Any]:
    return {"model": "local", "base_url": stub.base_url, "context_limit": 2, "max_retries": 0, "timeout": 10, **extra}


async def test_requests_carry_tool_choice_max_tokens_and_string_content(copilot, stub, admin, gns3_project):
    # The topology tool needs no argument: the run knows its project; junk is ignored.
    stub.enqueue(reply(tool_calls=[tool_call("gns3_topology", {"project_id": "not-a-uuid"})]), "Empty lab.")
    _record, stream = await copilot.chat(admin, gns3_project["project_id"], "what is here?", llm_config=llm(stub))
    seen = await collect(stream)
    assert seen[-1]["status"] == "completed" and text_of(seen) == "Empty lab."
    end = next(e for e in seen if e["type"] == "tool_end")
    assert end["status"] == "success" and '"nodes"' in end["output"]
    first, second = stub.requests
    assert first["tool_choice"] == "auto" and first["max_tokens"] == 256  # 2K window: default reply room
    assert {t["function"]["name"] for t in first["tools"]} >= {"gns3_topology"}
    topology_tool = next(t for t in first["tools"] if t["function"]["name"] == "gns3_topology")
    assert topology_tool["function"]["parameters"]["properties"] == {}
    assistant = next(m for m in second["messages"] if m["role"] == "assistant")
    assert assistant["tool_calls"] and assistant["content"] == ""  # never null (llama-cpp answers 500)


async def test_configured_max_tokens_is_sent(copilot, stub, admin, gns3_project):
    stub.enqueue("ok")
    _, stream = await copilot.chat(admin, gns3_project["project_id"], "hi", llm_config=llm(stub, max_tokens=77))
    assert (await collect(stream))[-1]["status"] == "completed"
    assert stub.requests[0]["max_tokens"] == 77


async def test_empty_streamed_tool_call_falls_back_unstreamed_and_is_remembered(copilot, stub, admin, gns3_project):
    stub.enqueue(
        empty_stream(),  # llama-cpp-python: a streamed tool call comes back as an empty 200 body
        reply(tool_calls=[tool_call("gns3_topology", {})]),
        "The project is empty.",
    )
    record, stream = await copilot.chat(admin, gns3_project["project_id"], "look", llm_config=llm(stub))
    seen = await collect(stream)
    assert seen[-1]["status"] == "completed", seen
    assert text_of(seen) == "The project is empty."  # the unstreamed answer still reaches the client
    assert [e["status"] for e in seen if e["type"] == "tool_end"] == ["success"]
    assert [r["stream"] for r in stub.requests] == [True, False, False]
    # A later run to the same server starts unstreamed at once.
    stub.enqueue("Still empty.")
    _, stream = await copilot.chat(admin, gns3_project["project_id"], "again", session_id=record.session_id,
                                   llm_config=llm(stub))
    seen = await collect(stream)
    assert seen[-1]["status"] == "completed" and text_of(seen) == "Still empty."
    assert stub.requests[-1].get("stream") in (False, None)


async def test_an_empty_answer_with_tools_is_asked_again_without_tools(copilot, stub, admin, gns3_project):
    # llama-cpp-python's function-calling format can only produce a tool call once tools are offered:
    # a model that chose to answer in text gets an empty message. Without tools it answers.
    stub.enqueue(reply(""), "Here is the answer.")
    _, stream = await copilot.chat(admin, gns3_project["project_id"], "hi", llm_config=llm(stub))
    seen = await collect(stream)
    assert seen[-1]["status"] == "completed" and text_of(seen) == "Here is the answer."
    assert "tools" in stub.requests[0] and "tools" not in stub.requests[1] and stub.requests[1]["stream"] is True


async def test_an_answer_empty_every_way_is_a_named_error(copilot, stub, admin, gns3_project):
    stub.enqueue(empty_stream(), reply(""), reply(""))
    _, stream = await copilot.chat(admin, gns3_project["project_id"], "hi", llm_config=llm(stub))
    seen = await collect(stream)
    assert [e["type"] for e in seen][-2:] == ["error", "done"]
    assert seen[-2]["code"] == "llm_empty_answer" and "empty" in seen[-2]["message"]
    assert [("tools" in r, r.get("stream")) for r in stub.requests] == [(True, True), (True, False), (False, True)]


async def test_a_cut_stream_is_a_named_error_and_the_next_turn_works(copilot, stub, admin, gns3_project):
    stub.enqueue(cut_stream("Half an answer that never ends", after=3))
    record, stream = await copilot.chat(admin, gns3_project["project_id"], "hi", llm_config=llm(stub))
    seen = await collect(stream)
    assert seen[-2]["code"] == "llm_stream_cut" and seen[-1]["status"] == "error"
    assert text_of(seen) == "Half an answer that never ends"[:12]  # what came is what was shown
    stub.enqueue("whole")
    _, stream = await copilot.chat(admin, gns3_project["project_id"], "again", session_id=record.session_id,
                                   llm_config=llm(stub))
    assert (await collect(stream))[-1]["status"] == "completed"


async def test_a_500_from_the_model_server_is_llm_server_error(copilot, stub, admin, gns3_project):
    stub.enqueue(server_error("Input should be a valid string"))
    _, stream = await copilot.chat(admin, gns3_project["project_id"], "hi", llm_config=llm(stub))
    seen = await collect(stream)
    assert seen[-2]["code"] == "llm_server_error" and "HTTP 500" in seen[-2]["message"]
    assert "valid string" not in seen[-2]["message"]  # the server's text stays in the log


async def test_repeated_identical_failing_calls_stop_early_with_a_streamed_answer(copilot, stub, admin, gns3_project):
    bad = tool_call("gns3_node_action", {"node": "R9", "action": "start"})
    stub.enqueue(*[reply(tool_calls=[bad]) for _ in range(REPEATED_FAILURE_LIMIT)], "never asked")
    _, stream = await copilot.chat(admin, gns3_project["project_id"], "start R9", llm_config=llm(stub))
    seen = await collect(stream)
    assert seen[-1]["status"] == "completed"
    assert len(stub.requests) == REPEATED_FAILURE_LIMIT  # no model call after the third failure
    assert [e["status"] for e in seen if e["type"] == "tool_end"] == ["error"] * REPEATED_FAILURE_LIMIT
    assert text_of(seen).startswith("I stopped: the tool gns3_node_action failed 3 times")
    assert stub.pending == 1


async def test_the_step_limit_message_is_streamed(tmp_path, gns3_server, stub, admin, gns3_project):
    async with running_copilot(tmp_path / "copilot", gns3_server.base_url, max_llm_calls=2) as service:
        stub.enqueue(reply(tool_calls=[tool_call("gns3_topology", {})]), reply(tool_calls=[tool_call("gns3_list_templates", {})]))
        _, stream = await service.chat(admin, gns3_project["project_id"], "loop", llm_config=llm(stub))
        seen = await collect(stream)
        assert seen[-1]["status"] == "completed"
        assert text_of(seen).startswith("I stopped after 2 model calls")
        history = await session_history(service, admin, seen[-1]["session_id"])
        assert history[-1]["role"] == "assistant" and history[-1]["content"] == text_of(seen)


async def test_a_call_repeated_with_success_gets_an_answer_without_tools(copilot, stub, admin, gns3_project):
    same = tool_call("gns3_topology", {})
    stub.enqueue(*[reply(tool_calls=[same]) for _ in range(3)], "The lab is empty.")
    _, stream = await copilot.chat(admin, gns3_project["project_id"], "look", llm_config=llm(stub))
    seen = await collect(stream)
    assert seen[-1]["status"] == "completed" and text_of(seen) == "The lab is empty."
    assert [e["status"] for e in seen if e["type"] == "tool_end"] == ["success"] * 3
    assert ["tools" in r for r in stub.requests] == [True, True, True, False]
    # The report of the call without tools counts none (the estimate matches what was sent).
    reports = [e["report"] for e in seen if e["type"] == "context"]
    assert [r["tools_tokens"] > 0 for r in reports] == [True, True, True, False]


async def test_junk_arguments_are_cut_in_later_requests_and_in_the_stored_history(copilot, stub, admin, gns3_project):
    junk = "{" + "x, " * 600  # 1,801 characters that are not JSON, as SmolLM2 produced at 2K
    # Unstreamed, as llama-cpp-python answers tool calls: the junk stays unparsed (a stream's lenient
    # parser would have made it {}), so the call is an invalid one answered with an error.
    stub.enqueue(empty_stream(), reply(tool_calls=[tool_call("gns3_topology", junk)]), "Sorry.", "Still here.")
    record, stream = await copilot.chat(admin, gns3_project["project_id"], "look", llm_config=llm(stub))
    seen = await collect(stream)
    assert seen[-1]["status"] == "completed"
    _, stream = await copilot.chat(admin, gns3_project["project_id"], "and now?", llm_config=llm(stub), session_id=record.session_id)
    assert (await collect(stream))[-1]["status"] == "completed"
    for body in stub.requests[2:]:  # every request after the call: the arguments cut, with the marker
        [assistant] = [m for m in body["messages"] if m["role"] == "assistant" and m.get("tool_calls")]
        arguments = assistant["tool_calls"][0]["function"]["arguments"]
        assert len(arguments) < 400 and "[arguments of 1801 characters cut" in arguments, arguments
        assert junk not in json.dumps(body)
    stored = [m for m in await copilot.messages(admin, record.session_id) if isinstance(m, AIMessage) and m.invalid_tool_calls]
    assert stored and all("characters cut" in c["args"] for m in stored for c in m.invalid_tool_calls)
    assert all(junk not in json.dumps(m.additional_kwargs) for m in stored)


async def test_the_same_unparsable_arguments_repeated_stop_early_with_a_streamed_answer(copilot, stub, admin, gns3_project):
    junk = "{node: R1, action"  # not JSON: an invalid tool call, answered with an error each time
    # Unstreamed after the first empty stream, as llama-cpp-python answers tool calls (the junk stays unparsed).
    stub.enqueue(empty_stream(), *[reply(tool_calls=[tool_call("gns3_node_action", junk)]) for _ in range(REPEATED_FAILURE_LIMIT)],
                 "never asked")
    _, stream = await copilot.chat(admin, gns3_project["project_id"], "start R1", llm_config=llm(stub))
    seen = await collect(stream)
    assert seen[-1]["status"] == "completed"
    assert len(stub.requests) == 1 + REPEATED_FAILURE_LIMIT  # the empty stream, then no model call after the third
    assert text_of(seen).startswith("I stopped: the tool gns3_node_action failed 3 times")
    assert "not valid JSON" in text_of(seen)
    assert stub.pending == 1


async def test_tool_results_go_as_user_messages_to_a_server_whose_template_drops_them(tmp_path, gns3_server, admin, gns3_project):
    async with OpenAIStub(drops_tool_results=True) as dropping:
        async with running_copilot(tmp_path / "copilot", gns3_server.base_url) as service:
            for question in ("what is here?", "and now?"):
                dropping.enqueue(reply(tool_calls=[tool_call("gns3_topology", {})]), "Empty lab.")
                _, stream = await service.chat(admin, gns3_project["project_id"], question, llm_config=llm(dropping))
                assert (await collect(stream))[-1]["status"] == "completed"
        assert len(dropping.probes) == 2  # measured once for this server and model, not per run
        # So is what the tool definitions cost: the same question with and without them.
        assert [("tools" in p, p.get("tool_choice")) for p in dropping.tools_probes] == [(False, None), (True, "auto")]
        after_call = dropping.requests[1]
        assert not any(m["role"] == "tool" for m in after_call["messages"])
        result = after_call["messages"][-1]
        assert result["role"] == "user" and result["content"].startswith("[Result of the tool gns3_topology]\n")
        assert '"nodes"' in result["content"]


async def test_tool_results_stay_tool_messages_for_a_server_that_renders_them(copilot, stub, admin, gns3_project):
    stub.enqueue(reply(tool_calls=[tool_call("gns3_topology", {})]), "Empty lab.")
    _, stream = await copilot.chat(admin, gns3_project["project_id"], "what is here?", llm_config=llm(stub))
    assert (await collect(stream))[-1]["status"] == "completed"
    assert len(stub.probes) == 2
    assert stub.requests[1]["messages"][-1]["role"] == "tool"
