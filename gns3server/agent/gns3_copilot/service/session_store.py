"""Session records: who owns a conversation, its title and its usage totals.

The conversation itself lives in LangGraph's checkpointer (thread id = session
id); this table holds what the checkpointer does not: owner, project, title,
timestamps, token usage, whether it is pinned and how many messages it holds
(GNS3 3.1's session list shows both). :class:`SessionStore` is the interface the
service uses; :class:`SQLiteSessionStore` is the embedded implementation.
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from ..db import Database, Migration, Schema, add_missing_columns
from .message_log import MESSAGES_TABLE
from .session_ids import canonicalise_stored_ids

_TABLES = (
    """CREATE TABLE IF NOT EXISTS copilot_sessions (
        session_id    TEXT PRIMARY KEY,
        user_id       TEXT NOT NULL,
        project_id    TEXT NOT NULL,
        title         TEXT NOT NULL,
        created_at    REAL NOT NULL,
        updated_at    REAL NOT NULL,
        runs          INTEGER NOT NULL DEFAULT 0,
        input_tokens  INTEGER NOT NULL DEFAULT 0,
        output_tokens INTEGER NOT NULL DEFAULT 0,
        total_tokens  INTEGER NOT NULL DEFAULT 0,
        pending       TEXT,
        pinned        INTEGER NOT NULL DEFAULT 0,
        message_count INTEGER NOT NULL DEFAULT 0,
        kind          TEXT NOT NULL DEFAULT 'chat'
    )""",
    "CREATE INDEX IF NOT EXISTS copilot_sessions_owner ON copilot_sessions (user_id, project_id, updated_at)",
    """CREATE TABLE IF NOT EXISTS copilot_inflight (
        session_id    TEXT PRIMARY KEY,
        question      TEXT,
        partial       TEXT NOT NULL DEFAULT '',
        updated_at    REAL NOT NULL
    )""",
)
# Columns added after the first release, before schema versions were recorded.
_ADDED_COLUMNS = {
    "pinned": "INTEGER NOT NULL DEFAULT 0",
    "message_count": "INTEGER NOT NULL DEFAULT 0",
    "kind": "TEXT NOT NULL DEFAULT 'chat'",
}
_COLUMNS = (
    "session_id, user_id, project_id, title, created_at, updated_at, runs, input_tokens, output_tokens, "
    "total_tokens, pending, pinned, message_count, kind"
)


def _baseline(db: sqlite3.Connection) -> None:
    """Create the tables, or give a table of an older release the columns it lacks."""
    for statement in _TABLES:
        db.execute(statement)
    add_missing_columns(db, "copilot_sessions", _ADDED_COLUMNS)


SESSIONS_SCHEMA = Schema("sessions", (
    Migration(1, _baseline, "sessions and in-flight turns"),
    Migration(2, canonicalise_stored_ids, "session ids in their one spelling (lower-case UUIDs)"),
    # A checkpoint of this version holds a reference to these rows in place of its messages: a release
    # that reads checkpoints whole must not open the file (it refuses a version newer than it knows).
    Migration(3, [MESSAGES_TABLE], "a conversation's messages one row each, beside its checkpoint"),
))
"""The session, in-flight and message tables, in the conversations' database (``storage.py``)."""
TITLE_MAX = 200


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
    pending: str | None = None
    """JSON of the approval the run waits for (``tools.approval.PendingApproval``: its tool calls,
    id, digest, expiry), or None. Older records hold a bare list of calls."""
    pinned: bool = False
    message_count: int = 0
    """Messages in the stored conversation (user, assistant, tool), counted after each run."""
    kind: str = "chat"
    """``chat``, or ``fault_injection`` (made by ``chat/inject``: its tool calls are hidden faults)."""

    @property
    def pending_value(self) -> Any:
        return json.loads(self.pending) if self.pending else None

    @property
    def pending_calls(self) -> list[dict[str, Any]] | None:
        value = self.pending_value
        if value is None:
            return None
        return list(value) if isinstance(value, list) else list(value.get("calls") or [])


@dataclass(frozen=True)
class InFlight:
    """A run's question and the text streamed so far, kept while the run lasts.

    Checkpoints are written when a run ends; a server killed mid-run would lose
    the turn. This record outlives such a kill: what is left of it at the next
    start is folded into the conversation.
    """

    question: str | None
    partial: str


