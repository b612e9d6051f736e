"""A loopback HTTP proxy that records the chat requests a client sends to a real model server.

Tests and benches put it between the copilot and llama-cpp-python's server to see
exactly what went over the wire, then ask the server itself how many tokens each
recorded request really is (:func:`real_prompt_tokens`: the same body, unstreamed,
``max_tokens`` 1, and the server's own ``usage.prompt_tokens``).

    async with RecordingProxy(llama.root_url) as proxy:
        config = {"base_url": proxy.base_url, ...}
        ...
        proxy.chat_requests  # JSON bodies of every POST /v1/chat/completions
        proxy.model_requests  # the same without the copilot's probes (agent/server/tool_results.py, tools_cost.py)
"""

from __future__ import annotations

import json
from typing import Any, Self

import aiohttp
from aiohttp import web

from gns3server.agent.gns3_copilot.agent.server.tokens import is_escape_probe
from gns3server.agent.gns3_copilot.agent.server.tool_results import is_template_probe
from gns3server.agent.gns3_copilot.agent.server.tools_cost import is_tools_probe
from tests.support.loopback import serve_on_loopback

__all__ = ["RecordingProxy", "is_probe", "real_prompt_tokens"]

_HOP_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection", "keep-alive"})


def is_probe(body: dict[str, Any]) -> bool:
    """Whether ``body`` is one of the copilot's probes of the server: how it renders tool
    results (``agent/server/tool_results.py``), what the tool definitions cost (``agent/server/tools_cost.py``),
    whether it escapes message text (``agent/server/tokens.py``)."""
    return is_template_probe(body) or is_tools_probe(body) or is_escape_probe(body)


class RecordingProxy:
    """Forwards every request to ``upstream`` (``http://host:port``), streaming answers through."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.chat_requests: list[dict[str, Any]] = []
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def model_requests(self) -> list[dict[str, Any]]:
        """The chat requests that asked the model something (the template probes left out)."""
        return [body for body in self.chat_requests if not is_probe(body)]

    async def start(self) -> RecordingProxy:
        # A fresh upstream connection per request: llama-cpp-python's server drops a kept-alive
        # connection after a failed stream, and reusing it would turn into a 500 of the proxy's own.
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=None, sock_read=900), connector=aiohttp.TCPConnector(force_close=True)
        )
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner, self.port = await serve_on_loopback(app)
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None
        body = await request.read()
        if request.method == "POST" and request.path.endswith("/chat/completions"):
            self.chat_requests.append(json.loads(body))
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_HEADERS}
        async with self._session.request(
            request.method, self.upstream + request.path_qs, data=body, headers=headers
        ) as upstream:
            response = web.StreamResponse(status=upstream.status)
            for key, value in upstream.headers.items():
                if key.lower() not in _HOP_HEADERS and key.lower() != "content-encoding":
                    response.headers[key] = value
            await response.prepare(request)
            async for data in upstream.content.iter_any():
                await response.write(data)
            await response.write_eof()
            return response


async def real_prompt_tokens(root_url: str, body: dict[str, Any]) -> int:
    """The server's own prompt count for ``body`` (re-sent unstreamed with a 1-token reply)."""
    probe = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
    probe.update(stream=False, max_tokens=1)
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=900)) as session,
        session.post(root_url.rstrip("/") + "/v1/chat/completions", json=probe) as answer,
    ):
        data = await answer.json()
        if answer.status != 200:
            raise RuntimeError(f"the model server refused the recorded request: HTTP {answer.status} {data}")
    return int(data["usage"]["prompt_tokens"])
