"""Chat models for GNS3 Copilot, built from an LLM config's profile.

:func:`create_chat_model` builds the chat model with LangChain's provider
packages (``init_chat_model``): OpenAI and every OpenAI-compatible server
(Ollama ``/v1``, vLLM, LM Studio, DeepSeek) through ``langchain-openai``;
Anthropic, Google and native Ollama through optional extras. It takes a config
or its parsed profile (``config.py``); a profile is not validated again.

The API key never appears in a log line, an exception message or a repr
(``config.redact_config``).
"""

from __future__ import annotations

import functools
import importlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable

from ..tls import verified_context
from .config import LLMConfigError, LLMProfile, llm_profile, redact_config

log = logging.getLogger(__name__)

__all__ = ["create_base_model_with_tools", "create_chat_model"]

# Sent as the key to OpenAI-compatible servers configured without one (Ollama, LM
# Studio, vLLM accept anything). Without it ChatOpenAI would fall back to the
# OPENAI_API_KEY environment variable and send the operator's OpenAI key to a
# third-party base_url.
NO_API_KEY_PLACEHOLDER = "not-needed"


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


# ---------------------------------------------------------------- chat models

_OPENAI_STACK = (f"{__package__}.openai_compat", "openai.resources.chat.chat", "httpx", "httpcore")
"""What building the first OpenAI-protocol model imports (``openai_compat`` imports langchain-openai)."""


def preload_openai() -> bool:
    """Import the OpenAI-protocol model stack now; whether it could be. Blocking, ~0.7 s of CPU:
    call it in a worker thread.

    The first model a server builds imported it: ``langchain-openai``, the SDK and the copilot's
    model classes, and what the SDK and httpx import only when first used (the SDK's chat
    resources; httpcore, which imports trio where it is installed); then the HTTP clients every
    such model shares (their TLS contexts load the CA bundle: ~60 ms). Without this, the first
    question after a restart, and every one that came meanwhile, waited for it all.
    """
    try:
        for module in _OPENAI_STACK:
            importlib.import_module(module)
    except ImportError:
        return False
    _no_redirect_clients()
    return True



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


def _provider_kwargs(profile: LLMProfile, *, stream: bool = True) -> dict[str, Any]:
    """Map our config onto the keyword arguments of the provider's chat model class.

    The reply limit is always sent (the config's ``max_tokens`` or a default scaled to
    the window): a server left to generate until its window is full overflows it.
    """
    config, provider = profile, profile.provider
    kwargs: dict[str, Any] = {}
    if "temperature" in config:
        kwargs["temperature"] = config["temperature"]
    if not stream:
        kwargs["disable_streaming"] = True
    if provider == "ollama":
        # ChatOllama: no retries, output limit is num_predict, HTTP options go to httpx.
        if "base_url" in config:
            kwargs["base_url"] = config["base_url"]
        kwargs["num_predict"] = profile.context.answer_tokens
        client_kwargs: dict[str, Any] = {"timeout": profile.timeouts.request}
        if "api_key" in config:  # an Ollama behind an authenticating proxy
            client_kwargs["headers"] = {"Authorization": f"Bearer {config['api_key']}"}
        kwargs["client_kwargs"] = client_kwargs
        return kwargs

    kwargs.update(timeout=profile.timeouts.request, max_retries=config["max_retries"], streaming=stream)
    kwargs["max_tokens"] = profile.context.answer_tokens
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
    import httpx  # loaded at start-up (preload_openai)

    tls = verified_context()  # one for every client (made at start-up too)
    return httpx.Client(follow_redirects=False, verify=tls), httpx.AsyncClient(follow_redirects=False, verify=tls)


def create_chat_model(llm_config: Mapping[str, Any], *, stream: bool = True) -> BaseChatModel:
    """Build the chat model of ``llm_config`` (a config is validated first) with ``init_chat_model``.

    Streaming unless ``stream`` is False (for servers that cannot stream tool calls).
    An OpenAI-compatible server (provider ``openai`` with a ``base_url``) gets
    :class:`~.openai_compat.CompatibleChatOpenAI`, which never sends ``content: null``;
    OpenAI itself :class:`~.openai_payload.LeanChatOpenAI`: both send their messages past
    the SDK's per-message request transform.
    """
    from langchain.chat_models import init_chat_model  # heavy; only when a model is built

    config = llm_profile(llm_config)
    provider = config.provider
    _require_provider_package(provider)
    log.debug("Creating chat model: %s", redact_config(config))
    try:
        kwargs = _provider_kwargs(config, stream=stream)
        if provider == "openai":
            kwargs["http_client"], kwargs["http_async_client"] = _no_redirect_clients()
        if config.server.compatible:
            from .openai_compat import CompatibleChatOpenAI  # imports langchain_openai

            # langchain-openai ends a stream silent for 120 s whatever the timeout; a local server
            # on a CPU can take longer than that to read a long prompt before its first token.
            if "stream_chunk_timeout" in CompatibleChatOpenAI.model_fields:
                kwargs["stream_chunk_timeout"] = config.timeouts.request
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
    """The design document's entry point: the configured chat model with ``tools`` bound (none: the bare model).

    OpenAI-compatible models get ``tool_choice: "auto"``: OpenAI assumes it, but
    llama.cpp's function-calling formats leave the tools out of the prompt without it.
    """
    profile = llm_profile(llm_config)
    model = create_chat_model(profile, stream=stream)
    tools = list(tools)
    if not tools:  # OpenAI rejects an empty "tools" array
        return model
    if profile.provider == "openai":
        return model.bind_tools(tools, tool_choice="auto")
    return model.bind_tools(tools)
