"""The copilot service: sessions owned by users, and runs that stream events.

One :class:`CopilotService` lives as long as the server. A chat request becomes
a *run*: an asyncio task that drives the agent graph for one session and puts
typed events on a queue that the caller iterates. A session has at most one run
at a time; :meth:`CopilotService.abort` (or the caller walking away) cancels it
at once, even in the middle of an LLM call or a tool. On cancellation the text
streamed so far is saved as the assistant's answer and any tool call left
without a result gets one, so the next run starts from a valid history.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.types import Command

from ..agent import events
from ..agent.context.counting import TokenCounter, content_text, role_of
from ..agent.context_manager import create_pre_model_hook
from ..agent.gns3_copilot import DEFAULT_MAX_LLM_CALLS, LLM_CALL, AgentSettings, build_copilot_graph, check_mode, tools_for_mode
from ..agent.context_manager import resolve_budget
from ..agent.prompts import compact_system_prompt_for, system_prompt_for
from ..agent.server_tokens import ServerTokenizer
from ..agent.small_window import fit_to_window
from ..agent.server_traits import ServerTraitsMemory
from ..gns3_client.client import GNS3Client
from ..gns3_client.exceptions import GNS3Error
from ..gns3_client.topology import fetch_rest_topology
from ..tools.toolset import RunContext
from .errors import (
    ConfirmationPendingError,
    NoPendingConfirmationError,
    NoRunningRunError,
    SessionBusyError,
    SessionNotFoundError,
    public_message,
)
from .storage import Storage
from .store import SessionRecord

log = logging.getLogger(__name__)

# The key under which LangGraph's "updates" stream reports an interrupt (no public constant).
INTERRUPT = "__interrupt__"
ABORTED_TOOL_RESULT = "[aborted by the user before this tool call finished]"
HEARTBEAT_SECONDS = 15.0
Event = events.Event


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
    partial: list[str] = field(default_factory=list)
    task: asyncio.Task[None] | None = None
    finished: bool = False
    cancel_requested: bool = False

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


def message_to_dict(message: BaseMessage) -> dict[str, Any]:
    """A stored message as the history API returns it."""
    data: dict[str, Any] = {"role": role_of(message), "content": content_text(message.content)}
    if isinstance(message, AIMessage) and message.tool_calls:
        data["tool_calls"] = [{"id": c["id"], "name": c["name"], "args": c["args"]} for c in message.tool_calls]
    if isinstance(message, ToolMessage):
        status = message.response_metadata.get("copilot_status", message.status)
        data.update(tool_call_id=message.tool_call_id, name=message.name, status=status)
    if message.id:
        data["id"] = message.id
    return data


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
        *,
        tools_factory: Callable[[RunContext], Sequence[BaseTool]],
        bind_tools: Callable[[Sequence[BaseTool], Mapping[str, Any]], Any],
        is_context_length_error: Callable[[BaseException], bool],
        client_factory: Callable[[str], GNS3Client],
        load_topology: Callable[[GNS3Client, str], Awaitable[Any]] | None = None,
        max_llm_calls: int = DEFAULT_MAX_LLM_CALLS,
        heartbeat_seconds: float = HEARTBEAT_SECONDS,
        bind_tools_unstreamed: Callable[[Sequence[BaseTool], Mapping[str, Any]], Any] | None = None,
    ) -> None:
        self._storage = storage
        self._tools_factory = tools_factory
        self._bind_tools = bind_tools
        self._is_context_length_error = is_context_length_error
        self._client_factory = client_factory
        self._load_topology = load_topology or fetch_rest_topology
        self._max_llm_calls = max_llm_calls
        self._heartbeat_seconds = heartbeat_seconds
        self._bind_tools_unstreamed = bind_tools_unstreamed
        self._server_traits = ServerTraitsMemory()  # which servers cannot stream tool calls (issue 15)
        self._runs: dict[str, _Run] = {}
        self._counters: MutableMapping[str, TokenCounter] = {}

    # -- sessions -------------------------------------------------------------

    async def session(self, user: User, session_id: str) -> SessionRecord:
        """The session if ``user`` owns it (or is superadmin), else SessionNotFoundError."""
        record = await self._storage.sessions.get(session_id)
        if record is None or (record.user_id != user.user_id and not user.is_superadmin):
            raise SessionNotFoundError(f"Session {session_id} not found")
        return record

    async def create_session(self, user: User, project_id: str, title: str = "New conversation") -> SessionRecord:
        return await self._storage.sessions.create(user.user_id, project_id, title)

    async def list_sessions(self, user: User, project_id: str) -> list[SessionRecord]:
        return await self._storage.sessions.list(user.user_id, project_id)

    async def rename(self, user: User, session_id: str, title: str) -> SessionRecord:
        await self.session(user, session_id)
        record = await self._storage.sessions.rename(session_id, title)
        if record is None:
            raise SessionNotFoundError(f"Session {session_id} not found")
        return record

    async def delete(self, user: User, session_id: str) -> None:
        """Delete the session and every checkpoint of it (aborting a run first)."""
        await self.session(user, session_id)
        run = self._runs.get(session_id)
        if run is not None:
            await run.stop()
        await self._storage.checkpointer.adelete_thread(session_id)
        await self._storage.sessions.delete(session_id)
        await self._storage.scrub()

    async def _values(self, session_id: str) -> dict[str, Any]:
        """The session's latest stored graph state (empty before its first run)."""
        snapshot = await self._storage.checkpointer.aget_tuple(self._thread(session_id))
        return dict(snapshot.checkpoint["channel_values"]) if snapshot is not None else {}

    async def messages(self, user: User, session_id: str) -> list[BaseMessage]:
        await self.session(user, session_id)
        return list((await self._values(session_id)).get("messages", []))

    async def preview_context(
        self, user: User, session_id: str, *, llm_config: Mapping[str, Any], mode: str = "lab_automation"
    ) -> dict[str, Any]:
        """The budget report the next model call would start from, without calling the model."""
        record = await self.session(user, session_id)
        # Building the tools is pydantic work: off the event loop, as for a run.
        settings = await asyncio.to_thread(self._settings, user, record.project_id, session_id, llm_config, mode)
        values = await self._values(session_id)
        topology = await settings.load_topology(record.project_id)
        state = {"messages": values.get("messages", []), "topology_info": topology, "token_scale": values.get("token_scale")}
        return dict((await asyncio.to_thread(settings.pre_model_hook, state))["context_report"])

    async def history(self, user: User, session_id: str) -> list[dict[str, Any]]:
        return [message_to_dict(m) for m in await self.messages(user, session_id)]

    def is_running(self, session_id: str) -> bool:
        return session_id in self._runs

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
    ) -> tuple[SessionRecord, AsyncIterator[Event]]:
        """Start a run; returns the session and its events (ending with ``done``).

        Closing the event iterator early cancels the run, as a disconnect should.
        """
        check_mode(mode)
        if session_id is None:
            record = await self.create_session(user, project_id, message)
        else:
            record = await self.session(user, session_id)
            if record.project_id != project_id:
                raise SessionNotFoundError(f"Session {session_id} not found in project {project_id}")
        if record.pending_calls:
            names = ", ".join(sorted({c["name"] for c in record.pending_calls}))
            raise ConfirmationPendingError(
                f"Session {record.session_id} is waiting for you to approve or reject: {names}"
            )
        start = {"messages": [HumanMessage(message)], "llm_calls": 0, "usage": {}}
        return record, self._start(record, user, start, dict(llm_config), mode)

    async def confirm(
        self,
        user: User,
        session_id: str,
        approved: bool,
        *,
        llm_config: Mapping[str, Any],
        mode: str = "lab_automation",
    ) -> tuple[SessionRecord, AsyncIterator[Event]]:
        """Resume a run that waits for approval: the calls run (or are rejected), then the answer."""
        check_mode(mode)
        record = await self.session(user, session_id)
        if not record.pending_calls:
            raise NoPendingConfirmationError(f"Session {session_id} is not waiting for a confirmation")
        resume = Command(resume={"approved": bool(approved)})
        return record, self._start(record, user, resume, dict(llm_config), mode)

    def _start(
        self, record: SessionRecord, user: User, start: Any, llm_config: dict[str, Any], mode: str
    ) -> AsyncIterator[Event]:
        if record.session_id in self._runs:
            raise SessionBusyError(f"Session {record.session_id} is busy with another request")
        run = _Run(record.session_id)
        self._runs[record.session_id] = run
        run.task = asyncio.create_task(self._execute(run, user, record.project_id, start, llm_config, mode))
        run.task.add_done_callback(lambda _: self._ensure_finished(run))
        return self._events(run)

    def _ensure_finished(self, run: _Run) -> None:
        """A run cancelled before it started never ran its own clean-up: do it here."""
        if not run.finished:
            run.finished = True
            self._runs.pop(run.session_id, None)
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
        """Cancel every run and wait for them to save their state."""
        await asyncio.gather(*(run.stop() for run in list(self._runs.values())))

    async def _events(self, run: _Run) -> AsyncIterator[Event]:
        try:
            while True:
                try:
                    event = await asyncio.wait_for(run.queue.get(), self._heartbeat_seconds)
                except asyncio.TimeoutError:
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

    def _settings(
        self, user: User, project_id: str, session_id: str, llm_config: Mapping[str, Any], mode: str
    ) -> AgentSettings:
        """One run's agent settings: tools bound to the project, the session and the user's token."""

        def client_factory() -> GNS3Client:
            return self._client_factory(user.token)

        tools = list(self._tools_factory(RunContext(client_factory, project_id, user.username, session_id)))
        allowed = tools_for_mode(tools, mode)

        async def load_topology(project_id: str) -> Any:
            try:
                async with client_factory() as client:
                    return await self._load_topology(client, project_id)
            except GNS3Error as exc:
                log.warning("Topology of project %s unavailable: %s", project_id, exc)
                return None

        # Small windows (issue 15): compact tool definitions and prompt, then an essential subset.
        encoding = resolve_budget(llm_config)["encoding"]
        counter = self._counters.get(encoding) or self._counters.setdefault(encoding, TokenCounter(encoding))
        fit = fit_to_window(allowed, system_prompt_for(mode), compact_system_prompt_for(mode), llm_config, counter)
        if fit.level != "full":
            log.info("Small context window: offering the model %s tool definitions (%d tokens with the prompt)",
                     fit.level, fit.fixed_tokens)
        def offer(tools: Sequence[BaseTool]) -> list[Any]:
            """What the model is offered for ``tools``: the compact definitions of those at small windows."""
            if fit.level == "full":
                return list(tools)
            names = {t.name for t in tools}
            return [spec for spec in fit.tools if spec["function"]["name"] in names]
        base_hook = create_pre_model_hook(
            fit.system_prompt,
            get_topology_func=lambda state: state.get("topology_info"),
            get_llm_config_func=lambda: llm_config,
            get_tools_func=lambda: fit.tools,
            counters=self._counters,
        )

        def hook(state: Mapping[str, Any]) -> dict[str, Any]:
            prepared = base_hook(state)
            prepared["context_report"]["tool_offer"] = fit.level
            return prepared

        traits = self._server_traits.for_config(llm_config)
        measure_scale = None
        if llm_config.get("base_url") and llm_config.get("provider", "openai") == "openai":
            tokenizer = ServerTokenizer(llm_config["base_url"], llm_config.get("api_key"), encoding, traits)

            async def measure_scale(prepared: list[BaseMessage]) -> float | None:
                return await tokenizer.scale(prepared, fit.tools)

        return AgentSettings(
            tools=tools,
            mode=mode,
            bind_tools=lambda tools: self._bind_tools(offer(tools), llm_config),
            bind_tools_unstreamed=(
                None if self._bind_tools_unstreamed is None
                else lambda tools: self._bind_tools_unstreamed(offer(tools), llm_config)  # type: ignore[misc]
            ),
            traits=traits,
            measure_scale=measure_scale,
            pre_model_hook=hook,
            load_topology=load_topology,
            is_context_length_error=self._is_context_length_error,
            max_llm_calls=self._max_llm_calls,
        )

    async def _execute(
        self, run: _Run, user: User, project_id: str, start: Any, llm_config: dict[str, Any], mode: str
    ) -> None:
        session_id = run.session_id
        config: RunnableConfig = {
            "configurable": {"thread_id": session_id, "project_id": project_id},
            "recursion_limit": 2 * self._max_llm_calls + 10,
        }
        status, usage = "completed", {}
        graph = None
        try:
            # Building the tools (pydantic models), compiling the graph and creating the
            # provider client (which imports the provider SDK the first time) are CPU
            # work: keep them off the event loop.
            def build() -> Any:
                settings = self._settings(user, project_id, session_id, llm_config, mode)
                return build_copilot_graph(settings, self._storage.checkpointer)

            graph = await asyncio.to_thread(build)
            if isinstance(start, Command):  # resuming: the decision is being applied
                await self._storage.sessions.set_pending(session_id, None)
            waiting: list[dict[str, Any]] | None = None
            # durability="exit": one checkpoint when the run ends (completed, interrupted for an
            # approval, failed or cancelled) instead of one per graph step, each a copy of the
            # whole history. A server killed mid-run loses that turn; an abort or a shutdown not.
            # Closed explicitly, so LangGraph's final checkpoint is written before anything reads it.
            async with contextlib.aclosing(
                graph.astream(start, config, stream_mode=["custom", "updates"], durability="exit")
            ) as stream:
                async for mode_name, event in stream:
                    if mode_name == "updates":
                        if INTERRUPT in event:  # the tools node asks for approval
                            waiting = event[INTERRUPT][0].value["calls"]
                        elif LLM_CALL in event:  # the streamed text is in the model's message now
                            run.partial.clear()
                        continue
                    if event["type"] == "usage":
                        usage = event["usage"]  # reported in `done`, also when the run ends early
                        continue
                    if event["type"] == "context":
                        run.partial.clear()  # a new model call starts
                    elif event["type"] == "content":
                        run.partial.append(event["content"])
                    await run.queue.put(event)
            if waiting:
                await self._storage.sessions.set_pending(session_id, waiting)
                status = "waiting_confirmation"
                await run.queue.put(events.confirm(waiting))
        except asyncio.CancelledError:
            status = "aborted"
            if graph is not None:
                await self._save_interrupted(graph, session_id, "".join(run.partial))
            run.queue.put_nowait(events.abort())
        except Exception as exc:
            status = "error"
            code, text = public_message(exc)
            log.error("Copilot run of session %s failed: %s", session_id, text, exc_info=exc)
            if graph is not None:
                await self._save_interrupted(graph, session_id, "".join(run.partial))
            run.queue.put_nowait(events.error(text, code))
        finally:
            run.finished = True
            try:
                await self._prune_checkpoints(session_id)
                await self._storage.sessions.record_run(session_id, usage)
            finally:
                # No await between these two: whoever sees `done` may start the next run.
                self._runs.pop(session_id, None)
                run.queue.put_nowait(events.done(session_id, usage, status))

    async def _prune_checkpoints(self, session_id: str) -> None:
        """Drop the run's intermediate checkpoints (only the latest is ever read); never fails the run."""
        try:
            await self._storage.prune(session_id)
        except Exception:
            log.exception("Could not prune the old checkpoints of session %s", session_id)

    async def _save_interrupted(self, graph: Any, session_id: str, partial: str) -> None:
        """Keep the streamed text and answer dangling tool calls so the history stays valid."""
        thread = self._thread(session_id)
        try:
            state = await graph.aget_state(thread)
            history = list(state.values.get("messages") or [])
            additions: list[BaseMessage] = _unanswered_calls(history)
            if partial:
                additions.append(AIMessage(partial, response_metadata={"finish_reason": "aborted"}))
            if additions:
                await graph.aupdate_state(thread, {"messages": additions}, as_node="tools" if not partial else "llm_call")
        except Exception:  # never let saving the remains hide the original outcome
            log.exception("Could not save the interrupted state of session %s", session_id)
