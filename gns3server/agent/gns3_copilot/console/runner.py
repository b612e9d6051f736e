"""Run a batch of commands on one device: policy, lock, console, audit.

The order matters: every command is checked against the policy first, as it
will be sent (one blocked command stops the whole batch, so a half-applied change
never happens); then the device's lock is taken, the console opened (logging in
with the device's console credentials if it asks) and the commands run one by
one; each command is audited with its outcome, in one write per batch, also when
the batch is cancelled (the command in flight then as "failed": it may have been
sent). One deadline bounds the call, lock wait included; a command that reaches
it is interrupted (the family's interrupt) and the prompt recovered before the
lock is released, which may take the driver's ``recovery`` seconds more. A console
that stays busy is reported (``console_busy``), never silently left to the next
session.

With ``output_format="json"`` each command is sent in the family's structured
form where the CLI offers one (FRR: ``show ... json``); the result's ``command``
is the line actually sent, and output that is JSON comes back parsed as ``data``.
With ``output_format="structured"`` each command gets the form measured smallest for it
(``structured.toml``): the CLI's JSON, TextFSM rows of the text (ntc-templates, parsed in a
worker thread: ``data`` is ``{"columns", "rows"}``), or the text itself; output no template
reads stays text.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from ..as_data import as_data
from ..errors import ErrorKind
from .audit import AuditLog, Who
from .credentials import Credentials, mask
from .drivers import Driver
from .locks import DeviceBusyError, DeviceLocks
from .modes import Commit
from .policy import Policy
from .session import ConsoleBusyError, DriverSession
from .structured import StructuredOutputError, rows_table, text_rows
from .telnet import DEFAULT_MAX_OUTPUT, ConsoleClosed, ConsoleConnectError, ConsoleError, ConsoleTimeout, TelnetConsole

log = logging.getLogger(__name__)

Mode = Literal["show", "config"]
Status = Literal["ok", "error", "timeout", "blocked", "not_run", "failed"]
OutputFormat = Literal["text", "json", "structured"]
CONFIRM_SECONDS = 60
"""A confirmed commit's rollback timer (at least the CLI's shortest), confirmed as soon as the console answers."""
# How long a cancelled batch may spend typing the interrupt for the command in flight.
_CANCEL_INTERRUPT = 1.0


@dataclass(frozen=True, repr=False)
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
    # What the console's login asks for (the node's or its template's), typed only if it asks.
    credentials: Credentials | None = None
    # Given the console's first prompt, why it is not this driver's family (None: it may be): the
    # detected family checked against the prompt (registry.Drivers.confirm) before anything is sent.
    check_prompt: Callable[[str], str | None] | None = None

    def __repr__(self) -> str:
        return f"Device({self.name!r}, {self.host}:{self.port}, {self.driver.name})"


@dataclass
class CommandResult:
    command: str
    status: Status
    output: str = ""
    errors: list[str] = field(default_factory=list)
    reason: str = ""
    data: Any = None  # the output parsed, when it was JSON (then ``output`` is empty)


@dataclass
class DeviceResult:
    device: str
    status: Literal["ok", "error", "blocked", "failed"]
    results: list[CommandResult]
    error: str = ""
    code: str = ""  # the error's code (docs/errors.md): console_busy, console_login_failed ...

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class FamilyMismatchError(ConsoleError):
    """The console's prompt belongs to another CLI family than the one the node was taken for."""

    code = "console_family_mismatch"
    kind = ErrorKind.CONFLICT


@dataclass
class _Stop:
    """Why a batch stopped part-way."""

    error: str
    code: str = ""


def requested(driver: Driver, commands: Sequence[str], output_format: OutputFormat) -> list[str]:
    """The lines to send: stripped, blank ones dropped, in the structured form where asked and offered."""
    lines = [c.strip() for c in commands if c.strip()]
    form = driver.structured
    if output_format == "json" and form is not None and form.format == "json":
        lines = [form.request(line) if form.offered(line) else line for line in lines]
    elif output_format == "structured" and form is not None:
        lines = [form.request(line) if form.form_of(line) == "json" and form.offered(line) else line for line in lines]
    return lines


def judged(device: Device, commands: Sequence[str], mode: Mode, policy: Policy,
           output_format: OutputFormat = "text") -> tuple[list[str], list[Any]]:
    """The lines a batch sends and the policy's decision on each (CPU work: call it in a worker thread).

    A caller that must know before anything is sent whether a batch would be refused
    (a change's baseline is read only for a change that may run) asks this too.
    """
    lines = requested(device.driver, commands, output_format)
    family = device.driver.name if device.cli_known else None
    return lines, [policy.check(c, family=family, read_only=mode == "show") for c in lines]


