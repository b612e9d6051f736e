"""Context-window management for GNS3 Copilot (the user's design document, made exact).

Before every LLM call, :func:`create_pre_model_hook`'s hook builds the request:

1. budget = ``context_limit`` x 1000 x strategy ratio - tokens of the tool
   definitions; the rest is for messages, the system message included;
2. the live topology goes into the system prompt's ``{{topology_info}}``, within
   its own share of that budget (reduced step by step when bigger);
3. the history is repaired and trimmed by whole turns, oldest first, so that it
   fits and every provider rule holds; the latest user message is always sent.

Tokens are counted as the provider receives them (framing, roles, tool calls),
with tiktoken encodings loaded offline. This module and ``context/`` are pure and
synchronous: no I/O, nothing imported from the rest of the copilot. See
``docs/context-window-management.md``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from typing import Any, TypedDict

from langchain_core.messages import BaseMessage, SystemMessage, convert_to_messages

from .context.calibration import answer_tokens, capped_budget
from .context.counting import REPLY_PRIMING_TOKENS, TokenCounter
from .context.history import fit_history, repair
from .context.injection import TOPOLOGY_SHARE, TopologyText, fit_topology, inject
from .context.tokenizer import DEFAULT_ENCODING, encoding_name_for, get_encoding

logger = logging.getLogger(__name__)

CONTEXT_STRATEGY_RATIOS: dict[str, float] = {
    "conservative": 0.60,
    "balanced": 0.75,
    "aggressive": 0.85,
}
DEFAULT_CONTEXT_STRATEGY = "balanced"
# How far a provider's reported token counts may correct our estimate.
TOKEN_SCALE_BOUNDS = (0.75, 2.0)

__all__ = [
    "CONTEXT_STRATEGY_RATIOS",
    "DEFAULT_CONTEXT_STRATEGY",
    "ContextBudget",
    "ContextReport",
    "count_tokens",
    "create_pre_model_hook",
    "estimate_tool_tokens",
    "clamp_token_scale",
    "resolve_budget",
]


def count_tokens(text: str) -> int:
    """Exact tiktoken count of ``text`` in ``cl100k_base`` (as the seed specifies)."""
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


def clamp_token_scale(scale: Any) -> float:
    """A usable correction factor: 1.0 when unknown, else within the bounds."""
    if not isinstance(scale, (int, float)) or isinstance(scale, bool) or scale != scale or scale <= 0:
        return 1.0
    low, high = TOKEN_SCALE_BOUNDS
    return min(high, max(low, float(scale)))


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
    return ContextBudget(
        context_limit=limit,
        strategy=strategy,
        ratio=ratio,
        limit_tokens=limit * 1000,
        budget=int(limit * 1000 * ratio),
        encoding=encoding_name_for(config.get("model"), config.get("tokenizer")),
    )


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
    truncated: list[dict[str, Any]]
    interrupted_calls: int
    orphan_results: int
    over_budget: bool
    fallback: bool
    token_scale: float
    answer_tokens: int  # issue 15: reserved for the reply (max_tokens); the budget never eats into it


def _report(
    budget: ContextBudget,
    *,
    tools_tokens: int,
    system_message_tokens: int,
    topology: TopologyText,
    messages_tokens: int,
    messages_in: int,
    messages_out: int,
    **extra: Any,
) -> ContextReport:
    total = messages_tokens + tools_tokens
    report = ContextReport(
        strategy=budget["strategy"],
        context_limit=budget["context_limit"],
        limit_tokens=budget["limit_tokens"],
        budget=budget["budget"],
        message_budget=budget["budget"] - tools_tokens,
        encoding=budget["encoding"],
        system_tokens=system_message_tokens - topology.tokens,
        topology_tokens=topology.tokens,
        tools_tokens=tools_tokens,
        history_tokens=messages_tokens - system_message_tokens,
        total_tokens=total,
        percent=round(100.0 * total / budget["limit_tokens"], 1),
        messages_in=messages_in,
        messages_out=messages_out,
        messages_dropped=0,
        topology_available=topology.available,
        topology_level=topology.level,
        topology_reduced=topology.reduced,
        truncated=[],
        interrupted_calls=0,
        orphan_results=0,
        over_budget=False,
        fallback=False,
        token_scale=1.0,
        answer_tokens=0,
    )
    report.update(extra)  # type: ignore[typeddict-item]
    return report


def _originals_kept(originals: list[BaseMessage], kept: list[BaseMessage]) -> int:
    """How many of ``originals`` are in ``kept`` unchanged (by identity)."""
    ids = {id(m) for m in originals}
    return sum(1 for m in kept if id(m) in ids)


def create_pre_model_hook(
    system_prompt: str,
    get_topology_func: Callable[[Mapping[str, Any]], Any],
    get_llm_config_func: Callable[[], Mapping[str, Any] | None],
    get_tools_func: Callable[[], Iterable[Any] | None],
    *,
    counters: MutableMapping[str, TokenCounter] | None = None,
) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    """Build ``hook(state) -> {"messages": prepared, "context_report": report}``.

    The hook keeps per-encoding token counters whose caches make a call on a long
    conversation cost about its new messages: reuse the hook, or pass the same
    ``counters`` mapping to hooks built for different runs.

    ``state["token_scale"]`` (optional, default 1.0) is how many tokens the provider
    reported per token we estimated on an earlier call; the budget is divided by it
    (clamped to :data:`TOKEN_SCALE_BOUNDS`), so a model whose tokenizer differs from
    ours still gets a request that fits.
    """
    counters = {} if counters is None else counters

    def counter_for(encoding: str) -> TokenCounter:
        counter = counters.get(encoding)
        if counter is None:
            counter = counters[encoding] = TokenCounter(encoding)
        return counter

    def hook(state: Mapping[str, Any]) -> dict[str, Any]:
        llm_config = get_llm_config_func()
        budget = resolve_budget(llm_config)
        scale = clamp_token_scale(state.get("token_scale"))
        # issue 15: the reply's room (max_tokens) is never given to the prompt, whatever the scale.
        reserve = answer_tokens(llm_config or {})
        budget["budget"] = capped_budget(budget["budget"], scale, budget["limit_tokens"], reserve)
        counter = counter_for(budget["encoding"])
        tools_tokens = counter.tools(get_tools_func() or [])
        message_budget = budget["budget"] - tools_tokens
        if message_budget <= 0:
            logger.error(
                "Tool definitions (%d tokens) exceed the input budget (%d tokens): "
                "increase context_limit or reduce the number of tools",
                tools_tokens,
                budget["budget"],
            )

        topology = fit_topology(
            get_topology_func(state), max(0, int(message_budget * TOPOLOGY_SHARE)), counter
        )
        if topology.available:
            logger.info("✓ Topology injected: %d chars, nodes: %s", len(topology.text), topology.node_names)
        else:
            logger.warning("✗ Topology data is None, injecting placeholder")
        system = SystemMessage(content=inject(system_prompt, topology.text))
        system_tokens = counter.message(system)

        raw = state.get("messages") or []
        try:
            messages = convert_to_messages(raw)
            units, repaired = repair(messages)
            fitted = fit_history(units, message_budget - system_tokens - REPLY_PRIMING_TOKENS, counter)
        except Exception as exc:  # the seed's fallback: never block a call on trimming
            logger.error("Failed to trim messages: %s", exc)
            logger.warning("Returning original messages due to trimming error")
            fallback = [system, *raw]
            report = _report(
                budget,
                tools_tokens=tools_tokens,
                system_message_tokens=system_tokens,
                topology=topology,
                messages_tokens=system_tokens + REPLY_PRIMING_TOKENS,
                messages_in=len(raw),
                messages_out=len(raw),
                fallback=True,
                token_scale=scale,
                answer_tokens=reserve,
            )
            return {"messages": fallback, "context_report": report}

        prepared: list[BaseMessage] = [system, *fitted.messages]
        messages_tokens = system_tokens + fitted.tokens + REPLY_PRIMING_TOKENS
        report = _report(
            budget,
            tools_tokens=tools_tokens,
            system_message_tokens=system_tokens,
            topology=topology,
            messages_tokens=messages_tokens,
            messages_in=len(messages),
            messages_out=len(fitted.messages),
            messages_dropped=len(messages) - _originals_kept(messages, fitted.messages) - len(fitted.truncated),
            truncated=fitted.truncated,
            interrupted_calls=repaired.interrupted_calls,
            orphan_results=repaired.orphan_results,
            over_budget=fitted.over_budget,
            token_scale=scale,
            answer_tokens=reserve,
        )
        if report["over_budget"]:
            logger.error(
                "System message (%d tokens, topology included) and the latest user message exceed "
                "the message budget (%d tokens); sending them anyway",
                system_tokens,
                message_budget,
            )
        if repaired.interrupted_calls or repaired.orphan_results:
            logger.info(
                "History repaired: %d unanswered tool call(s) answered, %d orphan tool result(s) left out",
                repaired.interrupted_calls,
                repaired.orphan_results,
            )
        trimmed = report["messages_dropped"] or report["truncated"]
        summary = "~%d tokens + %d tools = %d / %dK (%.1f%%), strategy=%s"
        args = (
            messages_tokens,
            tools_tokens,
            report["total_tokens"],
            budget["context_limit"],
            report["percent"],
            budget["strategy"],
        )
        if trimmed:
            logger.info("Messages trimmed: %d → %d msgs. Total: " + summary, len(raw), len(prepared), *args)
        else:
            logger.info("Context ready: %d msgs, " + summary, len(prepared), *args)
        return {"messages": prepared, "context_report": report}

    return hook
