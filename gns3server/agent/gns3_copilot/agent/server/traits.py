"""What a model server's answers taught us about its protocol, remembered per LLM config.

Some OpenAI-compatible servers cannot stream a tool call: llama-cpp-python's
``chatml-function-calling`` format answers a streamed request that ends in a tool
call with HTTP 200 and an empty body. The agent then repeats the call unstreamed
and records it here, so the next calls to that server (this run's and later
runs') go unstreamed at once instead of paying for an empty attempt each time.
Likewise whether its chat template renders tool results at all.

One :class:`ServerTraitsMemory` lives in the service (no module-level state); it
is keyed by what identifies a server and model, never by the API key.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ServerTraits", "ServerTraitsMemory"]

# Distinct (provider, base_url, model) remembered; the oldest is forgotten beyond it.
MAX_REMEMBERED = 256


@dataclass
class ServerTraits:
    """Protocol facts about one server and model, learnt from its answers."""

    streams_tool_calls: bool = True
    # Which tokenizer endpoint answers ("llama-cpp-python", "llama.cpp"), "none", or None: not tried yet.
    tokenizer: str | None = None
    # Whether its chat template HTML-escapes message text (llama-cpp-python's does); None: not measured.
    escapes_markup: bool | None = None
    # Whether its chat template renders tool results ("kept", "dropped"), "unknown" (it reports
    # no prompt counts), or None: not measured yet (agent/server/tool_results.py).
    tool_results: str | None = None
    # The server's tokens for each tool offer measured (agent/server/tools_cost.py; None: it cannot tell).
    tools_cost: dict[str, int | None] = field(default_factory=dict)
    _probes: dict[str, asyncio.Lock] = field(default_factory=dict, repr=False, compare=False)

    def probing(self, fact: str) -> asyncio.Lock:
        """The lock a fact not known yet is measured under, by the first run that needs it: the runs
        that need it meanwhile (20 conversations resumed at once after a restart) wait for that
        answer instead of each asking the server again. Taken on the server's event loop only."""
        return self._probes.setdefault(fact, asyncio.Lock())

    async def learn(self, fact: str, known: Callable[[], bool], measure: Callable[[], Awaitable[None]]) -> None:
        """``measure()`` (which records ``fact``) unless ``known()``: under :meth:`probing`, checked again
        once the lock is held, so the runs that waited find what the first one measured."""
        if known():
            return
        async with self.probing(fact):
            if not known():
                await measure()


class ServerTraitsMemory:
    """Thread-safe, bounded map from an LLM config's server identity to its traits."""

    def __init__(self, max_remembered: int = MAX_REMEMBERED) -> None:
        self._traits: OrderedDict[tuple[str, str, str], ServerTraits] = OrderedDict()
        self._lock = threading.Lock()
        self._max = max_remembered

    @staticmethod
    def key(llm_config: Mapping[str, Any]) -> tuple[str, str, str]:
        return (
            str(llm_config.get("provider") or "openai"),
            str(llm_config.get("base_url") or ""),
            str(llm_config.get("model") or ""),
        )

    def for_config(self, llm_config: Mapping[str, Any]) -> ServerTraits:
        """The (shared, mutable) traits of this config's server; fresh ones the first time."""
        key = self.key(llm_config)
        with self._lock:
            traits = self._traits.get(key)
            if traits is None:
                traits = self._traits[key] = ServerTraits()
                while len(self._traits) > self._max:
                    self._traits.popitem(last=False)
            else:
                self._traits.move_to_end(key)
            return traits
