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

The set belongs to one list at a time (see :class:`IndexedMessages`), so it is always the
exact set of that list's ids. State lists are never changed in place (LangGraph and the
copilot make new ones); a list whose length is not the one its set was made for is walked
in full anyway.
"""

from __future__ import annotations

import copy
import operator
import uuid
from collections.abc import Sequence
from typing import Any, SupportsIndex

from langchain_core.messages import BaseMessage, BaseMessageChunk, RemoveMessage, convert_to_messages
from langchain_core.messages.utils import message_chunk_to_message
from langgraph.graph.message import add_messages

__all__ = ["IndexedMessages", "append_messages", "indexed_copy", "kept_copy", "successor_copy"]

_ID = operator.attrgetter("id")  # C speed over a long list


class IndexedMessages(list[Any]):
    """A state message list that carries the set of its messages' ids.

    It is a plain list to everything else (serialised, compared and copied as one). The set is
    handed down to the list made from this one by appending (its *child*, which adds its ids),
    and taken back, those ids removed again, when this list is extended a second time (a
    graph's branch reads the state with a node's update applied, then the update is applied
    for real): one set, held by one list at a time, the exact ids of that list.
    """

    __slots__ = ("_added", "_child", "_index", "_indexed")

    def __init__(self, messages: list[Any], index: set[str]) -> None:
        super().__init__(messages)
        self._index: set[str] | None = index
        self._indexed = len(messages)
        # Held (not weakly): a branch's list is dropped before the update it read is applied again.
        self._child: IndexedMessages | None = None
        self._added: tuple[str, ...] = ()

    # A copy gets a set of its own (copies sharing one could lose each other's ids); pickled, a plain list.
    def __copy__(self) -> list[Any]:
        return indexed_copy(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return [copy.deepcopy(m, memo) for m in self]

    def __reduce_ex__(self, protocol: SupportsIndex) -> tuple[Any, ...]:
        return list, (list(self),)

    def _owned_index(self) -> set[str] | None:
        """The set of this list's ids (taken back from its descendants if they hold it), or None."""
        if self._indexed != len(self):
            return None  # changed in place: not what the set was made for
        if self._index is not None:
            return self._index
        path: list[IndexedMessages] = []
        node: IndexedMessages | None = self
        while node is not None and node._index is None:
            path.append(node)
            node = node._child
        if node is None or node._index is None or node._indexed != len(node):
            return None
        index, node._index = node._index, None
        for parent in path:
            index.difference_update(parent._added)
            parent._child, parent._added = None, ()
        self._index = index
        return index

    def _extended(self, added: list[BaseMessage], index: set[str]) -> IndexedMessages:
        """This list with ``added`` (ids not in ``index``, this list's set) appended; the set goes with it."""
        ids = tuple(m.id for m in added if m.id is not None)
        index.update(ids)
        child = IndexedMessages([*self, *added], index)
        self._index, self._child, self._added = None, child, ids
        return child


def _new_messages(right: Any) -> list[BaseMessage] | None:
    """``right`` as add_messages reads it, ids given, when it only appends distinct plain messages
    (else None: add_messages decides)."""
    items = right if isinstance(right, list) else [right]
    if not all(isinstance(m, BaseMessage) and not isinstance(m, BaseMessageChunk) for m in items):
        items = [message_chunk_to_message(m) for m in convert_to_messages(items)]
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
    return IndexedMessages(messages, set(map(_ID, messages)))


def indexed_copy(messages: list[Any]) -> list[Any]:
    """A copy of a state's message list with a set of its ids of its own: what a checkpointer hands
    the graph back, so that the run's first update, too, costs what it adds.

    The set is built from the messages, not copied from the list's: a checkpointer calls this on
    its own thread, where the list's set may be changing hands. A list that holds anything but
    messages with ids (add_messages gives them) is copied plain."""
    if not all(issubclass(t, BaseMessage) and not issubclass(t, BaseMessageChunk) for t in set(map(type, messages))):
        return list(messages)
    ids = set(map(_ID, messages))
    return list(messages) if None in ids else IndexedMessages(messages, ids)


def _unextended_index(messages: list[Any] | None) -> set[str] | None:
    """The set of a list :func:`indexed_copy` or :func:`successor_copy` made that nobody extends
    (no reducer ever gets it: the message log keeps it and hands out copies), else None."""
    if type(messages) is IndexedMessages and messages._child is None and messages._indexed == len(messages):
        return messages._index
    return None


def kept_copy(messages: list[Any]) -> list[Any]:
    """:func:`indexed_copy` of a list that nobody extends (see :func:`_unextended_index`): its set
    copied, no message read. Reading each of a long history's messages again costs ~0.3 µs apiece
    in a long-running server's heap, at every turn's checkpoint read."""
    index = _unextended_index(messages)
    return indexed_copy(messages) if index is None else IndexedMessages(messages, set(index))


def successor_copy(before: list[Any] | None, messages: list[Any], changed: Sequence[int]) -> list[Any]:
    """:func:`indexed_copy` of ``messages``, where ``before`` (a list that nobody extends; None: none
    kept) holds the same objects at every position but ``changed`` and those past either's end: only
    those are read.

    The set is ``before``'s, less the ids of what left, plus the ids of what came. Ids are unique in
    a state's list, so it holds exactly as many ids as ``messages`` has messages; when it does not,
    or anything else is unusual, the list is indexed from scratch."""
    index = _unextended_index(before)
    if index is None or before is None:
        return indexed_copy(messages)
    came = [messages[position] for position in changed if position < len(messages)]
    if not all(isinstance(m, BaseMessage) and not isinstance(m, BaseMessageChunk) and m.id is not None for m in came):
        return indexed_copy(messages)
    ids = set(index)
    ids.difference_update(before[position].id for position in changed if position < len(before))
    ids.difference_update(map(_ID, before[len(messages):]))
    ids.update(map(_ID, came))
    return IndexedMessages(messages, ids) if len(ids) == len(messages) else indexed_copy(messages)


def append_messages(left: Any, right: Any) -> Any:
    """``add_messages(left, right)``, appending without walking ``left`` when ``right`` only adds
    messages whose ids ``left`` (a list this reducer returned) does not hold."""
    index = left._owned_index() if isinstance(left, IndexedMessages) else None
    if index is not None:
        added = _new_messages(right)
        if added is not None and not any(m.id in index for m in added):
            return left._extended(added, index)
    merged = add_messages(left, right)
    return _indexed(merged) if isinstance(merged, list) else merged
