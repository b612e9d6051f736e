"""The linux driver against a real busybox ash on a PTY (as Alpine, OpenWrt and other busybox
appliances serve their console): it asks for the cursor position (ESC[6n) after every prompt."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from console_runs import run_on, serving
from shell_process import ShellServer

from gns3server.agent.gns3_copilot.console import LINUX, AuditLog, DeviceResult, DriverSession, Policy, TelnetConsole
from gns3server.agent.gns3_copilot.console.runner import Mode

pytestmark = pytest.mark.integration

PROMPT = "/ # "


@pytest.fixture(scope="module")
def ash() -> Iterator[ShellServer]:
    # ENV empty: no profile; PS1 as busybox images set it.
    with serving(command=("busybox", "sh"), environ={"PS1": PROMPT, "ENV": ""}) as server:
        yield server


async def run(server: ShellServer, commands: list[str], mode: Mode, policy: Policy, audit: AuditLog, **kw: Any) -> DeviceResult:
    return await run_on(server, "Alpine1", LINUX, commands, mode, policy, audit, **kw)


async def test_a_prompt_followed_by_a_cursor_position_request_is_found(ash, policy, audit):
    # busybox ash ends every prompt with ESC[6n: a prompt anchored at the end of the text was
    # never found behind it, and every command timed out ("no prompt").
    shown = await run(ash, ["uname -s", "cat /proc/sys/kernel/ostype"], "show", policy, audit)
    assert shown.status == "ok", shown
    assert [r.output for r in shown.results] == ["Linux", "Linux"]


async def test_escape_sequences_never_reach_the_output(ash, policy, audit):
    commands = [
        r"printf '\033[1mbold\033[0m and \033[31mred\033[0m\n'",
        r"printf '\033]0;a window title\007titled\n'",  # OSC: sets the terminal's title
        r"printf '\033(Bcharset\n'",  # a character set select
        "nosuchcommand",
    ]
    result = await run(ash, commands, "config", policy, audit)
    assert [r.output for r in result.results] == [
        "bold and red", "titled", "charset", "sh: nosuchcommand: not found"]
    assert [r.status for r in result.results] == ["ok", "ok", "ok", "error"]
    assert not any("\x1b" in r.output or "\x07" in r.output for r in result.results)


async def test_the_cursor_position_request_needs_no_answer(ash):
    """Decided from busybox itself: it asks, its line editor does not wait for the answer, and
    a command longer than the 80-column terminal (its echo wraps) still comes back whole."""
    word = "x" * 150
    async with RecordingConsole(ash.host, ash.port) as console:
        session = DriverSession(console, LINUX)
        await session.open(60)
        assert await session.command(f"echo {word}", 60) == word
        assert await session.command("echo after", 60) == "after"
    assert console.terminal.requests >= 3  # one ESC[6n after each prompt
    assert not any("\x1b" in text for text in console.sent)  # never answered: only lines were typed


class RecordingConsole(TelnetConsole):
    """A telnet console that keeps what it sent."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(host, port)
        self.sent: list[str] = []

    async def send(self, text: str) -> None:
        self.sent.append(text)
        await super().send(text)
