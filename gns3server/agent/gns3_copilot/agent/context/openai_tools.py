"""Tool definitions as OpenAI's models read them, for counting.

OpenAI does not send a tool's JSON schema to the model: it renders the tools as
TypeScript-like declarations appended to the system message, roughly::

    namespace functions {

    // Get the current weather in a given location
    type get_current_weather = (_: {
    // The city and state, e.g. San Francisco, CA
    location: string,
    // The unit of temperature to return
    unit?: "celsius" | "fahrenheit",
    }) => any;

    } // namespace functions

Counting that text (plus :data:`OPENAI_TOOLS_FRAMING`) is within a few tokens of
what the API reports for the cookbook's example, where the JSON schema counts
1.5-1.7x too much. Only the token count matters here: nothing is sent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

# The tool block's own framing (9 tokens) less what it shares with the system
# message it is appended to (the request always has one): measured on the
# cookbook's example, 105 (cl100k) and 101 (o200k) prompt tokens.
OPENAI_TOOLS_FRAMING = 5

_SCALARS = {"string": "string", "number": "number", "integer": "number", "boolean": "boolean", "null": "null"}


def _comment(text: Any, indent: str) -> list[str]:
    if not isinstance(text, str) or not text.strip():
        return []
    return [f"{indent}// {line}" for line in text.strip().splitlines()]


def _literal(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _type(schema: Any, indent: str) -> str:
    """The TypeScript-like type of a JSON schema fragment."""
    if not isinstance(schema, Mapping):
        return "any"
    if "enum" in schema and isinstance(schema["enum"], Sequence) and not isinstance(schema["enum"], str):
        return " | ".join(_literal(v) for v in schema["enum"]) or "any"
    if "const" in schema:
        return _literal(schema["const"])
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, Sequence) and options:
            return " | ".join(_type(option, indent) for option in options)
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(_type({**schema, "type": k}, indent) for k in kind) or "any"
    if kind == "array":
        return f"{_type(schema.get('items'), indent)}[]"
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties")
        if not isinstance(properties, Mapping) or not properties:
            return "object"
        return "{\n" + "\n".join(_properties(schema, indent + "  ")) + f"\n{indent}}}"
    return _SCALARS.get(kind, "any") if isinstance(kind, str) else "any"


def _properties(schema: Mapping[str, Any], indent: str) -> list[str]:
    required = set(schema.get("required") or [])
    lines: list[str] = []
    for name, prop in (schema.get("properties") or {}).items():
        lines.extend(_comment(prop.get("description") if isinstance(prop, Mapping) else None, indent))
        optional = "" if name in required else "?"
        lines.append(f"{indent}{name}{optional}: {_type(prop, indent)},")
    return lines


def _function(function: Mapping[str, Any]) -> list[str]:
    lines = _comment(function.get("description"), "")
    name = function.get("name", "")
    parameters = function.get("parameters")
    if isinstance(parameters, Mapping) and parameters.get("properties"):
        lines.append(f"type {name} = (_: {{")
        lines.extend(_properties(parameters, ""))
        lines.append("}) => any;")
    else:
        lines.append(f"type {name} = () => any;")
    return lines


def render_functions(tools: Sequence[Mapping[str, Any]]) -> str:
    """Render OpenAI-format tools (``{"type": "function", "function": {...}}``) as OpenAI does."""
    blocks = ["\n".join(_function(t.get("function") or {})) for t in tools]
    return "namespace functions {\n\n" + "\n\n".join(blocks) + "\n\n} // namespace functions"
