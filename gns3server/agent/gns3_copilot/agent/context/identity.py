"""What is derived from an object, kept with that object for as long as it lives.

The copilot never changes a message in place (it copies one to change it), so a
message object stands for its content: what is a pure function of it (its token
count, its masked copy, its request dict) can be looked up by the object's
identity instead of being computed, or keyed by content, again at every model
call. The memo holds a weak reference to each object: it keeps nothing alive, and
an entry goes with its object.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable, Sequence
from typing import Any

__all__ = ["MISSING", "IdentityMemo"]

MISSING: Any = object()
"""What :meth:`IdentityMemo.peek_all` gives for an object with no value kept under the key."""


class IdentityMemo:
    """``id(object) -> (weak reference, {key: value})``; objects must support weak references.

    Safe across threads for what it is used for: a lost race computes a value twice, and
    both are the same pure function of the object.
    """

    def __init__(self) -> None:
        self._objects: dict[int, tuple[weakref.ref[Any], dict[Hashable, Any]]] = {}

    def __len__(self) -> int:
        return len(self._objects)

    def get(self, obj: object, key: Hashable, compute: Callable[[], Any]) -> Any:
        """``compute()``, kept under ``key`` for as long as ``obj`` lives."""
        entry = self._objects.get(id(obj))
        if entry is not None and entry[0]() is obj:
            values = entry[1]
            if key in values:
                return values[key]
        else:
            values = {}
            ident = id(obj)
            objects = self._objects

            def gone(_ref: weakref.ref[Any]) -> None:
                current = objects.get(ident)
                if current is not None and current[0] is _ref:
                    del objects[ident]

            objects[ident] = (weakref.ref(obj, gone), values)
        value = values[key] = compute()
        return value

    def put(self, obj: object, key: Hashable, value: Any) -> None:
        """Keep ``value`` under ``key`` for as long as ``obj`` lives (replacing any kept before)."""
        self.get(obj, key, lambda: None)
        self._objects[id(obj)][1][key] = value

    def peek_all(self, objs: Sequence[object], key: Hashable) -> list[Any]:
        """The value kept under ``key`` for each of ``objs``, :data:`MISSING` where none is: one
        pass, no call per object (a long request's messages are looked up at every model call)."""
        objects = self._objects
        found: list[Any] = []
        append = found.append
        for obj in objs:
            entry = objects.get(id(obj))
            append(entry[1].get(key, MISSING) if entry is not None and entry[0]() is obj else MISSING)
        return found

    def peek(self, obj: object, key: Hashable) -> tuple[bool, Any]:
        """(True, the value) when one is kept for ``obj`` under ``key``, else (False, None)."""
        entry = self._objects.get(id(obj))
        if entry is not None and entry[0]() is obj and key in entry[1]:
            return True, entry[1][key]
        return False, None