def _as_rows(driver: Driver, results: Sequence[CommandResult]) -> None:
    """The commands measured best as TextFSM rows get their text parsed (blocking: a worker thread)."""
    form = driver.structured
    if form is None or not form.textfsm_platform:
        return
    for result in results:
        if result.status != "ok" or result.data is not None or form.form_of(result.command) != "textfsm":
            continue
        try:
            rows = text_rows(form.textfsm_platform, result.command, result.output)
        except StructuredOutputError as exc:
            log.info("Output of %r kept as text: %s", result.command, exc)
            continue
        if rows:
            result.data, result.output = rows_table(rows), ""


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
    output_format: OutputFormat = "text",
) -> DeviceResult:
    """Run ``commands`` on ``device`` in ``mode`` ("show" is read-only, "config" enters config mode)."""
    # Parsing a batch (up to 64 lines of 1,000 characters) is CPU work: off the event loop.
    commands, decisions = await asyncio.to_thread(judged, device, commands, mode, policy, output_format)
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
    stop: _Stop | None = None
    try:
        async with locks.hold(device.host, device.port, timeout=max(deadline - loop.time(), 0)):
            stop = await _run_locked(device, commands, mode, results, deadline, max_output, audit, who)
    except DeviceBusyError as exc:
        stop = _Stop(str(exc), exc.code)
    except asyncio.CancelledError:
        # The run was stopped (abort, disconnect) mid-batch: what was typed is audited all the same.
        stop = _Stop("cancelled")
        raise
    finally:
        for command in commands[len(results):]:
            results.append(CommandResult(command, "not_run", reason=stop.error if stop else "not run"))
        await asyncio.shield(_audit(audit, who, device, results))
    if output_format == "structured":
        await asyncio.to_thread(_as_rows, device.driver, results)
    if stop is not None:
        return DeviceResult(device.name, "failed", results, stop.error, stop.code)
    return DeviceResult(device.name, "error" if any(r.status != "ok" for r in results) else "ok", results)


async def _audit(audit: AuditLog, who: Who, device: Device, results: Sequence[CommandResult]) -> None:
    await audit.record_many(who, device.name, [(r.command, r.status, r.reason or "; ".join(r.errors)) for r in results])


def _result(device: Device, command: str, output: str) -> CommandResult:
    errors = device.driver.error_lines(output)
    status: Status = "error" if errors else "ok"
    form = device.driver.structured
    if not errors and form is not None and output.lstrip()[:1] in ("{", "["):
        try:
            return CommandResult(command, status, "", errors, data=json.loads(output))
        except ValueError:
            pass  # text that starts like JSON: returned as text
    return CommandResult(command, status, output, errors)


async def _run_locked(
    device: Device, commands: Sequence[str], mode: Mode, results: list[CommandResult], deadline: float,
    max_output: int, audit: AuditLog, who: Who,
) -> _Stop | None:
    """Run the commands into ``results``; return why the batch stopped part-way, if it did."""
    loop = asyncio.get_running_loop()

    def left() -> float:
        return max(deadline - loop.time(), 0.001)

    async with TelnetConsole(device.host, device.port, max_output=max_output) as console:
        session = DriverSession(console, device.driver, device.credentials)
        try:
            try:
                await session.open(left())
            finally:
                await _audit_login(audit, who, device, session)
            if device.reported_status not in (None, "started"):
                log.warning("GNS3 reports %s %s, but its console answered: using it", device.name, device.reported_status)
            mismatch = device.check_prompt(session.opening) if device.check_prompt else None
            if mismatch is not None:
                log.info("Console of %s is not %s: %s", device.name, device.driver.name, mismatch)
                return _Stop(f"nothing was sent: {mismatch}", FamilyMismatchError.code)
            if mode == "config":
                await session.enter_config(left())
        except ConsoleConnectError as exc:
            if device.reported_status not in (None, "started"):
                return _Stop(f"{as_data(device.name)} is {device.reported_status}; start it first ({exc})", exc.code)
            return _Stop(f"could not open {as_data(device.name)}'s console: {exc}", exc.code)
        except ConsoleError as exc:
            return _Stop(f"could not open {as_data(device.name)}'s console: {exc}", exc.code)
        for command in commands:
            # Stands for the command while it runs: what a cancellation now leaves audited.
            results.append(CommandResult(command, "failed", reason="cancelled while running; it may have been sent"))
            try:
                output = await session.command(command, left())
            except ConsoleTimeout as exc:
                return await _timed_out(device, session, command, exc, results)
            except ConsoleClosed as exc:
                results[-1] = CommandResult(command, "failed", exc.output, reason=str(exc))
                return _Stop(f"console closed during {command!r}", exc.code)
            except ConsoleError as exc:
                results[-1] = CommandResult(command, "failed", reason=str(exc))
                return _Stop(str(exc), exc.code)
            except asyncio.CancelledError:
                # Stop the command on the device too, so that the console is not left busy.
                with contextlib.suppress(ConsoleError, TimeoutError):
                    await asyncio.wait_for(console.send(device.driver.interrupt), _CANCEL_INTERRUPT)
                raise
            results[-1] = _result(device, command, output)
        if mode == "config":
            stop = await _finish_config(device, session, results, left)
            try:
                await session.exit_config(left())
            except ConsoleError as exc:
                log.warning("Could not leave config mode on %s: %s", device.name, exc)
            return stop
    return None


