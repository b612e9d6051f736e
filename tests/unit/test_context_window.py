"""The cache-stable history window: a remembered cut, a low-water mark, masked old tool outputs,
the running summary's place, and exact OpenAI tool counts."""

from __future__ import annotations

import itertools
import logging
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from gns3server.agent.gns3_copilot.agent.context.counting import TokenCounter
from gns3server.agent.gns3_copilot.agent.context.summary import SUMMARY_END, SUMMARY_HEADING
from gns3server.agent.gns3_copilot.agent.context.window import Window, mask_stub, restore_window
from gns3server.agent.gns3_copilot.agent.context_manager import (
    create_pre_model_hook,
    resolve_window_settings,
    tools_style_for,
)
from tests.unit.test_context_counting import COOKBOOK_TOOL, COOKBOOK_TOOL_MESSAGES

PROMPT = "You are a network assistant.\n{{topology_info}}"


def make_hook(limit=4, tools=(), **extra):
    config = {"context_limit": limit, **extra}
    return create_pre_model_hook(
        system_prompt=PROMPT,
        get_topology_func=lambda s: s.get("topology_info"),
        get_llm_config_func=lambda: config,
        get_tools_func=lambda: list(tools),
    )


def words(n: int, word: str = "interface") -> str:
    return " ".join([word] * n)


def turn(i: int, output_words: int = 60, node: str | None = None) -> list:
    node = node or f"R{i}"
    call_id = f"call_{i}"
    return [
        HumanMessage(f"question {i} about {node}", id=f"h{i}"),
        AIMessage("", tool_calls=[{"name": "gns3_show", "args": {"node_name": node}, "id": call_id}], id=f"a{i}"),
        ToolMessage(words(output_words), tool_call_id=call_id, name="gns3_show", id=f"t{i}"),
        AIMessage(f"answer {i}", id=f"b{i}"),
    ]


def replay(hook, turns: int, output_words: int = 60, **state_extra):
    """Send a request per user message, as the graph does, keeping the window in the state."""
    history: list = []
    window = None
    requests = []
    for i in range(turns):
        messages = turn(i, output_words)
        history.append(messages[0])
        out = hook({"messages": list(history), "context_window": window, **state_extra})
        requests.append(out)
        window = out["context_window"]
        history.extend(messages[1:])
    return history, requests


def common_prefix(a: list, b: list) -> int:
    n = 0
    for x, y in zip(a, b):
        if x.type != y.type or x.content != y.content:
            break
        n += 1
    return n


def test_window_stays_until_the_budget_is_exceeded_then_cuts_to_low_water():
    hook = make_hook(limit=4)
    _, requests = replay(hook, 60)
    moves = [i for i, r in enumerate(requests) if r["context_report"]["window_moved"]]
    assert moves, "the conversation must outgrow the budget"
    assert len(moves) < len(requests) // 4  # cuts are rare, not one per request
    for i, out in enumerate(requests):
        report = out["context_report"]
        assert report["total_tokens"] <= report["budget"]
        assert out["messages"][-1].content == f"question {i} about R{i}"  # the latest question is always sent
        if i in moves:
            # cut down to the low-water mark: the history after the system message is at most 65% of the budget
            history = report["history_tokens"] + report["system_tokens"] + report["topology_tokens"]
            assert history <= 0.65 * report["message_budget"] + 5
        elif i:
            # between cuts every request repeats the previous one and adds to its end
            previous = requests[i - 1]["messages"]
            assert common_prefix(previous, out["messages"]) == len(previous)


def test_plain_trim_changes_the_prefix_every_time_once_full():
    """The baseline the window improves on: with low water 1.0 and no memory, every request cuts again."""
    hook = make_hook(limit=4, context_low_water=1.0, mask_tool_outputs=False)
    history: list = []
    prefixes = []
    previous = None
    for i in range(40):
        messages = turn(i)
        history.append(messages[0])
        out = hook({"messages": list(history)})  # no window remembered
        if previous is not None:
            prefixes.append(common_prefix(previous, out["messages"]))
        previous = out["messages"]
        history.extend(messages[1:])
    assert prefixes[-10:] == [1] * 10  # only the system message repeats


