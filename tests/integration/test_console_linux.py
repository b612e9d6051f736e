"""The LINUX driver against a real interactive bash on an 80-column PTY (as a Docker console)."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from typing import Any

import pytest
from console_runs import run_on, serving
from shell_process import COLUMNS, PROMPT, ShellServer, session_pids

from gns3server.agent.gns3_copilot.console import LINUX, TRUNCATED_MARKER, AuditLog, DeviceResult, Policy
from gns3server.agent.gns3_copilot.console.runner import Mode

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def shell() -> Iterator[ShellServer]:
    with serving() as server:
        yield server


async def run(
    shell: ShellServer, commands: list[str], mode: Mode, policy: Policy, audit: AuditLog, **kw: Any
) -> DeviceResult:
    kw.setdefault("timeout", 10)
    return await run_on(shell, "Host1", LINUX, commands, mode, policy, audit, **kw)


def outputs(result: DeviceResult) -> list[str]:
    return [r.output for r in result.results]


async def test_show_mode_reads_and_blocks_the_rest(shell, policy, audit):
    # The default policy's read-only list has uname and cat, but not echo or export.
    assert policy.check("uname -s", read_only=True).allowed
    assert policy.check("cat /proc/sys/kernel/ostype", read_only=True).allowed
    assert not policy.check("echo $((6*7))", read_only=True).allowed
    assert not policy.check("export X=2", read_only=True).allowed

    shown = await run(shell, ["uname -s", "cat /proc/sys/kernel/ostype"], "show", policy, audit)
    assert shown.status == "ok", shown
    assert outputs(shown) == ["Linux", "Linux"]

    connections = shell.connections
    blocked = await run(shell, ["uname -s", "export X=2"], "show", policy, audit)
    assert blocked.status == "blocked"
    assert [r.status for r in blocked.results] == ["not_run", "blocked"]
    assert shell.connections == connections  # nothing reached the console

    entries = await audit.entries(device="Host1")
    assert [(e.command, e.outcome) for e in reversed(entries)] == [
        ("uname -s", "ok"),
        ("cat /proc/sys/kernel/ostype", "ok"),
        ("uname -s", "not_run"),
        ("export X=2", "blocked"),
    ]
    assert {(e.user, e.session, e.project) for e in entries} == {("alice", "session-1", "project-1")}


async def test_config_mode_outputs_errors_and_paging(shell, policy, audit):
    commands = [
        "echo $((6*7))",
        "nosuchcommand-xyz",
        "echo $PAGER",
        "printf 'a\\nb\\nc\\n'",
        "export X=1; echo $X",
        "echo \"[$X]\"",
    ]
    # Linux has no configuration mode: "config" only lifts the read-only list.
    assert all(policy.check(c, read_only=False).allowed for c in commands)
    result = await run(shell, commands, "config", policy, audit)
    assert result.status == "error" and not result.error, result
    assert [r.status for r in result.results] == ["ok", "error", "ok", "ok", "ok", "ok"]
    assert outputs(result) == [
        "42",
        "bash: nosuchcommand-xyz: command not found",
        "cat",  # the driver's setup turned paging off
        "a\nb\nc",
        "1",
        "[1]",  # the commands share one shell
    ]
    assert result.results[1].errors == ["bash: nosuchcommand-xyz: command not found"]
    assert all(not r.errors for r in result.results if r.status == "ok")

    entries = await audit.entries(device="Host1")
    assert [(e.command, e.outcome) for e in reversed(entries)] == list(
        zip(commands, ["ok", "error", "ok", "ok", "ok", "ok"])
    )
    assert entries[-2].detail == "bash: nosuchcommand-xyz: command not found"


@pytest.mark.parametrize(
    "length",
    [
        COLUMNS + 30,  # prompt and command wrap in the middle of a line
        COLUMNS - len(PROMPT),  # the command ends exactly at the right margin
        2 * COLUMNS - len(PROMPT),  # ... of the second line
        3 * COLUMNS + 7,
    ],
)
async def test_commands_longer_than_the_terminal(shell, policy, audit, length):
    word = "".join(chr(ord("a") + i % 26) for i in range(length - len("echo ")))
    command = f"echo {word}"
    assert len(command) == length
    result = await run(shell, [command, "echo after"], "config", policy, audit)
    assert result.status == "ok", result
    assert outputs(result) == [word, "after"]


async def test_output_cap_keeps_head_marker_and_tail(shell, policy, audit):
    result = await run(shell, ["seq 1 200000", "echo done"], "config", policy, audit, max_output=8192)
    assert result.status == "ok", result
    output = result.results[0].output
    assert output.count(TRUNCATED_MARKER) == 1
    head, tail = output.split(TRUNCATED_MARKER)
    assert head.splitlines()[:3] == ["1", "2", "3"]
    assert tail.splitlines()[-3:] == ["199998", "199999", "200000"]
    assert len(output) < 8192 + len(TRUNCATED_MARKER)
    assert result.results[1].output == "done"  # the prompt after the flood was found


@pytest.fixture
def started_in_the_background() -> Iterator[None]:
    """SIGINT and SIGQUIT ignored in this process, as a script's ``command &`` leaves them.

    Ignored signals are inherited by every program started from here: a console's CLI must
    get its own defaults back, or Ctrl-C could not stop what runs in it (CI runs in the background).
    """
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGQUIT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@pytest.mark.usefixtures("started_in_the_background")
async def test_timeout_then_a_new_connection_works(shell, policy, audit):
    # One deadline bounds the call: the file's generous one, so that spawning bash and its prompt
    # fit on a busy machine; the command outlasts it by far, so it is the command that times out.
    result = await run(shell, ["sleep 600", "echo never"], "config", policy, audit)
    assert result.status == "failed"
    assert [r.status for r in result.results] == ["timeout", "not_run"]
    assert result.error == "timed out on 'sleep 600'"
    timed_out = shell.shells[-1]

    again = await run(shell, ["echo $((6*7))"], "config", policy, audit)
    assert again.status == "ok" and outputs(again) == ["42"], again
    assert shell.shells[-1] is not timed_out  # a fresh shell on a new connection
    # The connection that timed out ended before the next one was served: its shell
    # and the sleep are gone.
    assert timed_out.returncode is not None and not session_pids(timed_out.pid)
    outcomes = [(e.command, e.outcome) for e in reversed(await audit.entries(device="Host1"))]
    assert outcomes == [("sleep 600", "timeout"), ("echo never", "not_run"), ("echo $((6*7))", "ok")]
