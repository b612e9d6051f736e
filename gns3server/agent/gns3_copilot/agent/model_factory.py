"""LLM configs and chat models for GNS3 Copilot.

An LLM config is a JSON object validated against the published schema
``llm_config.schema.json`` (next to this module, shown in ``docs/llm-config.md``).
:func:`validate_llm_config` returns a normalised copy or raises
:class:`LLMConfigError`, a ``ValueError`` naming the field and the rule, which the
HTTP layer turns into a 422. :func:`create_chat_model` builds the chat model with
LangChain's provider packages (``init_chat_model``): OpenAI and every
OpenAI-compatible server (Ollama ``/v1``, vLLM, LM Studio, DeepSeek) through
``langchain-openai``; Anthropic, Google and native Ollama through optional extras.

The API key never appears in a log line, an exception message or a repr: use
:func:`redact_config` before showing a config anywhere.
"""

from __future__ import annotations

import functools
import importlib
import json
import logging
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType
from typing import Any

import jsonschema
from langchain_core.exceptions import ContextOverflowError
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable

from ..errors import CopilotError, ErrorKind
from .context.calibration import answer_tokens, max_tokens_problem
from .context_manager import resolve_budget

log = logging.getLogger(__name__)

__all__ = [
    "LLMConfigError",
    "create_base_model_with_tools",
    "create_chat_model",
    "is_context_length_error",
    "llm_config_schema",
    "redact_config",
    "validate_llm_config",
]

SCHEMA_RESOURCE = "llm_config.schema.json"

# Sent as the key to OpenAI-compatible servers configured without one (Ollama, LM
# Studio, vLLM accept anything). Without it ChatOpenAI would fall back to the
# OPENAI_API_KEY environment variable and send the operator's OpenAI key to a
# third-party base_url.
NO_API_KEY_PLACEHOLDER = "not-needed"


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


@dataclass(frozen=True)
class _ProviderSpec:
    module: str
    extra: str | None
    package: str


_PROVIDERS: Mapping[str, _ProviderSpec] = MappingProxyType(
    {
        "openai": _ProviderSpec("langchain_openai", None, "langchain-openai"),
        "anthropic": _ProviderSpec("langchain_anthropic", "anthropic", "langchain-anthropic"),
        "google_genai": _ProviderSpec("langchain_google_genai", "google", "langchain-google-genai"),
        "ollama": _ProviderSpec("langchain_ollama", "ollama", "langchain-ollama"),
    }
)


# --------------------------------------------------------------------- schema


@functools.cache
def _schema_text() -> str:
    return resources.files(__package__).joinpath(SCHEMA_RESOURCE).read_text(encoding="utf-8")


def llm_config_schema() -> dict[str, Any]:
    """The published JSON Schema (a fresh copy, so callers may embed or modify it)."""
    return json.loads(_schema_text())


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
    # The reply's room comes out of the window (issue 15): one that leaves the prompt no room
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
        resolve_budget(normalised)
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


# ---------------------------------------------------------------- chat models


def _require_provider_package(provider: str) -> None:
    """Import the provider's package up front so a missing extra gets our message, not LangChain's."""
    spec = _PROVIDERS[provider]
    try:
        importlib.import_module(spec.module)
    except ImportError as exc:
        if spec.extra:
            hint = f"pip install 'gns3server-copilot[{spec.extra}]' (or pip install {spec.package})"
        else:
            hint = f"pip install {spec.package}"
        raise LLMConfigError(
            "provider",
            "extra_missing",
            f"{provider!r} needs the package {spec.package}, which is not installed; install it with: {hint}",
        ) from exc


def _provider_kwargs(config: Mapping[str, Any], *, stream: bool = True) -> dict[str, Any]:
    """Map our config onto the keyword arguments of the provider's chat model class.

    The reply limit is always sent (the config's ``max_tokens`` or a default scaled to
    the window): a server left to generate until its window is full overflows it.
    """
    provider = config["provider"]
    kwargs: dict[str, Any] = {}
    if "temperature" in config:
        kwargs["temperature"] = config["temperature"]
    if not stream:
        kwargs["disable_streaming"] = True
    if provider == "ollama":
        # ChatOllama: no retries, output limit is num_predict, HTTP options go to httpx.
        if "base_url" in config:
            kwargs["base_url"] = config["base_url"]
        kwargs["num_predict"] = answer_tokens(config)
        client_kwargs: dict[str, Any] = {"timeout": config["timeout"]}
        if "api_key" in config:  # an Ollama behind an authenticating proxy
            client_kwargs["headers"] = {"Authorization": f"Bearer {config['api_key']}"}
        kwargs["client_kwargs"] = client_kwargs
        return kwargs

    kwargs.update(timeout=config["timeout"], max_retries=config["max_retries"], streaming=stream)
    kwargs["max_tokens"] = answer_tokens(config)
    if "base_url" in config:
        kwargs["base_url"] = config["base_url"]
    if "api_key" in config:
        kwargs["api_key"] = config["api_key"]
    elif provider == "openai" and "base_url" in config:
        kwargs["api_key"] = NO_API_KEY_PLACEHOLDER
    if provider == "openai":
        # Off by default for custom base URLs; we want usage to correct the token estimates.
        kwargs["stream_usage"] = True
    return kwargs


