"""Sessions of a project's chat: list, read, history, rename, delete, abort, context report."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, status

from ..dependencies import CurrentUser, GroupIds, OwnedSession, ProjectId, State
from ..history import session_history
from ..schemas import (
    AbortResult,
    ContextReport,
    HistoryMessage,
    Mode,
    Session,
    SessionHistory,
    SessionUpdate,
    session_timestamp,
)

router = APIRouter()

SESSIONS = "/projects/{project_id}/chat/sessions"
_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    403: {"description": "GNS3 does not let this user read the project"},
    404: {"description": "No such project, or no such session of this user in it"},
}


@router.get(SESSIONS, response_model=list[Session], responses=_NOT_FOUND)
async def list_sessions(project_id: ProjectId, user: CurrentUser, state: State) -> list[Session]:
    """The user's sessions of the project: pinned ones first, then the most recently used."""
    records = await state.service.list_sessions(user, project_id)
    return [Session.from_record(r, running=state.service.is_running(r.session_id)) for r in records]


@router.get(SESSIONS + "/{session_id}", response_model=Session, responses=_NOT_FOUND)
async def get_session(session: OwnedSession, state: State) -> Session:
    return Session.from_record(session, running=state.service.is_running(session.session_id))


HISTORY_LIMIT_MAX = 100_000


@router.get(
    SESSIONS + "/{session_id}/history",
    response_model=SessionHistory,
    responses={**_NOT_FOUND, 422: {"description": "limit is not an integer from 1 to 100000"}},
)
async def get_history(
    session: OwnedSession,
    user: CurrentUser,
    state: State,
    reveal: bool = Query(False, description="A fault-injection session: show the faults (tool calls)"),
    limit: int | None = Query(
        None, ge=1, le=HISTORY_LIMIT_MAX,
        description="Only the last N messages (GNS3 3.1's parameter); without it, the whole conversation",
    ),
) -> SessionHistory:
    """The stored conversation: user, assistant (with tool calls) and tool messages, oldest first.

    A fault-injection session (``chat/inject``) hides its tool calls' arguments and
    results unless ``reveal=true`` (only its owner, or a superadmin, reaches it).
    ``limit`` keeps the last N messages, as 3.1 does; their ids stay those of the
    whole conversation. (3.1's default is 100; ours is everything, which 3.1's web
    UI, never sending ``limit``, also gets from 3.1 for conversations under 100.)
    """
    messages = await session_history(state.service, user, session.session_id, reveal=reveal)
    first = 0 if limit is None else max(0, len(messages) - limit)
    return SessionHistory(
        session_id=session.session_id,
        thread_id=session.session_id,
        title=session.title,
        messages=[HistoryMessage.from_stored(m, f"{session.session_id}-{i}")
                  for i, m in enumerate(messages) if i >= first],
        created_at=session_timestamp(session.created_at),
        updated_at=session_timestamp(session.updated_at),
    )


@router.patch(
    SESSIONS + "/{session_id}",
    response_model=Session,
    responses={
        **_NOT_FOUND,
        413: {"description": "Request body too large"},
        422: {"description": "Invalid title (empty, blank or too long)"},
    },
)
async def rename_session(session: OwnedSession, body: SessionUpdate, user: CurrentUser, state: State) -> Session:
    record = await state.service.rename(user, session.session_id, body.title)
    return Session.from_record(record, running=state.service.is_running(record.session_id))


@router.delete(SESSIONS + "/{session_id}", status_code=status.HTTP_204_NO_CONTENT, responses=_NOT_FOUND)
async def delete_session(session: OwnedSession, user: CurrentUser, state: State) -> None:
    """Delete the session and its conversation (a run in progress is aborted first)."""
    await state.service.delete(user, session.session_id)


@router.put(SESSIONS + "/{session_id}/pin", response_model=Session, responses=_NOT_FOUND)
async def pin_session(session: OwnedSession, user: CurrentUser, state: State) -> Session:
    """Pin the session: pinned sessions are listed first (GNS3 3.1)."""
    record = await state.service.pin(user, session.session_id, True)
    return Session.from_record(record, running=state.service.is_running(record.session_id))


@router.delete(SESSIONS + "/{session_id}/pin", response_model=Session, responses=_NOT_FOUND)
async def unpin_session(session: OwnedSession, user: CurrentUser, state: State) -> Session:
    record = await state.service.pin(user, session.session_id, False)
    return Session.from_record(record, running=state.service.is_running(record.session_id))


@router.post(
    SESSIONS + "/{session_id}/abort",
    response_model=AbortResult,
    responses={**_NOT_FOUND, 409: {"description": "The session has no run in progress"}},
)
async def abort_session(session: OwnedSession, user: CurrentUser, state: State) -> AbortResult:
    """Cancel the session's run and answer once it has stopped and saved its partial answer;
    its stream ends with ``abort`` then ``done``."""
    await state.service.abort(user, session.session_id)
    return AbortResult(session_id=session.session_id)


@router.get(
    SESSIONS + "/{session_id}/context",
    response_model=ContextReport,
    responses={
        400: {"description": "No LLM is configured"},
        **_NOT_FOUND,
        404: {"description": "No such project, session of this user in it, or LLM config"},
        422: {"description": "Invalid mode"},
    },
)
async def preview_context(
    session: OwnedSession,
    user: CurrentUser,
    state: State,
    groups: GroupIds,
    mode: Mode | None = None,
    llm_config_id: str | None = Query(None, description="Budget for this config (default: the user's default)"),
) -> ContextReport:
    """The budget report the next model call would start from, without calling the LLM."""
    llm_config = await state.llm_config_for(user.user_id, llm_config_id, groups)
    report = await state.service.preview_context(
        user, session.session_id, llm_config=llm_config, mode=state.mode(mode, llm_config)
    )
    return ContextReport.model_validate(report)

