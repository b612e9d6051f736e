"""Show command output as compact rows for the model: the CLI's own JSON, or TextFSM with ntc-templates.

``structured.toml`` (measured by ``bench/structured_output.py``) records per family which
form each show command is best handed over in: ``json`` (the family's JSON modifier, e.g.
EOS ``| json``), ``textfsm`` (the raw text parsed by ntc-templates' template for that
command) or ``raw``. :func:`choose` is the rule the bench applies to its measurements.
Parsing is CPU work and ntc-templates reads its index from disk: call :func:`text_rows`
in a worker thread.
"""

from __future__ import annotations

import json
import logging
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal

from ..errors import CopilotError, ErrorKind

log = logging.getLogger(__name__)

STRUCTURED_FILE = "structured.toml"
Form = Literal["json", "textfsm", "raw"]
# JSON is what the device itself says: kept over TextFSM rows unless it costs this much more.
JSON_ALLOWANCE = 1.25
# A structured form must save at least this share of the raw output's tokens to be worth it.
MIN_SAVING = 0.10


class StructuredOutputError(CopilotError, ValueError):
    """No parser for the command, or output its template cannot read."""

    code = "structured_output_unavailable"
    kind = ErrorKind.INVALID


@dataclass(frozen=True)
class Choice:
    family: str
    command: str
    use: Form
    # Tokens per item (interface, route, neighbour) of each form, as measured.
    tokens: Mapping[str, float]


@dataclass(frozen=True)
class FamilyForms:
    family: str
    json_suffix: str
    textfsm_platform: str
    commands: Mapping[str, Choice]  # by the command's normalised text

    def choice(self, command: str) -> Choice | None:
        return self.commands.get(normalise(command))


def normalise(command: str) -> str:
    return " ".join(command.casefold().split())


def load_forms() -> dict[str, FamilyForms]:
    """The recorded choices, per family (blocking: a packaged file)."""
    data = tomllib.loads(resources.files(__package__).joinpath(STRUCTURED_FILE).read_text("utf-8"))
    forms = {}
    for family, body in data.items():
        commands = {
            normalise(c["command"]): Choice(family, c["command"], c["use"], dict(c.get("tokens", {})))
            for c in body.get("command", [])
        }
        forms[family] = FamilyForms(family, body.get("json_suffix", ""), body.get("textfsm_platform", ""), commands)
    return forms


def text_rows(platform: str, command: str, output: str) -> list[dict[str, Any]]:
    """``output`` parsed by ntc-templates' template for ``command`` on ``platform`` (blocking)."""
    # Imported here: ntc-templates reads its index when parsing, not when the copilot starts.
    from ntc_templates.parse import parse_output

    try:
        rows: list[dict[str, Any]] = parse_output(platform=platform, command=command, data=output)
    except Exception as exc:  # ntc-templates raises its own and TextFSM's errors alike
        raise StructuredOutputError(f"command: no TextFSM template reads {command!r} on {platform} ({exc})") from exc
    return rows


def rows_table(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Rows as one header and value lists: the shape the model reads (and the bench counts)."""
    columns = list(dict.fromkeys(key for row in rows for key in row))
    return {"columns": columns, "rows": [[row.get(c, "") for c in columns] for row in rows]}


def compact_rows(rows: Sequence[Mapping[str, Any]]) -> str:
    """:func:`rows_table` as compact JSON text."""
    return json.dumps(rows_table(rows), separators=(",", ":"), ensure_ascii=False)


def compact_json(text: str) -> str:
    """A CLI's JSON output without its indentation."""
    return json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False)


def tokens_per_item(
    count: Callable[[str], int],
    raw: str,
    rows: Sequence[Mapping[str, Any]] | None,
    json_text: str | None = None,
    json_items: int = 1,
) -> dict[str, float]:
    """Tokens per item (``count`` is the tokenizer) of the raw text, its TextFSM rows and the JSON.

    Per item, because the JSON captures may come from another device than the text: an
    interface costs what it costs whichever device listed it.
    """
    items = max(len(rows), 1) if rows else 1
    found = {"raw": count(raw) / items}
    if rows:
        found["textfsm"] = count(compact_rows(rows)) / items
    if json_text is not None:
        found["json"] = count(compact_json(json_text)) / max(json_items, 1)
    return {form: round(cost, 1) for form, cost in found.items()}


def choose(tokens: Mapping[str, float]) -> Form:
    """The form to hand over, from each available form's tokens per item ("raw" always there):
    a structured form that saves at least MIN_SAVING of the raw tokens; the device's JSON over
    TextFSM rows unless it costs more than JSON_ALLOWANCE times as much."""
    worth = {form: cost for form, cost in tokens.items()
             if form in ("json", "textfsm") and cost <= tokens["raw"] * (1 - MIN_SAVING)}
    if "json" in worth and ("textfsm" not in worth or worth["json"] <= worth["textfsm"] * JSON_ALLOWANCE):
        return "json"
    if "textfsm" in worth:
        return "textfsm"
    return "raw"
