"""What a console asks before its prompt, and a console left busy: the IOS dialogues (no IOS runs
here, so a simulator speaks them as IOS transcripts show them), interrupts, cancellation."""

from __future__ import annotations

import asyncio

import pytest

from gns3server.agent.gns3_copilot.console import (
    BIRD,
    IOS,
    ConsoleBusyError,
    ConsoleLoginError,
    Credentials,
    CredentialsNeededError,
    Device,
    DeviceLocks,
    DriverSession,
    TelnetConsole,
    Who,
    run_commands,
)

from .console_fakes import FakeIOS

WHO = Who("alice", "session-1", "project-1")


async def started(**kw) -> FakeIOS:
    return await FakeIOS(**kw).start()


def run(port: int, commands: list[str], policy, audit, **kw):
    device = Device("R1", "127.0.0.1", port, IOS, credentials=kw.pop("credentials", None))
    return run_commands(device, commands, mode=kw.pop("mode", "show"), policy=policy, locks=DeviceLocks(), audit=audit,
                        who=WHO, timeout=kw.pop("timeout", 60), **kw)


async def test_first_boot_dialog_autoinstall_and_press_return_are_answered(policy, audit):
    ios = await started(first_boot=True)
    try:
        result = await run(ios.port, ["show run"], policy, audit)
    finally:
        await ios.stop()
    assert result.status == "ok", result
    # "no" to the setup dialog, "yes" to ending autoinstall, then enable from R1>.
    assert ios.answers == ["no", "yes"]
    assert ios.received[:2] == ["enable", "terminal length 0"]


async def test_an_ios_login_and_enable_password_are_typed_from_the_credentials(policy, audit):
    ios = await started(login=("admin", "line-pw"), enable_secret="en-pw")
    try:
        creds = Credentials("admin", "line-pw", "en-pw")
        result = await run(ios.port, ["show run"], policy, audit, credentials=creds)
        again = await run(ios.port, ["show run"], policy, audit, credentials=creds)  # each session logs in
    finally:
        await ios.stop()
    assert result.status == "ok" and again.status == "ok", result
    assert ios.answers == ["admin", "line-pw", "en-pw"] * 2 and "enable" in ios.received
    assert "line-pw" not in ios.received and "en-pw" not in ios.received  # never taken as commands
    logins = [e for e in await audit.entries() if e.command == "<console login>"]
    assert [e.outcome for e in logins] == ["ok", "ok"]
    assert logins[0].detail == "as a*** with the node's console credentials"


@pytest.mark.parametrize(
    ("credentials", "error", "code"),
    [
        (None, CredentialsNeededError, "console_credentials_missing"),
        (Credentials("admin", "wrong"), ConsoleLoginError, "console_login_failed"),
    ],
)
async def test_a_login_without_or_with_wrong_credentials_stops_at_once(policy, audit, credentials, error, code):
    ios = await started(login=("admin", "line-pw"))
    try:
        async with TelnetConsole("127.0.0.1", ios.port) as console:
            with pytest.raises(error) as caught:
                await DriverSession(console, IOS, credentials).open(60)
        result = await run(ios.port, ["show run"], policy, audit, credentials=credentials)
    finally:
        await ios.stop()
    assert "wrong" not in str(caught.value)
    assert result.status == "failed" and result.code == code
    assert ios.answers.count("admin") <= 2  # one try per session: a refused login is not retried


async def test_a_wrong_enable_secret_is_refused(policy, audit):
    ios = await started(enable_secret="en-pw", start_in="user")
    try:
        result = await run(ios.port, ["show run"], policy, audit, credentials=Credentials(password="nope"))
    finally:
        await ios.stop()
    assert result.status == "failed" and result.code == "console_login_failed", result


async def test_ios_is_interrupted_with_its_escape_sequence_not_ctrl_c(policy, audit):
    """An aborted batch interrupts the command in flight on the device, so the console is not left
    busy; IOS gets Ctrl-^ (Ctrl-C is the console's break on some lines: ROMMON during a boot)."""
    received = bytearray()
    hanging, interrupted = asyncio.Event(), asyncio.Event()

    async def ios(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line = b""
        while byte := await reader.read(1):
            received.extend(byte)
            if byte == b"\x1e":
                interrupted.set()
            elif byte == b"\r":
                writer.write(line + b"\r\n")
                if line == b"show slow":
                    hanging.set()  # never answers, as a ping to an address that does not reply
                else:
                    writer.write(b"R1#")
                line = b""
            else:
                line += byte

    server = await asyncio.start_server(ios, "127.0.0.1", 0)
    try:
        task = asyncio.create_task(run(server.sockets[0].getsockname()[1], ["show slow"], policy, audit))
        await asyncio.wait_for(hanging.wait(), 60)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(interrupted.wait(), 60)
    finally:
        server.close()
        await server.wait_closed()
    assert b"\x03" not in received


async def test_a_console_that_answers_without_a_prompt_is_busy_not_silent():
    async def chatty(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:  # a command that prints forever and never gives the prompt back
                writer.write(b"64 bytes from 10.0.0.2: icmp_seq=1\r\n")
                await writer.drain()
                await asyncio.sleep(0.05)
        except ConnectionError:
            pass

    server = await asyncio.start_server(chatty, "127.0.0.1", 0)
    try:
        async with TelnetConsole("127.0.0.1", server.sockets[0].getsockname()[1]) as console:
            with pytest.raises(ConsoleBusyError, match="answers but shows no prompt") as caught:
                await DriverSession(console, IOS).open(3)
    finally:
        server.close()
        await server.wait_closed()
    assert "64 bytes from 10.0.0.2" in str(caught.value)  # its last line, for the user


async def test_a_family_without_an_interrupt_sends_none():
    """Ctrl-C ends birdc itself: BIRD has no interrupt, the session only waits for the prompt."""
    received = bytearray()

    async def birdc(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"BIRD 2.0.12 ready.\r\nbird> ")
        while data := await reader.read(100):
            received.extend(data)

    server = await asyncio.start_server(birdc, "127.0.0.1", 0)
    try:
        async with TelnetConsole("127.0.0.1", server.sockets[0].getsockname()[1]) as console:
            session = DriverSession(console, BIRD)
            await session.open(60)
            await console.send_line("show route")
            assert not await session.interrupt(0.3)
    finally:
        server.close()
        await server.wait_closed()
    assert received == b"show route\r"  # the prompt came by itself: no wake-up line, and no Ctrl-C
