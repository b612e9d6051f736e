"""The bird driver against a real BIRD 2 daemon and its birdc client on a PTY.

birdc (readline) switches bracketed paste on (ESC[?2004h) right before its prompt,
draws the prompt again while it waits for the daemon's answer and erases it (CR,
ESC[K) to print the answer; its error lines are BIRD's ("syntax error ...", "No such
command ..."). Its keywords are expanded like birdc expands them ("do" is "down").
"""

from __future__ import annotations

from collections.abc import Iterator
from importlib import resources
from typing import Any

import pytest
from bird_process import BirdDaemon, record_commands
from console_runs import run_on, serving
from shell_process import ShellServer

from gns3server.agent.gns3_copilot.console import (
    BIRD,
    AuditLog,
    DeviceResult,
    Policy,
)
from gns3server.agent.gns3_copilot.console.grammar import bird as bird_grammar
from gns3server.agent.gns3_copilot.console.runner import Mode

pytestmark = pytest.mark.integration



@pytest.fixture(scope="module")
def daemon() -> Iterator[BirdDaemon]:
    started = BirdDaemon.start()
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="module")
def birdc(daemon: BirdDaemon) -> Iterator[ShellServer]:
    with serving(command=daemon.birdc()) as server:
        yield server


async def run(server: ShellServer, commands: list[str], mode: Mode, policy: Policy, audit: AuditLog, **kw: Any) -> DeviceResult:
    return await run_on(server, "Bird1", BIRD, commands, mode, policy, audit, **kw)


async def test_show_commands_behind_bracketed_paste_and_redrawn_prompts(birdc, policy, audit):
    result = await run(birdc, ["show status", "sh pro", "show route"], "show", policy, audit)
    assert result.status == "ok", result
    status, protocols, routes = (r.output.splitlines() for r in result.results)
    # The prompt drawn while birdc waited, and erased, is not the answer's end nor part of it.
    assert status[0] == "BIRD 2.0.12" and status[-1] == "Daemon is up and running"
    assert protocols[0].split()[:4] == ["Name", "Proto", "Table", "State"]
    assert any(line.split()[:2] == ["st1", "Static"] for line in protocols)
    assert "10.9.0.0/24" in routes[1]
    assert not any("bird>" in r.output or "\x1b" in r.output for r in result.results)


async def test_bird_error_lines_are_errors(birdc, policy, audit):
    result = await run(birdc, ["show nosuch", "show route for 192.0.2.1", "show protocols all nosuch"], "show", policy, audit)
    assert [r.status for r in result.results] == ["error", "error", "error"], result
    assert result.results[0].errors == ["No such command. Press `?' for help."]
    assert result.results[1].errors == ["Network not found"]
    assert result.results[2].errors[0].startswith("syntax error")


async def test_keywords_are_expanded_as_birdc_expands_them(daemon, birdc, policy, audit):
    # "do" is "down" to birdc: the daemon would shut down.
    assert bird_grammar.analyze("do").commands == (("down",),)
    blocked = await run(birdc, ["do"], "config", policy, audit)
    assert blocked.status == "blocked" and "down" in blocked.results[0].reason
    refused = await run(birdc, ["dis st1"], "show", policy, audit)
    assert refused.status == "blocked" and "approval" in refused.results[0].reason
    assert "up" in daemon.run("show protocols st1")  # nothing reached the daemon

    changed = await run(birdc, ["dis st1", "show protocols st1", "en st1"], "config", policy, audit)
    assert changed.status == "ok", changed
    assert changed.results[0].output == "st1: disabled"
    assert changed.results[1].output.splitlines()[1].split()[3] == "down"
    assert changed.results[2].output == "st1: enabled"


def test_the_command_table_is_the_real_birdc(daemon):
    """The data the grammar expands with is what the installed birdc answers to ``?``."""
    shipped = resources.files(bird_grammar.__package__).joinpath("data", bird_grammar.DATA_FILE).read_text("utf-8")
    assert record_commands(daemon) == shipped
