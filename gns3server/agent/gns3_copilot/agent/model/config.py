"""LLM configs: validated against the published schema, then parsed once into a profile.

An LLM config is a JSON object validated against ``llm_config.schema.json``
(``schema.py``; shown in ``docs/llm-config.md``), the one source of every field's
type and range. :func:`validate_llm_config` returns a normalised copy or raises
:class:`LLMConfigError`, a ``ValueError`` naming the field and the rule, which the
HTTP layer turns into a 422.

:func:`llm_profile` parses a config once into a frozen :class:`LLMProfile`: the
normalised config (a read-only mapping: the profile is used wherever a config is),
what the context manager reads of it (budget, history-window settings, the
reply's reserve, encoding: ``context_manager.ContextSettings``), the kind of
server it points at (``server/kind.py``) and the timeouts every call derives from
its ``timeout``. A request is validated once, where it comes in; the run, its model
bindings and every model call read the profile.

The API key never appears in a log line, an exception message or a repr: use
:func:`redact_config` before showing a config anywhere.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import jsonschema

from ...errors import CopilotError, ErrorKind
from ...utf8 import NOT_UTF8, first_unencodable
from ..context.calibration import max_tokens_problem
from ..context_manager import ContextSettings, context_settings
from ..server.kind import ServerKind, server_kind
from .schema import llm_config_schema

__all__ = [
    "DEFAULT_SUMMARY_TIMEOUT",
    "PROBE_TIMEOUT",
    "LLMConfigError",
    "LLMProfile",
    "Timeouts",
    "llm_config_schema",
    "llm_profile",
    "redact_config",
    "validate_llm_config",
]

PROBE_TIMEOUT = 120.0
"""The longest one probe of a model server may take (its tokenizer, the tools' cost, its template)."""
DEFAULT_SUMMARY_TIMEOUT = 30.0
"""The longest a summary call may take (seconds); it runs beside the conversation, never before it."""


class LLMConfigError(CopilotError, ValueError):
    """An LLM config that cannot be used; ``field`` and ``rule`` say which and why.

    ``rule`` is the JSON Schema keyword that failed (``type``, ``minimum``,
    ``required``, ``additionalProperties``, ...) or ``extra_missing`` /
    ``unusable`` for problems found while building the model. ``errors`` lists
    every problem found as ``(field, rule, message)`` for a 422 body. The message
    never contains a configured value.
    """

    def __init__(
        self,
        field: str | None,
        rule: str,
        message: str,
        errors: Sequence[tuple[str | None, str, str]] = (),
    ) -> None:
        self.field = field
        self.rule = rule
        self.errors: list[tuple[str | None, str, str]] = list(errors) or [(field, rule, message)]
        super().__init__(f"{field}: {message}" if field else message)

    code = "llm_config_invalid"
    kind = ErrorKind.INVALID

    def details(self) -> dict[str, Any]:
        errors = [{"field": f, "rule": r, "message": m} for f, r, m in self.errors]
        return {"field": self.field, "rule": self.rule, "errors": errors}



def _is_strict_integer(checker: Any, instance: Any) -> bool:
    # JSON Schema counts 8.0 as an integer; the context manager does not, so neither do we.
    return isinstance(instance, int) and not isinstance(instance, bool)


def _is_finite_number(checker: Any, instance: Any) -> bool:
    # NaN passes every minimum/maximum test (all comparisons are false), so it would be
    # accepted as a temperature and fail every chat later: a number must be finite.
    return isinstance(instance, (int, float)) and not isinstance(instance, bool) and math.isfinite(instance)


@functools.cache
def _validator() -> jsonschema.protocols.Validator:
    schema = llm_config_schema()
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    types = cls.TYPE_CHECKER.redefine_many({"integer": _is_strict_integer, "number": _is_finite_number})
    strict = jsonschema.validators.extend(cls, type_checker=types)
    return strict(schema)


URL_CREDENTIALS = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/?#]*@")
"""A URL with ``user:password@`` (group 1: the scheme and ``://``)."""
CREDENTIALS_IN_URL = (
    "must not carry credentials (user:password@host): put the key in api_key, which is stored encrypted"
)


def _semantic_problems(config: Any) -> list[tuple[str | None, str, str]]:
    """Rules a JSON Schema cannot say with a clear message."""
    if not isinstance(config, Mapping):
        return []
    problems: list[tuple[str | None, str, str]] = []
    base_url = config.get("base_url")
    if isinstance(base_url, str) and URL_CREDENTIALS.match(base_url):
        problems.append(("base_url", "credentials", CREDENTIALS_IN_URL))
    # The reply's room comes out of the window: one that leaves the prompt no room
    # would make every request overflow it.
    window = max_tokens_problem(config.get("context_limit"), config.get("max_tokens"))
    if window is not None:
        problems.append(("max_tokens", "window", window))
    return problems


def _short(name: object) -> str:
    text = str(name)
    return text if len(text) <= 40 else text[:37] + "..."


def _describe(error: jsonschema.ValidationError, schema: Mapping[str, Any]) -> list[tuple[str | None, str, str]]:
    """Turn one jsonschema error into ``(field, rule, message)`` items without quoting values."""
    properties: Mapping[str, Any] = schema["properties"]
    if not error.path:
        instance = error.instance if isinstance(error.instance, Mapping) else {}
        if error.validator == "required" and isinstance(error.validator_value, list):
            return [(name, "required", "is required") for name in error.validator_value if name not in instance]
        if error.validator == "additionalProperties":
            allowed = ", ".join(properties)
            return [
                (_short(name), "additionalProperties", f"unknown field (allowed: {allowed})")
                for name in instance
                if name not in properties
            ]
        return [(None, str(error.validator), "LLM config: must be a JSON object")]
    field = str(error.path[0])
    message = properties.get(field, {}).get("x-message") or f"fails the {error.validator!r} rule"
    return [(field, str(error.validator), message)]


def validate_llm_config(config: Any) -> dict[str, Any]:
    """Check ``config`` against the schema; return a normalised copy with defaults filled in.

    Raises :class:`LLMConfigError` naming the first bad field (all problems in ``.errors``).
    """
    if isinstance(config, Mapping) and not isinstance(config, dict):
        config = dict(config)
    # First: such a string cannot be stored, nor quoted in any answer (a key in an error message).
    unencodable = first_unencodable(config) if isinstance(config, Mapping) else None
    if unencodable is not None:
        raise LLMConfigError(_short(unencodable.split(".", 1)[0].split("[", 1)[0]), "encoding", NOT_UTF8)
    validator = _validator()
    schema = validator.schema
    assert isinstance(schema, Mapping)  # our schema file is an object, never a boolean schema
    order = list(schema["properties"])
    problems: list[tuple[str | None, str, str]] = []
    for error in validator.iter_errors(config):
        for problem in _describe(error, schema):
            if all(problem[0] != seen[0] for seen in problems):  # one problem per field
                problems.append(problem)
    problems += [p for p in _semantic_problems(config) if all(p[0] != seen[0] for seen in problems)]
    if problems:
        problems.sort(key=lambda p: (p[0] is not None, order.index(p[0]) if p[0] in order else len(order)))
        field, rule, message = problems[0]
        raise LLMConfigError(field, rule, message, problems)

    normalised: dict[str, Any] = {}
    for name, prop in schema["properties"].items():
        if name in config:
            normalised[name] = config[name]
        elif "default" in prop:
            normalised[name] = prop["default"]
    try:
        context_settings(normalised)
    except ValueError as exc:  # the schema and the context manager disagree: a bug, say where
        raise LLMConfigError("context_limit", "budget", "is not accepted by the context manager") from exc
    return normalised


# ------------------------------------------------------------------- redaction


def _mask_key(key: Any) -> str:
    if not isinstance(key, str) or len(key) < 12:
        return "…"
    return f"{key[:3]}…{key[-4:]}"


def redact_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """Copy of ``config`` safe to log or return: the key masked (``sk-…abcd``), URL credentials hidden."""
    safe = dict(config)
    if "api_key" in safe and safe["api_key"] is not None:
        safe["api_key"] = _mask_key(safe["api_key"])
    if isinstance(safe.get("base_url"), str):
        safe["base_url"] = URL_CREDENTIALS.sub(r"\1***@", safe["base_url"])
    return safe


@dataclass(frozen=True)
class Timeouts:
    """The timeouts of a config's calls, all from its ``timeout`` (the schema's default when unset)."""

    request: float
    """Each model request, including while a reply streams."""
    probe: float
    """Each probe of the model server: at most :data:`PROBE_TIMEOUT`."""
    summary: float
    """Each background summary call: at most :data:`DEFAULT_SUMMARY_TIMEOUT`."""

    @classmethod
    def of(cls, timeout: float) -> Timeouts:
        return cls(timeout, min(timeout, PROBE_TIMEOUT), min(timeout, DEFAULT_SUMMARY_TIMEOUT))


@dataclass(frozen=True, eq=False)
class LLMProfile(Mapping[str, Any]):
    """An LLM config parsed once: the normalised config (as a read-only mapping) and what follows from it."""

    config: Mapping[str, Any] = field(repr=False)  # the key is in it: never in a repr
    context: ContextSettings = field(repr=False)
    server: ServerKind
    timeouts: Timeouts

    def __getitem__(self, key: str) -> Any:
        return self.config[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.config)

    def __len__(self) -> int:
        return len(self.config)

    def __eq__(self, other: object) -> bool:
        return self.config == (other.config if isinstance(other, LLMProfile) else other)

    __hash__ = None  # type: ignore[assignment]  # a mapping, compared by content

    @property
    def provider(self) -> str:
        return str(self.config["provider"])

    @property
    def model(self) -> str:
        return str(self.config["model"])

    @property
    def limit_tokens(self) -> int:
        return self.context.budget["limit_tokens"]

    @property
    def encoding(self) -> str:
        return self.context.budget["encoding"]


def llm_profile(llm_config: Mapping[str, Any]) -> LLMProfile:
    """``llm_config`` validated and parsed (a profile is returned as it is: it was parsed already).

    Raises :class:`LLMConfigError` naming the first bad field.
    """
    if isinstance(llm_config, LLMProfile):
        return llm_config
    config = validate_llm_config(llm_config)
    return LLMProfile(MappingProxyType(config), context_settings(config), server_kind(config),
                      Timeouts.of(float(config["timeout"])))
