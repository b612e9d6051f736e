"""Cutting tool-call arguments that would fill a small window.

A small model sometimes produces arguments that are junk: 1,801 characters of
unparsable text in one call seen with SmolLM2 at a 2K window. The call fails, but
the arguments stay in the history and go out again with every later request,
pushing it over the window. Once a call has been answered, arguments longer than
:func:`argument_limit` (parsable or not) are replaced, in what is sent and in what
is stored, by a marker that says how long they were; unparsable ones keep a short
excerpt so the model can see what it got wrong.
"""

from __future__ import annotations

import functools
import logging
import operator
from collections.abc import Iterator, Sequence
from itertools import compress
from typing import Any, cast

from langchain_core.messages import AIMessage, BaseMessage

from ..context.counting import json_text
from ..context.identity import IdentityMemo, PositionMemo

log = logging.getLogger(__name__)

__all__ = ["CUT_KEY", "argument_limit", "cut_arguments", "cut_tool_call_arguments", "with_cut_arguments"]

# Arguments longer than this many characters per 1,000 tokens of window are cut (at least MIN).
CHARS_PER_THOUSAND_TOKENS = 500
MIN_ARGUMENT_CHARS = 1000
EXCERPT_CHARS = 200
CUT_KEY = "_cut"
CUT_MARKER = "[arguments of {n} characters cut: longer than the {limit} characters kept for this window]"


def argument_limit(limit_tokens: int) -> int:
    """The longest arguments (in characters) kept in the history of a window of ``limit_tokens``."""
    return max(MIN_ARGUMENT_CHARS, limit_tokens * CHARS_PER_THOUSAND_TOKENS // 1000)


def cut_arguments(text: str, limit: int) -> str:
    """Unparsable arguments as kept: an excerpt and the marker when over ``limit``."""
    if len(text) <= limit:
        return text
    return text[: min(EXCERPT_CHARS, limit)] + " " + CUT_MARKER.format(n=len(text), limit=limit)


def _cut_call(call: Any, limit: int) -> Any:
    size = len(json_text(call.get("args") or {}))
    if size <= limit:
        return call
    return {**call, "args": {CUT_KEY: CUT_MARKER.format(n=size, limit=limit)}}


def _cut_invalid(call: Any, limit: int) -> Any:
    args = call.get("args")
    if not isinstance(args, str) or len(args) <= limit:
        return call
    return {**call, "args": cut_arguments(args, limit)}


def _cut_copy(message: AIMessage, limit: int) -> AIMessage | None:
    """A copy of ``message`` with its tool-call arguments over ``limit`` cut, or None when none is."""
    calls = [_cut_call(c, limit) for c in message.tool_calls]
    invalid = [_cut_invalid(c, limit) for c in message.invalid_tool_calls]
    if calls == list(message.tool_calls) and invalid == list(message.invalid_tool_calls):
        return None
    # The provider's raw copy of the calls goes too: it would be stored with the junk.
    extra = {k: v for k, v in message.additional_kwargs.items() if k not in ("tool_calls", "function_call")}
    return message.model_copy(update={"tool_calls": calls, "invalid_tool_calls": invalid, "additional_kwargs": extra})


_TOOL_CALLS, _INVALID_CALLS = operator.attrgetter("tool_calls"), operator.attrgetter("invalid_tool_calls")


def _with_calls(messages: Sequence[BaseMessage]) -> Iterator[AIMessage]:
    """The model messages of ``messages`` that make tool calls, picked with C-level iterators:
    a long history costs no Python step per message that makes none."""
    model_types = {t for t in set(map(type, messages)) if issubclass(t, AIMessage)}
    models = cast(list[AIMessage], list(compress(messages, map(model_types.__contains__, map(type, messages)))))
    return compress(models, map(operator.or_, map(bool, map(_TOOL_CALLS, models)), map(bool, map(_INVALID_CALLS, models))))


def cut_tool_call_arguments(
    messages: Sequence[BaseMessage], limit: int, memo: IdentityMemo | None = None,
    positions: PositionMemo | None = None,
) -> list[AIMessage]:
    """Copies (same ids) of the model messages in ``messages`` whose tool-call arguments are over ``limit``.

    Only those that need cutting are returned: the caller replaces them by id. ``memo`` keeps
    each message's answer with it (messages are never changed in place): given the same one at
    every model call, a message judged before costs a look-up, not its arguments serialised.
    ``positions`` keeps the answers of the conversation's last history: a message at the place
    it had then is not even looked up (a long history, judged at every model call).
    """

    def verdicts(items: list[BaseMessage]) -> list[AIMessage | None]:
        """Each item's cut copy, None where nothing is cut, at C speed past the messages without calls."""
        cut: dict[int, AIMessage | None] = {}
        for message in _with_calls(items):
            if message.id is None:
                continue  # without an id it could not replace the stored message
            cut[id(message)] = _cut_copy(message, limit) if memo is None else memo.get(
                message, ("cut", limit), functools.partial(_cut_copy, message, limit))
        return list(map(cut.get, map(id, items)))

    found = verdicts(list(messages)) if positions is None else positions.values(messages, verdicts, ("cut", limit))
    return list(filter(None, found))


def with_cut_arguments(
    messages: Sequence[BaseMessage], limit: int | None, memo: IdentityMemo | None = None,
    positions: PositionMemo | None = None,
) -> tuple[list[BaseMessage], list[AIMessage]]:
    """``messages`` with the tool-call arguments over ``limit`` cut, and the cut copies (to store, by id).

    Junk arguments of answered calls must not fill every later request: cut, and stored cut.
    ``memo``, ``positions``: as :func:`cut_tool_call_arguments` says.
    """
    cut = cut_tool_call_arguments(messages, limit, memo, positions) if limit else []
    if not cut:
        return list(messages), []
    log.warning("Cut the arguments of %d earlier tool call message(s): too long for this window", len(cut))
    replaced = {m.id: m for m in cut}
    return [replaced.get(m.id, m) if isinstance(m, AIMessage) else m for m in messages], cut
