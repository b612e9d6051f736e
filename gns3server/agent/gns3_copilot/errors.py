"""The copilot's one error tree: every error we raise on purpose is a :class:`CopilotError`.

Each member says, as class attributes, what a client and a caller need to know
and nothing about transport: ``code`` (stable, documented, sent to clients),
``kind`` (what sort of failure: the HTTP/SSE boundary in ``api/errors.py`` maps
kinds to status codes) and ``retryable`` (whether the same request may work
later). :attr:`CopilotError.public_message` is safe to show to the user; the
service layer never speaks HTTP. The packages own their branches::

    CopilotError                         this module (imports nothing of ours)
    ├── InternalError                    a bug or a foreign error nobody translated
    ├── service: SessionNotFoundError, SessionBusyError, ...   (service/errors.py)
    ├── api: NoLLMConfigError, TokenExpiredError, ...          (api/errors.py and the routes)
    ├── LLMConfigError, PromptFileError, SettingsError, PolicyError   (also ValueErrors)
    ├── TokenizerDataError                                      (also a RuntimeError)
    ├── SchemaError ..., DatabaseClosedError                    (db/: also RuntimeErrors)
    ├── GNS3Error ...                    gns3_client/exceptions.py: GNS3's refusals keep their kinds
    ├── ConsoleError ...                 console/: a device console that cannot be used
    ├── LLMError ...                     agent/model/errors.py: provider and model-server failures
    └── ToolError ...                    tools/errors.py: what a tool tells the model (also a ToolException)

Foreign exceptions (provider SDKs, aiohttp, asyncio) are translated into the
tree where they are met, with ``raise ... from``; whatever reaches a boundary
untranslated is an internal error whose text is logged, never sent.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar

__all__ = ["CopilotError", "ErrorKind", "InternalError"]


class ErrorKind(StrEnum):
    """What sort of failure an error is; the boundary maps each to an HTTP status."""

    INVALID = "invalid"
    """The request (or a file, a setting) breaks a rule; the message names the field."""
    NOT_CONFIGURED = "not_configured"
    """Something must be set up first (no LLM config at all)."""
    UNAUTHENTICATED = "unauthenticated"
    """No usable login (expired token, GNS3 no longer accepts it)."""
    FORBIDDEN = "forbidden"
    """The user may not do this (GNS3's RBAC, an administrator-only route, an endpoint policy)."""
    NOT_FOUND = "not_found"
    """No such thing for this user (other users' things look the same)."""
    CONFLICT = "conflict"
    """Not in the current state (a run in progress, an approval already used)."""
    GONE = "gone"
    """Too late (an expired approval)."""
    TOO_MANY = "too_many"
    """A per-user limit is reached."""
    UNAVAILABLE = "unavailable"
    """The copilot is starting or stopping, or cannot use its storage."""
    UPSTREAM = "upstream"
    """GNS3, a device console or a run behind the request failed."""
    LLM_AUTH = "llm_auth"
    """The model provider refused the API key."""
    LLM_RATE_LIMITED = "llm_rate_limited"
    """The model provider is rate limiting."""
    LLM_TIMEOUT = "llm_timeout"
    """The model provider did not answer in time."""
    LLM_UNREACHABLE = "llm_unreachable"
    """The model provider could not be reached."""
    LLM_FAILED = "llm_failed"
    """The model server answered with an error or an unusable answer."""
    INTERNAL = "internal"
    """A bug: the details are in the server log."""


class CopilotError(Exception):
    """A failure the user can act on; ``str()`` and :attr:`public_message` are safe to show."""

    code: ClassVar[str] = "copilot_error"
    kind: ClassVar[ErrorKind] = ErrorKind.INVALID
    retryable: ClassVar[bool] = False

    @property
    def public_message(self) -> str:
        """What a client is told (subclasses that hold foreign text override it); an internal error says only that."""
        return InternalError.MESSAGE if self.kind is ErrorKind.INTERNAL else str(self)

    def details(self) -> dict[str, Any]:
        """Extra public fields for an error body (an invalid LLM config's field and rule)."""
        return {}


class InternalError(CopilotError):
    """A failure nobody translated (a bug, an unknown SDK error): the client gets no details."""

    code = "internal_error"
    kind = ErrorKind.INTERNAL
    MESSAGE: ClassVar[str] = "The copilot run failed unexpectedly; the details are in the GNS3 server log."

    def __init__(self, message: str = MESSAGE) -> None:
        super().__init__(message)
