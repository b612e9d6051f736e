"""The running summary of dropped turns, through the agent graph with scripted models."""

from __future__ import annotations

import asyncio
import logging

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver

from gns3server.agent.gns3_copilot.agent.context.counting import TokenCounter
from gns3server.agent.gns3_copilot.agent.context.summary import SUMMARY_HEADING, SUMMARY_MAX_TOKENS, summary_bounds
from gns3server.agent.gns3_copilot.agent.context_manager import create_pre_model_hook
from gns3server.agent.gns3_copilot.agent.gns3_copilot import AgentSettings, build_copilot_graph
from tests.support.scripted_model import ScriptedChatModel, ScriptedResponse

CONFIG = {"configurable": {"thread_id": "s1", "project_id": "p1"}}


def words(n: int, word: str = "interface") -> str:
    return " ".join([word] * n)


def long_history(turns: int) -> list:
    history = []
    for i in range(turns):
        history += [HumanMessage(f"check R{i}: {words(80)}", id=f"h{i}"), AIMessage(f"R{i} is fine. {words(80)}", id=f"a{i}")]
    return history


def make_graph(model, summary_model, *, checkpointer=None, summary=True, timeout=30.0):
    config = {"context_limit": 2, "context_summary": summary}
    hook = create_pre_model_hook("System.\n{{topology_info}}", lambda s: None, lambda: config, lambda: [])

    async def load_topology(project_id):
        return None

    async def summarize(request):
        return await summary_model.ainvoke(request)

    settings = AgentSettings(
        tools=[],
        mode="lab_automation",
        bind_tools=lambda tools: model,
        pre_model_hook=hook,
        load_topology=load_topology,
        is_context_length_error=lambda exc: False,
        summarize=summarize if summary else None,
        summary_timeout=timeout,
    )
    return build_copilot_graph(settings, checkpointer or InMemorySaver())


async def run(graph, messages):
    seen = [e async for e in graph.astream({"messages": messages, "llm_calls": 0}, CONFIG, stream_mode="custom")]
    return seen, (await graph.aget_state(CONFIG)).values


def reports(seen):
    return [e["report"] for e in seen if e["type"] == "context"]


async def test_a_cut_writes_a_summary_that_follows_the_system_prompt(caplog):
    caplog.set_level(logging.INFO)
    model, summary_model = ScriptedChatModel(), ScriptedChatModel()
    summary_model.enqueue("- R0..R5 checked: fine\n- open: why PC1 cannot ping")
    model.enqueue("answer one", "answer two")
    checkpointer = InMemorySaver()
    graph = make_graph(model, summary_model, checkpointer=checkpointer)
    seen, state = await run(graph, long_history(12) + [HumanMessage("why can PC1 not ping?")])

    # the summary request: instructions, the previous notes (none), and the dropped turns
    request = summary_model.calls[0]
    assert isinstance(request[0], SystemMessage) and "devices involved" in request[0].content
    assert "(none yet)" in request[1].content and "[user]: check R0:" in request[1].content
    assert "why can PC1 not ping" not in request[1].content  # the question itself is never summarised away

    window, summary = state["context_window"], state["context_summary"]
    assert summary["until"] == window["start"] > 0 and summary["until_id"] == window["start_id"]
    assert summary["turns"] == window["start"] // 2
    system = model.calls[0][0]
    assert system.content.endswith(f"{SUMMARY_HEADING}\n({summary['turns']} earlier turn(s) are no longer shown; "
                                   "this summary of them was written as they left.)\n"
                                   "- R0..R5 checked: fine\n- open: why PC1 cannot ping")
    assert model.calls[0][1].content == f"check R{summary['turns']}: {words(80)}"  # the window starts after it
    report = reports(seen)[0]
    assert report["summarized_turns"] == summary["turns"] and report["summary_tokens"] > 0
    assert report["summary_text"] == summary["text"] and report["summary_until_id"] == window["start_id"]
    assert report["total_tokens"] <= report["budget"]
    assert f"Conversation summary updated: {summary['turns']} turn(s) summarised" in caplog.text

    # the next question fits: no new summary call, and the request repeats the previous one as its prefix
    seen, state = await run(graph, [HumanMessage("and PC2?")])
    assert summary_model.calls[1:] == []
    first, second = model.calls
    assert [m.content for m in second[: len(first)]] == [m.content for m in first]
    assert state["context_summary"] == summary

    # a new graph on the same checkpointer (a restarted server) sends the same summary
    model.enqueue("answer three")
    restarted = make_graph(model, summary_model, checkpointer=checkpointer)
    await run(restarted, [HumanMessage("and PC3?")])
    assert model.calls[2][0].content == second[0].content


