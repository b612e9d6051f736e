"""``GET /v3/copilot/console/audit``: what the copilot sent to device consoles (administrators)."""

from __future__ import annotations

from fastapi import APIRouter, Query

from ...service.session_ids import canonical_session_id
from ..dependencies import CurrentUser, State
from ..errors import AdminOnlyError
from ..schemas import ConsoleAuditEntry

router = APIRouter()


@router.get(
    "/audit",
    response_model=list[ConsoleAuditEntry],
    responses={403: {"description": "Only a GNS3 superadmin may read the audit log"}},
)
async def list_audit(
    user: CurrentUser,
    state: State,
    username: str | None = Query(None, description="Only commands sent for this GNS3 user"),
    session_id: str | None = Query(None, description="Only this copilot session"),
    project_id: str | None = Query(None, description="Only this project"),
    device: str | None = Query(None, description="Only this node name"),
    outcome: str | None = Query(None, description="ok, error, timeout, blocked, not_run or failed"),
    since: float | None = Query(None, description="Only entries at or after this time (seconds since the epoch)"),
    limit: int = Query(100, ge=1, le=1000),
) -> list[ConsoleAuditEntry]:
    """Every command the copilot sent, or refused to send, to a device; newest first."""
    if not user.is_superadmin:
        raise AdminOnlyError("Only an administrator may read the console audit log")
    entries = await state.console.audit.entries(
        user=username, session=canonical_session_id(session_id) if session_id else None, project=project_id,
        device=device, outcome=outcome, since=since, limit=limit,
    )
    return [ConsoleAuditEntry.model_validate(e, from_attributes=True) for e in entries]
