"""A plain message's request dict is langchain-openai's, key for key and in its order; anything else is left to it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_openai.chat_models.base import _convert_message_to_dict

from gns3server.agent.gns3_copilot.agent.model.openai_plain import plain_message_dict

_text = st.text(max_size=30)
_json = st.recursive(st.none() | st.booleans() | st.integers() | _text,
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3), max_leaves=6)
_content = _text | st.lists(st.builds(lambda t: {"type": "text", "text": t}, _text), max_size=2)
_kwargs = st.just({}) | st.dictionaries(st.sampled_from(["name", "function_call", "__openai_role__", "audio", "other"]),
                                        _text.map(lambda t: {"id": t}) | _text, min_size=1, max_size=2)
_common = {"content": _content, "name": st.none() | st.just("") | _text, "additional_kwargs": _kwargs,
           "id": st.none() | _text}
_call = st.builds(lambda name, args, id_: {"name": name, "args": args, "id": id_, "type": "tool_call"},
                  _text, st.dictionaries(_text, _json, max_size=3), _text)
_invalid = st.builds(lambda name, args, id_: {"name": name, "args": args, "id": id_, "error": None,
                                               "type": "invalid_tool_call"}, _text, _text, _text)
MESSAGES = st.one_of(
    st.builds(HumanMessage, **_common),
    st.builds(SystemMessage, **_common),
    st.builds(AIMessage, **_common, tool_calls=st.lists(_call, max_size=3),
              invalid_tool_calls=st.lists(_invalid, max_size=1)),
    st.builds(ToolMessage, **_common, tool_call_id=_text),
    st.builds(ChatMessage, **_common, role=_text),
    st.builds(FunctionMessage, content=_text, name=_text),
    st.builds(AIMessageChunk, content=_text),
)


def wire(value: dict[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False)  # key order kept: the bytes sent


@given(MESSAGES)
def test_a_plain_messages_dict_is_langchains_and_any_other_is_left_to_it(message: BaseMessage) -> None:
    mine = plain_message_dict(message)
    if mine is not None:
        assert wire(mine) == wire(_convert_message_to_dict(message))


PLAIN = [
    HumanMessage("show ip route on R1"),
    AIMessage("R1 has 3 routes"),
    AIMessage("", tool_calls=[{"name": "run", "args": {"node": "R1", "cmd": "show ip ospf neighbor"}, "id": "c1"}]),
    AIMessage("checking", tool_calls=[{"name": "run", "args": {"text": "é"}, "id": "c2"}]),
    ToolMessage("Neighbor ID 2.2.2.2 Full", tool_call_id="c1", name="run"),  # a tool's name is not sent
]


def test_the_messages_of_a_conversation_are_plain_and_converted_as_langchain_converts_them() -> None:
    """What the copilot's conversations hold is converted here: a None for them would leave the speed-up unused."""
    for message in PLAIN:
        mine = plain_message_dict(message)
        assert mine is not None, message
        assert wire(mine) == wire(_convert_message_to_dict(message))


def test_what_is_not_plain_is_left_to_langchain() -> None:
    for message in (HumanMessage([{"type": "text", "text": "q"}]), HumanMessage("q", name="student"),
                    SystemMessage("You are the copilot."),  # its role is the model's to decide (o-series: developer)
                    AIMessage("a", additional_kwargs={"audio": {"id": "x"}}), ChatMessage("c", role="planner"),
                    AIMessage("", invalid_tool_calls=[{"name": "t", "args": "{", "id": "c", "error": None}]),
                    AIMessageChunk(content="part")):
        assert plain_message_dict(message) is None, message


MIXED = [SystemMessage("You are the copilot."), HumanMessage([{"type": "text", "text": "R1?"}]), *PLAIN[1:3],
         ToolMessage("up", tool_call_id="c1"), HumanMessage("and R2?", name="student"), AIMessage("R2 is down")]


def _models(**options: Any) -> tuple[Any, Any]:
    from langchain_openai import ChatOpenAI

    from gns3server.agent.gns3_copilot.agent.model.openai_payload import LeanChatOpenAI

    settings = {"model": "gpt-4o-mini", "api_key": "sk-test", "base_url": "http://127.0.0.1:9/v1", **options}
    return LeanChatOpenAI(**settings), ChatOpenAI(**settings)


@pytest.mark.parametrize("model", ["gpt-4o-mini", "o3-mini"])  # o-series: ChatOpenAI sends the system role as developer
def test_a_request_of_plain_and_other_messages_is_langchains_in_order(model: str) -> None:
    ours, theirs = _models(model=model)
    mine, reference = ours._get_request_payload(MIXED), theirs._get_request_payload(MIXED)
    mine = {**mine, "messages": list(mine["extra_body"]["messages"]), "extra_body": None}
    reference = {**reference, "extra_body": None}
    assert [wire(m) for m in mine["messages"]] == [wire(m) for m in reference["messages"]]
    assert {k: v for k, v in mine.items() if k != "messages"} == {k: v for k, v in reference.items() if k != "messages"}


def test_a_responses_api_request_is_built_by_langchain_whole() -> None:
    ours, theirs = _models(use_responses_api=True)
    assert ours._adjusted_payload(MIXED) == theirs._get_request_payload(MIXED)
