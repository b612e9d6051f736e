"""A run's event queue as its client reads it: text that piled up is sent as one event.

A run puts one ``content`` event on its queue per streamed chunk of the model's
answer (dozens a turn); each becomes an SSE message (JSON-encoded, written to the
socket) or an MCP progress notification. When the client reads more slowly than
the model streams, consecutive ``content`` events already waiting are joined into
one, so that a lagging client costs one write, not one per chunk. Nothing waits
for more text to arrive: an event is never held back, order is kept, and the text
read is the text streamed, byte for byte.

The wait on an empty queue is bounded with ``asyncio.timeout`` rather than
``asyncio.wait_for``, which (Python 3.11) wraps every wait in a task of its own.
"""

from __future__ import annotations

import asyncio

from ..agent.events import Event

__all__ = ["RunQueueReader"]


class RunQueueReader:
    """Reads events from a run's queue, consecutive waiting ``content`` events joined."""

    def __init__(self, queue: asyncio.Queue[Event]) -> None:
        self._queue = queue
        self._held: Event | None = None  # the event that ended a join, read next

    async def next(self, timeout: float) -> Event | None:
        """The next event; None if none came within ``timeout`` seconds (the caller's heartbeat)."""
        event = self._held
        if event is not None:
            self._held = None
        elif not self._queue.empty():
            event = self._queue.get_nowait()
        else:
            try:
                async with asyncio.timeout(timeout):
                    event = await self._queue.get()
            except TimeoutError:
                return None
        if event["type"] == "content" and not self._queue.empty():
            return self._joined(event)
        return event

    def _joined(self, first: Event) -> Event:
        """``first`` with the text of the ``content`` events queued right behind it; the next other event is held."""
        parts = [first["content"]]
        while not self._queue.empty():
            event = self._queue.get_nowait()
            if event["type"] != "content":
                self._held = event
                break
            parts.append(event["content"])
        return first if len(parts) == 1 else {**first, "content": "".join(parts)}
