"""The copilot agent: a custom LangGraph ``StateGraph`` looping llm_call <-> tools.

It is custom (not ``create_react_agent``) for the reasons the design document
gives and a few more: ``llm_call`` fetches the live topology and calls the
pre-model hook itself before every model call, streams its own typed events
(context report, content deltas, tool calls), learns from the provider's usage
report, and retries once with a tighter budget when the provider says the
request is too long. The ``tools`` node runs every call through the tool gate
(:class:`~..tools.gate.ToolGate`: the mode's tool set, approvals, the error
policy, callbacks such as fault recording), which turns every failure into an
error ``ToolMessage`` so that no tool call is ever left without an answer. What
the model may read of a tool's exception, and what a failed call still reports,
is the :class:`~..tools.gate.ToolErrorPolicy` the caller passes in: the graph
knows nothing of GNS3 or consoles.

:func:`compile_agent_graph` compiles the graph: a short ``llm_call`` that
orchestrates the parts (the argument cut and the loop guard, ``policies/``; the
summary hand-offs, ``summaries/coordinator.py``; the request's fit, ``fitting.py``,
over the pure calibrator of ``context/calibration.py``; the model call,
``model/calls.py``; the turn's topology snapshot, ``turn_topology.py``) and the
tools node (``tools_node.py``). The graph is the same for every run: a run's parts
(:class:`AgentRun`, made from its :class:`AgentSettings`) travel in its config
(:func:`bind_run`), so a server compiles it once per checkpointer (compiling took
~9 ms of CPU) and each run binds its own parts to it. :func:`build_copilot_graph`
does both at once.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from ..tools.gate import AfterCall, BeforeCall, ToolErrorPolicy
from . import events
from .context.calibration import Calibrator
from .context.identity import IdentityMemo, PositionMemo
from .fitting import RequestFit
from .model.calls import ModelCalls
from .model.config import DEFAULT_SUMMARY_TIMEOUT
from .policies.arguments import with_cut_arguments
from .policies.loop_guard import repeated_failure_answer, repeats_a_call
from .policies.modes import gate_for_mode
from .server.traits import ServerTraits
from .state_messages import append_messages
from .summaries.coordinator import SummaryCoordinator
from .summaries.writer import SummaryWriter
from .tools_node import EvidenceNote, ToolsNode
from .turn_topology import TurnTopology
from .usage import add_usage

logger = logging.getLogger(__name__)

DEFAULT_MAX_LLM_CALLS = 25
LLM_CALL = "llm_call"  # the model node: its update carries the finished model message
TOOLS = "tools"
RUN_KEY = "copilot_run"
"""Where a run's :class:`AgentRun` is in its config's ``configurable`` (an object: never stored)."""
STEP_LIMIT_MESSAGE = (
    "I stopped after {n} model calls without reaching an answer, to avoid an endless loop. "
    "Here is where things stand; ask me to continue, or narrow the request."
)


class AgentState(TypedDict, total=False):
    """Graph state: the conversation plus what one run learns about its budget."""

    # add_messages' semantics; an update that only appends costs what it adds (state_messages.py).
    messages: Annotated[list[AnyMessage], append_messages]
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
    # The lab's own model server (agent/server/local.py: often one request at a time):
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
    # the calibration factor then learns the messages alone (agent/server/tools_cost.py).
    measure_tools: Callable[[], Awaitable[int | None]] | None = None
    tool_errors: ToolErrorPolicy = field(default_factory=ToolErrorPolicy)
    # Called with every tool call's outcome, refused ones included (a fault-injection run records faults).
    after_tool: Sequence[AfterCall] = ()
    # Called before each call the gate lets through; may refuse it (a graded lab's fault undo, for a student).
    before_tool: Sequence[BeforeCall] = ()
    # Whether the server's chat template renders tool results (None: cannot tell); asked
    # once per server, the first time a request carries one. None: never asked.
    probe_tool_results: Callable[[], Awaitable[bool | None]] | None = None
    # Answered tool calls whose arguments are longer (characters) are cut in the history.
    max_argument_chars: int | None = None
    # What the model reads of each ended tool call: its output with the ids its device reads are kept under.
    evidence: EvidenceNote | None = None


def _stop_answer(messages: Sequence[BaseMessage], calls: int, max_calls: int) -> str | None:
    """The answer that ends a run going nowhere (the step limit, the same failing call again), or None."""
    if calls >= max_calls:
        logger.warning("Run stopped after %d LLM calls (limit reached)", calls)
        return STEP_LIMIT_MESSAGE.format(n=calls)
    stop = repeated_failure_answer(messages)
    if stop is not None:
        logger.warning("Run stopped: the model repeated the same failing tool call")
    return stop


class AgentRun:
    """One run's parts, made from its settings: the tool gate, the models, the summary hand-offs,
    the topology snapshot its model calls share."""

    def __init__(self, settings: AgentSettings) -> None:
        self.settings = settings
        self.topology = TurnTopology(settings.load_topology)
        self.gate = gate_for_mode(settings.tools, settings.mode, settings.tool_errors,
                                  (self.topology.after_tool, *settings.after_tool), settings.before_tool)
        self.models = ModelCalls(self.gate.allowed, settings.bind_tools, settings.traits,
                                 settings.bind_tools_unstreamed, settings.probe_tool_results)
        self.summaries = SummaryCoordinator(settings.summarize, settings.summary_writer, settings.summary_timeout,
                                            settings.summary_server)


def run_of(config: RunnableConfig) -> AgentRun:
    """The run a node of the graph is running for (bound by :func:`bind_run`)."""
    run = (config.get("configurable") or {}).get(RUN_KEY)
    if not isinstance(run, AgentRun):
        raise RuntimeError("The copilot graph runs only with a run's parts bound to it (bind_run)")
    return run


def compile_agent_graph(checkpointer: BaseCheckpointSaver | None = None) -> CompiledStateGraph:
    """Compile the llm_call <-> tools graph, the same for every run (its parts come with the run's config)."""

    # What the argument cut decided of each message, kept with it across the runs of this graph
    # (the checkpointer hands them the same objects): a turn judges only its new messages.
    judged = IdentityMemo()
    judged_at = PositionMemo()  # and per conversation, its last history's answers by place

    async def llm_call(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        run = run_of(config)
        settings, models, summaries = run.settings, run.models, run.summaries
        messages, cut = with_cut_arguments(state["messages"], settings.max_argument_chars, judged, judged_at)
        calls = state.get("llm_calls", 0)
        writer = get_stream_writer()
        stop = _stop_answer(messages, calls, settings.max_llm_calls)
        if stop is not None:
            writer(events.content(stop))  # the user sees it live, not only in the history
            return {"messages": [*cut, AIMessage(content=stop)]}
        # The same call made again and again: this time the model answers from what it has.
        offer_tools = not repeats_a_call(messages)
        if not offer_tools:
            logger.warning("The model repeated the same tool call; asking it for an answer without tools")
        configurable = config.get("configurable") or {}
        project_id, thread_id = configurable.get("project_id"), str(configurable.get("thread_id") or "")
        topology = await run.topology.get(project_id, turn_starts=calls == 0) if project_id else None
        run_usage = dict(state.get("usage") or {})
        summary = summaries.take_landed(thread_id, messages, state.get("context_summary"), run_usage)
        summaries.make_way()
        tools_cost = await settings.measure_tools() if settings.measure_tools is not None and offer_tools else None
        # The tool definitions' text is counted with the messages' while their cost is unknown.
        calibrator = Calibrator.from_state(state, with_tool_text=offer_tools and tools_cost is None)
        request = RequestFit(settings.pre_model_hook, settings.count_text, calibrator, messages, topology, summary,
                             tools_offered=offer_tools, tools_server_tokens=tools_cost)
        scale, window = calibrator.scale, state.get("context_window")
        for attempt in (1, 2):
            fitted = await request.fit(scale, window, refit=attempt == 1)
            summaries.after_prepare(thread_id, messages, summary, fitted.window, fitted.report)
            logger.info("Messages prepared: %d → %d", len(messages), len(fitted.messages))
            writer(events.context(fitted.report))
            window = fitted.window
            try:
                response, tools_sent = await models.call(await models.sendable(fitted.messages), config, offer_tools)
                break
            except Exception as exc:
                if attempt == 2 or not settings.is_context_length_error(exc):
                    raise
                scale = calibrator.tightened(fitted.scale)
                logger.warning("Provider rejected the request as too long; retrying once with token scale %.2f", scale)
        logger.info("LLM call completed: tool_calls=%d", len(response.tool_calls))
        for call in response.tool_calls:
            writer(events.tool_call(call["id"] or "", call["name"], call["args"]))
        run_usage = add_usage(run_usage, response)
        writer(events.usage(run_usage))
        # The provider's prompt count against our estimate, smoothed over calls.
        real = Calibrator.reported_prompt_tokens(response.usage_metadata, len(response.tool_calls))
        learned = calibrator.learned(fitted.report, real=real, tools_sent=tools_sent, counted=fitted.counted,
                                     messages=len(fitted.messages), scale=fitted.scale)
        return {
            "messages": [*cut, response],
            "context_report": fitted.report,
            **learned.as_state(),
            "llm_calls": calls + 1,
            "usage": run_usage,
            "context_window": window,
            "context_summary": summary,
        }

    def after_llm(state: AgentState) -> str:  # "tools" or END
        last = state["messages"][-1]
        if isinstance(last, AIMessage) and (last.tool_calls or last.invalid_tool_calls):
            return TOOLS
        return END

    builder = StateGraph(AgentState)
    builder.add_node(LLM_CALL, llm_call)
    builder.add_node(TOOLS, ToolsNode(lambda config: run_of(config).gate, lambda config: run_of(config).settings.evidence))
    builder.add_edge(START, LLM_CALL)
    builder.add_conditional_edges(LLM_CALL, after_llm, [TOOLS, END])
    builder.add_edge(TOOLS, LLM_CALL)
    return builder.compile(checkpointer=checkpointer)


def bind_run(graph: CompiledStateGraph, settings: AgentSettings) -> CompiledStateGraph:
    """``graph`` (from :func:`compile_agent_graph`) with one run's parts bound (a cheap copy of it)."""
    run = AgentRun(settings)
    bound = graph.with_config(configurable={RUN_KEY: run})
    run.summaries.bind(bound, LLM_CALL)  # a summary landing after its run is stored through it
    return bound


def build_copilot_graph(settings: AgentSettings, checkpointer: BaseCheckpointSaver | None = None) -> CompiledStateGraph:
    """Compile the graph and bind one run's settings to it (a server compiles once: :func:`bind_run`)."""
    return bind_run(compile_agent_graph(checkpointer), settings)


__all__ = [
    "DEFAULT_MAX_LLM_CALLS",
    "DEFAULT_SUMMARY_TIMEOUT",
    "LLM_CALL",
    "RUN_KEY",
    "STEP_LIMIT_MESSAGE",
    "AgentRun",
    "AgentSettings",
    "AgentState",
    "bind_run",
    "build_copilot_graph",
    "compile_agent_graph",
]
