"""The copilot agent: a custom LangGraph ``StateGraph`` looping llm_call <-> tools.

It is custom (not ``create_react_agent``) for the reasons the design document
gives and a few more: ``llm_call`` fetches the live topology and calls the
pre-model hook itself before every model call, streams its own typed events
(context report, content deltas, tool calls), learns from the provider's usage
report, and retries once with a tighter budget when the provider says the
request is too long. The ``tools`` node enforces the mode's tool set and turns
every failure into an error ``ToolMessage`` so that no tool call is ever left
without an answer. A tool fails by raising, never by what it returns; what the
model may read of a tool's exception, and what a failed call still reports, is
the :class:`ToolErrorPolicy` the caller passes in: the graph knows nothing of
GNS3 or consoles.

:func:`build_copilot_graph` compiles the graph from closures over one run's
settings (model, tools, mode, hook); compiling is cheap, and state lives in the
checkpointer, so the service builds one per run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, TypedDict

import pydantic
from langchain_core.messages import AIMessage, AIMessageChunk, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.ai import add_ai_message_chunks
from langchain_core.messages.utils import message_chunk_to_message
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, ToolException
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import interrupt

from ..as_data import json_as_data
from . import events
from .approval import approval_digest
from .context.calibration import (
    DEFAULT_FRAMING,
    content_scale,
    observed_framing,
    observed_scale,
    smoothed_mean,
    smoothed_scale,
)
from .context.counting import TokenCounter, content_text
from .context.summary import (
    clean_summary,
    count_turns,
    restore_summary,
    summary_bounds,
    summary_request,
)
from .context.tokenizer import DEFAULT_ENCODING
from .context_manager import clamp_token_scale, server_tokens_estimate
from .llm_errors import LLMEmptyAnswerError, LLMStreamCutError
from .loop_guard import repeated_failure_answer, repeats_a_call
from .server_traits import ServerTraits
from .summary_writer import CallOut, SummaryGaveWayError, SummaryWriter
from .tool_call_args import EXCERPT_CHARS, cut_arguments, cut_tool_call_arguments
from .tool_results import tool_results_as_user

logger = logging.getLogger(__name__)

MODES = ("teaching", "lab_automation")
DEFAULT_MODE = "lab_automation"
DEFAULT_MAX_LLM_CALLS = 25
LLM_CALL = "llm_call"  # the model node: its update carries the finished model message
# On a provider's context-length rejection the budget is divided by this, once.
CONTEXT_RETRY_TIGHTENING = 1.5
# A request is prepared again with the factor fitted to its content when that moves it by
# more than this, at most MAX_REFITS times.
REFIT_TOLERANCE = 0.03
MAX_REFITS = 2
# The longest a summary call may take (seconds); it runs beside the conversation, never before it.
DEFAULT_SUMMARY_TIMEOUT = 30.0
STEP_LIMIT_MESSAGE = (
    "I stopped after {n} model calls without reaching an answer, to avoid an endless loop. "
    "Here is where things stand; ask me to continue, or narrow the request."
)


class CopilotState(TypedDict, total=False):
    """Graph state: the conversation plus what one run learns about its budget."""

    messages: Annotated[list[AnyMessage], add_messages]
    context_report: dict[str, Any]
    token_scale: float
    token_scale_samples: int
    # Tokens the server's chat template adds per message around the text, learnt from usage
    # where its tokenizer counts the text (calibration.content_scale), and how many taught it.
    token_framing: float | None
    token_framing_samples: int
    llm_calls: int
    usage: dict[str, int]
    context_window: dict[str, Any]
    context_summary: dict[str, Any] | None


def is_read_only(tool: BaseTool) -> bool:
    """Tools declare themselves safe for teaching mode with ``metadata={"read_only": True}``."""
    return bool((tool.metadata or {}).get("read_only"))


def needs_confirmation(tool: BaseTool) -> bool:
    """Tools that change devices (``metadata={"needs_confirmation": True}``) wait for the user's yes."""
    return bool((tool.metadata or {}).get("needs_confirmation"))


REJECTED_RESULT = "Rejected by the user: nothing was sent. Ask what they want instead."
MISMATCHED_RESULT = (
    "Error: the approval given was for other calls than these (its digest differs); nothing was sent. "
    "Ask the user to approve these commands."
)
# Where an approved call finds its approval (in the run's configurable): the console tools audit it.
APPROVAL_KEY = "copilot_approval"


