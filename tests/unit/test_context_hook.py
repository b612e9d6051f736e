"""The pre-model hook: budgets, topology injection, trimming rules, logs and report."""

from __future__ import annotations

import copy
import logging
import math
import re

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool

from gns3server.agent.gns3_copilot.agent.context.counting import TokenCounter
from gns3server.agent.gns3_copilot.agent.context.history import INTERRUPTED_TOOL_RESULT, NO_USER_MESSAGE
from gns3server.agent.gns3_copilot.agent.context_manager import (
    CONTEXT_STRATEGY_RATIOS,
    DEFAULT_CONTEXT_STRATEGY,
    count_tokens,
    create_pre_model_hook,
    resolve_budget,
)

PROMPT = "You are GNS3 Copilot.\n### CURRENT TOPOLOGY\n{{topology_info}}\nAnswer briefly."
CURRENT = re.compile(r"\[\.\.\. \d+ tokens cut here by GNS3 Copilot")


@tool
def gns3_topology(project_id: str) -> str:
    """Read the topology of a GNS3 project."""
    return project_id


def make_hook(limit=8, strategy="balanced", tools=(), prompt=PROMPT, **extra):
    config = {"context_limit": limit, "context_strategy": strategy, **extra}
    return create_pre_model_hook(
        system_prompt=prompt,
        get_topology_func=lambda s: s.get("topology_info"),
        get_llm_config_func=lambda: config,
        get_tools_func=lambda: list(tools),
    )


def words(n: int, word: str = "interface") -> str:
    return " ".join([word] * n)  # one token per word in cl100k_base


def tool_turn(i: int, output_words: int = 20) -> list:
    call_id = f"call_{i}"
    return [
        HumanMessage(f"question {i}"),
        AIMessage("", tool_calls=[{"name": "gns3_topology", "args": {"project_id": "p"}, "id": call_id}]),
        ToolMessage(words(output_words), tool_call_id=call_id, name="gns3_topology"),
        AIMessage(f"answer {i}"),
    ]


def request_tokens(messages) -> int:
    return TokenCounter().messages(messages)


# --- configuration -----------------------------------------------------------


def test_strategies_and_default():
    assert CONTEXT_STRATEGY_RATIOS == {"conservative": 0.60, "balanced": 0.75, "aggressive": 0.85}
    assert DEFAULT_CONTEXT_STRATEGY == "balanced"
    assert resolve_budget({"context_limit": 128})["budget"] == 96_000
    assert resolve_budget({"context_limit": 128, "context_strategy": "conservative"})["budget"] == 76_800
    assert resolve_budget({"context_limit": 128, "context_strategy": "aggressive"})["budget"] == 108_800


def test_missing_context_limit():
    with pytest.raises(ValueError, match="^context_limit is required in LLM config$"):
        create_pre_model_hook(PROMPT, lambda s: None, dict, list)({"messages": []})
    with pytest.raises(ValueError, match="^context_limit is required in LLM config$"):
        create_pre_model_hook(PROMPT, lambda s: None, lambda: None, list)({"messages": []})


@pytest.mark.parametrize("bad", [0, -1, "128", 1.5, True, None, [128]])
def test_invalid_context_limit(bad):
    with pytest.raises(ValueError, match=re.escape(f"Invalid context_limit: {bad}")):
        make_hook(limit=bad)({"messages": [HumanMessage("hi")]})


@pytest.mark.parametrize("bad", ["fast", "Balanced", 1])
def test_invalid_strategy_names_the_allowed_ones(bad):
    with pytest.raises(ValueError, match="Invalid context_strategy.*allowed: aggressive, balanced, conservative"):
        make_hook(strategy=bad)({"messages": [HumanMessage("hi")]})


def test_strategy_defaults_to_balanced_when_absent():
    hook = create_pre_model_hook(PROMPT, lambda s: None, lambda: {"context_limit": 4}, list)
    assert hook({"messages": [HumanMessage("hi")]})["context_report"]["budget"] == 3000


