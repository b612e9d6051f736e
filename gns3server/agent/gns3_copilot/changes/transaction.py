"""A configuration change as one transaction: baseline, apply, verify, with its diff and its way back.

:class:`ChangeTransaction` is what ``gns3_config_commands`` runs (so every caller of
the tool gate gets it: the agent, 3.1's chat, MCP, a revert). For one device:

1. **baseline**: one read-only batch (the console policy and audit apply) of what the
   family's profile calls configuration, the state its checks read (interfaces,
   addresses, OSPF and BGP neighbours, routes) and what the undo plan needs;
   the configuration is kept as a versioned backup;
2. **apply**: the approved commands (``config_undo.with_undo`` runs them between its
   captures: the first is served from the baseline, the second read after the change);
3. **verify**: the checks the change implies (``checks.implied``) read until decided;
4. **after**: the configuration and the state read again;

and the result carries per device the diff of configuration and of state, every
check's verdict with the values read and the readings they came from, and the
rollback computed from the baseline (``ios_rollback`` for the IOS family, the
recorded inverse for VPCS and Linux), recorded in the change store and summed up
in the audit. In a fault-injection run nothing is verified (breaking is the point):
the rollback is the fault's undo.

Everything it sends goes through the caller's ``run`` (the console runner, under the
run's policy, locks, audit and approval): the transaction itself never opens a console.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..checks import (
    Check,
    CheckReport,
    CheckSpec,
    DeviceState,
    Reading,
    commands_for,
    held_before,
    implied_checks,
    run_checks,
    state_of,
)
from ..tools import config_undo, ios_rollback
from .diff import config_diff, state_diff
from .profiles import ChangeProfile, profile_for
from .store import ChangeRecord, ChangeStore

log = logging.getLogger(__name__)

__all__ = ["ChangeTransaction", "Outcome", "RunBatch", "Target", "readings_of"]

RunBatch = Callable[[list[str], str], Awaitable[dict[str, Any]]]
"""``run(commands, mode)``: the device's batch result (``DeviceResult.as_dict()``), mode ``show`` or ``config``."""
Notify = Callable[[str, str, str], Awaitable[None]]
"""``note(command, outcome, detail)``: one line in the console audit for the device."""
DEFAULT_VERIFY_SECONDS = 60.0
"""The longest a change's implied checks may wait (``[Copilot] verify_seconds``)."""


@dataclass(frozen=True)
class Target:
    """The device a change is for: its name, GNS3 node id, and CLI family (the driver's name)."""

    device: str
    node_id: str
    family: str


@dataclass(frozen=True)
class Who:
    project_id: str
    session_id: str
    username: str
    approval_id: str | None = None


@dataclass
class Outcome:
    """The change's batch result, and what the transaction adds to it (``change``) and the fault's ``undo``."""

    result: dict[str, Any]
    change: dict[str, Any] = field(default_factory=dict)
    undo: config_undo.Undo | None = None


def readings_of(device: str, batch: Mapping[str, Any], at: float) -> list[Reading]:
    """A batch result's commands as readings (``at``: when the batch's answers came)."""
    return [Reading(device, str(r.get("command")), at, str(r.get("status")), str(r.get("output") or ""), r.get("data"))
            for r in batch.get("results") or []]


def _sent(result: Mapping[str, Any]) -> bool:
    return result.get("status") != "blocked"  # refused before anything was sent


