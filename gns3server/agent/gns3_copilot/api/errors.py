"""HTTP errors of the copilot API, and the handlers that put them in GNS3's ``{"message": ...}`` shape.

The service raises :class:`CopilotError` subclasses whose ``status`` is the HTTP
status; the ones below are the API layer's own. LLM config problems become 422
naming the field and the rule (never the value). GNS3 refusals met while checking
project access keep GNS3's status (401/403/404) and message. A body that fails
the request schema is a 422 listing where and which rule, with no more than a
short excerpt of anything the client sent.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exception_handlers import request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response

from ..agent.model_factory import LLMConfigError
from ..agent.prompts import PromptFileError
from ..gns3_client.exceptions import GNS3AuthenticationError, GNS3Error, GNS3NotFoundError, GNS3PermissionError
from ..service.errors import CopilotError
from .middleware import PathRule, path_matches

log = logging.getLogger(__name__)

Handler = Callable[[Request, Any], Awaitable[Response]]
# What Starlette accepts as an exception handler (the host's may be sync or async).
HostHandler = Callable[[Request, Any], Response | Awaitable[Response]]


class LLMConfigNotFoundError(CopilotError):
    """No such LLM config for this user (other users' configs look the same)."""

    status = 404
    code = "llm_config_not_found"


class NoLLMConfigError(CopilotError):
    """The user has no LLM config and the server has no default one."""

    status = 400
    code = "llm_not_configured"


class StoredKeyUnreadableError(CopilotError):
    """A stored API key no longer decrypts (the server's secret key file was replaced)."""

    status = 409
    code = "api_key_unreadable"


class ModeNotAllowedError(CopilotError):
    """A mode that this server does not offer."""

    status = 422
    code = "mode_not_allowed"


class AdminOnlyError(CopilotError):
    """A route for GNS3 superadmins only."""

    status = 403
    code = "admin_only"


class TokenExpiredError(CopilotError):
    """The GNS3 token's ``exp`` has passed (GNS3 3.0 itself does not check it)."""

    status = 401
    code = "token_expired"


class ServiceUnavailableError(CopilotError):
    """The copilot is not started (or is shutting down)."""

    status = 503
    code = "copilot_unavailable"


async def prompt_file_error_handler(request: Request, exc: Exception) -> JSONResponse:
    """An administrator's prompt file that cannot be used: the message names the file."""
    return JSONResponse(status_code=422, content={"message": str(exc), "code": "prompt_file_invalid"})


async def copilot_error_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, CopilotError)
    return JSONResponse(status_code=exc.status, content={"message": str(exc), "code": exc.code})


async def llm_config_error_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, LLMConfigError)
    errors = [{"field": f, "rule": r, "message": m} for f, r, m in exc.errors]
    return JSONResponse(
        status_code=422,
        content={"message": str(exc), "field": exc.field, "rule": exc.rule, "errors": errors},
    )


_PASSED_THROUGH = ((GNS3AuthenticationError, 401), (GNS3PermissionError, 403), (GNS3NotFoundError, 404))


async def gns3_error_handler(request: Request, exc: Exception) -> JSONResponse:
    """GNS3's answer to the user's own token (401/403/404) passes through; anything else is a 502."""
    assert isinstance(exc, GNS3Error)
    for cls, status in _PASSED_THROUGH:
        if isinstance(exc, cls):
            return JSONResponse(status_code=status, content={"message": exc.message})
    log.error("GNS3 request made for %s %s failed: %s", request.method, request.url.path, exc)
    return JSONResponse(status_code=502, content={"message": "The GNS3 server could not check this request."})


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
    """Map our exception types on the host app (GNS3's own handlers stay as they are for its routes)."""
    app.add_exception_handler(CopilotError, copilot_error_handler)
    app.add_exception_handler(LLMConfigError, llm_config_error_handler)
    app.add_exception_handler(GNS3Error, gns3_error_handler)
    host_handler = app.exception_handlers.get(RequestValidationError, request_validation_exception_handler)
    app.add_exception_handler(RequestValidationError, validation_error_handler(prefix, host_handler))
    app.add_exception_handler(PromptFileError, prompt_file_error_handler)