def test_window_survives_as_plain_data_and_a_changed_history_resets_it(caplog):
    history, requests = replay(make_hook(limit=4), 40)
    window = requests[-1]["context_window"]
    assert set(window) == {"start", "start_id", "mask_until"} and window["start"] > 0
    assert restore_window(window, history) == Window(window["start"], window["start_id"], window["mask_until"])
    other = [m.model_copy(update={"id": f"x{i}"}) for i, m in enumerate(history)]
    with caplog.at_level(logging.WARNING):
        assert restore_window(window, other) == Window()
    assert "no longer matches the history" in caplog.text
    assert restore_window({"start": 10**6}, history) == Window()
    assert restore_window("garbage", history) == Window()


def test_old_tool_outputs_are_masked_in_the_request_only():
    hook = make_hook(limit=8, tool_output_turns=2)
    history, requests = replay(hook, 60, output_words=200)
    last = requests[-1]
    report = last["context_report"]
    assert report["masked_outputs"] > 0 and report["masked_tokens_saved"] > 0
    tools = [m for m in last["messages"] if isinstance(m, ToolMessage)]
    stubs = [m for m in tools if m.content.startswith("[output of gns3_show")]
    assert stubs
    stub = stubs[0].content
    node = next(c["args"]["node_name"] for m in history if isinstance(m, AIMessage)
                for c in m.tool_calls if c["id"] == stubs[0].tool_call_id)
    original = next(m for m in history if isinstance(m, ToolMessage) and m.tool_call_id == stubs[0].tool_call_id)
    size = TokenCounter().message(original)  # what the output cost in a request
    assert 200 < size < 220
    assert f"for {node}" in stub and f"{size} tokens" in stub and f"node_name='{node}'" in stub
    # the latest turns keep their output, and the stored history keeps every output
    assert tools[-1].content == words(200)
    assert all(m.content == words(200) for m in history if isinstance(m, ToolMessage))


def test_masking_keeps_more_turns_than_cutting_alone():
    kept = {}
    for mask in (True, False):
        _, requests = replay(make_hook(limit=8, mask_tool_outputs=mask), 80, output_words=200)
        kept[mask] = sum(r["context_report"]["messages_out"] for r in requests[40:])
    assert kept[True] > kept[False] * 1.2


def test_mask_stub_names_tool_device_size_and_how_to_get_it():
    text = mask_stub("gns3_console_show", {"node_name": "R1", "command": "show ip route"}, 1234)
    assert text == (
        "[output of gns3_console_show for R1 masked to save context: 1234 tokens; "
        "call gns3_console_show again with node_name='R1', command='show ip route' to see it again]"
    )


def test_summary_opens_the_history_and_leaves_the_system_message_alone():
    history, requests = replay(make_hook(limit=4), 30)
    window = requests[-1]["context_window"]
    summary = {"text": "- R1: OSPF down on e0", "until": window["start"], "until_id": window["start_id"], "turns": 7}
    state = {"messages": history + [HumanMessage("next")], "context_window": window}
    without = make_hook(limit=4)(state)
    out = make_hook(limit=4)({**state, "context_summary": summary})
    system, first = out["messages"][:2]
    # The system message is the same with or without the summary: its cached prefix survives a new summary.
    assert isinstance(system, SystemMessage) and system.content == without["messages"][0].content
    assert SUMMARY_HEADING not in system.content
    original = history[window["start"]]
    assert isinstance(first, HumanMessage) and first.content == (
        f"{SUMMARY_HEADING}\n(7 earlier turn(s) are no longer shown; this summary of them was written as they left.)\n"
        f"- R1: OSPF down on e0\n{SUMMARY_END}\n\n{original.content}"
    )
    assert history[window["start"]].content == original.content  # the stored history is not changed
    report = out["context_report"]
    assert report["summarized_turns"] == 7 and report["summary_tokens"] > 10
    total = (report["system_tokens"] + report["topology_tokens"] + report["summary_tokens"]
             + report["history_tokens"] + report["tools_tokens"])
    assert total == report["total_tokens"] <= report["budget"]
    # switched off: the stored summary is not sent
    off = make_hook(limit=4, context_summary=False)({"messages": history, "context_window": window,
                                                      "context_summary": summary})
    assert all(SUMMARY_HEADING not in m.content for m in off["messages"])
    assert off["context_report"]["summary_tokens"] == 0


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("context_low_water", 0), ("context_low_water", 1.5), ("context_low_water", "0.6"),
        ("context_low_water", True), ("context_low_water", math.nan),
        ("context_summary", "yes"), ("mask_tool_outputs", 1),
        ("tool_output_turns", 0), ("tool_output_turns", 2.5), ("tool_output_turns", True),
        ("tool_output_share", 0), ("tool_output_share", 0.01), ("tool_output_share", 1.5), ("tool_output_share", "0.2"),
    ],
)
def test_bad_window_settings_name_the_field(field, value):
    with pytest.raises(ValueError, match=f"Invalid {field}"):
        resolve_window_settings({"context_limit": 8, field: value})
    with pytest.raises(ValueError, match=f"Invalid {field}"):
        make_hook(**{field: value})({"messages": [HumanMessage("hi")]})