def check_mode(mode: str) -> None:
    """Refuse a mode the agent does not know (ValueError naming the allowed ones)."""
    if mode not in MODES:
        raise ValueError(f"Invalid mode: {mode!r} (allowed: {', '.join(MODES)})")


def tools_for_mode(tools: Sequence[BaseTool], mode: str) -> list[BaseTool]:
    """The tools a mode may use: all in lab automation, read-only ones in teaching."""
    check_mode(mode)
    return [t for t in tools if mode == "lab_automation" or is_read_only(t)]


def tool_exception_message(exc: BaseException) -> str | None:
    """LangChain's convention: a ``ToolException``'s text is for the model; anything else is a bug."""
    return str(exc) if isinstance(exc, ToolException) else None


def no_outcome(exc: BaseException) -> Mapping[str, Any] | None:
    """A failed call reports nothing besides its message."""
    return None


@dataclass(frozen=True)
class ToolErrorPolicy:
    """How the tools node reads tool failures (the tools' own convention, passed in).

    A tool fails by raising (the call's status is then "error"); whatever it
    returns is a result. ``message(exc)`` is the text the model reads for an
    exception a tool raised, or None for a bug (logged with its traceback; the
    model reads that the tool failed unexpectedly). ``outcome(exc)`` is what a
    failed call still reports, or None: its ``undo``, if any, is the undo of a
    change the call may have half made (fault injection records it).
    """

    message: Callable[[BaseException], str | None] = tool_exception_message
    outcome: Callable[[BaseException], Mapping[str, Any] | None] = no_outcome


@dataclass(frozen=True)
class AgentSettings:
    """Everything one run of the graph needs besides its state.

    ``bind_tools`` turns the allowed tools into a model with tools bound (the model
    factory's ``create_base_model_with_tools`` with the run's LLM config);
    ``pre_model_hook`` must count the same tools; ``load_topology`` returns the
    project's REST-shaped topology or None, and must not raise. ``summarize``
    (optional) sends a request to the same model without tools and returns its
    reply: when the history window moves it writes the running summary in the
    background (``summary_writer``), within ``summary_timeout`` seconds or not at
    all; the question never waits for it.
    """

    tools: Sequence[BaseTool]
    mode: str
    bind_tools: Callable[[Sequence[BaseTool]], Any]
    pre_model_hook: Callable[[Mapping[str, Any]], dict[str, Any]]
    load_topology: Callable[[str], Awaitable[Any]]
    is_context_length_error: Callable[[BaseException], bool]
    max_llm_calls: int = DEFAULT_MAX_LLM_CALLS
    summarize: Callable[[list[BaseMessage]], Awaitable[AIMessage]] | None = None
    summary_timeout: float = DEFAULT_SUMMARY_TIMEOUT
    # The lab's own model server (agent/local_server.py: often one request at a time):
    # the summary call waits until no run talks to it instead of competing with their calls, and
    # gives way to a run that calls its model there (its question goes first).
    summary_server: str | None = None
    # Writes summaries in the background (required with ``summarize``); shared by the runs of a server.
    summary_writer: SummaryWriter | None = None
    # The same tools bound to a model that does not stream (for servers that cannot
    # stream tool calls); None: the streaming model's own unstreamed call is used.
    bind_tools_unstreamed: Callable[[Sequence[BaseTool]], Any] | None = None
    # What this LLM config's server is known to do (shared across runs by the service).
    traits: ServerTraits = field(default_factory=ServerTraits)
    # The server's own token count of a prepared request's text, as its template renders it
    # (with the tool definitions' text when the flag says so), from its tokenizer endpoint:
    # fits the factor to each request's content before it is sent (None: no such source).
    count_text: Callable[[list[BaseMessage], bool], Awaitable[int | None]] | None = None
    # The server's tokens for the tool definitions offered (measured once; None: unknown):
    # the calibration factor then learns the messages alone (agent/tools_cost.py).
    measure_tools: Callable[[], Awaitable[int | None]] | None = None
    tool_errors: ToolErrorPolicy = field(default_factory=ToolErrorPolicy)
    # Whether the server's chat template renders tool results (None: cannot tell); asked
    # once per server, the first time a request carries one. None: never asked.
    probe_tool_results: Callable[[], Awaitable[bool | None]] | None = None
    # Answered tool calls whose arguments are longer (characters) are cut in the history.
    max_argument_chars: int | None = None


