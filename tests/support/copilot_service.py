"""The copilot service as integration tests build it: the real tools, model binding and
storage, GNS3 reached on a real server with each user's token (no launcher, no HTTP API).

One place for it, so that a change in what the service needs (a GNS3 client that borrows
its session, a new collaborator) reaches every test that builds one.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from gns3server.agent.gns3_copilot.agent.assembly import AgentAssembly
from gns3server.agent.gns3_copilot.agent.model.errors import is_context_length_error
from gns3server.agent.gns3_copilot.agent.model.factory import create_base_model_with_tools
from gns3server.agent.gns3_copilot.service.copilot import CopilotService
from gns3server.agent.gns3_copilot.service.storage import Storage, open_sqlite_storage
from gns3server.agent.gns3_copilot.tools.toolset import build_tools
from tests.support.gns3_admin import OwnSessionClient


def copilot_service(storage: Storage, gns3_base_url: str, **overrides: Any) -> CopilotService:
    """A service over ``storage`` whose tools reach the GNS3 server at ``gns3_base_url``;
    ``overrides``: any of the agent assembly's keyword arguments (tools, limits ...)."""
    options: dict[str, Any] = {
        "tools_factory": build_tools,
        "bind_tools": create_base_model_with_tools,
        "bind_tools_unstreamed": functools.partial(create_base_model_with_tools, stream=False),
        "is_context_length_error": is_context_length_error,
        "client_factory": lambda token: OwnSessionClient(gns3_base_url, token=token),
    }
    options.update(overrides)
    return CopilotService(storage, AgentAssembly(**options))


@asynccontextmanager
async def running_copilot(directory: Path, gns3_base_url: str, **overrides: Any) -> AsyncIterator[CopilotService]:
    """:func:`copilot_service` over a new store in ``directory``, closed (service, then store) on exit."""
    storage = await open_sqlite_storage(directory)
    service = copilot_service(storage, gns3_base_url, **overrides)
    try:
        yield service
    finally:
        await service.close()
        await service.agent.aclose()
        await storage.close()
