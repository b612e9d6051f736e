"""The projects a GNS3 user may open, as GNS3 itself judges each one.

GNS3 3.0's own project list (``GET /v3/projects``) shows a user only the
projects of ``/projects`` (if they hold ``Project.Audit`` there) or of their
resource pools; a user whose role is granted on one project (``/projects/<id>``,
the usual way to give a student a lab) sees an empty list, although GNS3 lets
them open that project. So the copilot lists projects itself: every project of
the controller, kept when GNS3's own dependencies, asked in-process
(:class:`.permissions.HostPermissions`, as the console tools ask them), grant
``Project.Audit`` on that project's own path (what ``GET /v3/projects/{id}``
requires), and nothing else. A superadmin passes every check, as in GNS3.

The panel's project picker (``GET /v3/copilot/projects``) and MCP's
``gns3_list_projects`` and ``resources/list`` all use :class:`VisibleProjects`; so
does every copilot route with a project in its path (:meth:`VisibleProjects.readable`,
the same check without the REST request to this server it took before, on the user row and
database session GNS3's authentication already holds for that request).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from gns3server.db.repositories.rbac import RbacRepository

from .permissions import HostPermissions

log = logging.getLogger(__name__)

__all__ = ["PROJECT_PRIVILEGE", "VisibleProjects", "controller_projects"]

PROJECT_PRIVILEGE = "Project.Audit"
"""What GNS3's ``GET /v3/projects/{project_id}`` requires: reading the project is opening it here."""


def controller_projects() -> list[dict[str, Any]]:
    """Every project GNS3's controller holds, as its project list would show them (no I/O)."""
    from gns3server.controller import Controller

    return [project.asdict() for project in Controller.instance().projects.values()]


def controller_has(project_id: str) -> bool:
    """GNS3's controller holds the project (opened or closed: ``GET /v3/projects/{id}`` answers it)."""
    from gns3server.controller import Controller

    return project_id in Controller.instance().projects


class VisibleProjects:
    """Lists, for a user, exactly the projects GNS3 would let them read."""

    def __init__(
        self, permissions: HostPermissions, projects: Callable[[], Iterable[Mapping[str, Any]]] = controller_projects,
        has: Callable[[str], bool] = controller_has,
    ) -> None:
        self._permissions = permissions
        self._projects = projects
        self._has = has

    async def readable(self, user: Any, rbac: RbacRepository, project_id: str) -> bool:
        """GNS3 would answer ``GET /v3/projects/{project_id}`` for this user with the project now: it holds
        the project and its own check grants ``Project.Audit`` on its path (asked afresh, in-process).
        ``user`` is the row GNS3's authentication read for this request and ``rbac`` the request's
        repository: the check costs no session and no read of the user of its own (a superadmin: no query).
        False is no answer: the caller asks GNS3 over REST, whose 401/403/404 says why."""
        if not self._has(project_id):
            return False
        path = f"/projects/{project_id}"
        return await self._permissions.verdict_for(user, rbac, PROJECT_PRIVILEGE, path) == "allowed"

    async def of_user(self, user_id: str) -> list[dict[str, Any]]:
        """The projects ``user_id`` may read, by name; GNS3's own check decides each (failing closed)."""
        projects = [dict(p) for p in self._projects()]
        paths = [f"/projects/{p.get('project_id')}" for p in projects]
        verdicts = await self._permissions.verdicts(user_id, PROJECT_PRIVILEGE, paths)
        visible = [p for p, verdict in zip(projects, verdicts, strict=True) if verdict == "allowed"]
        log.debug("User %s may read %d of %d projects", user_id, len(visible), len(projects))
        return sorted(visible, key=lambda p: (str(p.get("name")), str(p.get("project_id"))))