class SessionStore(Protocol):
    async def create(
        self, user_id: str, project_id: str, title: str, session_id: str | None = None, kind: str = "chat"
    ) -> SessionRecord: ...
    async def get(self, session_id: str) -> SessionRecord | None: ...
    async def list(self, user_id: str, project_id: str) -> list[SessionRecord]: ...
    async def rename(self, session_id: str, title: str) -> SessionRecord | None: ...
    async def delete(self, session_id: str) -> bool: ...
    async def record_run(self, session_id: str, usage: Mapping[str, int]) -> None: ...
    async def set_pending(self, session_id: str, pending: Any) -> None: ...
    async def clear_pending(self, session_id: str, expected: str | None) -> bool: ...
    async def set_inflight(self, session_id: str, inflight: InFlight | None) -> None: ...
    async def inflight(self, session_id: str) -> InFlight | None: ...
    async def begin_inflight(self, session_id: str, inflight: InFlight) -> InFlight | None: ...
    async def set_pinned(self, session_id: str, pinned: bool) -> SessionRecord | None: ...
    async def set_message_count(self, session_id: str, count: int) -> None: ...
    async def close(self) -> None: ...


_RECORD_RUN = (
    "UPDATE copilot_sessions SET runs = runs + 1, updated_at = ?, input_tokens = input_tokens + ?, "
    "output_tokens = output_tokens + ?, total_tokens = total_tokens + ? WHERE session_id = ?"
)


def _run_params(session_id: str, usage: Mapping[str, int]) -> tuple[Any, ...]:
    return (time.time(), int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0)),
            int(usage.get("total_tokens", 0)), session_id)


def write_inflight(db: sqlite3.Connection, session_id: str, inflight: InFlight) -> None:
    db.execute(
        "INSERT OR REPLACE INTO copilot_inflight (session_id, question, partial, updated_at) VALUES (?, ?, ?, ?)",
        (session_id, inflight.question, inflight.partial, time.time()),
    ).close()


def clean_title(title: str) -> str:
    """One line, trimmed, at most TITLE_MAX characters."""
    return " ".join(title.split())[:TITLE_MAX]


