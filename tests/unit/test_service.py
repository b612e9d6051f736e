"""The copilot service on real SQLite storage, with a scripted model and fake GNS3 client."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from typing import Self

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from gns3server.agent.gns3_copilot.agent.assembly import AgentAssembly
from gns3server.agent.gns3_copilot.agent.context_manager import create_pre_model_hook
from gns3server.agent.gns3_copilot.agent.model.config import Timeouts, llm_profile
from gns3server.agent.gns3_copilot.agent.model.factory import create_base_model_with_tools
from gns3server.agent.gns3_copilot.api.history import session_history
from gns3server.agent.gns3_copilot.service.copilot import ABORTED_TOOL_RESULT, CopilotService, User
from gns3server.agent.gns3_copilot.service.errors import (
    ConfirmationPendingError,
    NoPendingConfirmationError,
    NoRunningRunError,
    ServiceClosingError,
    SessionBusyError,
    SessionNotFoundError,
)
from gns3server.agent.gns3_copilot.service.storage import DATABASE_NAME, open_sqlite_storage
from tests.support.openai_stub import OpenAIStub
from tests.support.scripted_model import ScriptedChatModel, ScriptedResponse
from tests.support.streams import collect, read_until

LLM = {"context_limit": 16, "model": "scripted"}
ALICE = User("u-alice", "alice", "token-alice")
BOB = User("u-bob", "bob", "token-bob")
ADMIN = User("u-admin", "admin", "token-admin", is_superadmin=True)


class Gates:
    """Events a slow tool waits on, set by the test (no sleeps)."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()


GATES: dict[str, Gates] = {}


def make_tools(context) -> list:
    """The run's tools: one that waits until the test releases it."""
    client_factory, project_id = context.client_factory, context.project_id

    @tool
    async def slow_tool(key: str) -> str:
        """A tool that waits until the test releases it."""
        gates = GATES[key]
        gates.started.set()
        await gates.release.wait()
        async with client_factory() as client:
            return f"done as {client.token} in {project_id}"

    return [slow_tool]


class FakeClient:
    """Stands in for GNS3Client: records the token it was made with."""

    def __init__(self, token: str) -> None:
        self.token = token

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


async def fake_topology(client: FakeClient, project_id: str) -> str:
    return f"topology of {project_id} seen by {client.token}"


@pytest.fixture
def model():
    return ScriptedChatModel()


def make_service(storage, model, tools_factory=make_tools, **kwargs) -> CopilotService:
    agent = AgentAssembly(
        tools_factory=tools_factory,
        bind_tools=lambda tools, config: model.bind_tools(tools),
        is_context_length_error=lambda exc: False,
        client_factory=FakeClient,
        load_topology=fake_topology,
    )
    return CopilotService(storage, agent, **kwargs)


async def next_run_completes(service, model, session_id: str, message: str) -> None:
    """The session takes a new message normally (its stored history is valid)."""
    model.enqueue("fine")
    _, stream = await service.chat(ALICE, "p1", message, session_id=session_id, llm_config=LLM)
    assert (await collect(stream))[-1]["status"] == "completed"


async def test_chat_creates_a_titled_session_and_streams_until_done(storage, model):
    service = make_service(storage, model)
    model.enqueue(AIMessage("Hello there!", usage_metadata={"input_tokens": 50, "output_tokens": 3, "total_tokens": 53}))
    record, stream = await service.chat(ALICE, "p1", "  Why can't\nPC1 ping PC3?  ", llm_config=LLM)
    seen = await collect(stream)
    assert record.title == "Why can't PC1 ping PC3?"
    assert seen[0]["type"] == "context" and seen[-1]["type"] == "done"
    assert seen[-1] == {"type": "done", "session_id": record.session_id, "status": "completed",
                        "usage": {"input_tokens": 50, "output_tokens": 3, "total_tokens": 53}}
    assert "".join(e["content"] for e in seen if e["type"] == "content") == "Hello there!"
    assert "topology of p1 seen by token-alice" in model.calls[0][0].content
    history = await session_history(service, ALICE, record.session_id)
    assert [(m["role"], m["content"]) for m in history] == [("user", "  Why can't\nPC1 ping PC3?  "), ("assistant", "Hello there!")]
    stored = await service.session(ALICE, record.session_id)
    assert (stored.runs, stored.input_tokens, stored.total_tokens) == (1, 50, 53)


