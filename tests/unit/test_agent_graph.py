"""The agent graph with a scripted model at the model boundary."""

from __future__ import annotations

import logging
import math
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import ToolException, tool
from langgraph.checkpoint.memory import InMemorySaver

from gns3server.agent.gns3_copilot.agent.context.calibration import DEFAULT_FRAMING
from gns3server.agent.gns3_copilot.agent.context.tokenizer import get_encoding
from gns3server.agent.gns3_copilot.agent.context_manager import clamp_token_scale, create_pre_model_hook
from gns3server.agent.gns3_copilot.agent.gns3_copilot import (
    STEP_LIMIT_MESSAGE,
    AgentSettings,
    build_copilot_graph,
)
from gns3server.agent.gns3_copilot.agent.policies.modes import tools_for_mode
from gns3server.agent.gns3_copilot.tools.gate import ToolErrorPolicy
from tests.support.scripted_model import ScriptedChatModel


@tool
def show_nodes(project_id: str) -> str:
    """List the nodes of a project."""
    return f"nodes of {project_id}: PC1, PC2"


show_nodes.metadata = {"read_only": True}


@tool
def start_node(node: str, config: RunnableConfig) -> str:
    """Start a node by name."""
    if node == "busy":
        raise ToolException("Node busy is locked")
    if node == "boom":
        raise RuntimeError("internal detail /secret/path")
    return f"{node} started in project {config['configurable']['project_id']}"


TOOLS = [show_nodes, start_node]


def call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id}


def make_hook(mode: str, limit: int):
    allowed = tools_for_mode(TOOLS, mode)
    return create_pre_model_hook(
        "System. Topology:\n{{topology_info}}",
        lambda s: s.get("topology_info"),
        lambda: {"context_limit": limit},
        lambda: allowed,
    )


def make_graph(model, mode="lab_automation", *, limit=16, topology=None, max_llm_calls=25, context_error=None,
               measure_tools=None, count_text=None):
    hook = make_hook(mode, limit)

    async def load_topology(project_id: str):
        return topology

    settings = AgentSettings(
        tools=TOOLS,
        mode=mode,
        bind_tools=lambda tools: model.bind_tools(tools),
        pre_model_hook=hook,
        load_topology=load_topology,
        is_context_length_error=context_error or (lambda exc: False),
        max_llm_calls=max_llm_calls,
        measure_tools=measure_tools,
        count_text=count_text,
    )
    return build_copilot_graph(settings, InMemorySaver())


CONFIG = {"configurable": {"thread_id": "t1", "project_id": "p1"}}


async def run(graph, text="hello", config=CONFIG):
    seen = []
    async for event in graph.astream({"messages": [HumanMessage(text)], "llm_calls": 0}, config, stream_mode="custom"):
        seen.append(event)
    state = await graph.aget_state(config)
    return seen, state.values


async def test_plain_answer_streams_content_after_context(caplog):
    caplog.set_level(logging.INFO)
    model = ScriptedChatModel()
    model.enqueue("PC1 and PC2 are both stopped.")
    seen, state = await run(make_graph(model, topology="PC1 vpcs\nPC2 vpcs"))
    assert seen[0]["type"] == "context" and seen[0]["report"]["topology_tokens"] > 0
    texts = [e["content"] for e in seen if e["type"] == "content"]
    assert len(texts) > 1 and "".join(texts) == "PC1 and PC2 are both stopped."
    assert [m.type for m in state["messages"]] == ["human", "ai"]
    assert "PC1 vpcs" in model.calls[0][0].content  # topology injected in the system message
    assert "Calling pre_hook to prepare 1 messages" in caplog.text
    assert "Messages prepared: 1 → 2" in caplog.text
    assert "LLM call completed: tool_calls=0" in caplog.text


async def test_tool_round_trip_with_parallel_calls(caplog):
    caplog.set_level(logging.INFO)
    model = ScriptedChatModel()
    model.enqueue(
        AIMessage("", tool_calls=[call("start_node", {"node": "PC1"}, "a"), call("start_node", {"node": "PC2"}, "b")]),
        "Both started.",
    )
    seen, state = await run(make_graph(model))
    types = [e["type"] for e in seen]
    assert types[:3] == ["context", "tool_call", "tool_call"]
    assert [e["tool_call_id"] for e in seen if e["type"] == "tool_call"] == ["a", "b"]
    ends = {e["tool_call_id"]: e for e in seen if e["type"] == "tool_end"}
    assert ends["a"]["output"] == "PC1 started in project p1" and ends["b"]["status"] == "success"
    assert types.count("tool_start") == 2 and types.count("context") == 2
    second_call = model.calls[1]
    assert [m.type for m in second_call] == ["system", "human", "ai", "tool", "tool"]
    assert [m.tool_call_id for m in second_call[3:]] == ["a", "b"]
    assert "LLM call completed: tool_calls=2" in caplog.text
    assert state["messages"][-1].content == "Both started."


