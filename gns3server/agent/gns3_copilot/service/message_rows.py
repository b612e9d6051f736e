"""A stored message row read back without validating the message again.

A row of ``copilot_messages`` is LangGraph's msgpack encoding of one LangChain message
(``serde.dumps_typed``): its class's module and name, and its fields as ``model_dump`` gave
them. LangGraph's decoder rebuilds it with the class's constructor, which validates every field
again: reading a long conversation back after a restart (some 1,250 messages, the first turn
of every session) spent ~40% of its time there, ~20 ms in the server. Those fields are the
validated fields of a message the copilot made, so the plain message classes below are built
from them with ``model_construct``: an equal object, with the same fields set. Anything else
in a row (another class, another msgpack extension, another serializer's type, a row this
does not read) is decoded by LangGraph's serializer, exactly as before. Only the classes named
here are built: nothing is imported by a name a row gives.
"""

from __future__ import annotations

from typing import Any

import ormsgpack
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.serde.base import SerializerProtocol

__all__ = ["message_from_row"]

_PYDANTIC_V2 = 5
"""LangGraph's msgpack extension code for a pydantic v2 object: (module, name, fields, method)."""
_PLAIN = {(cls.__module__, cls.__name__): cls for cls in (AIMessage, HumanMessage, SystemMessage, ToolMessage)}
_OPTIONS = ormsgpack.OPT_NON_STR_KEYS  # as LangGraph's serializer reads


def _construct(code: int, data: bytes) -> Any:
    """One of the row's extensions, if it is a plain message; a ValueError (ormsgpack's decoding
    error, as it reports any error of this hook) for anything else."""
    if code != _PYDANTIC_V2:
        raise ValueError(f"msgpack extension {code}")
    module, name, fields, _ = ormsgpack.unpackb(data, ext_hook=_construct, option=_OPTIONS)
    cls = _PLAIN.get((module, name))
    if cls is None:
        raise ValueError(f"{module}.{name}")
    return cls.model_construct(**fields)


def message_from_row(serde: SerializerProtocol, type_: str, blob: bytes) -> Any:
    """The message ``serde.loads_typed((type_, blob))`` gives, built without validating a plain one again."""
    if type_ == "msgpack":
        try:
            return ormsgpack.unpackb(blob, ext_hook=_construct, option=_OPTIONS)
        except (TypeError, ValueError):  # not a plain message, or not readable: decoded (or refused) as before
            return serde.loads_typed((type_, blob))
    return serde.loads_typed((type_, blob))