async def test_second_request_on_a_running_session_is_busy(storage, model):
    service = make_service(storage, model)
    gate = asyncio.Event()
    (held,) = model.enqueue(ScriptedResponse("slow answer", gate=gate))
    record, stream = await service.chat(ALICE, "p1", "first", llm_config=LLM)
    consumer = asyncio.create_task(collect(stream))
    await held.started.wait()
    with pytest.raises(SessionBusyError):
        await service.chat(ALICE, "p1", "second", session_id=record.session_id, llm_config=LLM)
    gate.set()
    seen = await consumer
    assert seen[-1]["status"] == "completed"
    await next_run_completes(service, model, record.session_id, "second")


async def test_no_run_starts_once_the_service_is_closing(storage, model):
    """A request that got past the door while the server began to stop is refused, not left running."""
    service = make_service(storage, model)
    model.enqueue("answered")
    record, stream = await service.chat(ALICE, "p1", "before", llm_config=LLM)
    assert (await collect(stream))[-1]["status"] == "completed"
    await service.close()
    with pytest.raises(ServiceClosingError):
        await service.chat(ALICE, "p1", "too late", session_id=record.session_id, llm_config=LLM)
    assert not service.is_running(record.session_id)
    assert model.pending == 0 and len(model.calls) == 1


async def test_abort_mid_answer_keeps_partial_text_and_a_valid_history(storage, model):
    service = make_service(storage, model)
    gate = asyncio.Event()
    (held,) = model.enqueue(ScriptedResponse("The routing table shows a missing route.", gate=gate, gate_after=3))
    record, stream = await service.chat(ALICE, "p1", "explain", llm_config=LLM)
    seen = await read_until(stream, "content")  # some text has reached the client
    await held.started.wait()
    await service.abort(ALICE, record.session_id)
    seen += await collect(stream)
    types = [e["type"] for e in seen]
    assert types[-2:] == ["abort", "done"] and seen[-1]["status"] == "aborted"
    partial = "".join(e["content"] for e in seen if e["type"] == "content")
    assert partial and "The routing table shows a missing route.".startswith(partial) and len(partial) < 40
    history = await session_history(service, ALICE, record.session_id)
    assert [(m["role"], m["content"]) for m in history] == [("user", "explain"), ("assistant", partial)]
    assert not service.is_running(record.session_id)
    await next_run_completes(service, model, record.session_id, "go on")
    assert [m.type for m in model.calls[-1]] == ["system", "human", "ai", "human"]


async def test_abort_returns_once_the_partial_answer_is_saved(storage, model):
    service = make_service(storage, model)
    (held,) = model.enqueue(ScriptedResponse("Half of it, and the rest.", gate=asyncio.Event(), gate_after=2))
    record, stream = await service.chat(ALICE, "p1", "explain", llm_config=LLM)
    await read_until(stream, "content")  # some text has reached the client
    await held.started.wait()
    consumer = asyncio.create_task(collect(stream))
    # The user presses Stop and closes the panel at once: the run is cancelled once,
    # and neither caller cuts the saving of the partial answer short.
    abort = asyncio.create_task(service.abort(ALICE, record.session_id))
    consumer.cancel()
    await abort
    assert not service.is_running(record.session_id)  # stopped when abort returned
    history = await session_history(service, ALICE, record.session_id)
    assert [m["role"] for m in history] == ["user", "assistant"]
    assert history[1]["content"] and "Half of it, and the rest.".startswith(history[1]["content"])
    with pytest.raises(asyncio.CancelledError):
        await consumer
    with pytest.raises(NoRunningRunError):
        await service.abort(ALICE, record.session_id)
    await next_run_completes(service, model, record.session_id, "go on")