async def test_tool_failures_become_error_results(caplog):
    model = ScriptedChatModel()
    model.enqueue(
        AIMessage(
            "",
            tool_calls=[
                call("no_such_tool", {}, "u"),
                call("start_node", {"nodes": "x"}, "v"),
                call("start_node", {"node": "busy"}, "c"),
                call("start_node", {"node": "boom"}, "d"),
            ],
        ),
        "I could not do it.",
    )
    _seen, state = await run(make_graph(model))
    results = {m.tool_call_id: m for m in state["messages"] if isinstance(m, ToolMessage)}
    assert set(results) == {"u", "v", "c", "d"}
    assert all(m.status == "error" for m in results.values())
    assert "unknown tool 'no_such_tool'" in results["u"].content and "show_nodes" in results["u"].content
    assert "invalid arguments for start_node" in results["v"].content and "node" in results["v"].content
    assert "Node busy is locked" in results["c"].content
    assert "failed unexpectedly" in results["d"].content and "/secret/path" not in results["d"].content
    assert "Tool start_node failed" in caplog.text  # the details go to the log


async def test_the_tool_error_policy_is_the_callers(caplog):
    """What the model reads of a tool's failure, and what a failed call still reports, is the policy
    passed in; a tool fails by raising, and whatever it returns is a result."""

    class DeviceGone(Exception):
        def __init__(self, text: str, undo: dict[str, Any] | None = None) -> None:
            super().__init__(text)
            self.undo = undo

    @tool
    def probe(target: str) -> dict[str, Any]:
        """Probe a target."""
        if target == "gone":
            raise DeviceGone("R9 is gone")
        if target == "half":
            raise DeviceGone("R8 stopped answering", undo={"tool": "probe", "args": {"target": "back"}})
        return {"target": target, "ok": target != "bad"}

    seen_by_policy: list[BaseException] = []

    def message(exc: BaseException) -> str | None:
        seen_by_policy.append(exc)
        return f"the lab says: {exc}" if isinstance(exc, DeviceGone) else None

    def outcome(exc: BaseException) -> dict[str, Any] | None:
        return {"undo": exc.undo} if isinstance(exc, DeviceGone) and exc.undo else None

    policy = ToolErrorPolicy(message=message, outcome=outcome)
    model = ScriptedChatModel()
    model.enqueue(
        AIMessage("", tool_calls=[call("probe", {"target": t}, t) for t in ("gone", "half", "bad", "fine")]), "Done."
    )
    seen, state = await run(_probe_graph(model, probe, tool_errors=policy))
    results = {m.tool_call_id: m for m in state["messages"] if isinstance(m, ToolMessage)}
    assert results["gone"].content == "Error: the lab says: R9 is gone" and results["gone"].status == "error"
    assert results["half"].status == "error"
    assert results["bad"].status == "success" and results["fine"].status == "success"  # data, whatever it says
    assert [type(e) for e in seen_by_policy] == [DeviceGone, DeviceGone]
    ends = {e["tool_call_id"]: e for e in seen if e["type"] == "tool_end"}
    # A failed call's undo (a change it may have half made) reaches the event, as a result's does.
    assert ends["half"]["undo"] == {"tool": "probe", "args": {"target": "back"}} and "undo" not in ends["gone"]
    # The default policy knows LangChain's ToolException only: the same failure is then a bug, logged.
    model.enqueue(AIMessage("", tool_calls=[call("probe", {"target": "gone"}, "g2")]), "Done.")
    _, state = await run(_probe_graph(model, probe))
    (answer,) = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert "probe failed unexpectedly" in answer.content and "R9" not in answer.content
    assert "Tool probe failed" in caplog.text


def _probe_graph(model, probe, **policy):
    async def no_topology(project_id: str) -> None:
        return None

    hook = create_pre_model_hook("S {{topology_info}}", lambda s: None, lambda: {"context_limit": 16}, lambda: [probe])
    settings = AgentSettings(
        tools=[probe], mode="lab_automation", bind_tools=lambda tools: model.bind_tools(tools), pre_model_hook=hook,
        load_topology=no_topology, is_context_length_error=lambda exc: False, **policy,
    )
    return build_copilot_graph(settings, InMemorySaver())


