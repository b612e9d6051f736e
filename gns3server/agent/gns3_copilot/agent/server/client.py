"""One client of an OpenAI-compatible model server's other endpoints, pooled per server.

Besides chat (the provider SDK's, ``model/factory.py``), the copilot asks a model
server three things: its tokenizer's count of a request's text (``tokens.py``),
and the prompt counts of small unstreamed probe requests, for what the tool
definitions cost (``tools_cost.py``) and whether its chat template renders tool
results (``tool_results.py``) or escapes message text (``tokens.py``). All of them
go through one :class:`ModelServerClient` per server: one ``httpx`` connection
pool, reused by every run that talks to that server (:class:`ModelServerClients`
holds them for the server's life, bounded, and closes them), and one seam
(:meth:`ModelServerClient.post`) where what httpx raises and answers that cannot
be read become :class:`ModelServerError`, ``raise ... from`` keeping the
original. The probes catch that one error, never an httpx one. Tests inject a
transport (``httpx.MockTransport``) instead of patching.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Self

import httpx

from ...errors import CopilotError, ErrorKind
from ..model.config import PROBE_TIMEOUT
from ..tls import verified_context

log = logging.getLogger(__name__)

__all__ = ["MAX_SERVERS", "ModelServerClient", "ModelServerClients", "ModelServerError"]

MAX_SERVERS = 32
"""Model servers whose clients are kept open at once; the least recently used one is closed beyond it."""


class ModelServerError(CopilotError):
    """A model server's endpoint gave no usable answer: unreachable, timed out, cut, not JSON.

    Probes never fail a run with it: they log it and calibrate as if the server could not tell.
    """

    code = "model_server_unusable"
    kind = ErrorKind.UPSTREAM


class ModelServerClient:
    """The endpoints of one OpenAI-compatible server besides chat, over one connection pool.

    ``base_url`` is the config's (``.../v1``); the tokenizer endpoints hang off the
    server's root (without ``/v1``). ``timeout`` bounds each request unless one says
    otherwise. Redirects are not followed: the endpoint policy judged ``base_url``.
    """

    def __init__(
        self, base_url: str, api_key: str | None = None, *, timeout: float = PROBE_TIMEOUT,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.root = self.base_url.removesuffix("/v1")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(headers=headers, timeout=timeout, transport=transport, follow_redirects=False,
                                         verify=verified_context())

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._client.aclose()

    @property
    def closed(self) -> bool:
        return self._client.is_closed

    async def post(self, url: str, body: Mapping[str, Any], *, timeout: float | None = None) -> Any | None:
        """The JSON answer to ``body`` when the server answers 200, None for any other status.

        The one seam: a request that fails (no connection, a timeout, a cut answer) or an
        answer that is not JSON is :class:`ModelServerError`.
        """
        try:
            answer = await self._client.post(url, json=dict(body), timeout=timeout or httpx.USE_CLIENT_DEFAULT)
            if answer.status_code != 200:
                log.debug("The model server answered %d to %s", answer.status_code, url)
                return None
            return answer.json()
        except httpx.HTTPError as exc:
            raise ModelServerError(f"The model server at {self.root} could not be asked ({type(exc).__name__})") from exc
        except ValueError as exc:  # not JSON
            raise ModelServerError(f"The model server at {self.root} answered something that is not JSON") from exc

    async def prompt_tokens(self, body: Mapping[str, Any], *, timeout: float | None = None) -> int | None:
        """The server's prompt count for an unstreamed chat request (its reported usage), None without one."""
        data = await self.post(self.base_url + "/chat/completions", body, timeout=timeout)
        usage = data.get("usage") if isinstance(data, Mapping) else None
        count = usage.get("prompt_tokens") if isinstance(usage, Mapping) else None
        return count if isinstance(count, int) and not isinstance(count, bool) else None


class ModelServerClients:
    """The clients of the model servers the runs talk to: one per server, key and timeout.

    Lives as long as the agent assembly (no module-level state); at most
    :data:`MAX_SERVERS` stay open, the least recently used one closed beyond it.
    """

    def __init__(self, max_servers: int = MAX_SERVERS, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self._clients: OrderedDict[tuple[str, str | None, float], ModelServerClient] = OrderedDict()
        self._max = max_servers
        self._transport = transport

    async def client(self, base_url: str, api_key: str | None, timeout: float) -> ModelServerClient:
        """The server's client (opened the first time it is asked for)."""
        key = (base_url.rstrip("/"), api_key, timeout)
        client = self._clients.get(key)
        if client is not None and not client.closed:
            self._clients.move_to_end(key)
            return client
        client = self._clients[key] = ModelServerClient(base_url, api_key, timeout=timeout, transport=self._transport)
        while len(self._clients) > self._max:
            _, oldest = self._clients.popitem(last=False)
            await oldest.aclose()
        return client

    def __len__(self) -> int:
        return len(self._clients)

    def clients(self) -> list[ModelServerClient]:
        """The clients open now, the least recently used first."""
        return list(self._clients.values())

    async def aclose(self) -> None:
        """Close every client (the server is stopping)."""
        clients, self._clients = list(self._clients.values()), OrderedDict()
        for client in clients:
            await client.aclose()