def _undo(result: Any) -> Mapping[str, Any] | None:
    """The call that reverts what a tool call changed, if its result (or failure outcome) gives one."""
    undo = result.get("undo") if isinstance(result, Mapping) else None
    return undo if isinstance(undo, Mapping) else None


def _stringify(result: Any) -> str:
    if isinstance(result, str):
        return result
    if isinstance(result, BaseMessage):
        return content_text(result.content)
    return json_as_data(result)  # names in it stay data: no raw line or paragraph separator


def _validation_summary(exc: pydantic.ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors())


def _add_usage(total: Mapping[str, int] | None, message: AIMessage) -> dict[str, int]:
    return _sum_usage(total, message.usage_metadata or {})


def _sum_usage(total: Mapping[str, int] | None, more: Mapping[str, Any]) -> dict[str, int]:
    usage = dict(total or {})
    for key, value in more.items():
        if key in ("input_tokens", "output_tokens", "total_tokens") and isinstance(value, int):
            usage[key] = usage.get(key, 0) + value
    return usage


# Keys under which providers report why a reply ended; a stream without one was cut.
_FINISH_KEYS = ("finish_reason", "stop_reason", "done_reason")
_NO_CHUNKS = "No generation chunks were returned"


def _is_empty_answer(message: AIMessage) -> bool:
    return not content_text(message.content).strip() and not message.tool_calls and not message.invalid_tool_calls


async def _stream_model(model: Any, prepared: list[BaseMessage], config: RunnableConfig) -> AIMessage | None:
    """Stream one model call, forwarding text deltas as ``content`` events.

    None when the server sent no chunk at all (an empty 200 body); raises
    :class:`LLMStreamCutError` when it sent some but never said the reply was complete.
    """
    writer = get_stream_writer()
    chunks: list[AIMessageChunk] = []
    try:
        async for chunk in model.astream(prepared, config):
            text = content_text(chunk.content)
            if text:
                writer(events.content(text))
            chunks.append(chunk)
    except ValueError as exc:
        # LangChain's way of saying the stream had no chunk at all.
        if chunks or _NO_CHUNKS not in str(exc):
            raise
    if not chunks:
        return None
    # Merged once at the end: adding chunk by chunk builds a message object per chunk
    # (14 ms of event-loop time for a 1,000-chunk answer, against 0.7 ms).
    message = message_chunk_to_message(add_ai_message_chunks(chunks[0], *chunks[1:]))
    if not any(message.response_metadata.get(key) for key in _FINISH_KEYS):
        raise LLMStreamCutError(
            f"The model server's streamed answer stopped after {len(chunks)} chunk(s) without saying it was "
            "complete (no finish reason): the connection was cut or the server failed mid-answer."
        )
    return message if isinstance(message, AIMessage) else AIMessage(content=content_text(message.content))