# --- topology ----------------------------------------------------------------


def test_no_topology_injects_placeholder_and_warns(caplog):
    caplog.set_level(logging.INFO)
    out = make_hook()({"messages": [HumanMessage("hi")]})
    system = out["messages"][0]
    assert isinstance(system, SystemMessage)
    assert "### CURRENT TOPOLOGY\n(No topology information available)\nAnswer" in system.content
    assert "✗ Topology data is None, injecting placeholder" in caplog.text
    assert out["context_report"]["topology_available"] is False


def test_string_topology_is_injected_and_logged(caplog):
    caplog.set_level(logging.INFO)
    topo = "PC1 vpcs started console telnet 127.0.0.1:5000\nlinks: PC1 e0 <-> PC2 e0"
    out = make_hook()({"messages": [HumanMessage("hi")], "topology_info": topo})
    assert out["messages"][0].content == PROMPT.replace("{{topology_info}}", topo)
    assert f"✓ Topology injected: {len(topo)} chars, nodes: []" in caplog.text
    report = out["context_report"]
    assert report["topology_tokens"] == count_tokens(topo)
    assert report["topology_reduced"] is False


def test_prompt_without_placeholder_gets_a_section():
    out = make_hook(prompt="Be brief.")({"messages": [HumanMessage("hi")], "topology_info": "PC1 vpcs"})
    assert out["messages"][0].content == "Be brief.\n\n### CURRENT TOPOLOGY\nPC1 vpcs"


def test_big_string_topology_is_cut_at_lines_with_a_note():
    lines = [f"PC{i} vpcs stopped console telnet 127.0.0.1:{5000 + i}" for i in range(2000)]
    topo = "\n".join(lines)
    out = make_hook(limit=8)({"messages": [HumanMessage("hi")], "topology_info": topo})
    report = out["context_report"]
    assert report["topology_reduced"] is True
    assert report["topology_tokens"] <= int(report["message_budget"] * 0.25)
    injected = out["messages"][0].content.split("### CURRENT TOPOLOGY\n")[1].split("\nAnswer briefly.")[0]
    *kept, note = injected.splitlines()
    assert kept == lines[: len(kept)] and kept  # whole lines, from the start
    assert "Call the topology tool for full details" in note and f"{2000 - len(kept)} more line(s)" in note


def test_dict_topology_is_rendered_and_node_names_logged(caplog):
    caplog.set_level(logging.INFO)
    topo = {
        "name": "lab",
        "nodes": [
            {"name": "PC1", "node_id": "a", "node_type": "vpcs", "status": "stopped", "ports": []},
            {"name": "PC2", "node_id": "b", "node_type": "vpcs", "status": "stopped", "ports": []},
        ],
        "links": [],
    }
    out = make_hook()({"messages": [HumanMessage("hi")], "topology_info": topo})
    assert "PC1" in out["messages"][0].content and "PC2" in out["messages"][0].content
    assert "nodes: ['PC1', 'PC2']" in caplog.text
    assert out["context_report"]["topology_level"] == 0


def test_dict_topology_is_reduced_step_by_step():
    nodes = [
        {"name": f"R{i}", "node_id": f"id{i}", "node_type": "qemu", "status": "started", "ports": []}
        for i in range(300)
    ]
    topo = {"name": "big", "nodes": nodes, "links": []}
    levels = []
    for limit in (64, 16, 8, 4, 2):
        report = make_hook(limit=limit)({"messages": [HumanMessage("hi")], "topology_info": topo})["context_report"]
        assert report["topology_tokens"] <= int(report["message_budget"] * 0.25)
        levels.append(report["topology_level"])
    assert levels == sorted(levels) and levels[-1] > levels[0]


# --- trimming ----------------------------------------------------------------


