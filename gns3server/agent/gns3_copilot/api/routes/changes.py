"""Changes, configuration backups, lab snapshots and checks on demand, per project.

* ``GET .../changes``: the configuration changes made in the project (the caller's; a
  superadmin's: everyone's), newest first, each with its diff, checks and rollback;
* ``GET .../backups[?node_id=]``: the configuration backups taken before every change,
  newest first, numbered per device; ``GET .../backups/{id}/diff``: the device's
  configuration now against the backup (read now, through the tool gate);
  ``POST .../backups/{id}/restore``: the device put back to the backup: for the IOS
  family the commands computed from the configuration now to the backup's
  (``ios_rollback``), for VPCS its addressing typed again; the POST is the caller's
  approval of exactly that restore (approval id ``restore:<backup_id>`` in the audit),
  and the device's configuration is read again after it, like a fault's revert;
* ``GET .../snapshots`` and ``POST .../snapshots/{id}/restore``: GNS3's own snapshot
  routes, with the caller's token (GNS3 decides: ``Snapshot.Audit``, ``Snapshot.Restore``);
  the copilot takes one before a batch that changes several devices;
* ``POST .../changes/{id}/rollback``: the change's recorded rollback, approved by that POST
  (``rollback:<change_id>`` in the audit), run through the tool gate as the caller (a change
  transaction itself), then the change's checks run again (``gns3_verify``); it runs only
  on a device that still holds what the change left (read first: a computed rollback's
  fingerprints, a recorded inverse's configuration);
* ``POST .../verify``: ``gns3_verify`` run through the tool gate as the caller (read-only,
  the console policy and the audit apply), its report as the answer.

Backups hold device configurations: a backup is shown only to who GNS3 lets use the
device's console (``Node.Console``, asked in-process), and every read and restore goes
through the console tools, so the command policy and the audit apply.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import uuid
from collections.abc import Mapping
from typing import Annotated, Any

from fastapi import APIRouter, Query
from langchain_core.tools import ToolException
from pydantic import BaseModel, Field, StringConstraints, ValidationError

from ...changes.diff import config_diff
from ...changes.profiles import profile_for
from ...changes.store import Backup, ChangeRecord, ChangeStore
from ...errors import CopilotError, ErrorKind
from ...service.copilot import User
from ...tools import ios_rollback
from ...tools.approval import ApprovalGrant
from ...tools.config_undo import holds, vpcs_undo
from ...tools.errors import TOOL_ERRORS
from ...tools.gate import Approved, ToolGate, ToolOutcome
from ...tools.permissions import NODE_CONSOLE, console_path
from ...tools.toolset import RunContext, build_tools
from ...tools.verify import MAX_CHECKS, VERIFY
from ..dependencies import CurrentUser, ProjectId, State
from ..state import CopilotState

log = logging.getLogger(__name__)

router = APIRouter()

CONFIG_COMMANDS = "gns3_config_commands"
SHOW_COMMANDS = "gns3_show_commands"


class BackupNotFoundError(CopilotError):
    """No such backup in this project, or one of a device the caller may not use the console of."""

    kind = ErrorKind.NOT_FOUND
    code = "backup_not_found"


class NotRestorableError(CopilotError):
    """The backup cannot be put back by the copilot (its family, or the device's answer)."""

    kind = ErrorKind.CONFLICT
    code = "backup_not_restorable"


class ChecksFailedToRunError(CopilotError):
    """The checks could not be run (a device not found, its console refused, a check not understood)."""

    kind = ErrorKind.INVALID
    code = "checks_not_run"


class ChangeNotFoundError(CopilotError):
    """No such change in this project, or another user's (a superadmin sees everyone's)."""

    kind = ErrorKind.NOT_FOUND
    code = "change_not_found"


class NotRollbackableError(CopilotError):
    """The change has no rollback, was rolled back already, or its device no longer holds what it left."""

    kind = ErrorKind.CONFLICT
    code = "change_not_rollbackable"


class VerifyRequest(BaseModel):
    checks: list[Annotated[str, StringConstraints(max_length=300)]] = Field(min_length=1, max_length=MAX_CHECKS)
    driver: str | None = Field(None, description="The CLI family, when GNS3's node type does not tell it")


def _store(state: CopilotState) -> ChangeStore:
    store = state.console.changes
    if store is None:
        raise BackupNotFoundError("This server keeps no changes or backups")
    return store


async def _tools_gate(state: CopilotState, user: User, project_id: str, session_id: str) -> ToolGate:
    context = RunContext(lambda: state.gns3_client(user.token), project_id, user.username, session_id, user.user_id)
    tools = await asyncio.to_thread(build_tools, context, state.console)  # pydantic work: off the loop
    return ToolGate(tools, errors=TOOL_ERRORS)


async def _may_use_console(state: CopilotState, user: User, project_id: str, node_id: str) -> bool:
    authorize = state.console.permissions(user.user_id)
    return await authorize(NODE_CONSOLE, console_path(project_id, node_id)) == "allowed"


@router.get("/projects/{project_id}/changes")
async def list_changes(project_id: ProjectId, user: CurrentUser, state: State,
                       device: str | None = None) -> list[dict[str, Any]]:
    """The project's configuration changes made by the caller (a superadmin: everyone's), newest first."""
    store = _store(state)
    records = await store.changes(project_id, username=None if user.is_superadmin else user.username, device=device)
    return [dataclasses.asdict(r) for r in records]


async def _change(state: CopilotState, user: User, project_id: str, change_id: str) -> ChangeRecord:
    record = await _store(state).change(change_id)
    if record is None or record.project_id != project_id or (
            record.username != user.username and not user.is_superadmin):
        raise ChangeNotFoundError(f"Change {change_id} not found")
    return record


@router.post("/projects/{project_id}/changes/{change_id}/rollback",
             responses={404: {"description": "No such change, or another user's"},
                        409: {"description": "No rollback, rolled back already, or the device changed since"}})
async def rollback_change(change_id: str, project_id: ProjectId, user: CurrentUser, state: State) -> dict[str, Any]:
    """Run the change's recorded rollback, approved by this POST, then its checks again (see the module's docstring)."""
    record = await _change(state, user, project_id, change_id)
    rollback = record.rollback
    commands = rollback.get("commands")
    if not commands:
        raise NotRollbackableError(f"Change {change_id} has no rollback: {rollback.get('reason') or 'none recorded'}")
    if record.rolled_back_at is not None:
        raise NotRollbackableError(f"Change {change_id} was rolled back already by {record.rolled_back_by}")
    gate = await _tools_gate(state, user, project_id, f"rollback-{change_id}")
    call = {"name": CONFIG_COMMANDS, "args": {"device": record.device, "commands": list(commands),
                                              "driver": record.driver}, "id": ""}
    expects = rollback.get("expects")
    read = None if not isinstance(expects, Mapping) else {
        "name": SHOW_COMMANDS, "args": {"devices": [record.device], "commands": _expected_reads(expects),
                                        "driver": record.driver}, "id": ""}
    calls = [call] if read is None else [read, call]
    scope = {"project_id": project_id, "change_id": change_id}
    grant = ApprovalGrant(f"rollback:{change_id}", gate.digest(calls, **scope), user.username, time.time())
    approved = gate.verify(grant, calls, **scope)
    if read is not None and isinstance(expects, Mapping):
        # A rollback is exact only from the configuration it was computed (or recorded) on.
        outcome = await gate.run(read, approved=approved)
        answer = _answer(outcome, record.device, NotRollbackableError)
        held = await asyncio.to_thread(_held, record.driver, expects, [str(r["output"]) for r in answer["results"]])
        if held != "after":
            raise NotRollbackableError(
                f"{record.device} no longer holds what change {change_id} left ({held}): its rollback would not "
                "restore the baseline exactly; GET .../backups/{id}/diff shows what differs")
    if not await _store(state).claim_rollback(change_id, user.username):
        raise NotRollbackableError(f"Change {change_id} was rolled back already")
    outcome = await gate.run(call, approved=approved)
    if outcome.status != "success" or outcome.result.get("status") != "ok":
        await _store(state).release_rollback(change_id)
        exc = outcome.error
        if exc is not None and not isinstance(exc, (ToolException, ValidationError)):
            raise exc
        reason = outcome.reason if outcome.status != "success" else outcome.result.get("error") or "a command failed"
        raise NotRollbackableError(f"{record.device} was not rolled back: {reason}")
    report: dict[str, Any] | None = None
    if rollback.get("verify"):
        verify_call = {"name": VERIFY, "args": {"checks": list(rollback["verify"]), "driver": record.driver}, "id": ""}
        verified = await gate.run(verify_call)
        report = dict(verified.result) if verified.status == "success" else {
            "passed": None, "checks": [], "summary": f"not verified: {verified.reason}"}
    log.info("Change %s on %s rolled back by %s", change_id, record.device, user.username)
    done = await _store(state).change(change_id)
    return {"change_id": change_id, "device": record.device, "commands": list(commands), "result": outcome.result,
            "verify": report, "rolled_back_at": done.rolled_back_at if done else None}


def _expected_reads(expects: Mapping[str, Any]) -> list[str]:
    """The commands reading what a rollback applies to: a computed one's ``command``, a recorded
    inverse's ``commands`` (the family's configuration)."""
    commands = expects.get("commands")
    return [str(c) for c in commands] if isinstance(commands, list) else [str(expects.get("command"))]


def _held(driver: str, expects: Mapping[str, Any], outputs: list[str]) -> str:
    """Which state the device's answers show: ``after`` (what the change left), or another (CPU work:
    a worker thread)."""
    if isinstance(expects.get("commands"), list):
        return "after" if profile_for(driver).digest(outputs) == expects.get("after") else "other"
    return holds(expects, outputs[0])


@router.get("/projects/{project_id}/backups")
async def list_backups(project_id: ProjectId, user: CurrentUser, state: State,
                       node_id: Annotated[str | None, Query(max_length=64)] = None) -> list[dict[str, Any]]:
    """The configuration backups of the devices whose console the caller may use, newest first."""
    backups = await _store(state).backups(project_id, node_id)
    allowed = {n: await _may_use_console(state, user, project_id, n) for n in {b.node_id for b in backups}}
    return [b.summary() for b in backups if allowed[b.node_id]]


async def _backup(state: CopilotState, user: User, project_id: str, backup_id: str) -> Backup:
    backup = await _store(state).backup(backup_id)
    if backup is None or backup.project_id != project_id or not await _may_use_console(
            state, user, project_id, backup.node_id):
        raise BackupNotFoundError(f"Backup {backup_id} not found")
    return backup


async def _read(gate: ToolGate, approved: Approved | None, backup: Backup) -> list[str]:
    """The device's configuration now, by the backup's commands (read-only, through the gate)."""
    call = {"name": SHOW_COMMANDS, "args": {"devices": [backup.device], "commands": list(backup.commands),
                                            "driver": backup.driver}, "id": ""}
    outcome = await gate.run(call, approved=approved)
    answer = _answer(outcome, backup.device)
    return [r["output"] for r in answer["results"]]


def _answer(outcome: ToolOutcome, device: str, error: type[CopilotError] = NotRestorableError) -> Mapping[str, Any]:
    """A one-device read's answer; ``error`` when it could not be read."""
    exc = outcome.error
    if exc is not None and not isinstance(exc, (ToolException, ValidationError)):  # a bug: the error tree answers it
        raise exc
    if outcome.status != "success":
        raise error(f"{device} could not be read: {outcome.reason}")
    (answer,) = outcome.result["devices"]
    if answer["status"] != "ok":
        raise error(f"{device} could not be read ({answer['status']}): {answer.get('error')}")
    return answer


def _lines(backup: Backup, captures: list[str]) -> list[str]:
    profile = profile_for(backup.driver)
    return [line for capture in captures for line in profile.configuration(capture)]


@router.get("/projects/{project_id}/backups/{backup_id}",
            responses={404: {"description": "No such backup, or not one this user may see"}})
async def get_backup(backup_id: str, project_id: ProjectId, user: CurrentUser, state: State) -> dict[str, Any]:
    """One backup, with the configuration it holds."""
    backup = await _backup(state, user, project_id, backup_id)
    return {**backup.summary(), "commands": list(backup.commands), "captures": list(backup.captures)}


@router.get("/projects/{project_id}/backups/{backup_id}/diff",
            responses={404: {"description": "No such backup, or not one this user may see"},
                       409: {"description": "The device could not be read"}})
async def diff_backup(backup_id: str, project_id: ProjectId, user: CurrentUser, state: State,
                      against: str | None = None) -> dict[str, Any]:
    """The configuration from the device now (or from backup ``against``) to the backup (a unified diff)."""
    backup = await _backup(state, user, project_id, backup_id)
    if against is not None:
        now = _lines(backup, list((await _backup(state, user, project_id, against)).captures))
    else:
        gate = await _tools_gate(state, user, project_id, f"backup-{backup_id}")
        now = _lines(backup, await _read(gate, None, backup))
    diff = await asyncio.to_thread(config_diff, now, _lines(backup, list(backup.captures)))
    return {"backup_id": backup_id, "device": backup.device, "against": against or "now", "diff": diff}


@router.post("/projects/{project_id}/backups/{backup_id}/restore",
             responses={404: {"description": "No such backup, or not one this user may see"},
                        409: {"description": "Not restorable by the copilot, or the device did not end as the backup"}})
async def restore_backup(backup_id: str, project_id: ProjectId, user: CurrentUser, state: State) -> dict[str, Any]:
    """Put the device back as the backup holds it, approved by this POST (see the module's docstring)."""
    backup = await _backup(state, user, project_id, backup_id)
    profile = profile_for(backup.driver)
    if profile.restore == "none":
        raise NotRestorableError(f"{backup.device}'s backups ({backup.driver}) are kept to compare, not restored: "
                                 "restore it by hand (GET .../diff shows what differs)")
    gate = await _tools_gate(state, user, project_id, f"restore-{backup_id}")
    read = {"name": SHOW_COMMANDS, "args": {"devices": [backup.device], "commands": list(backup.commands),
                                            "driver": backup.driver}, "id": ""}
    now = await _read(gate, _approval(gate, user, project_id, backup_id, [read]), backup)
    commands = await asyncio.to_thread(_restore_commands, backup, now)
    if not commands:
        return {"backup_id": backup_id, "device": backup.device, "commands": [], "result": None}
    call = {"name": CONFIG_COMMANDS, "args": {"device": backup.device, "commands": commands,
                                              "driver": backup.driver}, "id": ""}
    approved = _approval(gate, user, project_id, backup_id, [read, call])
    outcome = await gate.run(call, approved=approved)
    if outcome.status != "success":
        raise NotRestorableError(f"{backup.device} was not restored: {outcome.reason}")
    after = await _read(gate, approved, backup)
    if _lines(backup, after) != _lines(backup, list(backup.captures)):
        raise NotRestorableError(f"{backup.device} was not restored exactly: the commands ran, but its configuration "
                                 "is not the backup's; GET .../diff shows what differs")
    log.info("Backup %s (version %d of %s) restored by %s", backup_id, backup.version, backup.device, user.username)
    return {"backup_id": backup_id, "device": backup.device, "commands": commands, "result": outcome.result}


def _approval(gate: ToolGate, user: User, project_id: str, backup_id: str, calls: list[dict[str, Any]]) -> Approved:
    scope = {"project_id": project_id, "backup_id": backup_id}
    grant = ApprovalGrant(f"restore:{backup_id}", gate.digest(calls, **scope), user.username, time.time())
    approved = gate.verify(grant, calls, **scope)
    assert approved is not None
    return approved


def _restore_commands(backup: Backup, now: list[str]) -> list[str]:
    """The commands from the configuration now to the backup's (CPU work: a worker thread)."""
    if profile_for(backup.driver).restore == "computed":
        try:
            return ios_rollback.rollback(backup.captures[0], now[0])
        except ios_rollback.NoRollback:
            if _lines(backup, now) == _lines(backup, list(backup.captures)):
                return []  # the device holds the backup already
            raise
    commands = vpcs_undo(backup.captures[0])
    if commands is None:
        raise NotRestorableError(f"{backup.device}'s backup cannot be typed again exactly (e.g. a DHCP lease)")
    return commands


@router.get("/projects/{project_id}/snapshots")
async def list_snapshots(project_id: ProjectId, user: CurrentUser, state: State) -> list[dict[str, Any]]:
    """The project's GNS3 snapshots, as GNS3 lists them to the caller."""
    async with state.gns3_client(user.token) as client:
        return await client.snapshots(project_id)


@router.post("/projects/{project_id}/snapshots/{snapshot_id}/restore",
             responses={404: {"description": "No such snapshot"}, 403: {"description": "GNS3 refuses the restore"}})
async def restore_snapshot(snapshot_id: uuid.UUID, project_id: ProjectId, user: CurrentUser,
                           state: State) -> dict[str, Any]:
    """Put the project back as the snapshot holds it (GNS3's restore: the project is closed and reopened)."""
    async with state.gns3_client(user.token) as client:
        restored = await client.restore_snapshot(project_id, str(snapshot_id))
    log.info("Snapshot %s of project %s restored by %s", snapshot_id, project_id, user.username)
    return restored


@router.post("/projects/{project_id}/verify",
             responses={413: {"description": "Request body too large"},
                        422: {"description": "A check that is not understood, or a device that cannot be read"}})
async def verify(body: VerifyRequest, project_id: ProjectId, user: CurrentUser, state: State) -> dict[str, Any]:
    """Run checks of device state now (``gns3_verify``, read-only): each verdict with the values read."""
    gate = await _tools_gate(state, user, project_id, f"verify-{uuid.uuid4().hex[:8]}")
    args: dict[str, Any] = {"checks": list(body.checks)}
    if body.driver is not None:
        args["driver"] = body.driver
    outcome = await gate.run({"name": VERIFY, "args": args, "id": ""})
    if outcome.status != "success":
        raise ChecksFailedToRunError(str(outcome.reason))
    return dict(outcome.result)
