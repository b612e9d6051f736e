"""Run a batch of commands on one device: policy, lock, console, audit.

The order matters: every command is checked against the policy before anything
is sent (one blocked command stops the whole batch, so a half-applied change
never happens); then the device's lock is taken, the console opened and the
commands run one by one; each command is audited with its outcome, in one write
per batch, also when the batch is cancelled (the command in flight then as
"failed": it may have been sent). One deadline bounds the whole call, lock wait
included.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from ..as_data import as_data
from .audit import AuditLog, Who
from .drivers import Driver, DriverSession
from .locks import DeviceBusyError, DeviceLocks
from .policy import Policy
from .telnet import DEFAULT_MAX_OUTPUT, ConsoleClosed, ConsoleConnectError, ConsoleError, ConsoleTimeout, TelnetConsole

log = logging.getLogger(__name__)

Mode = Literal["show", "config"]
Status = Literal["ok", "error", "timeout", "blocked", "not_run", "failed"]


@dataclass(frozen=True)
class Device:
    """A device reachable on a telnet console."""

    name: str
    host: str
    port: int
    driver: Driver
    # What GNS3 says of the node ("started", "stopped" ...), used to explain an unreachable console.
    reported_status: str | None = None
    # Whether the node's CLI is known (drivers.cli_known); if not, the policy judges every CLI's grammar.
    cli_known: bool = True


@dataclass
class CommandResult:
    command: str
    status: Status
    output: str = ""
    errors: list[str] = field(default_factory=list)
    reason: str = ""


@dataclass
class DeviceResult:
    device: str
    status: Literal["ok", "error", "blocked", "failed"]
    results: list[CommandResult]
    error: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


async def run_commands(
    device: Device,
    commands: Sequence[str],
    *,
    mode: Mode,
    policy: Policy,
    locks: DeviceLocks,
    audit: AuditLog,
    who: Who,
    timeout: float = 30.0,
    max_output: int = DEFAULT_MAX_OUTPUT,
) -> DeviceResult:
    """Run ``commands`` on ``device`` in ``mode`` ("show" is read-only, "config" enters config mode)."""
    commands = [c.strip() for c in commands if c.strip()]
    # Parsing a batch (up to 64 lines of 1,000 characters) is CPU work: off the event loop.
    decisions = await asyncio.to_thread(
        lambda: [policy.check(c, family=device.driver.name if device.cli_known else None, read_only=mode == "show")
                 for c in commands]
    )
    if not all(d.allowed for d in decisions):
        refused = [
            CommandResult(c, "not_run", reason="not sent: another command of the batch is blocked")
            if d.allowed
            else CommandResult(c, "blocked", reason=d.reason)
            for c, d in zip(commands, decisions)
        ]
        await _audit(audit, who, device, refused)
        blocked = sum(r.status == "blocked" for r in refused)
        log.info("Policy blocked %d command(s) for %s (user %s); nothing sent", blocked, device.name, who.user)
        return DeviceResult(device.name, "blocked", refused, "blocked by the console policy; nothing was sent")

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    results: list[CommandResult] = []
    error = ""
    try:
        async with locks.hold(device.host, device.port, timeout=max(deadline - loop.time(), 0)):
            error = await _run_locked(device, commands, mode, results, deadline, max_output)
    except DeviceBusyError as exc:
        error = str(exc)
    except asyncio.CancelledError:
        # The run was stopped (abort, disconnect) mid-batch: what was typed is audited all the same.
        error = "cancelled"
        raise
    finally:
        for command in commands[len(results):]:
            results.append(CommandResult(command, "not_run", reason=error or "not run"))
        await asyncio.shield(_audit(audit, who, device, results))
    status: Literal["ok", "error", "failed"] = (
        "failed" if error else "error" if any(r.status != "ok" for r in results) else "ok"
    )
    return DeviceResult(device.name, status, results, error)


async def _audit(audit: AuditLog, who: Who, device: Device, results: Sequence[CommandResult]) -> None:
    await audit.record_many(who, device.name, [(r.command, r.status, r.reason or "; ".join(r.errors)) for r in results])


async def _run_locked(
    device: Device, commands: Sequence[str], mode: Mode, results: list[CommandResult], deadline: float, max_output: int
) -> str:
    """Run the commands into ``results``; return an error that stopped the batch, or ""."""
    loop = asyncio.get_running_loop()

    def left() -> float:
        return max(deadline - loop.time(), 0.001)

    async with TelnetConsole(device.host, device.port, max_output=max_output) as console:
        session = DriverSession(console, device.driver)
        try:
            await session.open(left())
            if device.reported_status not in (None, "started"):
                log.warning("GNS3 reports %s %s, but its console answered: using it", device.name, device.reported_status)
            if mode == "config":
                await session.enter_config(left())
        except ConsoleConnectError as exc:
            if device.reported_status not in (None, "started"):
                return f"{as_data(device.name)} is {device.reported_status}; start it first ({exc})"
            return f"could not open {as_data(device.name)}'s console: {exc}"
        except ConsoleError as exc:
            return f"could not open {as_data(device.name)}'s console: {exc}"
        for command in commands:
            # Stands for the command while it runs: what a cancellation now leaves audited.
            results.append(CommandResult(command, "failed", reason="cancelled while running; it may have been sent"))
            try:
                output = await session.command(command, left())
            except ConsoleTimeout as exc:
                results[-1] = CommandResult(command, "timeout", exc.output, reason=str(exc))
                return f"timed out on {command!r}"
            except ConsoleClosed as exc:
                results[-1] = CommandResult(command, "failed", exc.output, reason=str(exc))
                return f"console closed during {command!r}"
            except ConsoleError as exc:
                results[-1] = CommandResult(command, "failed", reason=str(exc))
                return str(exc)
            errors = device.driver.error_lines(output)
            results[-1] = CommandResult(command, "error" if errors else "ok", output, errors)
        if mode == "config":
            try:
                await session.exit_config(left())
            except ConsoleError as exc:
                log.warning("Could not leave config mode on %s: %s", device.name, exc)
    return ""
