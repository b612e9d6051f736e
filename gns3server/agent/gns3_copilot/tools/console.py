"""Tools that type commands into device consoles: show commands and config commands.

Devices are named as the user sees them; their telnet console (host and port)
comes from the project's nodes, read with the requesting user's GNS3 identity.
GNS3's status is passed on as a hint, not obeyed: the console itself says whether
the device is there (a "stopped" node whose console refuses the connection is
reported as stopped; one whose console answers is used, since GNS3's status
can lag behind the device, e.g. after a compute restart).
Everything else (policy, per-device locks, audit, drivers) is the console
package's job; these tools only resolve nodes and shape results for the model.

A device's batch that was blocked by the policy or stopped part-way (its console
unreachable, a timeout) failed; one whose commands ran, error lines included,
did not (the model reads what the device said). ``gns3_show_commands`` returns
each device's outcome while one device's batch did not fail, and fails as a
whole when every one did; ``gns3_config_commands`` fails when its device's batch
did. A failure's outcome still carries every device's results (what was sent,
what it answered) and, in a fault-injection run, the ``undo`` of a change the
batch may have half made.

GNS3's permissions hold here as on GNS3's own console routes: before anything
is sent, every device must pass ``Node.Console`` for the user (asked through
``authorize``, GNS3's own check in the server). A refusal sends nothing, is
audited as "denied" and comes back as a plain error ("you lack Node.Console on
R1 ...").

``gns3_config_commands`` changes devices: it carries
``metadata={"needs_confirmation": True}`` so that the agent pauses for the user's
approval before running it; the approval it ran under (put in the run's
configurable by the tool gate, read with ``grant_of``) is written to the audit with
each command.
In a fault-injection run (``record_undo``) it first reads, read-only, what the
commands will replace (and, for the IOS family, the running configuration again
once they ran), and returns the commands that restore it (``undo``, see
``config_undo``) or why it cannot (``undo_unknown``).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Mapping
from typing import Annotated, Any

from langchain_core.runnables import RunnableConfig
from pydantic import AfterValidator, BaseModel, Field, StringConstraints

from ..as_data import as_data
from ..changes.store import ChangeStore
from ..changes.transaction import DEFAULT_VERIFY_SECONDS, ChangeTransaction, Target
from ..changes.transaction import Who as ChangeWho
from ..console import (
    AuditLog,
    Credentials,
    CredentialStore,
    Device,
    DeviceLocks,
    Policy,
    UnknownDriverError,
    Who,
    run_commands,
)
from ..console.choices import FamilyChoices
from ..console.families import DRIVER_NAMES, DriverName
from ..console.registry import Drivers
from ..console.runner import Mode, OutputFormat, judged
from ..errors import CopilotError
from ..gns3_client.client import gather_cancelling
from ..gns3_client.exceptions import GNS3Error
from .approval import grant_of
from .errors import ToolError, every_item_failed, tool_error
from .families import node_evidence
from .gate import batch_of
from .nodes import PermissionErrors, ProjectTool, _by_name
from .permissions import NODE_CONSOLE, Authorize, console_path, refusal

log = logging.getLogger(__name__)

# A console bound to every address is reached on the host the GNS3 API runs on.
_ANY_ADDRESS = {"", "0.0.0.0", "::", "0:0:0:0:0:0:0:0"}
BATCH_FAILED = ("blocked", "failed")
"""A device's batch with one of these statuses failed (``error``: the commands ran, some said so)."""