def test_everything_fits_logs_context_ready(caplog):
    caplog.set_level(logging.INFO)
    msgs = [*tool_turn(1), HumanMessage("and now?")]
    out = make_hook(limit=32, tools=[gns3_topology])({"messages": msgs})
    assert out["messages"][1:] == msgs
    report = out["context_report"]
    line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("Context ready"))
    expected_total = report["total_tokens"]
    assert line == (
        f"Context ready: 6 msgs, ~{expected_total - report['tools_tokens']} tokens + {report['tools_tokens']} tools"
        f" = {expected_total} / 32K ({100 * expected_total / 32000:.1f}%), strategy=balanced"
    )
    assert report["total_tokens"] == request_tokens(out["messages"]) + report["tools_tokens"]
    assert report["messages_dropped"] == 0 and report["truncated"] == []


def test_old_turns_dropped_whole_oldest_first(caplog):
    caplog.set_level(logging.INFO)
    msgs = [m for i in range(40) for m in tool_turn(i, 100)] + [HumanMessage("latest question")]
    # The plain trim: fill up to the budget, no masking (the defaults are in test_context_window.py).
    out = make_hook(limit=2, context_low_water=1.0, mask_tool_outputs=False)({"messages": msgs})
    prepared = out["messages"]
    assert isinstance(prepared[1], HumanMessage)
    assert prepared[-1].content == "latest question"
    # what was kept is a suffix of the input made of whole turns
    assert prepared[1:] == msgs[len(msgs) - len(prepared) + 1 :]
    report = out["context_report"]
    assert report["messages_dropped"] == len(msgs) - (len(prepared) - 1) > 0
    assert report["total_tokens"] <= report["budget"]
    assert any(r.getMessage().startswith(f"Messages trimmed: {len(msgs)} → {len(prepared)} msgs. Total: ~")
               for r in caplog.records)


def test_all_history_trimmed_keeps_last_user_message():
    msgs = [*tool_turn(1, 1500), HumanMessage("what now?")]
    # No cap on one output, no masking (with it the earlier turn stays, its output a stub).
    out = make_hook(limit=2, tool_output_share=1.0, mask_tool_outputs=False)({"messages": msgs})
    assert [m.content for m in out["messages"][1:]] == ["what now?"]
    masked = make_hook(limit=2, tool_output_share=1.0)({"messages": msgs})["messages"]
    assert len(masked) == len(msgs) + 1 and masked[3].content.startswith("[output of ")


def test_giant_tool_output_in_current_turn_is_cut_head_and_tail():
    output = "HEAD " + words(20_000) + " TAIL"
    msgs = [
        HumanMessage("show me R1's config"),
        AIMessage("", tool_calls=[{"name": "gns3_topology", "args": {"project_id": "p"}, "id": "c1"}]),
        ToolMessage(output, tool_call_id="c1", name="gns3_topology"),
    ]
    original = copy.deepcopy(msgs)
    out = make_hook(limit=8, tool_output_share=1.0)({"messages": msgs})  # no cap: cut only to fit
    prepared = out["messages"]
    assert [type(m) for m in prepared] == [SystemMessage, HumanMessage, AIMessage, ToolMessage]
    cut = prepared[3].content
    assert cut.startswith("HEAD interface") and cut.endswith("interface TAIL") and CURRENT.search(cut)
    assert prepared[3].tool_call_id == "c1"
    report = out["context_report"]
    assert report["total_tokens"] <= report["budget"]
    assert report["truncated"][0]["role"] == "tool" and report["truncated"][0]["tokens_before"] > 20_000
    assert msgs == original  # the stored history keeps the original


def test_giant_paste_is_cut_never_dropped():
    paste = "BEGIN " + words(50_000, "line") + " END"
    out = make_hook(limit=4)({"messages": [*tool_turn(1), HumanMessage(paste)]})
    last = out["messages"][-1]
    assert isinstance(last, HumanMessage) and last.content.startswith("BEGIN") and last.content.endswith("END")
    assert CURRENT.search(last.content)
    assert out["context_report"]["total_tokens"] <= out["context_report"]["budget"]


