"""Route modules of the copilot API, each with a module-level ``router``.

:func:`copilot_router` puts them together under one prefix (``/v3/copilot``);
:func:`access_router` is GNS3 3.1's LLM-model-config face, under ``/v3/access``.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi import APIRouter

from . import (
    changes,
    chat,
    console,
    console_credentials,
    evidence,
    families,
    faults,
    llm_configs,
    llm_model_configs,
    mcp,
    projects,
    sessions,
    skills,
    teaching,
)

PREFIX = "/v3/copilot"
ACCESS_PREFIX = "/v3/access"
# Every path of ours: the copilot's, and GNS3 3.1's model-config routes we serve under /v3/access.
OUR_PATHS = re.compile(r"/v3/copilot/|/v3/access/(?:users|groups)/[^/]+/llm-model-configs(?:/|$)")
COMMON_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"description": "Not logged in, or the GNS3 token is invalid or expired"},
    503: {"description": "The copilot is not running (starting or shutting down)"},
}
"""Answers every copilot route may give; each route lists its own 400/403/404/409/413/422."""


def copilot_router() -> APIRouter:
    """Every copilot route, ready for ``app.include_router``."""
    router = APIRouter(prefix=PREFIX, responses=COMMON_RESPONSES)
    router.include_router(projects.router, tags=["Copilot projects"])
    router.include_router(chat.router, tags=["Copilot chat"])
    router.include_router(sessions.router, tags=["Copilot sessions"])
    router.include_router(evidence.router, tags=["Copilot evidence"])
    router.include_router(faults.router, tags=["Copilot fault injection"])
    router.include_router(changes.router, tags=["Copilot changes, backups and snapshots"])
    router.include_router(skills.router, tags=["Copilot prompts"])
    router.include_router(teaching.router, tags=["Copilot graded labs"])
    router.include_router(llm_configs.router, prefix="/llm-configs", tags=["Copilot LLM configs"])
    router.include_router(console.router, prefix="/console", tags=["Copilot device consoles"])
    router.include_router(console_credentials.router, tags=["Copilot device consoles"])
    router.include_router(families.router, tags=["Copilot device consoles"])
    router.include_router(mcp.router, prefix="/mcp", tags=["Copilot MCP keys and approvals"])
    return router


def access_router() -> APIRouter:
    """GNS3 3.1's ``/v3/access/{users,groups}/{id}/llm-model-configs`` routes over our config store."""
    router = APIRouter(prefix=ACCESS_PREFIX, responses=COMMON_RESPONSES)
    router.include_router(llm_model_configs.router, tags=["Copilot LLM model configs (GNS3 3.1)"])
    return router
