"""A stored message row reads back as LangGraph's serializer reads it, a plain message without validation."""

from __future__ import annotations

import datetime
from typing import Any

import ormsgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from gns3server.agent.gns3_copilot.service.message_rows import message_from_row

SERDE = JsonPlusSerializer()
_text = st.text(max_size=40)
_json = st.recursive(st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | _text,  # what msgpack stores
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
                     max_leaves=8)
_content = _text | st.lists(st.builds(lambda t: {"type": "text", "text": t}, _text), max_size=3)
_common = {"content": _content, "id": st.none() | _text, "name": st.none() | _text,
           "additional_kwargs": st.dictionaries(_text, _json, max_size=2),
           "response_metadata": st.dictionaries(_text, _json, max_size=2)}
_tool_call = st.builds(lambda name, args, id_: {"name": name, "args": args, "id": id_, "type": "tool_call"},
                       _text, st.dictionaries(_text, _json, max_size=3), _text)
_usage = st.none() | st.builds(lambda i, o: {"input_tokens": i, "output_tokens": o, "total_tokens": i + o},
                               st.integers(0, 10**6), st.integers(0, 10**6))
MESSAGES = st.one_of(
    st.builds(HumanMessage, **_common),
    st.builds(SystemMessage, **_common),
    st.builds(AIMessage, **_common, tool_calls=st.lists(_tool_call, max_size=3), usage_metadata=_usage),
    st.builds(ToolMessage, **_common, tool_call_id=_text, status=st.sampled_from(["success", "error"])),
)


def stored(message: Any) -> tuple[str, bytes]:
    return SERDE.dumps_typed(message)


def same(mine: Any, theirs: Any) -> None:
    assert type(mine) is type(theirs)
    assert mine == theirs
    if isinstance(theirs, BaseMessage):
        assert mine.model_fields_set == theirs.model_fields_set
        assert mine.model_dump() == theirs.model_dump()


@given(MESSAGES)
def test_a_plain_message_reads_back_as_the_serializer_reads_it(message: BaseMessage) -> None:
    row = stored(message)
    same(message_from_row(SERDE, *row), SERDE.loads_typed(row))


def test_a_plain_message_is_built_without_the_serializer_or_validation(monkeypatch: pytest.MonkeyPatch) -> None:
    row = stored(AIMessage("R1 is up", id="a1", tool_calls=[{"name": "t", "args": {"x": 1}, "id": "c1"}]))
    expected = SERDE.loads_typed(row)

    def refused(*_: Any, **__: Any) -> Any:
        raise AssertionError("decoded the slow way")

    serde = JsonPlusSerializer()
    monkeypatch.setattr(serde, "loads_typed", refused)
    monkeypatch.setattr(AIMessage, "__init__", refused)  # the constructor validates: not called
    same(message_from_row(serde, *row), expected)


class _Recorded(JsonPlusSerializer):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        self.calls += 1
        return super().loads_typed(data)


@pytest.mark.parametrize("value", [
    AIMessageChunk("part", id="c"),  # another class: LangGraph's serializer builds it
    AIMessage("when", additional_kwargs={"at": datetime.datetime(2026, 12, 4, 18, 0)}),  # another extension inside
    HumanMessage("q", additional_kwargs={"tags": {"lab", "ospf"}}),  # a set: another extension inside
    {"not": "a message"},
])
def test_anything_else_in_a_row_is_decoded_by_the_serializer(value: Any) -> None:
    row = stored(value)
    serde = _Recorded()
    mine = message_from_row(serde, *row)
    same(mine, SERDE.loads_typed(row))
    assert serde.calls == (0 if isinstance(value, dict) else 1)  # a plain value needs no extension


