"""Fault injection (GNS3 3.1's ``chat/inject``), and revealing and reverting the faults injected.

``POST /v3/copilot/projects/{project_id}/chat/inject`` takes 3.1's request and
answers with 3.1's event stream: a run in lab-automation mode with the
fault-injection prompt, through our tools, so GNS3's RBAC (the caller's token),
the console command policy, approval and audit all apply. Its lab-changing tool
calls are recorded as faults; its session's history hides them. Whoever
injected them (or a superadmin) reads them with ``GET .../faults`` and undoes
one with ``POST .../faults/{fault_id}/revert``: a node stopped or suspended is
started, a link is put back as it was (suspended or not, its filters), a device
address gets its previous value (read from the device before the change). The
revert runs the recorded undo call through the same tool as the caller, so
GNS3's RBAC, the console policy and the audit apply, through the tool gate
like every other call; it asks no second approval: the POST is the caller's
explicit decision about exactly the call ``GET .../faults`` shows as ``undo``,
and the audit records it as approved by them under the approval id
``revert:<fault_id>``, with the digest of that call in the project.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter, Request
from langchain_core.tools import ToolException
from pydantic import ValidationError

from ...agent.model.prompts import FAULT_INJECTION
from ...errors import CopilotError, ErrorKind
from ...service.copilot import User
from ...service.faults import FaultRecord
from ...tools.approval import ApprovalGrant
from ...tools.errors import TOOL_ERRORS, failure_outcome
from ...tools.gate import ToolGate
from ...tools.links import UPDATE_LINK
from ...tools.permissions import PermissionRefused
from ...tools.toolset import RunContext, build_tools
from ..dependencies import CurrentUser, GroupIds, ProjectId, State, session_for_chat
from ..errors import ModeNotAllowedError
from ..schemas import ChatResult, Fault, InjectRequest, session_timestamp
from ..state import CopilotState
from .chat import respond

log = logging.getLogger(__name__)

router = APIRouter()

INJECTION_MODE = "lab_automation"
NODE_ACTION = "gns3_node_action"
CONFIG_COMMANDS = "gns3_config_commands"
UNDO_NODE_ACTION = {"stop": "start", "suspend": "start"}
REVERTING_TOOLS = {NODE_ACTION, UPDATE_LINK, CONFIG_COMMANDS}
"""The tools a recorded undo may call (a stored record naming another is not run)."""


class FaultNotFoundError(CopilotError):
    """No such fault injected by this user in this project (other users' look the same)."""

    kind = ErrorKind.NOT_FOUND
    code = "fault_not_found"


class NotRevertibleError(CopilotError):
    """A fault the copilot cannot undo by itself (what it replaced is not known): undo it by hand."""

    kind = ErrorKind.CONFLICT
    code = "fault_not_revertible"


class RevertDeniedError(CopilotError):
    """GNS3 does not let the caller make the change that would revert the fault."""

    kind = ErrorKind.FORBIDDEN
    code = "fault_revert_denied"


def _undo(record: FaultRecord) -> dict[str, Any] | None:
    """The tool call (``{"tool", "args"}``) that undoes the fault, if the copilot knows one.

    Recorded with the fault when the tool read what it replaced (links, device
    addresses); for a node stopped or suspended, starting it again.
    """
    if record.undo is not None:
        return record.undo if record.undo.get("tool") in REVERTING_TOOLS else None
    action = UNDO_NODE_ACTION.get(str(record.args.get("action")))
    if record.tool != NODE_ACTION or action is None or not record.args.get("nodes"):
        return None
    return {"tool": NODE_ACTION, "args": {"action": action, "nodes": list(record.args["nodes"])}}


def _view(record: FaultRecord) -> Fault:
    return Fault(
        fault_id=record.fault_id, session_id=record.session_id, project_id=record.project_id,
        user_id=record.user_id, tool=record.tool, args=record.args, status=record.status, output=record.output,
        created_at=session_timestamp(record.created_at),
        reverted_at=session_timestamp(record.reverted_at) if record.reverted_at else None,
        revertible=_undo(record) is not None and record.reverted_at is None,
        undo=_undo(record),
    )


@router.post(
    "/projects/{project_id}/chat/inject",
    response_model=ChatResult,
    responses={
        200: {"description": "text/event-stream, as chat/stream", "content": {"text/event-stream": {}}},
        400: {"description": "No LLM is configured"},
        403: {"description": "No access to the project, or an LLM endpoint this user may not use"},
        404: {"description": "No such project, session or LLM config"},
        409: {"description": "The session is busy, waits for an approval, or is a plain chat"},
        413: {"description": "Request body too large"},
        422: {"description": "Invalid body, or this server does not offer lab automation"},
    },
)
async def inject(
    body: InjectRequest, request: Request, project_id: ProjectId, user: CurrentUser, state: State, groups: GroupIds
) -> object:
    """Break the lab for a student to troubleshoot (GNS3 3.1's "Inject Fault").

    The faults are made by the copilot's own tools, acting as the caller: GNS3
    refuses what the caller may not do, configuration commands wait for the
    caller's approval (``confirm``), and everything sent to a device is audited.
    """
    if body.session_id is not None:
        await session_for_chat(state, user, body.session_id, project_id)
    if INJECTION_MODE not in state.settings.modes:
        raise ModeNotAllowedError("Fault injection needs the lab_automation mode, which this server does not offer")
    llm_config = await state.llm_config_for_run(user, body.llm_config_id, groups)
    record, events = await state.service.chat(
        user, project_id, body.message, llm_config=llm_config, session_id=body.session_id, mode=INJECTION_MODE,
        kind=FAULT_INJECTION,
    )
    return await respond(request, record.session_id, events, body.stream)


async def _faults(state: CopilotState, project_id: str, user: User) -> list[FaultRecord]:
    if state.storage.faults is None:
        return []
    return await state.storage.faults.list(project_id, None if user.is_superadmin else user.user_id)


@router.get("/projects/{project_id}/faults", response_model=list[Fault])
async def list_faults(project_id: ProjectId, user: CurrentUser, state: State) -> list[Fault]:
    """The faults the caller injected in the project (a superadmin: everyone's), oldest first."""
    return [_view(r) for r in await _faults(state, project_id, user)]


@router.post(
    "/projects/{project_id}/faults/{fault_id}/revert",
    response_model=Fault,
    responses={404: {"description": "No such fault of this user"},
               409: {"description": "Already reverted, or not revertible by the copilot (undo it by hand)"}},
)
async def revert_fault(fault_id: str, project_id: ProjectId, user: CurrentUser, state: State) -> Fault:
    """Undo the fault through the tool that made it, as the caller (see the module's docstring)."""
    records = await _faults(state, project_id, user)
    record = next((r for r in records if r.fault_id == fault_id), None)
    if record is None:
        raise FaultNotFoundError(f"Fault {fault_id} not found")
    if record.reverted_at is not None:
        raise NotRevertibleError(f"Fault {fault_id} was already reverted")
    undo = _undo(record)
    if undo is None:
        raise NotRevertibleError(
            f"Fault {fault_id} ({record.tool}) cannot be undone by the copilot: undo it by hand "
            "(GET .../faults shows what was changed)"
        )
    newer = _newer_filters_fault(records, record, undo)
    if newer is not None:
        raise NotRevertibleError(
            f"Fault {newer.fault_id} changed this link's filters after fault {fault_id}: revert it first "
            "(reverting this one now would also undo it, and reverting that one later would bring this one back)"
        )
    faults = state.storage.faults
    assert faults is not None
    if not await faults.claim_revert(fault_id):  # another request is reverting it, or did
        raise NotRevertibleError(f"Fault {fault_id} was already reverted")
    try:
        await _run_undo(state, user, project_id, record, undo)
    except BaseException:
        await faults.release_revert(fault_id)
        raise
    log.info("Fault %s of project %s reverted by %s", fault_id, project_id, user.username)
    reverted = await faults.mark_reverted(fault_id)
    assert reverted is not None
    return _view(reverted)


def _newer_filters_fault(records: list[FaultRecord], record: FaultRecord, undo: Mapping[str, Any]) -> FaultRecord | None:
    """A later, unreverted fault that also replaced the filters of the link this undo restores.

    A link's filters are replaced as a whole, so filter faults on one link revert newest first.
    """
    args = undo.get("args") or {}
    if undo.get("tool") != UPDATE_LINK or "filters" not in args:
        return None
    for other in records:
        other_args = (other.undo or {}).get("args") or {}
        if (other.created_at > record.created_at and other.reverted_at is None
                and (other.undo or {}).get("tool") == UPDATE_LINK
                and other_args.get("link_id") == args.get("link_id") and "filters" in other_args):
            return other
    return None



async def _run_undo(
    state: CopilotState, user: User, project_id: str, record: FaultRecord, undo: Mapping[str, Any]
) -> None:
    """Run the undo call with the caller's rights; a failure to revert is a 409 (403 if GNS3 refuses)."""
    context = RunContext(lambda: state.gns3_client(user.token), project_id, user.username, record.session_id,
                         user.user_id)
    tools = await asyncio.to_thread(build_tools, context, state.console)  # pydantic work: off the loop
    gate = ToolGate(tools, errors=TOOL_ERRORS)
    if gate.tool(undo["tool"]) is None:
        raise NotRevertibleError(f"{undo['tool']} is not available on this server: undo the fault by hand")
    call = {"name": undo["tool"], "args": dict(undo["args"]), "id": ""}
    scope = {"project_id": project_id, "fault_id": record.fault_id}
    # Approved by the caller's POST, bound to exactly this call in this project (the audit records it).
    grant = ApprovalGrant(f"revert:{record.fault_id}", gate.digest([call], **scope), user.username, time.time())
    outcome = await gate.run(call, approved=gate.verify(grant, [call], **scope))
    exc = outcome.error
    if isinstance(exc, PermissionRefused):
        raise RevertDeniedError(f"Fault {record.fault_id} was not reverted: {exc}") from exc
    if isinstance(exc, ValidationError):  # what GNS3 held before is not something the tool accepts back
        raise NotRevertibleError(f"Fault {record.fault_id} was not reverted: {exc.errors()[0]['msg']}") from exc
    if isinstance(exc, ToolException):
        failed = failure_outcome(exc)
        if undo["tool"] == CONFIG_COMMANDS and failed is not None:  # the batch was blocked or stopped part-way
            raise NotRevertibleError(_not_restored(failed)) from exc
        raise NotRevertibleError(f"Fault {record.fault_id} was not reverted: {exc}") from exc
    if exc is not None:  # not a tool's own failure: the error tree answers it (a bug: 500, logged by the gate)
        raise exc
    if outcome.status != "success":
        raise NotRevertibleError(f"Fault {record.fault_id} was not reverted: {outcome.reason}")
    result = outcome.result
    if not isinstance(result, Mapping):
        return
    if result.get("failed"):
        raise NotRevertibleError(f"GNS3 did not restart every node: {result.get('results')}")
    if undo["tool"] == CONFIG_COMMANDS and result.get("status") != "ok":  # the commands ran, some said no
        raise NotRevertibleError(_not_restored(result))


def _not_restored(result: Mapping[str, Any]) -> str:
    """Why a device's restoring batch did not restore it: what stopped it, or each command that failed."""
    reason = result.get("error") or "; ".join(
        f"{r['command']}: {r.get('reason') or ', '.join(r.get('errors') or []) or r['status']}"
        for r in result.get("results") or [] if r.get("status") != "ok")
    return f"{result.get('device')} was not restored ({result.get('status')}): {reason}"