async def test_teaching_mode_binds_and_allows_read_only_tools_only():
    model = ScriptedChatModel()
    model.enqueue(AIMessage("", tool_calls=[call("start_node", {"node": "PC1"}, "a")]), "Sorry.")
    _seen, state = await run(make_graph(model, mode="teaching"))
    assert [t.name for t in model.bound_tools[0]] == ["show_nodes"]
    result = next(m for m in state["messages"] if isinstance(m, ToolMessage))
    assert result.status == "error" and "not allowed in teaching mode" in result.content


def test_unknown_mode_is_rejected():
    with pytest.raises(ValueError, match="Invalid mode: 'admin'"):
        tools_for_mode(TOOLS, "admin")


async def test_runaway_loop_ends_politely():
    model = ScriptedChatModel()
    model.enqueue(*[AIMessage("", tool_calls=[call("show_nodes", {"project_id": "p"}, f"c{i}")]) for i in range(3)])
    _seen, state = await run(make_graph(model, max_llm_calls=3))
    assert state["messages"][-1].content == STEP_LIMIT_MESSAGE.format(n=3)
    assert len(model.calls) == 3 and model.pending == 0


async def test_reported_usage_corrects_the_next_budget():
    model = ScriptedChatModel()
    usage = {"input_tokens": 100_000, "output_tokens": 5, "total_tokens": 100_005}
    model.enqueue(AIMessage("", tool_calls=[call("show_nodes", {"project_id": "p"}, "a")], usage_metadata=usage), "done")
    seen, state = await run(make_graph(model))
    reports = [e["report"] for e in seen if e["type"] == "context"]
    assert reports[0]["token_scale"] == 1.0 and reports[1]["token_scale"] == 4.0  # clamped upper bound
    assert reports[1]["budget"] == reports[0]["budget"] // 4
    assert state["usage"]["input_tokens"] == 100_000 and state["token_scale"] == 4.0


class ContextTooLong(Exception):
    pass


async def test_context_length_rejection_retries_once_tighter(caplog):
    model = ScriptedChatModel()
    model.enqueue(ContextTooLong("maximum context length"), "fits now")
    graph = make_graph(model, context_error=lambda exc: isinstance(exc, ContextTooLong))
    seen, state = await run(graph)
    reports = [e["report"] for e in seen if e["type"] == "context"]
    assert len(reports) == 2 and reports[1]["budget"] < reports[0]["budget"]
    assert state["messages"][-1].content == "fits now"
    assert "retrying once" in caplog.text


async def test_context_length_rejection_twice_is_raised():
    model = ScriptedChatModel()
    model.enqueue(ContextTooLong("1"), ContextTooLong("2"))
    graph = make_graph(model, context_error=lambda exc: isinstance(exc, ContextTooLong))
    with pytest.raises(ContextTooLong):
        await run(graph)
    assert len(model.calls) == 2


async def test_other_model_errors_are_not_retried():
    model = ScriptedChatModel()
    model.enqueue(RuntimeError("500 from provider"))
    with pytest.raises(RuntimeError):
        await run(make_graph(model, context_error=lambda exc: isinstance(exc, ContextTooLong)))
    assert len(model.calls) == 1


async def test_conversation_continues_across_runs():
    model = ScriptedChatModel()
    model.enqueue("first answer", "second answer")
    graph = make_graph(model)
    await run(graph, "one")
    _, state = await run(graph, "two")
    assert [m.content for m in state["messages"]] == ["one", "first answer", "two", "second answer"]
    assert [m.type for m in model.calls[1]] == ["system", "human", "ai", "human"]


async def test_an_answer_asked_without_tools_is_calibrated_against_the_estimate_without_them():
    """Tools the request did not carry are not counted: llama-cpp-python's function-calling
    format answers empty once tools are offered; the text then comes from a request without them."""
    model = ScriptedChatModel()
    usage = {"input_tokens": 100, "output_tokens": 3, "total_tokens": 103}
    model.enqueue(AIMessage(""), AIMessage("a text answer", usage_metadata=usage))
    seen, state = await run(make_graph(model))
    [report] = [e["report"] for e in seen if e["type"] == "context"]
    assert report["tools_tokens"] > 0 and state["messages"][-1].content == "a text answer"
    without_tools = report["total_tokens"] - report["tools_tokens"]
    assert state["token_scale"] == pytest.approx(clamp_token_scale(100 / without_tools))
    assert state["token_scale"] != pytest.approx(clamp_token_scale(100 / report["total_tokens"]))


