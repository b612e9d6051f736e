"""A small async telnet client for GNS3 device consoles.

GNS3 exposes each node's console as a raw telnet server on the compute host. We
only need a line-oriented dialogue with it: connect, read until a prompt, send a
line. Option negotiation is kept minimal. By default options are stripped and
ignored: nothing is answered, so every option stays in its default "off" state,
which the GNS3 consoles (VPCS, and GNS3's own telnet server in front of QEMU,
IOU, Dynamips and Docker) work with. With ``answer_options=True``
we accept the server's ECHO and SUPPRESS-GO-AHEAD and refuse everything else,
answering each option at most once so that a chatty server cannot make us loop.

What the device sends is decoded incrementally (UTF-8 by default) and passed
through a :class:`~.terminal.TerminalFilter`: escape sequences never stand
between a prompt and the end of the text, and never reach the output.

Exceptions (all :class:`ConsoleError`):

- :class:`ConsoleConnectError`: the console could not be reached in time.
- :class:`ConsoleTimeout`: no expected text arrived in time; ``output`` holds
  what did arrive.
- :class:`ConsoleClosed`: the device closed the connection.
"""

from __future__ import annotations

import asyncio
import codecs
import logging
import re
from types import TracebackType
from typing import Self

from ..errors import CopilotError, ErrorKind
from .terminal import MARKERS, TerminalFilter

log = logging.getLogger(__name__)

DEFAULT_MAX_OUTPUT = 64 * 1024
TRUNCATED_MARKER = "\n[... output truncated ...]\n"

IAC, DONT, DO, WONT, WILL, SB, SE = 255, 254, 253, 252, 251, 250, 240
ECHO, SGA = 1, 3
_ACCEPTED_FROM_SERVER = {ECHO, SGA}  # the server may echo and suppress go-ahead
# Tail kept for prompt matching once output is over its cap.
_TAIL = 2048


class ConsoleError(CopilotError):
    """A device console could not be used."""

    code = "console_error"
    kind = ErrorKind.UPSTREAM


class ConsoleConnectError(ConsoleError):
    """The console could not be reached."""

    retryable = True


class ConsoleTimeout(ConsoleError):
    """Expected text did not arrive in time."""

    code = "console_timeout"
    retryable = True

    def __init__(self, message: str, output: str = "") -> None:
        super().__init__(message)
        self.output = output


class ConsoleClosed(ConsoleError):
    """The device closed the console connection."""

    def __init__(self, message: str, output: str = "") -> None:
        super().__init__(message)
        self.output = output


