"""A request-size limit for the copilot's routes (the rest of GNS3 is left alone).

The limit holds whatever the client declares: a ``Content-Length`` over it is
refused at once, and a body sent without one (chunked) is counted as it arrives
and refused as soon as it passes the limit. Either way the route never sees the
body: it is read up to the limit here, then handed to the route from memory, so
no more than ``max_bytes`` of a request is ever held. A refused body is drained
(read and dropped, up to :data:`DRAIN_LIMIT_BYTES`) so that the client, still
sending, reads the 413 rather than a reset connection. On the MCP endpoint's
path (``jsonrpc``) the refusal is a JSON-RPC error object, which MCP clients
show; elsewhere it is GNS3's ``{"message": ...}``.
"""

from __future__ import annotations

import json
import logging
import re

from mcp.types import INVALID_REQUEST
from starlette.types import ASGIApp, Receive, Scope, Send

from ..asgi import replay_body
from ..mcp.requests import jsonrpc_error_body

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 1024 * 1024
DRAIN_LIMIT_BYTES = 64 * 1024 * 1024
"""Past this much of a refused body the connection is closed instead of read to its end."""


class BodyTooLarge(Exception):
    """The body passed the limit (raised inside the middleware only)."""


PathRule = str | re.Pattern[str]
"""Which paths are ours: a prefix, or a regular expression matched at the path's start."""


def path_matches(rule: PathRule, path: str) -> bool:
    return path.startswith(rule) if isinstance(rule, str) else rule.match(path) is not None


class BodySizeLimitMiddleware:
    """ASGI middleware: 413 ``{"message": ...}`` for bodies over ``max_bytes`` on paths ``prefix`` matches
    (a JSON-RPC error object on paths ``jsonrpc`` matches)."""

    def __init__(
        self, app: ASGIApp, *, prefix: PathRule, max_bytes: int = MAX_BODY_BYTES, jsonrpc: PathRule | None = None
    ) -> None:
        self.app = app
        self.prefix = prefix
        self.max_bytes = max_bytes
        self.jsonrpc = jsonrpc

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not path_matches(self.prefix, scope["path"]):
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length", b"")
        try:
            if length.isdigit() and int(length) > self.max_bytes:
                raise BodyTooLarge
            body = await self._read(receive)
        except BodyTooLarge:
            await self._drain(receive)
            await self._refuse(send, self.jsonrpc is not None and path_matches(self.jsonrpc, scope["path"]))
            return
        if body is not None:  # None: the client left before sending all of it; nobody to answer
            await self.app(scope, replay_body(body, receive), send)

    async def _read(self, receive: Receive) -> bytes | None:
        """The whole body (at most ``max_bytes``), or None if the client disconnects first."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                raise BodyTooLarge
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    @staticmethod
    async def _drain(receive: Receive) -> None:
        drained = 0
        while drained <= DRAIN_LIMIT_BYTES:
            message = await receive()
            if message["type"] != "http.request" or not message.get("more_body", False):
                return
            drained += len(message.get("body", b""))
        log.warning("Closing a connection whose refused request body went on past %d bytes", DRAIN_LIMIT_BYTES)

    async def _refuse(self, send: Send, jsonrpc: bool) -> None:
        message = f"Request body too large (limit: {self.max_bytes} bytes)"
        body = jsonrpc_error_body(INVALID_REQUEST, message) if jsonrpc else json.dumps({"message": message}).encode()
        await send({
            "type": "http.response.start",
            "status": 413,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                        (b"connection", b"close")],
        })
        await send({"type": "http.response.body", "body": body})

