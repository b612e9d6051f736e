"""Route modules of the copilot API, each with a module-level ``router``.

:func:`copilot_router` puts them together under one prefix (``/v3/copilot``).
"""

from __future__ import annotations

from fastapi import APIRouter

from . import chat, console, llm_configs, mcp, sessions

PREFIX = "/v3/copilot"


def copilot_router() -> APIRouter:
    """Every copilot route, ready for ``app.include_router``."""
    router = APIRouter(prefix=PREFIX)
    router.include_router(chat.router, tags=["Copilot chat"])
    router.include_router(sessions.router, tags=["Copilot sessions"])
    router.include_router(llm_configs.router, prefix="/llm-configs", tags=["Copilot LLM configs"])
    router.include_router(console.router, prefix="/console", tags=["Copilot device consoles"])
    router.include_router(mcp.router, prefix="/mcp", tags=["Copilot MCP keys and approvals"])
    return router
