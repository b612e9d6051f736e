"""Which projects an MCP caller is shown: the server's :class:`..api.projects.VisibleProjects`.

GNS3 3.0's own project list leaves out projects a user holds a role on only
project by project (a student's lab), so MCP's ``gns3_list_projects`` and
``resources/list`` ask the same in-process check as the panel's project picker,
handed in by the server's lifespan as a :data:`ProjectLister`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from .auth import Caller

__all__ = ["ProjectLister"]

ProjectLister = Callable[[Caller], Awaitable[list[Mapping[str, Any]]]]
"""``await projects(caller)``: the projects GNS3 lets the caller's user read, by name."""
