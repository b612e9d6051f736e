"""Where conversations live: a checkpointer plus the session table, behind one object.

The embedded default is one SQLite file in the server's data directory, opened
with one connection in WAL mode, shared by LangGraph's SQLite checkpointer and
our session table under the checkpointer's lock; both run in worker threads (see
``checkpointer.py``), so the event loop never waits on SQLite. Anything else (PostgreSQL for several servers) only needs to
provide a ``BaseCheckpointSaver`` with ``adelete_thread`` and a ``SessionStore``.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite import SqliteSaver

from .checkpointer import ThreadedCheckpointer
from .store import SessionStore, SQLiteSessionStore

log = logging.getLogger(__name__)

DATABASE_NAME = "copilot.sqlite3"


@dataclass
class Storage:
    """An open checkpointer and session store; close it once at shutdown."""

    checkpointer: BaseCheckpointSaver
    sessions: SessionStore
    _connections: tuple[sqlite3.Connection, ...] = ()

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
        saver = SqliteSaver(connection)
        saver.setup()
        return connection, saver

    connection, saver = await asyncio.to_thread(open_checkpointer)
    sessions = await SQLiteSessionStore.open(connection, saver.lock)
    log.info("Copilot storage opened at %s", path)
    return Storage(checkpointer=ThreadedCheckpointer(saver), sessions=sessions, _connections=(connection,))
