"""What the tool definitions cost on a model server, measured once per offer.

One calibration factor cannot fit a request made of tool definitions and messages
when the server renders the two very differently. llama-cpp-python's
``chatml-function-calling`` format renders only each tool's name and parameters
(fewer tokens than our count of the whole definition), while SmolLM2's tokenizer
spends up to twice our count on the JSON of a topology result: at 4K a factor
learnt on the first requests (mostly definitions, 0.89) left later ones (mostly
JSON) 30 % short of the server's count, the side that overflows a window.

:func:`tools_prompt_tokens` asks the server for the definitions' real cost: the same
one-line question after a one-line system message (function-calling templates
render the definitions inside the system message, and none without one),
unstreamed with a 1-token reply, with and without the tools; the difference of the
prompt counts it reports (through the server's one client, ``client.py``). With
that known, the factor learns the messages alone (``context_manager``:
``tools_server_tokens``). The question is :data:`TOOLS_PROBE_QUESTION`, so a
recording proxy can tell the two requests apart.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.utils.function_calling import convert_to_openai_tool

from ..context.counting import json_text
from .client import ModelServerClient, ModelServerError

log = logging.getLogger(__name__)

__all__ = ["TOOLS_PROBE_QUESTION", "is_tools_probe", "offer_key", "tools_prompt_tokens"]

TOOLS_PROBE_QUESTION = "Reply with one word: ready."
PROBE_SYSTEM = "You answer briefly."


def is_tools_probe(body: Any) -> bool:
    """Whether a chat request body is one of :func:`tools_prompt_tokens`' two requests."""
    messages = body.get("messages") if isinstance(body, dict) else None
    return (isinstance(messages, list) and len(messages) == 2 and isinstance(messages[-1], dict)
            and messages[-1].get("content") == TOOLS_PROBE_QUESTION)


def _specs(tools: Sequence[Any]) -> list[dict[str, Any]]:
    """The definitions as sent: OpenAI tool dicts (a compact offer) or tools to convert."""
    return [dict(t) if isinstance(t, Mapping) else convert_to_openai_tool(t) for t in tools]


def offer_key(tools: Sequence[Any]) -> str:
    """What identifies a tool offer (the definitions as sent) among a server's measurements."""
    return json_text(_specs(tools))


def _body(model: str, tools: Sequence[Mapping[str, Any]] | None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        # A system message: function-calling templates (llama-cpp-python's) render the
        # definitions inside it, and render none without one.
        "messages": [{"role": "system", "content": PROBE_SYSTEM}, {"role": "user", "content": TOOLS_PROBE_QUESTION}],
        "max_tokens": 1,
        "temperature": 0,
        "stream": False,
    }
    if tools:
        body.update(tools=list(tools), tool_choice="auto")  # as the copilot offers them
    return body


async def tools_prompt_tokens(client: ModelServerClient, model: str, tools: Sequence[Any]) -> int | None:
    """The server's tokens for ``tools`` in a request; None when it cannot tell (no usage, an error)."""
    if not tools:
        return 0
    specs = _specs(tools)
    try:
        bare = await client.prompt_tokens(_body(model, None))
        offered = await client.prompt_tokens(_body(model, specs))
    except ModelServerError as exc:
        log.info("Could not measure what the tool definitions cost on the model server (%s)", exc)
        return None
    if bare is None or offered is None or offered < bare:
        log.info("The model server reports no usable prompt counts: tool definitions calibrate with the messages")
        return None
    log.info("Tool definitions cost %d tokens on the model server", offered - bare)
    return offered - bare
