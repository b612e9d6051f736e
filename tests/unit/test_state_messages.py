"""The state's message reducer: add_messages' result in every case, without walking the history to append."""

from __future__ import annotations

import copy
from typing import Annotated, TypedDict
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, RemoveMessage, ToolMessage
from langchain_core.messages.base import BaseMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages

from gns3server.agent.gns3_copilot.agent import state_messages
from gns3server.agent.gns3_copilot.agent.state_messages import IndexedMessages, append_messages
from gns3server.agent.gns3_copilot.service.storage import open_sqlite_storage

IDS = [f"m{i}" for i in range(8)]


def message(kind: str, text: str, ident: str | None) -> BaseMessage | tuple[str, str] | dict[str, str]:
    if kind == "human":
        return HumanMessage(text, id=ident)
    if kind == "ai":
        return AIMessage(text, id=ident)
    if kind == "chunk":
        return AIMessageChunk(content=text, id=ident)
    if kind == "tool":
        return ToolMessage(text, tool_call_id="call", id=ident)
    if kind == "tuple":
        return ("user", text)  # no id: add_messages gives it one
    return {"role": "assistant", "content": text}


messages = st.builds(message, st.sampled_from(["human", "ai", "ai", "tool", "chunk", "tuple", "dict"]),
                     st.sampled_from(["a", "b", "show ip route"]), st.one_of(st.none(), st.sampled_from(IDS)))
updates = st.lists(
    st.one_of(
        st.lists(messages, max_size=3),
        messages,  # a single message, not in a list
        st.builds(lambda i: [RemoveMessage(id=i)], st.sampled_from(IDS)),
        st.just([RemoveMessage(id=REMOVE_ALL_MESSAGES), HumanMessage("fresh", id="fresh")]),
    ),
    max_size=12,
)


def shape(value: list[BaseMessage]) -> list[tuple[str, str, object]]:
    """What a list is, ids given at random by both reducers aside (they differ, and must exist)."""
    assert all(m.id for m in value)
    return [(type(m).__name__, m.id if m.id.count("-") != 4 else "uuid", m.content) for m in value]


def run(reducer, steps):
    value: list[BaseMessage] = []
    outcomes = []
    for step in steps:
        try:
            value = reducer(value, step)
        except ValueError as exc:  # removing an id that is not there: both refuse it alike
            outcomes.append(("error", str(exc).split("'")[0]))
            continue
        outcomes.append(shape(value))
    return outcomes


@settings(max_examples=400, deadline=None)
@given(updates)
def test_any_sequence_of_updates_gives_what_add_messages_gives(steps):
    assert run(append_messages, copy.deepcopy(steps)) == run(add_messages, copy.deepcopy(steps))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), updates.filter(bool).map(lambda u: u[0])), max_size=25))
def test_updates_of_any_earlier_list_give_what_add_messages_gives(steps):
    """Each update applies to any list made so far (a branch reads the state with an update applied,
    then the update is applied for real; a retried task): every result is add_messages' one."""
    ours: list[list[BaseMessage]] = [[]]
    theirs: list[list[BaseMessage]] = [[]]
    for pick, update in steps:
        k = pick % len(ours)
        outcome = []
        for made, reducer, step in ((ours, append_messages, copy.deepcopy(update)),
                                    (theirs, add_messages, copy.deepcopy(update))):
            try:
                made.append(reducer(made[k], step))
                outcome.append(shape(made[-1]))
            except ValueError:
                outcome.append("error")
        assert outcome[0] == outcome[1]
        if outcome[0] == "error":
            theirs.append(theirs[k]) if len(theirs) < len(ours) else None
            ours.append(ours[k]) if len(ours) < len(theirs) else None
    assert [shape(v) for v in ours] == [shape(v) for v in theirs]


@settings(max_examples=100, deadline=None)
@given(updates, st.integers(0, 11))
def test_a_list_updated_twice_branches_alike(steps, at):
    """Two updates of the same list (LangGraph's branches, a retried task) each give add_messages' result."""
    value: list[BaseMessage] = []
    for step in copy.deepcopy(steps[:at]):
        try:
            value = append_messages(value, step)
        except ValueError:
            continue
    first = [HumanMessage("one", id="b1")]
    second = [AIMessage("two", id="b2")]
    plain = list(value)
    assert shape(append_messages(value, first)) == shape(add_messages(plain, copy.deepcopy(first)))
    assert shape(append_messages(value, second)) == shape(add_messages(plain, copy.deepcopy(second)))


def test_appending_to_a_long_history_does_not_call_add_messages_nor_walk_it():
    history = append_messages([], [HumanMessage(f"q{i}", id=f"h{i}") for i in range(2000)])
    assert isinstance(history, IndexedMessages)
    with mock.patch.object(state_messages, "add_messages", side_effect=AssertionError("walked")):
        value = history
        for n in range(5):
            value = append_messages(value, [AIMessage(f"answer {n}"), HumanMessage(f"next {n}", id=f"n{n}")])
    assert len(value) == 2010 and value[-1].id == "n4" and value[-2].id  # ids given as add_messages gives them


