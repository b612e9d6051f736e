"""The service's errors, and the translation of anything else into the tree.

Members of the one error tree (``errors.py``): each says its ``code`` and
``kind``; the API boundary chooses the HTTP status. :func:`as_copilot_error`
turns any exception met by a run into a member: ours as they are, provider SDK
failures by type (``agent/model/errors.py``), anything else an
:class:`InternalError` whose text only the log sees.
"""

from __future__ import annotations

from ..agent.model.errors import provider_error
from ..errors import CopilotError, ErrorKind, InternalError

__all__ = [
    "ApprovalExpiredError",
    "ApprovalNotPendingError",
    "ConfirmationPendingError",
    "CopilotError",
    "NoPendingConfirmationError",
    "NoRunningRunError",
    "ServiceClosingError",
    "SessionBusyError",
    "SessionKindError",
    "SessionNotFoundError",
    "as_copilot_error",
    "public_message",
]


class SessionNotFoundError(CopilotError):
    """No such session for this user (other users' sessions look the same)."""

    kind = ErrorKind.NOT_FOUND
    code = "session_not_found"


class ServiceClosingError(CopilotError):
    """The server is stopping: no new run starts (a request that got past the door late)."""

    kind = ErrorKind.UNAVAILABLE
    code = "copilot_stopping"
    retryable = True


class SessionBusyError(CopilotError):
    """The session already has a run in progress."""

    kind = ErrorKind.CONFLICT
    code = "session_busy"
    retryable = True


class NoRunningRunError(CopilotError):
    """Abort was asked for a session that is not running."""

    kind = ErrorKind.CONFLICT
    code = "not_running"


class ConfirmationPendingError(CopilotError):
    """The session waits for the user to approve or reject tool calls first."""

    kind = ErrorKind.CONFLICT
    code = "confirmation_pending"


class NoPendingConfirmationError(CopilotError):
    """Approve/reject was sent for a session that is not waiting for it."""

    kind = ErrorKind.CONFLICT
    code = "no_pending_confirmation"


class ApprovalNotPendingError(CopilotError):
    """A decision for an approval that is not the pending one: replayed, or for an older request."""

    kind = ErrorKind.CONFLICT
    code = "approval_not_pending"


class ApprovalExpiredError(CopilotError):
    """The approval was given too late (the ``[Copilot]`` ``approval_minutes`` setting)."""

    kind = ErrorKind.GONE
    code = "approval_expired"


class SessionKindError(CopilotError):
    """A fault injection was asked in a session that is a plain chat (or the reverse)."""

    kind = ErrorKind.CONFLICT
    code = "session_kind"


def as_copilot_error(exc: BaseException) -> CopilotError:
    """``exc`` as a member of the tree: ours unchanged, a provider's by type, else internal."""
    if isinstance(exc, CopilotError):
        return exc
    return provider_error(exc) or InternalError()


def public_message(exc: BaseException) -> tuple[str, str]:
    """(code, message) describing ``exc`` for the client, without raw internals."""
    error = as_copilot_error(exc)
    return error.code, error.public_message
