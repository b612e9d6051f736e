"""``ChatOpenAI`` for OpenAI-compatible servers that are stricter than OpenAI.

LangChain sends an assistant message that has tool calls and no text as
``"content": null`` (what OpenAI documents). llama-cpp-python's server validates
``content`` as a string and answers HTTP 500 "Input should be a valid string";
since that message stays in the history, every later turn of the conversation
fails too. OpenAI, vLLM, Ollama and LM Studio all accept ``""``, so for servers
reached through a ``base_url`` we send ``""``.

The reply limit goes as ``max_tokens``: ``langchain-openai`` renamed it to OpenAI's
newer ``max_completion_tokens``, which llama-cpp-python's server does not know and
silently ignores (it then generates until its window is full). Ollama, vLLM,
LM Studio and llama.cpp all read ``max_tokens``.

Imported only when such a model is built (``langchain_openai`` is heavy).
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import LanguageModelInput
from langchain_openai import ChatOpenAI

__all__ = ["CompatibleChatOpenAI"]


class CompatibleChatOpenAI(ChatOpenAI):
    """``ChatOpenAI`` whose request never carries ``"content": null`` and limits the reply by ``max_tokens``."""

    def _get_request_payload(self, input_: LanguageModelInput, *, stop: list[str] | None = None, **kwargs: Any) -> dict:
        payload = super()._get_request_payload(input_, stop=stop, **kwargs)
        if "max_completion_tokens" in payload:
            payload["max_tokens"] = payload.pop("max_completion_tokens")
        for message in payload.get("messages") or ():
            if isinstance(message, dict) and "content" in message and message["content"] is None:
                message["content"] = ""
        return payload