async def test_abort_during_a_tool_answers_the_call(storage, model):
    service = make_service(storage, model)
    GATES["abort"] = gates = Gates()
    usage = {"input_tokens": 120, "output_tokens": 8, "total_tokens": 128}
    model.enqueue(AIMessage("", tool_calls=[{"name": "slow_tool", "args": {"key": "abort"}, "id": "t1"}], usage_metadata=usage))
    record, stream = await service.chat(ALICE, "p1", "run it", llm_config=LLM)
    consumer = asyncio.create_task(collect(stream))
    await gates.started.wait()
    await service.abort(ALICE, record.session_id)
    seen = await consumer
    assert [e["type"] for e in seen if e["type"] in ("tool_call", "tool_start", "abort", "done")] == [
        "tool_call", "tool_start", "abort", "done"]
    assert seen[-1]["usage"] == usage  # what the aborted run consumed is still accounted
    assert (await service.session(ALICE, record.session_id)).input_tokens == 120
    messages = await service.messages(ALICE, record.session_id)
    assert isinstance(messages[-1], ToolMessage) and messages[-1].tool_call_id == "t1"
    assert messages[-1].content == ABORTED_TOOL_RESULT
    await next_run_completes(service, model, record.session_id, "again")
    assert [m.type for m in model.calls[-1]] == ["system", "human", "ai", "tool", "human"]


async def test_abort_during_a_tool_keeps_the_text_before_the_call_once(storage, model):
    service = make_service(storage, model)
    GATES["once"] = gates = Gates()
    model.enqueue(AIMessage("Let me check R1.", tool_calls=[{"name": "slow_tool", "args": {"key": "once"}, "id": "t1"}]))
    record, stream = await service.chat(ALICE, "p1", "check R1", llm_config=LLM)
    consumer = asyncio.create_task(collect(stream))
    await gates.started.wait()
    await service.abort(ALICE, record.session_id)
    await consumer
    messages = await service.messages(ALICE, record.session_id)
    assert [m.type for m in messages] == ["human", "ai", "tool"]
    assert messages[1].content == "Let me check R1." and messages[1].tool_calls
    await next_run_completes(service, model, record.session_id, "again")
    sent = model.calls[-1]
    assert [m.type for m in sent] == ["system", "human", "ai", "tool", "human"]
    assert sum("Let me check R1." in str(m.content) for m in sent) == 1


async def test_tools_act_with_the_requesting_users_token(storage, model):
    service = make_service(storage, model)
    GATES["token"] = gates = Gates()
    gates.release.set()
    model.enqueue(AIMessage("", tool_calls=[{"name": "slow_tool", "args": {"key": "token"}, "id": "t1"}]), "fine")
    _, stream = await service.chat(BOB, "p1", "go", llm_config=LLM)
    seen = await collect(stream)
    assert next(e for e in seen if e["type"] == "tool_end")["output"] == "done as token-bob in p1"


async def test_leaving_the_stream_cancels_the_run(storage, model):
    service = make_service(storage, model)
    gate = asyncio.Event()
    (_held,) = model.enqueue(ScriptedResponse("never finished", gate=gate, gate_after=1))
    record, stream = await service.chat(ALICE, "p1", "hi", llm_config=LLM)
    async for event in stream:
        if event["type"] == "content":
            break
    await stream.aclose()  # returns once the cancelled run has saved its state
    assert not service.is_running(record.session_id)
    history = await session_history(service, ALICE, record.session_id)
    assert history[-1]["role"] == "assistant" and history[-1]["content"]


async def test_model_error_ends_with_a_clean_error_event(storage, model, caplog):
    service = make_service(storage, model)
    model.enqueue(RuntimeError("secret internal detail"))
    record, stream = await service.chat(ALICE, "p1", "hi", llm_config=LLM)
    seen = await collect(stream)
    assert [e["type"] for e in seen][-2:] == ["error", "done"]
    assert seen[-2]["code"] == "internal_error" and "secret" not in seen[-2]["message"]
    assert "secret internal detail" in caplog.text
    assert seen[-1]["status"] == "error"
    await next_run_completes(service, model, record.session_id, "again")


