"""The telnet client and the drivers against fake consoles: IOS prompts, paging, errors,
timeouts, the output cap, driver choice, and the runner's lock, policy and audit."""

from __future__ import annotations

import asyncio
import re

import pytest

from gns3server.agent.gns3_copilot.console import (
    IOS,
    LINUX,
    TRUNCATED_MARKER,
    VPCS,
    ConsoleConnectError,
    ConsoleTimeout,
    Device,
    DeviceBusyError,
    DeviceLocks,
    DriverSession,
    TelnetConsole,
    UnknownDriverError,
    Who,
    run_commands,
)
from gns3server.agent.gns3_copilot.console.registry import Drivers

from .console_fakes import FakeIOS, SilentConsole

WHO = Who("alice", "session-1", "project-1")


@pytest.fixture
async def ios():
    server = await FakeIOS().start()
    yield server
    await server.stop()


def run(device, commands, *, mode="show", locks=None, policy, audit, timeout=60.0, **kw):
    """A batch with a deadline generous for a busy machine: a test wanting a timeout gives its own."""
    return run_commands(device, commands, mode=mode, policy=policy, locks=locks or DeviceLocks(), audit=audit, who=WHO, timeout=timeout, **kw)


@pytest.mark.parametrize(
    ("node", "override", "driver"),
    [
        ({"node_type": "vpcs"}, None, VPCS),
        ({"node_type": "qemu"}, None, IOS),
        ({"node_type": "iou"}, None, IOS),
        ({"node_type": "dynamips"}, None, IOS),
        ({"node_type": "docker"}, None, LINUX),
        ({"node_type": "qemu", "tags": ["lab", "driver:linux"]}, None, LINUX),
        ({"node_type": "docker", "tags": ["Driver=IOS"]}, None, IOS),
        ({"node_type": "qemu", "tags": ["vpcs"]}, None, VPCS),
        ({"node_type": "qemu", "tags": ["driver:linux"]}, "vpcs", VPCS),
        ({"node_type": "cloud", "tags": ["driver:ios"]}, None, IOS),
    ],
)
def test_the_driver_is_picked_by_type_tag_and_override(node, override, driver):
    assert Drivers().pick(node, override=override).driver is driver


@pytest.mark.parametrize(("node", "override"), [({"node_type": "ethernet_switch", "name": "SW1"}, None),
                                                ({"node_type": "qemu"}, "nosuch")])
def test_an_unknown_driver_is_refused(node, override):
    with pytest.raises(UnknownDriverError):
        Drivers().pick(node, override=override)


@pytest.mark.parametrize(
    ("driver", "output", "errors"),
    [
        (IOS, "             ^\n% Invalid input detected at '^' marker.", ["% Invalid input detected at '^' marker."]),
        (IOS, "% Incomplete command.", ["% Incomplete command."]),
        (IOS, '% Ambiguous command:  "s"', ['% Ambiguous command:  "s"']),
        (IOS, "Interface  IP-Address\nEthernet0/0  10.0.0.1", []),
        (VPCS, 'Bad command: "foo". Use ? for help.', ['Bad command: "foo". Use ? for help.']),
        (VPCS, "Invalid address", ["Invalid address"]),
        (VPCS, "PC1 : 10.0.0.1 255.255.255.0", []),
        (LINUX, "sh: foo: not found", ["sh: foo: not found"]),
        (LINUX, "bash: foo: command not found", ["bash: foo: command not found"]),
        (LINUX, "eth0: 10.0.0.1", []),
        (LINUX, "RTNETLINK answers: File exists", ["RTNETLINK answers: File exists"]),
        (LINUX, "Error: Nexthop has invalid gateway.", ["Error: Nexthop has invalid gateway."]),
        (LINUX, 'Cannot find device "eth9"', ['Cannot find device "eth9"']),
        (LINUX, 'Device "eth9" does not exist.', ['Device "eth9" does not exist.']),
        (LINUX, "3: eth0    inet 10.0.0.1/24 brd 10.0.0.255 scope global eth0", []),
    ],
)
def test_error_lines_are_recognised(driver, output, errors):
    assert driver.error_lines(output) == errors


