"""A stored message row read back without validating the message again.

A row of ``copilot_messages`` is LangGraph's msgpack encoding of one LangChain message
(``serde.dumps_typed``): its class's module and name, and its fields as ``model_dump`` gave
them. LangGraph's decoder rebuilds it with the class's constructor, which validates every field
again: reading a long conversation back after a restart (some 1,250 messages, the first turn
of every session) spent ~40% of its time there, ~20 ms in the server. Those fields are the
validated fields of a message the copilot made, so the plain message classes below are built
from them as ``model_construct`` builds them: an equal object, with the same fields set (a row
holding every field of its class, in order, is given that dict as it is: ``model_construct``, which
looks each field up again, was half of a row's read in the server's profile). Anything else
in a row (another class, another msgpack extension, another serializer's type, a row this
does not read) is decoded by LangGraph's serializer, exactly as before. Only the classes named
here are built: nothing is imported by a name a row gives.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ormsgpack
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.serde.base import SerializerProtocol

__all__ = ["message_from_row"]

_PYDANTIC_V2 = 5
"""LangGraph's msgpack extension code for a pydantic v2 object: (module, name, fields, method)."""


@dataclass(frozen=True)
class _Direct:
    """What :func:`_built` needs of a class: its field names in order, and the one set of them
    every message of it read back shares as its fields set (see :func:`_built`)."""

    names: tuple[str, ...]
    fields_set: set[str]


def _direct(cls: type[Any]) -> _Direct | None:
    """How :func:`_built` makes what ``model_construct`` does for ``cls`` (None: it does not)."""
    simple = cls.model_config.get("extra") == "allow" and not cls.__private_attributes__ and not cls.__pydantic_post_init__
    return _Direct(tuple(cls.__pydantic_fields__), set(cls.__pydantic_fields__)) if simple else None


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
    cls, direct = plain
    if direct is None or tuple(fields) != direct.names:  # a field missing (another release's row) or one more
        return cls.model_construct(**fields)
    return _built(cls, fields, direct)


def _built(cls: type[Any], fields: dict[str, Any], direct: _Direct) -> Any:
    """What ``cls.model_construct(**fields)`` gives when ``fields`` holds every field of ``cls`` in
    order: a class allowing extras (none left over), with no private attributes or post-init.

    Its fields set is the class's one set of every field name, shared: a set of nine names takes
    728 bytes, a third of what a message read back holds. Pydantic only ever adds a field's name
    to it (assigning a field), which it already holds; a copy (``model_copy``) gets a set of its
    own, and extras go to ``__pydantic_extra__``, the message's own.
    """
    message = object.__new__(cls)
    _set(message, "__dict__", fields)
    _set(message, "__pydantic_fields_set__", direct.fields_set)
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