async def test_with_the_tool_definitions_cost_measured_the_factor_learns_the_messages_alone():
    """One factor for definitions and messages misled a server that renders them very differently
    (30 % short at 4K): with the definitions' server cost known, usage minus that cost
    over the messages' estimate is the factor, and the budget keeps the definitions' real room."""
    model = ScriptedChatModel()
    measured = []

    async def measure_tools():
        measured.append(1)
        return 40  # the server renders the definitions in 40 tokens

    usage = {"input_tokens": 340, "output_tokens": 5, "total_tokens": 345}
    model.enqueue(AIMessage("", tool_calls=[call("show_nodes", {"project_id": "p"}, "a")], usage_metadata=usage), "done")
    seen, state = await run(make_graph(model, measure_tools=measure_tools))
    first, second = [e["report"] for e in seen if e["type"] == "context"]
    messages = first["total_tokens"] - first["tools_tokens"]
    assert first["tools_server_tokens"] == 40 and first["tools_tokens"] != 40
    assert state["token_scale"] == pytest.approx(clamp_token_scale(300 / messages))
    assert first["message_budget"] == first["budget"] - 40  # the definitions' real room, at scale 1
    scale = second["token_scale"]
    assert second["message_budget"] == second["budget"] - math.ceil(40 / scale)
    assert second["server_tokens_estimate"] == round(scale * (second["total_tokens"] - second["tools_tokens"]) + 40)
    assert len(measured) == 2  # asked at each model call; the service remembers the answer per server


class JsonCostsTriple:
    """A server tokenizer that counts a tool result's text at three times our tokens (escaped
    JSON on llama-cpp-python), other text as ours; it records every count it gave."""

    def __init__(self) -> None:
        self.counts: list[tuple[int, int]] = []  # (messages, count)

    async def __call__(self, prepared, with_tools: bool) -> int:
        encoding = get_encoding("cl100k_base")
        count = sum(len(encoding.encode_ordinary(str(m.content))) * (3 if isinstance(m, ToolMessage) else 1)
                    for m in prepared)
        self.counts.append((len(prepared), count))
        return count


async def tools_cost_40():
    return 40


def expected_scale(report, counted: int, messages: int, framing: float) -> float:
    return clamp_token_scale((counted + framing * messages) / (report["total_tokens"] - report["tools_tokens"]))


async def test_the_factor_follows_the_content_of_each_request_before_it_is_sent():
    """At 4K a factor learnt on English left the first request with a JSON tool result 21 %
    short: where the server counts the request's text, that count sets the factor."""
    model = ScriptedChatModel()
    model.enqueue(AIMessage("", tool_calls=[call("show_nodes", {"project_id": "alpha " * 60}, "a")]), "done")
    server = JsonCostsTriple()
    seen, _ = await run(make_graph(model, measure_tools=tools_cost_40, count_text=server))
    first, second = [e["report"] for e in seen if e["type"] == "context"]
    (n1, c1), (n2, c2) = server.counts[0], server.counts[-1]
    assert first["token_scale"] == pytest.approx(expected_scale(first, c1, n1, DEFAULT_FRAMING), rel=0.035)
    # The tool result's text counts triple: the factor of the second request is its own.
    assert second["token_scale"] == pytest.approx(expected_scale(second, c2, n2, DEFAULT_FRAMING), rel=0.035)
    assert second["token_scale"] > first["token_scale"] * 1.2
    assert n2 == len(model.calls[1])  # counted as sent
    # Each request's estimate is its own count, framing and definitions, whatever factor kept it.
    for report, (n, counted) in ((first, server.counts[0]), (second, server.counts[-1])):
        assert report["server_tokens_estimate"] == pytest.approx(counted + DEFAULT_FRAMING * n + 40, abs=1)


