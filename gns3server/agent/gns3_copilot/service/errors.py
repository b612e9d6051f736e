"""Errors of the copilot service, and what a client may be told about others.

``CopilotError`` subclasses carry a message safe to show to the user; the HTTP
layer maps them to status codes (``status`` attribute). Anything else is
described by :func:`public_message`, which never passes raw exception text from
a provider SDK or a bug through to the client: details go to the log.
"""

from __future__ import annotations

from ..agent.llm_errors import LLMProtocolError, is_cut_stream_error
from ..gns3_client.exceptions import GNS3Error


class CopilotError(Exception):
    """A failure the user can act on; ``str()`` is safe to show."""

    status = 400
    code = "copilot_error"


class SessionNotFoundError(CopilotError):
    """No such session for this user (other users' sessions look the same)."""

    status = 404
    code = "session_not_found"


class SessionBusyError(CopilotError):
    """The session already has a run in progress."""

    status = 409
    code = "session_busy"


class NoRunningRunError(CopilotError):
    """Abort was asked for a session that is not running."""

    status = 409
    code = "not_running"


class ConfirmationPendingError(CopilotError):
    """The session waits for the user to approve or reject tool calls first."""

    status = 409
    code = "confirmation_pending"


class NoPendingConfirmationError(CopilotError):
    """Approve/reject was sent for a session that is not waiting for it."""

    status = 409
    code = "no_pending_confirmation"


class ApprovalNotPendingError(CopilotError):
    """A decision for an approval that is not the pending one: replayed, or for an older request."""

    status = 409
    code = "approval_not_pending"


class ApprovalExpiredError(CopilotError):
    """The approval was given too late (the ``[Copilot]`` ``approval_minutes`` setting)."""

    status = 410
    code = "approval_expired"


class SessionKindError(CopilotError):
    """A fault injection was asked in a session that is a plain chat (or the reverse)."""

    status = 409
    code = "session_kind"


def public_message(exc: BaseException) -> tuple[str, str]:
    """(code, message) describing ``exc`` for the client, without raw internals."""
    if isinstance(exc, CopilotError):
        return exc.code, str(exc)
    if isinstance(exc, GNS3Error):
        return "gns3_error", f"GNS3 server error: {exc}"
    if isinstance(exc, LLMProtocolError):  # messages written by us, quoting nothing the server sent
        return exc.code, str(exc)
    status = getattr(exc, "status_code", None)
    name = type(exc).__name__
    if status == 401 or name == "AuthenticationError":
        return "llm_auth", "The LLM provider rejected the API key; check the LLM settings."
    if status == 429 or name == "RateLimitError":
        return "llm_rate_limited", "The LLM provider is rate limiting requests; try again in a moment."
    if "Timeout" in name:
        return "llm_timeout", "The LLM provider did not answer in time."
    if is_cut_stream_error(exc):
        return "llm_stream_cut", "The model server closed the connection in the middle of its answer."
    if "Connection" in name:
        return "llm_unreachable", "The LLM provider could not be reached; check base_url and the network."
    if isinstance(status, int) and status >= 500:
        return (
            "llm_server_error",
            (
                f"The LLM provider (model server) failed while answering (HTTP {status}); its own log says why. "
                "Retrying may help; if it keeps failing, check the model server and the LLM settings."
            ),
        )
    if isinstance(status, int) and status >= 400:
        return "llm_error", f"The LLM provider returned an error (HTTP {status})."
    return "internal_error", "The copilot run failed unexpectedly; the details are in the GNS3 server log."