def test_window_settings_defaults():
    assert resolve_window_settings({"context_limit": 8}) == {
        "low_water": 0.65, "summary": True, "tool_output_turns": 3, "tool_output_share": 0.1,
    }
    assert resolve_window_settings({"mask_tool_outputs": False})["tool_output_turns"] is None


@pytest.mark.parametrize(("encoding", "model", "api_total"), [("cl100k_base", "gpt-4", 105), ("o200k_base", "gpt-4o", 101)])
def test_openai_tools_counted_as_openai_renders_them(encoding, model, api_total):
    counter = TokenCounter(encoding)
    tools_share = api_total - counter.messages(COOKBOOK_TOOL_MESSAGES)
    exact = counter.tools([COOKBOOK_TOOL], style="openai")
    assert 1.00 <= exact / tools_share <= 1.15
    # the hook's total for that request, system prompt given as is
    hook = create_pre_model_hook(
        system_prompt=COOKBOOK_TOOL_MESSAGES[0].content,
        get_topology_func=lambda s: "",
        get_llm_config_func=lambda: {"context_limit": 8, "model": model},
        get_tools_func=lambda: [COOKBOOK_TOOL],
    )
    report = hook({"messages": [COOKBOOK_TOOL_MESSAGES[1]]})["context_report"]
    # the empty topology leaves a "\n\n### CURRENT TOPOLOGY\n" section in the system message
    assert 0.97 <= report["total_tokens"] / api_total <= 1.10
    assert report["tools_tokens"] == exact


def test_other_providers_keep_the_json_estimate():
    assert tools_style_for({"model": "gpt-4o"}) == "openai"
    assert tools_style_for({"model": "gpt-4o", "base_url": "https://api.openai.com/v1"}) == "openai"
    assert tools_style_for({"model": "qwen2.5", "base_url": "http://localhost:11434/v1"}) == "json"
    assert tools_style_for({"provider": "anthropic", "model": "claude"}) == "json"
    local = make_hook(tools=[COOKBOOK_TOOL], base_url="http://localhost:11434/v1")
    assert local({"messages": [HumanMessage("hi")]})["context_report"]["tools_tokens"] == TokenCounter().tools([COOKBOOK_TOOL])


def test_one_huge_tool_output_is_capped_in_the_request_the_same_way_every_time():
    # 8K: one 3,000-token output would be over half of the history room; capped to a fifth of the budget.
    msgs = [*turn(0, 3000), *turn(1, 40), HumanMessage("and now?")]
    hook = make_hook(limit=8)
    first = hook({"messages": msgs})
    second = hook({"messages": [*msgs, AIMessage("ok"), HumanMessage("again?")],
                   "context_window": first["context_window"]})
    report = first["context_report"]
    capped = first["messages"][3]
    assert isinstance(capped, ToolMessage) and "tokens of this output cut here by GNS3 Copilot" in capped.content
    assert capped.content.startswith(msgs[2].content[:40]) and capped.content.endswith(msgs[2].content[-40:])
    cap = int(0.1 * report["message_budget"])
    assert TokenCounter().content(capped.content) <= cap < TokenCounter().content(msgs[2].content)
    assert second["messages"][3].content == capped.content  # the same text: the cached prefix holds
    assert len(msgs[2].content.split()) == 3000  # the history keeps the whole output
    assert first["messages"][7].content == msgs[6].content  # a short output is not touched
    # switched off: the whole output is sent (it fits the 8K budget)
    off = make_hook(limit=8, tool_output_share=1.0)({"messages": msgs})
    assert off["messages"][3].content == msgs[2].content