def test_interrupted_tool_call_is_answered_in_the_copy():
    msgs = [
        HumanMessage("start R1 and R2"),
        AIMessage("", tool_calls=[
            {"name": "start_node", "args": {"node": "R1"}, "id": "a"},
            {"name": "start_node", "args": {"node": "R2"}, "id": "b"},
        ]),
        ToolMessage("R1 started", tool_call_id="a"),
        HumanMessage("are they up?"),
    ]
    out = make_hook(limit=8)({"messages": msgs})
    prepared = out["messages"]
    assert [type(m).__name__ for m in prepared] == [
        "SystemMessage", "HumanMessage", "AIMessage", "ToolMessage", "ToolMessage", "HumanMessage"
    ]
    assert prepared[3] is msgs[2]
    assert prepared[4].tool_call_id == "b" and prepared[4].content == INTERRUPTED_TOOL_RESULT
    assert out["context_report"]["interrupted_calls"] == 1
    assert len(msgs) == 4


def test_orphan_tool_results_and_stray_system_messages_are_dropped():
    msgs = [
        ToolMessage("lost", tool_call_id="zzz"),
        SystemMessage("old system prompt"),
        HumanMessage("hi"),
        ToolMessage("also lost", tool_call_id="yyy"),
        AIMessage("hello"),
    ]
    out = make_hook()({"messages": msgs})
    assert [m.content for m in out["messages"][1:]] == ["hi", "hello"]
    assert sum(isinstance(m, SystemMessage) for m in out["messages"]) == 1
    assert out["context_report"]["orphan_results"] == 2


def test_no_human_message_gets_a_synthetic_question():
    msgs = [AIMessage("I was saying...")]
    out = make_hook()({"messages": msgs})
    assert isinstance(out["messages"][1], HumanMessage)
    assert out["messages"][1].content == NO_USER_MESSAGE
    out = make_hook()({"messages": []})
    assert [type(m) for m in out["messages"]] == [SystemMessage, HumanMessage]


def test_system_over_budget_keeps_system_and_question(caplog):
    caplog.set_level(logging.INFO)
    prompt = words(5000, "policy") + "\n{{topology_info}}"
    out = make_hook(limit=2, prompt=prompt)({"messages": [*tool_turn(1), HumanMessage("q?")]})
    assert [m.content for m in out["messages"][1:]] == ["q?"]
    assert out["messages"][0].content.startswith("policy policy")
    assert out["context_report"]["over_budget"] is True
    assert "exceed the message budget" in caplog.text


def test_tools_over_budget_logs_error(caplog):
    caplog.set_level(logging.INFO)
    many = [object()] * 5  # 5 x 1000 tokens of fallback estimates
    out = make_hook(limit=4, tools=many)({"messages": [HumanMessage("hi")]})
    assert "Tool definitions (5000 tokens) exceed the input budget (3000 tokens)" in caplog.text
    assert "increase context_limit or reduce the number of tools" in caplog.text
    assert [m.content for m in out["messages"][1:]] == ["hi"]
    assert out["context_report"]["over_budget"] is True


def test_trimming_failure_falls_back_to_original(caplog):
    caplog.set_level(logging.INFO)
    bad = [HumanMessage("hi"), 42]
    out = make_hook()({"messages": bad})
    assert out["messages"][1:] == bad
    assert "Failed to trim messages:" in caplog.text
    assert "Returning original messages due to trimming error" in caplog.text
    assert out["context_report"]["fallback"] is True


def test_dict_messages_are_accepted():
    out = make_hook()({"messages": [{"role": "user", "content": "hi"}]})
    assert isinstance(out["messages"][1], HumanMessage)


def test_o200k_models_count_with_o200k():
    report = make_hook(model="gpt-4o")({"messages": [HumanMessage("hi")]})["context_report"]
    assert report["encoding"] == "o200k_base"
    report = make_hook(model="gpt-4o", tokenizer="cl100k_base")({"messages": [HumanMessage("hi")]})["context_report"]
    assert report["encoding"] == "cl100k_base"


