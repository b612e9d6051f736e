"""BIRD's birdc and busybox's ash served on GNS3 node consoles (``cli_servers``), read as raw bytes.

These are the consoles the console layer's escape-code cases are tested on: the
bytes show what a real CLI sends before and after its prompt (birdc's
``ESC[?2004h``, ash's ``ESC[6n``), which is why a prompt anchored at the end of the
text is not found there. Read here with a plain socket, so the fixtures are checked
whatever the console layer makes of them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from bird_process import BirdDaemon
from cli_servers import BIRD_PROMPT, BUSYBOX_PROMPT, serve_birdc, serve_busybox

pytestmark = pytest.mark.integration


class RawConsole:
    """A TCP connection to a console port; ``until`` reads until some bytes arrive (with a deadline)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.received = b""

    async def until(self, wanted: bytes, timeout: float = 30.0) -> bytes:
        async with asyncio.timeout(timeout):
            while wanted not in self.received:
                chunk = await self.reader.read(4096)
                assert chunk, f"the console closed; received {self.received!r}"
                self.received += chunk
        return self.received

    async def send(self, line: str) -> None:
        self.received = b""
        self.writer.write(line.encode() + b"\r")
        await self.writer.drain()


async def connect(port: int) -> AsyncIterator[RawConsole]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        yield RawConsole(reader, writer)
    finally:
        writer.close()


async def node_console(gns3_client, project_id: str, name: str) -> int:
    node = await gns3_client.create_node(project_id, name=name, node_type="vpcs")  # any node with a telnet console
    return int(node["console"])


@pytest.fixture
async def bird_console(gns3_client, gns3_project) -> AsyncIterator[int]:
    """The console port of node BIRD1, answered by birdc on a BIRD daemon of the test's own."""
    port = await node_console(gns3_client, gns3_project["project_id"], "BIRD1")
    daemon = await asyncio.to_thread(BirdDaemon.start)
    try:
        server = await asyncio.to_thread(serve_birdc, daemon, port)
        try:
            yield port
        finally:
            await asyncio.to_thread(server.stop)
    finally:
        await asyncio.to_thread(daemon.stop)


@pytest.fixture
async def busybox_console(gns3_client, gns3_project) -> AsyncIterator[int]:
    """The console port of node Alpine1, answered by busybox's ash."""
    port = await node_console(gns3_client, gns3_project["project_id"], "Alpine1")
    server = await asyncio.to_thread(serve_busybox, port)
    try:
        yield port
    finally:
        await asyncio.to_thread(server.stop)


async def test_birdc_on_a_node_console_sends_bracketed_paste_before_its_prompt(bird_console):
    async for console in connect(bird_console):
        greeting = await console.until(BIRD_PROMPT.encode())
        assert b"BIRD 2." in greeting and b"ready." in greeting
        assert b"\x1b[?2004h" + BIRD_PROMPT.encode() in greeting  # the prompt is not at the end of what came
        await console.send("show protocols")
        answer = await console.until(b"st1")  # the daemon's own answer, after the echo's redraw
        assert b"device1" in answer and b"up" in answer


async def test_busybox_ash_on_a_node_console_asks_for_the_cursor_position_after_its_prompt(busybox_console):
    async for console in connect(busybox_console):
        greeting = await console.until(b"\x1b[6n")
        assert b"BusyBox v1." in greeting
        assert greeting.endswith(BUSYBOX_PROMPT.encode() + b"\x1b[6n")  # after the prompt, not before it
        await console.send("echo $((6 * 7))")
        assert b"42" in await console.until(b"42\r\n")
