"""The copilot agent, assembled in one place: what each run's graph is built from.

One :class:`AgentAssembly` lives as long as the server (the launcher builds it in
``api/state.py``; the tests build theirs the same way, with a scripted model or
fake tools): it holds the server-wide parts (how a run's tools are made, how a
model is bound, GNS3 clients, the prompts, what model servers taught us, token
counters) and what runs share (``shared.py``: the tool offer per toolset shape,
a model per user, LLM profile and offer, the compiled graph). For each run,
:meth:`AgentAssembly.settings` turns a :class:`RunSpec` (who asks, in which
project and session, with which LLM config and mode) into the
:class:`~.gns3_copilot.AgentSettings` the graph runs on, and
:meth:`AgentAssembly.graph` binds them to the graph compiled once. The service
only runs sessions: it neither builds tools nor knows how a model server is probed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
from collections.abc import Awaitable, Callable, Hashable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph

from ..gns3_client.client import GNS3Client
from ..gns3_client.exceptions import GNS3Error
from ..gns3_client.topology import fetch_rest_topology
from ..tools.errors import TOOL_ERRORS
from ..tools.gate import AfterCall, BeforeCall, ToolOutcome
from ..tools.toolset import RunContext
from .context.calibration import Calibrator
from .context.counting import TokenCounter
from .context_manager import create_pre_model_hook
from .fitting import RequestFit
from .gns3_copilot import DEFAULT_MAX_LLM_CALLS, AgentSettings, bind_run, compile_agent_graph
from .model.config import LLMProfile, llm_profile
from .model.prompts import FAULT_INJECTION, PromptSet, compact_system_prompt_for, default_prompts
from .policies.arguments import argument_limit
from .policies.modes import tools_for_mode
from .policies.small_window import WindowFit, fit_to_window
from .server.client import ModelServerClient, ModelServerClients
from .server.tokens import ServerTokenizer
from .server.tool_results import template_keeps_tool_results
from .server.tools_cost import offer_key, tools_prompt_tokens
from .server.traits import ServerTraits, ServerTraitsMemory
from .shared import KEPT_MODELS, KEPT_OFFERS, Kept, config_key, offer_shape
from .summaries.writer import SummaryWriter
from .tools_node import EvidenceNote
from .turn_topology import may_change_lab

if TYPE_CHECKING:
    import httpx

log = logging.getLogger(__name__)

__all__ = ["AgentAssembly", "RunSpec"]

ToolsFactory = Callable[[RunContext], Sequence[BaseTool]]
BindTools = Callable[[Sequence[Any], Mapping[str, Any]], Any]
LoadTopology = Callable[[GNS3Client, str], Awaitable[Any]]


@dataclass(frozen=True)
class RunSpec:
    """One run: who asks (their GNS3 identity), where (project, session), with what (LLM config, mode).

    ``purpose`` picks the system prompt: the mode, or ``fault_injection`` (a
    lab-automation run whose lab-changing tools also return how to undo them).
    ``llm_config``: a config, or its profile (parsed where the request came in).
    """

    user_id: str
    username: str
    token: str = field(repr=False)  # a live JWT: never in logs or reprs
    project_id: str
    session_id: str
    llm_config: Mapping[str, Any]
    mode: str
    purpose: str = ""
    extra_tools: tuple[BaseTool, ...] = field(default=(), compare=False)
    """Tools this run adds to the copilot's own (``gns3_check_work`` where a graded lab is assigned)."""

    @property
    def prompt(self) -> str:
        return self.purpose or self.mode


