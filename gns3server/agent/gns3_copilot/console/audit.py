"""The audit log: every command the copilot sends to a device (or refuses to).

Stored in SQLite in the server's data directory so that an administrator can list
it later. sqlite3 is synchronous, so each call runs in a worker thread over one
connection guarded by a lock.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

AUDIT_DB_NAME = "copilot_console_audit.sqlite3"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS console_audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    time REAL NOT NULL,
    user TEXT NOT NULL,
    session TEXT NOT NULL,
    project TEXT NOT NULL,
    device TEXT NOT NULL,
    command TEXT NOT NULL,
    outcome TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS console_audit_time ON console_audit (time);
"""
_COLUMNS = ("id", "time", "user", "session", "project", "device", "command", "outcome", "detail")
_FILTERS = ("user", "session", "project", "device", "outcome")


@dataclass(frozen=True)
class Who:
    """On whose behalf commands run."""

    user: str
    session: str
    project: str


@dataclass(frozen=True)
class AuditEntry:
    id: int
    time: float  # seconds since the epoch (UTC)
    user: str
    session: str
    project: str
    device: str
    command: str
    outcome: str  # ok, error, timeout, blocked, not_run, failed
    detail: str


class AuditLog:
    """Append-only command log in ``data_dir``; open lazily, close with :meth:`close`."""

    def __init__(self, data_dir: str | Path) -> None:
        self.path = Path(data_dir) / AUDIT_DB_NAME
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, check_same_thread=False)
            conn.executescript(_SCHEMA)
            self._conn = conn
        return self._conn

    def _record(self, rows: list[tuple[Any, ...]]) -> None:
        with self._lock:
            conn = self._connection()
            with conn:
                conn.executemany(
                    "INSERT INTO console_audit (time, user, session, project, device, command, outcome, detail)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    rows,
                )

    async def record(self, who: Who, device: str, command: str, outcome: str, detail: str = "") -> None:
        """Append one entry, timestamped now."""
        await self.record_many(who, device, [(command, outcome, detail)])

    async def record_many(self, who: Who, device: str, entries: Sequence[tuple[str, str, str]]) -> None:
        """Append a batch's entries (command, outcome, detail) in one transaction, timestamped now."""
        now = time.time()
        rows = [(now, who.user, who.session, who.project, device, c, o, d[:2000]) for c, o, d in entries]
        await asyncio.to_thread(self._record, rows)

    def _list(self, filters: dict[str, str], since: float | None, limit: int) -> list[AuditEntry]:
        clauses = [f"{name} = ?" for name in filters]
        params: list[Any] = list(filters.values())
        if since is not None:
            clauses.append("time >= ?")
            params.append(since)
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        with self._lock:
            rows = self._connection().execute(
                f"SELECT {', '.join(_COLUMNS)} FROM console_audit{where} ORDER BY id DESC LIMIT ?", (*params, limit)
            ).fetchall()
        return [AuditEntry(*row) for row in rows]

    async def entries(
        self,
        *,
        user: str | None = None,
        session: str | None = None,
        project: str | None = None,
        device: str | None = None,
        outcome: str | None = None,
        since: float | None = None,
        limit: int = 100,
    ) -> list[AuditEntry]:
        """Entries matching every filter given, newest first."""
        given = dict(user=user, session=session, project=project, device=device, outcome=outcome)
        filters = {k: v for k, v in given.items() if v is not None and k in _FILTERS}
        return await asyncio.to_thread(self._list, filters, since, max(1, min(limit, 10_000)))

    def _close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    async def close(self) -> None:
        await asyncio.to_thread(self._close)
