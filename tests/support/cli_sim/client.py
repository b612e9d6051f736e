"""A bare console client for the simulator's own tests: keys in, text out until a pattern, with a deadline.

Deliberately not the copilot's telnet client (the simulator is tested on its own); it
drops telnet commands, removes CRs and keeps everything read for inspection.
"""

from __future__ import annotations

import asyncio
import re

_IAC_SEQUENCE = re.compile(rb"\xff[\xfb-\xfe].|\xff\xfa.*?\xff\xf0", re.DOTALL)


class SimClient:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.buffer = ""
        self.transcript = ""  # everything read, CRs removed

    @classmethod
    async def connect(cls, port: int) -> SimClient:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    async def until(self, pattern: str | re.Pattern[str], timeout: float = 30.0) -> str:
        """Text up to and including ``pattern``'s first match (the rest stays buffered)."""
        regex = re.compile(pattern) if isinstance(pattern, str) else pattern
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            match = regex.search(self.buffer)
            if match:
                text, self.buffer = self.buffer[: match.end()], self.buffer[match.end():]
                return text
            data = await asyncio.wait_for(self.reader.read(4096), max(deadline - loop.time(), 0.001))
            if not data:
                raise ConnectionError(f"closed before {regex.pattern!r}; read {self.buffer!r}")
            text = _IAC_SEQUENCE.sub(b"", data).decode("utf-8", "replace").replace("\r", "")
            self.buffer += text
            self.transcript += text

    def send(self, keys: str) -> None:
        self.writer.write(keys.encode())

    def line(self, text: str) -> None:
        self.send(text + "\r")

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()
