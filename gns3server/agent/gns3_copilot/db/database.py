"""One SQLite file, its one connection, and the one thread that uses it.

Every store of the copilot (conversations and sessions, faults, the console audit,
LLM configs, MCP keys) reaches its file through a :class:`Database`. The connection
is opened, configured (the pragmas below, in this one place) and migrated
(:mod:`.schema`) by the first job on a dedicated thread, and every later job runs on
that thread too, one at a time, in the order submitted. So SQLite never blocks the
event loop, the connection never crosses threads (it is opened with
``check_same_thread``: a use from elsewhere raises), and no lock is needed: the
thread's queue orders the transactions. :meth:`Database.close` finishes the work
already queued, closes the connection and ends the thread.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

from ..errors import CopilotError, ErrorKind
from .schema import Schema, migrate

log = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 30_000
"""How long a statement waits for another connection's write lock (another process on the file)."""
T = TypeVar("T")
Work = Callable[[sqlite3.Connection], T]


class DatabaseClosedError(CopilotError, RuntimeError):
    """Work submitted after :meth:`Database.close` began.

    Databases close when the server stops, so a request that reaches one late is told
    what a request that got past the door while the server began to stop is told.
    """

    code = "copilot_stopping"
    kind = ErrorKind.UNAVAILABLE
    retryable = True
    PUBLIC_MESSAGE: ClassVar[str] = "The GNS3 server is stopping; try again once it is back"

    @property
    def public_message(self) -> str:
        return self.PUBLIC_MESSAGE


def configure(connection: sqlite3.Connection, synchronous: str) -> None:
    """The pragmas of every copilot database file."""
    # Readers never wait for the writer, and a commit appends to the log instead of rewriting pages.
    connection.execute("PRAGMA journal_mode=WAL")
    # FULL: a commit survives a power cut. NORMAL (WAL's usual pairing, for the conversations'
    # frequent large writes): a power cut may lose the last commits, never the database.
    connection.execute(f"PRAGMA synchronous={synchronous}")
    connection.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    # Deleted content is overwritten with zeros on every platform (Debian's SQLite does it by
    # default, others do not): conversations hold device output that can hold secrets, configs
    # hold encrypted keys and URLs; a deleted or superseded row must not stay readable in free pages.
    connection.execute("PRAGMA secure_delete=ON")


class Database:
    """A SQLite file used from one thread of its own; create it anywhere, use it from the event loop."""

    def __init__(
        self,
        path: str | Path,
        schemas: Sequence[Schema] = (),
        *,
        synchronous: Literal["FULL", "NORMAL"] = "FULL",
        name: str | None = None,
    ) -> None:
        """No I/O and no thread yet: the first job opens the file (:meth:`open` does it at once)."""
        self.path = Path(path)
        self.name = name or self.path.name
        self._schemas = tuple(schemas)
        self._synchronous = synchronous
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"copilot-db-{self.name}")
        self._connection: sqlite3.Connection | None = None
        self._thread: threading.Thread | None = None
        self._started = False
        self._closed = False
        self._closing: asyncio.Future[None] | None = None

    @classmethod
    async def open(
        cls,
        path: str | Path,
        schemas: Sequence[Schema] = (),
        *,
        synchronous: Literal["FULL", "NORMAL"] = "FULL",
        name: str | None = None,
    ) -> Database:
        """A database opened now (:meth:`start`)."""
        database = cls(path, schemas, synchronous=synchronous, name=name)
        await database.start()
        return database

    async def start(self) -> None:
        """Open, configure and migrate the file now; a failure (SchemaError ...) closes it and raises."""
        try:
            await self.call(lambda connection: None)
        except BaseException:
            await self.close()
            raise

    @property
    def closed(self) -> bool:
        return self._closed

    async def run(self, work: Work[T]) -> T:
        """``work(connection)`` on the database's thread as one transaction: committed if it
        returns, rolled back if it raises (and the error raised here)."""
        return await self.call(lambda connection: _transaction(connection, work))

    async def call(self, work: Work[T]) -> T:
        """``work(connection)`` on the database's thread, managing its own transactions
        (LangGraph's saver commits itself; ``PRAGMA wal_checkpoint`` must run outside one)."""
        return await asyncio.wrap_future(self._submit(work))

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """One statement as one transaction; the number of rows it changed."""
        return await self.run(lambda connection: _rowcount(connection.execute(sql, params)))

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> int:
        """One statement for each of ``rows``, as one transaction; the number of rows changed."""
        return await self.run(lambda connection: _rowcount(connection.executemany(sql, rows)))

    async def fetchone(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = await self.run(lambda connection: connection.execute(sql, params).fetchone())
        return row

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = await self.run(lambda connection: connection.execute(sql, params).fetchall())
        return rows

    def call_blocking(self, work: Work[T]) -> T:
        """As :meth:`call`, waiting in this thread (synchronous APIs; never from the event loop)."""
        if threading.current_thread() is self._thread:
            return work(self._open())
        return self._submit(work).result()

    def _submit(self, work: Work[T]) -> Future[T]:
        if self._closed:
            raise DatabaseClosedError(f"the copilot database {self.name} is closed")
        self._started = True
        return self._executor.submit(lambda: _no_cursor(work(self._open())))

    def _open(self) -> sqlite3.Connection:
        """The connection, opened, configured and migrated on first use (on the database's thread)."""
        if self._connection is None:
            self._thread = threading.current_thread()
            self.path.parent.mkdir(parents=True, exist_ok=True)
            connection = sqlite3.connect(self.path)
            try:
                configure(connection, self._synchronous)
                migrate(connection, self._schemas, str(self.path))
            except BaseException:
                connection.close()
                raise
            self._connection = connection
        return self._connection

    async def close(self) -> None:
        """Refuse new work, finish what is queued, close the connection and end the thread.

        Safe to call twice; every caller returns once the thread has ended.
        """
        if self._closing is None:
            self._closed = True
            self._closing = asyncio.ensure_future(self._shut_down())
        await asyncio.shield(self._closing)

    async def _shut_down(self) -> None:
        try:
            if self._started:  # queued after every pending job: they finish first
                await asyncio.wrap_future(self._executor.submit(self._close_connection))
        finally:
            await asyncio.to_thread(self._executor.shutdown, True)

    def _close_connection(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


def checkpoint_wal(connection: sqlite3.Connection) -> None:
    """Copy the write-ahead log into the file and empty it (run with :meth:`Database.call`).

    The log keeps recent page images, deleted content included, until a checkpoint;
    with ``secure_delete`` the file's copy of that content is zeroed.
    """
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").close()


def _no_cursor(result: T) -> T:
    """``result``, unless it is a cursor: one must not leave the database's thread (freed on
    another, it resets its cached statement there, possibly while this thread runs it:
    "bad parameter or other API misuse"). Return rows or counts instead."""
    if isinstance(result, sqlite3.Cursor):
        result.close()
        raise TypeError("database work returned a cursor: return its rows or rowcount instead")
    return result


def _rowcount(cursor: sqlite3.Cursor) -> int:
    count = cursor.rowcount
    cursor.close()
    return count


def _transaction(connection: sqlite3.Connection, work: Work[T]) -> T:
    try:
        result = _no_cursor(work(connection))
        connection.commit()
        return result
    except BaseException:
        connection.rollback()
        raise
