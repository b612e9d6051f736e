"""Context-window management for GNS3 Copilot (the user's design document, made exact).

Before every LLM call, :func:`create_pre_model_hook`'s hook builds the request:

1. budget = ``context_limit`` x 1000 x strategy ratio - tokens of the tool
   definitions; the rest is for messages, the system message included;
2. the live topology goes into the system prompt's ``{{topology_info}}``, within
   its own share of that budget (reduced step by step when bigger);
3. the history is repaired and trimmed by whole turns, oldest first, so that it
   fits and every provider rule holds; the latest user message is always sent.
   The cut is remembered (``state["context_window"]``) and kept until the budget
   is exceeded again, then moved down to a low-water mark, so that consecutive
   requests share their prefix and prompt caches work (``context/window.py``);
   a running summary of what was cut (``state["context_summary"]``, written by
   the graph, ahead of the cut when it can) opens a user message, never the
   system message (which then stays the same, and cacheable, across cuts):
   the first one sent from a cut on, or the question after which it landed
   (``context/summary.py``'s ``place_summaries``).

Tokens are counted as the provider receives them (framing, roles, tool calls),
with tiktoken encodings loaded offline. This module and ``context/`` are pure and
synchronous: no I/O; from the rest of the copilot they import only the topology
model's link-end resolver (``gns3_client/topology.py``), so that the prompt and
the topology tool name links alike, and, as pure data, the LLM config's schema
(``model/schema.py``: the fields' ranges) and the server-kind classifier
(``server/kind.py``). What the hook reads of an LLM config is parsed once
(:func:`context_settings`), not on every model call. See
``docs/context-window-management.md``.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any, TypedDict

from langchain_core.messages import BaseMessage, SystemMessage, convert_to_messages

from .context.calibration import (
    TOKEN_SCALE_BOUNDS,
    answer_tokens,
    capped_budget,
    clamp_token_scale,
    max_tokens_problem,
    server_tokens_estimate,
)
from .context.counting import REPLY_PRIMING_TOKENS, TokenCounter, content_text, json_text
from .context.injection import TOPOLOGY_SHARE, TopologyText, fit_topology, inject
from .context.summary import (
    SUMMARY_JOIN_TOKENS,
    Placement,
    apply_placements,
    place_summaries,
    placed_before,
    placements_state,
    restore_summary,
    summary_section,
)
from .context.tokenizer import DEFAULT_ENCODING, encoding_name_for, get_encoding
from .context.window import (
    DEFAULT_LOW_WATER,
    DEFAULT_TOOL_OUTPUT_TURNS,
    TOOL_OUTPUT_SHARE,
    plan_window,
    restore_window,
)
from .model.schema import field_range
from .server.kind import server_kind

logger = logging.getLogger(__name__)

CONTEXT_STRATEGY_RATIOS: dict[str, float] = {
    "conservative": 0.60,
    "balanced": 0.75,
    "aggressive": 0.85,
}
DEFAULT_CONTEXT_STRATEGY = "balanced"

__all__ = [
    "CONTEXT_STRATEGY_RATIOS",
    "TOKEN_SCALE_BOUNDS",
    "DEFAULT_CONTEXT_STRATEGY",
    "ContextBudget",
    "ContextReport",
    "ContextSettings",
    "count_tokens",
    "create_pre_model_hook",
    "estimate_tool_tokens",
    "headline",
    "clamp_token_scale",
    "context_settings",
    "server_tokens_estimate",
    "resolve_budget",
    "resolve_window_settings",
    "tools_style_for",
]


def count_tokens(text: str) -> int:
    """Exact tiktoken count of ``text`` in ``cl100k_base`` (the design document's default encoding)."""
    return len(get_encoding(DEFAULT_ENCODING).encode_ordinary(text)) if text else 0


def estimate_tool_tokens(tools: Iterable[Any], encoding: str = DEFAULT_ENCODING) -> int:
    """Tokens of the tool definitions as sent (JSON schema per tool; 1000 for one we cannot read)."""
    return TokenCounter(encoding).tools(tools)


class ContextBudget(TypedDict):
    context_limit: int
    strategy: str
    ratio: float
    limit_tokens: int
    budget: int
    encoding: str


def resolve_budget(llm_config: Mapping[str, Any] | None) -> ContextBudget:
    """Validate the config's ``context_limit``/``context_strategy`` and compute the input budget."""
    config = llm_config or {}
    if "context_limit" not in config:
        raise ValueError("context_limit is required in LLM config")
    limit = config["context_limit"]
    if not isinstance(limit, int) or isinstance(limit, bool) or limit <= 0:
        raise ValueError(f"Invalid context_limit: {limit}")
    strategy = config.get("context_strategy") or DEFAULT_CONTEXT_STRATEGY
    if strategy not in CONTEXT_STRATEGY_RATIOS:
        allowed = ", ".join(sorted(CONTEXT_STRATEGY_RATIOS))
        raise ValueError(f"Invalid context_strategy: {strategy!r} (allowed: {allowed})")
    ratio = CONTEXT_STRATEGY_RATIOS[strategy]
    # A reply reserve that leaves the prompt (almost) no room cannot be honoured.
    problem = max_tokens_problem(limit, config.get("max_tokens"))
    if problem is not None:
        raise ValueError(f"Invalid max_tokens: {config['max_tokens']!r} ({problem})")
    return ContextBudget(
        context_limit=limit,
        strategy=strategy,
        ratio=ratio,
        limit_tokens=limit * 1000,
        budget=int(limit * 1000 * ratio),
        encoding=encoding_name_for(config.get("model"), config.get("tokenizer")),
    )


class WindowSettings(TypedDict):
    low_water: float
    summary: bool
    tool_output_turns: int | None
    tool_output_share: float


def _number_in(config: Mapping[str, Any], name: str, default: float) -> float:
    """``config[name]`` if a number within the schema's range of the field (both ends included)."""
    low, high = field_range(name)
    value = config.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise ValueError(f"Invalid {name}: {value!r} (a number between {low:g} and {high:g})")
    return float(value)


def resolve_window_settings(llm_config: Mapping[str, Any] | None) -> WindowSettings:
    """Validate the config's history-window fields (``context_low_water``, ``context_summary``,
    ``mask_tool_outputs``, ``tool_output_turns``, ``tool_output_share``) and fill in their defaults."""
    config = llm_config or {}
    low_water = _number_in(config, "context_low_water", DEFAULT_LOW_WATER)
    share = _number_in(config, "tool_output_share", TOOL_OUTPUT_SHARE)
    flags = {}
    for name in ("context_summary", "mask_tool_outputs"):
        value = config.get(name, True)
        if value is None:
            value = True
        if not isinstance(value, bool):
            raise ValueError(f"Invalid {name}: {value!r} (true or false)")
        flags[name] = value
    turns = config.get("tool_output_turns", DEFAULT_TOOL_OUTPUT_TURNS)
    if turns is None:
        turns = DEFAULT_TOOL_OUTPUT_TURNS
    low, high = field_range("tool_output_turns")
    if isinstance(turns, bool) or not isinstance(turns, int) or not low <= turns <= high:
        raise ValueError(f"Invalid tool_output_turns: {turns!r} (an integer between {low} and {high})")
    return WindowSettings(
        low_water=low_water,
        summary=flags["context_summary"],
        tool_output_turns=turns if flags["mask_tool_outputs"] else None,
        tool_output_share=share,
    )


def output_cap(settings: ContextSettings, tools_tokens: int) -> int | None:
    """The most tokens one tool output may take in a request: the configured share of the message
    budget (None: no cap).

    From the configured budget, not the calibrated one: calibration changes from call
    to call, and a cap that moved would change old outputs and break the cached prefix.
    """
    share = settings.window["tool_output_share"]
    if share >= 1.0:
        return None
    ceiling = settings.budget["limit_tokens"] - settings.answer_tokens
    return max(MIN_OUTPUT_CAP, int(share * (min(settings.budget["budget"], ceiling) - tools_tokens)))


# An output cap below this would leave too little to read.
MIN_OUTPUT_CAP = 200


def tools_style_for(llm_config: Mapping[str, Any] | None) -> str:
    """``"openai"`` when OpenAI itself renders the tools (exact count), else ``"json"`` (an estimate).

    OpenAI-compatible servers (Ollama, vLLM, llama.cpp) render tools with their own
    chat templates, so only the OpenAI API (no ``base_url``, or api.openai.com) counts exactly.
    """
    return "openai" if server_kind(llm_config or {}).exact_tool_counts else "json"


@dataclass(frozen=True)
class ContextSettings:
    """What the context manager reads of an LLM config, parsed once (:func:`context_settings`).

    ``budget`` is the configured one (the hook corrects a copy by the token scale);
    ``answer_tokens`` the reply's reserve; ``tools_style`` how tool definitions are counted.
    """

    budget: ContextBudget
    window: WindowSettings
    answer_tokens: int
    tools_style: str


def context_settings(llm_config: Mapping[str, Any] | None) -> ContextSettings:
    """Validate what the context manager needs of ``llm_config`` (the design document's ValueErrors) and keep it."""
    budget = resolve_budget(llm_config)
    return ContextSettings(budget, resolve_window_settings(llm_config), answer_tokens(llm_config or {}),
                           tools_style_for(llm_config))


class _ParsedOnce:
    """The hook's view of what ``get_llm_config_func`` returns: settings as given, or a config parsed
    once (again only when a different config comes back)."""

    def __init__(self) -> None:
        self._config: dict[str, Any] | None = None
        self._settings: ContextSettings | None = None

    def __call__(self, config: Any) -> ContextSettings:
        if isinstance(config, ContextSettings):
            return config
        if self._settings is None or self._config != config:
            settings = context_settings(config)
            self._config, self._settings = dict(config or {}), settings
        return self._settings


class ContextReport(TypedDict):
    """What one prepared request costs; streamed to the panel as a ``context`` event."""

    strategy: str
    context_limit: int
    limit_tokens: int
    budget: int
    message_budget: int
    encoding: str
    system_tokens: int
    topology_tokens: int
    tools_tokens: int
    history_tokens: int
    total_tokens: int
    percent: float
    messages_in: int
    messages_out: int
    messages_dropped: int
    topology_available: bool
    topology_level: int | None
    topology_reduced: bool
    topology_focus: list[str]
    truncated: list[dict[str, Any]]
    interrupted_calls: int
    orphan_results: int
    over_budget: bool
    fallback: bool
    token_scale: float
    low_water: float
    window_start: int
    window_moved: bool
    masked_outputs: int
    masked_tokens_saved: int
    summary_tokens: int
    summarized_turns: int
    summary_text: str | None
    summary_until_id: str | None
    cut_planned: bool
    tools_server_tokens: int | None  # the tool definitions' measured cost on the server, if known
    server_tokens_estimate: int  # the request in the provider's tokens, as calibrated
    answer_tokens: int  # reserved for the reply (max_tokens); the budget never eats into it
    # The one figure the budget is judged in (what the panel's meter shows): see headline().
    headline_tokens: int
    headline_budget: int
    headline_percent: float
    headline_calibrated: bool


def headline(report: Mapping[str, Any], *, calibrated: bool) -> dict[str, Any]:
    """The request and its budget in the one unit the budget is judged in: the provider's tokens.

    The budget is kept in our count divided by the token scale, so in the provider's tokens
    the request is ``server_tokens_estimate`` (the messages scaled, the tool definitions at
    their measured cost) against the configured budget, and its share of the window is that
    over ``limit_tokens``. ``calibrated``: a provider's count stands behind the figure (a
    factor learnt from usage, the server's count of the text, the tools' measured cost);
    until then it is our own count, the same number.
    """
    return _headline(int(report["server_tokens_estimate"]), report["budget"], report["token_scale"],
                     report["limit_tokens"], calibrated)


def _headline(tokens: int, budget: int, scale: float, limit_tokens: int, calibrated: bool) -> dict[str, Any]:
    return {
        "headline_tokens": tokens,
        "headline_budget": round(budget * scale),
        "headline_percent": round(100.0 * tokens / limit_tokens, 1),
        "headline_calibrated": calibrated,
    }


def _report(
    budget: ContextBudget,
    *,
    tools_tokens: int,
    system_message_tokens: int,
    topology: TopologyText,
    messages_tokens: int,
    messages_in: int,
    messages_out: int,
    tools_room: int | None = None,
    tools_server_tokens: int | None = None,
    token_scale: float = 1.0,
    messages_dropped: int = 0,
    truncated: list[dict[str, Any]] | None = None,
    interrupted_calls: int = 0,
    orphan_results: int = 0,
    over_budget: bool = False,
    fallback: bool = False,
    low_water: float = DEFAULT_LOW_WATER,
    window_start: int = 0,
    window_moved: bool = False,
    masked_outputs: int = 0,
    masked_tokens_saved: int = 0,
    summary_tokens: int = 0,
    summarized_turns: int = 0,
    summary_text: str | None = None,
    summary_until_id: str | None = None,
    cut_planned: bool = False,
    answer_tokens: int = 0,
    calibrated: bool = False,
) -> ContextReport:
    """The report of one request; ``tools_tokens`` are the definitions it sends (0: none),
    ``tools_room`` what the budget keeps for them (default: the same); the rest as
    :class:`ContextReport` says (what the fit did, defaults: nothing)."""
    total = messages_tokens + tools_tokens
    estimate = server_tokens_estimate(messages_tokens, tools_tokens, tools_server_tokens, token_scale)
    shown = _headline(estimate, budget["budget"], token_scale, budget["limit_tokens"],
                      calibrated or tools_server_tokens is not None)
    report = ContextReport(
        strategy=budget["strategy"],
        context_limit=budget["context_limit"],
        limit_tokens=budget["limit_tokens"],
        budget=budget["budget"],
        message_budget=budget["budget"] - (tools_tokens if tools_room is None else tools_room),
        encoding=budget["encoding"],
        system_tokens=system_message_tokens - topology.tokens,
        topology_tokens=topology.tokens,
        tools_tokens=tools_tokens,
        history_tokens=messages_tokens - system_message_tokens,
        total_tokens=total,
        percent=round(100.0 * total / budget["limit_tokens"], 1),
        messages_in=messages_in,
        messages_out=messages_out,
        messages_dropped=messages_dropped,
        topology_available=topology.available,
        topology_level=topology.level,
        topology_reduced=topology.reduced,
        topology_focus=list(topology.focus),
        truncated=[] if truncated is None else truncated,
        interrupted_calls=interrupted_calls,
        orphan_results=orphan_results,
        over_budget=over_budget,
        fallback=fallback,
        token_scale=token_scale,
        low_water=low_water,
        window_start=window_start,
        window_moved=window_moved,
        masked_outputs=masked_outputs,
        masked_tokens_saved=masked_tokens_saved,
        summary_tokens=summary_tokens,
        summarized_turns=summarized_turns,
        summary_text=summary_text,
        summary_until_id=summary_until_id,
        cut_planned=cut_planned,
        tools_server_tokens=tools_server_tokens,
        server_tokens_estimate=estimate,
        answer_tokens=answer_tokens,
        headline_tokens=shown["headline_tokens"],
        headline_budget=shown["headline_budget"],
        headline_percent=shown["headline_percent"],
        headline_calibrated=shown["headline_calibrated"],
    )
    return report


def _originals_kept(originals: list[BaseMessage], kept: list[BaseMessage]) -> int:
    """How many of ``originals`` are in ``kept`` unchanged (by identity)."""
    return len(set(map(id, originals)).intersection(map(id, kept)))


def _as_messages(raw: Any) -> list[BaseMessage]:
    """``raw`` as messages: the list itself when it holds nothing else (the graph's state does)."""
    # The few distinct types, not every item: a long history is checked at C speed.
    if isinstance(raw, list) and all(issubclass(t, BaseMessage) for t in set(map(type, raw))):
        return raw
    return convert_to_messages(raw)


# How much of the conversation is searched for node names (messages, characters each).
MENTION_MESSAGES = 40
MENTION_CHARS = 4000


def _mentions(raw: Any, window: Any) -> str:
    """What the conversation since the window's start said, tool outputs excepted: the nodes
    it names get full detail in a big lab's topology. It changes only when a new node is named
    or the window moves, so the system message stays cacheable."""
    try:
        messages = _as_messages(raw)
    except Exception:  # noqa: BLE001  # the hook reports unusable messages itself
        return ""
    start = restore_window(window, messages, quiet=True).start
    parts: list[str] = []
    for message in messages[start:][-MENTION_MESSAGES:]:
        if message.type == "tool":
            continue
        parts.append(content_text(message.content)[:MENTION_CHARS])
        parts.extend(json_text(call.get("args") or {}) for call in getattr(message, "tool_calls", None) or [])
    return "\n".join(parts)


def _shown_summary(
    placements: list[Placement], summary: Mapping[str, Any] | None, start: int, messages: list[BaseMessage]
) -> tuple[int, str | None, str | None]:
    """(turns, text, id of the first message after it) of the summary the report shows: the
    newest one sent, else the stored one unless it waits for a planned cut (its turns are still sent)."""
    if placements:
        newest = placements[-1]
        until_id = messages[newest.until].id if newest.until < len(messages) else None
        return newest.turns, newest.text, until_id
    if summary and int(summary["until"]) <= start:
        return int(summary.get("turns", 0)), summary["text"], summary.get("until_id")
    return 0, None, None


def create_pre_model_hook(
    system_prompt: str,
    get_topology_func: Callable[[Mapping[str, Any]], Any],
    get_llm_config_func: Callable[[], Mapping[str, Any] | ContextSettings | None],
    get_tools_func: Callable[[], Iterable[Any] | None],
    *,
    counters: MutableMapping[str, TokenCounter] | None = None,
) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    """Build ``hook(state) -> {"messages": prepared, "context_report": report, "context_window": window}``.

    ``get_llm_config_func`` returns the LLM config (a mapping, parsed once: again only when
    a different one comes back) or what :func:`context_settings` parsed of it.

    ``state["context_window"]`` (optional) is the window the previous call
    returned: keep it in the graph state so the next request keeps its prefix.
    ``state["context_summary"]`` (optional) is the running summary of what lies
    before the window; where it goes is ``summary.place_summaries``'s choice. The report's
    ``cut_planned`` says this call planned the next cut (``context_window["planned"]``): the
    graph then writes the summary of the turns before it, so that it arrives with the cut.

    The hook keeps per-encoding token counters whose caches make a call on a long
    conversation cost about its new messages: reuse the hook, or pass the same
    ``counters`` mapping to hooks built for different runs.

    ``state["tools_server_tokens"]`` (optional): what the tool definitions cost on the
    provider, measured; their room in the budget is then that (the token scale being the
    messages' alone), and the report's ``server_tokens_estimate`` adds it as is.

    ``state["tools_offered"]`` (optional, default True): False for a call made without the
    tools, whose definitions are then not in the report's total (their room stays reserved).

    ``state["token_scale"]`` (optional, default 1.0) is how many tokens the provider
    reported per token we estimated on an earlier call; the budget is divided by it
    (clamped to :data:`TOKEN_SCALE_BOUNDS`), so a model whose tokenizer differs from
    ours still gets a request that fits. ``state["token_scale_calibrated"]`` (optional):
    a provider's count taught that factor, so the report's headline (:func:`headline`) is
    in the provider's tokens.
    """
    counters = {} if counters is None else counters
    parsed = _ParsedOnce()

    def counter_for(encoding: str) -> TokenCounter:
        counter = counters.get(encoding)
        if counter is None:
            counter = counters[encoding] = TokenCounter(encoding)
        return counter

    def hook(state: Mapping[str, Any]) -> dict[str, Any]:
        settings = parsed(get_llm_config_func())
        budget = ContextBudget(**settings.budget)  # corrected for this call only
        window_settings = settings.window
        scale = clamp_token_scale(state.get("token_scale"))
        # The reply's room (max_tokens) is never given to the prompt, whatever the scale.
        reserve = settings.answer_tokens
        budget["budget"] = capped_budget(budget["budget"], scale, budget["limit_tokens"], reserve)
        counter = counter_for(budget["encoding"])
        tools_tokens = counter.tools(get_tools_func() or [], style=settings.tools_style)
        # The definitions' room: their measured cost on the server when known (in our units at
        # this scale, which is then the messages' alone), else our count, scaled with the rest.
        measured = state.get("tools_server_tokens")
        tools_real = measured if isinstance(measured, int) and not isinstance(measured, bool) and measured >= 0 else None
        tools_room = math.ceil(tools_real / scale) if tools_real is not None else tools_tokens
        message_budget = budget["budget"] - tools_room
        # Asked without tools (the model repeated a call): the request carries no definitions, so
        # they are not in its estimate (nor in the calibration it feeds). Their room stays in the
        # budget, so that this request and the next, with tools, send the same history.
        tools_sent = tools_tokens if state.get("tools_offered", True) is not False else 0
        # Whole turns fit the measured room; an item cut to fit fills its room to the last token,
        # so it also fits our exact count of the definitions when that is the larger.
        cut_margin = max(0, tools_sent - tools_room)
        report_for = functools.partial(_report, budget, tools_tokens=tools_sent, tools_room=tools_room,
                                       tools_server_tokens=tools_real, token_scale=scale,
                                       calibrated=bool(state.get("token_scale_calibrated")))
        if message_budget <= 0:
            logger.error(
                "Tool definitions (%d tokens) exceed the input budget (%d tokens): "
                "increase context_limit or reduce the number of tools",
                tools_tokens,
                budget["budget"],
            )

        raw_topology = get_topology_func(state)
        # Read from the conversation only for a lab too big to show whole.
        mentions = functools.partial(_mentions, state.get("messages") or [], state.get("context_window"))
        topology = fit_topology(raw_topology, max(0, int(message_budget * TOPOLOGY_SHARE)), counter, mentions)
        if topology.available:
            logger.info("✓ Topology injected: %d chars, nodes: %s", len(topology.text), topology.node_names)
        else:
            logger.warning("✗ Topology data is None, injecting placeholder")
        system_text = inject(system_prompt, topology.text)
        system_plain_tokens = counter.message(SystemMessage(content=system_text))

        raw = state.get("messages") or []
        previous = state.get("context_window")
        try:
            messages = _as_messages(raw)
            summary = restore_summary(state.get("context_summary"), messages) if window_settings["summary"] else None
            section = summary_section(summary)
            before = placed_before(previous, summary) if section and summary else []
            # Room for the summary and, when a new one lands between cuts, the one it follows.
            older = [p for p in before if summary and p.until != summary["until"]][-1:]
            sections = [section] * bool(section) + [p.section() for p in older]
            # The system message never carries the summary: it stays cacheable across cuts.
            system = SystemMessage(content=system_text)
            system_tokens = system_plain_tokens
            reserved = system_tokens + REPLY_PRIMING_TOKENS + sum(counter.text(t) + SUMMARY_JOIN_TOKENS for t in sections)
            room = message_budget - reserved
            low_water = int(message_budget * window_settings["low_water"]) - reserved
            prior = restore_window(previous, messages)
            plan = plan_window(
                messages,
                prior,
                room,
                max(0, low_water),
                counter,
                tool_output_turns=window_settings["tool_output_turns"],
                output_cap=output_cap(settings, tools_tokens),
                ready=int(summary["until"]) if section and summary else 0,
                cut_margin=cut_margin,
            )
            fitted = plan.fit
            start = plan.window.start
            placements = place_summaries(messages, fitted.messages, summary, before, start != prior.start, start) if section else []
            shown = _shown_summary(placements, summary if section else None, start, messages)
            history = apply_placements(fitted.messages, placements)
            summary_tokens = 0 if not placements else (
                sum(counter.message(m) for m in history) - sum(counter.message(m) for m in fitted.messages))
        except Exception as exc:  # noqa: BLE001  # the design document's fallback: never block a call on trimming
            logger.error("Failed to trim messages: %s", exc)
            logger.warning("Returning original messages due to trimming error")
            system = SystemMessage(content=system_text)
            fallback = [system, *raw]
            report = report_for(
                system_message_tokens=system_plain_tokens,
                topology=topology,
                messages_tokens=system_plain_tokens + REPLY_PRIMING_TOKENS,
                messages_in=len(raw),
                messages_out=len(raw),
                fallback=True,
                low_water=window_settings["low_water"],
                answer_tokens=reserve,
            )
            return {"messages": fallback, "context_report": report, "context_window": previous}

        prepared: list[BaseMessage] = [system, *history]
        messages_tokens = system_tokens + fitted.tokens + summary_tokens + REPLY_PRIMING_TOKENS
        dropped_in_view = len(plan.sent) - _originals_kept(plan.sent, fitted.messages) - len(fitted.truncated)
        report = report_for(
            system_message_tokens=system_tokens,
            topology=topology,
            messages_tokens=messages_tokens,
            messages_in=len(messages),
            messages_out=len(fitted.messages),
            messages_dropped=start + dropped_in_view,
            truncated=fitted.truncated,
            interrupted_calls=plan.interrupted_calls,
            orphan_results=plan.orphan_results,
            over_budget=fitted.over_budget,
            low_water=window_settings["low_water"],
            window_start=start,
            window_moved=plan.moved,
            masked_outputs=plan.masked_outputs,
            masked_tokens_saved=plan.masked_tokens_saved,
            summary_tokens=summary_tokens,
            summarized_turns=shown[0],
            summary_text=shown[1],
            summary_until_id=shown[2],
            cut_planned=plan.planned,
            answer_tokens=reserve,
        )
        # The summary opens a user message of the history but is reported on its own.
        report["history_tokens"] -= report["summary_tokens"]
        if report["over_budget"]:
            logger.error(
                "System message (%d tokens, topology included) and the latest user message exceed "
                "the message budget (%d tokens); sending them anyway",
                system_tokens,
                message_budget,
            )
        if plan.interrupted_calls or plan.orphan_results:
            logger.info(
                "History repaired: %d unanswered tool call(s) answered, %d orphan tool result(s) left out",
                plan.interrupted_calls,
                plan.orphan_results,
            )
        if plan.moved:
            logger.info(
                "Context window moved: history now starts at message %d (low-water mark %.0f%%), "
                "%d old tool output(s) masked",
                start,
                100 * window_settings["low_water"],
                plan.masked_outputs,
            )
        trimmed = report["messages_dropped"] or report["truncated"] or plan.masked_outputs
        summary_line = "~%d tokens + %d tools = %d / %dK (%.1f%%), strategy=%s"
        args = (
            messages_tokens,
            tools_tokens,
            report["total_tokens"],
            budget["context_limit"],
            report["percent"],
            budget["strategy"],
        )
        if trimmed:
            logger.info("Messages trimmed: %d → %d msgs. Total: " + summary_line, len(raw), len(prepared), *args)
        else:
            logger.info("Context ready: %d msgs, " + summary_line, len(prepared), *args)
        window_state: dict[str, Any] = plan.window.as_state()
        window_state.update(placements_state(placements))  # where summaries sit, kept until the next cut
        return {"messages": prepared, "context_report": report, "context_window": window_state}

    return hook
