"""An Ollama-native HTTP server on loopback (``POST /api/chat``), scripted like :mod:`openai_stub`.

The real ``ChatOllama`` (``langchain-ollama``, built by our model factory for provider
``ollama``) talks to it over HTTP, so its NDJSON streaming, tool calls and the usage
it reads from the final chunk are exercised end to end::

    async with OllamaStub() as stub:
        stub.enqueue(
            ollama_reply(tool_calls=[("gns3_topology", {})], prompt_eval_count=900),
            ollama_reply("The lab is empty.", prompt_eval_count=1000),
        )
        config = {"provider": "ollama", "model": "qwen2.5:7b", "base_url": stub.base_url, "context_limit": 8}
        ...
        assert stub.requests[0]["options"]["num_predict"] == 1000

A streamed answer is what Ollama sends: one JSON object a line, the text in pieces
(``done: false``), tool calls in a chunk of their own (arguments as an object, no id),
then a final chunk with ``done: true``, ``done_reason`` and the counts
(``prompt_eval_count``: the prompt's tokens as the model's tokenizer and chat template
make them; ``eval_count``: the reply's). An unstreamed request gets one object with all
of it. Script items: a string (a text reply) or :func:`ollama_reply`. When the script runs
out the stub answers 400 with Ollama's ``{"error": ...}`` and counts it in ``unscripted``.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Self

from aiohttp import web

from tests.support.loopback import serve_on_loopback

__all__ = ["OllamaReply", "OllamaStub", "ollama_reply"]


@dataclass(frozen=True)
class OllamaReply:
    """One answer: text, tool calls ``(name, arguments)``, and the counts of the final chunk."""

    text: str = ""
    tool_calls: Sequence[tuple[str, Mapping[str, Any]]] = ()
    prompt_eval_count: int | None = None
    """The prompt's tokens as the server reports them; estimated from the request when None."""
    eval_count: int | None = None
    chunk_chars: int = 4


def ollama_reply(
    text: str = "",
    *,
    tool_calls: Sequence[tuple[str, Mapping[str, Any]]] = (),
    prompt_eval_count: int | None = None,
    eval_count: int | None = None,
) -> OllamaReply:
    """An answer; streamed as ``chunk_chars``-sized pieces of text, then the calls, then the counts."""
    return OllamaReply(text, tuple(tool_calls), prompt_eval_count, eval_count)


class OllamaStub:
    """``POST /api/chat`` answering from a script, in the running loop."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        """JSON body of every chat request, in arrival order."""
        self.unscripted = 0
        self._script: deque[OllamaReply | str] = deque()
        self._runner: web.AppRunner | None = None
        self.port: int | None = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``: the native API root (no ``/v1``), what ``base_url`` should be."""
        if self.port is None:
            raise RuntimeError("OllamaStub is not running")
        return f"http://127.0.0.1:{self.port}"

    def enqueue(self, *items: OllamaReply | str) -> None:
        for item in items:
            if not isinstance(item, (OllamaReply, str)):
                raise TypeError(f"cannot script a {type(item).__name__}")
        self._script.extend(items)

    @property
    def pending(self) -> int:
        """Scripted answers not consumed yet."""
        return len(self._script)

    async def start(self) -> OllamaStub:
        app = web.Application()
        app.router.add_post("/api/chat", self._chat)
        self._runner, self.port = await serve_on_loopback(app, shutdown_timeout=5.0)
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        if not self._script:
            self.unscripted += 1
            return web.json_response({"error": f"OllamaStub: no scripted response left for request #{len(self.requests)}"},
                                     status=400)
        item = self._script.popleft()
        if isinstance(item, str):
            item = ollama_reply(item)
        model = body.get("model", "stub")
        final = _final_chunk(item, body, model)
        if body.get("stream") is False:  # Ollama streams unless told not to
            message = {**final["message"], "content": item.text}
            if item.tool_calls:
                message["tool_calls"] = _calls(item)
            return web.json_response({**final, "message": message})
        response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await response.prepare(request)
        for chunk in _chunks(item, model):
            await response.write(json.dumps(chunk).encode() + b"\n")
        await response.write(json.dumps(final).encode() + b"\n")
        await response.write_eof()
        return response


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _calls(item: OllamaReply) -> list[dict[str, Any]]:
    return [{"function": {"name": name, "arguments": dict(arguments)}} for name, arguments in item.tool_calls]


def _chunks(item: OllamaReply, model: str) -> list[dict[str, Any]]:
    """The ``done: false`` objects: text pieces, then the tool calls in one."""
    step = max(1, item.chunk_chars)
    messages = [{"role": "assistant", "content": item.text[i : i + step]} for i in range(0, len(item.text), step)]
    if item.tool_calls:
        messages.append({"role": "assistant", "content": "", "tool_calls": _calls(item)})
    return [{"model": model, "created_at": _now(), "message": m, "done": False} for m in messages]


def _final_chunk(item: OllamaReply, body: Mapping[str, Any], model: str) -> dict[str, Any]:
    prompt = item.prompt_eval_count
    if prompt is None:  # a plausible count (~4 characters a token) when the test does not care
        prompt = max(1, len(json.dumps(body.get("messages", []))) // 4)
    completion = item.eval_count if item.eval_count is not None else max(1, len(item.text) // 4)
    return {
        "model": model, "created_at": _now(), "message": {"role": "assistant", "content": ""},
        "done": True, "done_reason": "stop", "total_duration": 1_000_000, "load_duration": 1000,
        "prompt_eval_count": prompt, "prompt_eval_duration": 1000, "eval_count": completion, "eval_duration": 1000,
    }
