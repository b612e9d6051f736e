"""Per-device locks shared by every user and session of one copilot service.

Two conversations typing into the same console at once would interleave their
commands and outputs, so commands are serialised per device (keyed by console
host and port) while different devices run concurrently. The service owns one
:class:`DeviceLocks`; locks nobody holds or waits for are dropped.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from ..errors import ErrorKind
from .telnet import ConsoleError

log = logging.getLogger(__name__)


class DeviceBusyError(ConsoleError):
    """The device stayed locked by another run for the whole wait."""

    code = "device_busy"
    kind = ErrorKind.CONFLICT
    retryable = True


def device_key(host: str, port: int) -> str:
    """The lock key of a console: ``host:port`` (IPv6 hosts bracketed)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class DeviceLocks:
    """One asyncio lock per device console, created on demand."""

    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}
        self._users: dict[str, int] = {}

    def active(self) -> int:
        """How many devices are locked or awaited right now."""
        return len(self._locks)

    def locked(self, host: str, port: int) -> bool:
        lock = self._locks.get(device_key(host, port))
        return lock is not None and lock.locked()

    @asynccontextmanager
    async def hold(self, host: str, port: int, timeout: float | None = None) -> AsyncIterator[None]:
        """Hold the device's lock, waiting at most ``timeout`` seconds for it."""
        key = device_key(host, port)
        lock = self._locks.setdefault(key, asyncio.Lock())
        self._users[key] = self._users.get(key, 0) + 1
        try:
            try:
                async with asyncio.timeout(timeout):
                    await lock.acquire()
            except TimeoutError as exc:
                raise DeviceBusyError(f"device {key} is busy with another run") from exc
            try:
                yield
            finally:
                lock.release()
        finally:
            self._users[key] -= 1
            if not self._users[key]:
                del self._users[key], self._locks[key]
