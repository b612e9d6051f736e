"""Helpers for reading a copilot run's event stream in tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from typing import Any


async def collect(stream: AsyncIterator[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every event of a run, up to and including ``done``."""
    return [event async for event in stream]


def text_of(events: Iterable[dict[str, Any]]) -> str:
    """The answer text streamed in ``content`` events."""
    return "".join(e["content"] for e in events if e["type"] == "content")


async def read_until(stream: AsyncIterator[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The events of a run up to and including the first of type ``kind`` (the stream goes on)."""
    seen: list[dict[str, Any]] = []
    async for event in stream:
        seen.append(event)
        if event["type"] == kind:
            return seen
    raise AssertionError(f"the stream ended without a {kind!r} event: {[e['type'] for e in seen]}")