def test_report_adds_up():
    msgs = [m for i in range(5) for m in tool_turn(i)] + [HumanMessage("q")]
    out = make_hook(limit=16, tools=[gns3_topology])({"messages": msgs, "topology_info": "PC1 vpcs"})
    r = out["context_report"]
    assert r["system_tokens"] + r["topology_tokens"] + r["history_tokens"] + r["tools_tokens"] == r["total_tokens"]
    assert r["total_tokens"] == request_tokens(out["messages"]) + r["tools_tokens"]
    assert r["limit_tokens"] == 16_000 and r["budget"] == 12_000
    assert r["message_budget"] == 12_000 - r["tools_tokens"]
    assert r["messages_in"] == len(msgs) and r["messages_out"] == len(out["messages"]) - 1
    assert r["percent"] == round(100 * r["total_tokens"] / 16_000, 1)


def test_steady_state_only_counts_new_messages(monkeypatch):
    hook = make_hook(limit=128)
    msgs = [m for i in range(50) for m in tool_turn(i)] + [HumanMessage("q")]
    hook({"messages": msgs})
    counted = []
    real = TokenCounter._count_uncached
    monkeypatch.setattr(TokenCounter, "_count_uncached", lambda self, m: counted.append(m) or real(self, m))
    rebuilt = [m.model_copy() for m in msgs] + [AIMessage("new answer"), HumanMessage("next")]
    hook({"messages": rebuilt})
    # the system message (same topology) and the two new messages only
    assert sorted(m.content for m in counted) == ["new answer", "next"]


@pytest.mark.parametrize(("scale", "expected"), [(None, 1.0), (1.5, 1.5), (3.0, 3.0), (10, 4.0), (0.1, 0.75), (-1, 1.0), ("x", 1.0), (float("nan"), 1.0)])
def test_token_scale_tightens_the_budget_within_bounds(scale, expected):
    report = make_hook(limit=8)({"messages": [HumanMessage("hi")], "token_scale": scale})["context_report"]
    assert report["token_scale"] == expected
    # Never past the window minus the reply's reserve (8K: 1,000 tokens by default), whatever the scale.
    assert report["budget"] == min(int(6000 / expected), 8000 - 1000)
    assert report["answer_tokens"] == 1000


def test_shared_counters_outlive_a_hook():
    counters = {}
    msgs = [HumanMessage("hello")]
    create_pre_model_hook(PROMPT, lambda s: None, lambda: {"context_limit": 4}, list, counters=counters)({"messages": msgs})
    assert set(counters) == {"cl100k_base"} and counters["cl100k_base"]._cache


def test_repairs_are_logged_apart_from_trimming(caplog):
    caplog.set_level(logging.INFO)
    msgs = [HumanMessage("go"), AIMessage("", tool_calls=[{"name": "x", "args": {}, "id": "a"}]), HumanMessage("?")]
    make_hook(limit=8)({"messages": msgs})
    assert "History repaired: 1 unanswered tool call(s) answered, 0 orphan tool result(s) left out" in caplog.text
    assert "Context ready: 5 msgs" in caplog.text  # nothing dropped or cut


def test_a_call_without_tools_fits_the_budget_that_kept_their_room_when_the_history_overflows():
    """The no-tools request of a small window with a long history (llama-cpp-python answers a text
    reply empty once tools are offered, so the copilot asks again without them): at the server's
    factor and measured definitions cost, it stays within the budget minus the definitions' room,
    in our tokens and the server's. The budget binds here (turns are dropped), so this cannot pass
    for want of a request that fills it, as the real-server test's check could."""
    msgs = [m for i in range(40) for m in tool_turn(i, output_words=60)] + [HumanMessage("q")]
    scale, measured = 1.6, 150
    hook = make_hook(limit=2, tools=[gns3_topology])
    state = {"messages": msgs, "token_scale": scale, "tools_server_tokens": measured}
    with_tools = hook(state)
    bare = hook({**state, "tools_offered": False})
    report = bare["context_report"]
    assert report["messages_dropped"] > 0 and not report["over_budget"]
    assert report["tools_tokens"] == 0 and report["tools_server_tokens"] == measured
    room = math.ceil(measured / scale)
    assert report["message_budget"] == report["budget"] - room
    assert report["total_tokens"] <= report["budget"] - room
    assert report["server_tokens_estimate"] <= (report["budget"] - room) * scale
    assert report["budget"] * scale <= 2000 - report["answer_tokens"]
    assert [m.content for m in bare["messages"]] == [m.content for m in with_tools["messages"]]


