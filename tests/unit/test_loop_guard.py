"""Repeated identical failing tool calls end the turn."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from gns3server.agent.gns3_copilot.agent.policies.loop_guard import repeated_failure_answer


def _attempt(n: int, args: dict, status: str = "error", name: str = "gns3_topology") -> list:
    call_id = f"c{n}"
    return [
        AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id}]),
        ToolMessage(f"Error: attempt {n} failed", tool_call_id=call_id, name=name, status=status),
    ]


def test_three_identical_failures_in_the_turn_stop_it():
    turn = [HumanMessage("go")] + _attempt(1, {"a": 1, "b": 2}) + _attempt(2, {"b": 2, "a": 1})
    assert repeated_failure_answer(turn) is None
    answer = repeated_failure_answer(turn + _attempt(3, {"a": 1, "b": 2}))
    assert answer is not None and "gns3_topology failed 3 times" in answer and "attempt 3 failed" in answer


def test_different_arguments_successes_and_earlier_turns_do_not_count():
    earlier = [HumanMessage("old")] + _attempt(1, {}) + _attempt(2, {})
    assert repeated_failure_answer(earlier + [HumanMessage("new")] + _attempt(3, {})) is None
    varied = [HumanMessage("go")] + _attempt(1, {"x": 1}) + _attempt(2, {"x": 2}) + _attempt(3, {"x": 3})
    assert repeated_failure_answer(varied) is None
    ok = [HumanMessage("go")] + _attempt(1, {}, "success") + _attempt(2, {}, "success") + _attempt(3, {}, "success")
    assert repeated_failure_answer(ok) is None


def test_a_long_error_is_quoted_short():
    turn = [HumanMessage("go")]
    for n in range(3):
        turn += [
            AIMessage("", tool_calls=[{"name": "t", "args": {}, "id": f"c{n}"}]),
            ToolMessage("E" * 5000, tool_call_id=f"c{n}", name="t", status="error"),
        ]
    answer = repeated_failure_answer(turn)
    assert answer is not None and len(answer) < 1000 and "[...]" in answer


def test_a_call_repeated_three_times_is_seen_whatever_its_outcome():
    from gns3server.agent.gns3_copilot.agent.policies.loop_guard import repeats_a_call

    turn = [HumanMessage("go")] + _attempt(1, {}, "success") + _attempt(2, {}, "success")
    assert not repeats_a_call(turn)
    assert repeats_a_call(turn + _attempt(3, {}, "success"))
    assert not repeats_a_call([HumanMessage("old")] + turn[1:] + _attempt(3, {}) + [HumanMessage("new")])


def _junk_attempt(n: int, raw: str, name: str | None = "gns3_topology") -> list:
    """A call whose arguments are not JSON, answered with an error as the tools node does."""
    call_id = f"j{n}"
    return [
        AIMessage("", invalid_tool_calls=[{"name": name, "args": raw, "id": call_id, "error": None}]),
        ToolMessage(f"Error: the arguments of {name} are not valid JSON: {raw}", tool_call_id=call_id,
                    name=name, status="error"),
    ]


def test_three_identical_calls_with_unparsable_arguments_stop_the_turn():
    # SmolLM2 at 2K repeated the same junk until the step limit: they fail the same way every time.
    turn = [HumanMessage("go")] + _junk_attempt(1, "{x, x") + _junk_attempt(2, "{x, x")
    assert repeated_failure_answer(turn) is None
    answer = repeated_failure_answer(turn + _junk_attempt(3, "{x, x"))
    assert answer is not None and answer.startswith("I stopped: the tool gns3_topology failed 3 times")
    assert "not valid JSON: {x, x" in answer
    nameless = [HumanMessage("go")] + [m for n in range(3) for m in _junk_attempt(n, "{", name=None)]
    assert (repeated_failure_answer(nameless) or "").startswith("I stopped: the tool (unnamed) failed 3 times")


def test_unparsable_arguments_count_only_when_the_same_and_in_the_turn():
    varied = [HumanMessage("go")] + _junk_attempt(1, "{a") + _junk_attempt(2, "{b") + _junk_attempt(3, "{c")
    assert repeated_failure_answer(varied) is None
    other_tools = [HumanMessage("go")] + _junk_attempt(1, "{a", "t1") + _junk_attempt(2, "{a", "t2") + _junk_attempt(3, "{a", "t3")
    assert repeated_failure_answer(other_tools) is None
    earlier = [HumanMessage("old")] + _junk_attempt(1, "{a") + _junk_attempt(2, "{a")
    assert repeated_failure_answer(earlier + [HumanMessage("new")] + _junk_attempt(3, "{a")) is None
    # Raw text that happens to be a valid call's JSON is not that call: the two never add up.
    mixed = [HumanMessage("go")] + _attempt(1, {}) + _attempt(2, {}) + _junk_attempt(3, "{}")
    assert repeated_failure_answer(mixed) is None
