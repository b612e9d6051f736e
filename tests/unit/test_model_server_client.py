"""The one model-server client: httpx's errors mapped at one seam, one pooled client per server.

An httpx ``MockTransport`` plays the server (the probes themselves run against loopback
servers in test_server_tokens.py and test_tool_results.py, and a real llama.cpp server in
tests/integration/test_local_llm_server.py).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool

from gns3server.agent.gns3_copilot.agent.assembly import AgentAssembly, RunSpec
from gns3server.agent.gns3_copilot.agent.server.client import ModelServerClient, ModelServerClients, ModelServerError
from gns3server.agent.gns3_copilot.errors import CopilotError, ErrorKind

URL = "http://10.0.0.5:8080/v1"


def answering(handler):
    return httpx.MockTransport(handler)


async def test_what_httpx_raises_and_answers_that_cannot_be_read_are_one_error():
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    async with ModelServerClient(URL, transport=answering(refuse)) as client:
        with pytest.raises(ModelServerError) as info:
            await client.prompt_tokens({"messages": []})
    assert isinstance(info.value.__cause__, httpx.ConnectError) and isinstance(info.value, CopilotError)
    assert info.value.kind is ErrorKind.UPSTREAM and "10.0.0.5:8080" in str(info.value)

    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    async with ModelServerClient(URL, transport=answering(slow)) as client:
        with pytest.raises(ModelServerError, match="ReadTimeout"):
            await client.post(client.root + "/tokenize", {"content": "x"})

    async with ModelServerClient(URL, transport=answering(lambda r: httpx.Response(200, text="<html>"))) as client:
        with pytest.raises(ModelServerError, match="not JSON"):
            await client.prompt_tokens({})


async def test_an_answer_without_a_usable_count_is_none_and_the_request_is_the_servers():
    seen: list[httpx.Request] = []

    def serve(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path == "/tokenize":
            return httpx.Response(404, json={"detail": "Not Found"})
        usage = json.loads(request.content)["usage"]
        return httpx.Response(200, json={"usage": usage} if usage is not None else ["not", "an", "object"])

    async with ModelServerClient(URL, "sk-local", transport=answering(serve)) as client:
        assert await client.post(client.root + "/tokenize", {"content": "x"}) is None  # 404: the server has none
        assert await client.prompt_tokens({"usage": {"prompt_tokens": 42}}) == 42
        assert await client.prompt_tokens({"usage": {"prompt_tokens": True}}) is None
        assert await client.prompt_tokens({"usage": None}) is None
    assert [r.url.path for r in seen] == ["/tokenize", "/v1/chat/completions", "/v1/chat/completions",
                                         "/v1/chat/completions"]
    assert all(r.headers["Authorization"] == "Bearer sk-local" for r in seen)


async def test_one_pooled_client_per_server_closed_with_the_pool():
    pool = ModelServerClients(max_servers=2, transport=answering(lambda r: httpx.Response(404)))
    first = await pool.client(URL, None, 30.0)
    assert await pool.client(URL + "/", None, 30.0) is first  # the same server
    other = await pool.client("http://10.0.0.6/v1", None, 30.0)
    assert other is not first
    third = await pool.client("http://10.0.0.7/v1", None, 30.0)  # beyond the bound: the least recent closes
    assert first.closed and not other.closed and not third.closed
    await pool.aclose()
    assert other.closed and third.closed


@tool
def read_lab(node: str) -> str:
    """Read one node of the lab."""
    return f"{node} is up"


async def test_every_probe_of_every_run_goes_through_the_servers_one_client():
    asked: list[str] = []

    def server(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.path)
        if request.url.path == "/extras/tokenize/count":
            return httpx.Response(200, json={"count": len(json.loads(request.content)["input"]) // 4})
        body = json.loads(request.content)
        prompt = len(json.dumps(body["messages"]) + json.dumps(body.get("tools") or [])) // 4
        return httpx.Response(200, json={"usage": {"prompt_tokens": prompt, "completion_tokens": 1}})

    agent = AgentAssembly(
        tools_factory=lambda context: [read_lab], bind_tools=lambda tools, config: None,
        is_context_length_error=lambda exc: False, client_factory=lambda token: None,
        server_transport=answering(server),
    )
    config = {"model": "local", "base_url": URL, "context_limit": 4}
    for session in ("s1", "s2"):
        settings = agent.settings(RunSpec("u1", "alice", "token", "p1", session, config, "lab_automation"))
        assert settings.count_text is not None and settings.measure_tools is not None
        assert settings.probe_tool_results is not None
        assert await settings.count_text([HumanMessage("show me R1")], False)
        assert await settings.measure_tools()
        assert await settings.probe_tool_results() is not None
    assert len(agent.model_servers) == 1 and "/extras/tokenize/count" in asked
    (client,) = agent.model_servers.clients()
    await agent.aclose()
    assert client.closed


def _assembly(server: Any) -> AgentAssembly:
    return AgentAssembly(
        tools_factory=lambda context: [read_lab], bind_tools=lambda tools, config: None,
        is_context_length_error=lambda exc: False, client_factory=lambda token: None,
        server_transport=answering(server),
    )


async def test_runs_that_start_together_measure_the_tools_cost_once():
    """Conversations resumed at once after a restart share their server's facts: one run measures each."""
    asked: list[str] = []
    first, answer = asyncio.Event(), asyncio.Event()

    async def server(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.path)
        first.set()
        await answer.wait()  # answers are held until the other runs have gone as far as they can
        body = json.loads(await request.aread())
        prompt = len(json.dumps(body["messages"]) + json.dumps(body.get("tools") or [])) // 4
        return httpx.Response(200, json={"usage": {"prompt_tokens": prompt, "completion_tokens": 1}})

    agent = _assembly(server)
    config = {"model": "local", "base_url": URL, "context_limit": 4}
    settings = [agent.settings(RunSpec("u1", "alice", "token", "p1", f"s{n}", config, "lab_automation"))
                for n in range(6)]
    alone = len(asked)
    runs = [asyncio.create_task(s.measure_tools()) for s in settings]  # type: ignore[misc]
    await first.wait()  # (the other runs, started before, have run up to where they wait)
    answer.set()
    costs = await asyncio.gather(*runs)
    assert len(set(costs)) == 1 and costs[0] is not None
    measured = len(asked) - alone
    assert measured > 0
    await settings[0].measure_tools()  # type: ignore[misc]
    assert len(asked) - alone == measured  # known from then on
    await agent.aclose()
    one_run = _assembly(server)
    before = len(asked)
    await one_run.settings(RunSpec("u1", "alice", "token", "p1", "s", config, "lab_automation")).measure_tools()  # type: ignore[misc]
    await one_run.aclose()
    assert measured == len(asked) - before  # six runs at once asked what one run asks
