"""A persistent console (one shell behind a TCP server that outlives its clients, as QEMU's
serial console): a command that reaches the call's deadline is interrupted, and the prompt is
back before the device lock is released, so the next session works; a console the interrupt
cannot free is reported busy, to that session and to the next."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from console_runs import run_on, serving
from shell_process import ShellServer

from gns3server.agent.gns3_copilot.console import (
    LINUX,
    AuditLog,
    DeviceResult,
    Policy,
)
from gns3server.agent.gns3_copilot.console.runner import Mode

pytestmark = pytest.mark.integration

# The call's one deadline where a command must outlast it: generous for opening the console on a
# busy machine, and the command never ends, so it is the command that reaches it.
DEADLINE = 10.0


@pytest.fixture
def serial() -> Iterator[ShellServer]:
    with serving(persistent=True) as server:
        yield server


async def run(server: ShellServer, commands: list[str], mode: Mode, policy: Policy, audit: AuditLog, **kw: Any) -> DeviceResult:
    return await run_on(server, "VM1", LINUX, commands, mode, policy, audit, **kw)


async def test_a_timed_out_command_is_interrupted_and_the_next_session_works(serial, policy, audit):
    first = await run(serial, ["busybox ping 127.0.0.1", "echo never"], "config", policy, audit, timeout=DEADLINE)
    assert [r.status for r in first.results] == ["timeout", "not_run"], first
    assert first.error == "timed out on 'busybox ping 127.0.0.1'" and first.code == "console_timeout"
    assert "64 bytes from 127.0.0.1" in first.results[0].output
    assert "interrupted, the console is at its prompt again" in first.results[0].reason

    second = await run(serial, ["echo $((6*7))"], "config", policy, audit)
    assert second.status == "ok", second
    assert second.results[0].output == "42"
    assert len(serial.shells) == 1 and serial.connections == 2  # the same shell served both
    # The ping is gone: the shell's session holds only the shell.
    assert serial.pids() == [serial.shells[0].pid]


async def test_a_console_the_interrupt_cannot_free_is_reported_busy(serial, policy, audit):
    # With the terminal's signal keys off (stty -isig), Ctrl-C is a character like any other: what
    # runs never hears it, as on a line that passes it through.
    first = await run(serial, ["stty -isig", "sleep 600"], "config", policy, audit, timeout=DEADLINE)
    assert [r.status for r in first.results] == ["ok", "timeout"], first
    assert first.code == "console_busy" and "stayed busy after the interrupt" in first.error

    # It must fail: its deadline need only outlast the wait for a prompt and the one interrupt.
    second = await run(serial, ["uname -s"], "show", policy, audit, timeout=8)
    assert second.status == "failed" and second.code == "console_busy", second
    assert "answers but shows no prompt" in second.error
    assert [r.status for r in second.results] == ["not_run"]
