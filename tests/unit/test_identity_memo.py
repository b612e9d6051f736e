"""IdentityMemo: values kept with an object for as long as it lives, looked up one by one or in one pass."""

from __future__ import annotations

import gc
import weakref

from gns3server.agent.gns3_copilot.agent.context.identity import MISSING, IdentityMemo


class Thing:
    """A weak-referenceable object (messages are pydantic models, which are)."""


def test_peek_all_gives_each_kept_value_in_order_and_missing_for_the_others() -> None:
    memo = IdentityMemo()
    a, b, c = Thing(), Thing(), Thing()
    memo.put(a, "k", 1)
    memo.get(c, "k", lambda: 3)
    memo.put(b, "other", 2)  # kept under another key only
    assert memo.peek_all([a, b, c, a], "k") == [1, MISSING, 3, 1]
    assert memo.peek_all([], "k") == []


def test_put_replaces_and_agrees_with_peek_and_get() -> None:
    memo = IdentityMemo()
    a = Thing()
    memo.put(a, "k", 1)
    memo.put(a, "k", 2)
    assert memo.peek(a, "k") == (True, 2)
    assert memo.get(a, "k", lambda: 99) == 2
    memo.put(a, "j", None)  # None is a value, not a miss
    assert memo.peek_all([a], "j") == [None]


def test_a_value_goes_with_its_object() -> None:
    memo = IdentityMemo()
    a = Thing()
    memo.put(a, "k", 1)
    assert len(memo) == 1
    del a
    gc.collect()
    assert len(memo) == 0


def test_an_entry_of_a_dead_object_whose_id_was_reused_is_not_found() -> None:
    """An id names another object once the first has died: its entry must not answer for the new one."""
    memo = IdentityMemo()
    dead, alive = Thing(), Thing()
    memo.put(dead, "k", "of the dead one")
    # As if ``alive`` had been given the id of ``dead`` before the entry went.
    memo._objects[id(alive)] = (weakref.ref(dead), {"k": "of the dead one"})
    assert memo.peek_all([alive], "k") == [MISSING]
    assert memo.peek(alive, "k") == (False, None)
