"""The graph state's message reducer: LangGraph's ``add_messages``, at the cost of what is new.

``add_messages`` walks the whole list on every update (ids given to the messages
without one, an index of every id built, the list copied element by element into it),
four times a turn or more: at 500 turns that is some 1,250 messages walked per update
for the one or two it adds. Almost every update only appends messages whose ids the
list does not hold (the question, the model's reply, the tool results), so
:func:`append_messages` keeps the set of ids with the list it returned
(:class:`IndexedMessages`) and, when that is the case, appends and adds to the set.
Anything else (a replacement by id, a ``RemoveMessage``, chunks or dicts in the list,
a list it did not make) is ``add_messages`` itself, whose result it then indexes: the
result is the same list of the same messages in every case.

An index belongs to one list: the list made from it takes it over (and the old list
falls back to the full walk if it is ever extended again, as a branch of the graph
would), so no index is shared between two lists that differ. State lists are never
changed in place (LangGraph and the copilot make new ones); a list whose length is not
the one its index was made for is walked in full anyway.
"""

from __future__ import annotations

import uuid
from typing import Any

from langchain_core.messages import BaseMessage, BaseMessageChunk, RemoveMessage, convert_to_messages
from langchain_core.messages.utils import message_chunk_to_message
from langgraph.graph.message import add_messages

__all__ = ["IndexedMessages", "append_messages", "indexed_copy"]


class IndexedMessages(list[Any]):
    """A state message list that carries the set of its messages' ids, owned by it.

    It is a plain list to everything else (serialised, compared and copied as one).
    """

    __slots__ = ("_index", "_indexed")

    def __init__(self, messages: list[Any], index: set[str]) -> None:
        super().__init__(messages)
        self._index: set[str] | None = index
        self._indexed = len(messages)

    def _valid_index(self) -> set[str] | None:
        return self._index if self._index is not None and self._indexed == len(self) else None



def _new_messages(right: Any) -> list[BaseMessage] | None:
    """``right`` as add_messages reads it, ids given, when it only appends distinct plain messages
    (else None: add_messages decides)."""
    items = right if isinstance(right, list) else [right]
    if not all(isinstance(m, BaseMessage) and not isinstance(m, BaseMessageChunk) for m in items):
        items = [message_chunk_to_message(m) for m in convert_to_messages(items)]  # type: ignore[arg-type]
    ids: set[str] = set()
    for message in items:
        if isinstance(message, RemoveMessage):
            return None
        if message.id is None:
            message.id = str(uuid.uuid4())  # as add_messages does, on the message itself
        if message.id in ids:
            return None  # a later one replaces an earlier one of the same update
        ids.add(message.id)
    return items


def _indexed(messages: list[Any]) -> IndexedMessages:
    return IndexedMessages(messages, {m.id for m in messages})


def indexed_copy(messages: list[Any]) -> list[Any]:
    """A copy of a state's message list with its own index (a copy of the list's, when it has one):
    what a checkpointer hands the graph back, so that the next update, too, costs what it adds.

    A list that holds anything but messages with ids (add_messages gives them) is copied plain."""
    index = messages._valid_index() if isinstance(messages, IndexedMessages) else None
    if index is not None:
        return IndexedMessages(messages, set(index))
    if not all(isinstance(m, BaseMessage) and not isinstance(m, BaseMessageChunk) for m in messages):
        return list(messages)
    ids = {m.id for m in messages}
    return list(messages) if None in ids else IndexedMessages(messages, ids)


def append_messages(left: Any, right: Any) -> Any:
    """``add_messages(left, right)``, appending without walking ``left`` when ``right`` only adds
    messages whose ids ``left`` (a list this reducer returned) does not hold."""
    index = left._valid_index() if isinstance(left, IndexedMessages) else None
    if index is not None:
        added = _new_messages(right)
        if added is not None and not any(m.id in index for m in added):
            left._index = None  # handed over to the longer list
            index.update(m.id for m in added)
            return IndexedMessages([*left, *added], index)
    merged = add_messages(left, right)
    return _indexed(merged) if isinstance(merged, list) else merged