async def _summarize(
    settings: AgentSettings,
    messages: Sequence[BaseMessage],
    previous: Mapping[str, Any] | None,
    window: Mapping[str, Any],
    report: Mapping[str, Any],
    call_out: CallOut | None = None,
) -> tuple[dict[str, Any], dict[str, int]] | None:
    """Fold the turns that left the window into the running summary; None when that fails.

    Runs in the background (:class:`SummaryWriter`), ahead of a planned cut or after a
    cut it was not ready for (that question has already gone out with the plain cut).
    The turns summarised are those between the end of the previous summary and
    ``window["start"]`` (the planned or the new start), so turns a failed call could not
    summarise are tried again at the next cut. A failure or a timeout logs a line.
    ``call_out`` makes the model call (the writer's: it may wait for the model server,
    and send it again after giving way to a question); the timeout bounds each call.
    """
    assert settings.summarize is not None
    start = window.get("start", 0)
    restored = restore_summary(previous, messages)
    since = restored["until"] if restored else 0
    if not isinstance(start, int) or start <= since:
        return None
    dropped = list(messages[since:start])
    encoding = report.get("encoding", DEFAULT_ENCODING)
    # Bounded by the model's own budget: an 8K model gets a short summary and a short request.
    max_tokens, max_input = summary_bounds(int(report.get("message_budget") or 0))

    def prepare() -> tuple[TokenCounter, list[BaseMessage]]:
        counter = TokenCounter(encoding)  # may load the tokenizer's files: never on the event loop
        return counter, summary_request(restored["text"] if restored else None, dropped, counter, max_input, max_tokens)

    counter, request = await asyncio.to_thread(prepare)
    summarize = settings.summarize

    def call() -> Awaitable[AIMessage]:
        return asyncio.wait_for(summarize(request), settings.summary_timeout)

    try:
        reply = await (call_out(call) if call_out is not None else call())
    except SummaryGaveWayError as exc:
        logger.info("Summary of %d dropped message(s) not written: %s; its turns are summarised at the next cut",
                    len(dropped), exc)
        return None
    except TimeoutError:
        logger.warning(
            "Summary of %d dropped message(s) timed out after %.0f s; the plain cut stays until the next cut",
            len(dropped), settings.summary_timeout,
        )
        return None
    except Exception as exc:  # noqa: BLE001  # any provider error: the conversation goes on with the plain cut
        logger.warning("Summary of %d dropped message(s) failed (%s); the plain cut stays until the next cut",
                       len(dropped), type(exc).__name__)
        return None
    text = await asyncio.to_thread(clean_summary, content_text(reply.content), counter, max_tokens)
    if not text:
        logger.warning("Summary of %d dropped message(s) came back empty; keeping the plain cut", len(dropped))
        return None
    turns = (restored["turns"] if restored else 0) + count_turns(dropped)
    tokens = await asyncio.to_thread(counter.text, text)
    logger.info("Conversation summary updated: %d turn(s) summarised in %d tokens", turns, tokens)
    summary = {"text": text, "until": start, "until_id": window.get("start_id"), "turns": turns}
    return summary, _add_usage({}, reply)


def _covers(summary: Any, until: int) -> bool:
    """``summary`` (a stored value) already covers the history up to ``until``."""
    return isinstance(summary, Mapping) and isinstance(summary.get("until"), int) and summary["until"] >= until


async def _invoke_model(model: Any, prepared: list[BaseMessage], config: RunnableConfig) -> AIMessage:
    """One unstreamed model call; its text goes out as a single ``content`` event."""
    message = await model.ainvoke(prepared, config)
    if not isinstance(message, AIMessage):
        message = AIMessage(content=content_text(message.content))
    text = content_text(message.content)
    if text:
        get_stream_writer()(events.content(text))
    return message


EMPTY_ANSWER_MESSAGE = (
    "The model server answered with an empty message (HTTP 200, no text and no tool call), "
    "also when asked again unstreamed and without tools. Check the model server's log and its chat format."
)


