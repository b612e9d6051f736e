"""A stored message row read back without validating the message again.

A row of ``copilot_messages`` is LangGraph's msgpack encoding of one LangChain message
(``serde.dumps_typed``): its class's module and name, and its fields as ``model_dump`` gave
them. LangGraph's decoder rebuilds it with the class's constructor, which validates every field
again: reading a long conversation back after a restart (some 1,250 messages, the first turn
of every session) spent ~40% of its time there, ~20 ms in the server. Those fields are the
validated fields of a message the copilot made, so the plain message classes below are built
from them as ``model_construct`` builds them: an equal object, with the same fields set (a row
holding every field of its class, in order, is given that dict as it is: ``model_construct`` looks
each field up again, half the cost of reading a row back). Anything else
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


def _direct(cls: type[Any]) -> tuple[str, ...] | None:
    """The field names of ``cls`` if :func:`_built` makes what ``model_construct`` does for it (None: it does not)."""
    simple = cls.model_config.get("extra") == "allow" and not cls.__private_attributes__ and not cls.__pydantic_post_init__
    return tuple(cls.__pydantic_fields__) if simple else None


_PLAIN = {(cls.__module__, cls.__name__): (cls, _direct(cls)) for cls in (AIMessage, HumanMessage, SystemMessage, ToolMessage)}
_OPTIONS = ormsgpack.OPT_NON_STR_KEYS  # as LangGraph's serializer reads


def _construct(code: int, data: bytes) -> Any:
    """One of the row's extensions, if it is a plain message; a ValueError (ormsgpack's decoding
    error, as it reports any error of this hook) for anything else."""
    if code != _PYDANTIC_V2:
        raise ValueError(f"msgpack extension {code}")
    module, name, fields, _ = ormsgpack.unpackb(data, ext_hook=_construct, option=_OPTIONS)
    plain = _PLAIN.get((module, name))
    if plain is None:
        raise ValueError(f"{module}.{name}")
    cls, names = plain
    if names is None or tuple(fields) != names:  # a field missing (another release's row) or one more: defaults and extras
        return cls.model_construct(**fields)
    return _built(cls, fields, names)


def _built(cls: type[Any], fields: dict[str, Any], names: tuple[str, ...]) -> Any:
    """What ``cls.model_construct(**fields)`` gives when ``fields`` holds every field of ``cls`` in
    order: a class allowing extras (none left over), with no private attributes or post-init."""
    message = object.__new__(cls)
    _set(message, "__dict__", fields)
    _set(message, "__pydantic_fields_set__", set(names))
    _set(message, "__pydantic_extra__", {})
    _set(message, "__pydantic_private__", None)
    return message


_set = object.__setattr__


def message_from_row(serde: SerializerProtocol, type_: str, blob: bytes) -> Any:
    """The message ``serde.loads_typed((type_, blob))`` gives, built without validating a plain one again."""
    if type_ == "msgpack":
        try:
            return ormsgpack.unpackb(blob, ext_hook=_construct, option=_OPTIONS)
        except (TypeError, ValueError):  # not a plain message, or not readable: decoded (or refused) as before
            return serde.loads_typed((type_, blob))
    return serde.loads_typed((type_, blob))
