"""Junk tool-call arguments cut in the history (1,801 characters of junk once pushed a 2K request over)."""

from __future__ import annotations

import json

from langchain_core.messages import AIMessage, HumanMessage

from gns3server.agent.gns3_copilot.agent.policies.arguments import (
    CUT_KEY,
    EXCERPT_CHARS,
    argument_limit,
    cut_arguments,
    cut_tool_call_arguments,
)

JUNK = "{" + "x, " * 600  # 1,801 characters that are not JSON


def test_the_limit_scales_with_the_window_with_a_floor():
    assert argument_limit(2000) == 1000
    assert argument_limit(8000) == 4000
    assert argument_limit(128_000) == 64_000
    assert argument_limit(500) == 1000  # the floor: a tiny window still keeps short arguments whole


def test_short_arguments_and_plain_messages_are_left_alone():
    messages = [
        HumanMessage("hi", id="h"),
        AIMessage("", id="a", tool_calls=[{"name": "gns3_show_commands", "args": {"commands": ["show ip int br"]}, "id": "c"}]),
        AIMessage("just text", id="b"),
    ]
    assert cut_tool_call_arguments(messages, 1000) == []


def test_unparsable_junk_keeps_an_excerpt_and_a_marker_and_the_same_id():
    message = AIMessage(
        "", id="a1",
        invalid_tool_calls=[{"name": "gns3_topology", "args": JUNK, "id": "c1", "error": None, "type": "invalid_tool_call"}],
        additional_kwargs={"tool_calls": [{"id": "c1", "function": {"name": "gns3_topology", "arguments": JUNK}}]},
    )
    [cut] = cut_tool_call_arguments([message], 1000)
    assert cut.id == "a1"
    args = cut.invalid_tool_calls[0]["args"]
    assert args.startswith(JUNK[:EXCERPT_CHARS]) and "[arguments of 1801 characters cut" in args
    assert len(args) < 400
    assert "tool_calls" not in cut.additional_kwargs  # the raw copy is not stored either
    assert message.invalid_tool_calls[0]["args"] == JUNK  # the original is not modified


def test_huge_parsable_arguments_are_replaced_by_a_marker():
    big = {"commands": ["show running-config"] * 200}
    message = AIMessage("", id="a2", tool_calls=[{"name": "gns3_show_commands", "args": big, "id": "c2"}])
    [cut] = cut_tool_call_arguments([message], 1000)
    call = cut.tool_calls[0]
    assert call["id"] == "c2" and call["name"] == "gns3_show_commands"
    assert set(call["args"]) == {CUT_KEY} and f"of {len(json.dumps(big))} characters cut" in call["args"][CUT_KEY]


def test_messages_without_an_id_are_not_returned():
    message = AIMessage("", invalid_tool_calls=[{"name": "t", "args": JUNK, "id": "c", "error": None, "type": "invalid_tool_call"}])
    assert cut_tool_call_arguments([message], 1000) == []


def test_cut_arguments_keeps_text_within_the_limit():
    assert cut_arguments("short", 10) == "short"
    assert cut_arguments("y" * 50, 10) == "y" * 10 + " [arguments of 50 characters cut: longer than the 10 characters kept for this window]"


def test_with_a_memo_a_message_judged_before_is_not_serialised_again(monkeypatch):
    from gns3server.agent.gns3_copilot.agent.context.identity import IdentityMemo
    from gns3server.agent.gns3_copilot.agent.policies import arguments

    long_call = AIMessage("", id="long", tool_calls=[{"name": "x", "args": {"text": "y" * 2000}, "id": "c1"}])
    short = [AIMessage("", id=f"a{i}", tool_calls=[{"name": "x", "args": {"n": i}, "id": f"c{i}"}]) for i in range(50)]
    history = [*short, long_call]
    memo = IdentityMemo()
    first = cut_tool_call_arguments(history, 1000, memo)
    judged = []
    real = arguments._cut_call
    monkeypatch.setattr(arguments, "_cut_call", lambda call, limit: judged.append(call["id"]) or real(call, limit))
    new = AIMessage("", id="new", tool_calls=[{"name": "x", "args": {"n": -1}, "id": "cn"}])
    again = cut_tool_call_arguments([*history, new], 1000, memo)
    assert judged == ["cn"]  # only the new message's call
    assert [m.id for m in again] == [m.id for m in first] == ["long"] and again[0] is first[0]
    assert cut_tool_call_arguments([*history, new], 4000, memo) == []  # another limit is judged afresh


def test_a_history_judged_by_place_reads_only_what_is_new_or_replaced_and_each_limit_apart(monkeypatch):
    """At every model call the whole history is judged: with its last answers kept by place, a call
    reads only the messages new or replaced at their place since, and a window of another size
    (another limit) is judged for itself."""
    from gns3server.agent.gns3_copilot.agent.context.identity import IdentityMemo, PositionMemo
    from gns3server.agent.gns3_copilot.agent.policies import arguments

    read: list[str] = []
    original = arguments._cut_copy
    monkeypatch.setattr(arguments, "_cut_copy", lambda message, limit: read.append(message.id) or original(message, limit))
    junk = AIMessage("", id="junk", invalid_tool_calls=[
        {"name": "gns3_topology", "args": JUNK, "id": "c0", "error": None, "type": "invalid_tool_call"}])
    history = [HumanMessage("q0", id="q0"), junk]
    memo, positions = IdentityMemo(), PositionMemo()

    def judged(limit: int = 1000) -> list[str | None]:
        return [m.id for m in cut_tool_call_arguments(history, limit, memo, positions)]

    assert judged() == ["junk"] and read == ["junk"]
    history += [AIMessage("", id="ok", tool_calls=[{"name": "gns3_topology", "args": {}, "id": "c1"}]), HumanMessage("q1")]
    assert judged() == ["junk"] and read == ["junk", "ok"]
    history[1] = AIMessage("", id="junk", invalid_tool_calls=[  # replaced at its place: judged again
        {"name": "gns3_topology", "args": "{short", "id": "c0", "error": None, "type": "invalid_tool_call"}])
    assert judged() == [] and read == ["junk", "ok", "junk"]
    assert judged() == [] and len(read) == 3
    assert judged(5000) == [] and read[3:] == ["junk", "ok"]  # another limit: judged for it