async def test_a_run_that_fails_after_a_tool_keeps_what_it_did(storage, model):
    """A run writes one checkpoint, when it ends: also when it ends with an error."""
    service = make_service(storage, model)
    GATES["fails"] = gates = Gates()
    gates.release.set()
    model.enqueue(AIMessage("", tool_calls=[{"name": "slow_tool", "args": {"key": "fails"}, "id": "t1"}]),
                  RuntimeError("provider went away"))
    record, stream = await service.chat(ALICE, "p1", "do it", llm_config=LLM)
    assert (await collect(stream))[-1]["status"] == "error"
    history = await session_history(service, ALICE, record.session_id)
    assert [(m["role"], m.get("status")) for m in history] == [("user", None), ("assistant", None), ("tool", "success")]
    await next_run_completes(service, model, record.session_id, "again")
    assert [m.type for m in model.calls[-1]] == ["system", "human", "ai", "tool", "human"]


async def test_sessions_belong_to_their_user(storage, model):
    service = make_service(storage, model)
    mine = await service.create_session(ALICE, "p1", "alice's")
    await service.create_session(ALICE, "p2", "other project")
    await service.create_session(BOB, "p1", "bob's")
    assert [s.title for s in await service.list_sessions(ALICE, "p1")] == ["alice's"]
    for call in (
        service.session(BOB, mine.session_id),
        session_history(service, BOB, mine.session_id),
        service.rename(BOB, mine.session_id, "mine now"),
        service.delete(BOB, mine.session_id),
        service.abort(BOB, mine.session_id),
        service.chat(BOB, "p1", "hi", session_id=mine.session_id, llm_config=LLM),
    ):
        with pytest.raises(SessionNotFoundError):
            await call
    assert (await service.rename(ADMIN, mine.session_id, "renamed by admin")).title == "renamed by admin"
    with pytest.raises(SessionNotFoundError):
        await service.chat(ALICE, "p2", "wrong project", session_id=mine.session_id, llm_config=LLM)
    with pytest.raises(NoRunningRunError):
        await service.abort(ALICE, mine.session_id)


async def test_delete_removes_every_row(storage, model):
    service = make_service(storage, model)
    model.enqueue("one")
    record, stream = await service.chat(ALICE, "p1", "hi", llm_config=LLM)
    await collect(stream)
    assert await storage.checkpointer.aget_tuple({"configurable": {"thread_id": record.session_id}}) is not None
    await service.delete(ALICE, record.session_id)
    assert await storage.checkpointer.aget_tuple({"configurable": {"thread_id": record.session_id}}) is None
    assert await storage.sessions.get(record.session_id) is None
    with pytest.raises(SessionNotFoundError):
        await session_history(service, ALICE, record.session_id)


async def test_conversation_survives_a_restart(tmp_path, model):
    first = await open_sqlite_storage(tmp_path / "data")
    service = make_service(first, model)
    model.enqueue("before restart")
    record, stream = await service.chat(ALICE, "p1", "remember R1", llm_config=LLM)
    await collect(stream)
    await service.close()
    await first.close()

    second = await open_sqlite_storage(tmp_path / "data")
    try:
        service = make_service(second, model)
        model.enqueue("after restart")
        _, stream = await service.chat(ALICE, "p1", "what did I say?", session_id=record.session_id, llm_config=LLM)
        await collect(stream)
        assert [m.content for m in model.calls[-1][1:]] == ["remember R1", "before restart", "what did I say?"]
        assert (await service.session(ALICE, record.session_id)).runs == 2
    finally:
        await second.close()


def stored_rows(data_dir, session_id: str) -> tuple[int, int]:
    """(checkpoints, pending writes) stored for a session, read from the database file."""
    with contextlib.closing(sqlite3.connect(data_dir / DATABASE_NAME)) as db:
        return tuple(  # type: ignore[return-value]
            db.execute(f"SELECT COUNT(*) FROM {table} WHERE thread_id = ?", (session_id,)).fetchone()[0]
            for table in ("checkpoints", "writes")
        )


async def three_turns(service, model) -> str:
    session_id = None
    for turn in range(3):
        model.enqueue(AIMessage("", tool_calls=[{"name": "slow_tool", "args": {"key": f"t{turn}"}, "id": f"c{turn}"}]),
                      f"answer {turn}")
        GATES[f"t{turn}"] = Gates()
        GATES[f"t{turn}"].release.set()
        record, stream = await service.chat(ALICE, "p1", f"question {turn}", session_id=session_id, llm_config=LLM)
        assert (await collect(stream))[-1]["status"] == "completed"
        session_id = record.session_id
    return session_id