async def test_a_failed_summary_falls_back_to_the_plain_cut(caplog):
    caplog.set_level(logging.INFO)
    model, summary_model = ScriptedChatModel(), ScriptedChatModel()
    summary_model.enqueue(RuntimeError("provider down"))
    model.enqueue("the answer")
    seen, state = await run(make_graph(model, summary_model), long_history(12) + [HumanMessage("question?")])
    assert [e["content"] for e in seen if e["type"] == "content"]  # the question was answered
    assert model.calls[0][-1].content == "question?"
    assert SUMMARY_HEADING not in model.calls[0][0].content
    assert state["context_summary"] is None and state["context_window"]["start"] > 0
    assert "failed (RuntimeError); sending the question with the plain cut" in caplog.text


async def test_a_slow_summary_times_out_without_losing_the_question(caplog):
    caplog.set_level(logging.INFO)
    model, summary_model = ScriptedChatModel(), ScriptedChatModel()
    never = asyncio.Event()  # the summary call never answers
    summary_model.enqueue(ScriptedResponse("too late", gate=never))
    model.enqueue("the answer")
    seen, state = await run(make_graph(model, summary_model, timeout=0.5), long_history(12) + [HumanMessage("q?")])
    assert "".join(e["content"] for e in seen if e["type"] == "content") == "the answer"
    assert state["context_summary"] is None
    assert "timed out after 0 s" in caplog.text or "timed out after 1 s" in caplog.text


async def test_turns_a_failed_summary_missed_are_summarised_at_the_next_cut():
    model, summary_model = ScriptedChatModel(), ScriptedChatModel()
    summary_model.enqueue(RuntimeError("down"), "- everything so far")
    model.enqueue("a1", "a2")
    graph = make_graph(model, summary_model)
    _, state = await run(graph, long_history(12) + [HumanMessage("q1")])
    first_cut = state["context_window"]["start"]
    _, state = await run(graph, long_history(30)[24:] + [HumanMessage("q2")])  # distinct ids: h12.. are new
    assert "[user]: check R0:" in summary_model.calls[1][1].content  # from the start, not from the first cut
    assert state["context_summary"]["until"] == state["context_window"]["start"] > first_cut


async def test_summary_off_means_no_summary_call():
    model, summary_model = ScriptedChatModel(), ScriptedChatModel()
    model.enqueue("answer")
    seen, state = await run(make_graph(model, summary_model, summary=False), long_history(12) + [HumanMessage("q")])
    assert summary_model.calls == [] and state["context_window"]["start"] > 0
    assert reports(seen)[0]["summary_tokens"] == 0


async def test_a_long_summary_is_cut_to_its_bound():
    model, summary_model = ScriptedChatModel(), ScriptedChatModel()
    summary_model.enqueue(words(5 * SUMMARY_MAX_TOKENS))
    model.enqueue("answer")
    seen, _ = await run(make_graph(model, summary_model), long_history(12) + [HumanMessage("q")])
    report = reports(seen)[0]
    bound, request_bound = summary_bounds(report["message_budget"])
    assert bound == report["message_budget"] // 8 < SUMMARY_MAX_TOKENS  # a small model gets a short summary
    assert bound - 20 < report["summary_tokens"] <= bound + 60  # + the heading and note
    assert TokenCounter().messages(summary_model.calls[0]) <= request_bound + 20