class SQLiteSessionStore:
    """Session records in SQLite, on the conversations' database (its schema: :data:`SESSIONS_SCHEMA`).

    It shares the checkpointer's database: one connection means no lock contention
    between two writers on the same file (SQLite can refuse an upgrade from read to
    write at once, busy timeout or not), and its thread keeps the event loop free.
    """

    def __init__(self, database: Database) -> None:
        self._database = database

    async def close(self) -> None:
        """Nothing to do: the database belongs to the storage that opened it."""

    async def create(
        self, user_id: str, project_id: str, title: str, session_id: str | None = None, kind: str = "chat"
    ) -> SessionRecord:
        """A new session; ``session_id`` chosen by the client (GNS3 3.1) or a fresh UUID.

        When the id already exists nothing is written and the existing record is
        returned: the caller checks its owner (two first messages racing for the same
        new id both land in one session, and nobody takes over another's).
        """
        now = time.time()
        record = SessionRecord(
            session_id or str(uuid.uuid4()), user_id, project_id, clean_title(title), now, now, kind=kind
        )
        placeholders = ", ".join("?" * len(asdict(record)))
        await self._database.execute(
            f"INSERT OR IGNORE INTO copilot_sessions ({_COLUMNS}) VALUES ({placeholders})",
            tuple(asdict(record).values()),
        )
        stored = await self.get(record.session_id)
        assert stored is not None  # inserted, or already there
        return stored

    async def get(self, session_id: str) -> SessionRecord | None:
        row = await self._database.fetchone(
            f"SELECT {_COLUMNS} FROM copilot_sessions WHERE session_id = ?", (session_id,)
        )
        return SessionRecord(*row) if row else None

    async def list(self, user_id: str, project_id: str) -> list[SessionRecord]:
        """A user's sessions of a project: pinned ones first, then newest first."""
        query = (
            f"SELECT {_COLUMNS} FROM copilot_sessions WHERE project_id = ? AND user_id = ? "
            "ORDER BY pinned DESC, updated_at DESC"
        )
        return [SessionRecord(*row) for row in await self._database.fetchall(query, (project_id, user_id))]

    async def rename(self, session_id: str, title: str) -> SessionRecord | None:
        await self._database.execute(
            "UPDATE copilot_sessions SET title = ?, updated_at = ? WHERE session_id = ?",
            (clean_title(title), time.time(), session_id),
        )
        return await self.get(session_id)

    async def delete(self, session_id: str) -> bool:
        def delete(db: sqlite3.Connection) -> int:
            db.execute("DELETE FROM copilot_inflight WHERE session_id = ?", (session_id,))
            return db.execute("DELETE FROM copilot_sessions WHERE session_id = ?", (session_id,)).rowcount

        return await self._database.run(delete) > 0

    async def record_run(self, session_id: str, usage: Mapping[str, int]) -> None:
        """Count one run and add its token usage to the session's totals."""
        await self._database.execute(_RECORD_RUN, _run_params(session_id, usage))

    async def set_pending(self, session_id: str, pending: Any) -> None:
        """Remember (or forget, with None) the approval the session waits for."""
        text = json.dumps(pending, default=str) if pending else None
        await self._database.execute("UPDATE copilot_sessions SET pending = ? WHERE session_id = ?", (text, session_id))

    async def set_inflight(self, session_id: str, inflight: InFlight | None) -> None:
        """Remember the running turn (or forget it, with None, once its checkpoint is written)."""
        if inflight is None:
            await self._database.execute("DELETE FROM copilot_inflight WHERE session_id = ?", (session_id,))
            return
        await self._database.run(lambda db: write_inflight(db, session_id, inflight))

    async def inflight(self, session_id: str) -> InFlight | None:
        row = await self._database.fetchone(
            "SELECT question, partial FROM copilot_inflight WHERE session_id = ?", (session_id,)
        )
        return InFlight(*row) if row else None

    async def begin_inflight(self, session_id: str, inflight: InFlight) -> InFlight | None:
        """Remember a run's turn as it starts, in one transaction with the read of what a run the
        server was killed in left: if there is such a record it is returned and nothing is written
        (the caller folds it into the conversation first, then :meth:`set_inflight`); else None."""

        def begin(db: sqlite3.Connection) -> InFlight | None:
            row = db.execute("SELECT question, partial FROM copilot_inflight WHERE session_id = ?",
                             (session_id,)).fetchone()
            if row is not None:
                return InFlight(*row)
            write_inflight(db, session_id, inflight)
            return None

        return await self._database.run(begin)

    def finish_run_on(
        self, db: sqlite3.Connection, session_id: str, usage: Mapping[str, int], *, clear_inflight: bool,
        message_count: int | None,
    ) -> None:
        """The session's writes at the end of a run, inside the caller's transaction (on the database's
        thread: :meth:`..storage.Storage.finish_run`): the in-flight record forgotten (once the run's
        checkpoint is written), the message count (if known) and the run's usage."""
        if clear_inflight:
            db.execute("DELETE FROM copilot_inflight WHERE session_id = ?", (session_id,)).close()
        if message_count is not None:
            db.execute("UPDATE copilot_sessions SET message_count = ? WHERE session_id = ?",
                       (message_count, session_id)).close()
        db.execute(_RECORD_RUN, _run_params(session_id, usage)).close()

    @property
    def database(self) -> Database:
        return self._database

    async def clear_pending(self, session_id: str, expected: str | None) -> bool:
        """Forget the pending approval if it is still ``expected`` (its stored JSON); True if this call did."""
        if expected is None:
            return False
        cleared = await self._database.execute(
            "UPDATE copilot_sessions SET pending = NULL WHERE session_id = ? AND pending = ?", (session_id, expected)
        )
        return cleared == 1

    async def set_pinned(self, session_id: str, pinned: bool) -> SessionRecord | None:
        """Pin (or unpin) the session; its ``updated_at`` is left alone (pinning is not using it)."""
        await self._database.execute(
            "UPDATE copilot_sessions SET pinned = ? WHERE session_id = ?", (int(pinned), session_id)
        )
        return await self.get(session_id)

    async def set_message_count(self, session_id: str, count: int) -> None:
        await self._database.execute(
            "UPDATE copilot_sessions SET message_count = ? WHERE session_id = ?", (count, session_id)
        )
