"""A simulated device served on a loopback TCP port, as GNS3 serves a node's telnet console.

The server speaks enough telnet to look like GNS3's console proxy (it offers WILL ECHO
and WILL SGA and ignores the client's option replies), echoes what is typed, prints
the transcript's login dialog first when it has one, and then plays the
:class:`~.device.Session` for every connection: one device, any number of consoles.
Keys act as on the device: Enter ends a line, a key at the pager shows the next page
(``q`` or the interrupt key stops), the interrupt key (Ctrl-C) stops a command that
repeats and abandons a line being typed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import Self

from .device import Device, Reply, Transcript

log = logging.getLogger(__name__)

IAC, WILL, WONT, DO, DONT, SB, SE = 255, 251, 252, 253, 254, 250, 240
ECHO, SGA = 1, 3
INTERRUPT = "\x03"
REPEAT_EVERY = 0.2  # seconds between the lines of a command that repeats (ping without a count)


@dataclass
class CliSimulator:
    """``async with CliSimulator(Transcript.load("junos")) as sim: sim.port``: a console to connect to."""

    transcript: Transcript
    seconds_per_unit: float | None = None  # how long a confirmed commit's unit (minute, second) lasts here
    listen_port: int = 0  # a GNS3 node's console port (0: one the OS picks)
    kind: type[Device] = Device  # the device playing the transcript (``ios.IOSDevice``: a stateful IOS)
    device: Device = field(init=False)
    port: int = field(init=False, default=0)
    received: list[str] = field(init=False, default_factory=list)  # every line typed, as it came
    _server: asyncio.AbstractServer | None = field(init=False, default=None)
    _sessions: set[asyncio.Task[None]] = field(init=False, default_factory=set)

    def __post_init__(self) -> None:
        self.device = self.kind(self.transcript, seconds_per_unit=self.seconds_per_unit)

    async def __aenter__(self) -> Self:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.listen_port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._sessions):
            task.cancel()
        await asyncio.gather(*self._sessions, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._sessions.add(task)
        console = _Console(reader, writer, self)
        try:
            await console.run()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:  # the simulator is closing: the console ends with it
            pass
        finally:
            self._sessions.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()


class _Console:
    """One telnet connection: bytes in, keys decoded, the session's replies out."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, sim: CliSimulator) -> None:
        self.reader, self.writer, self.sim = reader, writer, sim
        self.session = sim.device.session()
        self.t = sim.transcript
        self.after_cr = False

    def write(self, text: str) -> None:
        self.writer.write(text.replace("\r\n", "\n").replace("\n", "\r\n").encode())

    async def key(self) -> str:
        """The next key typed (telnet commands and option replies skipped; CR LF and CR NUL are one Enter)."""
        while True:
            byte = (await self.reader.readexactly(1))[0]
            if byte == IAC:
                command = (await self.reader.readexactly(1))[0]
                if command in (WILL, WONT, DO, DONT):
                    await self.reader.readexactly(1)
                elif command == SB:
                    while (await self.reader.readexactly(1))[0] != SE:
                        pass
                if command != IAC:
                    continue
            ch = chr(byte)
            after_cr, self.after_cr = self.after_cr, ch == "\r"
            if after_cr and ch in "\n\x00":
                continue
            return ch

    async def line(self, echo: bool = True) -> str | None:
        """A line ended by Enter (None if abandoned with the interrupt key), echoed as typed."""
        typed: list[str] = []
        while True:
            ch = await self.key()
            if ch in "\r\n":
                return "".join(typed)
            if ch == INTERRUPT:
                self.write("^C\n")
                return None
            if ch in "\x08\x7f":
                if typed:
                    typed.pop()
                    self.write("\x08 \x08")
                continue
            typed.append(ch)
            if echo:
                self.write(ch)

    async def run(self) -> None:
        self.writer.write(bytes([IAC, WILL, ECHO, IAC, WILL, SGA]))
        await self.login()
        self.write(self.session.prompt())
        while True:
            line = await self.line()
            if line is None:
                self.write(self.session.prompt())
                continue
            self.sim.received.append(line)
            self.write("\n")
            if self.t.echo_twice and line.strip():
                self.write(self.session.prompt() + line + "\n")
            reply = self.session.handle(line, asyncio.get_running_loop().time())
            while reply.question:
                self.write(reply.text)
                answer = await self.line()
                self.write("\n")
                reply = self.session.answer(answer or "", asyncio.get_running_loop().time())
            self._schedule_rollback()
            await self.show(reply)
            if reply.close:
                await self.writer.drain()
                return
            self.write(self.session.prompt())
            await self.writer.drain()

    async def show(self, reply: Reply) -> None:
        if reply.text:
            self.write(reply.text + "\n")
        for page in reply.pages:
            self.write(self.t.pager)
            await self.writer.drain()
            ch = await self.key()
            self.write(self.t.pager_erase)
            if ch in ("q", "Q", INTERRUPT):
                self.write("\n")
                return
            self.write(page + "\n")
        if reply.repeat:
            await self.repeat(reply.repeat)

    async def repeat(self, text: str) -> None:
        """Print ``text`` again and again until the interrupt key comes."""
        waiting = asyncio.ensure_future(self.key())
        try:
            while True:
                done, _ = await asyncio.wait({waiting}, timeout=REPEAT_EVERY)
                if done:
                    if waiting.result() == INTERRUPT:
                        self.write("^C\n")
                        return
                    waiting = asyncio.ensure_future(self.key())
                    continue
                self.write(text + "\n")
                await self.writer.drain()
        finally:
            waiting.cancel()

    async def login(self) -> None:
        login = self.t.login
        if not login:
            return
        if login.get("banner"):
            self.write(login["banner"] + "\n")
        if login.get("press_return"):
            self.write(login["press_return"])
            while await self.line(echo=False) is None:
                pass
            self.write("\n")
        while login.get("username_prompt"):
            self.write(login["username_prompt"])
            user = await self.line()
            self.write("\n")
            if not (user or "").strip():  # an empty line: getty asks for the login name again
                continue
            password = ""
            if login.get("password_prompt"):
                self.write(login["password_prompt"])
                password = await self.line(echo=False) or ""
                self.write("\n")
            user = (user or "").strip()
            suffix = login.get("options_suffix", "")
            if suffix and user.endswith(suffix):  # RouterOS console login options (no colours, no paging)
                user = user[: -len(suffix)]
                self.session.paging = False
            if user == login.get("username") and password == login.get("password", ""):
                break
            self.write(login.get("incorrect", "Login incorrect") + "\n")
        for question in login.get("questions", ()):
            self.write(question)
            await self.line()
            self.write("\n")
        if login.get("motd"):
            self.write(login["motd"] + "\n")
        self.session.mode = login.get("start_mode", self.session.mode)

    def _schedule_rollback(self) -> None:
        pending = self.sim.device.pending
        if pending is not None:
            loop = asyncio.get_running_loop()
            loop.call_at(pending[1], self.sim.device.rollback_due, pending[1])
