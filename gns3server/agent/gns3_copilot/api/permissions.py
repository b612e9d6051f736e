"""GNS3's own permission check, asked in-process for the copilot's tools.

The copilot runs inside gns3-server, so instead of copying GNS3's rules it calls
the very dependencies GNS3's routes use: ``get_current_active_user`` (a
deactivated account is refused) and ``has_privilege(name)`` (superadmins pass;
others need the privilege on the path through GNS3's ACL, pools and groups),
with GNS3's own database session and repositories. Whatever GNS3 would answer a
REST call on that path, the tool gets the same verdict.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any
from uuid import UUID

from fastapi import FastAPI, HTTPException
from gns3server.api.routes.controller.dependencies.authentication import get_current_active_user
from gns3server.api.routes.controller.dependencies.rbac import has_privilege
from gns3server.db.repositories.rbac import RbacRepository
from gns3server.db.repositories.users import UsersRepository
from gns3server.services import auth_service
from sqlalchemy.ext.asyncio import AsyncSession

from ..tools.permissions import Authorize, Verdict

log = logging.getLogger(__name__)

API_PREFIX = "/v3"


class HostPermissions:
    """Verdicts from the host's RBAC, for users of this server."""

    def __init__(self, app: FastAPI) -> None:
        self._app = app

    def for_user(self, user_id: str) -> Authorize:
        """An :data:`Authorize` bound to one GNS3 user (read afresh at every check)."""

        async def authorize(privilege: str, path: str) -> Verdict:
            return await self.verdict(user_id, privilege, path)

        return authorize

    async def verdict(self, user_id: str, privilege: str, path: str) -> Verdict:
        """What GNS3 would answer ``user_id`` on a route of ``path`` guarded by ``privilege``.

        Fails closed: a check that cannot be made (unknown user, database error) is a denial.
        """
        (verdict,) = await self.verdicts(user_id, privilege, [path])
        return verdict

    async def verdicts(self, user_id: str, privilege: str, paths: Sequence[str]) -> list[Verdict]:
        """:meth:`verdict` for each of ``paths``, with one database session (a project list asks
        about every project). Fails closed as :meth:`verdict` does, for every path."""
        # The engine GNS3's get_db_session uses; set by GNS3's own startup.
        engine = self._app.state._db_engine
        verdicts: list[Verdict] = []
        try:
            async with AsyncSession(engine, expire_on_commit=False) as session:
                user = await UsersRepository(session).get_user(UUID(user_id))
                if user is None:
                    log.warning("Permission check for unknown GNS3 user %s: denied", user_id)
                    return ["denied"] * len(paths)
                rbac = RbacRepository(session)
                for path in paths:
                    verdicts.append(await _host_verdict(user, rbac, privilege, path))
        except (ValueError, HTTPException) as exc:
            log.warning("Permission check of %s for user %s failed (%s): denied", privilege, user_id, exc)
            return ["denied"] * len(paths)
        except Exception:
            log.exception("Permission check of %s for user %s failed: denied", privilege, user_id)
            return ["denied"] * len(paths)
        return verdicts

    async def verdict_for(self, user: Any, rbac: RbacRepository, privilege: str, path: str) -> Verdict:
        """As :meth:`verdict`, for the user row GNS3's ``get_current_active_user`` read for this request,
        with the request's own ``RbacRepository``: no session of its own, no second read of the user.
        Fails closed as :meth:`verdict` does."""
        try:
            return await _host_verdict(user, rbac, privilege, path)
        except HTTPException as exc:
            log.warning("Permission check of %s for user %s failed (%s): denied", privilege, _user_id(user), exc)
        except Exception:
            log.exception("Permission check of %s for user %s failed: denied", privilege, _user_id(user))
        return "denied"

    async def token_allows(self, token: str, checks: Sequence[tuple[str, str]]) -> bool:
        """Whether GNS3 would let a request carrying ``token`` through every ``(privilege, path)`` of
        ``checks`` now: the token decoded and its user read as GNS3's own authentication does, then the
        host's check on each path, in one database session (a REST read per path did this each time).

        Fails closed: a token GNS3 would refuse, an unknown user, any error is False (the caller then
        asks GNS3 over REST, which answers as it always did).
        """
        engine = self._app.state._db_engine
        try:
            username = auth_service.get_username_from_token(token)
            if username is None:
                return False
            async with AsyncSession(engine, expire_on_commit=False) as session:
                user = await UsersRepository(session).get_user_by_username(username)
                if user is None:
                    return False
                rbac = RbacRepository(session)
                for privilege, path in checks:
                    if await _host_verdict(user, rbac, privilege, path) != "allowed":
                        return False
        except HTTPException:
            return False
        except Exception:
            log.exception("Permission check of a token failed: denied")
            return False
        return True


def _user_id(user: Any) -> str:
    return str(getattr(user, "user_id", "?"))


async def _host_verdict(user: Any, rbac: RbacRepository, privilege: str, path: str) -> Verdict:
    """GNS3's own dependencies on a request for ``path``, as its route would run them."""
    request: Any = SimpleNamespace(url=SimpleNamespace(path=API_PREFIX + path))
    try:
        # GNS3 annotates a schemas.User but passes its repository's db model, as here.
        await get_current_active_user(request, user, rbac)
    except HTTPException:
        return "inactive"
    try:
        await has_privilege(privilege)(request, user, rbac)
    except HTTPException as exc:
        if exc.status_code == 403:
            return "denied"
        raise
    return "allowed"