async def test_only_the_latest_checkpoint_of_a_conversation_is_kept(tmp_path, model):
    """LangGraph keeps a full copy of the history per graph step; only the latest is ever read."""
    storage = await open_sqlite_storage(tmp_path / "data")
    try:
        session_id = await three_turns(make_service(storage, model), model)
        assert stored_rows(tmp_path / "data", session_id) == (1, 0)
        history = await session_history(make_service(storage, model), ALICE, session_id)
        assert [m["content"] for m in history if m["role"] == "user"] == ["question 0", "question 1", "question 2"]
        assert len(history) == 12  # each turn: question, call, result, answer
    finally:
        await storage.close()

    # Without pruning (LangGraph's default) every run's copy of the whole history stays.
    keep_all = await open_sqlite_storage(tmp_path / "keep-all")
    keep_all._prune = None
    try:
        other = await three_turns(make_service(keep_all, model), model)
        assert stored_rows(tmp_path / "keep-all", other)[0] == 3
    finally:
        await keep_all.close()


async def test_checkpoints_left_behind_are_pruned_at_start_up(tmp_path, model, caplog):
    first = await open_sqlite_storage(tmp_path / "data")
    first._prune = None  # as a crash, or an older version, leaves them
    session_id = await three_turns(make_service(first, model), model)
    await first.close()
    before = stored_rows(tmp_path / "data", session_id)[0]
    assert before > 1

    caplog.set_level(logging.INFO)
    second = await open_sqlite_storage(tmp_path / "data")
    try:
        assert stored_rows(tmp_path / "data", session_id) == (1, 0)
        assert f"({before - 1} old checkpoints removed)" in caplog.text
        service = make_service(second, model)
        await next_run_completes(service, model, session_id, "still there?")
        assert [m.content for m in model.calls[-1] if m.type == "human"][-2:] == ["question 2", "still there?"]
    finally:
        await second.close()


async def test_a_deleted_conversation_leaves_no_trace_in_the_database_file(tmp_path, model):
    """Device output can hold secrets (enable secrets, SNMP communities): deleting a
    conversation must remove them from disk, superseded copies included."""
    secret = "enable secret 5 $1$copilot-test-secret-42"
    storage = await open_sqlite_storage(tmp_path / "data")
    service = make_service(storage, model)
    model.enqueue("Here is the running config:\n" + "\n".join([secret] * 400))  # ~20 KB: overflow pages
    record, stream = await service.chat(ALICE, "p1", "show me R1's config", llm_config=LLM)
    await collect(stream)
    await next_run_completes(service, model, record.session_id, "thanks")  # the first copy is pruned
    await service.delete(ALICE, record.session_id)

    def traces() -> list[str]:
        return [f.name for f in (tmp_path / "data").iterdir() if b"copilot-test-secret-42" in f.read_bytes()]

    try:
        assert traces() == []  # while the server runs: the database and its write-ahead log
    finally:
        await service.close()
        await storage.close()
    assert traces() == []


async def test_invalid_mode_is_rejected_before_anything_is_stored(storage, model):
    service = make_service(storage, model)
    with pytest.raises(ValueError, match="Invalid mode"):
        await service.chat(ALICE, "p1", "hi", llm_config=LLM, mode="root")
    assert await service.list_sessions(ALICE, "p1") == []


async def test_quiet_runs_send_heartbeats(storage, model):
    service = make_service(storage, model, heartbeat_seconds=0.01)
    gate = asyncio.Event()
    (_held,) = model.enqueue(ScriptedResponse("late", gate=gate))
    _, stream = await service.chat(ALICE, "p1", "hi", llm_config=LLM)
    seen = []
    async for event in stream:
        seen.append(event["type"])
        if event["type"] == "heartbeat":
            gate.set()
    assert "heartbeat" in seen and seen[-1] == "done"


async def test_preview_context_reports_without_calling_the_model(storage, model):
    service = make_service(storage, model)
    model.enqueue("an answer")
    record, stream = await service.chat(ALICE, "p1", "hello", llm_config=LLM)
    await collect(stream)
    calls = len(model.calls)
    report = await service.preview_context(ALICE, record.session_id, llm_config=LLM)
    assert len(model.calls) == calls
    assert report["messages_in"] == 2 and report["context_limit"] == 16
    assert report["topology_tokens"] > 0 and report["total_tokens"] < report["budget"]
    with pytest.raises(SessionNotFoundError):
        await service.preview_context(BOB, record.session_id, llm_config=LLM)