def _summary(text: str, until: int, turns: int = 1) -> dict:
    return {"text": text, "until": until, "until_id": f"h{until // 4}", "turns": turns}


def test_a_summary_that_missed_its_cut_joins_the_next_question_and_the_older_one_stays_until_the_next_cut():
    hook = make_hook(limit=4)
    history, requests = replay(hook, 30)
    window = requests[-1]["context_window"]
    start = window["start"]
    older, newer = _summary("- older notes", start - 4), _summary("- newer notes", start, turns=2)
    # Between cuts a summary opens the question that starts a turn.
    history += [AIMessage("ok", id="x1"), HumanMessage("next", id="x2")]
    first = hook({"messages": history, "context_window": window, "context_summary": older})
    assert not first["context_report"]["window_moved"] and first["messages"][-1].content.startswith(SUMMARY_HEADING)
    # A newer one landed (it covers up to the window's start): it opens the new question, the older stays.
    history += [AIMessage("ok", id="x3"), HumanMessage("and then?", id="x4")]
    second = hook({"messages": history, "context_window": first["context_window"], "context_summary": newer})
    sent = second["messages"]
    assert [m.content for m in sent[: len(first["messages"])]] == [m.content for m in first["messages"]]
    by_id = {m.id: str(m.content) for m in sent}
    assert "- older notes" in by_id["x2"] and "- newer notes" in by_id["x4"] and "- newer notes" not in by_id["x2"]
    assert sent[-1].content.endswith("and then?") and second["context_report"]["summary_text"] == "- newer notes"
    assert second["context_window"]["summary_at_id"] == "x4"
    # A tool round keeps both where they are.
    history += [AIMessage("", tool_calls=[{"name": "gns3_show", "args": {}, "id": "c9"}], id="x5"),
                ToolMessage("up", tool_call_id="c9", name="gns3_show", id="x6")]
    third = hook({"messages": history, "context_window": second["context_window"], "context_summary": newer})
    assert [m.content for m in third["messages"][: len(sent)]] == [m.content for m in sent]
    # At the next cut only the newer one is sent, opening the first message.
    window = third["context_window"]
    for i in range(40, 70):
        history += turn(i)
        out = hook({"messages": history, "context_window": window, "context_summary": newer})
        window = out["context_window"]
        if out["context_report"]["window_moved"]:
            break
    text = "\n".join(str(m.content) for m in out["messages"])
    assert out["context_report"]["window_moved"] and "- older notes" not in text
    assert out["messages"][1].content.startswith(SUMMARY_HEADING) and "- newer notes" in out["messages"][1].content
    assert [s["at_id"] for s in window["summaries"]] == [out["messages"][1].id]


def test_a_summary_written_ahead_waits_for_its_cut():
    hook = make_hook(limit=4)
    history, requests = replay(hook, 30)
    window = requests[-1]["context_window"]
    ahead = _summary("- written ahead", window["start"] + 8)  # covers turns still sent
    history += [AIMessage("ok", id="x1"), HumanMessage("next", id="x2")]
    out = hook({"messages": history, "context_window": window, "context_summary": ahead})
    assert not out["context_report"]["window_moved"]
    assert all("- written ahead" not in str(m.content) for m in out["messages"])
    assert out["context_report"]["summary_tokens"] == 0 and out["context_report"]["summary_text"] is None


def test_a_planned_cut_is_kept_while_its_turn_is_there():
    history = [m for i in range(12) for m in turn(i)]
    window = Window(4, "h1", 4, planned=16, planned_id="h4")
    assert restore_window(window.as_state(), history) == window
    assert restore_window({**window.as_state(), "planned_id": "h5"}, history) == Window(4, "h1", 4)  # history changed
    assert restore_window({**window.as_state(), "planned": 4}, history) == Window(4, "h1", 4)  # not after the start
    assert "planned" not in Window(4, "h1", 4).as_state()


