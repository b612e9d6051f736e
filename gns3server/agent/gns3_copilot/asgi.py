"""Small ASGI helpers shared by the middleware that reads a request body before a route does."""

from __future__ import annotations

from starlette.types import Message, Receive

__all__ = ["read_body", "replay_body"]


async def read_body(receive: Receive) -> bytes | None:
    """The whole request body, or None if the client disconnects first. The caller bounds its size
    (the body-size middleware has read it already when it reaches a copilot route)."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def replay_body(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives the body read already, then whatever the client sends next
    (its disconnect, which a streamed answer watches for)."""
    delivered = False

    async def replay() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
