"""FastAPI dependencies: the copilot state, the GNS3 user, project access, owned sessions.

Authentication is the host's own (``get_current_active_user``: a GNS3 JWT as
bearer token or ``?token=``), plus the check GNS3 3.0 leaves out: its decoder
verifies the signature but not the ``exp`` claim, so an expired token is refused
here (401 ``token_expired``) before any copilot route runs. Project access is
asked of GNS3 itself: its own dependencies in-process (``projects.py``), and when
they do not say yes, the project read through the REST API with the user's token,
so GNS3's RBAC decides and its answer (403, 404) is what the client gets.
"""

from __future__ import annotations

import time
from typing import Annotated, Any
from uuid import UUID

from fastapi import Depends, Query, Request
from gns3server import schemas as gns3_schemas
from gns3server.api.routes.controller.dependencies.authentication import get_current_active_user, oauth2_scheme
from gns3server.api.routes.controller.dependencies.database import get_repository
from gns3server.db.repositories.rbac import RbacRepository
from gns3server.db.repositories.users import UsersRepository

from ..gns3_client.client import token_expiry
from ..service.copilot import User
from ..service.errors import SessionNotFoundError
from ..service.session_ids import canonical_session_id
from ..service.session_store import SessionRecord
from .errors import ServiceUnavailableError, TokenExpiredError
from .state import CopilotState


def copilot_state(request: Request) -> CopilotState:
    state: CopilotState | None = getattr(request.app.state, "copilot", None)
    if state is None or state.closing:
        raise ServiceUnavailableError("The copilot is not running on this server (starting or shutting down).")
    return state


async def current_user(
    gns3_user: Annotated[gns3_schemas.User, Depends(get_current_active_user)],
    bearer_token: Annotated[str | None, Depends(oauth2_scheme)],
    token: Annotated[str | None, Query(include_in_schema=False)] = None,
) -> User:
    """The logged-in GNS3 user, with the token the tools will act with."""
    raw_token = bearer_token or token
    assert raw_token is not None  # get_current_active_user refused the request otherwise
    expiry = token_expiry(raw_token)
    if expiry is not None and expiry <= time.time():
        raise TokenExpiredError("Your GNS3 login has expired; log in again")
    assert gns3_user.username is not None  # GNS3's users table requires one
    return User(
        user_id=str(gns3_user.user_id),
        username=gns3_user.username,
        token=raw_token,
        is_superadmin=bool(gns3_user.is_superadmin),
    )


State = Annotated[CopilotState, Depends(copilot_state)]
CurrentUser = Annotated[User, Depends(current_user)]


class Memberships:
    """The GNS3 user groups of a request's user (their LLM configs are inherited by the user), read
    from GNS3's database when first awaited and not before: a user whose own config decides costs no
    query. Read once per request (GNS3's memberships, as they are when the request asks)."""

    def __init__(self, user_id: str, users: UsersRepository) -> None:
        self._user_id = user_id
        self._users = users
        self._ids: list[str] | None = None

    async def __call__(self) -> list[str]:
        if self._ids is None:
            self._ids = [str(g.user_group_id) for g in await self._users.get_user_memberships(UUID(self._user_id))]
        return self._ids


async def user_group_ids(
    user: CurrentUser, users: Annotated[UsersRepository, Depends(get_repository(UsersRepository))]
) -> Memberships:
    """The user's group ids, to be read only if the LLM config lookup needs them (no query here;
    async so that FastAPI runs it on the loop, not in its thread pool)."""
    return Memberships(user.user_id, users)


GroupIds = Annotated[Memberships, Depends(user_group_ids)]


GNS3UserRow = Annotated[Any, Depends(get_current_active_user)]
"""The user row GNS3's authentication read for this request (FastAPI runs the dependency once per
request: the very row :func:`current_user` was made from). GNS3 annotates it ``schemas.User``; it is
its repository's database model."""
RequestRbac = Annotated[RbacRepository, Depends(get_repository(RbacRepository))]
"""GNS3's RBAC repository on the request's own database session (the one its authentication used)."""


async def accessible_project(
    project_id: UUID, user: CurrentUser, state: State, gns3_user: GNS3UserRow, rbac: RequestRbac
) -> str:
    """The project id, once GNS3 has let this user read the project (else GNS3's 401/403/404).

    GNS3's own check is asked in-process (the copilot runs inside gns3-server), on the user row and
    session this request already holds; only when it does not say yes is the project read over
    REST, so that the client gets GNS3's own refusal."""
    if await state.projects.readable(gns3_user, rbac, str(project_id)):
        return str(project_id)
    async with state.gns3_client(user.token) as client:
        await client.project(str(project_id))
    return str(project_id)


ProjectId = Annotated[str, Depends(accessible_project)]


async def session_in_project(state: CopilotState, user: User, session_id: str, project_id: str) -> SessionRecord:
    """The session if it is the user's (or the user is superadmin) and in this project, else 404."""
    record = await state.service.session(user, session_id)
    if record.project_id != project_id:
        raise SessionNotFoundError(f"Session {session_id} not found")
    return record


async def session_for_chat(state: CopilotState, user: User, session_id: str, project_id: str) -> SessionRecord | None:
    """As :func:`session_in_project`, except that a well-formed UUID naming no session is None
    (the chat will create it: GNS3 3.1's client chooses the id of a new chat)."""
    record = await state.service.session_or_new(user, session_id)
    if record is not None and record.project_id != project_id:
        raise SessionNotFoundError(f"Session {session_id} not found")
    return record


async def owned_session(session_id: str, project_id: ProjectId, user: CurrentUser, state: State) -> SessionRecord:
    """The session of the path, whatever the spelling of its id (the body's ids: ``schemas.SessionId``)."""
    return await session_in_project(state, user, canonical_session_id(session_id), project_id)


OwnedSession = Annotated[SessionRecord, Depends(owned_session)]
