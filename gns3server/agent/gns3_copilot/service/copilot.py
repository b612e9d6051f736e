"""The copilot service: sessions owned by users, and runs that stream events.

One :class:`CopilotService` lives as long as the server. A chat request becomes
a *run*: an asyncio task that drives the agent graph for one session and puts
typed events on a queue that the caller iterates. A session has at most one run
at a time; :meth:`CopilotService.abort` (or the caller walking away) cancels it
at once, even in the middle of an LLM call or a tool. On cancellation the text
streamed so far is saved as the assistant's answer and any tool call left
without a result gets one, so the next run starts from a valid history.

A run that pauses for the user's approval leaves a :class:`PendingApproval` on
the session, its one record: an id, the digest of the exact calls, an expiry
(the graph's interrupt holds only the digest it paused on). :meth:`confirm`
uses it once (a replay, or an approval of another pause, is refused), refuses
an expired one unless it is a rejection, and hands the agent the approval with
who gave it and when; the agent's tool gate checks the digest against what it
would run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.types import Command

from ..agent import events
from ..agent.assembly import AgentAssembly, RunSpec
from ..agent.context.counting import content_text
from ..agent.gns3_copilot import LLM_CALL, run_of
from ..agent.model.prompts import FAULT_INJECTION
from ..agent.policies.modes import check_mode
from ..agent.server.kind import server_kind
from ..agent.summaries.writer import SummaryWriter
from ..evidence import Evidence, EvidenceRecorder, turn_of
from ..redaction import SECRETS, scrub
from ..tools.approval import DEFAULT_APPROVAL_SECONDS, PendingApproval
from ..tools.gate import AfterCall, BeforeCall
from .errors import (
    ApprovalExpiredError,
    ApprovalNotPendingError,
    ConfirmationPendingError,
    EvidenceNotFoundError,
    NoPendingConfirmationError,
    NoRunningRunError,
    ServiceClosingError,
    SessionBusyError,
    SessionKindError,
    SessionNotFoundError,
    public_message,
)
from .faults import FaultRecorder
from .run_queue import RunQueueReader
from .session_store import InFlight, SessionRecord
from .storage import Storage

log = logging.getLogger(__name__)

ABORTED_TOOL_RESULT = "[aborted by the user before this tool call finished]"
HEARTBEAT_SECONDS = 15.0
Event = events.Event
EventStream = AsyncGenerator[Event, None]
"""A run's events; closing it early (``aclose()``: a client gone, a shutdown) cancels the run."""


@dataclass(frozen=True)
class User:
    """The GNS3 identity a request acts as (its token reaches GNS3 for tools)."""

    user_id: str
    username: str
    token: str = field(repr=False)  # a live JWT: never in logs or reprs
    is_superadmin: bool = False



@dataclass
class _Run:
    session_id: str
    queue: asyncio.Queue[Event] = field(default_factory=asyncio.Queue)
    partial: list[str] = field(default_factory=list)  # the current model call's text
    streamed: list[str] = field(default_factory=list)  # all the text of the run
    task: asyncio.Task[None] | None = None
    finished: bool = False
    cancel_requested: bool = False
    server: str | None = None  # the lab's own model server (base_url, one slot) the run talks to, if any

    async def stop(self) -> None:
        """Cancel the run (once) and wait until it has saved what it had.

        Once only: a second cancel would land in the run's own clean-up and cut the
        saving of its partial answer short. The wait is not cancelled with the caller
        (a client that leaves while waiting must not interrupt the save either).
        """
        if self.task is None:
            return
        if not self.task.done() and not self.cancel_requested:
            self.cancel_requested = True
            self.task.cancel()
        await asyncio.wait({self.task})


INFLIGHT_SAVE_SECONDS = 1.0  # how often a run's streamed text is saved against a kill


def _question_of(start: Any) -> str | None:
    """The user's message a run starts with (None when it resumes after an approval)."""
    if isinstance(start, Mapping):
        return content_text(start["messages"][0].content)
    return None


