"""``POST /v3/copilot/projects/{project_id}/chat/stream``: one message, answered as events."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from ...service.copilot import EventStream
from ..dependencies import CurrentUser, GroupIds, OwnedSession, ProjectId, State, session_for_chat
from ..schemas import ChatRequest, ChatResult, ConfirmRequest
from ..sse import SSE_HEADERS, gather_result, sse_stream, unless_disconnected

log = logging.getLogger(__name__)

router = APIRouter()

SESSION_HEADER = "X-Copilot-Session-Id"
# The id the question is stored with: the panel finds it in the history and in the budget
# report (``summary_until_id``, where the summary marker goes) without reloading the history.
MESSAGE_HEADER = "X-Copilot-Message-Id"


@router.post(
    "/projects/{project_id}/chat/stream",
    response_model=ChatResult,
    responses={
        200: {
            "description": "text/event-stream of run events (stream: true), or the gathered answer (stream: false)",
            "content": {"text/event-stream": {}},
        },
        400: {"description": "No LLM is configured"},
        403: {"description": "No access to the project, or an LLM endpoint this user may not use"},
        404: {"description": "No such project, session or LLM config"},
        409: {"description": "The session is busy with another request"},
        413: {"description": "Request body too large"},
        422: {"description": "Invalid body or mode, or an LLM config whose model cannot be built (the message says what to install or set)"},
        502: {"description": "stream: false and the run failed (the message says why)"},
    },
)
async def chat_stream(
    body: ChatRequest, request: Request, project_id: ProjectId, user: CurrentUser, state: State, groups: GroupIds
) -> object:
    """Send a message; the answer streams as Server-Sent Events, one ``data: {json}`` per event.

    Everything that can be refused is refused before the stream starts (404, 409,
    422...); after that, a failure arrives as an ``error`` event followed by
    ``done``. Closing the connection cancels the run (with ``stream: false`` too).
    """
    if body.session_id is not None:  # someone else's session is a 404 whatever else is wrong
        await session_for_chat(state, user, body.session_id, project_id)
    llm_config = await state.llm_config_for_run(user, body.llm_config_id, groups)
    mode = state.mode(body.mode, llm_config)
    message_id = str(uuid.uuid4())
    record, events = await state.service.chat(
        user, project_id, body.message, llm_config=llm_config, session_id=body.session_id, mode=mode,
        message_id=message_id,
    )
    return await respond(request, record.session_id, events, body.stream, {MESSAGE_HEADER: message_id})


@router.post(
    "/projects/{project_id}/chat/sessions/{session_id}/confirm",
    response_model=ChatResult,
    responses={
        200: {"description": "As for chat/stream: the resumed run", "content": {"text/event-stream": {}}},
        400: {"description": "No LLM is configured"},
        403: {"description": "No access to the project, or an LLM endpoint this user may not use"},
        404: {"description": "No such project, session of this user in it, or LLM config"},
        409: {
            "description": "The session is not waiting for a confirmation, or is busy, or approval_id is not the "
            "pending approval (already used, or replaced by a newer one)"
        },
        410: {"description": "approved: true for an approval that has expired (it can still be rejected)"},
        413: {"description": "Request body too large"},
        422: {"description": "Invalid body or mode, or an LLM config whose model cannot be built (the message says what to install or set)"},
    },
)
async def confirm(
    body: ConfirmRequest, request: Request, session: OwnedSession, user: CurrentUser, state: State, groups: GroupIds
) -> object:
    """Approve or reject the tool calls the session waits for (its last stream ended with ``confirm``).

    Approved calls run, rejected ones are answered "rejected" without sending
    anything; then the model goes on, streamed like ``chat/stream``. An approval
    is used once and expires; ``approval_id`` (from the ``confirm`` event) makes
    sure the decision is for the request the user saw.
    """
    llm_config = await state.llm_config_for_run(user, body.llm_config_id, groups)
    mode = state.mode(body.mode, llm_config)
    record, events = await state.service.confirm(
        user, session.session_id, body.approved, llm_config=llm_config, mode=mode, approval_id=body.approval_id
    )
    return await respond(request, record.session_id, events, body.stream)


async def respond(
    request: Request, session_id: str, events: EventStream, stream: bool, extra: Mapping[str, str] | None = None
) -> Response:
    """The run as SSE, or gathered into one JSON answer (``stream: false``); ``extra``: more headers."""
    headers = {SESSION_HEADER: session_id, **(extra or {})}
    if not stream:
        result = await unless_disconnected(request.receive, gather_result(session_id, events))
        if result is None:  # the client left; its run was cancelled
            return Response(status_code=499)
        return JSONResponse(result.model_dump(mode="json"), headers=headers)
    return StreamingResponse(
        sse_stream(events), media_type="text/event-stream", headers={**SSE_HEADERS, **headers}
    )