def test_a_call_without_tools_does_not_count_their_definitions_but_keeps_their_room():
    """The model repeated a call and is asked to answer without tools: the request carries no
    definitions, so the estimate (and the calibration it feeds) must not include them; the
    history sent is the same as with tools, so the next request's prefix holds."""
    msgs = [m for i in range(5) for m in tool_turn(i)] + [HumanMessage("q")]
    hook = make_hook(limit=4, tools=[gns3_topology])
    with_tools = hook({"messages": msgs})
    without = hook({"messages": msgs, "tools_offered": False})
    offered, bare = with_tools["context_report"], without["context_report"]
    assert offered["tools_tokens"] > 0 and bare["tools_tokens"] == 0
    assert bare["total_tokens"] == offered["total_tokens"] - offered["tools_tokens"]
    assert bare["message_budget"] == offered["message_budget"]
    assert [m.content for m in without["messages"]] == [m.content for m in with_tools["messages"]]


def long_agent_history(turns: int, output_words: int) -> list:
    history = []
    for i in range(turns):
        for m in tool_turn(i, output_words):
            m.id = f"m{len(history)}"  # ids, as the checkpointer gives them
            history.append(m)
    return history


def test_a_steady_call_costs_what_is_new_not_the_history(monkeypatch):
    """The hook recognises the message objects of the previous call (the checkpointer keeps them) and
    extends that call's fit: a call after one new message keys and counts it, not the 1,600 before it."""
    from gns3server.agent.gns3_copilot.agent.context import counting

    history = long_agent_history(400, 300)
    hook = make_hook(limit=128, tools=[gns3_topology])
    window = hook({"messages": history})["context_window"]
    keyed, counted = [], []
    real_key, real_count = counting.message_key, TokenCounter.message
    monkeypatch.setattr(counting, "message_key", lambda m: keyed.append(m) or real_key(m))
    monkeypatch.setattr(TokenCounter, "message", lambda self, m: counted.append(m) or real_count(self, m))
    grown = [*history, HumanMessage("and now?", id="new")]
    out = hook({"messages": grown, "context_window": window})
    assert out["context_report"]["messages_out"] > 1000  # a long request
    assert len(keyed) <= 5  # the new question and the system message (built anew each call)
    assert len(counted) <= 10  # the fit before is extended, not done again over 1,600 messages


def test_a_cold_call_never_counts_what_the_budget_drops(monkeypatch):
    """A history of ~750K tokens with no stored window (a session from before windows, a restart):
    the outputs the cut drops are never encoded, so a cold call costs about what it sends. (Masked
    outputs are encoded, once, to put their size in their stubs: masking off here.)"""
    history = long_agent_history(500, 1500)
    encoded = []
    real_text = TokenCounter.text
    monkeypatch.setattr(TokenCounter, "text", lambda self, text: encoded.append(len(text)) or real_text(self, text))
    hook = make_hook(limit=128, tools=[gns3_topology], mask_tool_outputs=False)
    out = hook({"messages": [*history, HumanMessage("and now?")]})
    report = out["context_report"]
    assert report["messages_dropped"] > 1000
    history_chars = sum(len(m.content) for m in history)
    assert sum(encoded) < history_chars / 3  # the budget is ~12% of the history; old code encoded all of it