def test_a_small_window_keeps_earlier_turns_with_their_outputs_masked_rather_than_drop_them():
    # 2K: the current turn made four calls (outputs capped at 200 tokens each); the default keeps
    # the last three turns' outputs, which would leave room for the current turn only.
    history = [m for i in range(4) for m in turn(i, 400)] + [HumanMessage("and R9?", id="h9")]
    for k in range(4):
        history += [AIMessage("", tool_calls=[{"name": "gns3_show", "args": {"node_name": f"R{k}"}, "id": f"c9{k}"}], id=f"a9{k}"),
                    ToolMessage(f"R{k} " + words(400), tool_call_id=f"c9{k}", name="gns3_show", id=f"t9{k}")]
    out = make_hook(limit=2)({"messages": history})
    report, sent = out["context_report"], out["messages"]
    assert report["window_moved"] and report["total_tokens"] <= report["budget"]
    questions = [m.content for m in sent if isinstance(m, HumanMessage)]
    assert questions[-1] == "and R9?" and len(questions) >= 2  # earlier turns kept...
    outputs = [m.content for m in sent if isinstance(m, ToolMessage)]
    current = outputs[-4:]
    assert all("tokens of this output cut here" in o for o in current)  # ...the current turn's outputs (capped)...
    assert outputs[:-4] and all(o.startswith("[output of gns3_show") for o in outputs[:-4])  # ...earlier ones as stubs
    # Without masking the same cut leaves the current turn alone.
    plain = make_hook(limit=2, mask_tool_outputs=False)({"messages": history})
    assert [m.content for m in plain["messages"] if isinstance(m, HumanMessage)] == ["and R9?"]


def test_a_ready_summary_whose_turns_no_longer_fit_after_it_gives_way_to_the_low_water_cut():
    hook = make_hook(limit=4, tool_output_share=1.0)
    history, requests = replay(hook, 60)
    window = requests[-1]["context_window"]
    # A summary that ends at the window's first turn after its start: what follows it is the whole
    # history sent, which no longer fits once a big turn arrives, so the cut goes further.
    ready = window["start"] + 4
    summary = {"text": "- notes", "until": ready, "until_id": history[ready].id, "turns": 3}
    history += turn(90, 1500)
    out = hook({"messages": history, "context_window": window, "context_summary": summary})
    report = out["context_report"]
    assert report["window_moved"] and out["context_window"]["start"] > ready
    assert report["total_tokens"] <= report["budget"]


def test_an_output_repeated_within_a_turn_is_sent_once():
    same = words(300)
    history = [HumanMessage("look", id="h0")]
    for k in range(3):  # a small model calling the same tool three times
        history += [AIMessage("", tool_calls=[{"name": "gns3_topology", "args": {}, "id": f"c{k}"}], id=f"a{k}"),
                    ToolMessage(same, tool_call_id=f"c{k}", name="gns3_topology", id=f"t{k}")]
    history += [AIMessage("done", id="b0"), HumanMessage("again", id="h1"),
                AIMessage("", tool_calls=[{"name": "gns3_topology", "args": {}, "id": "c9"}], id="a9"),
                ToolMessage(same, tool_call_id="c9", name="gns3_topology", id="t9")]
    out = make_hook(limit=8)({"messages": history})
    outputs = [m.content for m in out["messages"] if isinstance(m, ToolMessage)]
    note = "[the same output as the earlier call of gns3_topology in this turn returned; not repeated here]"
    assert outputs == [same, note, note, same]  # once per turn: the next turn gets it whole
    assert history[4].content == same  # the stored history keeps every output
    changed = [*history[:4], ToolMessage(same + " R2 up", tool_call_id="c1", name="gns3_topology", id="t1x"), *history[5:]]
    outputs = [m.content for m in make_hook(limit=8)({"messages": changed})["messages"] if isinstance(m, ToolMessage)]
    assert outputs[:3] == [same, same + " R2 up", note]  # a different output (the lab changed) is sent whole


