"""What is derived from an object, kept with that object for as long as it lives.

The copilot never changes a message in place (it copies one to change it), so a
message object stands for its content: what is a pure function of it (its token
count, its masked copy, its request dict) can be looked up by the object's
identity instead of being computed, or keyed by content, again at every model
call. The memo holds a weak reference to each object: it keeps nothing alive, and
an entry goes with its object.
"""

from __future__ import annotations

import operator
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from itertools import compress
from typing import Any

__all__ = ["MISSING", "IdentityMemo", "PositionMemo"]

MISSING: Any = object()
"""What :meth:`IdentityMemo.peek_all` gives for an object with no value kept under the key."""


class _Entry(weakref.ref):
    """A weak reference to an object that carries what is kept for it, and its ``id`` (its key):
    one small object an entry, and one callback for all (a closure and a tuple an entry cost twice
    as much to make, ~1,250 of them in each memo on the first call of a long history read back)."""

    __slots__ = ("ident", "values")
    ident: int
    values: dict[Hashable, Any]


class IdentityMemo:
    """``id(object) -> weak reference carrying {key: value}``; objects must support weak references.

    Safe across threads for what it is used for: a lost race computes a value twice, and
    both are the same pure function of the object.
    """

    def __init__(self) -> None:
        self._objects: dict[int, _Entry] = {}
        objects = self._objects

        def gone(entry: _Entry) -> None:  # an entry goes with its object (not one that took its id since)
            if objects.get(entry.ident) is entry:
                del objects[entry.ident]

        self._gone = gone

    def __len__(self) -> int:
        return len(self._objects)

    def _values(self, obj: object) -> dict[Hashable, Any]:
        """The values kept for ``obj``, a new entry if it has none."""
        entry = self._objects.get(id(obj))
        if entry is not None and entry() is obj:
            return entry.values
        entry = _Entry(obj, self._gone)
        entry.ident, entry.values = id(obj), {}
        self._objects[entry.ident] = entry
        return entry.values

    def get(self, obj: object, key: Hashable, compute: Callable[[], Any]) -> Any:
        """``compute()``, kept under ``key`` for as long as ``obj`` lives."""
        values = self._values(obj)
        if key in values:
            return values[key]
        value = values[key] = compute()
        return value

    def put(self, obj: object, key: Hashable, value: Any) -> None:
        """Keep ``value`` under ``key`` for as long as ``obj`` lives (replacing any kept before)."""
        self._values(obj)[key] = value

    def peek_all(self, objs: Sequence[object], key: Hashable) -> list[Any]:
        """The value kept under ``key`` for each of ``objs``, :data:`MISSING` where none is: one
        pass, no call per object (a long request's messages are looked up at every model call)."""
        objects = self._objects
        found: list[Any] = []
        append = found.append
        for obj in objs:
            entry = objects.get(id(obj))
            append(entry.values.get(key, MISSING) if entry is not None and entry() is obj else MISSING)
        return found

    def peek(self, obj: object, key: Hashable) -> tuple[bool, Any]:
        """(True, the value) when one is kept for ``obj`` under ``key``, else (False, None)."""
        entry = self._objects.get(id(obj))
        if entry is not None and entry() is obj and key in entry.values:
            return True, entry.values[key]
        return False, None


class PositionMemo:
    """What was derived from each item of the last lists seen, reused for the items of a new list
    that are the same objects at the same positions.

    A model call's messages are the previous call's plus a few (the question, the answer, a
    masked copy in place of a message that left the window's unmasked tail): finding those few
    by comparing the two lists' references (C speed, no item read) costs microseconds for a
    thousand items, where reading each item again to look it up costs about a microsecond an
    item in a long-running server's heap (a cache miss or more each), at every call.

    Lists are told apart by the object at position ``anchor`` (a conversation's first message:
    ``anchor=1`` past a system prompt that may be rebuilt per call); up to ``lists`` are kept,
    the least recently used dropped. It holds them (strong references, so an anchor's ``id`` is
    not reused while kept): bounded, and the conversations they belong to are held elsewhere
    anyway. Safe across threads (the lists kept are changed under a lock; ``derive`` runs outside
    it, so a race derives twice what both derive alike).
    """

    def __init__(self, *, anchor: int = 0, lists: int = 64) -> None:
        self._anchor = anchor
        self._lists = lists
        self._kept: OrderedDict[tuple[int, Hashable], tuple[list[Any], list[Any]]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._kept)

    def values(
        self, items: Sequence[Any], derive: Callable[[list[Any]], Sequence[Any]], kind: Hashable = None
    ) -> list[Any]:
        """One value per item of ``items``: the kept one where the kept list with the same anchor (and
        ``kind``: what else the values depend on) has the same object at that position, ``derive(others)``
        for the others (given in order, one value each, in order). An exception from ``derive`` leaves the
        memo as it was."""
        now = list(items)
        if len(now) <= self._anchor:
            return list(derive(now))
        key = (id(now[self._anchor]), kind)
        with self._lock:
            kept = self._kept.get(key)
        if kept is None:  # (a kept list holds its anchor: no other object has that id meanwhile)
            values = list(derive(now))
        else:
            before, old = kept
            shared = min(len(before), len(now))
            # Positions whose object changed, found at C speed (map stops at the shorter list), then the tail.
            todo = list(compress(range(shared), map(operator.is_not, before, now)))
            todo.extend(range(shared, len(now)))
            values = old[:shared] + [None] * (len(now) - shared)
            if todo:
                fresh = derive([now[index] for index in todo])
                for index, value in zip(todo, fresh, strict=True):
                    values[index] = value
        with self._lock:
            self._kept[key] = (now, values)
            self._kept.move_to_end(key)
            while len(self._kept) > self._lists:
                self._kept.popitem(last=False)
        return list(values)
