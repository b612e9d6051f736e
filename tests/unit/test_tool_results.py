"""Tool results for servers whose chat template drops them.

The probe runs against the OpenAI-compatible stub playing both kinds of server; the
real llama-cpp-python server is exercised by tests/integration/test_local_llm_server.py.
"""

from __future__ import annotations

import asyncio
import json

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool

from gns3server.agent.gns3_copilot.agent.model.calls import ModelCalls
from gns3server.agent.gns3_copilot.agent.server.client import ModelServerClient
from gns3server.agent.gns3_copilot.agent.server.tool_results import (
    PROBE_CALL_ID,
    tool_results_as_user,
)
from gns3server.agent.gns3_copilot.agent.server.tool_results import template_keeps_tool_results as probe
from gns3server.agent.gns3_copilot.agent.server.tools_cost import offer_key
from gns3server.agent.gns3_copilot.agent.server.tools_cost import tools_prompt_tokens as measure
from gns3server.agent.gns3_copilot.agent.server.traits import ServerTraits
from tests.support.openai_stub import OpenAIStub

CALL = {"name": "gns3_topology", "args": {}, "id": "c1"}


async def template_keeps_tool_results(base_url: str, api_key: str | None, model: str, timeout: float = 120) -> bool | None:
    """The probe through a client of its own (closed after it)."""
    async with ModelServerClient(base_url, api_key, timeout=timeout) as client:
        return await probe(client, model)


async def tools_prompt_tokens(base_url: str, api_key: str | None, model: str, tools: list) -> int | None:
    async with ModelServerClient(base_url, api_key) as client:
        return await measure(client, model, tools)


def test_tool_results_become_user_messages_naming_the_tool_and_the_rest_is_unchanged():
    messages = [
        SystemMessage("You are a copilot."),
        HumanMessage("what is here?"),
        AIMessage("", tool_calls=[CALL]),
        ToolMessage('{"nodes": ["R1"]}', tool_call_id="c1", name="gns3_topology"),
    ]
    sent = tool_results_as_user(messages)
    assert sent[:3] == messages[:3]
    assert isinstance(sent[3], HumanMessage)
    assert sent[3].content == '[Result of the tool gns3_topology]\n{"nodes": ["R1"]}'
    assert isinstance(messages[3], ToolMessage)  # the history itself is not changed


async def test_the_probe_tells_a_template_that_drops_tool_results_from_one_that_keeps_them():
    async with OpenAIStub(drops_tool_results=True) as dropping:
        assert await template_keeps_tool_results(dropping.base_url, None, "m") is False
        assert len(dropping.probes) == 2 and not dropping.requests
        assert all(p["max_tokens"] == 1 and p["stream"] is False and "tools" not in p for p in dropping.probes)
        assert dropping.probes[0]["messages"][1]["tool_calls"][0]["id"] == PROBE_CALL_ID
    async with OpenAIStub() as keeping:
        assert await template_keeps_tool_results(keeping.base_url, None, "m") is True


async def test_the_probe_cannot_tell_when_the_server_fails_or_is_not_there():
    async with OpenAIStub(api_key="right") as refusing:  # 401 to the probe's missing key
        assert await template_keeps_tool_results(refusing.base_url, None, "m") is None
    async with OpenAIStub() as stub:
        url = stub.base_url
    assert await template_keeps_tool_results(url, None, "m", timeout=5) is None  # nothing listens any more


async def test_the_tool_definitions_cost_is_the_difference_of_two_prompt_counts():
    tools = [{"type": "function", "function": {"name": "gns3_topology", "description": "Read the lab.",
                                               "parameters": {"type": "object", "properties": {}}}}]
    async with OpenAIStub() as stub:
        cost = await tools_prompt_tokens(stub.base_url, None, "m", tools)
        bare, offered = stub.tools_probes
        assert "tools" not in bare and offered["tools"] == tools and offered["tool_choice"] == "auto"
        # Function-calling templates render the definitions in the system message: the probe has one.
        assert [m["role"] for m in offered["messages"]] == ["system", "user"] and bare["messages"] == offered["messages"]
        assert all(p["max_tokens"] == 1 and p["stream"] is False for p in stub.tools_probes) and not stub.requests
        # The stub counts about four characters a token, the definitions included.
        assert cost is not None and 0 < cost <= len(json.dumps(tools)) // 4 + 1
        assert await tools_prompt_tokens(stub.base_url, None, "m", []) == 0  # nothing offered, nothing asked
        assert len(stub.tools_probes) == 2
    async with OpenAIStub(api_key="right") as refusing:
        assert await tools_prompt_tokens(refusing.base_url, None, "m", tools) is None


async def test_tools_given_as_objects_are_measured_as_the_definitions_sent():
    @tool
    def gns3_topology() -> str:
        """Read the lab."""
        return "{}"

    async with OpenAIStub() as stub:
        assert (await tools_prompt_tokens(stub.base_url, None, "m", [gns3_topology]) or 0) > 0
        assert stub.tools_probes[1]["tools"][0]["function"]["name"] == "gns3_topology"
    assert offer_key([gns3_topology]) == offer_key([convert_to_openai_tool(gns3_topology)])


async def test_runs_that_start_together_probe_the_template_once():
    """Conversations resumed at once after a restart: one run asks whether the template keeps tool results."""
    probed: list[int] = []
    asked, answer = asyncio.Event(), asyncio.Event()

    async def probe_once() -> bool:
        probed.append(1)
        asked.set()
        await answer.wait()  # the answer is held until the other runs have gone as far as they can
        return False

    traits = ServerTraits()
    prepared = [HumanMessage("R1?"), AIMessage("", tool_calls=[CALL]), ToolMessage("R1 up", tool_call_id="c1")]
    runs = [asyncio.create_task(ModelCalls([], lambda tools: None, traits, probe_tool_results=probe_once).sendable(prepared))
            for _ in range(6)]
    await asked.wait()  # (the other runs, started before, have run up to where they wait)
    answer.set()
    sent = await asyncio.gather(*runs)
    assert probed == [1] and traits.tool_results == "dropped"
    assert all(s == tool_results_as_user(prepared) for s in sent)