async def test_the_preview_reports_the_budget_the_next_call_is_judged_in(storage):
    """Against an OpenAI-compatible server that measures what the tool definitions cost: the preview
    prepares the request as the call does, so both report the same budget (the definitions' room
    at their measured cost, not at our count of them)."""

    @tool
    def read_lab(node: str) -> str:
        """Read one node of the lab: its status, console and interfaces, as GNS3 reports them."""
        return f"{node} is up"

    async with OpenAIStub() as stub:
        agent = AgentAssembly(tools_factory=lambda context: [read_lab], bind_tools=create_base_model_with_tools,
                              is_context_length_error=lambda exc: False, client_factory=FakeClient,
                              load_topology=fake_topology)
        service = CopilotService(storage, agent)
        llm = {"model": "local", "base_url": stub.base_url, "context_limit": 4, "max_retries": 0, "timeout": 30}
        stub.enqueue("First answer.", "Second answer.")
        record, stream = await service.chat(ALICE, "p1", "hello", llm_config=llm)
        assert (await collect(stream))[-1]["status"] == "completed"
        preview = await service.preview_context(ALICE, record.session_id, llm_config=llm)
        _, stream = await service.chat(ALICE, "p1", "again", session_id=record.session_id, llm_config=llm)
        seen = await collect(stream)
        await service.close()
        await agent.aclose()
    (called,) = [e["report"] for e in seen if e["type"] == "context"]
    assert stub.tools_probes and called["tools_server_tokens"] is not None
    budget = ("budget", "message_budget", "tools_tokens", "tools_server_tokens", "token_scale", "limit_tokens",
              "headline_budget", "headline_calibrated")
    assert {k: preview[k] for k in budget} == {k: called[k] for k in budget}
    assert preview["tools_server_tokens"] != preview["tools_tokens"]  # the measured cost is what counts


def test_the_llm_config_is_parsed_once_not_on_every_model_call():
    """A run's profile: the hook reads what it parsed, never the config again (here: a config
    that counts how often it is read, prepared for three calls)."""

    class Counted(dict):
        reads = 0

        def get(self, key, default=None):
            Counted.reads += 1
            return super().get(key, default)

        def __getitem__(self, key):
            Counted.reads += 1
            return super().__getitem__(key)

    profile = llm_profile(Counted(LLM))
    read_by_parse = Counted.reads
    assert llm_profile(profile) is profile  # a profile is not parsed again
    hook = create_pre_model_hook("System.", lambda s: None, lambda: profile.context, list)
    for question in ("one", "two", "three"):
        hook({"messages": [HumanMessage(question)]})
    assert Counted.reads == read_by_parse
    assert profile.timeouts == Timeouts(120, 120, 30) and profile.context.budget["limit_tokens"] == 16000


def make_confirm_tools(context) -> list:
    """A device-changing tool (needs confirmation) and a read-only one."""
    sent: list[str] = SENT.setdefault(context.project_id, [])

    @tool
    async def push_config(device: str, commands: list[str]) -> str:
        """Send configuration commands to a device."""
        sent.extend(f"{device}: {c}" for c in commands)
        return f"{len(commands)} command(s) applied on {device}"

    @tool
    async def read_config(device: str) -> str:
        """Read a device's configuration."""
        return f"config of {device}"

    push_config.metadata = {"needs_confirmation": True}
    read_config.metadata = {"read_only": True}
    return [push_config, read_config]


SENT: dict[str, list[str]] = {}
PUSH = {"name": "push_config", "args": {"device": "R1", "commands": ["interface g0/0", "no shutdown"]}, "id": "p1"}
READ = {"name": "read_config", "args": {"device": "R1"}, "id": "r1"}


def confirm_service(storage, model) -> CopilotService:
    return make_service(storage, model, tools_factory=make_confirm_tools)


