"""``gns3server-copilot``: gns3-server with the copilot inside.

gns3-server has no plugin mechanism, so this console script takes exactly the
arguments of ``gns3server``, adds the copilot to gns3-server's FastAPI app
(routes under ``/v3/copilot``, the panel at ``/copilot/``, error handlers, a body
size limit, a log filter that scrubs keys, startup and shutdown hooks) and then runs gns3-server's own
``main()``. The copilot's state is built in the startup hook, once the server
has loaded its config, and kept on ``app.state.copilot``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from types import FrameType

from fastapi import FastAPI
from starlette.routing import Route
from starlette.staticfiles import StaticFiles

from ..mcp.auth import gns3_user_lookup  # issue 16: the MCP endpoint
from ..mcp.server import ENDPOINT_STATE, MCP_PATH, MCPEndpoint, MCPRoute
from ..redaction import install_log_scrubber
from .errors import install_error_handlers
from .middleware import BodySizeLimitMiddleware
from .routes import OUR_PATHS, access_router, copilot_router
from .settings import SettingsError, settings_from_gns3
from .state import CopilotState
from .webui import WebUIButtonMiddleware  # issue 6 (panel): the Copilot button in GNS3's web UI

log = logging.getLogger(__name__)

PANEL_PATH = "/copilot"
PANEL_PACKAGE = ("gns3server.agent.gns3_copilot", "web")


def _startup(app: FastAPI) -> Callable[[], Awaitable[None]]:
    async def start_copilot() -> None:
        try:
            settings = await asyncio.to_thread(settings_from_gns3)
        except SettingsError as exc:
            log.critical("Cannot start the copilot: %s", exc)
            raise
        state = app.state.copilot = await CopilotState.open(settings, app)
        lookup = gns3_user_lookup(app.state._db_engine)  # GNS3's own start-up hook opened its database
        mcp = await MCPEndpoint.open(settings.data_dir, lookup, state.console, state.gns3_client)
        setattr(app.state, ENDPOINT_STATE, mcp)

    return start_copilot


def _shutdown(app: FastAPI) -> Callable[[], Awaitable[None]]:
    async def stop_copilot() -> None:
        mcp: MCPEndpoint | None = getattr(app.state, ENDPOINT_STATE, None)
        if mcp is not None:
            await mcp.close()
        state: CopilotState | None = getattr(app.state, "copilot", None)
        if state is not None:
            await state.close()

    return stop_copilot


def _cancel_runs_on_exit(app: FastAPI) -> None:
    """Cancel runs as soon as the server is asked to exit.

    uvicorn waits for open responses before running shutdown hooks; a chat stream
    stays open as long as its run, so runs are cancelled from uvicorn's exit
    handler (which gns3-server already wraps the same way) and their streams end.
    """
    from uvicorn.main import Server as UvicornServer

    previous = UvicornServer.handle_exit

    def handle_exit(server: UvicornServer, sig: int, frame: FrameType | None) -> None:
        state: CopilotState | None = getattr(app.state, "copilot", None)
        if state is not None:
            state.begin_shutdown()
        mcp: MCPEndpoint | None = getattr(app.state, ENDPOINT_STATE, None)
        if mcp is not None:
            mcp.begin_shutdown()  # no new MCP requests; sessions end (sse-starlette ends their streams too)
        previous(server, sig, frame)

    # A class-wide patch (mypy reads a function set on a class as an unbound method with a second self).
    UvicornServer.handle_exit = handle_exit  # type: ignore[method-assign,assignment]


def install(app: FastAPI) -> None:
    """Add the copilot to gns3-server's ``app`` (once; before the server starts)."""
    if getattr(app.state, "copilot_installed", False):
        return
    app.state.copilot_installed = True
    app.include_router(copilot_router())
    app.include_router(access_router())
    app.router.routes.append(Route(MCP_PATH, MCPRoute(), include_in_schema=False))  # issue 16: MCP clients
    app.mount(PANEL_PATH, StaticFiles(packages=[PANEL_PACKAGE], html=True), name="copilot")
    install_error_handlers(app, OUR_PATHS)
    install_log_scrubber()  # no key in any log line of the process, whatever logs it
    app.add_middleware(BodySizeLimitMiddleware, prefix=OUR_PATHS)
    app.add_middleware(WebUIButtonMiddleware)  # issue 6 (panel): adds its script to /static/web-ui/ pages
    app.router.on_startup.append(_startup(app))
    # Ours first: runs end (and save) while GNS3's controller and database are still up.
    app.router.on_shutdown.insert(0, _shutdown(app))
    _cancel_runs_on_exit(app)


def main() -> None:
    """Console script entry point: same command line as ``gns3server``."""
    from gns3server import main as gns3_main
    from gns3server.api.server import app

    install(app)
    gns3_main.main()


if __name__ == "__main__":
    main()
