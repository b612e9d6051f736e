"""The audit log: every command the copilot sends to a device (or refuses to).

Stored in SQLite in the server's data directory so that an administrator can list
it later. A command refused because GNS3 does not let the user use the console
is "denied"; a command run under the user's approval carries the approval (its
id, the digest of the approved calls, who approved and when). The file is a
:class:`..db.Database`: queries run on its own thread, off the event loop.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..db import Database, Migration, Schema, add_missing_columns

log = logging.getLogger(__name__)

AUDIT_DB_NAME = "copilot_console_audit.sqlite3"

_TABLES = (
    """CREATE TABLE IF NOT EXISTS console_audit (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        time REAL NOT NULL,
        user TEXT NOT NULL,
        session TEXT NOT NULL,
        project TEXT NOT NULL,
        device TEXT NOT NULL,
        command TEXT NOT NULL,
        outcome TEXT NOT NULL,
        detail TEXT NOT NULL DEFAULT ''
    )""",
    "CREATE INDEX IF NOT EXISTS console_audit_time ON console_audit (time)",
)
# Added after the first release, before schema versions were recorded.
_APPROVAL_COLUMNS = {"approval_id": "TEXT", "approval_digest": "TEXT", "approved_by": "TEXT", "approved_at": "REAL"}
_COLUMNS = ("id", "time", "user", "session", "project", "device", "command", "outcome", "detail", *_APPROVAL_COLUMNS)


def _baseline(db: sqlite3.Connection) -> None:
    """Create the table, or give a table of an older release the approval columns."""
    for statement in _TABLES:
        db.execute(statement)
    add_missing_columns(db, "console_audit", _APPROVAL_COLUMNS)


AUDIT_SCHEMA = Schema("console_audit", (Migration(1, _baseline, "console audit with approvals"),))
_FILTERS = ("user", "session", "project", "device", "outcome")


@dataclass(frozen=True)
class Who:
    """On whose behalf commands run."""

    user: str
    session: str
    project: str
    # The approval the commands run under (configuration changes), if any.
    approval_id: str | None = None
    approval_digest: str | None = None
    approved_by: str | None = None
    approved_at: float | None = None


@dataclass(frozen=True)
class AuditEntry:
    id: int
    time: float  # seconds since the epoch (UTC)
    user: str
    session: str
    project: str
    device: str
    command: str
    outcome: str  # ok, error, timeout, blocked, denied, not_run, failed
    detail: str
    approval_id: str | None = None
    approval_digest: str | None = None
    approved_by: str | None = None
    approved_at: float | None = None


class AuditLog:
    """Append-only command log in ``data_dir``; opened by its first use, closed with :meth:`close`."""

    def __init__(self, data_dir: str | Path) -> None:
        self.path = Path(data_dir) / AUDIT_DB_NAME
        self._database = Database(self.path, (AUDIT_SCHEMA,), name="audit")

    @classmethod
    async def open(cls, data_dir: str | Path) -> AuditLog:
        """Open the file now, so that one the copilot cannot use (SchemaError) stops the start."""
        log = cls(data_dir)
        await log._database.start()
        return log

    async def record(self, who: Who, device: str, command: str, outcome: str, detail: str = "") -> None:
        """Append one entry, timestamped now."""
        await self.record_many(who, device, [(command, outcome, detail)])

    async def record_many(self, who: Who, device: str, entries: Sequence[tuple[str, str, str]]) -> None:
        """Append a batch's entries (command, outcome, detail) in one transaction, timestamped now."""
        now = time.time()
        approval = (who.approval_id, who.approval_digest, who.approved_by, who.approved_at)
        rows = [(now, who.user, who.session, who.project, device, c, o, d[:2000], *approval) for c, o, d in entries]
        query = f"INSERT INTO console_audit ({', '.join(_COLUMNS[1:])}) VALUES ({', '.join('?' * (len(_COLUMNS) - 1))})"
        await self._database.executemany(query, rows)

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
        given = {"user": user, "session": session, "project": project, "device": device, "outcome": outcome}
        filters = {k: v for k, v in given.items() if v is not None and k in _FILTERS}
        clauses = [f"{name} = ?" for name in filters]
        params: list[Any] = list(filters.values())
        if since is not None:
            clauses.append("time >= ?")
            params.append(since)
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        query = f"SELECT {', '.join(_COLUMNS)} FROM console_audit{where} ORDER BY id DESC LIMIT ?"
        args = (*params, max(1, min(limit, 10_000)))
        return [AuditEntry(*row) for row in await self._database.fetchall(query, args)]

    async def close(self) -> None:
        await self._database.close()
