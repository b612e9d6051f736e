"""What kind of model server an LLM config points at, decided in one place.

Three questions were answered apart, by four predicates that could disagree:

* does OpenAI itself render the tool definitions (so counting them as OpenAI
  does is exact, ``context_manager.tools_style_for``)?
* is it an OpenAI-compatible server reached through the config's ``base_url``
  (llama.cpp, Ollama ``/v1``, vLLM, LM Studio, DeepSeek)? Such a server is spoken
  to with ``CompatibleChatOpenAI`` and probed for its tokenizer and its chat
  template's habits;
* is it the lab's own server, which serves one request at a time
  (``local.is_local_host``, or the config's ``local_server``)? A background
  summary then never competes with a question.

:func:`server_kind` answers all three from ``provider``, ``base_url`` and
``local_server``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from .local import is_local_host

__all__ = ["ServerKind", "one_slot_server", "server_kind"]


@dataclass(frozen=True)
class ServerKind:
    """The facts about a config's model server (see the module's docstring)."""

    provider: str
    base_url: str | None
    compatible: bool
    """OpenAI's protocol at a ``base_url`` of the config's own."""
    exact_tool_counts: bool
    """OpenAI's own API: it renders tool definitions as we count them."""
    one_slot: bool
    """The lab's own server (often one request at a time)."""

    @property
    def compatible_server(self) -> str | None:
        """The ``base_url`` of an OpenAI-compatible server (probed), else None."""
        return self.base_url if self.compatible else None

    @property
    def one_slot_server(self) -> str | None:
        """The ``base_url`` of the lab's own server, else None."""
        return self.base_url if self.one_slot else None


def server_kind(llm_config: Mapping[str, Any]) -> ServerKind:
    """What kind of server ``llm_config`` points at."""
    provider = str(llm_config.get("provider") or "openai")
    raw = llm_config.get("base_url")
    base_url = raw if isinstance(raw, str) and raw else None
    local = llm_config.get("local_server")
    if local is None:
        local = base_url is not None and is_local_host(urlsplit(base_url).hostname or "")
    return ServerKind(
        provider=provider,
        base_url=base_url,
        compatible=provider == "openai" and base_url is not None,
        exact_tool_counts=provider == "openai" and (base_url is None or "api.openai.com" in base_url.lower()),
        one_slot=base_url is not None and bool(local),
    )


def one_slot_server(llm_config: Mapping[str, Any]) -> str | None:
    """The ``base_url`` of the config's model server when it is the lab's own, else None."""
    return server_kind(llm_config).one_slot_server
