"""What a tool may do for its user, as GNS3 decides it, and how a refusal reads.

GNS3's REST routes check a privilege on the request's path; the node and link
tools call those routes with the user's token, so GNS3 refuses there. The
console tools open telnet themselves, so they ask first, through an
:data:`Authorize` callable bound to the user (the server asks its own RBAC
in-process: ``api.permissions``). Refusals become :class:`PermissionRefused`,
a :class:`~.errors.ToolError` whose text the model and the panel show as it is.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Literal

from ..as_data import one_line
from ..errors import ErrorKind
from ..gns3_client.exceptions import GNS3AuthenticationError, GNS3PermissionError
from .errors import ToolError

Verdict = Literal["allowed", "denied", "inactive"]
Authorize = Callable[[str, str], Awaitable[Verdict]]
"""``await authorize(privilege, path)``: may the run's user do what needs ``privilege`` on ``path``?"""

NODE_CONSOLE = "Node.Console"
# GNS3's own refusal: "Permission denied (privilege Node.PowerMgmt is required)".
_GNS3_PRIVILEGE = re.compile(r"privilege ([A-Za-z]+\.[A-Za-z]+) is required")


class PermissionRefused(ToolError):
    """GNS3 does not let this user do it; ``str()`` says what is missing, on what."""

    code = "permission_refused"
    kind = ErrorKind.FORBIDDEN

    def __init__(self, message: str, *, privilege: str | None = None) -> None:
        super().__init__(message)
        self.privilege = privilege


def console_path(project_id: str, node_id: str) -> str:
    """The path GNS3 checks ``Node.Console`` on for a node's console (its console WebSocket route)."""
    return f"/projects/{project_id}/nodes/{node_id}/console/ws"


def refusal(verdict: Verdict, privilege: str, target: str) -> PermissionRefused:
    """The refusal for a verdict other than "allowed"."""
    if verdict == "inactive":
        return PermissionRefused("your GNS3 account is deactivated; nothing was done", privilege=privilege)
    return PermissionRefused(f"you lack {privilege} on {target}; GNS3 does not let you do this", privilege=privilege)


def gns3_refusal(exc: GNS3PermissionError | GNS3AuthenticationError, target: str) -> PermissionRefused:
    """GNS3's 401/403 to the user's own request, said plainly (the privilege it named, on what)."""
    if isinstance(exc, GNS3AuthenticationError):
        return PermissionRefused(f"GNS3 no longer accepts your login ({one_line(exc.message)}); nothing was done")
    found = _GNS3_PRIVILEGE.search(exc.message or "")
    if found is None:
        return PermissionRefused(f"GNS3 refused this on {target}: {one_line(exc.message)}")
    return refusal("denied", found.group(1), target)