def test_a_replacement_or_a_removal_is_add_messages_own_and_the_list_is_indexed_again():
    history = append_messages([], [HumanMessage("q", id="q"), AIMessage("old", id="a")])
    replaced = append_messages(history, [AIMessage("new", id="a")])
    assert [m.content for m in replaced] == ["q", "new"] and isinstance(replaced, IndexedMessages)
    removed = append_messages(replaced, [RemoveMessage(id="q")])
    assert [m.id for m in removed] == ["a"]
    with pytest.raises(ValueError, match="doesn't exist"):
        append_messages(removed, [RemoveMessage(id="q")])
    with mock.patch.object(state_messages, "add_messages", side_effect=AssertionError("walked")):
        assert [m.id for m in append_messages(removed, [HumanMessage("z", id="z")])] == ["a", "z"]


async def test_a_graphs_turns_append_without_add_messages_after_the_first_update(tmp_path):
    """A conditional edge reads the state with the node's update applied before the update is
    applied: neither that nor a turn's checkpoint read back makes the reducer walk the history."""
    class State(TypedDict):
        messages: Annotated[list, append_messages]

    builder = StateGraph(State)
    builder.add_node("model", lambda state: {"messages": [AIMessage(f"answer {len(state['messages'])}")]})
    builder.add_node("tools", lambda state: {"messages": [ToolMessage("out", tool_call_id="c")]})
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", lambda state: "tools" if len(state["messages"]) % 4 == 2 else END,
                                  ["tools", END])
    builder.add_edge("tools", "model")
    storage = await open_sqlite_storage(tmp_path)
    try:
        app = builder.compile(checkpointer=storage.checkpointer)
        walked = []
        real = state_messages.add_messages
        with mock.patch.object(state_messages, "add_messages", lambda left, right: walked.append(len(left)) or real(left, right)):
            for n in range(6):
                await app.ainvoke({"messages": [HumanMessage(f"q{n}")]}, {"configurable": {"thread_id": "t"}},
                                  durability="exit")
        state = await app.aget_state({"configurable": {"thread_id": "t"}})
    finally:
        await storage.close()
    assert walked == [0]  # the first update, of the empty list
    assert [m.type for m in state.values["messages"][:5]] == ["human", "ai", "tool", "ai", "human"]
    assert len({m.id for m in state.values["messages"]}) == len(state.values["messages"])


def test_a_list_changed_in_length_behind_the_index_is_walked_in_full():
    history = append_messages([], [HumanMessage("q", id="q")])
    history.append(AIMessage("a", id="a"))  # not what the graph does, but then the index is not trusted
    assert [m.content for m in append_messages(history, [AIMessage("b", id="a")])] == ["q", "b"]


def _changed(before: list, after: list) -> list[int]:
    """The positions the message log writes: another object there, or past ``before``'s end."""
    shared = min(len(before), len(after))
    return [p for p in range(shared) if before[p] is not after[p]] + list(range(shared, len(after)))


plain_messages = st.builds(message, st.sampled_from(["human", "ai", "tool", "chunk"]),
                           st.sampled_from(["a", "b"]), st.one_of(st.none(), st.sampled_from(IDS)))


@settings(max_examples=400, deadline=None)
@given(st.lists(plain_messages, max_size=8), st.lists(st.tuples(st.integers(0, 9), plain_messages), max_size=4),
       st.integers(0, 10))
def test_a_successor_is_indexed_as_a_list_indexed_from_scratch(before, replacements, length):
    """Whatever changed between two stored lists (appended, replaced at a place, cut short; ids
    repeated, missing, chunks), the next list's index is what indexing it from scratch gives."""
    kept = state_messages.indexed_copy(before)
    after = list(before[:length])
    for position, replacement in replacements:
        if position < len(after):
            after[position] = replacement
        else:
            after.append(replacement)
    successor = state_messages.successor_copy(kept, after, _changed(kept, after))
    reference = state_messages.indexed_copy(after)
    assert list(successor) == after and type(successor) is type(reference)
    if isinstance(reference, IndexedMessages):
        assert successor._owned_index() == reference._owned_index() == {m.id for m in after}


def test_a_successor_and_a_kept_copy_read_no_message_that_stayed_in_place():
    """Their sets come from the last kept list's: a message at its old place is not read (here its
    id changed in place, which the copilot never does, and neither set sees it)."""
    first, second = HumanMessage("q", id="q"), AIMessage("a", id="a")
    kept = state_messages.indexed_copy([first, second])
    second.id = "changed in place"
    copy_of_kept = state_messages.kept_copy(kept)
    assert copy_of_kept._owned_index() == {"q", "a"}
    third = HumanMessage("q2", id="q2")
    successor = state_messages.successor_copy(kept, [first, second, third], [2])
    assert successor._owned_index() == {"q", "a", "q2"}
    copy_of_kept._owned_index().add("x")  # each copy's set is its own
    assert kept._owned_index() == {"q", "a"}


def test_a_list_a_reducer_extended_is_indexed_from_scratch_when_kept():
    history = append_messages([], [HumanMessage("q", id="q")])
    append_messages(history, [AIMessage("a", id="a")])  # its set went to the list made from it
    assert state_messages.kept_copy(history)._owned_index() == {"q"}
    assert state_messages.successor_copy(history, [*history, AIMessage("b", id="b")], [1])._owned_index() == {"q", "b"}
