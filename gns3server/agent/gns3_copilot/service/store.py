"""Session records: who owns a conversation, its title and its usage totals.

The conversation itself lives in LangGraph's checkpointer (thread id = session
id); this table holds what the checkpointer does not: owner, project, title,
timestamps and token usage. :class:`SessionStore` is the interface the service
uses; :class:`SQLiteSessionStore` is the embedded implementation.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Protocol

import aiosqlite

_SCHEMA = """
CREATE TABLE IF NOT EXISTS copilot_sessions (
    session_id    TEXT PRIMARY KEY,
    user_id       TEXT NOT NULL,
    project_id    TEXT NOT NULL,
    title         TEXT NOT NULL,
    created_at    REAL NOT NULL,
    updated_at    REAL NOT NULL,
    runs          INTEGER NOT NULL DEFAULT 0,
    input_tokens  INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    total_tokens  INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS copilot_sessions_owner ON copilot_sessions (user_id, project_id, updated_at);
"""
_COLUMNS = (
    "session_id, user_id, project_id, title, created_at, updated_at, runs, input_tokens, output_tokens, total_tokens"
)
TITLE_MAX = 200
BUSY_TIMEOUT_MS = 30_000


@dataclass(frozen=True)
class SessionRecord:
    session_id: str
    user_id: str
    project_id: str
    title: str
    created_at: float
    updated_at: float
    runs: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class SessionStore(Protocol):
    async def create(self, user_id: str, project_id: str, title: str) -> SessionRecord: ...
    async def get(self, session_id: str) -> SessionRecord | None: ...
    async def list(self, user_id: str | None, project_id: str) -> list[SessionRecord]: ...
    async def rename(self, session_id: str, title: str) -> SessionRecord | None: ...
    async def delete(self, session_id: str) -> bool: ...
    async def record_run(self, session_id: str, usage: Mapping[str, int]) -> None: ...
    async def close(self) -> None: ...


def clean_title(title: str) -> str:
    """One line, trimmed, at most TITLE_MAX characters."""
    return " ".join(title.split())[:TITLE_MAX]


class SQLiteSessionStore:
    """Session records in a SQLite table, through one aiosqlite connection."""

    def __init__(self, connection: aiosqlite.Connection) -> None:
        self._db = connection

    @classmethod
    async def open(cls, path: str) -> SQLiteSessionStore:
        # Autocommit: every statement is its own short transaction, so no write lock
        # is held across an await while the checkpointer's connection writes too.
        connection = await aiosqlite.connect(path, isolation_level=None)
        await connection.execute("PRAGMA journal_mode=WAL")
        await connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        await connection.executescript(_SCHEMA)
        return cls(connection)

    async def close(self) -> None:
        await self._db.close()

    async def create(self, user_id: str, project_id: str, title: str) -> SessionRecord:
        now = time.time()
        record = SessionRecord(str(uuid.uuid4()), user_id, project_id, clean_title(title), now, now)
        await self._db.execute(
            f"INSERT INTO copilot_sessions ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            tuple(asdict(record).values()),
        )
        return record

    async def get(self, session_id: str) -> SessionRecord | None:
        async with self._db.execute(
            f"SELECT {_COLUMNS} FROM copilot_sessions WHERE session_id = ?", (session_id,)
        ) as cursor:
            row = await cursor.fetchone()
        return SessionRecord(*row) if row else None

    async def list(self, user_id: str | None, project_id: str) -> list[SessionRecord]:
        """Sessions of a project, newest first; all users' when ``user_id`` is None."""
        query = f"SELECT {_COLUMNS} FROM copilot_sessions WHERE project_id = ?"
        params: tuple[str, ...] = (project_id,)
        if user_id is not None:
            query += " AND user_id = ?"
            params += (user_id,)
        async with self._db.execute(query + " ORDER BY updated_at DESC", params) as cursor:
            rows = await cursor.fetchall()
        return [SessionRecord(*row) for row in rows]

    async def rename(self, session_id: str, title: str) -> SessionRecord | None:
        await self._db.execute(
            "UPDATE copilot_sessions SET title = ?, updated_at = ? WHERE session_id = ?",
            (clean_title(title), time.time(), session_id),
        )
        return await self.get(session_id)

    async def delete(self, session_id: str) -> bool:
        cursor = await self._db.execute("DELETE FROM copilot_sessions WHERE session_id = ?", (session_id,))
        return cursor.rowcount > 0

    async def record_run(self, session_id: str, usage: Mapping[str, int]) -> None:
        """Count one run and add its token usage to the session's totals."""
        await self._db.execute(
            "UPDATE copilot_sessions SET runs = runs + 1, updated_at = ?, input_tokens = input_tokens + ?, "
            "output_tokens = output_tokens + ?, total_tokens = total_tokens + ? WHERE session_id = ?",
            (
                time.time(),
                int(usage.get("input_tokens", 0)),
                int(usage.get("output_tokens", 0)),
                int(usage.get("total_tokens", 0)),
                session_id,
            ),
        )