async def ask_for_push(service, model, project_id: str):
    SENT[project_id] = []
    model.enqueue(AIMessage("I will bring g0/0 up.", tool_calls=[PUSH, READ]))
    record, stream = await service.chat(ALICE, project_id, "bring R1 g0/0 up", llm_config=LLM)
    return record, await collect(stream)


async def test_device_changes_wait_for_approval_then_run(storage, model):
    service = confirm_service(storage, model)
    record, seen = await ask_for_push(service, model, "pc1")
    assert [e["type"] for e in seen][-2:] == ["confirm", "done"] and seen[-1]["status"] == "waiting_confirmation"
    assert [(c["tool_call_id"], c["name"], c["args"]) for c in seen[-2]["calls"]] == [("p1", "push_config", PUSH["args"])]
    assert not any(e["type"] == "tool_start" for e in seen) and SENT["pc1"] == []  # nothing ran, not even the read
    assert (await service.session(ALICE, record.session_id)).pending_calls[0]["name"] == "push_config"
    with pytest.raises(ConfirmationPendingError, match="push_config"):
        await service.chat(ALICE, "pc1", "hello?", session_id=record.session_id, llm_config=LLM)

    model.enqueue("Done: g0/0 is up.")
    _, stream = await service.confirm(ALICE, record.session_id, True, llm_config=LLM)
    seen = await collect(stream)
    assert seen[-1]["status"] == "completed" and SENT["pc1"] == ["R1: interface g0/0", "R1: no shutdown"]
    ends = {e["tool_call_id"]: e for e in seen if e["type"] == "tool_end"}
    assert ends["p1"]["status"] == "success" and ends["r1"]["output"] == "config of R1"
    assert (await service.session(ALICE, record.session_id)).pending is None
    assert [m.type for m in model.calls[-1]] == ["system", "human", "ai", "tool", "tool"]
    with pytest.raises(NoPendingConfirmationError):
        await service.confirm(ALICE, record.session_id, True, llm_config=LLM)


async def test_rejected_changes_are_never_sent(storage, model):
    service = confirm_service(storage, model)
    record, _ = await ask_for_push(service, model, "pc2")
    model.enqueue("OK, I left R1 alone.")
    _, stream = await service.confirm(ALICE, record.session_id, False, llm_config=LLM)
    seen = await collect(stream)
    assert seen[-1]["status"] == "completed" and SENT["pc2"] == []
    results = {m.tool_call_id: m for m in model.calls[-1] if m.type == "tool"}
    assert results["p1"].content.startswith("Rejected by the user") and results["p1"].status == "error"
    assert results["r1"].content == "config of R1"  # the read-only call still ran
    ends = {e["tool_call_id"]: e["status"] for e in seen if e["type"] == "tool_end"}
    assert ends == {"p1": "rejected", "r1": "success"}  # shown as rejected, not as failed
    history = await session_history(service, ALICE, record.session_id)
    assert {m["tool_call_id"]: m["status"] for m in history if m["role"] == "tool"} == ends


async def test_a_waiting_run_survives_a_restart(tmp_path, model):
    first = await open_sqlite_storage(tmp_path / "data")
    service = confirm_service(first, model)
    record, _ = await ask_for_push(service, model, "pc3")
    await service.close()
    await first.close()

    second = await open_sqlite_storage(tmp_path / "data")
    try:
        service = confirm_service(second, model)
        checkpoints, pending_writes = stored_rows(tmp_path / "data", record.session_id)
        assert checkpoints == 1 and pending_writes > 0  # pruned, and the interrupt kept
        assert (await service.session(ALICE, record.session_id)).pending_calls[0]["tool_call_id"] == "p1"
        model.enqueue("Applied after the restart.")
        _, stream = await service.confirm(ALICE, record.session_id, True, llm_config=LLM)
        seen = await collect(stream)
        assert seen[-1]["status"] == "completed" and SENT["pc3"] == ["R1: interface g0/0", "R1: no shutdown"]
    finally:
        await second.close()


async def test_only_the_owner_confirms(storage, model):
    service = confirm_service(storage, model)
    record, _ = await ask_for_push(service, model, "pc4")
    with pytest.raises(SessionNotFoundError):
        await service.confirm(BOB, record.session_id, True, llm_config=LLM)
    assert SENT["pc4"] == []


