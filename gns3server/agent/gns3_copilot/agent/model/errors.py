"""What a model server or provider did wrong, named, so the user is not told "failed unexpectedly".

The LLM branch of the error tree (``errors.py``)::

    LLMError                    llm_error          the provider answered 4xx (not 401/429)
    ├── LLMAuthError            llm_auth           401: the API key was refused
    ├── LLMRateLimitedError     llm_rate_limited   429 (retryable)
    ├── LLMTimeoutError         llm_timeout        no answer in time (retryable)
    ├── LLMUnreachableError     llm_unreachable    no connection (retryable)
    ├── LLMServerError          llm_server_error   5xx: the model server failed (retryable)
    └── LLMProtocolError        llm_protocol_error an answer that cannot be used:
        ├── LLMEmptyAnswerError llm_empty_answer   HTTP 200 with neither text nor a tool call
        │                                          (llama-cpp-python's server, asked to stream a
        │                                          tool call it can only produce unstreamed)
        └── LLMStreamCutError   llm_stream_cut     a streamed answer that stopped before its end
                                                   (no finish reason, or the connection closed mid-body)

Provider SDKs raise their own errors; :func:`provider_error` translates them by
type and HTTP status (``status_code``), never by class name. Only SDKs already
imported are looked at, so nothing is imported here. Every message is ours and
safe to show: it never quotes what the server sent. :func:`is_context_length_error`
tells a provider refusing a prompt for its length (the graph then retries once
with a tighter budget).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Mapping

from langchain_core.exceptions import ContextOverflowError

from ...errors import CopilotError, ErrorKind

__all__ = [
    "LLMAuthError",
    "LLMEmptyAnswerError",
    "LLMError",
    "LLMProtocolError",
    "LLMRateLimitedError",
    "LLMServerError",
    "LLMStreamCutError",
    "LLMTimeoutError",
    "LLMUnreachableError",
    "is_context_length_error",
    "is_cut_stream_error",
    "provider_error",
]


class LLMError(CopilotError):
    """The model provider answered with an error; ``str()`` is safe to show."""

    code = "llm_error"
    kind = ErrorKind.LLM_FAILED


class LLMAuthError(LLMError):
    code = "llm_auth"
    kind = ErrorKind.LLM_AUTH


class LLMRateLimitedError(LLMError):
    code = "llm_rate_limited"
    kind = ErrorKind.LLM_RATE_LIMITED
    retryable = True


class LLMTimeoutError(LLMError):
    code = "llm_timeout"
    kind = ErrorKind.LLM_TIMEOUT
    retryable = True


class LLMUnreachableError(LLMError):
    code = "llm_unreachable"
    kind = ErrorKind.LLM_UNREACHABLE
    retryable = True


class LLMServerError(LLMError):
    code = "llm_server_error"
    retryable = True


class LLMProtocolError(LLMError):
    """A model server's answer that cannot be used; ``str()`` is safe to show."""

    code = "llm_protocol_error"


class LLMEmptyAnswerError(LLMProtocolError):
    """The server answered 200 with neither text nor a tool call, streamed and unstreamed."""

    code = "llm_empty_answer"


class LLMStreamCutError(LLMProtocolError):
    """The streamed answer ended before the server said it was complete."""

    code = "llm_stream_cut"
    retryable = True


# Foreign types by (module, attribute); looked up only in modules already imported.
_TIMEOUTS = (("openai", "APITimeoutError"), ("anthropic", "APITimeoutError"), ("httpx", "TimeoutException"),
             ("httpcore", "TimeoutException"), ("aiohttp", "ServerTimeoutError"))
# A body that ended early (the connection closed mid-response).
_CUTS = (("httpx", "RemoteProtocolError"), ("httpx", "ReadError"), ("httpcore", "RemoteProtocolError"),
         ("httpcore", "ReadError"), ("http.client", "IncompleteRead"), ("aiohttp", "ClientPayloadError"))
_UNREACHABLE = (("openai", "APIConnectionError"), ("anthropic", "APIConnectionError"), ("httpx", "TransportError"),
                ("httpcore", "NetworkError"), ("aiohttp", "ClientConnectionError"))


def _loaded(names: tuple[tuple[str, str], ...]) -> Iterator[type]:
    for module_name, attribute in names:
        module = sys.modules.get(module_name)
        found = getattr(module, attribute, None) if module is not None else None
        if isinstance(found, type):
            yield found


def _is(exc: BaseException, names: tuple[tuple[str, str], ...]) -> bool:
    return isinstance(exc, tuple(_loaded(names)))


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def is_cut_stream_error(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it wraps) is a connection closed in the middle of a response body."""
    return any(_is(e, _CUTS) for e in _chain(exc))


def provider_error(exc: BaseException) -> LLMError | None:
    """``exc`` from a provider SDK or its transport as a member of the tree; None if it is not one."""
    if isinstance(exc, LLMError):
        return exc
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    if status == 401:
        return LLMAuthError("The LLM provider rejected the API key; check the LLM settings.")
    if status == 429:
        return LLMRateLimitedError("The LLM provider is rate limiting requests; try again in a moment.")
    if isinstance(exc, TimeoutError) or _is(exc, _TIMEOUTS):
        return LLMTimeoutError("The LLM provider did not answer in time.")
    if is_cut_stream_error(exc):
        return LLMStreamCutError("The model server closed the connection in the middle of its answer.")
    if isinstance(exc, ConnectionError) or _is(exc, _UNREACHABLE):
        return LLMUnreachableError("The LLM provider could not be reached; check base_url and the network.")
    if status is not None and status >= 500:
        return LLMServerError(
            f"The LLM provider (model server) failed while answering (HTTP {status}); its own log says why. "
            "Retrying may help; if it keeps failing, check the model server and the LLM settings."
        )
    if status is not None and status >= 400:
        return LLMError(f"The LLM provider returned an error (HTTP {status}).")
    return None


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
