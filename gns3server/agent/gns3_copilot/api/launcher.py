"""``gns3server-copilot``: gns3-server with the copilot inside.

gns3-server has no plugin mechanism, so this console script takes exactly the
arguments of ``gns3server``, adds the copilot to gns3-server's FastAPI app
(routes under ``/v3/copilot``, the panel at ``/copilot/``, error handlers, a body
size limit, a log filter that scrubs keys, and the copilot's lifespan inside
gns3-server's, see ``lifecycle.py``) and then runs gns3-server's own ``main()``.
The copilot's state is built when the lifespan starts, once the server has
loaded its config, and kept on ``app.state.copilot``.
"""

from __future__ import annotations

import logging
import re

from fastapi import FastAPI
from starlette.routing import Route
from starlette.staticfiles import StaticFiles

from ..mcp.server import MCP_PATH, MCPRoute
from ..redaction import install_log_scrubber
from .errors import install_error_handlers
from .lifecycle import install_lifespan
from .middleware import BodySizeLimitMiddleware
from .routes import OUR_PATHS, access_router, copilot_router
from .webui import (
    WebUIButtonMiddleware,  # the Copilot button in GNS3's web UI
)

log = logging.getLogger(__name__)

PANEL_PATH = "/copilot"
PANEL_PACKAGE = ("gns3server.agent.gns3_copilot", "web")


def install(app: FastAPI) -> None:
    """Add the copilot to gns3-server's ``app`` (once; before the server starts)."""
    if getattr(app.state, "copilot_installed", False):
        return
    app.state.copilot_installed = True
    app.include_router(copilot_router())
    app.include_router(access_router())
    app.router.routes.append(Route(MCP_PATH, MCPRoute(), include_in_schema=False))  # MCP clients (an ASGI app: not a FastAPI route)
    app.mount(PANEL_PATH, StaticFiles(packages=[PANEL_PACKAGE], html=True), name="copilot")
    install_error_handlers(app, OUR_PATHS)
    install_log_scrubber()  # no key in any log line of the process, whatever logs it
    mcp_endpoint = re.compile(re.escape(MCP_PATH) + "/?$")  # the endpoint itself, not the REST routes under it
    app.add_middleware(BodySizeLimitMiddleware, prefix=OUR_PATHS, jsonrpc=mcp_endpoint)
    app.add_middleware(WebUIButtonMiddleware)  # adds its script to /static/web-ui/ pages
    install_lifespan(app)


def main() -> None:
    """Console script entry point: same command line as ``gns3server``."""
    from gns3server import main as gns3_main
    from gns3server.api.server import app

    install(app)
    gns3_main.main()


if __name__ == "__main__":
    main()
