"""The HTTP/SSE boundary of the error tree, and the API layer's own members of it.

Every error we raise is a :class:`~..errors.CopilotError` with a ``kind``;
:data:`HTTP_STATUS` is the one table that turns kinds into HTTP statuses. A body
is gns3-server's shape, ``{"message": ..., "code": ...}`` plus the error's public
details (an invalid LLM config's ``field``, ``rule`` and ``errors``). In a run
the SSE ``error`` event carries the same ``code`` and message
(``service.errors.as_copilot_error``). GNS3's refusals met while checking project
access keep GNS3's status (401/403/404) and message; anything else from GNS3 is a
502. A body that fails the request schema is a 422 listing where and which rule,
with no more than a short excerpt of anything the client sent.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exception_handlers import request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response

from ..errors import CopilotError, ErrorKind
from .middleware import PathRule, path_matches

log = logging.getLogger(__name__)

Handler = Callable[[Request, Any], Awaitable[Response]]
# What Starlette accepts as an exception handler (the host's may be sync or async).
HostHandler = Callable[[Request, Any], Response | Awaitable[Response]]

HTTP_STATUS: Mapping[ErrorKind, int] = MappingProxyType(
    {
        ErrorKind.INVALID: 422,
        ErrorKind.NOT_CONFIGURED: 400,
        ErrorKind.UNAUTHENTICATED: 401,
        ErrorKind.FORBIDDEN: 403,
        ErrorKind.NOT_FOUND: 404,
        ErrorKind.CONFLICT: 409,
        ErrorKind.GONE: 410,
        ErrorKind.TOO_MANY: 429,
        ErrorKind.INTERNAL: 500,
        ErrorKind.UPSTREAM: 502,
        ErrorKind.LLM_AUTH: 502,
        ErrorKind.LLM_RATE_LIMITED: 502,
        ErrorKind.LLM_TIMEOUT: 502,
        ErrorKind.LLM_UNREACHABLE: 502,
        ErrorKind.LLM_FAILED: 502,
        ErrorKind.UNAVAILABLE: 503,
    }
)
"""The HTTP status of each kind of error (the SSE ``error`` event carries the error's ``code`` instead)."""


def http_status(error: CopilotError) -> int:
    """The status an error is answered with."""
    return HTTP_STATUS[error.kind]


class LLMConfigNotFoundError(CopilotError):
    """No such LLM config for this user (other users' configs look the same)."""

    kind = ErrorKind.NOT_FOUND
    code = "llm_config_not_found"


class ConfigVersionConflictError(CopilotError):
    """The config changed since the client read it (3.1's optimistic locking, or a concurrent update)."""

    kind = ErrorKind.CONFLICT
    code = "llm_config_version_conflict"


class NoLLMConfigError(CopilotError):
    """The user has no LLM config and the server has no default one."""

    kind = ErrorKind.NOT_CONFIGURED
    code = "llm_not_configured"


class StoredKeyUnreadableError(CopilotError):
    """A stored API key no longer decrypts (the server's secret key file was replaced)."""

    kind = ErrorKind.CONFLICT
    code = "api_key_unreadable"


class ModeNotAllowedError(CopilotError):
    """A mode that this server does not offer."""

    kind = ErrorKind.INVALID
    code = "mode_not_allowed"


class AdminOnlyError(CopilotError):
    """A route for GNS3 superadmins only."""

    kind = ErrorKind.FORBIDDEN
    code = "admin_only"


class TokenExpiredError(CopilotError):
    """The GNS3 token's ``exp`` has passed (GNS3 3.0 itself does not check it)."""

    kind = ErrorKind.UNAUTHENTICATED
    code = "token_expired"


class ServiceUnavailableError(CopilotError):
    """The copilot is not started (or is shutting down)."""

    kind = ErrorKind.UNAVAILABLE
    code = "copilot_unavailable"
    retryable = True


async def copilot_error_handler(request: Request, exc: Exception) -> JSONResponse:
    """Any member of the tree: the table's status, the public message, the code and public details."""
    assert isinstance(exc, CopilotError)
    status = http_status(exc)
    if status >= 500:  # what went wrong behind the request is for the log; the client gets the public text
        log.error("%s %s failed (%s): %s", request.method, request.url.path, exc.code, exc)
    return JSONResponse(
        status_code=status, content={"message": exc.public_message, "code": exc.code, **exc.details()}
    )


MAX_ERRORS_SHOWN = 10
EXCERPT_CHARS = 80
"""At most this much of any one piece of an error (a field name, a message) is sent back or logged."""


def _excerpt(text: object) -> str:
    value = str(text)
    return value if len(value) <= EXCERPT_CHARS else value[: EXCERPT_CHARS - 1] + "…"


def validation_errors(exc: RequestValidationError) -> list[dict[str, Any]]:
    """The request's validation errors without the input they were about: where, what rule, short."""
    return [
        {
            "loc": [_excerpt(part) for part in error.get("loc", ())],
            "type": error.get("type"),
            "msg": _excerpt(error.get("msg", "")),
        }
        for error in exc.errors()[:MAX_ERRORS_SHOWN]
    ]


def validation_error_handler(prefix: PathRule, host_handler: HostHandler) -> Handler:
    """422 for our routes that never echoes the body (the host's echoes it whole, and logs it)."""

    async def handle(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        if not path_matches(prefix, request.url.path):
            answer = host_handler(request, exc)
            return answer if isinstance(answer, Response) else await answer
        errors = validation_errors(exc)
        summary = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in errors)
        log.info("Invalid request %s %s: %s", request.method, request.url.path, summary)
        return JSONResponse(status_code=422, content={"message": f"Invalid request: {summary}", "errors": errors})

    return handle


def install_error_handlers(app: FastAPI, prefix: PathRule) -> None:
    """Map the error tree on the host app (GNS3's own handlers stay as they are for its routes)."""
    app.add_exception_handler(CopilotError, copilot_error_handler)
    host_handler = app.exception_handlers.get(RequestValidationError, request_validation_exception_handler)
    app.add_exception_handler(RequestValidationError, validation_error_handler(prefix, host_handler))
