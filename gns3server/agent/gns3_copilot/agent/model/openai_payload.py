"""OpenAI-protocol requests whose messages the SDK does not walk again on every call.

``langchain-openai`` builds the request as plain JSON-ready dicts, then hands them to
the OpenAI SDK's ``chat.completions.create``, which passes every argument through its
request transform (``async_maybe_transform``): each message is checked against every
member of the SDK's message union to rename aliased keys and format dates or files,
of which chat messages and tool definitions have none. That walk runs on the event
loop at ~0.2 ms per message: 100-200 ms per model call of a long conversation, twice
in a tool turn, for a body that comes out unchanged.

The SDK's documented ``extra_body`` is merged into the JSON body as it is, after the
transform; so the messages and the tool definitions go there, and the transformed
arguments carry an empty message list. The body sent is the same JSON.

Imported only when a model is built (``langchain_openai`` is heavy).
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import LanguageModelInput
from langchain_openai import ChatOpenAI

__all__ = ["LeanChatOpenAI", "untransformed"]

# The arguments that are already plain JSON and the largest: sent through ``extra_body``.
PASSED_AS_IS = ("messages", "tools")


def untransformed(payload: dict[str, Any]) -> dict[str, Any]:
    """``payload`` (``ChatOpenAI``'s keyword arguments to ``create``) with its messages and tool
    definitions in ``extra_body``; unchanged for a Responses API or structured-output request,
    which has no ``messages`` or goes through another SDK call."""
    if "messages" not in payload or "response_format" in payload:
        return payload
    extra = dict(payload.get("extra_body") or {})
    moved = {key: payload[key] for key in PASSED_AS_IS if key in payload and key not in extra}
    if not moved:
        return payload
    lean = {key: value for key, value in payload.items() if key not in moved}
    lean["messages"] = []  # required by ``create``; replaced by ``extra_body``'s in the body
    lean["extra_body"] = {**moved, **extra}
    return lean


class LeanChatOpenAI(ChatOpenAI):
    """``ChatOpenAI`` whose requests skip the SDK's transform of messages and tools."""

    def _get_request_payload(self, input_: LanguageModelInput, *, stop: list[str] | None = None, **kwargs: Any) -> dict:
        return untransformed(super()._get_request_payload(input_, stop=stop, **kwargs))
