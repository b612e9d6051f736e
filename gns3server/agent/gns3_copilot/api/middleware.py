"""A request-size limit for the copilot's routes (the rest of GNS3 is left alone).

Bodies are parsed in full before any check can run, so an absurdly large one is
refused from its ``Content-Length`` with 413; it is drained (read and dropped,
never stored) first, so that the client, still sending, reads the answer rather
than a reset connection.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Receive, Scope, Send

MAX_BODY_BYTES = 1024 * 1024


class BodySizeLimitMiddleware:
    """ASGI middleware: 413 ``{"message": ...}`` for bodies over ``max_bytes`` under ``prefix``."""

    def __init__(self, app: ASGIApp, *, prefix: str, max_bytes: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.prefix = prefix
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith(self.prefix):
            length = dict(scope["headers"]).get(b"content-length", b"")
            if length.isdigit() and int(length) > self.max_bytes:
                await self._drain(receive)
                await self._refuse(send)
                return
        await self.app(scope, receive, send)

    @staticmethod
    async def _drain(receive: Receive) -> None:
        while True:
            message = await receive()
            if message["type"] != "http.request" or not message.get("more_body", False):
                return

    async def _refuse(self, send: Send) -> None:
        body = json.dumps({"message": f"Request body too large (limit: {self.max_bytes} bytes)"}).encode()
        await send({
            "type": "http.response.start",
            "status": 413,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                        (b"connection", b"close")],
        })
        await send({"type": "http.response.body", "body": body})
