"""What the console tests share: who runs the commands, a CLI served for a test, one batch on it."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from shell_process import ShellServer

from gns3server.agent.gns3_copilot.console import (
    AuditLog,
    Device,
    DeviceLocks,
    DeviceResult,
    Driver,
    Policy,
    Who,
    run_commands,
)
from gns3server.agent.gns3_copilot.console.runner import Mode

WHO = Who("alice", "session-1", "project-1")


@contextmanager
def serving(**start: Any) -> Iterator[ShellServer]:
    """A :class:`ShellServer` (``ShellServer.start(**start)``), stopped afterwards with nothing left running."""
    server = ShellServer.start(**start)
    try:
        yield server
    finally:
        server.stop()
        assert not server.pids()


async def run_on(
    server: ShellServer, name: str, driver: Driver, commands: Sequence[str], mode: Mode, policy: Policy,
    audit: AuditLog, *, credentials: Any = None, timeout: float = 60, **kw: Any,
) -> DeviceResult:
    """One batch on the CLI ``server`` serves, as the device ``name``, with a fresh set of locks."""
    device = Device(name, server.host, server.port, driver, credentials=credentials)
    return await run_commands(device, list(commands), mode=mode, policy=policy, locks=DeviceLocks(), audit=audit,
                              who=WHO, timeout=timeout, **kw)