def _direct_turn_tokens(messages, start, end, mask_until, counter, cap):
    from gns3server.agent.gns3_copilot.agent.context.window import masked_view

    view, _, _ = masked_view(messages, start, mask_until, counter, end, cap)
    return sum(counter.message(m) for m in view)


@pytest.mark.parametrize("cap", [None, 20])
def test_a_turns_count_is_its_masked_views_at_every_boundary_and_follows_a_replaced_message(cap):
    from gns3server.agent.gns3_copilot.agent.context.window import turn_tokens

    counter = TokenCounter("cl100k_base")
    history = [m for i in range(6) for m in turn(i, output_words=40 + 10 * i)]
    bounds = [4 * i for i in range(7)]
    for _ in range(2):  # the second time from the memo
        for mask_until in (0, 5, 8, 13, 24):
            for a, b in itertools.pairwise(bounds):
                assert turn_tokens(history, a, b, mask_until, counter, cap) == _direct_turn_tokens(
                    history, a, b, mask_until, counter, cap)
    # A message of a turn replaced by another object (the argument cut's copy): counted again.
    history[2] = history[2].model_copy(update={"content": words(300)})
    for mask_until in (0, 24):
        assert turn_tokens(history, 0, 4, mask_until, counter, cap) == _direct_turn_tokens(
            history, 0, 4, mask_until, counter, cap)
    assert turn_tokens(history, 3, 3, 0, counter, cap) == 0


