"""The panel's files, served so that a browser never mixes two releases' modules.

Starlette's ``StaticFiles`` sends ``ETag`` and ``Last-Modified`` but no
``Cache-Control``, which lets a browser reuse a file without asking for a
heuristic while (commonly a tenth of the file's age). The panel is a set of ES modules
importing each other: after an upgrade, one module fresh and another reused
from that heuristic cache would run together. ``no-cache`` makes the browser
revalidate every file on use; an unchanged file costs a ``304`` with no body.
"""

from __future__ import annotations

from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

CACHE_CONTROL = "no-cache"


class PanelFiles(StaticFiles):
    """``StaticFiles`` whose files (``200``, and ``304`` when unchanged) say ``Cache-Control: no-cache``."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers["Cache-Control"] = CACHE_CONTROL
        return response