async def test_ios_show_config_and_errors(ios, policy, audit):
    device = Device("R1", "127.0.0.1", ios.port, IOS)
    shown = await run(device, ["show run", "sh ip int br"], policy=policy, audit=audit)
    assert ios.received[:2] == ["terminal length 0", "terminal width 0"]
    show_run, bad = shown.results
    assert show_run.status == "ok" and show_run.output.splitlines() == [f"line {i}" for i in range(1, 31)] + ["end"]
    assert bad.status == "error" and bad.errors == ["% Invalid input detected at '^' marker."]
    assert shown.status == "error"

    configured = await run(device, ["hostname R9", "interface", "s"], mode="config", policy=policy, audit=audit)
    assert [r.status for r in configured.results] == ["ok", "error", "error"]
    assert configured.results[1].errors == ["% Incomplete command."]
    assert configured.results[2].errors == ['% Ambiguous command:  "s"']
    assert ios.received[-5:] == ["configure terminal", "hostname R9", "interface", "s", "end"]
    assert ios.hostname == "R9"


@pytest.mark.parametrize("start_in", ["config", "user"])
async def test_ios_console_left_in_config_or_user_mode_is_brought_to_exec(policy, audit, start_in):
    server = await FakeIOS(start_in=start_in).start()
    try:
        result = await run(Device("R1", "127.0.0.1", server.port, IOS), ["show run"], policy=policy, audit=audit)
    finally:
        await server.stop()
    assert result.status == "ok" and result.results[0].output.endswith("end")
    assert server.received[0] == ("end" if start_in == "config" else "enable")


async def test_ios_pager_is_answered_when_paging_stays_on(policy, audit):
    server = await FakeIOS(honour_paging_off=False).start()
    try:
        result = await run(Device("R1", "127.0.0.1", server.port, IOS), ["show running-config"], policy=policy, audit=audit)
    finally:
        await server.stop()
    output = result.results[0].output
    assert output.splitlines() == [f"line {i}" for i in range(1, 31)] + ["end"]
    assert "More" not in output and "\b" not in output


async def test_a_paged_command_gets_one_timeout_for_all_its_pages():
    # Each page comes at once when asked for, but there is no last page: the command's
    # timeout must bound all its pages together, not start again at every page. Only the
    # command has the short timeout; connecting and the prompt get a generous one.
    server = await FakeIOS(honour_paging_off=False).start()
    try:
        async with TelnetConsole("127.0.0.1", server.port) as console:
            session = DriverSession(console, IOS)
            await session.open(60)
            with pytest.raises(ConsoleTimeout) as caught:
                await asyncio.wait_for(session.command("show forever", 1.0), 60)
    finally:
        await server.stop()
    assert "line 1" in caught.value.output


class _EndlessPages:
    """A console whose next page is always already buffered: no read ever waits."""

    def __init__(self) -> None:
        self.pages = 0

    async def send_line(self, line: str) -> None:
        pass

    async def send(self, text: str) -> None:
        self.pages += 1

    async def read_until(self, pattern: re.Pattern[str], timeout: float, *, lookback: int | None = 256):
        await asyncio.sleep(0)
        raw = f"page {self.pages}\r\n --More-- "
        return raw, pattern.search(raw)


async def test_pages_already_buffered_still_end_at_the_deadline():
    # On a busy machine the next page is in the buffer before the read's timer fires,
    # so only the command's own deadline can end an endless paged output.
    console = _EndlessPages()
    session = DriverSession(console, IOS)  # type: ignore[arg-type]
    with pytest.raises(ConsoleTimeout) as caught:
        await asyncio.wait_for(session.command("", 0.05), 30)
    assert "still paging" in str(caught.value) and "page 0" in caught.value.output and console.pages > 0


async def test_output_is_capped_with_a_marker(ios, policy, audit):
    result = await run(Device("R1", "127.0.0.1", ios.port, IOS), ["show tech-support", "show run"], policy=policy, audit=audit, max_output=8192)
    tech, after = result.results
    assert tech.status == "ok" and TRUNCATED_MARKER.strip() in tech.output
    assert len(tech.output) <= 8192 + len(TRUNCATED_MARKER)
    assert tech.output.startswith("tech line 000000") and tech.output.rstrip().endswith(f"tech line 002999 {'x' * 60}")
    assert after.output.endswith("end")  # the console stays in step after a cut