class _CappedText:
    """Accumulates output, keeping its head and a rolling tail past ``limit`` chars."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.head = ""
        self.tail = ""
        self.truncated = False

    def add(self, text: str) -> None:
        if not self.truncated:
            self.head += text
            if len(self.head) > self.limit:
                keep = max(self.limit - _TAIL, 0)
                self.head, self.tail = self.head[:keep], self.head[keep:][-_TAIL:]
                self.truncated = True
        else:
            self.tail = (self.tail + text)[-_TAIL:]

    @property
    def searchable(self) -> str:
        """The text a prompt is searched in (the tail once truncated)."""
        return self.tail if self.truncated else self.head

    def render(self, end: int | None = None) -> str:
        """Output up to ``end`` (an index into :attr:`searchable`) with the marker if cut."""
        if not self.truncated:
            return self.head[:end]
        return self.head + TRUNCATED_MARKER + self.tail[:end]


class TelnetConsole:
    """One telnet connection to a device console, on asyncio streams."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        max_output: int = DEFAULT_MAX_OUTPUT,
        encoding: str = "utf-8",
        answer_options: bool = False,
    ) -> None:
        self.host = host
        self.answer_options = answer_options
        self.port = port
        self.max_output = max_output
        self.encoding = encoding
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._pending = ""  # decoded text read past the last match
        self._answered: set[tuple[int, int]] = set()
        self._iac_state: bytes = b""  # an incomplete IAC sequence carried between reads
        # Incremental, so that a character split across two reads is decoded whole.
        self._decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
        self.terminal = TerminalFilter()

    async def connect(self, timeout: float) -> None:
        """Open the connection within ``timeout`` seconds."""
        try:
            async with asyncio.timeout(timeout):
                self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        except TimeoutError as exc:
            raise ConsoleConnectError(f"console {self.host}:{self.port} did not answer within {timeout:g}s") from exc
        except OSError as exc:
            raise ConsoleConnectError(f"cannot connect to console {self.host}:{self.port}: {exc.strerror or exc}") from exc
        log.debug("Connected to console %s:%s", self.host, self.port)

    async def close(self) -> None:
        """Close the connection (idempotent)."""
        writer, self._writer, self._reader = self._writer, None, None
        if writer is None:
            return
        writer.close()
        try:
            await writer.wait_closed()
        except OSError:
            pass

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def send(self, text: str) -> None:
        """Send raw text (IAC bytes doubled as telnet requires)."""
        if self._writer is None:
            raise ConsoleClosed(f"console {self.host}:{self.port} is not connected")
        data = text.encode(self.encoding, errors="replace").replace(bytes([IAC]), bytes([IAC, IAC]))
        try:
            self._writer.write(data)
            await self._writer.drain()
        except (ConnectionError, OSError) as exc:
            raise ConsoleClosed(f"console {self.host}:{self.port} closed: {exc}") from exc

    async def send_line(self, line: str) -> None:
        """Send one line ended by CR alone, as a terminal's Enter key does.

        CR LF is worse: VPCS takes the LF as a second, empty line, and right after
        connecting it then swallows the next line typed.
        """
        await self.send(line + "\r")

    def discard_pending(self) -> None:
        """Forget text already read but not yet consumed (e.g. a stale prompt)."""
        self._pending = ""

    async def read_until(
        self, pattern: re.Pattern[str], timeout: float, *, lookback: int | None = 256
    ) -> tuple[str, re.Match[str]]:
        """Read until ``pattern`` matches; return the (capped) text up to its end, and the match.

        Text after the match stays buffered for the next read, and so does what a read
        that timed out had got. After each read only the
        new text and ``lookback`` characters before it are searched (prompts are short);
        ``lookback=None`` searches everything again, for a long pattern such as a
        command's echo that may arrive in several reads. Erase markers the terminal
        filter left at the very end (a prompt redrawn over a longer line) are not
        searched: a pattern anchored at the end sees the prompt before them.
        """
        if self._reader is None:
            raise ConsoleClosed(f"console {self.host}:{self.port} is not connected")
        text = _CappedText(self.max_output)
        text.add(self._pending)
        self._pending = ""
        searched = 0
        try:
            async with asyncio.timeout(timeout):
                while True:
                    full = text.searchable
                    hay = full.rstrip(MARKERS)
                    start = 0 if lookback is None else max(0, min(searched, len(hay)) - lookback)
                    match = pattern.search(hay, start)
                    if match:
                        self._pending = full[match.end():]
                        return text.render(match.end()), match
                    searched = len(hay)
                    chunk = await self._reader.read(4096)
                    if not chunk:
                        raise ConsoleClosed(f"console {self.host}:{self.port} closed the connection", text.render())
                    text.add(self.terminal.feed(await self._decode(chunk)))
        except TimeoutError as exc:
            # What came stays for the next read: a prompt cut in two by the timeout is whole then.
            self._pending = text.searchable
            raise ConsoleTimeout(f"no prompt from {self.host}:{self.port} within {timeout:g}s", text.render()) from exc
        except (ConnectionError, OSError) as exc:
            raise ConsoleClosed(f"console {self.host}:{self.port} failed: {exc}", text.render()) from exc

    async def _decode(self, chunk: bytes) -> str:
        """Strip telnet commands from ``chunk``, answering option requests once."""
        data = self._iac_state + chunk
        self._iac_state = b""
        out = bytearray()
        replies = bytearray()
        i = 0
        while i < len(data):
            byte = data[i]
            if byte != IAC:
                out.append(byte)
                i += 1
                continue
            if i + 1 >= len(data):
                self._iac_state = data[i:]
                break
            cmd = data[i + 1]
            if cmd == IAC:
                out.append(IAC)
                i += 2
            elif cmd in (DO, DONT, WILL, WONT):
                if i + 2 >= len(data):
                    self._iac_state = data[i:]
                    break
                replies += self._answer(cmd, data[i + 2])
                i += 3
            elif cmd == SB:
                end = data.find(bytes([IAC, SE]), i + 2)
                if end < 0:
                    self._iac_state = data[i:]
                    break
                i = end + 2
            else:
                i += 2  # NOP, GA and the like carry no data
        if replies and self.answer_options and self._writer is not None:
            self._writer.write(bytes(replies))
            await self._writer.drain()
        return self._decoder.decode(bytes(out))

    def _answer(self, cmd: int, option: int) -> bytes:
        """Our reply to one option request: accept ECHO/SGA from the server, refuse the rest."""
        if (cmd, option) in self._answered:
            return b""
        self._answered.add((cmd, option))
        if cmd == WILL:
            return bytes([IAC, DO if option in _ACCEPTED_FROM_SERVER else DONT, option])
        if cmd == DO:
            return bytes([IAC, WILL if option == SGA else WONT, option])
        return b""  # DONT/WONT need no answer: the option stays off