@functools.cache
def _no_redirect_clients() -> tuple[Any, Any]:
    """HTTP clients (sync, async) for OpenAI-protocol models that never follow a redirect.

    The endpoint policy (``api/endpoints.py``) judged ``base_url``; the OpenAI SDK follows
    3xx answers by default, so a public server answering 307 could send the request (and
    the key) to an address the policy refuses. The SDK sets each request's timeout itself.
    """
    import httpx  # the SDK's own HTTP library, already loaded with it

    return httpx.Client(follow_redirects=False), httpx.AsyncClient(follow_redirects=False)


def create_chat_model(llm_config: Mapping[str, Any], *, stream: bool = True) -> BaseChatModel:
    """Validate ``llm_config`` and build its chat model with ``init_chat_model``.

    Streaming unless ``stream`` is False (for servers that cannot stream tool calls).
    An OpenAI-compatible server (provider ``openai`` with a ``base_url``) gets
    :class:`~.openai_compat.CompatibleChatOpenAI`, which never sends ``content: null``;
    OpenAI itself :class:`~.openai_payload.LeanChatOpenAI`: both send their messages past
    the SDK's per-message request transform.
    """
    from langchain.chat_models import init_chat_model  # heavy; only when a model is built

    config = validate_llm_config(llm_config)
    provider = config["provider"]
    _require_provider_package(provider)
    log.debug("Creating chat model: %s", redact_config(config))
    try:
        kwargs = _provider_kwargs(config, stream=stream)
        if provider == "openai":
            kwargs["http_client"], kwargs["http_async_client"] = _no_redirect_clients()
        if provider == "openai" and "base_url" in config:
            from .openai_compat import CompatibleChatOpenAI  # imports langchain_openai

            # langchain-openai ends a stream silent for 120 s whatever the timeout; a local server
            # on a CPU can take longer than that to read a long prompt before its first token.
            if "stream_chunk_timeout" in CompatibleChatOpenAI.model_fields:
                kwargs["stream_chunk_timeout"] = config["timeout"]
            return CompatibleChatOpenAI(model=config["model"], **kwargs)
        if provider == "openai":
            from .openai_payload import LeanChatOpenAI  # imports langchain_openai

            return LeanChatOpenAI(model=config["model"], **kwargs)
        return init_chat_model(config["model"], model_provider=provider, **kwargs)
    except Exception as exc:  # any constructor failure is a config problem
        # The provider's message may quote configured values (the key among them): keep it out.
        if provider == "openai" and "api_key" not in config and "api_key" in str(exc).lower():
            raise LLMConfigError(
                "api_key",
                "required",
                "is required for provider 'openai' without base_url (or set OPENAI_API_KEY)",
            ) from exc
        log.warning("Could not create the %s chat model (%s)", provider, type(exc).__name__)
        raise LLMConfigError(
            "provider", "unusable", f"could not create the {provider!r} chat model ({type(exc).__name__})"
        ) from exc


def create_base_model_with_tools(
    tools: Sequence[Any], llm_config: Mapping[str, Any], *, stream: bool = True
) -> Runnable[LanguageModelInput, BaseMessage]:
    """The seed's entry point: the configured chat model with ``tools`` bound (none: the bare model).

    OpenAI-compatible models get ``tool_choice: "auto"``: OpenAI assumes it, but
    llama.cpp's function-calling formats leave the tools out of the prompt without it.
    """
    model = create_chat_model(llm_config, stream=stream)
    tools = list(tools)
    if not tools:  # OpenAI rejects an empty "tools" array
        return model
    if validate_llm_config(llm_config)["provider"] == "openai":
        return model.bind_tools(tools, tool_choice="auto")
    return model.bind_tools(tools)


# ------------------------------------------------------------------ errors


_CONTEXT_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error", "string_above_max_length"})
_CONTEXT_PHRASES = re.compile(
    r"maximum context length"
    r"|context[_ ]length[_ ]exceeded"
    r"|prompt is too long"
    r"|exceeds? the (?:available )?context (?:size|window)"
    r"|exceeds the maximum number of tokens allowed"
    r"|input tokens exceed the configured limit",
    re.IGNORECASE,
)


def _error_code(exc: BaseException) -> str | None:
    code = getattr(exc, "code", None)
    if isinstance(code, str):
        return code
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping) and isinstance(inner.get("code"), str):
            return inner["code"]
    return None


def is_context_length_error(exc: BaseException) -> bool:
    """Whether ``exc`` (or an error it wraps) is a provider refusing a prompt for its length.

    The graph uses this to re-prepare the history with a tighter budget and retry once.
    Rate limits (HTTP 429) never count, even when their text mentions tokens.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if getattr(current, "status_code", None) == 429:
            return False
        if isinstance(current, ContextOverflowError) or _error_code(current) in _CONTEXT_CODES:
            return True
        if _CONTEXT_PHRASES.search(str(current)):
            return True
        current = current.__cause__ or current.__context__
    return False
