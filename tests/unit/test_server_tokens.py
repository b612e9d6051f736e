"""The model server's tokenizer endpoint as a calibration source (issue 15).

A loopback aiohttp app plays the two shapes (llama-cpp-python's and llama.cpp's);
the real llama-cpp-python server is exercised by tests/integration/test_local_llm_server.py.
"""

from __future__ import annotations

from aiohttp import web
from aiohttp.test_utils import TestServer
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from gns3server.agent.gns3_copilot.agent.context.tokenizer import get_encoding
from gns3server.agent.gns3_copilot.agent.server_tokens import ServerTokenizer, request_text
from gns3server.agent.gns3_copilot.agent.server_traits import ServerTraits

MESSAGES = [
    SystemMessage("You are a copilot."),
    HumanMessage("show me R1"),
    AIMessage("", tool_calls=[{"name": "gns3_topology", "args": {}, "id": "c1"}]),
]
TOOLS = [{"type": "function", "function": {"name": "gns3_topology", "parameters": {"type": "object", "properties": {}}}}]


def _ours(text: str) -> int:
    return len(get_encoding("cl100k_base").encode_ordinary(text))


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


async def test_llama_cpp_python_endpoint_gives_the_ratio_and_is_remembered():
    calls: list[str] = []

    async def count(request: web.Request) -> web.Response:
        body = await request.json()
        calls.append(request.path)
        return web.json_response({"count": 2 * _ours(body["input"])})

    server = await _serve({"/extras/tokenize/count": count})
    try:
        traits = ServerTraits()
        tokenizer = ServerTokenizer(f"http://127.0.0.1:{server.port}/v1", None, "cl100k_base", traits)
        assert await tokenizer.scale(MESSAGES, TOOLS) == 2.0
        assert traits.tokenizer == "llama-cpp-python"
        assert await tokenizer.scale(MESSAGES, TOOLS) == 2.0
        assert calls == ["/extras/tokenize/count"] * 2
    finally:
        await server.close()


async def test_llama_cpp_server_endpoint_is_found_after_the_other():
    async def tokenize(request: web.Request) -> web.Response:
        body = await request.json()
        return web.json_response({"tokens": list(range(_ours(body["content"]) + 10))})

    server = await _serve({"/tokenize": tokenize})
    try:
        traits = ServerTraits()
        tokenizer = ServerTokenizer(f"http://127.0.0.1:{server.port}/v1", "sk-x", "cl100k_base", traits)
        text = request_text(MESSAGES, TOOLS)
        assert await tokenizer.scale(MESSAGES, TOOLS) == (_ours(text) + 10) / _ours(text)
        assert traits.tokenizer == "llama.cpp"
    finally:
        await server.close()


async def test_a_server_without_a_tokenizer_is_asked_once():
    asked: list[str] = []

    async def not_found(request: web.Request) -> web.Response:
        asked.append(request.path)
        return web.json_response({"detail": "Not Found"}, status=404)

    server = await _serve({"/{tail:.*}": not_found})
    try:
        traits = ServerTraits()
        tokenizer = ServerTokenizer(f"http://127.0.0.1:{server.port}/v1", None, "cl100k_base", traits)
        assert await tokenizer.scale(MESSAGES, TOOLS) is None
        assert traits.tokenizer == "none" and asked == ["/extras/tokenize/count", "/tokenize"]
        assert await tokenizer.scale(MESSAGES, TOOLS) is None
        assert len(asked) == 2  # not asked again
    finally:
        await server.close()