async def test_a_run_reads_its_conversation_once_and_stores_its_message_count(storage, model):
    """The message count the session list shows came from a second read of the whole state after
    every run (1,248 messages at 500 turns): it is known from what the run wrote."""
    service = make_service(storage, model)
    model.enqueue("one")
    record, stream = await service.chat(ALICE, "p1", "first", llm_config=LLM)
    await collect(stream)
    reads = []
    real = storage.checkpointer.aget_tuple

    async def counted(config):
        reads.append(config)
        return await real(config)

    storage.checkpointer.aget_tuple = counted
    model.enqueue("two")
    _, stream = await service.chat(ALICE, "p1", "second", session_id=record.session_id, llm_config=LLM)
    assert (await collect(stream))[-1]["status"] == "completed"
    assert len(reads) == 1  # LangGraph's, when the run starts
    assert (await service.session(ALICE, record.session_id)).message_count == 4


def test_the_service_only_runs_sessions_the_agent_is_assembled_elsewhere():
    """Tools, model binding, prompts and model-server probes are the agent assembly's (agent/assembly.py),
    which the launcher and the tests build alike; the service imports none of them."""
    import ast
    from pathlib import Path

    from gns3server.agent.gns3_copilot.service import copilot

    tree = ast.parse(Path(copilot.__file__).read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level}
    assembling = {"..agent.context_manager", "..agent.small_window", "..agent.server_tokens", "..agent.tools_cost",
                  "..agent.tool_results", "..agent.server_traits", "..tools.toolset", "..gns3_client.client",
                  "..gns3_client.topology"}
    assert not {f"..{m}" for m in imported} & assembling, imported
    assert not hasattr(copilot.CopilotService, "_settings") and not hasattr(copilot.CopilotService, "history")


async def test_a_turn_reads_its_topology_once_and_its_evidence_is_judged_against_what_the_model_was_shown(storage, model):
    """The judge read the topology over REST again after the answer (three more requests to GNS3 before
    ``done``); it is judged against the snapshot the turn's last model call showed."""
    reads: list[str] = []

    async def topology(client: FakeClient, project_id: str) -> dict:
        reads.append(project_id)
        return {"project_id": project_id, "name": "lab", "status": "opened", "links": [],
                "nodes": [{"name": "PC1", "node_id": "n1", "node_type": "vpcs", "status": "started", "ports": []}]}

    agent = AgentAssembly(tools_factory=make_tools, bind_tools=lambda tools, config: model.bind_tools(tools),
                          is_context_length_error=lambda exc: False, client_factory=FakeClient, load_topology=topology)
    service = CopilotService(storage, agent)
    model.enqueue("PC1 is started.")
    record, stream = await service.chat(ALICE, "p1", "Is PC1 up?", llm_config=LLM)
    seen = await collect(stream)
    assert reads == ["p1"] and seen[-1]["status"] == "completed"
    (evidence,) = await service.evidence(ALICE, record.session_id)  # PC1's status, as the model was shown it
    assert evidence.device == "PC1" and evidence.tool == "copilot" and "started" in evidence.output


async def test_a_tool_that_may_change_the_lab_tells_the_kept_topology_of_the_runs_project():
    from gns3server.agent.gns3_copilot.agent.assembly import RunSpec
    from gns3server.agent.gns3_copilot.tools.gate import ToolOutcome

    changed: list[str] = []
    agent = AgentAssembly(tools_factory=make_tools, bind_tools=lambda tools, config: None,
                          is_context_length_error=lambda exc: False, client_factory=FakeClient,
                          load_topology=fake_topology, lab_changed=changed.append)
    settings = agent.settings(RunSpec("u-alice", "alice", "token-alice", "p1", "s1", LLM, "lab_automation"))
    call = {"name": "slow_tool", "id": "c1", "args": {}}
    outcomes = [ToolOutcome(call, "success", "read", read_only=True), ToolOutcome(call, "rejected", "no"),
                ToolOutcome(call, "success", "changed"), ToolOutcome(call, "error", "Error: half done")]
    for outcome in outcomes:
        for after in settings.after_tool:
            await after(outcome)
    assert changed == ["p1", "p1"]  # the change, and the failure (it may have changed part of the lab)
