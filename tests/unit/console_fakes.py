"""Small fake telnet consoles for the console tests: an IOS-like CLI and a silent socket."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field

IAC_WILL_ECHO_SGA = bytes([255, 251, 1, 255, 251, 3])
MORE = " --More-- "
ERASE_MORE = "\b" * len(MORE) + " " * len(MORE) + "\b" * len(MORE)
INVALID = "                 ^\r\n% Invalid input detected at '^' marker.\r\n"


@dataclass
class FakeIOS:
    """An IOS-like console: prompts R1# / R1(config)#, --More-- paging, % errors.

    ``honour_paging_off=False`` ignores ``terminal length 0`` so that paging is
    exercised. ``gate`` (if set) holds the ``show slow`` command until it is set;
    ``slow_started`` is set when a ``show slow`` command arrives.
    """

    hostname: str = "R1"
    start_in: str = "exec"  # or "config" (left there by someone), "user" (needs enable)
    honour_paging_off: bool = True
    page_lines: int = 10
    received: list[str] = field(default_factory=list)
    events: list[tuple[str, int]] = field(default_factory=list)
    gate: asyncio.Event | None = None
    slow_started: asyncio.Event = field(default_factory=asyncio.Event)
    port: int = 0
    _server: asyncio.Server | None = None
    _connections: int = 0
    _state: dict[str, bool] | None = None  # the console line's mode outlives connections

    async def start(self) -> FakeIOS:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._connections += 1
        conn = self._connections
        self.events.append(("open", conn))
        if self._state is None:
            self._state = {"config": self.start_in == "config", "user": self.start_in == "user"}
        state = self._state
        state["paging"] = True
        writer.write(IAC_WILL_ECHO_SGA)
        try:
            while True:
                line = await self._read_line(reader)
                if line is None:
                    break
                writer.write((line + "\r\n").encode())
                if line:
                    self.received.append(line)
                await self._answer(line, state, reader, writer)
                writer.write(self.prompt(state).encode())
                await writer.drain()
        finally:
            self.events.append(("close", conn))
            writer.close()

    def prompt(self, state: dict[str, bool]) -> str:
        if state["user"]:
            return f"{self.hostname}>"
        return f"{self.hostname}(config)#" if state["config"] else f"{self.hostname}#"

    @staticmethod
    async def _read_line(reader: asyncio.StreamReader) -> str | None:
        data = bytearray()
        while True:
            byte = await reader.read(1)
            if not byte:
                return None
            if byte == b"\r":
                return data.decode()
            if byte != b"\n":
                data += byte

    async def _answer(self, line: str, state: dict[str, bool], reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        words = line.split()
        if not words:
            return
        if words[:2] == ["terminal", "length"]:
            state["paging"] = not (self.honour_paging_off and words[2:] == ["0"])
        elif words[:2] == ["terminal", "width"]:
            pass
        elif line == "enable":
            state["user"] = False
        elif state["user"]:
            writer.write(INVALID.encode())
        elif line in ("configure terminal", "conf t"):
            state["config"] = True
            writer.write(b"Enter configuration commands, one per line.  End with CNTL/Z.\r\n")
        elif line == "end":
            state["config"] = False
        elif state["config"] and words[0] == "hostname" and len(words) == 2:
            self.hostname = words[1]
        elif state["config"] and words[0] == "interface" and len(words) == 1:
            writer.write(b"% Incomplete command.\r\n\r\n")
        elif line == "s":
            writer.write(b'% Ambiguous command:  "s"\r\n')
        elif line == "show slow":
            self.slow_started.set()
            if self.gate is not None:
                await self.gate.wait()
            writer.write(b"slow done\r\n")
        elif line == "show forever":  # pages without end, each page as soon as it is asked for
            await self._paged((f"line {i}" for i in itertools.count()), state, reader, writer)
        elif line in ("show running-config", "show run"):
            await self._paged([f"line {i}" for i in range(1, 31)] + ["end"], state, reader, writer)
        elif line == "show tech-support":
            writer.write("".join(f"tech line {i:06d} {'x' * 60}\r\n" for i in range(3000)).encode())
        elif state["config"] and words[0] in ("ip", "no", "description"):
            pass
        else:
            writer.write(INVALID.encode())

    async def _paged(self, lines: Iterable[str], state: dict[str, bool], reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for i, text in enumerate(lines):
            if state["paging"] and i and i % self.page_lines == 0:
                writer.write(MORE.encode())
                await writer.drain()
                if await reader.read(1) != b" ":
                    return
                writer.write(ERASE_MORE.encode())
            writer.write((text + "\r\n").encode())


@dataclass
class SilentConsole:
    """Accepts connections and never says anything."""

    port: int = 0
    _server: asyncio.Server | None = None
    _writers: list[asyncio.StreamWriter] = field(default_factory=list)

    async def start(self) -> SilentConsole:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self._writers.append(writer)
            await reader.read()  # until the client goes away

        self._server = await asyncio.start_server(serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.close()
        await self._server.wait_closed()
