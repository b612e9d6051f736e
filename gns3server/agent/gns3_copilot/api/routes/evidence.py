"""A session's evidence: what its tools read from devices, each record with its output."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Path

from ..dependencies import CurrentUser, OwnedSession, State
from ..schemas import EvidenceRecord
from .sessions import SESSIONS

router = APIRouter()

EVIDENCE = SESSIONS + "/{session_id}/evidence"
_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    403: {"description": "GNS3 does not let this user read the project"},
    404: {"description": "No such project, session of this user in it, or evidence record in the session"},
}


@router.get(EVIDENCE, response_model=list[EvidenceRecord], responses=_NOT_FOUND)
async def list_evidence(session: OwnedSession, user: CurrentUser, state: State) -> list[EvidenceRecord]:
    """Every device read the session's tools made, oldest first (without the outputs)."""
    records = await state.service.evidence(user, session.session_id)
    return [EvidenceRecord.from_evidence(r) for r in records]


@router.get(EVIDENCE + "/{evidence_id}", response_model=EvidenceRecord, responses=_NOT_FOUND)
async def get_evidence(
    session: OwnedSession, user: CurrentUser, state: State,
    evidence_id: str = Path(max_length=16, description="The record's id in the session, e.g. E3"),
) -> EvidenceRecord:
    """One read: the device, the command, when, and the output as the device gave it (secrets masked)."""
    (record,) = await state.service.evidence(user, session.session_id, evidence_id)
    return EvidenceRecord.from_evidence(record, with_output=True)
