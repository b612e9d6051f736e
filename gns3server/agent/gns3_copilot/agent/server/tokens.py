"""Counting with the model server's own tokenizer, for servers that report no usage when streaming.

llama-cpp-python's server ignores ``stream_options.include_usage``, so a streamed
answer says nothing about the prompt's real size and calibration never ran. Both
llama.cpp servers expose their tokenizer: llama-cpp-python as
``POST /extras/tokenize/count`` (``{"input": ...}`` -> ``{"count": n}``), llama.cpp's
own ``llama-server`` as ``POST /tokenize`` (``{"content": ...}`` -> ``{"tokens": [...]}``).

:class:`ServerTokenizer` sends the text of a prepared request (message texts, tool
calls, tool definitions) to whichever the server has and returns its count; the
graph turns it into the request's factor before sending it (``context.calibration``:
the chat template's framing around each message, which cannot be seen from outside,
is learnt from the usage a server reports).

Which endpoint works is remembered in the server's :class:`ServerTraits`; a server
with neither is asked once. Every request goes through the server's one client
(``client.py``).

A tokenizer counts text, not the prompt a template makes of it. llama-cpp-python
renders its chat templates with Jinja's HTML autoescape on: every ``"``, ``'``, ``&``,
``<`` and ``>`` of a message reaches the model as ``&#34;`` and the like, so a JSON
tool result costs three times what its text does (557 tokens for a 173-token list of
templates at 4K, 21 % under our estimate). Whether a server does this is measured once
(:meth:`ServerTokenizer.escapes`: a one-message request with such characters and one
without, unstreamed with a 1-token reply, the difference of their prompt counts against
the tokenizer's count of the text plain and escaped); when it does, message text is
counted escaped (:func:`markup_escaped`). The probe's text starts with
:data:`ESCAPE_PROBE_TEXT`, so a recording proxy can tell it apart.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.utils.function_calling import convert_to_openai_tool

from ..context.counting import content_text, json_text
from ..model.config import PROBE_TIMEOUT
from .client import ModelServerClient, ModelServerError
from .traits import ServerTraits

log = logging.getLogger(__name__)

__all__ = ["ESCAPE_PROBE_TEXT", "ServerTokenizer", "is_escape_probe", "markup_escaped", "request_text"]

TOKENIZE_TIMEOUT = 10.0
# What a template's HTML autoescape changes (Jinja/MarkupSafe's table).
_MARKUP_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&#34;", "'": "&#39;"})
ESCAPE_PROBE_TEXT = "Count this:"
_ESCAPE_PROBE_BODY = ' "a" & <b> \'c\'' * 16
# (trait value, path, body key, how to read the count)
_ENDPOINTS = (
    ("llama-cpp-python", "/extras/tokenize/count", "input", lambda data: data.get("count")),
    ("llama.cpp", "/tokenize", "content", lambda data: len(data["tokens"]) if isinstance(data.get("tokens"), list) else None),
)


def markup_escaped(text: str) -> str:
    """``text`` as an HTML-autoescaping template renders it."""
    return text.translate(_MARKUP_ESCAPES)


def is_escape_probe(body: Any) -> bool:
    """Whether a chat request body is one of :meth:`ServerTokenizer.escapes`' two requests."""
    messages = body.get("messages") if isinstance(body, dict) else None
    return (isinstance(messages, list) and len(messages) == 1 and isinstance(messages[0], dict)
            and str(messages[0].get("content") or "").startswith(ESCAPE_PROBE_TEXT))


def request_text(messages: Sequence[BaseMessage], tools: Sequence[Any], *, escaped: bool = False) -> str:
    """The text a request carries: every message's text and tool calls, and the tool definitions.

    ``escaped``: message text and call arguments as an autoescaping template renders
    them (tool definitions go through its ``tojson``, which does not escape this way).
    """
    parts: list[str] = []
    for message in messages:
        parts.append(content_text(message.content))
        if isinstance(message, AIMessage):
            parts.extend(f"{c['name']} {json_text(c.get('args') or {})}" for c in message.tool_calls)
    if escaped:
        parts = [markup_escaped(p) for p in parts]
    parts.extend(json_text(t if isinstance(t, Mapping) else convert_to_openai_tool(t)) for t in tools)
    return "\n".join(p for p in parts if p)