class ConsoleTool(ProjectTool):
    """A console tool bound to one run: who asks, and the service's policy, locks and audit."""

    policy: Policy = Field(exclude=True)
    locks: DeviceLocks = Field(exclude=True)
    audit: AuditLog = Field(exclude=True)
    authorize: Authorize = Field(exclude=True)
    user: str
    session_id: str
    timeout: float = 30.0
    default_console_host: str = "127.0.0.1"
    credentials: CredentialStore | None = Field(None, exclude=True)
    drivers: Drivers = Field(default_factory=Drivers, exclude=True)  # built at start-up (Drivers.load)
    choices: FamilyChoices | None = Field(None, exclude=True)  # the families users chose per node

    async def _login_for(self, node: Mapping[str, Any]) -> Credentials | None:
        """The node's console credentials (its own, else its template's), if any are set."""
        if self.credentials is None:
            return None
        try:
            return await self.credentials.for_console(str(node.get("node_id") or ""), node.get("template_id"))
        except CopilotError as exc:
            raise tool_error(exc) from exc

    def _device(
        self, node: Mapping[str, Any], driver_name: str | None = None, credentials: Credentials | None = None,
        template: Mapping[str, Any] | None = None, choice: str | None = None,
    ) -> Device:
        name = as_data(node.get("name"))
        if node.get("console_type") not in (None, "telnet"):
            raise ToolError(f"{name}'s console is {as_data(node.get('console_type'))}; only telnet consoles can be used")
        if not node.get("console"):
            raise ToolError(f"{name} has no console port")
        status = node.get("status")
        if status == "suspended":  # the console would accept the connection but never answer
            raise ToolError(f"{name} is suspended; resume it first")
        try:
            picked = self.drivers.pick(node, template, choice, driver_name)
        except UnknownDriverError as exc:
            raise tool_error(exc) from exc
        if picked.note:
            log.info("Console of %s: %s", name, picked.note)
        host = str(node.get("console_host") or "")
        host = self.default_console_host if host in _ANY_ADDRESS else host
        return Device(str(node.get("name")), host, int(node["console"]), picked.driver,
                      reported_status=str(status) if status else None, cli_known=picked.cli_known,
                      credentials=credentials, check_prompt=self.drivers.prompt_check(picked))

    async def _devices(self, names: list[str], commands: list[str], driver_name: str | None, who: Who) -> list[Device]:
        """The named devices, once GNS3 lets the user use every one's console (else nothing is sent)."""
        return [device for _, device in await self._targets(names, commands, driver_name, who)]

    async def _targets(
        self, names: list[str], commands: list[str], driver_name: str | None, who: Who
    ) -> list[tuple[Mapping[str, Any], Device]]:
        """:meth:`_devices`, each with its GNS3 node."""
        try:
            async with self.client_factory() as client:
                nodes = await client.nodes(self.project_id)
                chosen = [_by_name(nodes, name, "node") for name in names]
                templates, choices = await node_evidence(client, self.project_id, chosen, self.choices)
        except PermissionErrors as exc:
            raise await self._refused(exc, "this project's nodes", "; ".join(commands)) from exc
        except GNS3Error as exc:
            raise tool_error(exc) from exc
        verdicts = await gather_cancelling(
            *(self.authorize(NODE_CONSOLE, console_path(self.project_id, str(n.get("node_id")))) for n in chosen)
        )
        refused = [(str(n.get("name")), v) for n, v in zip(chosen, verdicts) if v != "allowed"]
        if refused:
            for name, verdict in refused:
                reason = str(refusal(verdict, NODE_CONSOLE, as_data(name)))
                await self.audit.record_many(who, name, [(c.strip(), "denied", reason) for c in commands if c.strip()])
                log.info("Console of %s refused to user %s: %s", name, self.user, reason)
            raise refusal(refused[0][1], NODE_CONSOLE, ", ".join(as_data(name) for name, _ in refused))
        logins = await gather_cancelling(*(self._login_for(node) for node in chosen))
        return [
            (node, self._device(node, driver_name, login, templates.get(str(node.get("template_id"))),
                                choices.get(str(node.get("node_id")))))
            for node, login in zip(chosen, logins)
        ]

    def _who(self, config: RunnableConfig) -> Who:
        """Who the commands run for, with the approval they run under (if any)."""
        # (Annotated exactly RunnableConfig in _arun, or LangChain would not pass it.)
        approval = grant_of(config)
        return Who(
            self.user, self.session_id, self.project_id,
            approval_id=approval.get("approval_id"), approval_digest=approval.get("digest"),
            approved_by=approval.get("approved_by"), approved_at=approval.get("approved_at"),
        )

    async def _run_on(
        self, device: Device, commands: list[str], mode: Mode, who: Who, output_format: OutputFormat = "text"
    ) -> dict[str, Any]:
        result = await run_commands(
            device, commands, mode=mode, policy=self.policy, locks=self.locks, audit=self.audit, who=who,
            timeout=self.timeout, output_format=output_format,
        )
        return result.as_dict()