@pytest.mark.parametrize("question", [words(200_000), "路由器 R1 😀 {\"ip\": \"10.0.0.1\"} " * 20_000], ids=["english", "mixed"])
def test_a_question_cut_to_fit_lands_within_the_budget_in_exact_tokens(question):
    """At 128K balanced, a paste too big for the budget, with the definitions' cost measured on the
    server 27 tokens below our count of them (a stub's probe did that): the cut filled the room the
    measured cost left, and the request came out 27 tokens over the 96,000, counted as the provider
    counts. A cut fills its room to the last token, so it must fit whichever count is right."""
    hook = make_hook(limit=128, tools=[gns3_topology])
    ours = hook({"messages": [HumanMessage("hi")]})["context_report"]["tools_tokens"]
    out = hook({"messages": [*tool_turn(1), HumanMessage(question)], "tools_server_tokens": ours - 27})
    report = out["context_report"]
    assert report["truncated"] and report["budget"] == 96_000 and not report["over_budget"]
    exact = request_tokens(out["messages"]) + report["tools_tokens"]  # the cookbook's count, as sent
    assert exact == report["total_tokens"]
    assert exact <= report["budget"]
    assert report["server_tokens_estimate"] <= report["budget"]


def test_the_counters_keep_no_message_of_a_conversation_alive():
    """What the hook remembers of a conversation (counts, copies, the fit it extends) goes with its
    messages: a server's counters outlive every conversation they have counted."""
    import gc
    import weakref

    counters: dict = {}
    config = {"context_limit": 8}
    hook = create_pre_model_hook(PROMPT, lambda s: None, lambda: config, lambda: [gns3_topology], counters=counters)
    history = long_agent_history(60, 400)
    probes = [weakref.ref(m) for m in history[::7]]
    window = hook({"messages": history})["context_window"]
    hook({"messages": [*history, HumanMessage("and now?", id="new")], "context_window": window})
    del history, window
    gc.collect()
    assert counters and all(probe() is None for probe in probes)


def test_the_reports_headline_is_the_request_in_the_providers_tokens_against_its_budget():
    """At a factor of 1.6 and the definitions measured at 150 tokens, a request our count puts at
    N tokens is 1.6 N + 150 of the provider's, against 1.6 times the budget our count is held to."""
    msgs = [m for i in range(3) for m in tool_turn(i, output_words=20)] + [HumanMessage("q")]
    hook = make_hook(limit=8, tools=[gns3_topology])
    plain = hook({"messages": msgs})["context_report"]
    assert (plain["headline_tokens"], plain["headline_budget"], plain["headline_calibrated"]) == (
        plain["total_tokens"], plain["budget"], False)
    learnt = hook({"messages": msgs, "token_scale": 1.6, "token_scale_calibrated": True,
                   "tools_server_tokens": 150})["context_report"]
    messages = learnt["total_tokens"] - learnt["tools_tokens"]
    assert learnt["headline_calibrated"] is True
    assert learnt["headline_tokens"] == learnt["server_tokens_estimate"] == round(1.6 * messages + 150)
    assert learnt["headline_budget"] == round(1.6 * learnt["budget"])
    assert learnt["headline_percent"] == round(100 * learnt["headline_tokens"] / 8000, 1)
    # A measured cost alone is a provider's count too.
    assert hook({"messages": msgs, "tools_server_tokens": 150})["context_report"]["headline_calibrated"] is True


def test_a_steady_call_encodes_only_the_new_messages_not_the_tools_nor_the_topology(monkeypatch):
    topology = {"name": "lab", "nodes": [{"name": f"R{i}", "node_type": "qemu", "status": "started"} for i in range(6)],
                "links": []}
    hook = make_hook(limit=128, tools=[gns3_topology])
    msgs = [m for i in range(20) for m in tool_turn(i)] + [HumanMessage("q")]
    hook({"messages": msgs, "topology_info": topology})
    encoded = []
    real = TokenCounter.text
    monkeypatch.setattr(TokenCounter, "text", lambda self, text: encoded.append(text) or real(self, text))
    report = hook({"messages": [*msgs, AIMessage("new answer"), HumanMessage("next")], "topology_info": topology})
    assert report["context_report"]["tools_tokens"] > 0 and report["context_report"]["topology_tokens"] > 0
    assert sorted(t for t in encoded if t not in ("assistant", "user")) == ["new answer", "next"]