class ServerTokenizer:
    """The server's token count of a request's text (None when it cannot tell).

    ``probe_timeout`` bounds each request (a tokenizer is given at least
    :data:`TOKENIZE_TIMEOUT`: counting is quick, but a busy server answers late).
    """

    def __init__(
        self, client: ModelServerClient, traits: ServerTraits, model: str = "", probe_timeout: float = PROBE_TIMEOUT,
    ) -> None:
        self._client = client
        self._traits = traits
        self._model = model
        self._timeout = max(TOKENIZE_TIMEOUT, probe_timeout)

    async def _count(self, text: str) -> int | None:
        known = self._traits.tokenizer
        for name, path, key, read in _ENDPOINTS:
            if known not in (None, name):
                continue
            try:
                data = await self._client.post(self._client.root + path, {key: text}, timeout=self._timeout)
            except ModelServerError as exc:
                log.debug("Tokenizer endpoint %s of the model server failed: %s", path, exc)
                data = None
            count = read(data) if isinstance(data, Mapping) else None
            if isinstance(count, int) and count >= 0:
                self._traits.tokenizer = name
                return count
        if known is None:
            log.info("The model server has no tokenizer endpoint; token estimates stay uncalibrated without usage")
            self._traits.tokenizer = "none"
        return None

    async def escapes(self) -> bool:
        """Whether the server's template HTML-escapes message text (measured once per server).

        A server that reports no prompt counts, or whose counts fit neither reading, is
        taken at its tokenizer's word (not escaping).
        """
        traits = self._traits

        async def measure() -> None:
            traits.escapes_markup = await self._measure_escapes()

        await traits.learn("escapes_markup", lambda: traits.escapes_markup is not None, measure)
        return bool(traits.escapes_markup)

    async def _measure_escapes(self) -> bool:
        plain, marked = ESCAPE_PROBE_TEXT, ESCAPE_PROBE_TEXT + _ESCAPE_PROBE_BODY
        try:
            counts = [await self._client.prompt_tokens(_probe_body(self._model, text), timeout=self._timeout)
                      for text in (plain, marked)]
        except ModelServerError as exc:
            log.info("Could not check whether the model server escapes message text (%s)", exc)
            return False
        rendered = _growth(counts)
        if rendered is None:
            return False
        as_raw = _growth([await self._count(text) for text in (plain, marked)])
        as_escaped = _growth([await self._count(markup_escaped(text)) for text in (plain, marked)])
        if as_raw is None or as_escaped is None:
            return False
        escapes = abs(rendered - as_escaped) < abs(rendered - as_raw)
        if escapes:
            log.warning("The model server's chat template HTML-escapes message text: quotes and brackets "
                        "cost it several tokens each, and are counted so")
        return escapes

    async def count(self, messages: Sequence[BaseMessage], tools: Sequence[Any]) -> int | None:
        """The server's tokens for the text of this request as its template renders it (None: unknown)."""
        if self._traits.tokenizer is None:  # not tried yet: one run finds the endpoint, the others wait for it
            async with self._traits.probing("tokenizer"):
                if self._traits.tokenizer is None:
                    return await self._counted(messages, tools)
        if self._traits.tokenizer == "none":
            return None
        return await self._counted(messages, tools)

    async def _counted(self, messages: Sequence[BaseMessage], tools: Sequence[Any]) -> int | None:
        text = request_text(messages, tools)
        if not text:
            return None
        theirs = await self._count(text)
        if theirs is not None and await self.escapes():
            theirs = await self._count(request_text(messages, tools, escaped=True))
        return theirs


def _growth(counts: Sequence[int | None]) -> int | None:
    """How many tokens the marked probe text costs more than the plain one; None if either is unknown."""
    plain, marked = counts
    return None if plain is None or marked is None else marked - plain


def _probe_body(model: str, text: str) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": text}], "max_tokens": 1,
            "temperature": 0, "stream": False}
