"""Stopping a model that repeats the same tool call.

Small models, shown an error, often call the same tool with the same arguments
again, until the step limit (25 calls, minutes of a local server's time). Three
identical failures in one turn are enough to know it will not get better: the run
ends with a plain answer that says what failed, instead of another model call
(:func:`repeated_failure_answer`). Calls whose arguments are not valid JSON
(LangChain's ``invalid_tool_calls``, answered with an error) count the same way, by
name and raw arguments: a small model repeating the same junk would otherwise run to
the step limit. A call repeated as often that succeeded has
given the model what it will give: the next model call is made without tools, so
that it answers from what it has (:func:`repeats_a_call`).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ..context.counting import content_text

__all__ = ["REPEATED_FAILURE_LIMIT", "repeated_failure_answer", "repeats_a_call"]

REPEATED_FAILURE_LIMIT = 3
# How much of the tool's last error the answer quotes.
ERROR_EXCERPT_CHARS = 300

REPEATED_FAILURE_MESSAGE = (
    "I stopped: the tool {name} failed {n} times in a row with the same arguments, so trying again "
    "will not help. Its last error was:\n\n{error}\n\nTell me what to change (another device, "
    "other arguments), or check the lab, and ask again."
)


# (tool name, "json" for parsed arguments or "raw" for unparsable ones, the arguments' text)
_CallKey = tuple[str, str, str]


def _key(name: str, args: Any) -> _CallKey:
    return (name, "json", json.dumps(args or {}, sort_keys=True, default=str))


def _current_turn(messages: Sequence[BaseMessage]) -> Sequence[BaseMessage]:
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], HumanMessage):
            return messages[index + 1 :]
    return messages


def repeated_failure_answer(messages: Sequence[BaseMessage], limit: int = REPEATED_FAILURE_LIMIT) -> str | None:
    """The answer to give instead of calling the model again, or None to go on.

    Counts, within the current turn, tool calls with the same name and arguments
    whose result was an error (unparsable arguments compared as sent); ``limit`` of
    them end the run.
    """
    calls: dict[str, _CallKey] = {}
    failures: Counter[_CallKey] = Counter()
    last_error: dict[_CallKey, str] = {}
    for message in _current_turn(messages):
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                calls[call.get("id") or ""] = _key(call["name"], call.get("args"))
            for bad in message.invalid_tool_calls:
                calls[bad.get("id") or ""] = (bad.get("name") or "", "raw", str(bad.get("args") or ""))
        elif isinstance(message, ToolMessage) and message.status == "error":
            key = calls.get(message.tool_call_id)
            if key is not None:
                failures[key] += 1
                last_error[key] = content_text(message.content)
    for key, count in failures.items():
        if count >= limit:
            error = last_error[key]
            if len(error) > ERROR_EXCERPT_CHARS:
                error = error[:ERROR_EXCERPT_CHARS] + " [...]"
            return REPEATED_FAILURE_MESSAGE.format(name=key[0] or "(unnamed)", n=count, error=error)
    return None


def repeats_a_call(messages: Sequence[BaseMessage], limit: int = REPEATED_FAILURE_LIMIT) -> bool:
    """Whether the current turn has made the same tool call (name and arguments) ``limit`` times."""
    seen: Counter[_CallKey] = Counter()
    for message in _current_turn(messages):
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                seen[_key(call["name"], call.get("args"))] += 1
    return any(count >= limit for count in seen.values())
