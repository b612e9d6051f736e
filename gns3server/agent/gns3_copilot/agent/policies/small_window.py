"""Small context windows: what the model is offered shrinks before the conversation does.

At a 2K window the seven tools' full definitions (about 1,260 tokens) and the
system prompt (about 190) took nearly all of the 1,500-token input budget: every
request carried the question alone. :func:`fit_to_window` chooses, once per run,
the richest offer whose fixed part (tool definitions + system prompt, topology
excluded) stays within :data:`FIXED_SHARE` of the input budget:

- level 0, ``full``: the tools as written, the full prompt;
- level 1, ``compact``: each tool's first sentence, parameters without their
  descriptions, titles or null alternatives, and a short prompt;
- level 2, ``essential``: the compact offer reduced to the tools a small lab
  conversation needs most (:data:`ESSENTIAL_TOOLS`).

The compact definitions are OpenAI tool dicts bound to the model and counted by
the context hook; the tools node still runs the real tools (and enforces the
mode), so a call to a tool left out of the offer works as before.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from ..context.calibration import capped_budget
from ..context.counting import TokenCounter
from ..context_manager import ContextSettings, context_settings

__all__ = ["ESSENTIAL_TOOLS", "FIXED_SHARE", "LEVELS", "WindowFit", "compact_tool", "fit_to_window"]

LEVELS = ("full", "compact", "essential")
# The most of the input budget that tool definitions and the system prompt may take.
FIXED_SHARE = 0.5
# Read the lab, read devices, start/stop nodes: what a 2K conversation is mostly about.
ESSENTIAL_TOOLS = ("gns3_topology", "gns3_show_commands", "gns3_node_action")
# Documentation and validation limits: the tool checks its arguments anyway.
_DROPPED_KEYS = frozenset(
    {"description", "title", "default", "examples", "maxItems", "minItems", "maxLength", "minLength"}
)
_SENTENCE = re.compile(r"^(.+?[.!?])(\s|$)", re.DOTALL)
MAX_COMPACT_DESCRIPTION = 160


@dataclass(frozen=True)
class WindowFit:
    """What one run offers the model: the prompt, and the tool definitions (objects or dicts)."""

    level: str
    system_prompt: str
    tools: list[Any]
    fixed_tokens: int
    budget: int


def _first_sentence(text: str) -> str:
    text = " ".join(text.split())
    match = _SENTENCE.match(text)
    sentence = match.group(1) if match else text
    return sentence if len(sentence) <= MAX_COMPACT_DESCRIPTION else sentence[: MAX_COMPACT_DESCRIPTION - 3] + "..."


def _compact_schema(schema: Any) -> Any:
    """The JSON schema without descriptions, titles, defaults, and ``anyOf [X, null]`` reduced to X."""
    if isinstance(schema, list):
        return [_compact_schema(item) for item in schema]
    if not isinstance(schema, Mapping):
        return schema
    any_of = schema.get("anyOf")
    if isinstance(any_of, list):
        kept = [option for option in any_of if not (isinstance(option, Mapping) and option.get("type") == "null")]
        if len(kept) == 1:
            merged = {k: v for k, v in schema.items() if k != "anyOf"}
            merged.update(kept[0])
            return _compact_schema(merged)
    compact: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "properties" and isinstance(value, Mapping):
            compact[key] = {name: _compact_schema(prop) for name, prop in value.items()}
        elif key not in _DROPPED_KEYS:
            compact[key] = _compact_schema(value)
    return compact


def compact_tool(tool: Any) -> dict[str, Any]:
    """The tool as an OpenAI tool dict with a one-sentence description and a bare schema."""
    spec = convert_to_openai_tool(tool)
    function = dict(spec["function"])
    function["description"] = _first_sentence(str(function.get("description") or ""))
    function["parameters"] = _compact_schema(function.get("parameters") or {"type": "object", "properties": {}})
    return {"type": "function", "function": function}


def fit_to_window(
    tools: Sequence[BaseTool],
    system_prompt: str,
    compact_prompt: str,
    llm_config: Mapping[str, Any] | ContextSettings,
    counter: TokenCounter,
) -> WindowFit:
    """The richest offer whose tools and prompt fit :data:`FIXED_SHARE` of the input budget.

    ``llm_config``: the config, or what the context manager parsed of it. When even the
    essential offer is bigger, it is used anyway (the context hook then reports the
    request over budget rather than sending nothing useful).
    """
    settings = llm_config if isinstance(llm_config, ContextSettings) else context_settings(llm_config)
    budget = settings.budget
    # Scale 1: the offer is chosen once per run, before any provider count is known.
    available = capped_budget(budget["budget"], 1.0, budget["limit_tokens"], settings.answer_tokens)
    ceiling = int(available * FIXED_SHARE)
    compact = [compact_tool(t) for t in tools]
    essential = [spec for spec in compact if spec["function"]["name"] in ESSENTIAL_TOOLS]
    offers = (("full", system_prompt, list(tools)), ("compact", compact_prompt, compact), ("essential", compact_prompt, essential))
    fit = None
    for level, prompt, offered in offers:
        fixed = counter.tools(offered) + counter.text(prompt)
        fit = WindowFit(level, prompt, offered, fixed, available)
        if fixed <= ceiling:
            return fit
    assert fit is not None
    return fit
