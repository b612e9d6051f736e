"""Route modules of the copilot API, each with a module-level ``router``.

:func:`copilot_router` puts them together under one prefix (``/v3/copilot``).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from . import chat, console, llm_configs, sessions

PREFIX = "/v3/copilot"
COMMON_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"description": "Not logged in, or the GNS3 token is invalid or expired"},
    503: {"description": "The copilot is not running (starting or shutting down)"},
}
"""Answers every copilot route may give; each route lists its own 400/403/404/409/413/422."""


def copilot_router() -> APIRouter:
    """Every copilot route, ready for ``app.include_router``."""
    router = APIRouter(prefix=PREFIX, responses=COMMON_RESPONSES)
    router.include_router(chat.router, tags=["Copilot chat"])
    router.include_router(sessions.router, tags=["Copilot sessions"])
    router.include_router(llm_configs.router, prefix="/llm-configs", tags=["Copilot LLM configs"])
    router.include_router(console.router, prefix="/console", tags=["Copilot device consoles"])
    return router