def test_a_row_of_another_type_or_broken_fails_as_the_serializer_fails() -> None:
    assert message_from_row(SERDE, *SERDE.dumps_typed(b"raw")) == b"raw"  # "bytes": not msgpack at all
    assert message_from_row(SERDE, "null", b"") is None
    broken = stored(HumanMessage("q"))[1][:-3]
    with pytest.raises(Exception) as theirs:
        SERDE.loads_typed(("msgpack", broken))
    with pytest.raises(type(theirs.value)):
        message_from_row(SERDE, "msgpack", broken)


def test_a_row_of_every_field_in_order_is_built_without_looking_each_one_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """``model_construct`` looks every field up again (half a row's read): a row holding them all is not passed to it."""
    rows = [stored(m) for m in (HumanMessage("q", id="h"), ToolMessage("out", tool_call_id="c1", id="t"),
                                AIMessage("a", id="a", usage_metadata={"input_tokens": 1, "output_tokens": 2, "total_tokens": 3}))]
    expected = [SERDE.loads_typed(row) for row in rows]

    def refused(*_: Any, **__: Any) -> Any:
        raise AssertionError("built through model_construct")

    serde = JsonPlusSerializer()
    monkeypatch.setattr(serde, "loads_typed", refused)  # (the way a refused build would end up)
    for cls in (AIMessage, HumanMessage, ToolMessage):
        monkeypatch.setattr(cls, "model_construct", refused)
    for row, theirs in zip(rows, expected, strict=True):
        same(message_from_row(serde, *row), theirs)


def _row_with(message: BaseMessage, change: Any) -> bytes:
    """``message``'s row with its fields changed by ``change`` (as another release, or another writer, stored them)."""
    fields = message.model_dump()
    change(fields)
    inner = ormsgpack.packb([type(message).__module__, type(message).__name__, fields, "model_validate_json"])
    return ormsgpack.packb(ormsgpack.Ext(5, inner))


@pytest.mark.parametrize("change", [
    lambda fields: fields.pop("usage_metadata"),  # a field missing: its default
    lambda fields: fields.update(note="kept"),  # one more: an extra, as the constructor keeps it
    lambda fields: fields.update(content=fields.pop("content")),  # every field, another order
], ids=["missing", "extra", "reordered"])
def test_a_row_of_other_fields_reads_back_as_the_serializer_reads_it(change: Any) -> None:
    blob = _row_with(AIMessage("R1 is up", id="a1", usage_metadata={"input_tokens": 1, "output_tokens": 2, "total_tokens": 3}),
                     change)
    mine, theirs = message_from_row(SERDE, "msgpack", blob), SERDE.loads_typed(("msgpack", blob))
    assert type(mine) is type(theirs) and mine == theirs and mine.model_dump() == theirs.model_dump()
    assert mine.__pydantic_extra__ == theirs.__pydantic_extra__


def test_messages_read_back_share_a_fields_set_that_nothing_they_do_changes() -> None:
    """A third of a message read back was its own set of its field names: one set per class is
    shared, which pydantic only adds a field's name to (one it holds); a copy gets its own."""
    rows = [stored(AIMessage(f"answer {n}", id=f"a{n}")) for n in range(3)]
    first, second, third = (message_from_row(SERDE, *row) for row in rows)
    assert first.model_fields_set is second.model_fields_set  # shared, not a set per message
    every = set(AIMessage.model_fields)
    first.id = "renamed"  # a field assigned (LangGraph gives ids so)
    first.note = "an extra"  # an extra assigned: the message's own extras
    copy = second.model_copy(update={"content": "masked", "marker": 1})
    assert first.model_fields_set == second.model_fields_set == third.model_fields_set == every
    assert copy.model_fields_set == every | {"marker"} and copy.model_fields_set is not second.model_fields_set
    assert first.__pydantic_extra__ == {"note": "an extra"} and second.__pydantic_extra__ == {} == third.__pydantic_extra__
    assert (second.content, second.id, first.id) == ("answer 1", "a1", "renamed")
    assert second == SERDE.loads_typed(rows[1]) and first.model_dump()["id"] == "renamed"