async def test_the_framing_a_template_adds_per_message_is_learnt_from_usage():
    model = ScriptedChatModel()
    server = JsonCostsTriple()
    first_state = {"messages": [HumanMessage("hello")], "topology_info": None, "token_scale": 1.0,
                   "context_window": None, "context_summary": None, "tools_offered": True, "tools_server_tokens": 40}
    prepared = make_hook("lab_automation", 16)(first_state)["messages"]
    counted = await server(prepared, False)
    # The server's prompt: its count of the text, 10 tokens around each message, 40 of tools.
    real = counted + 10 * len(prepared) + 40
    usage = {"input_tokens": real, "output_tokens": 2, "total_tokens": real + 2}
    model.enqueue(AIMessage("", tool_calls=[call("show_nodes", {"project_id": "p"}, "a")], usage_metadata=usage), "done")
    seen, state = await run(make_graph(model, measure_tools=tools_cost_40, count_text=server))
    second = [e["report"] for e in seen if e["type"] == "context"][1]
    assert server.counts[1] == (len(prepared), counted)  # the first request is the one precomputed
    assert state["token_framing"] == pytest.approx(10.0) and state["token_framing_samples"] == 1
    n2, c2 = server.counts[-1]
    assert second["token_scale"] == pytest.approx(expected_scale(second, c2, n2, 10.0), rel=0.035)


async def test_a_usage_that_adds_up_several_calls_teaches_nothing():
    # llama-cpp-python reports the sum of one completion's prompt per tool call.
    model = ScriptedChatModel()
    usage = {"input_tokens": 10_000, "output_tokens": 2, "total_tokens": 10_002}
    calls = [call("show_nodes", {"project_id": "p"}, "a"), call("show_nodes", {"project_id": "q"}, "b")]
    model.enqueue(AIMessage("", tool_calls=calls, usage_metadata=usage), "done")
    seen, state = await run(make_graph(model, measure_tools=tools_cost_40, count_text=JsonCostsTriple()))
    second = [e["report"] for e in seen if e["type"] == "context"][1]
    assert state["token_framing_samples"] == 0 and second["token_scale"] < 4.0


def test_the_graph_is_a_short_orchestration_of_named_parts():
    """build_copilot_graph wires parts (model calls, summaries, the request's fit, the calibrator, the
    tools node); no long closure does their jobs."""
    import ast
    import inspect

    from gns3server.agent.gns3_copilot.agent import gns3_copilot

    tree = ast.parse(inspect.getsource(gns3_copilot))
    build = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "build_copilot_graph")
    nested = {n.name: n.end_lineno - n.lineno + 1 for n in ast.walk(build)
              if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n is not build}
    assert build.end_lineno - build.lineno + 1 <= 90 and set(nested) == {"llm_call", "after_llm"}
    assert nested["llm_call"] <= 70, nested


async def test_the_context_events_headline_is_the_figure_the_budget_is_judged_in():
    """The meter showed our count (tools included) while the budget was judged in the server's
    tokens: 86 % of 2,000 for a request at 72 % of the server's window. The headline is the
    request in the server's tokens as calibrated, against the budget in the same tokens."""
    model = ScriptedChatModel()
    usage = {"input_tokens": 340, "output_tokens": 5, "total_tokens": 345}
    model.enqueue(AIMessage("", tool_calls=[call("show_nodes", {"project_id": "p"}, "a")], usage_metadata=usage), "done")
    seen, _ = await run(make_graph(model))
    first, second = [e["report"] for e in seen if e["type"] == "context"]
    # Nothing calibrated the first request: the headline is our own count, the same number.
    assert (first["headline_tokens"], first["headline_percent"], first["headline_calibrated"]) == (
        first["total_tokens"], first["percent"], False)
    assert first["headline_budget"] == first["budget"]
    # Usage taught the factor: the second request's headline is in the server's tokens.
    scale = second["token_scale"]
    assert scale != 1.0 and second["headline_calibrated"] is True
    assert second["headline_tokens"] == second["server_tokens_estimate"] == round(scale * second["total_tokens"])
    assert second["headline_percent"] == round(100 * second["headline_tokens"] / second["limit_tokens"], 1)
    assert second["headline_budget"] == round(second["budget"] * scale)


async def test_a_request_the_server_counted_heads_its_report_with_that_count():
    model = ScriptedChatModel()
    model.enqueue(AIMessage("", tool_calls=[call("show_nodes", {"project_id": "alpha " * 60}, "a")]), "done")
    server = JsonCostsTriple()
    seen, _ = await run(make_graph(model, measure_tools=tools_cost_40, count_text=server))
    for report, (n, counted) in zip([e["report"] for e in seen if e["type"] == "context"],
                                    (server.counts[0], server.counts[-1]), strict=True):
        assert report["headline_calibrated"] is True
        assert report["headline_tokens"] == report["server_tokens_estimate"]
        assert report["headline_tokens"] == pytest.approx(counted + DEFAULT_FRAMING * n + 40, abs=1)