class AgentAssembly:
    """The server-wide parts of the agent, and each run's settings and graph made from them."""

    def __init__(
        self,
        *,
        tools_factory: ToolsFactory,
        bind_tools: BindTools,
        is_context_length_error: Callable[[BaseException], bool],
        client_factory: Callable[[str], GNS3Client],
        load_topology: LoadTopology | None = None,
        max_llm_calls: int = DEFAULT_MAX_LLM_CALLS,
        prompts: PromptSet | None = None,
        bind_tools_unstreamed: BindTools | None = None,
        counters: MutableMapping[str, TokenCounter] | None = None,
        server_transport: httpx.AsyncBaseTransport | None = None,
        lab_changed: Callable[[str], None] | None = None,
    ) -> None:
        self._tools_factory = tools_factory
        self._bind_tools = bind_tools
        self._bind_tools_unstreamed = bind_tools_unstreamed
        self._is_context_length_error = is_context_length_error
        self._client_factory = client_factory
        self._load_topology = load_topology or fetch_rest_topology
        # Told of a project whose lab a run's tool may have changed (a topology kept between turns forgets it).
        self._lab_changed = lab_changed
        self.max_llm_calls = max_llm_calls
        self.prompts = prompts or default_prompts()
        """The system prompts; replaced as a whole when an administrator reloads them."""
        self._server_traits = ServerTraitsMemory()  # what each model server taught us, across runs
        # One pooled client per model server, for the probes of every run (tests inject a transport).
        self.model_servers = ModelServerClients(transport=server_transport)
        # Per encoding, their caches shared by runs (a benchmark's baseline passes one that forgets).
        self._counters: MutableMapping[str, TokenCounter] = {} if counters is None else counters
        self._offers: Kept[Any, WindowFit] = Kept(KEPT_OFFERS)
        self._models: Kept[Any, Any] = Kept(KEPT_MODELS)
        self._graphs: dict[int, tuple[BaseCheckpointSaver | None, CompiledStateGraph]] = {}
        self._graphs_lock = threading.Lock()

    async def aclose(self) -> None:
        """Close the model servers' clients (the server is stopping; runs have ended)."""
        await self.model_servers.aclose()

    def run_config(self, session_id: str, project_id: str) -> RunnableConfig:
        """The graph's config for one run of a session (a step limit that ends runaway loops)."""
        return {
            "configurable": {"thread_id": session_id, "project_id": project_id},
            "recursion_limit": 2 * self.max_llm_calls + 10,
        }

    def tools(self, spec: RunSpec) -> list[BaseTool]:
        """Every tool of the run, bound to its project, session and the user's token."""
        context = RunContext(
            lambda: self._client_factory(spec.token), spec.project_id, spec.username, spec.session_id, spec.user_id,
            record_undo=spec.purpose == FAULT_INJECTION,
        )
        return [*self._tools_factory(context), *spec.extra_tools]

    def settings(
        self, spec: RunSpec, *, summary_writer: SummaryWriter | None = None, after_tool: Sequence[AfterCall] = (),
        before_tool: Sequence[BeforeCall] = (),
        evidence: EvidenceNote | None = None,
    ) -> AgentSettings:
        """One run's agent settings. CPU work (tools are pydantic models): call it off the event loop.

        ``summary_writer`` writes running summaries in the background (none: no summaries);
        ``after_tool`` sees every tool call's outcome (a fault-injection run records faults);
        ``evidence`` gives what the model reads of each call: its output with the ids its reads are kept under.
        """
        run = _RunParts(self, spec)
        profile = run.profile
        summarize = summary_writer is not None and profile.context.window["summary"]
        return AgentSettings(
            tools=run.tools,
            mode=spec.mode,
            bind_tools=run.bind_tools,
            bind_tools_unstreamed=None if self._bind_tools_unstreamed is None else run.bind_tools_unstreamed,
            traits=run.traits,
            count_text=run.probes.count_text if run.probes else None,
            measure_tools=run.probes.measure_tools if run.probes else None,
            probe_tool_results=run.probes.probe_tool_results if run.probes else None,
            summary_server=profile.server.one_slot_server,
            max_argument_chars=argument_limit(profile.limit_tokens),
            pre_model_hook=run.hook,
            load_topology=run.load_topology,
            is_context_length_error=self._is_context_length_error,
            max_llm_calls=self.max_llm_calls,
            summarize=run.summarize if summarize else None,
            summary_writer=summary_writer,
            summary_timeout=profile.timeouts.summary,
            tool_errors=TOOL_ERRORS,
            after_tool=(*self._lab_changes(spec.project_id), *after_tool),
            before_tool=tuple(before_tool),
            evidence=evidence,
        )

    def _lab_changes(self, project_id: str) -> tuple[AfterCall, ...]:
        """The after-call that tells ``lab_changed`` of a call that may have changed the project's lab."""
        lab_changed = self._lab_changed
        if lab_changed is None:
            return ()

        async def after(outcome: ToolOutcome) -> None:
            if may_change_lab(outcome):
                lab_changed(project_id)

        return (after,)

    async def preview(self, spec: RunSpec, values: Mapping[str, Any]) -> dict[str, Any]:
        """The budget report the next model call of a conversation would start from, without calling
        the model: prepared as that call prepares it (``fitting.RequestFit``: the same hook input,
        the tool definitions' cost on the server, the server's count of the text). ``values``: the
        conversation's stored graph state. The next call starts a turn, so the tools are offered."""
        settings = await asyncio.to_thread(self.settings, spec)  # building the tools is pydantic work
        topology = await settings.load_topology(spec.project_id)
        tools_cost = await settings.measure_tools() if settings.measure_tools is not None else None
        calibrator = Calibrator.from_state(values, with_tool_text=tools_cost is None)
        request = RequestFit(settings.pre_model_hook, settings.count_text, calibrator,
                             list(values.get("messages") or []), topology, values.get("context_summary"),
                             tools_offered=True, tools_server_tokens=tools_cost)
        return (await request.fit(calibrator.scale, values.get("context_window"))).report

    def graph(
        self, spec: RunSpec, checkpointer: BaseCheckpointSaver | None, *, summary_writer: SummaryWriter | None = None,
        after_tool: Sequence[AfterCall] = (), before_tool: Sequence[BeforeCall] = (),
        evidence: EvidenceNote | None = None,
    ) -> CompiledStateGraph:
        """The graph over ``checkpointer`` (compiled once) with the run's parts bound (CPU work: off the event loop)."""
        return bind_run(self._compiled(checkpointer),
                        self.settings(spec, summary_writer=summary_writer, after_tool=after_tool,
                                      before_tool=before_tool, evidence=evidence))

    def _compiled(self, checkpointer: BaseCheckpointSaver | None) -> CompiledStateGraph:
        with self._graphs_lock:
            kept = self._graphs.get(id(checkpointer))
            if kept is None or kept[0] is not checkpointer:
                kept = self._graphs[id(checkpointer)] = (checkpointer, compile_agent_graph(checkpointer))
            return kept[1]

    def offer(self, tools: Sequence[BaseTool], prompt: str, compact_prompt: str, profile: LLMProfile) -> WindowFit:
        """The tool offer and prompt for ``tools`` at the profile's window, chosen once per such shape."""
        context = profile.context
        shape = offer_shape(tools, prompt, compact_prompt, context.budget["budget"], context.budget["limit_tokens"],
                            context.answer_tokens, profile.encoding)
        return self._offers.get(shape, lambda: fit_to_window(tools, prompt, compact_prompt, context,
                                                             self.counter(profile.encoding)))

    def model(self, user_id: str, profile: LLMProfile, offered: Sequence[Any], *, stream: bool = True) -> Any:
        """The profile's model with ``offered`` bound, built once per user, profile and offer (CPU work
        the first time: off the event loop). Never one user's for another: the key is in the profile."""
        bind = self._bind_tools if stream else self._bind_tools_unstreamed
        if bind is None:
            raise ValueError("This assembly has no unstreamed model binding")
        return self._models.get(self._model_key(user_id, profile, offered, stream), lambda: bind(list(offered), profile))

    @staticmethod
    def _model_key(user_id: str, profile: LLMProfile, offered: Sequence[Any], stream: bool) -> Hashable:
        return (user_id, stream, config_key(profile), offer_key(offered))

    async def check_model(self, user_id: str, profile: LLMProfile) -> None:
        """Build the profile's model now (or find it built): a provider package missing or a key the
        provider needs is refused before a run starts (LLMConfigError). Nothing is sent to the provider.
        Only a build goes to a worker thread (CPU work, an SDK import); a model already built is found
        on the loop (a dictionary lookup: no thread hop on every turn)."""
        if self._models.has(self._model_key(user_id, profile, [], True)):
            return
        await asyncio.to_thread(self.model, user_id, profile, [])

    async def topology(self, spec: RunSpec) -> Any:
        """The run's project topology as the user sees it (REST-shaped); None (logged) when GNS3 cannot give it."""
        try:
            async with self._client_factory(spec.token) as client:
                return await self._load_topology(client, spec.project_id)
        except GNS3Error as exc:
            log.warning("Topology of project %s unavailable: %s", spec.project_id, exc)
            return None

    def traits_for(self, llm_config: Mapping[str, Any]) -> ServerTraits:
        """What the config's model server has taught the runs so far (shared, mutable)."""
        return self._server_traits.for_config(llm_config)

    def counter(self, encoding: str) -> TokenCounter:
        """The shared token counter of an encoding (made the first time: it may load the encoding)."""
        return self._counters.get(encoding) or self._counters.setdefault(encoding, TokenCounter(encoding))


