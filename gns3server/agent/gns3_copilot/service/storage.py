"""Where conversations live: a checkpointer plus the session table, behind one object.

The embedded default is one SQLite file in the server's data directory, opened
with one connection in WAL mode, shared by LangGraph's SQLite checkpointer and
our session table under the checkpointer's lock; both run in worker threads (see
``checkpointer.py``), so the event loop never waits on SQLite. Anything else
(PostgreSQL for several servers) only needs to provide a ``BaseCheckpointSaver``
with ``adelete_thread`` and a ``SessionStore``.

Every checkpoint holds the whole message list, and LangGraph keeps them all (for
time travel, which the copilot does not offer), so a conversation's storage would
grow with the square of its length (769 MB after 200 turns with a checkpoint per
graph step). Only each conversation's latest checkpoint (and its pending writes,
which hold a waiting approval) is ever read, so the others are deleted after
every run and at start-up (:meth:`Storage.prune`); SQLite zeroes and reuses the
freed pages.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite import SqliteSaver

from .checkpointer import ThreadedCheckpointer
from .faults import SQLiteFaultStore
from .store import SessionStore, SQLiteSessionStore

log = logging.getLogger(__name__)

DATABASE_NAME = "copilot.sqlite3"


@dataclass
class Storage:
    """An open checkpointer and session store; close it once at shutdown."""

    checkpointer: BaseCheckpointSaver
    sessions: SessionStore
    faults: SQLiteFaultStore | None = None
    """Faults injected by ``chat/inject`` (None: this storage does not keep them)."""
    _connections: tuple[sqlite3.Connection, ...] = ()
    _prune: Callable[[str | None], int] | None = None
    _scrub: Callable[[], None] | None = None

    async def prune(self, thread_id: str | None = None) -> int:
        """Delete the checkpoints that a newer one of the same conversation supersedes
        (of every conversation if ``thread_id`` is None); returns how many went."""
        if self._prune is None:
            return 0
        return await asyncio.to_thread(self._prune, thread_id)

    async def scrub(self) -> None:
        """Push deleted content out of the write-ahead log too (after a conversation is deleted).

        The WAL keeps recent page images, old content included, until a checkpoint;
        TRUNCATE copies them into the (zeroing) database file and empties the log.
        """
        if self._scrub is not None:
            await asyncio.to_thread(self._scrub)

    async def close(self) -> None:
        await self.sessions.close()
        for connection in self._connections:
            await asyncio.to_thread(connection.close)


async def open_sqlite_storage(data_dir: str | Path) -> Storage:
    """Open (creating if needed) the copilot database in ``data_dir``."""
    directory = Path(data_dir)
    path = str(directory / DATABASE_NAME)

    def open_checkpointer() -> tuple[sqlite3.Connection, SqliteSaver]:
        directory.mkdir(parents=True, exist_ok=True)
        # The saver guards this connection with its own lock; calls come from worker threads.
        connection = sqlite3.connect(path, check_same_thread=False)
        connection.execute("PRAGMA journal_mode=WAL")
        # WAL's usual pairing: a commit is not an fsync; a power cut may lose the last
        # commits, never the database.
        connection.execute("PRAGMA synchronous=NORMAL")
        # Deleted content is overwritten with zeros, on every platform (Debian's SQLite does it
        # by default, others do not): device output in a conversation can hold secrets, and a
        # deleted conversation, or a superseded copy of one, must not stay readable in free
        # pages. It costs a few ms of this worker thread per pruned run at 150 turns.
        connection.execute("PRAGMA secure_delete=ON")
        saver = SqliteSaver(connection)
        saver.setup()
        return connection, saver

    connection, saver = await asyncio.to_thread(open_checkpointer)
    sessions = await SQLiteSessionStore.open(connection, saver.lock)
    faults = await SQLiteFaultStore.open(connection, saver.lock)
    storage = Storage(
        checkpointer=ThreadedCheckpointer(saver), sessions=sessions, faults=faults, _connections=(connection,),
        _prune=functools.partial(_prune_superseded, connection, saver.lock),
        _scrub=functools.partial(_checkpoint_wal, connection, saver.lock),
    )
    removed = await storage.prune()  # left by a crash, or by a version that kept them all
    log.info("Copilot storage opened at %s%s", path, f" ({removed} old checkpoints removed)" if removed else "")
    return storage


def _prune_superseded(connection: sqlite3.Connection, lock: threading.Lock, thread_id: str | None) -> int:
    """Keep only the latest checkpoint (by id, as LangGraph reads it) of each thread and namespace."""
    where, args = ("WHERE thread_id = ?", (thread_id,)) if thread_id is not None else ("", ())
    removed = 0
    with lock, connection:  # one transaction
        latest = connection.execute(
            f"SELECT thread_id, checkpoint_ns, MAX(checkpoint_id) FROM checkpoints {where} GROUP BY thread_id, checkpoint_ns",
            args,
        ).fetchall()
        for key in latest:
            for table in ("checkpoints", "writes"):
                cursor = connection.execute(
                    f"DELETE FROM {table} WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id <> ?", key
                )
                removed += cursor.rowcount if table == "checkpoints" else 0
    return removed


def _checkpoint_wal(connection: sqlite3.Connection, lock: threading.Lock) -> None:
    with lock:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
