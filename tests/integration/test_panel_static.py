"""The panel's files as the real server serves them, and the web UI page rewrite.

Against the session's gns3-server started through ``gns3server-copilot``: the
panel is served at ``/copilot/`` with the right types; GNS3's web UI pages gain
the Copilot button's script tag (once), while its assets pass through byte for
byte; the pinned third-party files match their recorded hashes; the panel's own
code keeps to the rules that make sanitising meaningful (no inline script or
handler, no HTML strings assigned to the DOM).
"""

from __future__ import annotations

import hashlib
import re
import urllib.request
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from gns3server.agent.gns3_copilot.api.webui import BUTTON_SCRIPT, inject_button

pytestmark = pytest.mark.integration

WEB = resources.files("gns3server.agent.gns3_copilot") / "web"
WEB_UI = resources.files("gns3server") / "static" / "web-ui"
TAG = f'<script src="{BUTTON_SCRIPT}"'.encode()
# Every module of the panel's own code (app.js imports the rest), so a new one is held to the same rules.
MODULES = sorted(f"js/{entry.name}" for entry in (WEB / "js").iterdir() if entry.name.endswith(".js"))


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.status, {k.lower(): v for k, v in response.headers.items()}, response.read()


# ------------------------------------------------------------------ the panel


@pytest.mark.parametrize(("path", "mime"), [
    ("/copilot/", "text/html"),
    ("/copilot/panel.css", "text/css"),
    ("/copilot/js/app.js", "javascript"),
    ("/copilot/js/render.js", "javascript"),
    ("/copilot/vendor/marked.esm.js", "javascript"),
    ("/copilot/vendor/purify.es.js", "javascript"),
    ("/copilot/gns3-webui-button.js", "javascript"),
])
def test_the_panel_is_served_with_the_right_types(gns3_server: Any, path: str, mime: str) -> None:
    status, headers, body = get(gns3_server.base_url + path)
    assert status == 200 and mime in headers["content-type"] and body


def test_every_file_the_panel_loads_is_in_the_package() -> None:
    html = (WEB / "index.html").read_text()
    refs = re.findall(r'(?:src|href)="([^"#:]+)"', html)
    modules = [f"js/{name}" for name in ("app.js", "api.js", "auth.js", "render.js", "settings.js", "mcp.js")]
    for ref in [*refs, *modules, "vendor/marked.esm.js", "vendor/purify.es.js"]:
        assert (WEB / ref).is_file(), ref
    for module in MODULES:
        for imported in re.findall(r'from "(\.{1,2}/[^"]+)"', (WEB / module).read_text()):
            assert (WEB / "js" / imported).is_file() or (WEB / imported.removeprefix("../")).is_file(), imported


def test_vendored_files_match_their_recorded_hashes() -> None:
    readme = (WEB / "vendor" / "README.md").read_text()
    recorded = dict(re.findall(r"\| `([\w.-]+\.js)` \|.*\| `([0-9a-f]{64})` \|", readme))
    assert set(recorded) == {"marked.esm.js", "purify.es.js"}
    for name, digest in recorded.items():
        assert hashlib.sha256((WEB / "vendor" / name).read_bytes()).hexdigest() == digest, name
    assert "@license DOMPurify 3.4.18" in (WEB / "vendor" / "purify.es.js").read_text()[:300]
    assert "marked v18.2.1" in (WEB / "vendor" / "marked.esm.js").read_text()[:300]


def test_the_panel_has_no_inline_script_or_handler_and_no_html_strings() -> None:
    html = (WEB / "index.html").read_text()
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", html), "inline <script> in index.html"
    assert not re.search(r"\son[a-z]+\s*=", html), "inline event handler in index.html"
    assert "script-src 'self'" in html  # the CSP that backs the sanitiser up
    for module in MODULES:
        code = (WEB / module).read_text()
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
            assert sink not in code, f"{module} uses {sink}"
    # The only Markdown-to-DOM path goes through DOMPurify and returns DOM, not a string.
    render = (WEB / "js" / "render.js").read_text()
    assert "RETURN_DOM_FRAGMENT: true" in render and "DOMPurify.sanitize(html, SANITIZE)" in render


# ------------------------------------------------------------------ the web UI rewrite


def test_web_ui_pages_get_the_button_script_once(gns3_server: Any) -> None:
    base = gns3_server.base_url
    for path in ("/static/web-ui/index.html", "/static/web-ui/bundled",
                 "/static/web-ui/controller/1/project/0c2f6f4a-6f49-4a5e-9a43-2f6a1b2c3d4e"):
        status, headers, body = get(base + path, {"If-None-Match": '"stale"', "If-Modified-Since":
                                                  "Wed, 01 Jan 2031 00:00:00 GMT"})
        assert status == 200, path
        assert body.count(TAG) == 1, path
        assert body.index(TAG) < body.lower().index(b"</head>"), "the tag belongs in the head"
        assert int(headers["content-length"]) == len(body)
        assert "etag" not in headers and "last-modified" not in headers
        assert headers["cache-control"] == "no-cache"
    original = (WEB_UI / "index.html").read_bytes()
    assert body.replace(body[body.index(TAG):body.index(b"</script>", body.index(TAG)) + 9], b"") == original


def test_web_ui_assets_pass_through_untouched(gns3_server: Any) -> None:
    bundle = next(p for p in Path(str(WEB_UI)).glob("main.*.js"))
    status, headers, body = get(f"{gns3_server.base_url}/static/web-ui/{bundle.name}")
    assert status == 200 and body == bundle.read_bytes()
    assert "etag" in headers  # the host's own caching headers are kept
    status, headers, body = get(f"{gns3_server.base_url}/static/web-ui/3rdpartylicenses.txt")
    assert status == 200 and TAG not in body


def test_inject_button_is_idempotent_and_has_fallbacks() -> None:
    page = b"<html><HEAD><title>x</title></HEAD><body>b</body></html>"
    once = inject_button(page)
    assert once.count(TAG) == 1 and once.index(TAG) < once.index(b"</HEAD>")
    assert inject_button(once) == once
    no_head = inject_button(b"<body>b</body>")
    assert no_head.index(TAG) < no_head.index(b"</body>")
    assert inject_button(b"fragment").startswith(b"fragment") and TAG in inject_button(b"fragment")
