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
