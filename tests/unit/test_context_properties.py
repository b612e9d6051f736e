"""Property-based tests: the prepared request obeys invariants (a)-(e) for any history."""

from __future__ import annotations

import copy

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool

from gns3server.agent.gns3_copilot.agent.context.counting import REPLY_PRIMING_TOKENS, TokenCounter
from gns3server.agent.gns3_copilot.agent.context.history import TRUNCATION_MARKER, min_cost
from gns3server.agent.gns3_copilot.agent.context_manager import CONTEXT_STRATEGY_RATIOS, create_pre_model_hook

PROMPT = "You are GNS3 Copilot.\n{{topology_info}}"


@tool
def gns3_topology(project_id: str) -> str:
    """Read the topology of a GNS3 project."""
    return project_id

texts = st.one_of(
    st.just(""),
    st.text(max_size=40),
    st.sampled_from(["show ip route", "路由器 R1 的 Gi0/0 接口状态如何?", "<|endoftext|> literal", "   "]),
    st.builds(lambda word, n: " ".join([word] * n), st.sampled_from(["vlan", "接口", "x"]), st.integers(50, 6000)),
)
contents = st.one_of(
    texts,
    st.lists(
        st.one_of(
            st.builds(lambda t: {"type": "text", "text": t}, texts),
            st.just({"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}),
        ),
        max_size=3,
    ),
)
call_ids = st.sampled_from(["call_0", "call_1", "call_2", "call_3", "dup"])


@st.composite
def tool_round(draw):
    """An assistant message with 1-3 (parallel) calls, answered fully, partly, or out of order."""
    ids = draw(st.lists(call_ids, min_size=1, max_size=3, unique=True))
    ai = AIMessage(
        content=draw(st.one_of(st.just(""), texts)),
        tool_calls=[{"name": "gns3_topology", "args": {"project_id": draw(texts)}, "id": i} for i in ids],
    )
    answered = draw(st.lists(st.sampled_from(ids), unique=True, max_size=len(ids)))
    results = [ToolMessage(content=draw(contents), tool_call_id=i, name="gns3_topology") for i in answered]
    return [ai, *draw(st.permutations(results))]


events = st.one_of(
    st.builds(lambda c: [HumanMessage(content=c)], contents),
    st.builds(lambda c: [AIMessage(content=c)], contents),
    tool_round(),
    st.builds(lambda c, i: [ToolMessage(content=c, tool_call_id=i)], texts, call_ids),  # orphan
    st.builds(lambda c: [SystemMessage(content=c)], texts),
)
histories = st.lists(events, max_size=25).map(lambda groups: [m for g in groups for m in g])


def check_invariants(history, prepared, report, tools_tokens, counter):
    # (a) exactly one system message, first
    assert isinstance(prepared[0], SystemMessage)
    assert not any(isinstance(m, SystemMessage) for m in prepared[1:])
    # (b) then a user message
    assert isinstance(prepared[1], HumanMessage)
    # (c) calls answered right after, no orphan results
    i = 1
    while i < len(prepared):
        m = prepared[i]
        assert not isinstance(m, ToolMessage), f"orphan tool message at {i}"
        if isinstance(m, AIMessage) and m.tool_calls:
            expected = [c["id"] for c in m.tool_calls]
            answers = prepared[i + 1 : i + 1 + len(expected)]
            assert [a.tool_call_id for a in answers if isinstance(a, ToolMessage)] == expected
            i += len(expected)
        i += 1
    # (d) the latest user message is sent (whole, or cut with the marker)
    humans = [m for m in history if isinstance(m, HumanMessage)]
    sent = [m for m in prepared if isinstance(m, HumanMessage)][-1]
    if humans:
        latest = humans[-1]
        assert sent is latest or (
            "tokens cut here by GNS3 Copilot" in sent.content and counter.message(latest) > counter.message(sent)
        )
    # (e) within budget unless the system message (plus a minimal question) alone is over it
    total = counter.messages(prepared) + tools_tokens
    assert total == report["total_tokens"]
    if report["over_budget"]:
        floor = counter.message(prepared[0]) + REPLY_PRIMING_TOKENS + min_cost(sent, counter)
        assert floor > report["message_budget"]
    else:
        assert total <= report["budget"]
    # kept originals keep their order (tool results follow their call's order)
    positions = {id(m): k for k, m in enumerate(history)}
    kept = [positions[id(m)] for m in prepared if id(m) in positions and not isinstance(m, ToolMessage)]
    assert kept == sorted(kept)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    history=histories,
    limit=st.integers(1, 64),
    strategy=st.sampled_from(sorted(CONTEXT_STRATEGY_RATIOS)),
    topology=st.one_of(st.none(), texts),
    with_tools=st.booleans(),
    model=st.sampled_from(["gpt-4", "gpt-4o"]),
)
def test_prepared_request_invariants(history, limit, strategy, topology, with_tools, model):
    tools = [gns3_topology] if with_tools else []
    config = {"context_limit": limit, "context_strategy": strategy, "model": model}
    hook = create_pre_model_hook(PROMPT, lambda s: s.get("topology_info"), lambda: config, lambda: tools)
    state = {"messages": history, "topology_info": topology}
    snapshot = copy.deepcopy(state)
    out = hook(state)
    assert state == snapshot  # no mutation of the caller's state or messages
    report = out["context_report"]
    assert not report["fallback"]
    counter = TokenCounter(report["encoding"])
    check_invariants(history, out["messages"], report, report["tools_tokens"], counter)
    event(f"dropped={bool(report['messages_dropped'])}")
    event(f"truncated={bool(report['truncated'])}")
    event(f"over_budget={report['over_budget']}")
    event(f"interrupted={bool(report['interrupted_calls'])}")


def test_marker_is_what_the_invariant_looks_for():
    assert "tokens cut here by GNS3 Copilot" in TRUNCATION_MARKER


big_texts = st.builds(lambda word, n: " ".join([word] * n), st.sampled_from(["vlan", "接口"]), st.integers(500, 20000))


@st.composite
def heavy_current_turns(draw):
    """A history whose latest turn carries giant pastes and tool outputs."""
    question = HumanMessage(content=draw(st.one_of(texts, big_texts)))
    rounds = []
    for n in range(draw(st.integers(0, 3))):
        call_id = f"heavy_{n}"
        rounds += [
            AIMessage(content="", tool_calls=[{"name": "gns3_topology", "args": {"project_id": "p"}, "id": call_id}]),
            ToolMessage(content=draw(st.one_of(texts, big_texts)), tool_call_id=call_id),
        ]
    return [*draw(histories), question, *rounds]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(history=heavy_current_turns(), limit=st.integers(1, 24), strategy=st.sampled_from(sorted(CONTEXT_STRATEGY_RATIOS)))
def test_giant_items_are_cut_not_lost(history, limit, strategy):
    config = {"context_limit": limit, "context_strategy": strategy}
    hook = create_pre_model_hook(PROMPT, lambda s: None, lambda: config, list)
    snapshot = copy.deepcopy(history)
    out = hook({"messages": history})
    assert history == snapshot
    report = out["context_report"]
    check_invariants(history, out["messages"], report, 0, TokenCounter(report["encoding"]))
    event(f"truncated={bool(report['truncated'])}")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(history=heavy_current_turns(), limit=st.integers(2, 24), below=st.integers(0, 60))
def test_a_cut_fits_our_count_when_the_definitions_measure_below_it(history, limit, below):
    """The tool definitions' cost measured on the server below our count of them: whole turns may
    use the measured room, but a request with an item cut to fit stays within the budget in our count."""
    config = {"context_limit": limit}
    tools = [gns3_topology]
    hook = create_pre_model_hook(PROMPT, lambda s: None, lambda: config, lambda: tools)
    ours = hook({"messages": []})["context_report"]["tools_tokens"]
    out = hook({"messages": history, "tools_server_tokens": max(0, ours - below)})
    report = out["context_report"]
    counter = TokenCounter(report["encoding"])
    if report["truncated"] and not report["over_budget"]:
        assert counter.messages(out["messages"]) + report["tools_tokens"] <= report["budget"]
    event(f"truncated={bool(report['truncated'])}")


def _shape(messages):
    from gns3server.agent.gns3_copilot.agent.context.counting import message_key

    return [(type(m).__name__, message_key(m)) for m in messages]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    history=histories,
    more=histories,
    limit=st.integers(1, 24),
    strategy=st.sampled_from(sorted(CONTEXT_STRATEGY_RATIOS)),
    with_tools=st.booleans(),
    scale=st.sampled_from([1.0, 0.8, 1.3]),
)
def test_a_call_after_new_messages_prepares_what_a_fresh_hook_would(history, more, limit, strategy, with_tools, scale):
    """The hook extends its previous fit by what was added since; the request (and its report)
    must be exactly what a hook that remembers nothing prepares from the same stored window,
    also when the calibration moved the budget in between."""
    tools = [gns3_topology] if with_tools else []
    config = {"context_limit": limit, "context_strategy": strategy}
    messages = [*history, *more]
    for i, message in enumerate(messages):
        message.id = f"m{i}"  # ids, as the checkpointer gives them
    hook = create_pre_model_hook(PROMPT, lambda s: None, lambda: config, lambda: tools)
    window = hook({"messages": messages[: len(history)]})["context_window"]
    again = hook({"messages": messages, "context_window": window, "token_scale": scale})
    fresh = create_pre_model_hook(PROMPT, lambda s: None, lambda: config, lambda: tools)(
        {"messages": messages, "context_window": window, "token_scale": scale})
    assert _shape(again["messages"]) == _shape(fresh["messages"])
    assert again["context_report"] == fresh["context_report"]
    assert again["context_window"] == fresh["context_window"]


@st.composite
def clean_turns(draw):
    """Whole agent turns as the graph stores them: a question, answered tool rounds, an answer."""
    messages = []
    for n in range(draw(st.integers(1, 12))):
        messages.append(HumanMessage(content=draw(texts)))
        for k in range(draw(st.integers(0, 2))):
            call_id = f"c{n}_{k}_{draw(st.integers(0, 10**6))}"
            messages.append(AIMessage(content="", tool_calls=[{"name": "gns3_topology", "args": {"project_id": "p"}, "id": call_id}]))
            messages.append(ToolMessage(content=draw(texts), tool_call_id=call_id, name="gns3_topology"))
        if draw(st.booleans()):
            messages.append(AIMessage(content=draw(texts)))
    return messages


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(history=clean_turns(), more=clean_turns(), limit=st.integers(2, 64), with_tools=st.booleans(),
       scale=st.sampled_from([1.0, 0.8, 1.3]))
def test_a_conversation_that_grows_by_turns_is_prepared_as_a_fresh_hook_would(history, more, limit, with_tools, scale):
    test_a_call_after_new_messages_prepares_what_a_fresh_hook_would.hypothesis.inner_test(
        history, more, limit, "balanced", with_tools, scale)
