"""What the runs of one server share instead of building it again for each.

A run's tools are its own (bound to the user's token, project and session), but
much of what was built from them for every run is not:

* the tool offer (the definitions the model is given and the context hook counts,
  at the level the window allows: ``policies/small_window.py``) depends only on the
  tools' definitions, the prompts and the window: one per such shape
  (:func:`offer_shape`), ~8 ms of CPU a run before;
* a chat model with an offer bound depends on the LLM profile and the offer: one
  per user, profile and offer, reused by that user's runs (the key in the profile is
  one user's: a model is never shared across users, even for a config they share);
  an OpenAI-protocol model then also keeps each message's request dict
  (``model/openai_payload.py``);
* the compiled graph (``gns3_copilot.compile_agent_graph``) is the same for every run.

Each is kept in a :class:`Kept`: bounded (least recently used first out) and
thread-safe, since runs build their parts in worker threads. The agent's assembly
owns them, so they live as long as the server.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, Generic, TypeVar

__all__ = ["KEPT_MODELS", "KEPT_OFFERS", "Kept", "config_key", "offer_shape", "tool_shape"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

KEPT_OFFERS = 64
"""Tool offers kept (modes x windows x prompt sets in use)."""
KEPT_MODELS = 64
"""Models kept (users x profiles in use, with and without tools)."""


class Kept(Generic[K, V]):
    """Values made once per key, the most recently used ``size`` kept."""

    def __init__(self, size: int) -> None:
        self._values: OrderedDict[K, V] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._values)

    def has(self, key: K) -> bool:
        """A value is kept under ``key`` now (counted as a use: it is kept longer)."""
        with self._lock:
            if key in self._values:
                self._values.move_to_end(key)
                return True
            return False

    def get(self, key: K, make: Callable[[], V]) -> V:
        """The value kept under ``key``, else ``make()``'s, kept (made outside the lock: a model's
        construction must not hold up other runs; two racing runs keep the first)."""
        with self._lock:
            if key in self._values:
                self._values.move_to_end(key)
                return self._values[key]
        value = make()
        with self._lock:
            value = self._values.setdefault(key, value)
            self._values.move_to_end(key)
            while len(self._values) > self._size:
                self._values.popitem(last=False)
        return value


def _schema_key(schema: Any) -> Hashable:
    if schema is None or isinstance(schema, type):
        return schema  # a pydantic model class: its definition is the class's
    return json.dumps(schema, sort_keys=True, default=str)


def tool_shape(tool: Any) -> Hashable:
    """What a tool's definition for the model is made of (not the run it is bound to)."""
    if isinstance(tool, Mapping):
        return json.dumps(tool, sort_keys=True, default=str)
    extras = getattr(tool, "extras", None)
    return (type(tool), tool.name, tool.description, _schema_key(getattr(tool, "args_schema", None)),
            json.dumps(extras, sort_keys=True, default=str) if extras else None)


def offer_shape(tools: Sequence[Any], *parts: Hashable) -> Hashable:
    """The key of a tool offer: its tools' shapes and whatever else it was chosen by (prompts, window)."""
    return (tuple(tool_shape(t) for t in tools), *parts)


def config_key(config: Mapping[str, Any]) -> str:
    """An LLM config (its key included) as a key: the same for equal configs."""
    return json.dumps(dict(config), sort_keys=True, default=str)