class _RunParts:
    """What one run's settings point at: its tools, what the model is offered, the hook, the probes."""

    def __init__(self, assembly: AgentAssembly, spec: RunSpec) -> None:
        self._assembly = assembly
        self._spec = spec
        # Parsed once (already where the request came in, usually): nothing below validates it again.
        self.profile = profile = llm_profile(spec.llm_config)
        self.tools = assembly.tools(spec)
        allowed = tools_for_mode(self.tools, spec.mode)
        # Small windows: compact tool definitions and prompt, then an essential subset.
        prompt = assembly.prompts.system_for(spec.prompt)
        self.fit: WindowFit = assembly.offer(allowed, prompt, compact_system_prompt_for(spec.mode), profile)
        if self.fit.level != "full":
            log.info("Small context window: offering the model %s tool definitions (%d tokens with the prompt)",
                     self.fit.level, self.fit.fixed_tokens)
        self._base_hook = create_pre_model_hook(
            self.fit.system_prompt,
            get_topology_func=_topology_of,
            get_llm_config_func=lambda: profile.context,
            get_tools_func=lambda: self.fit.tools,
            counters=assembly._counters,
        )
        self.traits = assembly.traits_for(profile)
        server = profile.server.compatible_server
        self.probes = _ServerProbes(assembly.model_servers, server, profile, self.traits, self.fit.tools) if server else None

    def offer(self, tools: Sequence[BaseTool]) -> list[Any]:
        """What the model is offered for ``tools``: their definitions in the run's offer (compact at small windows)."""
        names = {t.name for t in tools}
        return [spec for spec in self.fit.tools if spec["function"]["name"] in names]

    def bind_tools(self, tools: Sequence[BaseTool]) -> Any:
        return self._assembly.model(self._spec.user_id, self.profile, self.offer(tools))

    def bind_tools_unstreamed(self, tools: Sequence[BaseTool]) -> Any:
        return self._assembly.model(self._spec.user_id, self.profile, self.offer(tools), stream=False)

    def hook(self, state: Mapping[str, Any]) -> dict[str, Any]:
        prepared = self._base_hook(state)
        prepared["context_report"]["tool_offer"] = self.fit.level
        return prepared

    async def load_topology(self, project_id: str) -> Any:
        """The project's topology as the user sees it; None (logged) when GNS3 cannot give it."""
        spec = self._spec if project_id == self._spec.project_id else dataclasses.replace(self._spec, project_id=project_id)
        return await self._assembly.topology(spec)

    async def summarize(self, request: list[BaseMessage]) -> AIMessage:
        """The same model without tools; building it (the first time) imports the provider SDK: off the loop."""
        model = await asyncio.to_thread(self._assembly.model, self._spec.user_id, self.profile, [])
        reply = await model.ainvoke(request)
        return reply if isinstance(reply, AIMessage) else AIMessage(content=reply.content)