def build_copilot_graph(settings: AgentSettings, checkpointer: BaseCheckpointSaver | None = None) -> CompiledStateGraph:
    """Compile the llm_call <-> tools graph for one run's settings."""
    allowed = tools_for_mode(settings.tools, settings.mode)
    allowed_names = {t.name for t in allowed}
    by_name = {t.name: t for t in settings.tools}
    model = settings.bind_tools(allowed)
    traits = settings.traits
    unstreamed: list[Any] = []  # built on first use: most servers never need it
    bare: list[Any] = []  # the model without tools, likewise

    async def unstreamed_model() -> Any:
        if settings.bind_tools_unstreamed is None:
            return model
        if not unstreamed:  # creating a provider client is CPU work: off the loop
            unstreamed.append(await asyncio.to_thread(settings.bind_tools_unstreamed, allowed))
        return unstreamed[0]

    async def bare_model() -> Any:
        if not bare:
            bare.append(await asyncio.to_thread(settings.bind_tools, []))
        return bare[0]

    summaries = settings.summary_writer
    if settings.summarize is not None and summaries is None:
        raise ValueError("AgentSettings.summarize needs a summary_writer (it writes summaries in the background)")

    def take_landed_summary(
        thread_id: str, messages: Sequence[BaseMessage], current: Any, run_usage: dict[str, int]
    ) -> Any:
        """The summary to send: one written in the background since, if it covers more than ``current``.

        A new summary is taken when a turn starts (the last message is the user's); the hook
        then places it (``summary.place_summaries``): with the cut it was written for, or on
        that question, part of what this request adds anyway, so landing costs the prompt
        cache nothing; within a tool round the previous one stays.
        """
        chosen = current
        landed = summaries.landed(thread_id) if summaries is not None else None
        new_turn = bool(messages) and isinstance(messages[-1], HumanMessage)
        if (
            new_turn and landed is not None and not _covers(current, landed.summary["until"])
            and restore_summary(landed.summary, messages) is not None
        ):
            run_usage.update(_sum_usage(run_usage, landed.usage))
            landed.usage = {}  # counted once, in the run that sends it first
            logger.info("A summary written in the background is sent from this call on (%d turn(s))",
                        landed.summary.get("turns", 0))
            chosen = landed.summary
        return chosen

    def start_summary(
        thread_id: str, messages: Sequence[BaseMessage], summary: Any, window: Mapping[str, Any],
        report: Mapping[str, Any],
    ) -> None:
        if settings.summarize is None or summaries is None:
            return
        landed = summaries.landed(thread_id)
        if landed is not None and not _covers(summary, landed.summary["until"]):
            summary = landed.summary  # came back but not sent yet: the new one builds on it
        snapshot, bounds = list(messages), dict(window)

        async def write(call_out: CallOut) -> tuple[dict[str, Any], dict[str, int]] | None:
            return await _summarize(settings, snapshot, summary, bounds, report, call_out)

        async def store(new: dict[str, Any]) -> bool:
            return await store_summary(thread_id, new)

        summaries.start(thread_id, write, store, server=settings.summary_server)

    async def store_summary(thread_id: str, new: dict[str, Any]) -> bool:
        """Save a summary that landed after its run into the session's state (True: done or moot).

        Only a conversation at rest gets it this way; one that waits for an approval
        (or was cut in a tool round) keeps it in memory for its next run to take.
        """
        thread: RunnableConfig = {"configurable": {"thread_id": thread_id}}
        snapshot = await compiled.aget_state(thread)
        values = snapshot.values or {}
        if _covers(values.get("context_summary"), new["until"]):
            return True
        if snapshot.next:
            return False
        messages = list(values.get("messages") or [])
        if restore_summary(new, messages) is None:
            return True  # the history changed under it: nothing to keep
        await compiled.aupdate_state(thread, {"context_summary": new}, as_node=LLM_CALL)
        logger.info("Conversation summary written after its run ended; stored with the session")
        return True

    async def call_model(
        prepared: list[BaseMessage], config: RunnableConfig, offer_tools: bool = True
    ) -> tuple[AIMessage, bool]:
        """One model answer and whether the request that gave it carried the tools.

        Streamed when the server can. An empty streamed body with tools bound is asked
        again unstreamed (and the server remembered as unable to stream tool calls).
        An answer still empty with tools offered (llama-cpp-python's function-calling
        format can only produce a tool call there) is asked once more without tools,
        for the text answer the model chose. Empty after that: a named error.
        """
        response: AIMessage | None
        if not offer_tools:
            response = await _stream_model(await bare_model(), prepared, config)
            if response is None or _is_empty_answer(response):
                raise LLMEmptyAnswerError(EMPTY_ANSWER_MESSAGE)
            return response, False
        if allowed and not traits.streams_tool_calls:
            response = await _invoke_model(await unstreamed_model(), prepared, config)
        else:
            response = await _stream_model(model, prepared, config)
            if response is not None and not _is_empty_answer(response):
                return response, bool(allowed)
            if response is None and allowed:
                logger.warning("The model server sent an empty streamed answer with tools bound; retrying unstreamed")
                response = await _invoke_model(await unstreamed_model(), prepared, config)
                if not _is_empty_answer(response):
                    traits.streams_tool_calls = False
                    logger.warning("This model server cannot stream tool calls: calls with tools go unstreamed from now on")
        with_tools = bool(allowed)
        if allowed and (response is None or _is_empty_answer(response)):
            logger.warning("Empty answer with tools offered; asking again without tools for a text answer")
            response, with_tools = await _stream_model(await bare_model(), prepared, config), False
        if response is None or _is_empty_answer(response):
            raise LLMEmptyAnswerError(EMPTY_ANSWER_MESSAGE)
        return response, with_tools

    async def sendable(prepared: list[BaseMessage]) -> list[BaseMessage]:
        """``prepared`` in a form the server renders whole: tool results as user messages
        for a server whose chat template drops them (measured the first time it matters)."""
        if settings.probe_tool_results is None or not any(isinstance(m, ToolMessage) for m in prepared):
            return prepared
        if traits.tool_results is None:
            kept = await settings.probe_tool_results()
            traits.tool_results = "unknown" if kept is None else "kept" if kept else "dropped"
        return tool_results_as_user(prepared) if traits.tool_results == "dropped" else prepared

    async def llm_call(state: CopilotState, config: RunnableConfig) -> dict[str, Any]:
        messages = state["messages"]
        # Junk arguments of answered calls must not fill every later request: cut, and stored cut.
        cut = cut_tool_call_arguments(messages, settings.max_argument_chars) if settings.max_argument_chars else []
        if cut:
            logger.warning("Cut the arguments of %d earlier tool call message(s): too long for this window", len(cut))
            replaced = {m.id: m for m in cut}
            messages = [replaced.get(m.id, m) if isinstance(m, AIMessage) else m for m in messages]
        calls = state.get("llm_calls", 0)
        writer = get_stream_writer()
        if calls >= settings.max_llm_calls:
            logger.warning("Run stopped after %d LLM calls (limit reached)", calls)
            text = STEP_LIMIT_MESSAGE.format(n=calls)
            writer(events.content(text))  # the user sees it live, not only in the history
            return {"messages": [*cut, AIMessage(content=text)]}
        stop = repeated_failure_answer(messages)
        if stop is not None:
            logger.warning("Run stopped: the model repeated the same failing tool call")
            writer(events.content(stop))
            return {"messages": [*cut, AIMessage(content=stop)]}
        # The same call made again and again: this time the model answers from what it has.
        offer_tools = not repeats_a_call(messages)
        if not offer_tools:
            logger.warning("The model repeated the same tool call; asking it for an answer without tools")
        project_id = (config.get("configurable") or {}).get("project_id")
        topology = await settings.load_topology(project_id) if project_id else None
        scale = clamp_token_scale(state.get("token_scale"))
        window = state.get("context_window")
        run_usage = dict(state.get("usage") or {})
        thread_id = str((config.get("configurable") or {}).get("thread_id") or "")
        summary = take_landed_summary(thread_id, messages, state.get("context_summary"), run_usage)
        if summaries is not None and settings.summary_server is not None:
            # This run talks to its model server from here: a background summary call out to the same
            # server (one slot, often) would make its question wait, up to the summary's timeout.
            # (A no-op after the run's first call: summaries started since wait for it to end.)
            summaries.make_way(settings.summary_server)
        tools_cost = await settings.measure_tools() if settings.measure_tools is not None and offer_tools else None
        samples = state.get("token_scale_samples", 0)
        framing = state.get("token_framing")
        framing_samples = state.get("token_framing_samples", 0)
        # The tool definitions' text is counted with the messages' while their cost is unknown.
        with_tool_text = offer_tools and tools_cost is None

        async def prepare(scale: float) -> tuple[list[BaseMessage], dict[str, Any], Any]:
            logger.info("Calling pre_hook to prepare %d messages", len(messages))
            hook_state = {
                "messages": messages,
                "topology_info": topology,
                "token_scale": scale,
                "context_window": window,
                "context_summary": summary,
                "tools_offered": offer_tools,
                "tools_server_tokens": tools_cost,
            }
            # CPU-bound (tokenising, and loading an encoding the first time): off the loop.
            prepared_state = await asyncio.to_thread(settings.pre_model_hook, hook_state)
            return prepared_state["messages"], prepared_state["context_report"], prepared_state.get("context_window", window)

        async def server_count(prepared: list[BaseMessage]) -> int | None:
            return None if settings.count_text is None else await settings.count_text(prepared, with_tool_text)

        def content_fit(prepared: list[BaseMessage], report: Mapping[str, Any], counted: int) -> float:
            ours = report["total_tokens"] - (0 if with_tool_text else report["tools_tokens"])
            fitted = content_scale(counted, len(prepared), DEFAULT_FRAMING if framing is None else framing, ours)
            return clamp_token_scale(fitted)

        for attempt in (1, 2):
            prepared, report, new_window = await prepare(scale)
            # The server counts this request's own text: the factor follows its content (a JSON
            # tool result costs some servers three times English), before the request is sent.
            counted = await server_count(prepared)
            refits = 0
            while attempt == 1 and counted is not None and refits < MAX_REFITS:
                fitted = content_fit(prepared, report, counted)
                # Once refitted, only upwards: the content kept at the new budget is denser
                # than the one measured (the safe side; the other way could swing back).
                if abs(fitted / scale - 1) <= REFIT_TOLERANCE or (refits and fitted < scale):
                    break
                scale, refits = fitted, refits + 1
                prepared, report, new_window = await prepare(scale)
                counted = await server_count(prepared)
            if counted is not None:
                # What the budget kept may be less dense than the factor it was kept with (the
                # tighter budget cut a JSON result away): the request's estimate is its own.
                own = content_fit(prepared, report, counted)
                report = {**report, "server_tokens_estimate": server_tokens_estimate(
                    report["total_tokens"] - report["tools_tokens"], report["tools_tokens"], report["tools_server_tokens"], own)}
            if isinstance(new_window, Mapping) and report.get("cut_planned"):
                # Written now, in the background, so that it is ready when the planned cut comes.
                start_summary(thread_id, messages, summary, {"start": new_window["planned"], "start_id": new_window.get("planned_id")}, report)
            elif isinstance(new_window, Mapping) and report.get("window_moved") and not _covers(summary, new_window["start"]):
                # A cut the summary was not ready for: the question goes out now with the plain
                # cut; the summary of what it dropped lands at a later call.
                start_summary(thread_id, messages, summary, new_window, report)
            logger.info("Messages prepared: %d → %d", len(messages), len(prepared))
            writer(events.context(report))
            prepared = await sendable(prepared)
            try:
                response, tools_sent = await call_model(prepared, config, offer_tools)
                window = new_window
                break
            except Exception as exc:
                if attempt == 2 or not settings.is_context_length_error(exc):
                    raise
                window = new_window
                scale = clamp_token_scale(max(scale, 1.0) * CONTEXT_RETRY_TIGHTENING)
                logger.warning("Provider rejected the request as too long; retrying once with token scale %.2f", scale)
        logger.info("LLM call completed: tool_calls=%d", len(response.tool_calls))
        for call in response.tool_calls:
            writer(events.tool_call(call["id"] or "", call["name"], call["args"]))
        run_usage = _add_usage(run_usage, response)
        writer(events.usage(run_usage))
        # Calibration (issue 15): the provider's prompt count against our estimate, smoothed over calls.
        # A text answer asked for without tools was a request without their definitions; with
        # their real cost known, the factor learns the messages alone.
        reported = response.usage_metadata
        real = reported.get("input_tokens") if reported else None
        if len(response.tool_calls) > 1:
            real = None  # llama-cpp-python adds up the prompt counts of one completion per call
        tools_real = report.get("tools_server_tokens")
        sent_tools = tools_real if isinstance(tools_real, int) and tools_sent and report["tools_tokens"] else 0
        if isinstance(tools_real, int) and isinstance(real, int):
            observed = observed_scale(real - sent_tools, report["total_tokens"] - report["tools_tokens"])
        else:
            estimated = report["total_tokens"] - (0 if tools_sent else report["tools_tokens"])
            observed = observed_scale(real, estimated)
        if counted is not None:
            if observed is None:  # no usage: the request's own count is the best observation
                observed = content_fit(prepared, report, counted)
            if isinstance(real, int) and (tools_sent or not with_tool_text):
                seen = observed_framing(real - sent_tools, counted, len(prepared))
                if seen is not None:
                    framing = smoothed_mean(framing, framing_samples, seen)
                    framing_samples += 1
        if observed is not None:
            learned = state.get("token_scale") if samples else None
            scale = clamp_token_scale(smoothed_scale(learned, samples, observed))
            samples += 1
        return {
            "messages": [*cut, response],
            "context_report": report,
            "token_scale": scale,
            "token_scale_samples": samples,
            "token_framing": framing,
            "token_framing_samples": framing_samples,
            "llm_calls": calls + 1,
            "usage": run_usage,
            "context_window": window,
            "context_summary": summary,
        }

    async def run_tool(call: Mapping[str, Any], config: RunnableConfig, refused: str | None = None) -> ToolMessage:
        """Run one call; ``refused`` (the result text) answers it without running it."""
        writer = get_stream_writer()
        name, args, call_id = call["name"], call.get("args") or {}, call.get("id") or ""
        writer(events.tool_start(call_id, name, args))
        status = "error"
        undo: Mapping[str, Any] | None = None
        tool = by_name.get(name)
        rejected = refused == REJECTED_RESULT
        if refused is not None:
            output = refused
        elif tool is None:
            output = f"Error: unknown tool {name!r}. Available tools: {', '.join(sorted(allowed_names))}."
        elif name not in allowed_names:
            output = f"Error: tool {name!r} is not allowed in {settings.mode} mode (read-only tools only)."
        else:
            try:
                result = await tool.ainvoke(args, config)
            except pydantic.ValidationError as exc:
                output = f"Error: invalid arguments for {name}: {_validation_summary(exc)}"
            except Exception as exc:  # whatever it is, the call gets an answer
                said = settings.tool_errors.message(exc)
                if said is None:  # a bug in a tool: the traceback is for the log only
                    logger.exception("Tool %s failed", name)
                    said = f"{name} failed unexpectedly; the details are in the GNS3 server log."
                else:
                    undo = _undo(settings.tool_errors.outcome(exc))
                output = f"Error: {said}"
            else:
                output = _stringify(result)
                status = "success"
                undo = _undo(result)
        # ToolMessage knows only success/error; the user sees (live and in the history) a rejection as such.
        shown = "rejected" if rejected else status
        writer(events.tool_end(call_id, name, output, shown, undo))
        return ToolMessage(
            content=output, tool_call_id=call_id, name=name, status=status,
            response_metadata={"copilot_status": shown} if rejected else {},
        )

    async def tools(state: CopilotState, config: RunnableConfig) -> dict[str, Any]:
        last = state["messages"][-1]
        assert isinstance(last, AIMessage)
        gated = [
            call for call in last.tool_calls
            if call["name"] in allowed_names and needs_confirmation(by_name[call["name"]])
        ]
        refused: dict[str, str] = {}
        approved_config = config
        if gated:
            # Before any tool runs: on resume LangGraph runs this node again from the top,
            # and interrupt() then returns the user's decision instead of pausing.
            digest = approval_digest(str((config.get("configurable") or {}).get("thread_id") or ""), gated)
            shown = [events.tool_call(c["id"] or "", c["name"], c["args"]) for c in gated]
            decision = interrupt({"calls": shown, "digest": digest})
            approval = decision.get("approval") if isinstance(decision, Mapping) else None
            if not (isinstance(decision, Mapping) and decision.get("approved") is True):
                refused = {c["id"] or "": REJECTED_RESULT for c in gated}
            elif not (isinstance(approval, Mapping) and approval.get("digest") == digest):
                logger.warning("An approval did not match the calls it was applied to; nothing was sent")
                refused = {c["id"] or "": MISMATCHED_RESULT for c in gated}
            else:
                configurable = {**(config.get("configurable") or {}), APPROVAL_KEY: dict(approval)}
                approved_config = {**config, "configurable": configurable}
        gated_ids = {c["id"] for c in gated}
        answers = list(
            await asyncio.gather(
                *(
                    run_tool(call, approved_config if call["id"] in gated_ids else config, refused.get(call["id"] or ""))
                    for call in last.tool_calls
                )
            )
        )
        for bad in last.invalid_tool_calls:
            answers.append(
                ToolMessage(
                    content=(
                        f"Error: the arguments of {bad.get('name')} are not valid JSON: "
                        f"{cut_arguments(str(bad.get('error') or bad.get('args') or ''), EXCERPT_CHARS)}"
                    ),
                    tool_call_id=bad.get("id") or "",
                    name=bad.get("name") or None,
                    status="error",
                )
            )
        return {"messages": answers}

    def after_llm(state: CopilotState) -> str:  # "tools" or END
        last = state["messages"][-1]
        if isinstance(last, AIMessage) and (last.tool_calls or last.invalid_tool_calls):
            return "tools"
        return END

    builder = StateGraph(CopilotState)
    builder.add_node(LLM_CALL, llm_call)
    builder.add_node("tools", tools)
    builder.add_edge(START, "llm_call")
    builder.add_conditional_edges("llm_call", after_llm, ["tools", END])
    builder.add_edge("tools", "llm_call")
    compiled = builder.compile(checkpointer=checkpointer)  # store_summary writes through it
    return compiled


__all__ = [
    "DEFAULT_MODE",
    "MODES",
    "AgentSettings",
    "CopilotState",
    "ToolErrorPolicy",
    "build_copilot_graph",
    "check_mode",
    "is_read_only",
    "needs_confirmation",
    "tools_for_mode",
]
