"""aiohttp apps served on a free loopback port, for the test servers (stubs, proxies)."""

from __future__ import annotations

import socket
from typing import Any

from aiohttp import web


async def serve_on_loopback(app: web.Application, **runner_options: Any) -> tuple[web.AppRunner, int]:
    """Serve ``app`` on 127.0.0.1 at a free port in the running loop; returns its runner (to
    ``cleanup()``) and the port. ``runner_options`` go to :class:`aiohttp.web.AppRunner`."""
    runner = web.AppRunner(app, access_log=None, **runner_options)
    await runner.setup()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    await web.SockSite(runner, sock).start()
    return runner, port