def _aborted(partial: list[str]) -> list[BaseMessage]:
    text = "".join(partial)
    return [AIMessage(text, response_metadata={"finish_reason": "aborted"})] if text else []


def _remains(leftover: InFlight) -> list[BaseMessage]:
    """What a run cut short by a killed server leaves: its question and the text it had streamed."""
    remains: list[BaseMessage] = [] if leftover.question is None else [HumanMessage(leftover.question)]
    if leftover.partial:
        remains.append(AIMessage(leftover.partial, response_metadata={"finish_reason": "interrupted"}))
    return remains


def is_uuid(text: str) -> bool:
    """A well-formed UUID (the only kind of id a client may choose for a new session)."""
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def _unanswered_calls(messages: Sequence[BaseMessage]) -> list[ToolMessage]:
    """Results to store for the calls of the last assistant message that have none."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, AIMessage):
            answered = {m.tool_call_id for m in messages[index + 1 :] if isinstance(m, ToolMessage)}
            return [
                ToolMessage(ABORTED_TOOL_RESULT, tool_call_id=c["id"] or "", name=c["name"], status="error")
                for c in message.tool_calls
                if c["id"] not in answered
            ]
        if isinstance(message, HumanMessage):
            return []
    return []


class CopilotService:
    """Sessions, history and runs of the copilot for every user of one server."""

    def __init__(
        self,
        storage: Storage,
        agent: AgentAssembly,
        *,
        heartbeat_seconds: float = HEARTBEAT_SECONDS,
        approval_seconds: float = DEFAULT_APPROVAL_SECONDS,
        clock: Callable[[], float] = time.time,
        before_tool: Callable[[str, str], Sequence[BeforeCall]] | None = None,
        run_tools: Callable[[User, str], Awaitable[Sequence[BaseTool]]] | None = None,
    ) -> None:
        self._storage = storage
        # (user id, project id) -> what may refuse a run's tool calls first (a graded lab's guard).
        self._before_tool = before_tool
        # (user, project id) -> tools a run adds (a graded lab's gns3_check_work, where one is assigned).
        self._run_tools = run_tools
        self.agent = agent
        """What each run's graph is built from (its prompts are replaced when an administrator reloads them)."""
        self._heartbeat_seconds = heartbeat_seconds
        self._approval_seconds = approval_seconds
        self._clock = clock
        self._runs: dict[str, _Run] = {}
        self._closed = False
        # Running summaries written beside the runs: one writer per session at a time.
        self._summaries = SummaryWriter(self.is_running, self._server_busy)

    # -- sessions -------------------------------------------------------------

    async def session(self, user: User, session_id: str) -> SessionRecord:
        """The session if ``user`` owns it (or is superadmin), else SessionNotFoundError."""
        return self._owned(user, session_id, await self._storage.sessions.get(session_id))

    @staticmethod
    def _owned(user: User, session_id: str, record: SessionRecord | None) -> SessionRecord:
        """``record`` if it is ``user``'s (or ``user`` is superadmin), else SessionNotFoundError."""
        if record is None or (record.user_id != user.user_id and not user.is_superadmin):
            raise SessionNotFoundError(f"Session {session_id} not found")
        return record

    async def session_or_new(self, user: User, session_id: str) -> SessionRecord | None:
        """The user's session; None when ``session_id`` is a well-formed UUID that names no
        session yet (a client may choose the id of a new one); else SessionNotFoundError."""
        record = await self._storage.sessions.get(session_id)  # read once, for both questions
        if record is None and is_uuid(session_id):
            return None
        return self._owned(user, session_id, record)

    async def create_session(
        self,
        user: User,
        project_id: str,
        title: str = "New conversation",
        session_id: str | None = None,
        kind: str = "chat",
    ) -> SessionRecord:
        """A new session of ``user``; ``session_id`` is a client-chosen id (GNS3 3.1 sends one).

        An id that already names a session is not a new one: someone else's is a 404,
        exactly like an unknown id, so that an id can be neither taken over nor probed.
        """
        record = await self._storage.sessions.create(user.user_id, project_id, title, session_id, kind)
        if record.user_id != user.user_id or record.project_id != project_id:
            raise SessionNotFoundError(f"Session {session_id} not found")
        return record

    async def list_sessions(self, user: User, project_id: str) -> list[SessionRecord]:
        return await self._storage.sessions.list(user.user_id, project_id)

    async def rename(self, user: User, session_id: str, title: str) -> SessionRecord:
        await self.session(user, session_id)
        record = await self._storage.sessions.rename(session_id, title)
        if record is None:
            raise SessionNotFoundError(f"Session {session_id} not found")
        return record

    async def pin(self, user: User, session_id: str, pinned: bool) -> SessionRecord:
        """Pin the session (listed first) or unpin it."""
        await self.session(user, session_id)
        record = await self._storage.sessions.set_pinned(session_id, pinned)
        if record is None:
            raise SessionNotFoundError(f"Session {session_id} not found")
        return record

    async def delete(self, user: User, session_id: str) -> None:
        """Delete the session and every checkpoint of it (aborting a run first)."""
        await self.session(user, session_id)
        run = self._runs.get(session_id)
        if run is not None:
            await run.stop()
        await self._summaries.cancel(session_id)  # a summary landing later must not write it back
        await self._storage.checkpointer.adelete_thread(session_id)
        if self._storage.evidence is not None:
            await self._storage.evidence.delete_session(session_id)
        await self._storage.sessions.delete(session_id)
        await self._storage.scrub()

    async def _values(self, session_id: str) -> dict[str, Any]:
        """The session's latest stored graph state (empty before its first run)."""
        snapshot = await self._storage.checkpointer.aget_tuple(self._thread(session_id))
        return dict(snapshot.checkpoint["channel_values"]) if snapshot is not None else {}

    async def messages(self, user: User, session_id: str) -> list[BaseMessage]:
        await self.session(user, session_id)
        history = list((await self._values(session_id)).get("messages", []))
        if not self.is_running(session_id):
            leftover = await self._storage.sessions.inflight(session_id)
            if leftover is not None:  # a run the server was killed in: shown until the next run folds it in
                history += _remains(leftover)
        return history

    async def judgements(self, user: User, session_id: str) -> dict[str, dict[str, Any]]:
        """The judgements of the session's answers (the ``evidence`` events), by the id of the answer."""
        await self.session(user, session_id)
        store = self._storage.evidence
        return await store.judgements(session_id) if store is not None else {}

    async def evidence(self, user: User, session_id: str, evidence_id: str | None = None) -> list[Evidence]:
        """The session's evidence records (all, or the one named: EvidenceNotFoundError if none)."""
        await self.session(user, session_id)
        store = self._storage.evidence
        if evidence_id is None:
            return await store.list(session_id) if store is not None else []
        found = await store.get(session_id, evidence_id) if store is not None else None
        if found is None:
            raise EvidenceNotFoundError(f"Evidence {evidence_id} not found in session {session_id}")
        return [found]

    async def preview_context(
        self, user: User, session_id: str, *, llm_config: Mapping[str, Any], mode: str = "lab_automation"
    ) -> dict[str, Any]:
        """The budget report the next model call would start from, without calling the model."""
        record = await self.session(user, session_id)
        spec = self._spec(user, record.project_id, session_id, llm_config, mode)
        # Asked before the state is read: a summary no longer pending then is in what is read.
        pending = self.summary_pending(session_id)
        report = dict(await self.agent.preview(spec, await self._values(session_id)))
        report["summary_pending"] = pending
        return report

    def summary_pending(self, session_id: str) -> bool:
        """A summary of this session is being written in the background (or waits for its model server)."""
        return self._summaries.writing(session_id)

    def is_running(self, session_id: str) -> bool:
        return session_id in self._runs

    def _server_busy(self, server: str) -> bool:
        """Some run (of any session) talks to this model server now."""
        return any(run.server == server for run in self._runs.values())

    # -- runs -----------------------------------------------------------------

    async def chat(
        self,
        user: User,
        project_id: str,
        message: str,
        *,
        llm_config: Mapping[str, Any],
        session_id: str | None = None,
        mode: str = "lab_automation",
        kind: str = "chat",
        message_id: str | None = None,
    ) -> tuple[SessionRecord, EventStream]:
        """Start a run; returns the session and its events (ending with ``done``).

        ``kind`` is ``fault_injection`` for ``chat/inject``: the session's runs use the
        fault-injection prompt and record the lab-changing tool calls as faults.
        ``message_id``: the id the question is stored with (the history and the budget
        report's ``summary_until_id`` name it; a new one when absent).
        Closing the event iterator early cancels the run, as a disconnect should.
        """
        check_mode(mode)
        if session_id is None:
            record = await self.create_session(user, project_id, message, kind=kind)
        else:
            existing = await self.session_or_new(user, session_id)
            if existing is None:  # a client-chosen id for a new session
                record = await self.create_session(user, project_id, message, session_id, kind=kind)
            else:
                record = existing
            if record.kind != kind and kind == FAULT_INJECTION:
                raise SessionKindError(f"Session {session_id} is a chat, not a fault-injection session")
            if record.project_id != project_id:
                raise SessionNotFoundError(f"Session {session_id} not found in project {project_id}")
        pending = PendingApproval.from_stored(record.pending_value)
        if pending is not None:
            names = ", ".join(sorted({c["name"] for c in pending.calls}))
            late = " (the approval has expired: reject it, then ask again)" if pending.expired(self._clock()) else ""
            raise ConfirmationPendingError(
                f"Session {record.session_id} is waiting for you to approve or reject: {names}{late}"
            )
        start = {"messages": [HumanMessage(message, id=message_id or str(uuid.uuid4()))], "llm_calls": 0, "usage": {}}
        return record, self._start(record, user, start, llm_config, mode)

    async def confirm(
        self,
        user: User,
        session_id: str,
        approved: bool,
        *,
        llm_config: Mapping[str, Any],
        mode: str = "lab_automation",
        approval_id: str | None = None,
    ) -> tuple[SessionRecord, EventStream]:
        """Resume a run that waits for approval: the calls run (or are rejected), then the answer.

        ``approval_id``, when given, must be the pending approval's (the one the
        client was shown). An approval is used once; an expired one can only be
        rejected (ApprovalExpiredError, nothing runs).
        """
        check_mode(mode)
        record = await self.session(user, session_id)
        pending = PendingApproval.from_stored(record.pending_value)
        if pending is None:
            if approval_id is not None:
                raise ApprovalNotPendingError(
                    f"Approval {approval_id} was already used, or the session no longer waits for it; nothing was run"
                )
            raise NoPendingConfirmationError(f"Session {session_id} is not waiting for a confirmation")
        if approval_id is not None and approval_id != pending.approval_id:
            raise ApprovalNotPendingError(
                f"Approval {approval_id} is not the one session {session_id} waits for "
                "(already used, or replaced by a newer request); nothing was run"
            )
        now = self._clock()
        if approved and pending.expired(now):
            raise ApprovalExpiredError(
                f"This approval expired {now - pending.expires_at:.0f} s ago ({self._approval_seconds:g} s after it "
                "was asked for); nothing was sent. Reject it, then ask again."
            )
        # The session is this request's from here (no other run starts in it), then the approval is
        # used: whoever clears it first is the one whose decision applies. Nothing to undo if not.
        run = self._reserve(session_id, llm_config)
        try:
            if not await self._storage.sessions.clear_pending(session_id, record.pending):
                raise ApprovalNotPendingError(f"Approval {pending.approval_id} was already used; nothing was run")
        except BaseException:
            self._release(run)
            raise
        decision: dict[str, Any] = {"approved": bool(approved)}
        if approved:
            decision["approval"] = pending.grant(user.username, now).as_dict()
            log.info("User %s approved %s (%s) in session %s", user.username, pending.approval_id, pending.digest, session_id)
        return record, self._launch(run, record, user, Command(resume=decision), llm_config, mode)

    def _reserve(self, session_id: str, llm_config: Mapping[str, Any]) -> _Run:
        """The session's run-to-be, registered now (synchronously: two requests never both get one)."""
        if self._closed:
            raise ServiceClosingError("The GNS3 server is stopping; try again once it is back")
        if session_id in self._runs:
            raise SessionBusyError(f"Session {session_id} is busy with another request")
        run = _Run(session_id, server=server_kind(llm_config).one_slot_server)
        self._runs[session_id] = run
        return run

    def _release(self, run: _Run) -> None:
        """Give back a reservation whose run never started."""
        if self._runs.get(run.session_id) is run:
            del self._runs[run.session_id]

    def _start(
        self, record: SessionRecord, user: User, start: Any, llm_config: Mapping[str, Any], mode: str
    ) -> EventStream:
        return self._launch(self._reserve(record.session_id, llm_config), record, user, start, llm_config, mode)

    def _launch(
        self, run: _Run, record: SessionRecord, user: User, start: Any, llm_config: Mapping[str, Any], mode: str
    ) -> EventStream:
        if self._closed:  # the server began to stop while the request was being checked
            self._release(run)
            raise ServiceClosingError("The GNS3 server is stopping; try again once it is back")
        run.task = asyncio.create_task(
            self._execute_hiding_key(run, user, record.project_id, start, llm_config, mode, record.kind)
        )
        run.task.add_done_callback(lambda _: self._ensure_finished(run))
        return self._events(run)

    def _ensure_finished(self, run: _Run) -> None:
        """A run cancelled before it started never ran its own clean-up: do it here."""
        if not run.finished:
            run.finished = True
            self._runs.pop(run.session_id, None)
            self._summaries.after_run(run.session_id)
            run.queue.put_nowait(events.abort())
            run.queue.put_nowait(events.done(run.session_id, {}, "aborted"))

    async def abort(self, user: User, session_id: str) -> None:
        """Stop the session's run; returns once it has stopped and its partial answer is saved."""
        await self.session(user, session_id)
        run = self._runs.get(session_id)
        if run is None or run.task is None:
            raise NoRunningRunError(f"Session {session_id} has no run in progress")
        await run.stop()

    async def close(self) -> None:
        """Cancel every run and wait for them to save their state; then store the summaries
        that came back and cancel those still being written. No run starts afterwards."""
        self._closed = True
        await asyncio.gather(*(run.stop() for run in list(self._runs.values())))
        await self._summaries.close()

    async def _events(self, run: _Run) -> EventStream:
        reader = RunQueueReader(run.queue)  # text that piled up while the client was behind: one event
        try:
            while True:
                event = await reader.next(self._heartbeat_seconds)
                if event is None:
                    yield events.heartbeat()
                    continue
                yield event
                if event["type"] == "done":
                    return
        finally:
            if run.task is not None and not run.task.done():
                log.info("Client left session %s; cancelling its run", run.session_id)
                await run.stop()

    @staticmethod
    def _thread(session_id: str) -> RunnableConfig:
        return {"configurable": {"thread_id": session_id}}

    @staticmethod
    def _spec(
        user: User, project_id: str, session_id: str, llm_config: Mapping[str, Any], mode: str, kind: str = "chat"
    ) -> RunSpec:
        purpose = FAULT_INJECTION if kind == FAULT_INJECTION else ""
        return RunSpec(user.user_id, user.username, user.token, project_id, session_id, llm_config, mode, purpose)

    def _after_tool(self, spec: RunSpec) -> tuple[AfterCall, ...]:
        """What sees each tool call's outcome: a fault-injection run records its lab-changing calls."""
        faults = self._storage.faults
        if spec.purpose != FAULT_INJECTION or faults is None:
            return ()
        return (FaultRecorder(faults, spec.session_id, spec.project_id, spec.user_id),)

    async def _recorder(self, spec: RunSpec, kind: str, start: Any) -> EvidenceRecorder | None:
        """The run's evidence recorder, bound to its turn (a resumed run continues the stored one's);
        None where no evidence is kept (a fault injection's reads would give its faults away)."""
        store = self._storage.evidence
        if store is None or kind == FAULT_INJECTION:
            return None
        if isinstance(start, Mapping):
            turn = start["messages"][0].id or ""
        else:
            turn = turn_of(list((await self._values(spec.session_id)).get("messages", [])))
        return EvidenceRecorder(store, spec.session_id, turn, clock=self._clock)

    async def _judge(self, graph: Any, spec: RunSpec, recorder: EvidenceRecorder, run: _Run) -> None:
        """Judge the turn's answer against its reads and send the ``evidence`` event; never fails the run."""
        try:
            messages = await self._storage.latest_messages(spec.session_id)  # what the run just wrote
            if messages is None:
                messages = list((await graph.aget_state(self._thread(spec.session_id))).values.get("messages") or [])
            # What the model was shown at its last call (it came after any tool); read only if it holds none.
            topology = run_of(graph.config).topology.shown(spec.project_id)
            if topology is None:
                topology = await self.agent.topology(spec)
            body = await recorder.judge(messages, topology)
        except Exception:
            log.exception("Could not judge the evidence of the answer in session %s", spec.session_id)
            return
        if body is not None:
            await run.queue.put(events.evidence(body))

    async def _execute_hiding_key(
        self, run: _Run, user: User, project_id: str, start: Any, llm_config: Mapping[str, Any], mode: str, kind: str
    ) -> None:
        """The run, with its API key hidden from every log line and stored error while it runs
        (a provider may quote it in an error)."""
        with SECRETS.registered(llm_config.get("api_key")):
            await self._execute(run, user, project_id, start, llm_config, mode, kind)

    async def _execute(
        self, run: _Run, user: User, project_id: str, start: Any, llm_config: Mapping[str, Any], mode: str,
        kind: str = "chat",
    ) -> None:
        session_id = run.session_id
        config = self.agent.run_config(session_id, project_id)
        spec = self._spec(user, project_id, session_id, llm_config, mode, kind)
        status, usage = "completed", {}
        graph = None
        try:
            if self._run_tools is not None and kind != FAULT_INJECTION:
                spec = replace(spec, extra_tools=tuple(await self._run_tools(user, project_id)))
            recorder = await self._recorder(spec, kind, start)
            # Building the tools (pydantic models), compiling the graph and creating the
            # provider client (which imports the provider SDK the first time) are CPU
            # work: keep them off the event loop.
            def build() -> Any:
                return self.agent.graph(spec, self._storage.checkpointer, summary_writer=self._summaries,
                                        after_tool=(*self._after_tool(spec), *((recorder.record,) if recorder else ())),
                                        before_tool=self._before_tool(spec.user_id, spec.project_id)
                                        if self._before_tool else (),
                                        evidence=recorder.noted if recorder is not None else None)

            graph = await asyncio.to_thread(build)
            await self._summaries.idle(session_id)  # a summary being stored: read the state after it
            question = _question_of(start)
            # One transaction: what a killed run left is read, and if nothing, this turn recorded.
            leftover = await self._storage.sessions.begin_inflight(session_id, InFlight(question, ""))
            if leftover is not None:  # the server was killed during this session's last run
                await self._save_interrupted(graph, session_id, _remains(leftover))
                await self._storage.sessions.set_inflight(session_id, InFlight(question, ""))
            save_at = asyncio.get_running_loop().time()  # the first text is saved before it is sent
            waiting: Mapping[str, Any] | None = None
            # durability="exit": one checkpoint when the run ends (completed, interrupted for an
            # approval, failed or cancelled) instead of one per graph step, each a copy of the
            # whole history. A server killed mid-run loses that turn; an abort or a shutdown not.
            # Closed explicitly, so LangGraph's final checkpoint is written before anything reads it.
            async with contextlib.aclosing(
                graph.astream(start, config, stream_mode=["custom", "updates"], durability="exit")
            ) as stream:
                async for mode_name, event in stream:
                    if mode_name == "updates":
                        if LLM_CALL in event:  # the streamed text is in the model's message now
                            run.partial.clear()
                        continue
                    if event["type"] == "usage":
                        usage = event["usage"]  # reported in `done`, also when the run ends early
                        continue
                    if event["type"] == "approval_asked":  # the run pauses for the user's decision
                        waiting = event
                        continue
                    if event["type"] == "context":
                        run.partial.clear()  # a new model call starts
                    elif event["type"] == "content":
                        run.partial.append(event["content"])
                        run.streamed.append(event["content"])
                        if asyncio.get_running_loop().time() >= save_at:
                            save_at = asyncio.get_running_loop().time() + INFLIGHT_SAVE_SECONDS
                            await self._storage.sessions.set_inflight(
                                session_id, InFlight(question, "".join(run.streamed))
                            )
                    await run.queue.put(event)
            if waiting:
                pending = PendingApproval.new(
                    str(waiting["digest"]), waiting["calls"], now=self._clock(), lifetime=self._approval_seconds
                )
                await self._storage.sessions.set_pending(session_id, pending.as_dict())
                status = "waiting_confirmation"
                await run.queue.put(events.confirm(pending.calls, pending.public()))
            elif recorder is not None:
                await self._judge(graph, spec, recorder, run)
        except asyncio.CancelledError:
            status = "aborted"
            if graph is not None:
                await self._save_interrupted(graph, session_id, _aborted(run.partial))
            run.queue.put_nowait(events.abort())
        except Exception as exc:
            status = "error"
            code, text = public_message(exc)
            log.error("Copilot run of session %s failed: %s", session_id, text, exc_info=exc)
            if graph is not None:
                await self._save_interrupted(graph, session_id, _aborted(run.partial))
            run.queue.put_nowait(events.error(scrub(text), code))
        finally:
            run.finished = True
            try:
                await self._close_run(session_id, usage, clear_inflight=graph is not None)
            finally:
                # No await between these two: whoever sees `done` may start the next run.
                self._runs.pop(session_id, None)
                run.queue.put_nowait(events.done(session_id, usage, status))
                self._summaries.after_run(session_id)  # what landed during the run, stored now

    async def _close_run(self, session_id: str, usage: Mapping[str, int], *, clear_inflight: bool) -> None:
        """A run's closing writes: the in-flight record forgotten (``clear_inflight``: the run's checkpoint
        is written, it holds the turn now), old checkpoints pruned, messages counted, the run recorded.
        One transaction where the storage allows it (:meth:`Storage.finish_run`), else step by step;
        pruning and counting never fail the run either way."""
        counted = await self._storage.finish_run(session_id, usage, clear_inflight=clear_inflight)
        if counted is None:
            if clear_inflight:
                await self._storage.sessions.set_inflight(session_id, None)
            await self._prune_checkpoints(session_id)
            await self._count_messages(session_id)
            await self._storage.sessions.record_run(session_id, usage)
        elif not counted:  # not known without reading the state back
            await self._count_messages(session_id)

    async def _count_messages(self, session_id: str) -> None:
        """Store how many messages the conversation holds (the session list shows it); never fails the run."""
        try:
            count = await self._storage.message_count(session_id)  # known without reading the state back
            if count is None:
                count = len((await self._values(session_id)).get("messages", []))
            await self._storage.sessions.set_message_count(session_id, count)
        except Exception:
            log.exception("Could not count the messages of session %s", session_id)

    async def _prune_checkpoints(self, session_id: str) -> None:
        """Drop the run's intermediate checkpoints (only the latest is ever read); never fails the run."""
        try:
            await self._storage.prune(session_id)
        except Exception:
            log.exception("Could not prune the old checkpoints of session %s", session_id)

    async def _save_interrupted(self, graph: Any, session_id: str, remains: list[BaseMessage]) -> None:
        """Answer dangling tool calls and keep ``remains`` (streamed text ...) so the history stays valid."""
        thread = self._thread(session_id)
        try:
            state = await graph.aget_state(thread)
            history = list(state.values.get("messages") or [])
            additions: list[BaseMessage] = _unanswered_calls(history) + remains
            if additions:
                await graph.aupdate_state(thread, {"messages": additions}, as_node="tools" if not remains else "llm_call")
        except Exception:  # never let saving the remains hide the original outcome
            log.exception("Could not save the interrupted state of session %s", session_id)