_DRIVER_HELP = "CLI family, only if the topology's cli= is wrong. Normally left out."


def _known_family(value: str | None) -> str | None:
    """A family the console drives (any case). The names are not listed in the tool's schema: the
    topology shows each node's family, and fifteen names would cost every small window ~40 tokens."""
    if value is None:
        return None
    name = value.strip().casefold()
    if name not in DRIVER_NAMES:
        raise ValueError(f"driver: unknown CLI family {value!r} (known: {', '.join(DRIVER_NAMES)})")
    return name


DriverArg = Annotated[str | None, AfterValidator(_known_family)]


# Bounds on one call, so that a confused model cannot open hundreds of consoles or
# queue thousands of lines (each command still has the call's timeout).
MAX_DEVICES = 32
MAX_COMMANDS = 64
Command = Annotated[str, StringConstraints(max_length=1000)]


class ShowCommandsInput(BaseModel):
    devices: list[str] = Field(
        min_length=1, max_length=MAX_DEVICES, description="Node names to run the commands on (concurrently)."
    )
    commands: list[Command] = Field(
        min_length=1, max_length=MAX_COMMANDS, description="Read-only commands, e.g. show ip interface brief, ping 10.0.0.1."
    )
    driver: DriverArg = Field(None, description=_DRIVER_HELP)
    format: OutputFormat = Field("text", description="json: the CLI's JSON, parsed; structured: the smallest form.")


class ShowCommandsTool(ConsoleTool):
    name: str = "gns3_show_commands"
    description: str = (
        "Run read-only commands (show, ping, traceroute ...) on the consoles of one or more devices of the "
        "open project, by node name. Returns each command's output and any error lines per device. "
        "Configuration commands are refused here."
    )
    args_schema: type[BaseModel] = ShowCommandsInput
    metadata: dict[str, Any] = Field(default_factory=lambda: {"read_only": True})

    async def _arun(
        self, devices: list[str], commands: list[str], driver: DriverName | None = None, format: OutputFormat = "text",
        *, config: RunnableConfig, **_: Any,
    ) -> dict[str, Any]:
        who = self._who(config)
        targets = await self._devices(devices, commands, driver, who)
        results = await gather_cancelling(*(self._run_on(d, commands, "show", who, format) for d in targets))
        failed = [(r["device"], r["error"]) for r in results if r["status"] in BATCH_FAILED]
        if len(failed) == len(results):
            raise every_item_failed(f"the commands on {', '.join(as_data(r['device']) for r in results)}", failed,
                                    outcome={"devices": results})
        return {"devices": results}


class ConfigCommandsInput(BaseModel):
    device: str = Field(description="Node name of the device to configure.")
    commands: list[Command] = Field(
        min_length=1,
        max_length=MAX_COMMANDS,
        description="Configuration commands in order (IOS: as typed inside configure terminal, which is entered for you).",
    )
    driver: DriverArg = Field(None, description=_DRIVER_HELP)


