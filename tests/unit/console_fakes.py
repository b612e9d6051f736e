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


# What IOS prints before its prompt, as IOS transcripts show it.
SETUP_DIALOG = ("\r\n\r\n         --- System Configuration Dialog ---\r\n\r\n"
                "Would you like to enter the initial configuration dialog? [yes/no]: ")
AUTOINSTALL = "\r\nWould you like to terminate autoinstall? [yes]: "
PRESS_RETURN = "\r\n\r\nPress RETURN to get started!\r\n\r\n\r\n"
USER_ACCESS = "\r\n\r\nUser Access Verification\r\n\r\nUsername: "


@dataclass
class FakeIOS:
    """An IOS-like console: prompts R1# / R1(config)#, --More-- paging, % errors.

    ``honour_paging_off=False`` ignores ``terminal length 0`` so that paging is
    exercised. ``gate`` (if set) holds the ``show slow`` command until it is set;
    ``slow_started`` is set when a ``show slow`` command arrives. ``first_boot``:
    the first connection meets the initial configuration dialog, autoinstall and
    "Press RETURN" (once, as a router that has just booted); ``login``: every
    connection is asked Username/Password (``% Login invalid`` on a wrong one,
    three tries); ``enable_secret``: enable asks for it (``% Bad secrets``).
    ``raw`` is every byte received (an interrupt, Ctrl-^, among them), ``answers``
    what was typed at those questions.
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
    first_boot: bool = False
    login: tuple[str, str] | None = None
    enable_secret: str | None = None
    raw: bytearray = field(default_factory=bytearray)
    answers: list[str] = field(default_factory=list)  # what was typed at its questions (passwords too)
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
            if not await self._before_prompt(reader, writer, state):
                return
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

    async def _read_line(self, reader: asyncio.StreamReader) -> str | None:
        data = bytearray()
        while True:
            byte = await reader.read(1)
            if not byte:
                return None
            self.raw += byte
            if byte == b"\r":
                return data.decode()
            if byte not in (b"\n", b"\x1e"):
                data += byte

    async def _ask(self, question: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, echo: bool = True) -> str | None:
        writer.write(question.encode())
        await writer.drain()
        answer = await self._read_line(reader)
        if answer is not None:
            self.answers.append(answer)
            if echo:
                writer.write(answer.encode())
        return answer

    async def _before_prompt(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, state: dict[str, bool]) -> bool:
        """The first boot's questions, then the line's login; False if the client left or failed."""
        if self.first_boot:
            self.first_boot = False
            await self._read_line(reader)  # the console shows the dialog when someone presses Enter
            while (answer := await self._ask(SETUP_DIALOG, reader, writer)) not in ("no", None):
                writer.write(b"\r\n% Please answer 'yes' or 'no'.")
            if answer is None or await self._ask(AUTOINSTALL, reader, writer) is None:
                return False
            writer.write(PRESS_RETURN.encode())
            if await self._read_line(reader) is None:
                return False
            state["user"] = True
            if self.login is None:
                writer.write(f"\r\n{self.prompt(state)}".encode())
                return True
        if self.login is not None:
            await self._read_line(reader)
            for _ in range(3):
                username = await self._ask(USER_ACCESS if _ == 0 else "\r\nUsername: ", reader, writer)
                password = await self._ask("\r\nPassword: ", reader, writer, echo=False)
                if username is None or password is None:
                    return False
                if (username, password) == self.login:
                    state["user"] = True
                    writer.write(f"\r\n{self.prompt(state)}".encode())
                    return True
                writer.write(b"\r\n% Login invalid\r\n")
            return False
        return True

    async def _answer(self, line: str, state: dict[str, bool], reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        words = line.split()
        if not words:
            return
        if words[:2] == ["terminal", "length"]:
            state["paging"] = not (self.honour_paging_off and words[2:] == ["0"])
        elif words[:2] == ["terminal", "width"]:
            pass
        elif line == "enable" and self.enable_secret is not None:
            secret = await self._ask("Password: ", reader, writer, echo=False)
            writer.write(b"\r\n")
            if secret == self.enable_secret:
                state["user"] = False
            else:
                writer.write(b"% Bad secrets\r\n\r\n")
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
