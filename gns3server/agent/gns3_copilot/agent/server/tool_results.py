"""Tool results in a form the model server's chat template keeps.

llama-cpp-python's ``chatml-function-calling`` format (and its role-mapping formats
such as ``chatml``) renders no ``tool`` message: the model never sees what its tools
returned, calls the same tool again, and the server's prompt count leaves out what
we counted. Whether a server does this cannot be read from its name, so it is
measured once per server and model (:func:`template_keeps_tool_results`): the same
small conversation is counted by the server with an empty tool result and with a
64-word one; if the second is not clearly longer, the template drops tool results.
For such servers :func:`tool_results_as_user` sends each result as a user message
that names the tool, which every template renders.

Both probe requests are unstreamed, ask for a 1-token reply and carry no tools,
through the server's one client (``client.py``). Their tool call has the id
:data:`PROBE_CALL_ID`, so a recording proxy can tell them apart.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage

from ..context.counting import content_text
from .client import ModelServerClient, ModelServerError

log = logging.getLogger(__name__)

__all__ = ["PROBE_CALL_ID", "TOOL_RESULT_HEADER", "is_template_probe", "template_keeps_tool_results", "tool_results_as_user"]

PROBE_CALL_ID = "call_copilot_template_probe"
TOOL_RESULT_HEADER = "[Result of the tool {name}]\n"
_PROBE_WORDS = 64
# Longer by at least this many tokens: the result reached the prompt (64 words are >= 64 tokens).
_KEPT_IF_LONGER_BY = _PROBE_WORDS // 2


def tool_results_as_user(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """``messages`` with every tool result turned into a user message naming its tool."""
    converted: list[BaseMessage] = []
    for message in messages:
        if isinstance(message, ToolMessage):
            header = TOOL_RESULT_HEADER.format(name=message.name or "call")
            converted.append(HumanMessage(content=header + content_text(message.content)))
        else:
            converted.append(message)
    return converted


def _probe_body(model: str, result: str) -> dict[str, Any]:
    call = {"id": PROBE_CALL_ID, "type": "function", "function": {"name": "read_value", "arguments": "{}"}}
    return {
        "model": model,
        "messages": [
            {"role": "user", "content": "Read the value."},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": PROBE_CALL_ID, "content": result},
        ],
        "max_tokens": 1,
        "temperature": 0,
        "stream": False,
    }


def is_template_probe(body: Any) -> bool:
    """Whether a chat request body is one of :func:`template_keeps_tool_results`' probes."""
    messages = body.get("messages") if isinstance(body, dict) else None
    return isinstance(messages, list) and any(
        isinstance(call, dict) and call.get("id") == PROBE_CALL_ID
        for message in messages if isinstance(message, dict)
        for call in message.get("tool_calls") or ()
    )


async def template_keeps_tool_results(client: ModelServerClient, model: str) -> bool | None:
    """Whether the server's prompt contains tool results; None when it cannot tell (no usage, an error)."""
    try:
        empty = await client.prompt_tokens(_probe_body(model, ""))
        full = await client.prompt_tokens(_probe_body(model, " ".join(["probe"] * _PROBE_WORDS)))
    except ModelServerError as exc:
        log.info("Could not check how the model server renders tool results (%s)", exc)
        return None
    if empty is None or full is None:
        log.info("The model server reports no prompt counts: tool results are sent as tool messages")
        return None
    kept = full - empty >= _KEPT_IF_LONGER_BY
    if not kept:
        log.warning("The model server's chat template drops tool results: they are sent as user messages")
    return kept