class ChangeTransaction:
    """One device's change (see the module's docstring). ``verify=False``: a fault injection."""

    def __init__(
        self, target: Target, commands: Sequence[str], run: RunBatch, *, who: Who, store: ChangeStore | None,
        note: Notify | None = None, verify: bool = True, verify_seconds: float = DEFAULT_VERIFY_SECONDS,
        clock: Callable[[], float] = time.time, interval: float = 1.0,
    ) -> None:
        self.target = target
        self.commands = [c for c in commands if c.strip()]
        self._run = run
        self._who = who
        self._store = store
        self._note = note
        self._verify = verify
        self._cap = verify_seconds
        self._clock = clock
        self._interval = interval
        self.profile: ChangeProfile = profile_for(target.family)
        self.change_id = str(uuid.uuid4())

    async def _read(self, commands: Sequence[str]) -> tuple[dict[str, Any], list[Reading]]:
        batch = await self._run(list(commands), "show")
        return batch, readings_of(self.target.device, batch, self._clock())

    async def _state(self, readings: Sequence[Reading]) -> DeviceState:
        return await asyncio.to_thread(state_of, self.target.device, self.target.family, readings,
                                       list(self.profile.state))

    async def run(self) -> Outcome:
        target, profile = self.target, self.profile
        undo_plan = config_undo.plan(target.family, self.commands)
        state_commands = commands_for(target.family, profile.state)
        baseline_commands = list(dict.fromkeys([*profile.config, *state_commands, *undo_plan.snapshot]))
        base_batch, base = await self._read(baseline_commands) if baseline_commands else ({}, [])
        by_command = {r.command: r for r in base}
        baseline_ok = bool(base) and base_batch.get("status") == "ok"
        served = {"first": True}
        self._after_config: dict[str, Reading] = {}

        async def read(snapshot: list[str]) -> list[str] | None:
            """with_undo's captures: the first from the baseline, the second read now."""
            if served["first"]:
                served["first"] = False
                got = [by_command.get(c) for c in snapshot]
                return [r.output for r in got if r is not None] if all(r is not None and r.ok for r in got) else None
            batch, readings = await self._read(snapshot)
            self._after_config = {r.command: r for r in readings}
            return [r.output for r in readings] if batch.get("status") == "ok" else None

        backup = await self._back_up(by_command) if baseline_ok else None
        result, undo = await config_undo.with_undo(
            undo_plan, read, lambda: self._run(self.commands, "config"), sent=_sent)
        applied_at = self._clock()
        if not _sent(result):
            return Outcome(result, {}, undo)
        change: dict[str, Any] = {"change_id": self.change_id, "family": target.family}
        if profile.note:
            change["note"] = profile.note
        if backup is not None:
            change["backup"] = {"backup_id": backup[0], "version": backup[1]}
        baseline_state = await self._state(base) if baseline_ok else None
        report: CheckReport | None = None
        checks: list[Check] = []
        if self._verify and baseline_state is not None and result.get("status") in ("ok", "error"):
            checks = implied_checks(baseline_state, self.commands, cap=self._cap)
            if checks:
                report = await run_checks(checks, {target.device: target.family}, self._read_for_checks,
                                          start=applied_at, interval=self._interval)
        after_commands = [c for c in dict.fromkeys([*profile.config, *state_commands]) if c not in self._after_config]
        _, after = await self._read(after_commands) if after_commands else ({}, [])
        after_by_command = {**{r.command: r for r in after}, **self._after_config}
        change["diff"] = await self._diff(by_command, after_by_command, baseline_state)
        if report is not None:
            change["checks"] = report.as_dict()
        elif self._verify:
            change["checks"] = {"passed": None, "checks": [], "summary": self._unverified(baseline_ok, result)}
        change["rollback"] = self._rollback(undo, checks)
        if change["rollback"].get("commands") and "expects" not in change["rollback"]:
            left = await self._left(after_by_command)
            if left is not None:
                change["rollback"]["expects"] = left
        verified = "none" if report is None else "pass" if report.passed else "fail"
        change["verified"] = verified
        if verified == "fail" and change["rollback"].get("commands"):
            # Said in the result rather than the system prompt: it costs tokens only when a check failed.
            change["next"] = ("A check failed: tell the user what the evidence shows, and propose rollback.commands "
                              "as gns3_config_commands (the user approves it); then gns3_verify rollback.verify.")
        await self._record(result, change, verified, backup[0] if backup else None)
        return Outcome(result, change, undo)

    async def _read_for_checks(self, device: str, commands: list[str]) -> list[Reading]:
        return (await self._read(commands))[1]

    def _unverified(self, baseline_ok: bool, result: Mapping[str, Any]) -> str:
        if not baseline_ok:
            return f"not verified: {self.target.device}'s state could not be read before the change"
        if result.get("status") not in ("ok", "error"):
            return "not verified: the batch stopped part-way"
        return "no check applies: nothing was read before the change that the change could break"

    async def _back_up(self, by_command: Mapping[str, Reading]) -> tuple[str, int] | None:
        profile = self.profile
        if self._store is None or not profile.config:
            return None
        captures = [by_command[c].output for c in profile.config if c in by_command]
        if len(captures) != len(profile.config):
            return None
        fingerprint = await asyncio.to_thread(self._fingerprint, captures)
        backup = await self._store.back_up(
            project_id=self._who.project_id, node_id=self.target.node_id, device=self.target.device,
            driver=self.target.family, commands=profile.config, captures=captures, fingerprint=fingerprint,
            taken_by=self._who.username, reason=f"before change {self.change_id}", change_id=self.change_id)
        return backup.backup_id, backup.version

    def _fingerprint(self, captures: Sequence[str]) -> str:
        if self.profile.restore == "computed":
            return ios_rollback.fingerprint(captures[0])
        return self.profile.digest(captures)

    async def _diff(self, before: Mapping[str, Reading], after: Mapping[str, Reading],
                    baseline: DeviceState | None) -> dict[str, Any]:
        profile = self.profile
        config: list[str] | None = None
        if profile.config and all(c in before and before[c].ok for c in profile.config) \
                and all(c in after and after[c].ok for c in profile.config):
            was = [line for c in profile.config for line in profile.configuration(before[c].output)]
            now = [line for c in profile.config for line in profile.configuration(after[c].output)]
            config = await asyncio.to_thread(config_diff, was, now)
        state: list[dict[str, Any]] | None = None
        if baseline is not None and after:
            state = state_diff(baseline, await self._state(list(after.values())))
        return {"config": config, "state": state}

    async def _left(self, after: Mapping[str, Reading]) -> dict[str, Any] | None:
        """What a recorded inverse applies to: the configuration the change left (its ``commands`` and the
        fingerprint of their answers), so that its rollback can tell a device changed since."""
        config = self.profile.config
        if not config or not all(c in after and after[c].ok for c in config):
            return None
        digest = await asyncio.to_thread(self.profile.digest, [after[c].output for c in config])
        return {"commands": list(config), "after": digest}

    def _rollback(self, undo: config_undo.Undo, checks: Sequence[Check]) -> dict[str, Any]:
        """The way back, and the change's checks as ``gns3_verify`` lines (``verify``): a rollback is
        verified by the checks that judged what the device held before the change (not what the change
        asked for: the rollback takes that away), each given the transaction's whole wait (what broke
        needs time to come back, e.g. an OSPF adjacency)."""
        if undo.commands is None:
            return {"commands": None, "reason": undo.reason or "the previous settings could not be read"}
        rollback: dict[str, Any] = {"commands": list(undo.commands)}
        if undo.expects is not None:
            rollback["expects"] = dict(undo.expects)
        if any(held_before(c) for c in checks):
            rollback["verify"] = list(dict.fromkeys(
                CheckSpec.of(c).model_copy(update={"within": self._cap}).line() for c in checks if held_before(c)))
        return rollback

    async def _record(self, result: Mapping[str, Any], change: dict[str, Any], verified: str,
                      backup_id: str | None) -> None:
        if self._store is not None:
            await self._store.record(ChangeRecord(
                self.change_id, self._who.project_id, self._who.session_id, self._who.username, self.target.device,
                self.target.node_id, self.target.family, self.commands, str(result.get("status")), verified, change,
                backup_id, self._who.approval_id, created_at=self._clock()))
        if self._note is not None:
            summary = (change.get("checks") or {}).get("summary") or ""
            lines = len((change.get("diff") or {}).get("config") or [])
            await self._note("<change>", {"pass": "verified", "fail": "checks_failed"}.get(verified, "unverified"),
                             f"change {self.change_id}: {lines} configuration diff lines; {summary}".strip())