def _topology_of(state: Mapping[str, Any]) -> Any:
    return state.get("topology_info")


class _ServerProbes:
    """What an OpenAI-compatible server is asked besides chat: its token counts, the tools' cost, its template.

    Through the server's one pooled client (``server/client.py``); a probe that fails never
    fails the run: it is logged and the run calibrates as if the server could not tell.
    """

    def __init__(
        self, servers: ModelServerClients, base_url: str, profile: LLMProfile, traits: ServerTraits,
        offered: Sequence[Any],
    ) -> None:
        self._servers = servers
        self._base_url = base_url
        self._api_key = profile.get("api_key")
        self._model = profile.model
        self._timeout = profile.timeouts.probe
        self._traits = traits
        self._offered = list(offered)
        self._offer_key = offer_key(self._offered)

    async def _client(self) -> ModelServerClient:
        return await self._servers.client(self._base_url, self._api_key, self._timeout)

    async def count_text(self, prepared: list[BaseMessage], with_tools: bool) -> int | None:
        try:
            tokenizer = ServerTokenizer(await self._client(), self._traits, self._model, self._timeout)
            return await tokenizer.count(prepared, self._offered if with_tools else [])
        except Exception:  # a count that fails never fails the run: calibrate as before
            log.exception("Counting a request with the model server's tokenizer failed")
            return None

    async def measure_tools(self) -> int | None:
        costs, key = self._traits.tools_cost, self._offer_key

        async def measure() -> None:
            try:
                costs[key] = await tools_prompt_tokens(await self._client(), self._model, self._offered)
            except Exception:  # a measure that fails never fails the run: calibrate as before
                log.exception("Measuring what the tool definitions cost on the model server failed")
                costs[key] = None

        await self._traits.learn(f"tools_cost {key}", lambda: key in costs, measure)
        return costs[key]

    async def probe_tool_results(self) -> bool | None:
        return await template_keeps_tool_results(await self._client(), self._model)
