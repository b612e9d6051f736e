"""Where conversations live: a checkpointer plus the session table, behind one object.

The embedded default is one SQLite file in the server's data directory, opened
with two connections (LangGraph's async SQLite checkpointer and our session
table) in WAL mode. Anything else (PostgreSQL for several servers) only needs to
provide a ``BaseCheckpointSaver`` with ``adelete_thread`` and a ``SessionStore``.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path

import aiosqlite
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from .store import SessionStore, SQLiteSessionStore

log = logging.getLogger(__name__)

DATABASE_NAME = "copilot.sqlite3"


@dataclass
class Storage:
    """An open checkpointer and session store; close it once at shutdown."""

    checkpointer: BaseCheckpointSaver
    sessions: SessionStore
    _connections: tuple[aiosqlite.Connection, ...] = ()

    async def close(self) -> None:
        await self.sessions.close()
        for connection in self._connections:
            await connection.close()


async def open_sqlite_storage(data_dir: str | Path) -> Storage:
    """Open (creating if needed) the copilot database in ``data_dir``."""
    directory = Path(data_dir)
    await asyncio.to_thread(directory.mkdir, parents=True, exist_ok=True)
    path = str(directory / DATABASE_NAME)
    connection = await aiosqlite.connect(path)
    await connection.execute("PRAGMA journal_mode=WAL")
    checkpointer = AsyncSqliteSaver(connection)
    await checkpointer.setup()
    sessions = await SQLiteSessionStore.open(path)
    log.info("Copilot storage opened at %s", path)
    return Storage(checkpointer=checkpointer, sessions=sessions, _connections=(connection,))