def test_planning_a_cut_again_builds_no_view_of_a_turn_it_costed_before(monkeypatch):
    """While a cut is planned at every call, each call costed every turn's view anew (~5 ms at 500 turns)."""
    from gns3server.agent.gns3_copilot.agent.context import window as window_module

    built: list[int] = []
    original = window_module.masked_view

    def counted(messages, start, *args, **kwargs):
        built.append(start)
        return original(messages, start, *args, **kwargs)

    counter = TokenCounter("cl100k_base")
    history = [m for i in range(40) for m in turn(i, output_words=30)]
    total = sum(counter.message(m) for m in history)
    previous = Window(0, history[0].id, 0)
    monkeypatch.setattr(window_module, "masked_view", counted)
    # Nearly full: a cut is planned ahead, costing turns newest first.
    first = window_module.plan_window(history, previous, total + 50, total // 2, counter, tool_output_turns=2)
    assert first.planned and len(built) >= 10  # the first plan costs the turns it reaches
    built.clear()
    again = window_module.plan_window(history, previous, total + 50, total // 2, counter, tool_output_turns=2)
    assert again.window == first.window
    turns_viewed = [start for start in built if start % 4 == 0 and start < len(history) - 8]
    assert len(turns_viewed) <= 2, built


def test_a_steady_call_refers_again_only_to_what_it_added(monkeypatch):
    """A call that extends the previous fit keeps that fit's references to the history and makes
    new ones only for the messages added since (it made ~3 a message of the whole history)."""
    from gns3server.agent.gns3_copilot.agent.context import window as window_module

    made: list[int] = []
    original = window_module._refs
    monkeypatch.setattr(window_module, "_refs", lambda messages: made.append(len(messages)) or original(messages))
    hook = make_hook(limit=128)
    history: list = []
    window = None
    for i in range(30):
        messages = turn(i, output_words=20)
        history.append(messages[0])
        made.clear()
        out = hook({"messages": list(history), "context_window": window})
        window = out["context_window"]
        history.extend(messages[1:])
        if i >= 2:  # extended: the three new messages of the last turn, and the question
            assert sum(made) <= 3 * 4, (i, made)
    sent = out["messages"][1:]
    assert [m.id for m in sent] == [m.id for m in history[:-3]]


def _reference_oldest_fitting_turn(messages, bounds, mask_until, room, counter, cap):
    """The newest turns costed one by one, newest first, until the room is exceeded (as it was done)."""
    total = 0
    for k in range(len(bounds) - 2, -1, -1):
        total += _direct_turn_tokens(messages, bounds[k], bounds[k + 1], mask_until, counter, cap)
        if total > room:
            return bounds[k + 1] if k + 1 < len(bounds) - 1 else bounds[-2]
    return -1


@settings(max_examples=150, deadline=None)
@given(sizes=st.lists(st.integers(0, 80), min_size=1, max_size=9), cap=st.sampled_from([None, 25]),
       masks=st.lists(st.integers(0, 36), min_size=1, max_size=3), rooms=st.lists(st.integers(0, 900), min_size=1, max_size=4))
def test_the_oldest_fitting_turn_from_kept_sums_is_the_one_costed_turn_by_turn(sizes, cap, masks, rooms):
    """Whatever the masks and rooms, asked with the same sums again and again (as calls do while a cut
    is due), the bisection over the masked turns' sums gives what costing every turn gives."""
    from gns3server.agent.gns3_copilot.agent.context.window import _MaskedSums, oldest_fitting_turn

    counter = TokenCounter("cl100k_base")
    history = [m for i, size in enumerate(sizes) for m in turn(i, output_words=size)]
    bounds = [4 * i for i in range(len(sizes) + 1)]
    sums = _MaskedSums()
    for mask_until, room in itertools.product(masks, rooms):
        assert oldest_fitting_turn(history, bounds, mask_until, room, counter, cap, sums) == \
            _reference_oldest_fitting_turn(history, bounds, mask_until, room, counter, cap)


def test_a_cut_planned_at_every_call_costs_only_the_turns_past_the_mask(monkeypatch):
    """While a cut is due but not yet needed (the masking will do), each call planned it by looking up
    every turn's count (~450 at 500 turns): with the masked turns' sums kept with the fit, a call
    costs the turns past the mask boundary, and plans what it planned before."""
    from gns3server.agent.gns3_copilot.agent.context import window as window_module

    looked_up: list[int] = []
    original = window_module.turn_tokens
    monkeypatch.setattr(window_module, "turn_tokens",
                        lambda messages, start, *rest: looked_up.append(start) or original(messages, start, *rest))
    counter = TokenCounter("cl100k_base")
    history = [m for i in range(40) for m in turn(i, output_words=30)]
    total = sum(counter.message(m) for m in history)
    window = Window(0, history[0].id, 0)
    plans = []
    for step in range(6):
        looked_up.clear()
        plan = window_module.plan_window(history, window, total + 400, total // 2, counter, tool_output_turns=2)
        if step >= 1:
            assert len(looked_up) <= 3, (step, looked_up)  # the two unmasked turns and the one the mask moved past
        # What a counter that has seen nothing (nothing kept) plans for the same history.
        fresh = window_module.plan_window(history, window, total + 400, total // 2, TokenCounter("cl100k_base"),
                                          tool_output_turns=2)
        assert plan.window == fresh.window and plan.planned == fresh.planned
        plans.append(plan.window.planned)
        added = turn(40 + step, output_words=5)
        history = [*history, *added]
        total += sum(counter.message(m) for m in added)
    assert all(plans) and len(set(plans)) > 1  # a cut was planned at each call, and moved on with the history


def test_a_first_plan_costs_the_newest_turns_only_until_the_room_is_exceeded(monkeypatch):
    """The turns a cut drops are never costed: from empty sums, the search goes back from the newest
    masked turn only as far as it must."""
    from gns3server.agent.gns3_copilot.agent.context import window as window_module

    counter = TokenCounter("cl100k_base")
    history = [m for i in range(30) for m in turn(i, output_words=30)]
    bounds = [4 * i for i in range(31)]
    one = _direct_turn_tokens(history, 0, 4, len(history), counter, None)
    costed: list[int] = []
    original = window_module.turn_tokens
    monkeypatch.setattr(window_module, "turn_tokens",
                        lambda messages, start, *rest: costed.append(start) or original(messages, start, *rest))
    start = window_module.oldest_fitting_turn(history, bounds, 112, 3 * one + 1, counter, None, window_module._MaskedSums())
    assert start == _reference_oldest_fitting_turn(history, bounds, 112, 3 * one + 1, counter, None)
    assert len(costed) <= 6, costed  # the two unmasked turns, and masked ones back to the one that goes over
