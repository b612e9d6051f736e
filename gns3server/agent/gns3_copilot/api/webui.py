"""A Copilot button in GNS3's own web UI, without touching the installed gns3-server files.

GNS3 serves its web UI (an Angular app) from ``/static/web-ui/``; every path there
that is not a file answers with the app's ``index.html`` (deep links such as
``/static/web-ui/controller/1/project/<id>``). :class:`WebUIButtonMiddleware`
adds one ``<script src="/copilot/gns3-webui-button.js">`` tag to those HTML
answers. The script (shipped with the panel in ``web/``) shows a Copilot button
on a project's page that opens the panel for that project.

A pure ASGI middleware (not Starlette's ``BaseHTTPMiddleware``, which would
buffer the copilot's event streams): only ``GET`` requests under the web UI's
prefix whose answer is a 200 ``text/html`` page are buffered and rewritten;
everything else passes through untouched, byte for byte. The rewritten page
drops ``ETag``/``Last-Modified`` and is marked ``no-cache``, and conditional
request headers are removed, so a browser never keeps a copy without the tag.
"""

from __future__ import annotations

import posixpath
import re

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

WEB_UI_PREFIX = "/static/web-ui"
BUTTON_SCRIPT = "/copilot/gns3-webui-button.js"
MARKER = b"data-gns3-copilot"

_CLOSE_HEAD = re.compile(rb"</head\s*>", re.IGNORECASE)
_CLOSE_BODY = re.compile(rb"</body\s*>", re.IGNORECASE)
_CONDITIONAL = {b"if-none-match", b"if-modified-since", b"if-range", b"range"}
_DROPPED_ON_REWRITE = ("etag", "last-modified", "content-length")


def inject_button(html: bytes, script_src: str = BUTTON_SCRIPT) -> bytes:
    """``html`` with the button's script tag before ``</head>`` (once, however often it is called)."""
    if MARKER in html:
        return html
    tag = f'<script src="{script_src}" defer data-gns3-copilot="button"></script>'.encode()
    for pattern in (_CLOSE_HEAD, _CLOSE_BODY):
        match = pattern.search(html)
        if match:
            return html[: match.start()] + tag + html[match.start() :]
    return html + tag


def _may_be_page(path: str) -> bool:
    """Paths that can answer with the app's index.html: no file extension, or ``.html``."""
    _, ext = posixpath.splitext(path.rsplit("/", 1)[-1])
    return ext in ("", ".html", ".htm")


class WebUIButtonMiddleware:
    """ASGI middleware adding the Copilot button's script to GNS3 web UI pages."""

    def __init__(self, app: ASGIApp, *, prefix: str = WEB_UI_PREFIX, script_src: str = BUTTON_SCRIPT) -> None:
        self.app = app
        self.prefix = prefix.rstrip("/")
        self.script_src = script_src

    def _applies(self, scope: Scope) -> bool:
        if scope["type"] != "http" or scope["method"] != "GET":
            return False
        path: str = scope["path"]
        return (path == self.prefix or path.startswith(self.prefix + "/")) and _may_be_page(path)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self._applies(scope):
            await self.app(scope, receive, send)
            return
        scope = dict(scope)
        scope["headers"] = [(k, v) for k, v in scope["headers"] if k.lower() not in _CONDITIONAL]
        extensions = dict(scope.get("extensions") or {})
        extensions.pop("http.response.pathsend", None)  # we need the body, not a file path
        scope["extensions"] = extensions

        start: Message | None = None
        chunks: list[bytes] = []

        async def send_rewritten(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                headers = MutableHeaders(raw=list(message["headers"]))
                page = (
                    message["status"] == 200
                    and headers.get("content-type", "").startswith("text/html")
                    and not headers.get("content-encoding")
                )
                if page:
                    start = message
                    return
                await send(message)
                return
            if message["type"] == "http.response.body" and start is not None:
                chunks.append(message.get("body", b""))
                if message.get("more_body", False):
                    return
                body = inject_button(b"".join(chunks), self.script_src)
                headers = MutableHeaders(raw=list(start["headers"]))
                for name in _DROPPED_ON_REWRITE:
                    if name in headers:
                        del headers[name]
                headers["content-length"] = str(len(body))
                headers["cache-control"] = "no-cache"
                await send({**start, "headers": headers.raw})
                await send({"type": "http.response.body", "body": body, "more_body": False})
                start = None
                return
            await send(message)

        await self.app(scope, receive, send_rewritten)