async def test_connect_refused_is_reported_and_audited(policy, audit):
    with socket_closed_port() as port:
        result = await run(Device("R1", "127.0.0.1", port, IOS), ["show run"], policy=policy, audit=audit)
    assert result.status == "failed" and "could not open" in result.error
    assert [r.status for r in result.results] == ["not_run"]
    assert [e.outcome for e in await audit.entries()] == ["not_run"]


async def test_silent_console_times_out(policy, audit):
    silent = await SilentConsole().start()
    try:
        console = TelnetConsole("127.0.0.1", silent.port)
        await console.connect(60)
        with pytest.raises(ConsoleTimeout):
            await console.read_until(re.compile("#"), 0.2)
        await console.close()
        # One deadline bounds the batch: long enough for a loopback connect on a busy machine, the rest
        # of it spent waiting for a prompt that never comes.
        result = await run(Device("R1", "127.0.0.1", silent.port, IOS), ["show run"], policy=policy, audit=audit, timeout=2.0)
    finally:
        await silent.stop()
    assert result.status == "failed" and "no prompt" in result.error
    assert result.results[0].status == "not_run"


async def test_blocked_batch_sends_nothing(ios, policy, audit):
    device = Device("R1", "127.0.0.1", ios.port, IOS)
    result = await run(device, ["show run", "wr er"], mode="config", policy=policy, audit=audit)
    assert result.status == "blocked"
    assert [(r.command, r.status) for r in result.results] == [("show run", "not_run"), ("wr er", "blocked")]
    read_only = await run(device, ["show run", "conf t"], policy=policy, audit=audit)
    assert read_only.results[1].reason.startswith("read-only mode")
    assert ios.events == [] and ios.received == []
    entries = await audit.entries(outcome="blocked")
    assert {e.command for e in entries} == {"wr er", "conf t"}


async def test_one_device_is_serialised_two_devices_run_concurrently(policy, audit):
    gate = asyncio.Event()
    first, second = await FakeIOS(gate=gate).start(), await FakeIOS(hostname="R2", gate=gate).start()
    locks = DeviceLocks()
    try:
        r1 = Device("R1", "127.0.0.1", first.port, IOS)
        a = asyncio.create_task(run(r1, ["show slow"], locks=locks, policy=policy, audit=audit))
        await asyncio.wait_for(first.slow_started.wait(), 60)
        b = asyncio.create_task(run(r1, ["show run"], locks=locks, policy=policy, audit=audit))
        # Another device is not held up by R1's lock: its slow command starts too.
        c = asyncio.create_task(run(Device("R2", "127.0.0.1", second.port, IOS), ["show slow"], locks=locks, policy=policy, audit=audit))
        await asyncio.wait_for(second.slow_started.wait(), 60)
        assert locks.locked("127.0.0.1", first.port) and not b.done()
        assert first.events == [("open", 1)]  # the second run on R1 waits for the lock
        gate.set()
        results = await asyncio.wait_for(asyncio.gather(a, b, c), 60)
    finally:
        gate.set()
        await first.stop()
        await second.stop()
    assert [r.status for r in results] == ["ok", "ok", "ok"]
    assert results[0].results[0].output == "slow done"
    assert first.events == [("open", 1), ("close", 1), ("open", 2), ("close", 2)]
    assert locks.active() == 0  # unused locks are dropped


async def test_lock_wait_is_bounded():
    locks = DeviceLocks()
    async with locks.hold("127.0.0.1", 1):
        with pytest.raises(DeviceBusyError):
            async with locks.hold("127.0.0.1", 1, timeout=0.05):
                pass
        async with locks.hold("127.0.0.1", 2, timeout=60):  # another device's lock is free: no wait
            pass
    assert locks.active() == 0


async def test_connect_timeout_is_a_connect_error():
    console = TelnetConsole("192.0.2.1", 23)  # TEST-NET-1: never answers
    with pytest.raises(ConsoleConnectError):
        await console.connect(0.05)


