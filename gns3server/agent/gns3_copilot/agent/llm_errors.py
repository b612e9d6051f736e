"""What a model server did wrong, named, so the user is not told "failed unexpectedly".

Provider SDKs raise their own errors for HTTP failures (the service maps those by
status). These are the failures that arrive as a *successful* HTTP answer, or as a
transport error in the middle of one, and that the SDKs do not name:

- :class:`LLMEmptyAnswerError`: HTTP 200 with no message at all (llama-cpp-python's
  server does this when asked to stream a tool call it can only produce unstreamed);
- :class:`LLMStreamCutError`: a streamed answer that stopped before its end (no
  finish reason, or the connection closed mid-body).

Each carries ``code`` (an ``llm_*`` code for the client) and a message safe to show:
it never quotes what the server sent.
"""

from __future__ import annotations

__all__ = ["LLMEmptyAnswerError", "LLMProtocolError", "LLMStreamCutError", "is_cut_stream_error"]


class LLMProtocolError(Exception):
    """A model server's answer that cannot be used; ``str()`` is safe to show."""

    code = "llm_protocol_error"


class LLMEmptyAnswerError(LLMProtocolError):
    """The server answered 200 with neither text nor a tool call, streamed and unstreamed."""

    code = "llm_empty_answer"


class LLMStreamCutError(LLMProtocolError):
    """The streamed answer ended before the server said it was complete."""

    code = "llm_stream_cut"


# httpx / httpcore names for a body that ended early (imported lazily by name: no SDK import here).
_CUT_NAMES = frozenset({"RemoteProtocolError", "IncompleteRead", "ReadError", "ClientPayloadError"})


def is_cut_stream_error(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it wraps) is a connection closed in the middle of a response body."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if type(current).__name__ in _CUT_NAMES:
            return True
        current = current.__cause__ or current.__context__
    return False