class ConfigCommandsTool(ConsoleTool):
    name: str = "gns3_config_commands"
    description: str = (
        "Configure one device of the open project through its console: the commands run in order in "
        "configuration mode (entered and left for you). Needs the user's approval. Returns each command's "
        "output and error lines; dangerous commands (reload, erase ...) are refused by policy."
    )
    args_schema: type[BaseModel] = ConfigCommandsInput
    metadata: dict[str, Any] = Field(
        default_factory=lambda: {"needs_confirmation": True, "changes_device": "device"})
    record_undo: bool = False
    """Fault injection: nothing is verified, and the result says how to undo the change (``undo``)."""
    changes: ChangeStore | None = Field(None, exclude=True)
    verify_seconds: float = DEFAULT_VERIFY_SECONDS

    async def _arun(
        self, device: str, commands: list[str], driver: DriverName | None = None,
        *, config: RunnableConfig, **_: Any,
    ) -> dict[str, Any]:
        who = self._who(config)
        ((node, target),) = await self._targets([device], commands, driver, who)
        batch = batch_of(config)
        snapshot = await batch.once("snapshot", self._snapshot) if batch is not None and len(batch.devices) > 1 else None
        result = await self._configure(target, str(node.get("node_id") or ""), commands, driver, who)
        if snapshot is not None and isinstance(result.get("change"), dict):
            result["change"]["snapshot"] = snapshot
        if result["status"] in BATCH_FAILED:  # blocked, or stopped part-way: its outcome says what was sent
            raise ToolError(f"the configuration of {as_data(target.name)} failed: {result['error']}", outcome=result)
        return result

    async def _snapshot(self) -> dict[str, Any]:
        """A GNS3 snapshot of the project, as the user, before a batch that changes several devices.

        GNS3 decides (``Snapshot.Allocate``); a snapshot it refuses leaves the batch to run
        without one, and the result says why.
        """
        name = f"copilot before changes {time.strftime('%Y-%m-%d %H:%M:%S')} {uuid.uuid4().hex[:6]}"
        try:
            async with self.client_factory() as client:
                made = await client.create_snapshot(self.project_id, name)
        except GNS3Error as exc:
            log.info("No snapshot of project %s before a batch: %s", self.project_id, exc)
            return {"snapshot_id": None, "error": f"GNS3 did not take a snapshot: {exc.public_message}"}
        return {"snapshot_id": made.get("snapshot_id"), "name": made.get("name")}

    async def _configure(
        self, target: Device, node_id: str, commands: list[str], driver: DriverName | None, who: Who
    ) -> dict[str, Any]:
        _, decisions = await asyncio.to_thread(judged, target, commands, "config", self.policy)
        if not all(d.allowed for d in decisions):  # refused as a whole: nothing is read or sent, not even a baseline
            refused = await self._run_on(target, commands, "config", who)
            if self.record_undo:
                refused["undo_unknown"] = "nothing was changed"
            return refused

        async def run(lines: list[str], mode: str) -> dict[str, Any]:
            return await self._run_on(target, lines, "config" if mode == "config" else "show", who)

        async def note(command: str, outcome: str, detail: str) -> None:
            await self.audit.record(who, target.name, command, outcome, detail)

        transaction = ChangeTransaction(
            Target(target.name, node_id, target.driver.name), commands, run,
            who=ChangeWho(self.project_id, self.session_id, self.user, who.approval_id), store=self.changes,
            note=note, verify=not self.record_undo, verify_seconds=self.verify_seconds,
        )
        outcome = await transaction.run()
        result = outcome.result
        if outcome.change:
            result["change"] = outcome.change
        if not self.record_undo:
            return result
        undo = outcome.undo
        if undo is not None and undo.commands is not None:
            args: dict[str, Any] = {"device": target.name, "commands": undo.commands}
            if driver is not None:
                args["driver"] = driver
            result["undo"] = {"tool": self.name, "args": args}
            if undo.expects is not None:
                result["undo"]["expects"] = undo.expects
        else:
            result["undo_unknown"] = (undo.reason if undo is not None else "") or \
                f"{as_data(target.name)}'s previous settings could not be read"
        return result