def socket_closed_port():
    """A context giving a loopback port nothing listens on."""
    import contextlib
    import socket

    @contextlib.contextmanager
    def closed():
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            yield s.getsockname()[1]

    return closed()


async def test_linux_shell_with_wrapped_echo_and_errors(policy, audit):
    """A shell that wraps its echo at 40 columns (as readline does) and reports unknown commands."""
    received: list[str] = []

    async def shell(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"/ # ")
        while True:
            try:
                line = (await reader.readuntil(b"\r")).decode()[:-1]
            except asyncio.IncompleteReadError:
                break
            if not line:
                writer.write(b"\r\n/ # ")
                continue
            received.append(line)
            wrapped = " \r".join(line[i : i + 40] for i in range(0, len(line), 40))
            word = line.split()[0]
            answer = "" if word == "export" else f"long ok {len(line)}" if word == "cat" else f"sh: {word}: not found"
            writer.write(f"{wrapped}\r\n{answer}\r\n/ # ".encode())
        writer.close()

    server = await asyncio.start_server(shell, "127.0.0.1", 0)
    long = "cat /" + "x" * 100
    try:
        device = Device("web", "127.0.0.1", server.sockets[0].getsockname()[1], LINUX)
        result = await run(device, [long, "ps"], mode="config", policy=policy, audit=audit)
    finally:
        server.close()
        await server.wait_closed()
    assert received[-2:] == [long, "ps"] and received[0].startswith("export PAGER=cat")
    assert [r.output for r in result.results] == ["long ok 105", "sh: ps: not found"]
    assert result.results[1].errors == ["sh: ps: not found"]


async def test_a_second_line_cannot_be_smuggled_into_a_command(ios, policy, audit):
    result = await run(Device("R1", "127.0.0.1", ios.port, IOS), ["show run\nreload", "show run\n"], policy=policy, audit=audit)
    assert [r.status for r in result.results] == ["blocked", "not_run"]
    assert ios.events == []


class PiecewiseReader:
    """A console's incoming side that hands over one prepared piece per read."""

    def __init__(self, *pieces: bytes) -> None:
        self.pieces = list(pieces)

    async def read(self, size: int) -> bytes:
        assert self.pieces, "read past the scripted output"
        return self.pieces.pop(0)


class RecordingWriter:
    def __init__(self) -> None:
        self.sent = b""

    def write(self, data: bytes) -> None:
        self.sent += data

    async def drain(self) -> None:
        return None


async def test_a_long_echo_arriving_in_several_reads_is_still_recognised():
    """A 600-character command echoed in two reads: the echo is matched from its start,
    not only within the last read plus a short look-back."""
    command = "echo " + "x" * 595
    echo = (command + "\r\n").encode()
    console = TelnetConsole("127.0.0.1", 1)
    console._reader = PiecewiseReader(echo[:300], echo[300:], b"done\r\nhost$ ")  # type: ignore[assignment]
    console._writer = RecordingWriter()  # type: ignore[assignment]
    output = await DriverSession(console, LINUX).command(command, timeout=60)
    assert output == "done"
    assert console._writer.sent == (command + "\r").encode()


async def test_a_cancelled_batch_still_audits_what_was_typed(policy, audit):
    """Abort or disconnect mid-batch: the commands done, the one in flight and the rest are audited."""
    gate = asyncio.Event()
    ios = await FakeIOS(gate=gate).start()
    try:
        device = Device("R1", "127.0.0.1", ios.port, IOS)
        batch = asyncio.create_task(run(device, ["show run", "show slow", "show running-config"], policy=policy, audit=audit))
        await asyncio.wait_for(ios.slow_started.wait(), 60)
        batch.cancel()
        with pytest.raises(asyncio.CancelledError):
            await batch
    finally:
        gate.set()
        await ios.stop()
    entries = await audit.entries(device="R1")
    assert [(e.command, e.outcome) for e in reversed(entries)] == [
        ("show run", "ok"), ("show slow", "failed"), ("show running-config", "not_run")]
    assert "may have been sent" in entries[1].detail and entries[0].detail == "cancelled"
