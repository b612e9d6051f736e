"""A console that asks for a login: busybox's real ``login`` on a PTY (``Host1 login:``,
``Password:``, ``Login incorrect``), with a test user of its own (``login_console.py``)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import login_console
import pytest
from console_runs import run_on
from login_console import PASSWORD, USER
from shell_process import ShellServer

from gns3server.agent.gns3_copilot.console import LINUX, AuditLog, Credentials, DeviceResult, Policy

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def getty(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ShellServer]:
    server = login_console.start(tmp_path_factory.mktemp("login-etc"))
    try:
        yield server
    finally:
        server.stop()
        assert not server.pids()


async def run(server: ShellServer, commands: list[str], policy: Policy, audit: AuditLog, **kw: Any) -> DeviceResult:
    return await run_on(server, "Host1", LINUX, commands, "show", policy, audit, **kw)


async def test_a_login_prompt_without_credentials_says_what_is_missing(getty, policy, audit):
    result = await run(getty, ["uname -s"], policy, audit)
    assert result.status == "failed" and result.code == "console_credentials_missing", result
    assert "asks for a login" in result.error and "console credentials" in result.error


async def test_wrong_credentials_are_a_refused_login(getty, policy, audit):
    result = await run(getty, ["uname -s"], policy, audit, credentials=Credentials(USER, "not-the-password"))
    assert result.status == "failed" and result.code == "console_login_failed", result
    assert "refused the login" in result.error and "not-the-password" not in result.error
    [login] = [e for e in await audit.entries() if e.command == "<console login>"]
    assert login.outcome == "failed" and "not-the-password" not in login.detail


async def test_the_console_login_is_answered_and_audited_never_shown(getty, policy, audit, caplog, tmp_path):
    caplog.set_level(logging.DEBUG)
    result = await run(getty, ["id -un", "uname -s"], policy, audit, credentials=Credentials(USER, PASSWORD, source="template"))
    assert result.status == "ok", result
    assert [r.output for r in result.results] == [USER, "Linux"]
    entries = await audit.entries()
    assert [(e.command, e.outcome) for e in reversed(entries)] == [("<console login>", "ok"), ("id -un", "ok"), ("uname -s", "ok")]
    assert entries[-1].detail == "as c*** with the template's console credentials"
    # The password is nowhere: not in the results, the audit (its file included), nor any log line.
    assert PASSWORD not in repr(result) and all(PASSWORD not in e.detail + e.command for e in entries)
    files = [Path(audit.path), Path(f"{audit.path}-wal")]
    assert not any(PASSWORD.encode() in f.read_bytes() for f in files if f.exists())
    assert PASSWORD not in caplog.text
