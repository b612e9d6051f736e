"""The request dict of a plain chat message, made without ``langchain-openai``'s conversion.

``langchain-openai`` converts each message through checks for every kind of content it knows
(blocks of images, audio, files, reasoning, cache breakpoints, Responses-only tools), ~10 us a
message; a history read back after a restart has every message new to the model's memo, so the
first request of each conversation converted all of them (~750 at 500 turns: a tenth of that
turn's server time with 20 conversations starting at once). Almost every message of a
conversation is plain: text content, no name, nothing in ``additional_kwargs``. For those the
dict is a handful of keys, built here in the order ``langchain-openai`` writes them, so the JSON
sent is the same bytes. Anything else (another class, content blocks, a name, extra keyword
arguments, an invalid tool call) gets None, and ``langchain-openai`` converts it as before; so
does a system message: ``ChatOpenAI`` changes its role for some models (``developer`` for the
o-series), and a request has one, made anew for each call anyway.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

__all__ = ["plain_message_dict"]

def plain_message_dict(message: BaseMessage) -> dict[str, Any] | None:
    """``langchain-openai``'s chat-completions dict of ``message`` if it is plain, else None."""
    kind = type(message)
    content = message.content
    if type(content) is not str or message.additional_kwargs:
        return None
    if kind is ToolMessage:  # its name is not sent
        return {"content": content, "role": "tool", "tool_call_id": message.tool_call_id}  # type: ignore[attr-defined]
    if message.name:
        return None
    if kind is HumanMessage:
        return {"content": content, "role": "user"}
    if kind is not AIMessage:
        return None
    ai: AIMessage = message  # type: ignore[assignment]
    if ai.invalid_tool_calls:
        return None
    if not ai.tool_calls:
        return {"content": content, "role": "assistant"}
    calls = [{"type": "function", "id": call["id"],
              "function": {"name": call["name"], "arguments": json.dumps(call["args"], ensure_ascii=False)}}
             for call in ai.tool_calls]
    return {"content": content or None, "role": "assistant", "tool_calls": calls}
