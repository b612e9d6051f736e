"""IdentityMemo: values kept with an object for as long as it lives, looked up one by one or in one pass;
PositionMemo: values kept by place in the last lists seen."""

from __future__ import annotations

import gc

import pytest

from gns3server.agent.gns3_copilot.agent.context.identity import MISSING, IdentityMemo, PositionMemo


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
    memo._objects[id(alive)] = memo._objects[id(dead)]
    assert memo.peek_all([alive], "k") == [MISSING]
    assert memo.peek(alive, "k") == (False, None)


class Deriving:
    """A derive function that records what it was asked for and answers each item's name."""

    def __init__(self) -> None:
        self.asked: list[list[str]] = []

    def __call__(self, items: list[Named]) -> list[str]:
        self.asked.append([item.name for item in items])
        return [item.name.upper() for item in items]


class Named:
    def __init__(self, name: str) -> None:
        self.name = name


def test_position_memo_derives_only_what_changed_place_or_is_new() -> None:
    memo, derive = PositionMemo(anchor=1), Deriving()
    system, a, b, c = Named("s"), Named("a"), Named("b"), Named("c")
    assert memo.values([system, a, b], derive) == ["S", "A", "B"]
    assert memo.values([Named("s2"), a, b, c], derive) == ["S2", "A", "B", "C"]  # a new system prompt, one more
    b2 = Named("b2")  # b replaced in place by another object (a masked copy)
    assert memo.values([system, a, b2, c, Named("d")], derive) == ["S", "A", "B2", "C", "D"]
    assert derive.asked == [["s", "a", "b"], ["s2", "c"], ["s", "b2", "d"]]
    # Fewer items than before: nothing to derive, the kept values cut to length.
    assert memo.values([system, a], derive) == ["S", "A"] and len(derive.asked) == 3


def test_position_memo_tells_lists_apart_by_their_anchor_and_kind() -> None:
    memo, derive = PositionMemo(anchor=0), Deriving()
    a, b, x = Named("a"), Named("b"), Named("x")
    memo.values([a, b], derive)
    memo.values([x, b], derive)  # another conversation: derived whole, kept beside the first
    memo.values([a, b], derive, kind=2)  # the same list, values of another kind
    memo.values([a, b, Named("c")], derive)
    assert derive.asked == [["a", "b"], ["x", "b"], ["a", "b"], ["c"]]
    assert len(memo) == 3


def test_position_memo_keeps_a_bounded_number_of_lists_and_short_lists_are_derived() -> None:
    memo, derive = PositionMemo(anchor=1, lists=2), Deriving()
    heads = [Named(f"h{i}") for i in range(3)]
    for head in heads:
        memo.values([Named("s"), head], derive)
    assert len(memo) == 2
    memo.values([Named("s"), heads[0]], derive)  # the least recently used was dropped: derived again
    assert derive.asked[-1] == ["s", "h0"]
    memo.values([Named("only")], derive)  # no item at the anchor: derived, not kept
    assert derive.asked[-1] == ["only"] and len(memo) == 2


def test_position_memo_is_unchanged_when_derive_fails() -> None:
    memo, derive = PositionMemo(), Deriving()
    a, b = Named("a"), Named("b")
    memo.values([a], derive)

    def failing(items: list[Named]) -> list[str]:
        raise RuntimeError("no")

    with pytest.raises(RuntimeError):
        memo.values([a, b], failing)
    with pytest.raises(ValueError):
        memo.values([a, b], lambda items: [])  # not one value per item
    assert memo.values([a, b], derive) == ["A", "B"] and derive.asked[-1] == ["b"]


def test_position_memo_gives_right_values_from_many_threads_at_once() -> None:
    """Conversations of one model may be prepared in several threads: each gets its own values, and
    the bound holds."""
    from concurrent.futures import ThreadPoolExecutor

    memo = PositionMemo(anchor=1, lists=3)

    def conversation(n: int) -> bool:
        items = [Named("s"), *(Named(f"{n}-{i}") for i in range(5))]
        for step in range(200):
            items = [*items, Named(f"{n}-x{step}")]
            if memo.values(items, lambda xs: [x.name.upper() for x in xs]) != [x.name.upper() for x in items]:
                return False
        return True

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(conversation, range(8)))
    assert len(memo) <= 3
