"""The telnet client's option handling and the audit log's storage and filters."""

from __future__ import annotations

import asyncio
import re

import pytest

from gns3server.agent.gns3_copilot.console import AuditLog, ConsoleClosed, TelnetConsole, Who
from gns3server.agent.gns3_copilot.console.audit import AUDIT_DB_NAME

WAIT = 30.0
"""How long a read or connect that should succeed may take: generous, for a busy machine (it ends at once)."""

IAC, DONT, DO, WONT, WILL, SB, SE = 255, 254, 253, 252, 251, 250, 240


async def serve_once(payload: bytes, replies: asyncio.Queue[bytes]):
    """A server that sends ``payload`` in pieces, then forwards what the client sends."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for i in range(0, len(payload), 3):  # split IAC sequences across reads
            writer.write(payload[i : i + 3])
            await writer.drain()
        while data := await reader.read(100):
            await replies.put(data)
        writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0)


@pytest.mark.parametrize("answer", [False, True])
async def test_telnet_commands_are_stripped_and_answered_once_if_asked(answer):
    replies: asyncio.Queue[bytes] = asyncio.Queue()
    payload = (
        bytes([IAC, WILL, 1, IAC, DO, 24, IAC, DO, 3, IAC, WILL, 1, IAC, SB, 24, 1, IAC, SE])
        + b"caf\xc3\xa9 "
        + bytes([IAC, IAC])
        + b" R1#"
    )
    server = await serve_once(payload, replies)
    port = server.sockets[0].getsockname()[1]
    async with TelnetConsole("127.0.0.1", port, answer_options=answer) as console:
        await console.connect(WAIT)
        text, _ = await console.read_until(re.compile(r"R1#\Z"), WAIT)
        assert text == "café \ufffd R1#"  # IAC IAC is a data byte 255 (not UTF-8)
        await console.send_line("end")
        got = b""
        while not got.endswith(b"end\r"):
            got += await asyncio.wait_for(replies.get(), WAIT)
    server.close()
    await server.wait_closed()
    expected = bytes([IAC, DO, 1, IAC, WONT, 24, IAC, WILL, 3]) if answer else b""
    assert got == expected + b"end\r"


class ByteByByte(asyncio.StreamReader):
    """A reader that hands out one byte per read, as a slow link may: every
    multi-byte character is split across reads."""

    async def read(self, n: int = -1) -> bytes:
        return await super().read(1)


async def test_characters_split_across_reads_are_decoded_whole():
    console = TelnetConsole("127.0.0.1", 1)
    reader = ByteByByte()
    reader.feed_data("interface «uplink» — état ✓\r\nR1#".encode())
    console._reader = reader  # the decoding under test sits behind the socket
    text, _ = await console.read_until(re.compile(r"R1#"), WAIT)
    assert text == "interface «uplink» — état ✓\r\nR1#"


async def test_closed_console_is_reported_with_its_output():
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"bye")
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    async with TelnetConsole("127.0.0.1", server.sockets[0].getsockname()[1]) as console:
        await console.connect(WAIT)
        with pytest.raises(ConsoleClosed) as info:
            await console.read_until(re.compile("#"), WAIT)
    assert info.value.output == "bye"
    server.close()
    await server.wait_closed()


async def test_audit_log_records_and_filters(tmp_path):
    log = AuditLog(tmp_path)
    alice, bob = Who("alice", "s1", "p1"), Who("bob", "s2", "p2")
    await log.record(alice, "PC1", "show ip", "ok")
    await log.record(alice, "R1", "reload", "blocked", "blocked by policy (reload)")
    await log.record(bob, "PC1", "ip 10.0.0.1/24", "error", "Invalid address")
    assert [e.command for e in await log.entries()] == ["ip 10.0.0.1/24", "reload", "show ip"]
    assert [e.command for e in await log.entries(user="alice")] == ["reload", "show ip"]
    assert [e.command for e in await log.entries(device="PC1", project="p2")] == ["ip 10.0.0.1/24"]
    assert [e.detail for e in await log.entries(outcome="blocked")] == ["blocked by policy (reload)"]
    assert [e.command for e in await log.entries(session="s1", limit=1)] == ["reload"]
    newest = (await log.entries())[0]
    assert [e.command for e in await log.entries(since=newest.time)] == ["ip 10.0.0.1/24"]
    await log.close()

    reopened = AuditLog(tmp_path)  # entries survive a restart
    assert len(await reopened.entries()) == 3 and (tmp_path / AUDIT_DB_NAME).exists()
    await reopened.close()


async def test_audit_log_is_safe_under_concurrent_writes(tmp_path):
    log = AuditLog(tmp_path)
    who = Who("alice", "s1", "p1")
    await asyncio.gather(*(log.record(who, f"PC{i % 3}", f"show {i}", "ok") for i in range(50)))
    assert len(await log.entries(limit=1000)) == 50
    assert len(await log.entries(device="PC0", limit=1000)) == 17
    await log.close()