def commit_lines(commit: Commit | None, ok: bool) -> list[str]:
    """What ends a config batch on a CLI with a candidate configuration: after a batch whose every
    command went through, a confirmed commit (the device rolls it back by itself unless confirmed:
    a change that cut the console off undoes itself) and its confirmation, or a plain commit; after
    a failed one, the abort that drops the candidate. Nothing for the CLIs that apply each line
    (and for EOS and NX-OS, whose candidates need a configuration session: lines apply at once)."""
    if commit is None or commit.session:
        return []
    if not ok:
        return [commit.abort] if commit.abort else []
    if commit.typed:  # FortiOS: "end", typed by the caller, applies a block
        return []
    if commit.confirmed and commit.confirm:
        return [commit.confirmed_command(max(CONFIRM_SECONDS, commit.min_seconds)), commit.confirm]
    return [commit.commit]


async def _finish_config(
    device: Device, session: DriverSession, results: list[CommandResult], left: Callable[[], float]
) -> _Stop | None:
    """Commit the batch (or abort it, when a command failed), each line a result of its own, audited."""
    commit = device.driver.commit
    ok = all(r.status == "ok" for r in results)
    lines = commit_lines(commit, ok)
    for line in lines:
        results.append(CommandResult(line, "failed", reason="cancelled while running; it may have been sent"))
        try:
            output = await session.command(line, left())
        except ConsoleError as exc:
            results[-1] = CommandResult(line, "failed", reason=str(exc))
            return _Stop(f"{line!r} did not finish: {exc}", exc.code)
        results[-1] = _result(device, line, output)
        if results[-1].status != "ok" and ok and commit is not None and commit.abort:
            # The commit was refused (a check failed): the candidate is dropped, never left for later.
            ok = False
            results.append(_result(device, commit.abort, await session.command(commit.abort, left())))
            break
    return None


async def _timed_out(
    device: Device, session: DriverSession, command: str, exc: ConsoleTimeout, results: list[CommandResult]
) -> _Stop:
    """A command reached the deadline: interrupt it and get the prompt back before the lock is released."""
    recovered = await session.interrupt(device.driver.recovery)
    if recovered:
        results[-1] = CommandResult(command, "timeout", exc.output,
                                    reason=f"{exc}; interrupted, the console is at its prompt again")
        return _Stop(f"timed out on {command!r}", exc.code)
    busy = ConsoleBusyError(f"{as_data(device.name)}'s console stayed busy after the interrupt")
    results[-1] = CommandResult(command, "timeout", exc.output, reason=f"{exc}; {busy}")
    return _Stop(f"timed out on {command!r}, and {busy}", busy.code)


async def _audit_login(audit: AuditLog, who: Who, device: Device, session: DriverSession) -> None:
    """The console credentials were typed: audited (who, whose credentials), never what they are."""
    creds = device.credentials
    if creds is None or not session.logged_in:
        return
    detail = f"as {mask(creds.username)} with the {creds.source}'s console credentials" if creds.username else \
        f"with the {creds.source}'s console credentials"
    await asyncio.shield(audit.record(who, device.name, "<console login>", "ok" if session.prompt_reached else "failed", detail))
