"""Counting with the model server's own tokenizer, for servers that report no usage when streaming.

llama-cpp-python's server ignores ``stream_options.include_usage``, so a streamed
answer says nothing about the prompt's real size and calibration never ran. Both
llama.cpp servers expose their tokenizer: llama-cpp-python as
``POST /extras/tokenize/count`` (``{"input": ...}`` -> ``{"count": n}``), llama.cpp's
own ``llama-server`` as ``POST /tokenize`` (``{"content": ...}`` -> ``{"tokens": [...]}``).

:class:`ServerTokenizer` sends the text of a prepared request (message texts, tool
calls, tool definitions) to whichever the server has, counts the same text with our
tiktoken encoding, and returns the ratio: the provider-tokens-per-our-token factor
the calibration smooths. The chat template's own framing is not in it (it cannot be
seen from outside); the usage a server reports, when it does, is preferred.

Which endpoint works is remembered in the server's :class:`ServerTraits`; a server
with neither is asked once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.utils.function_calling import convert_to_openai_tool

from .context.counting import content_text, json_text
from .context.tokenizer import get_encoding
from .server_traits import ServerTraits

log = logging.getLogger(__name__)

__all__ = ["ServerTokenizer", "request_text"]

TOKENIZE_TIMEOUT = 10.0
# (trait value, path, body key, how to read the count)
_ENDPOINTS = (
    ("llama-cpp-python", "/extras/tokenize/count", "input", lambda data: data.get("count")),
    ("llama.cpp", "/tokenize", "content", lambda data: len(data["tokens"]) if isinstance(data.get("tokens"), list) else None),
)


def request_text(messages: Sequence[BaseMessage], tools: Sequence[Any]) -> str:
    """The text a request carries: every message's text and tool calls, and the tool definitions."""
    parts: list[str] = []
    for message in messages:
        parts.append(content_text(message.content))
        if isinstance(message, AIMessage):
            parts.extend(f"{c['name']} {json_text(c.get('args') or {})}" for c in message.tool_calls)
    parts.extend(json_text(t if isinstance(t, Mapping) else convert_to_openai_tool(t)) for t in tools)
    return "\n".join(p for p in parts if p)


def _server_root(base_url: str) -> str:
    root = base_url.rstrip("/")
    return root.removesuffix("/v1")


class ServerTokenizer:
    """The server's token count of a request's text, divided by ours (None when unknown)."""

    def __init__(self, base_url: str, api_key: str | None, encoding: str, traits: ServerTraits) -> None:
        self._root = _server_root(base_url)
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._encoding = encoding
        self._traits = traits

    async def _count(self, client: httpx.AsyncClient, text: str) -> int | None:
        known = self._traits.tokenizer
        for name, path, key, read in _ENDPOINTS:
            if known not in (None, name):
                continue
            try:
                answer = await client.post(self._root + path, json={key: text}, headers=self._headers)
                count = read(answer.json()) if answer.status_code == 200 else None
            except (httpx.HTTPError, ValueError, TypeError, KeyError) as exc:
                log.debug("Tokenizer endpoint %s of the model server failed: %s", path, type(exc).__name__)
                count = None
            if isinstance(count, int) and count >= 0:
                self._traits.tokenizer = name
                return count
        if known is None:
            log.info("The model server has no tokenizer endpoint; token estimates stay uncalibrated without usage")
            self._traits.tokenizer = "none"
        return None

    async def scale(self, messages: Sequence[BaseMessage], tools: Sequence[Any]) -> float | None:
        """Server tokens per tiktoken token for the text of this request."""
        if self._traits.tokenizer == "none":
            return None
        text = request_text(messages, tools)
        if not text:
            return None
        async with httpx.AsyncClient(timeout=TOKENIZE_TIMEOUT) as client:
            theirs = await self._count(client, text)
        if not theirs:
            return None
        # Tokenising is CPU work: off the loop.
        ours = await asyncio.to_thread(lambda: len(get_encoding(self._encoding).encode_ordinary(text)))
        return theirs / ours if ours else None
