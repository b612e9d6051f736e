"""The model server's tokenizer endpoint as a calibration source.

A loopback aiohttp app plays the two shapes (llama-cpp-python's and llama.cpp's);
the real llama-cpp-python server is exercised by tests/integration/test_local_llm_server.py.
"""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from gns3server.agent.gns3_copilot.agent.context.tokenizer import get_encoding
from gns3server.agent.gns3_copilot.agent.server.client import ModelServerClient
from gns3server.agent.gns3_copilot.agent.server.tokens import (
    ServerTokenizer,
    is_escape_probe,
    markup_escaped,
    request_text,
)
from gns3server.agent.gns3_copilot.agent.server.traits import ServerTraits

MESSAGES = [
    SystemMessage("You are a copilot."),
    HumanMessage("show me R1"),
    AIMessage("", tool_calls=[{"name": "gns3_topology", "args": {}, "id": "c1"}]),
]
TOOLS = [{"type": "function", "function": {"name": "gns3_topology", "parameters": {"type": "object", "properties": {}}}}]


def _ours(text: str) -> int:
    return len(get_encoding("cl100k_base").encode_ordinary(text))


@pytest.fixture
async def clients():
    """Makes the model-server clients a test uses, closed after it."""
    opened: list[ModelServerClient] = []

    def make(base_url: str, api_key: str | None = None) -> ModelServerClient:
        opened.append(ModelServerClient(base_url, api_key))
        return opened[-1]

    yield make
    for client in opened:
        await client.aclose()


async def _serve(routes: dict[str, object]) -> TestServer:
    app = web.Application()
    for path, handler in routes.items():
        app.router.add_post(path, handler)  # type: ignore[arg-type]
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    return server


def test_request_text_holds_messages_tool_calls_and_tool_definitions():
    text = request_text(MESSAGES, TOOLS)
    assert "show me R1" in text and "gns3_topology {}" in text and '"parameters"' in text


async def test_llama_cpp_python_endpoint_gives_the_count_and_is_remembered(clients):
    calls: list[str] = []

    async def count(request: web.Request) -> web.Response:
        body = await request.json()
        calls.append(request.path)
        return web.json_response({"count": 2 * _ours(body["input"])})

    server = await _serve({"/extras/tokenize/count": count})
    try:
        traits = ServerTraits()
        tokenizer = ServerTokenizer(clients(f"http://127.0.0.1:{server.port}/v1", None), traits)
        text = request_text(MESSAGES, TOOLS)
        assert await tokenizer.count(MESSAGES, TOOLS) == 2 * _ours(text)
        assert traits.tokenizer == "llama-cpp-python"
        assert await tokenizer.count(MESSAGES, TOOLS) == 2 * _ours(text)
        assert calls == ["/extras/tokenize/count"] * 2
    finally:
        await server.close()


async def test_llama_cpp_server_endpoint_is_found_after_the_other(clients):
    async def tokenize(request: web.Request) -> web.Response:
        body = await request.json()
        return web.json_response({"tokens": list(range(_ours(body["content"]) + 10))})

    server = await _serve({"/tokenize": tokenize})
    try:
        traits = ServerTraits()
        tokenizer = ServerTokenizer(clients(f"http://127.0.0.1:{server.port}/v1", "sk-x"), traits)
        text = request_text(MESSAGES, TOOLS)
        assert await tokenizer.count(MESSAGES, TOOLS) == _ours(text) + 10
        assert traits.tokenizer == "llama.cpp"
    finally:
        await server.close()


async def _without_tokenizer(asked: list[str]) -> TestServer:
    """A server answering 404 to everything, recording the paths asked."""
    async def not_found(request: web.Request) -> web.Response:
        asked.append(request.path)
        return web.json_response({"detail": "Not Found"}, status=404)

    return await _serve({"/{tail:.*}": not_found})


async def test_a_server_without_a_tokenizer_is_asked_once(clients):
    asked: list[str] = []
    server = await _without_tokenizer(asked)
    try:
        traits = ServerTraits()
        tokenizer = ServerTokenizer(clients(f"http://127.0.0.1:{server.port}/v1", None), traits)
        assert await tokenizer.count(MESSAGES, TOOLS) is None
        assert traits.tokenizer == "none" and asked == ["/extras/tokenize/count", "/tokenize"]
        assert await tokenizer.count(MESSAGES, TOOLS) is None
        assert len(asked) == 2  # not asked again
    finally:
        await server.close()


def test_markup_escaping_is_jinjas():
    assert markup_escaped('{"a": \'<b>\' & c}') == "{&#34;a&#34;: &#39;&lt;b&gt;&#39; &amp; c}"


def _escaping_server(escapes: bool, chats: list[dict]):
    """A llama-cpp-python-like server: a character is a token, and the prompt holds the
    message text escaped (``escapes``) or as it is, after 10 tokens of framing."""
    async def count(request: web.Request) -> web.Response:
        return web.json_response({"count": len((await request.json())["input"])})

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        chats.append(body)
        text = body["messages"][0]["content"]
        prompt = 10 + len(markup_escaped(text) if escapes else text)
        return web.json_response({"choices": [{"message": {"role": "assistant", "content": "x"}}],
                                  "usage": {"prompt_tokens": prompt, "completion_tokens": 1, "total_tokens": prompt + 1}})

    return _serve({"/extras/tokenize/count": count, "/v1/chat/completions": chat})


@pytest.mark.parametrize("escapes", [True, False])
async def test_whether_the_template_escapes_message_text_is_measured_once_and_counted_so(escapes, clients):
    # llama-cpp-python renders with Jinja's autoescape: a JSON result costs it 3x its text.
    chats: list[dict] = []
    server = await _escaping_server(escapes, chats)
    messages = [HumanMessage('[{"name": "R1"}]')]
    try:
        traits = ServerTraits()
        tokenizer = ServerTokenizer(clients(f"http://127.0.0.1:{server.port}/v1", None), traits, "m")
        text = request_text(messages, [])
        rendered = markup_escaped(text) if escapes else text
        assert await tokenizer.count(messages, []) == len(rendered)
        assert traits.escapes_markup is escapes
        assert len(chats) == 2 and all(is_escape_probe(body) and body["max_tokens"] == 1 for body in chats)
        await tokenizer.count(messages, [])
        assert len(chats) == 2  # measured once per server
    finally:
        await server.close()


async def test_runs_that_start_together_ask_a_server_without_a_tokenizer_once(clients):
    """20 conversations resumed at once after a restart: one run finds there is no endpoint, the others wait for it."""
    asked: list[str] = []
    server = await _without_tokenizer(asked)
    try:
        traits = ServerTraits()
        client = clients(f"http://127.0.0.1:{server.port}/v1", None)
        counts = await asyncio.gather(*(ServerTokenizer(client, traits).count(MESSAGES, TOOLS) for _ in range(8)))
        assert counts == [None] * 8
        assert asked == ["/extras/tokenize/count", "/tokenize"]
    finally:
        await server.close()


async def test_runs_that_start_together_measure_the_templates_escaping_once(clients):
    chats: list[dict] = []
    server = await _escaping_server(True, chats)
    messages = [HumanMessage('[{"name": "R1"}]')]
    try:
        traits = ServerTraits()
        client = clients(f"http://127.0.0.1:{server.port}/v1", None)
        counts = await asyncio.gather(*(ServerTokenizer(client, traits, "m").count(messages, []) for _ in range(8)))
        assert counts == [len(markup_escaped(request_text(messages, [])))] * 8
        assert len(chats) == 2  # the two probe requests, once
    finally:
        await server.close()
