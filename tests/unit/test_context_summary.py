"""The running summary of dropped turns, through the agent graph with scripted models.

The summary is written in the background: the question goes out at once with the
plain cut, and the summary lands in a later request (the next model call of the
run, or the next turn), stored with the session.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from gns3server.agent.gns3_copilot.agent.assembly import AgentAssembly
from gns3server.agent.gns3_copilot.agent.context import counting, tokenizer
from gns3server.agent.gns3_copilot.agent.context.counting import TokenCounter
from gns3server.agent.gns3_copilot.agent.context.summary import (
    SUMMARY_END,
    SUMMARY_HEADING,
    SUMMARY_MAX_TOKENS,
    summary_bounds,
)
from gns3server.agent.gns3_copilot.agent.context_manager import create_pre_model_hook
from gns3server.agent.gns3_copilot.agent.gns3_copilot import AgentSettings, build_copilot_graph
from gns3server.agent.gns3_copilot.agent.summaries.coordinator import write_summary
from gns3server.agent.gns3_copilot.agent.summaries.writer import MAX_GIVE_WAYS, SummaryWriter
from gns3server.agent.gns3_copilot.service.copilot import CopilotService, User
from tests.support.scripted_model import ScriptedChatModel, ScriptedResponse
from tests.support.streams import collect

ALICE = User("u-alice", "alice", "token-alice")
CONFIG = {"configurable": {"thread_id": "s1", "project_id": "p1"}}
RUN_TIMEOUT = 30.0  # generous: a run that waited for a held summary would hang until the test's end
SUMMARY_DEADLINE = 1.0  # a summary call that never answers is given up after this (seconds)


def words(n: int, word: str = "interface") -> str:
    return " ".join([word] * n)


def long_history(turns: int) -> list:
    history = []
    for i in range(turns):
        history += [HumanMessage(f"check R{i}: {words(80)}", id=f"h{i}"), AIMessage(f"R{i} is fine. {words(80)}", id=f"a{i}")]
    return history


def make_graph(model, summary_model, writer=None, *, checkpointer=None, summary=True, timeout=30.0, tools=(),
               summary_server=None, summarize=None):
    config = {"context_limit": 2, "context_summary": summary}
    hook = create_pre_model_hook("System.\n{{topology_info}}", lambda s: None, lambda: config, lambda: list(tools))

    async def load_topology(project_id):
        return None

    async def summarize_with_model(request):
        return await summary_model.ainvoke(request)

    summarize = summarize or summarize_with_model
    settings = AgentSettings(
        tools=list(tools),
        mode="lab_automation",
        bind_tools=lambda tools: model,
        summary_server=summary_server,
        pre_model_hook=hook,
        load_topology=load_topology,
        is_context_length_error=lambda exc: False,
        summarize=summarize if summary else None,
        summary_timeout=timeout,
        summary_writer=writer if writer is not None else new_writer(),
    )
    return build_copilot_graph(settings, checkpointer or InMemorySaver())


RUNNING: set[str] = set()  # sessions with a run in progress, as the service's registry of runs


def new_writer() -> SummaryWriter:
    return SummaryWriter(RUNNING.__contains__)


async def run(graph, messages, writer=None):
    """One run as the service makes it: marked running, then what landed meanwhile stored."""

    async def go():
        return [e async for e in graph.astream({"messages": messages, "llm_calls": 0}, CONFIG, stream_mode="custom")]

    RUNNING.add("s1")
    try:
        seen = await asyncio.wait_for(go(), RUN_TIMEOUT)
    finally:
        RUNNING.discard("s1")
    if writer is not None:
        writer.after_run("s1")
    return seen, (await graph.aget_state(CONFIG)).values


def reports(seen):
    return [e["report"] for e in seen if e["type"] == "context"]


def text_of(seen):
    return "".join(e["content"] for e in seen if e["type"] == "content")


def sent_text(call) -> str:
    return "\n".join(str(m.content) for m in call)


async def test_the_question_does_not_wait_for_the_summary_which_lands_in_the_next_request(caplog):
    caplog.set_level(logging.INFO)
    model, summary_model = ScriptedChatModel(), ScriptedChatModel()
    held = asyncio.Event()
    (asked,) = summary_model.enqueue(ScriptedResponse("- R0..R5 checked: fine\n- open: why PC1 cannot ping", gate=held))
    model.enqueue("answer one", "answer two")
    checkpointer, writer = InMemorySaver(), new_writer()
    graph = make_graph(model, summary_model, writer, checkpointer=checkpointer)

    # The run ends while the summary call is still held: the question did not wait for it.
    seen, state = await run(graph, long_history(12) + [HumanMessage("why can PC1 not ping?")], writer)
    assert text_of(seen) == "answer one" and writer.writing("s1")
    assert SUMMARY_HEADING not in sent_text(model.calls[0])
    window = state["context_window"]
    assert window["start"] > 0 and state.get("context_summary") is None and reports(seen)[0]["window_moved"]
    await asyncio.wait_for(asked.started.wait(), RUN_TIMEOUT)  # the summary call is out, and held
    request = summary_model.calls[0]  # instructions, the previous notes (none), the dropped turns
    assert isinstance(request[0], SystemMessage) and "devices involved" in request[0].content
    assert "(none yet)" in request[1].content and "[user]: check R0:" in request[1].content
    assert "why can PC1 not ping" not in request[1].content  # the question itself is never summarised away

    # It lands after the run: stored with the session.
    held.set()
    await asyncio.wait_for(writer.wait("s1"), RUN_TIMEOUT)
    summary = (await graph.aget_state(CONFIG)).values["context_summary"]
    assert summary["until"] == window["start"] and summary["until_id"] == window["start_id"]
    assert summary["turns"] == window["start"] // 2 and summary["text"].startswith("- R0..R5 checked")
    assert "summary written after its run ended; stored with the session" in caplog.text

    # The next request carries it on its new question: everything the previous request sent
    # is repeated unchanged (the system message too), so the landing costs the cache nothing.
    seen, state = await run(graph, [HumanMessage("and PC2?")], writer)
    first, second = model.calls
    assert [m.content for m in second[: len(first)]] == [m.content for m in first]
    assert SUMMARY_HEADING not in second[0].content and second[-2].content == "answer one"
    assert second[-1].content == (
        f"{SUMMARY_HEADING}\n({summary['turns']} earlier turn(s) are no longer shown; this summary of them was "
        f"written as they left.)\n- R0..R5 checked: fine\n- open: why PC1 cannot ping\n{SUMMARY_END}\n\n"
        "and PC2?"
    )
    report = reports(seen)[0]
    assert report["summarized_turns"] == summary["turns"] and report["summary_tokens"] > 0
    assert report["summary_text"] == summary["text"] and report["summary_until_id"] == window["start_id"]
    assert report["total_tokens"] <= report["budget"] and not report["window_moved"]
    assert summary_model.calls[1:] == [] and state["context_summary"] == summary
    assert state["context_window"]["summary_at_id"] == second[-1].id

    # A new graph and writer on the same checkpointer (a restarted server) send the same summary.
    model.enqueue("answer three")
    restarted = make_graph(model, summary_model, new_writer(), checkpointer=checkpointer)
    await run(restarted, [HumanMessage("and PC3?")])
    assert [m.content for m in model.calls[2][: len(second)]] == [m.content for m in second]


async def test_a_summary_that_lands_during_a_run_opens_the_next_question():
    model, summary_model = ScriptedChatModel(), ScriptedChatModel()
    held = asyncio.Event()
    summary_model.enqueue(ScriptedResponse("- R0..R5 fine", gate=held))
    writer = new_writer()  # the run is in progress when it lands: stored when the run ends

    @tool
    async def show(device: str) -> str:
        """Show a device."""
        held.set()  # the summary comes back while the tool runs
        await writer.wait("s1")
        return f"{device}: up"

    model.enqueue(AIMessage("", tool_calls=[{"name": "show", "args": {"device": "R1"}, "id": "c1"}]), "R1 is up.",
                  "R2 too.")
    graph = make_graph(model, summary_model, writer, tools=[show])
    seen, state = await run(graph, long_history(12) + [HumanMessage("is R1 up?")], writer)
    assert text_of(seen).endswith("R1 is up.")
    first, second = model.calls
    # The tool round's request repeats the first one and adds the round: the summary waits for a new question.
    assert SUMMARY_HEADING not in sent_text(second)
    assert [m.content for m in second[: len(first)]] == [m.content for m in first]
    await writer.wait("s1")
    assert (await graph.aget_state(CONFIG)).values["context_summary"]["text"] == "- R0..R5 fine"
    seen, state = await run(graph, [HumanMessage("and R2?")], writer)
    third = model.calls[2]
    assert [m.content for m in third[: len(second)]] == [m.content for m in second]
    assert third[-1].content.startswith(SUMMARY_HEADING) and third[-1].content.endswith("and R2?")
    assert reports(seen)[0]["summarized_turns"] == state["context_summary"]["turns"] > 0


async def test_a_failed_summary_falls_back_to_the_plain_cut(caplog):
    caplog.set_level(logging.INFO)
    model, summary_model = ScriptedChatModel(), ScriptedChatModel()
    summary_model.enqueue(RuntimeError("provider down"))
    model.enqueue("the answer")
    writer = new_writer()
    graph = make_graph(model, summary_model, writer)
    seen, state = await run(graph, long_history(12) + [HumanMessage("question?")], writer)
    await writer.wait("s1")
    assert text_of(seen) == "the answer" and model.calls[0][-1].content == "question?"
    assert SUMMARY_HEADING not in sent_text(model.calls[0])
    state = (await graph.aget_state(CONFIG)).values
    assert state.get("context_summary") is None and state["context_window"]["start"] > 0
    assert "failed (RuntimeError); the plain cut stays until the next cut" in caplog.text


async def test_a_summary_that_never_answers_times_out_in_the_background(caplog):
    """Whether the run or the timeout ends first on a busy machine does not matter here (that the
    question never waits for a summary is the held-summary tests' point): the call is given up
    after its timeout, with the log line, and nothing is stored."""
    caplog.set_level(logging.INFO)
    model = ScriptedChatModel()
    model.enqueue("the answer")
    asked, given_up = asyncio.Event(), asyncio.Event()

    async def never_answers(request):
        asked.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:  # only the summary's timeout ends it here
            given_up.set()
            raise

    writer = new_writer()
    graph = make_graph(model, None, writer, timeout=SUMMARY_DEADLINE, summarize=never_answers)
    seen, _ = await run(graph, long_history(12) + [HumanMessage("q?")], writer)
    assert text_of(seen) == "the answer"
    await asyncio.wait_for(asked.wait(), RUN_TIMEOUT)
    await asyncio.wait_for(writer.wait("s1"), RUN_TIMEOUT)  # generous: a busy machine is slow
    assert given_up.is_set() and not writer.writing("s1") and writer.landed("s1") is None
    assert f"timed out after {SUMMARY_DEADLINE:.0f} s; the plain cut stays until the next cut" in caplog.text
    assert (await graph.aget_state(CONFIG)).values.get("context_summary") is None


async def test_turns_a_failed_summary_missed_are_summarised_at_the_next_cut():
    model, summary_model = ScriptedChatModel(), ScriptedChatModel()
    summary_model.enqueue(RuntimeError("down"), "- everything so far")
    model.enqueue("a1", "a2")
    writer = new_writer()
    graph = make_graph(model, summary_model, writer)
    _, state = await run(graph, long_history(12) + [HumanMessage("q1")], writer)
    await writer.wait("s1")
    first_cut = state["context_window"]["start"]
    _, state = await run(graph, long_history(30)[24:] + [HumanMessage("q2")], writer)  # distinct ids: h12.. are new
    await writer.wait("s1")
    assert "[user]: check R0:" in summary_model.calls[1][1].content  # from the start, not from the first cut
    state = (await graph.aget_state(CONFIG)).values
    assert state["context_summary"]["until"] == state["context_window"]["start"] > first_cut


async def test_one_summary_writer_per_session(caplog):
    caplog.set_level(logging.INFO)
    model, summary_model = ScriptedChatModel(), ScriptedChatModel()
    held = asyncio.Event()
    (asked, _) = summary_model.enqueue(ScriptedResponse("- first cut", gate=held), "- second cut")
    model.enqueue("a1", "a2", "a3")
    writer = new_writer()
    graph = make_graph(model, summary_model, writer)
    _, state = await run(graph, long_history(12) + [HumanMessage("q1")], writer)
    first_cut = state["context_window"]["start"]
    await asyncio.wait_for(asked.started.wait(), RUN_TIMEOUT)
    # A second cut while the first summary is still out: no second writer.
    _, state = await run(graph, long_history(30)[24:] + [HumanMessage("q2")], writer)
    second_cut = state["context_window"]["start"]
    assert second_cut > first_cut and len(summary_model.calls) == 1
    assert "still being written; the turns cut now wait for the next cut" in caplog.text
    held.set()
    await writer.wait("s1")
    summary = (await graph.aget_state(CONFIG)).values["context_summary"]
    assert summary["until"] == first_cut and summary["text"] == "- first cut"
    # The next cut summarises from where that summary ends (what the refused one would have covered).
    _, state = await run(graph, long_history(48)[36:] + [HumanMessage("q3")], writer)
    await writer.wait("s1")
    request = summary_model.calls[1][1].content
    assert "- first cut" in request and f"[user]: check R{first_cut // 2}:" in request
    assert "[user]: check R0:" not in request


async def test_cancel_stops_a_summary_and_stores_nothing():
    model, summary_model = ScriptedChatModel(), ScriptedChatModel()
    held = asyncio.Event()
    summary_model.enqueue(ScriptedResponse("- never stored", gate=held))
    model.enqueue("a1")
    writer = new_writer()
    graph = make_graph(model, summary_model, writer)
    await run(graph, long_history(12) + [HumanMessage("q1")], writer)
    assert writer.writing("s1")
    await asyncio.wait_for(writer.cancel("s1"), RUN_TIMEOUT)  # a deleted session
    assert not writer.writing("s1") and writer.landed("s1") is None
    held.set()
    await writer.wait("s1")
    assert (await graph.aget_state(CONFIG)).values.get("context_summary") is None


async def test_close_stores_what_landed_and_cancels_what_is_still_out():
    model, summary_model = ScriptedChatModel(), ScriptedChatModel()
    summary_model.enqueue("- landed during the run")
    model.enqueue("a1")
    running = {"s1": True}
    writer = SummaryWriter(lambda session_id: running.get(session_id, False))
    graph = make_graph(model, summary_model, writer)
    await run(graph, long_history(12) + [HumanMessage("q1")])  # "s1" still counted as running afterwards
    await writer.wait("s1")
    assert writer.landed("s1") is not None  # kept in memory: a run is in progress
    running["s1"] = False  # the server stops: its runs have ended
    await writer.close()
    assert (await graph.aget_state(CONFIG)).values["context_summary"]["text"] == "- landed during the run"
    assert writer.landed("s1") is None


@pytest.mark.parametrize("summary", [True, False])
async def test_context_summary_false_means_no_summary_call(storage, summary):
    """The setting as a user writes it in the LLM config, through the service that reads it; the
    summary calls are counted once the session's writer is idle (a wrong one would still be pending)."""
    model, summary_model = ScriptedChatModel(), ScriptedChatModel()

    def make_tools(context):
        @tool
        def show(device: str) -> str:
            """Show a device."""
            return f"{device}: up"

        return [show]

    service = CopilotService(storage, AgentAssembly(
        tools_factory=make_tools, is_context_length_error=lambda exc: False,
        # Chat calls have the tool bound; the summary is asked without tools.
        bind_tools=lambda tools, config: (model if tools else summary_model).bind_tools(tools),
        client_factory=lambda token: contextlib.nullcontext(), load_topology=lambda client, project_id: asyncio.sleep(0),
    ))
    llm = {"context_limit": 2, "model": "scripted", "context_summary": summary}
    summary_model.enqueue(*["- notes"] * 10)
    session_id, moved = None, False
    for i in range(8):
        model.enqueue(f"R{i} is fine. {words(120)}")
        record, stream = await service.chat(ALICE, "p1", f"check R{i}: {words(120)}", session_id=session_id, llm_config=llm)
        session_id = record.session_id
        seen = await asyncio.wait_for(collect(stream), RUN_TIMEOUT)
        assert seen[-1]["status"] == "completed", seen
        moved = moved or any(r["window_moved"] or r["cut_planned"] for r in reports(seen))
    assert moved  # the window cut (or planned a cut): where a summary would be written
    await asyncio.wait_for(service._summaries.wait(session_id), RUN_TIMEOUT)  # its summaries idle
    assert not service.summary_pending(session_id)
    assert (len(summary_model.calls) > 0) is summary
    assert all("running notes" in str(call[0].content) for call in summary_model.calls)


async def test_a_long_summary_is_cut_to_its_bound():
    model, summary_model = ScriptedChatModel(), ScriptedChatModel()
    summary_model.enqueue(words(5 * SUMMARY_MAX_TOKENS))
    model.enqueue("answer", "next")
    writer = new_writer()
    graph = make_graph(model, summary_model, writer)
    seen, _ = await run(graph, long_history(12) + [HumanMessage("q")], writer)
    await writer.wait("s1")
    report = reports(seen)[0]
    bound, request_bound = summary_bounds(report["message_budget"])
    assert bound == report["message_budget"] // 8 < SUMMARY_MAX_TOKENS  # a small model gets a short summary
    summary = (await graph.aget_state(CONFIG)).values["context_summary"]
    assert bound - 20 < TokenCounter().text(summary["text"]) <= bound
    assert TokenCounter().messages(summary_model.calls[0]) <= request_bound + 20
    seen, _ = await run(graph, [HumanMessage("and?")], writer)
    assert bound < reports(seen)[0]["summary_tokens"] <= bound + 80  # + the heading, note and end line


def test_summarize_without_a_writer_is_refused():
    model = ScriptedChatModel()

    async def summarize(request):
        return AIMessage("x")

    settings = AgentSettings(
        tools=[], mode="lab_automation", bind_tools=lambda tools: model,
        pre_model_hook=lambda state: {}, load_topology=lambda project_id: None,
        is_context_length_error=lambda exc: False, summarize=summarize,
    )
    try:
        build_copilot_graph(settings, InMemorySaver())
    except ValueError as exc:
        assert "summary_writer" in str(exc)
    else:
        raise AssertionError("a graph that summarises without a writer was built")


async def test_a_summary_for_a_one_slot_server_waits_until_no_run_talks_to_it():
    """llama-cpp-python's server ends the answer it streams when a second request comes: no overlap,
    with this session's run or another session's on the same server."""
    busy = {"http://llama:8080/v1": {"s1", "s2"}}  # the runs talking to each server
    asked, called = asyncio.Event(), asyncio.Event()

    def server_busy(server: str) -> bool:
        asked.set()
        return bool(busy.get(server))

    writer = SummaryWriter(lambda session_id: False, server_busy)

    async def call() -> None:
        called.set()

    async def write(call_out) -> None:
        await call_out(call)

    assert writer.start("s1", write, server="http://llama:8080/v1")
    for ending in ("s1", "s2"):
        await asyncio.wait_for(asked.wait(), RUN_TIMEOUT)  # the writer looked and found the server busy
        assert writer.writing("s1") and not called.is_set()
        asked.clear()
        busy["http://llama:8080/v1"].discard(ending)
        writer.after_run(ending)
    await writer.wait("s1")
    assert called.is_set() and not writer.writing("s1")


async def test_the_summary_is_written_before_the_cut_and_arrives_with_it():
    """Half-way to a full budget the next cut is planned and its summary written; the cut then
    starts where that summary ends and carries it: the prefix changes once per cut, never at a landing."""
    model, summary_model = ScriptedChatModel(), ScriptedChatModel()
    writer = new_writer()
    graph = make_graph(model, summary_model, writer)
    cuts = plans = 0
    for i in range(24):
        summary_model.enqueue(f"- notes after turn {i}")
        model.enqueue(f"R{i} is fine. {words(80)}")
        before = len(summary_model.calls)
        seen, state = await run(graph, [HumanMessage(f"check R{i}: {words(80)}", id=f"h{i}")], writer)
        await asyncio.wait_for(writer.wait("s1"), RUN_TIMEOUT)  # the summary lands before the next question
        report = reports(seen)[0]
        request = model.calls[-1]
        assert report["total_tokens"] <= report["budget"]
        if report["cut_planned"]:
            plans += 1
            assert not report["window_moved"] and len(summary_model.calls) == before + 1
            planned = state["context_window"]["planned"]
            excerpt = summary_model.calls[-1][1].content  # the turns the planned cut will drop, and no later one
            assert f"[user]: check R{planned // 2 - 1}:" in excerpt and f"check R{planned // 2}:" not in excerpt
        if report["window_moved"]:
            cuts += 1
            # The planned cut: the history starts where the landed summary ends, which opens it.
            summary = state["context_summary"]
            assert state["context_window"]["start"] == summary["until"] == planned
            assert request[1].content.startswith(SUMMARY_HEADING) and summary["text"] in request[1].content
            assert len(summary_model.calls) == before  # nothing left to summarise at this cut
        elif i:
            previous = model.calls[-2]  # everything the previous request sent is sent again unchanged
            assert [m.content for m in request[: len(previous)]] == [m.content for m in previous]
    assert cuts >= 2 and plans == cuts + (1 if state["context_window"].get("planned") else 0)


async def test_a_summary_never_loads_a_tokenizer_on_the_event_loop(monkeypatch, caplog):
    """Building an encoding takes 0.3-0.6 s: on the event loop every request of the server would wait."""
    caplog.set_level(logging.WARNING)
    # A fresh cache: as on a server whose warm-up has not finished when the first summary is written.
    fresh = functools.cache(tokenizer.get_encoding.__wrapped__)
    monkeypatch.setattr(counting, "get_encoding", fresh)

    async def summarize(request):
        return AIMessage("- R0: fine")

    settings = AgentSettings(
        tools=[], mode="lab_automation", bind_tools=lambda tools: None, pre_model_hook=lambda state: {},
        load_topology=lambda project_id: None, is_context_length_error=lambda exc: False, summarize=summarize,
    )
    history = long_history(4) + [HumanMessage("q", id="q")]
    window = {"start": 8, "start_id": "h4"}
    result = await write_summary(settings.summarize, settings.summary_timeout, history, None, window, {"encoding": "o200k_base", "message_budget": 6000})
    assert result is not None and result[0]["text"] == "- R0: fine"
    assert fresh.cache_info().currsize == 1  # loaded for this summary ...
    assert "loaded on the event loop" not in caplog.text  # ... in a worker thread
    fresh("cl100k_base")  # the check itself: a load on the loop says so
    assert "Tokenizer cl100k_base is being loaded on the event loop" in caplog.text


class OneSlotServer:
    """A local model server that serves one request at a time (llama.cpp's default): the chat model
    and the summary call share its slot. The first summary call holds it until it is cancelled;
    the next ones answer."""

    URL = "http://127.0.0.1:8080/v1"

    def __init__(self, model: ScriptedChatModel) -> None:
        self.slot = asyncio.Lock()
        self.model = model
        self.summary_calls = 0
        self.summary_out = asyncio.Event()
        self.summary_cancelled = asyncio.Event()

    def bind(self, tools):
        return self

    async def astream(self, messages, config=None):
        async with self.slot:  # a question queues here behind a summary call
            async for chunk in self.model.astream(messages, config):
                yield chunk

    async def summarize(self, request):
        async with self.slot:
            self.summary_calls += 1
            if self.summary_calls > 1:
                return AIMessage("- R0-R5: fine")
            self.summary_out.set()
            try:
                await asyncio.Event().wait()  # never answers: only a cancellation ends it
            except asyncio.CancelledError:
                self.summary_cancelled.set()
                raise


async def test_a_summary_call_out_to_a_one_slot_server_gives_way_to_a_question(caplog):
    """A summary call out to the run's own server would make the question wait (up to 30 s): it
    gives way, the question goes at once, and the summary is sent again once the server is free."""
    caplog.set_level(logging.INFO)
    model = ScriptedChatModel()
    model.enqueue("answer one", "answer two")
    server = OneSlotServer(model)
    writer = SummaryWriter(RUNNING.__contains__, lambda url: bool(RUNNING))  # any run talks to the one server
    graph = make_graph(server, None, writer, summary_server=server.URL, summarize=server.summarize)
    seen, _ = await run(graph, long_history(12) + [HumanMessage("q1")], writer)
    assert reports(seen)[0]["window_moved"] and text_of(seen) == "answer one"
    # The run has ended: the summary call goes out and takes the server's one slot.
    await asyncio.wait_for(server.summary_out.wait(), RUN_TIMEOUT)
    assert writer.writing("s1") and server.slot.locked()

    seen, _ = await run(graph, [HumanMessage("q2")], writer)  # would wait RUN_TIMEOUT behind it
    assert text_of(seen) == "answer two" and server.summary_cancelled.is_set()
    assert "Summary call of session s1 gives way: a question to the same model server goes first" in caplog.text
    # Once that run ended, the same summary is sent again (by the same writer) and lands.
    await asyncio.wait_for(writer.wait("s1"), RUN_TIMEOUT)
    assert server.summary_calls == 2 and not writer.writing("s1")
    assert (await graph.aget_state(CONFIG)).values["context_summary"]["text"] == "- R0-R5: fine"


async def test_make_way_affects_only_the_calls_out_to_that_server_and_each_is_sent_again():
    names = ("local", "other", "cloud")
    calls, cancelled = dict.fromkeys(names, 0), dict.fromkeys(names, 0)
    out = {name: asyncio.Event() for name in names}

    def write(name):  # a summary whose model call never answers: counted, its cancellations too
        async def call():
            calls[name] += 1
            out[name].set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled[name] += 1
                raise

        async def written(call_out):
            return await call_out(call)

        return written

    writer = SummaryWriter(lambda session_id: False, lambda server: False)
    assert writer.start("s-local", write("local"), server="http://a:8080/v1")
    assert writer.start("s-other", write("other"), server="http://b:8080/v1")
    assert writer.start("s-cloud", write("cloud"))  # a cloud provider: no server of its own
    for event in out.values():
        await asyncio.wait_for(event.wait(), RUN_TIMEOUT)
        event.clear()
    assert writer.make_way("http://a:8080/v1") == 1
    await asyncio.wait_for(out["local"].wait(), RUN_TIMEOUT)  # sent again: the server is free
    assert calls == {"local": 2, "other": 1, "cloud": 1} and cancelled == {"local": 1, "other": 0, "cloud": 0}
    assert writer.writing("s-local") and writer.writing("s-other") and writer.writing("s-cloud")
    assert writer.make_way("http://c:8080/v1") == 0  # no call out there
    await asyncio.wait_for(
        asyncio.gather(writer.cancel("s-local"), writer.cancel("s-other"), writer.cancel("s-cloud")), RUN_TIMEOUT
    )
    assert not any(writer.writing(s) for s in ("s-local", "s-other", "s-cloud"))


async def test_a_summary_that_gave_way_too_often_is_left_for_the_next_cut(caplog):
    caplog.set_level(logging.INFO)
    out, calls = asyncio.Event(), []

    async def summarize(request):
        calls.append(request)
        out.set()
        await asyncio.Event().wait()  # never answers: each question makes it give way

    settings = AgentSettings(
        tools=[], mode="lab_automation", bind_tools=lambda tools: None, pre_model_hook=lambda state: {},
        load_topology=lambda project_id: None, is_context_length_error=lambda exc: False, summarize=summarize,
    )
    history = long_history(4) + [HumanMessage("q", id="q")]
    writer = SummaryWriter(lambda session_id: False, lambda server: False)
    server = "http://127.0.0.1:8080/v1"
    results = []

    async def write(call_out):
        results.append(await write_summary(settings.summarize, settings.summary_timeout, history, None, {"start": 8, "start_id": "h4"},
                                        {"message_budget": 6000}, call_out))
        return results[-1]

    assert writer.start("s1", write, server=server)
    for _ in range(MAX_GIVE_WAYS + 1):  # the first call, then one after each time it gave way
        await asyncio.wait_for(out.wait(), RUN_TIMEOUT)
        out.clear()
        assert writer.make_way(server) == 1
    await asyncio.wait_for(writer.wait("s1"), RUN_TIMEOUT)
    assert len(calls) == MAX_GIVE_WAYS + 1 and results == [None] and writer.landed("s1") is None
    assert (f"not written: its model call gave way to a question {MAX_GIVE_WAYS + 1} times; "
            "its turns are summarised at the next cut") in caplog.text
