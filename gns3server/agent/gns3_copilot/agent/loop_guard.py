"""Stopping a model that repeats the same tool call.

Small models, shown an error, often call the same tool with the same arguments
again, until the step limit (25 calls, minutes of a local server's time). Three
identical failures in one turn are enough to know it will not get better: the run
ends with a plain answer that says what failed, instead of another model call
(:func:`repeated_failure_answer`). A call repeated as often that succeeded has
given the model what it will give: the next model call is made without tools, so
that it answers from what it has (:func:`repeats_a_call`).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from .context.counting import content_text

__all__ = ["REPEATED_FAILURE_LIMIT", "repeated_failure_answer", "repeats_a_call"]

REPEATED_FAILURE_LIMIT = 3
# How much of the tool's last error the answer quotes.
ERROR_EXCERPT_CHARS = 300

REPEATED_FAILURE_MESSAGE = (
    "I stopped: the tool {name} failed {n} times in a row with the same arguments, so trying again "
    "will not help. Its last error was:\n\n{error}\n\nTell me what to change (another device, "
    "other arguments), or check the lab, and ask again."
)


def _current_turn(messages: Sequence[BaseMessage]) -> Sequence[BaseMessage]:
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], HumanMessage):
            return messages[index + 1 :]
    return messages


def repeated_failure_answer(messages: Sequence[BaseMessage], limit: int = REPEATED_FAILURE_LIMIT) -> str | None:
    """The answer to give instead of calling the model again, or None to go on.

    Counts, within the current turn, tool calls with the same name and arguments
    whose result was an error; ``limit`` of them end the run.
    """
    calls: dict[str, tuple[str, str]] = {}
    failures: Counter[tuple[str, str]] = Counter()
    last_error: dict[tuple[str, str], str] = {}
    for message in _current_turn(messages):
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                calls[call.get("id") or ""] = (call["name"], json.dumps(call.get("args") or {}, sort_keys=True, default=str))
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
            return REPEATED_FAILURE_MESSAGE.format(name=key[0], n=count, error=error)
    return None


def repeats_a_call(messages: Sequence[BaseMessage], limit: int = REPEATED_FAILURE_LIMIT) -> bool:
    """Whether the current turn has made the same tool call (name and arguments) ``limit`` times."""
    seen: Counter[tuple[str, str]] = Counter()
    for message in _current_turn(messages):
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                seen[(call["name"], json.dumps(call.get("args") or {}, sort_keys=True, default=str))] += 1
    return any(count >= limit for count in seen.values())
