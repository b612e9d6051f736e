"""Errors raised by the GNS3 client.

Every error the client raises is a :class:`GNS3Error`; foreign errors (aiohttp,
asyncio, JSON) are translated at the boundary with ``raise ... from`` so that the
original stays available as ``__cause__``::

    GNS3Error
    ├── GNS3ConnectionError       no connection to the server (refused, unreachable,
    │                             DNS, dropped); the message names the URL
    ├── GNS3TimeoutError          the server did not answer within the timeout
    └── GNS3APIError              the request was refused, by GNS3 (``status`` is the
        │                         HTTP status) or by the client before sending it
        │                         (``status`` is None: expired token, malformed id,
        │                         unknown port name)
        ├── GNS3AuthenticationError   401: wrong password, invalid or expired token
        ├── GNS3PermissionError       403: the user lacks a GNS3 privilege
        ├── GNS3NotFoundError         404: no such project, node, template, port
        ├── GNS3ConflictError         409: GNS3 refused in the current state
        │                             (port already used, node cannot start, ...)
        └── GNS3ServerError           5xx: GNS3 failed internally

``GNS3APIError.message`` is GNS3's own ``message`` (without the server-side
traceback that GNS3 appends to validation errors); ``str(error)`` adds the
method, URL and status so that a log line or a tool result says what was
attempted. ``str(error)`` and ``public_message`` show the message on one line:
GNS3 quotes names in its messages, and a name may hold a line break
(:func:`..as_data.one_line` escapes it).

The tree is the GNS3 branch of the copilot's one error tree (``errors.py``):
every class has the code ``gns3_error`` and a ``kind``. GNS3's 401/403/404 to
the user's own token keep their meaning (their ``public_message`` is GNS3's own
message); anything else is ``upstream`` and its ``public_message`` never quotes
aiohttp or a server-side failure.
"""

from __future__ import annotations

from ..as_data import one_line
from ..errors import CopilotError, ErrorKind

__all__ = [
    "GNS3Error",
    "GNS3ConnectionError",
    "GNS3TimeoutError",
    "GNS3APIError",
    "GNS3AuthenticationError",
    "GNS3PermissionError",
    "GNS3NotFoundError",
    "GNS3ConflictError",
    "GNS3ServerError",
    "error_for_status",
]


class GNS3Error(CopilotError):
    """Base class of every error raised by the GNS3 client."""

    code = "gns3_error"
    kind = ErrorKind.UPSTREAM

    @property
    def public_message(self) -> str:
        return "The GNS3 server could not complete the request; the details are in the GNS3 server log."


class GNS3ConnectionError(GNS3Error):
    """The server could not be reached at all (nothing answered at ``url``)."""

    retryable = True

    def __init__(self, message: str, *, url: str) -> None:
        super().__init__(message)
        self.url = url


class GNS3TimeoutError(GNS3Error):
    """The server accepted the request but gave no complete answer in time."""

    retryable = True

    def __init__(self, message: str, *, url: str, timeout: float | None) -> None:
        super().__init__(message)
        self.url = url
        self.timeout = timeout


class GNS3APIError(GNS3Error):
    """A request refused by GNS3 (``status`` set) or by the client (``status`` None)."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        method: str | None = None,
        url: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.method = method
        self.url = url

    def __str__(self) -> str:
        where = " ".join(part for part in (self.method, self.url) if part)
        message = one_line(self.message)
        if self.status is not None:
            return f"GNS3 answered {self.status} to {where}: {message}"
        if where:
            return f"{message} ({where})"
        return message

    @property
    def public_message(self) -> str:
        """GNS3's own words to the user's request (or the client's, when it refused to send it)."""
        return one_line(self.message)


class GNS3AuthenticationError(GNS3APIError):
    """401: the credentials or the token were not accepted."""

    kind = ErrorKind.UNAUTHENTICATED


class GNS3PermissionError(GNS3APIError):
    """403: the authenticated user may not do this."""

    kind = ErrorKind.FORBIDDEN


class GNS3NotFoundError(GNS3APIError):
    """404: the project, node, template or port does not exist."""

    kind = ErrorKind.NOT_FOUND


class GNS3ConflictError(GNS3APIError):
    """409: GNS3 refused the request in the current state; ``message`` says why."""


class GNS3ServerError(GNS3APIError):
    """5xx: GNS3 failed while handling the request."""

    retryable = True

    @property
    def public_message(self) -> str:
        """Only that GNS3 failed: its text may be a server-side failure's."""
        return "The GNS3 server failed while answering; the details are in the GNS3 server log."


_BY_STATUS: dict[int, type[GNS3APIError]] = {
    401: GNS3AuthenticationError,
    403: GNS3PermissionError,
    404: GNS3NotFoundError,
    409: GNS3ConflictError,
}


def error_for_status(status: int, message: str, *, method: str, url: str) -> GNS3APIError:
    """The exception for an error status: a subclass where one fits, else the base."""
    cls = _BY_STATUS.get(status)
    if cls is None:
        cls = GNS3ServerError if status >= 500 else GNS3APIError
    return cls(message, status=status, method=method, url=url)
