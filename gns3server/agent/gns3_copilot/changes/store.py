"""Where changes and configuration backups are kept: ``copilot_changes.sqlite3`` in the data directory.

Two components of one :class:`~..db.Database` file, each with its migrations:

* ``changes``: one row per configuration change made through ``gns3_config_commands``
  (whoever called it: the agent, 3.1's chat, MCP, a revert): device, commands, who
  and under which approval, the diff of configuration and state, the checks' verdicts
  and the rollback computed from the baseline, and whether it was rolled back;
* ``config_backups``: per device (by GNS3 node id) every configuration captured
  before a change, numbered 1, 2, ... per device, with a fingerprint of the
  configuration it holds (what the CLI prints around it left out).

Rows hold device output (configurations may carry hashed secrets): the file is
zeroed on delete like every copilot database, and the routes show rows only to who
GNS3 lets use the device's console (``api/routes/changes.py``).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..db import Database, Migration, Schema

__all__ = ["CHANGES_DB_NAME", "Backup", "ChangeRecord", "ChangeStore"]

CHANGES_DB_NAME = "copilot_changes.sqlite3"

CHANGES_SCHEMA = Schema("changes", (Migration(1, (
    """CREATE TABLE IF NOT EXISTS copilot_changes (
        change_id      TEXT PRIMARY KEY,
        project_id     TEXT NOT NULL,
        session_id     TEXT NOT NULL,
        username       TEXT NOT NULL,
        device         TEXT NOT NULL,
        node_id        TEXT NOT NULL,
        driver         TEXT NOT NULL,
        commands       TEXT NOT NULL,
        status         TEXT NOT NULL,
        verified       TEXT NOT NULL,
        detail         TEXT NOT NULL,
        backup_id      TEXT,
        approval_id    TEXT,
        rollback_of    TEXT,
        created_at     REAL NOT NULL,
        rolled_back_at REAL,
        rolled_back_by TEXT
    )""",
    "CREATE INDEX IF NOT EXISTS copilot_changes_project ON copilot_changes (project_id, created_at)",
), "configuration changes: diff, checks, rollback"),))

BACKUPS_SCHEMA = Schema("config_backups", (Migration(1, (
    """CREATE TABLE IF NOT EXISTS copilot_config_backups (
        backup_id   TEXT PRIMARY KEY,
        project_id  TEXT NOT NULL,
        node_id     TEXT NOT NULL,
        device      TEXT NOT NULL,
        driver      TEXT NOT NULL,
        version     INTEGER NOT NULL,
        commands    TEXT NOT NULL,
        captures    TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        taken_at    REAL NOT NULL,
        taken_by    TEXT NOT NULL,
        reason      TEXT NOT NULL,
        change_id   TEXT,
        UNIQUE (project_id, node_id, version)
    )""",
    "CREATE INDEX IF NOT EXISTS copilot_config_backups_node ON copilot_config_backups (project_id, node_id, version)",
), "per-device configuration backups, versioned"),))

_CHANGE_COLUMNS = ("change_id, project_id, session_id, username, device, node_id, driver, commands, status, verified, "
                   "detail, backup_id, approval_id, rollback_of, created_at, rolled_back_at, rolled_back_by")
_BACKUP_COLUMNS = ("backup_id, project_id, node_id, device, driver, version, commands, captures, fingerprint, "
                   "taken_at, taken_by, reason, change_id")


@dataclass(frozen=True)
class ChangeRecord:
    """A change as stored; ``detail`` holds its diff, checks, rollback and snapshot (JSON)."""

    change_id: str
    project_id: str
    session_id: str
    username: str
    device: str
    node_id: str
    driver: str
    commands: list[str]
    status: str
    verified: str
    detail: dict[str, Any] = field(default_factory=dict)
    backup_id: str | None = None
    approval_id: str | None = None
    rollback_of: str | None = None
    created_at: float = 0.0
    rolled_back_at: float | None = None
    rolled_back_by: str | None = None

    @classmethod
    def _from_row(cls, row: Sequence[Any]) -> ChangeRecord:
        values = list(row)
        values[7] = json.loads(values[7])
        values[10] = json.loads(values[10])
        return cls(*values)

    @property
    def rollback(self) -> Mapping[str, Any]:
        """``{"commands", "expects"?, "reason"?}``: how the change is undone (``commands`` None: it is not)."""
        rollback = self.detail.get("rollback")
        return rollback if isinstance(rollback, Mapping) else {}


@dataclass(frozen=True)
class Backup:
    backup_id: str
    project_id: str
    node_id: str
    device: str
    driver: str
    version: int
    commands: list[str]
    captures: list[str]
    """The answers of ``commands``, in order: the configuration as the device printed it."""
    fingerprint: str
    taken_at: float
    taken_by: str
    reason: str
    change_id: str | None = None

    @classmethod
    def _from_row(cls, row: Sequence[Any]) -> Backup:
        values = list(row)
        values[6] = json.loads(values[6])
        values[7] = json.loads(values[7])
        return cls(*values)

    def summary(self) -> dict[str, Any]:
        """What a listing shows (not the configuration itself)."""
        return {"backup_id": self.backup_id, "device": self.device, "node_id": self.node_id, "driver": self.driver,
                "version": self.version, "fingerprint": self.fingerprint, "taken_at": self.taken_at,
                "taken_by": self.taken_by, "reason": self.reason, "change_id": self.change_id}


class ChangeStore:
    """Changes and backups in ``data_dir``; opened by its first use (or :meth:`open`), closed with :meth:`close`."""

    def __init__(self, data_dir: str | Path) -> None:
        self.path = Path(data_dir) / CHANGES_DB_NAME
        self._database = Database(self.path, (CHANGES_SCHEMA, BACKUPS_SCHEMA), name="changes")

    @classmethod
    async def open(cls, data_dir: str | Path) -> ChangeStore:
        """Open the file now, so that one the copilot cannot use (SchemaError) stops the start."""
        store = cls(data_dir)
        await store._database.start()
        return store

    async def close(self) -> None:
        await self._database.close()

    # ------------------------------------------------------------------ changes

    async def record(self, change: ChangeRecord) -> ChangeRecord:
        row = (change.change_id, change.project_id, change.session_id, change.username, change.device,
               change.node_id, change.driver, json.dumps(change.commands), change.status, change.verified,
               json.dumps(change.detail, default=str), change.backup_id, change.approval_id, change.rollback_of,
               change.created_at or time.time(), None, None)
        await self._database.execute(
            f"INSERT INTO copilot_changes ({_CHANGE_COLUMNS}) VALUES ({', '.join('?' * len(row))})", row)
        return await self.change(change.change_id) or change

    async def change(self, change_id: str) -> ChangeRecord | None:
        row = await self._database.fetchone(
            f"SELECT {_CHANGE_COLUMNS} FROM copilot_changes WHERE change_id = ?", (change_id,))
        return ChangeRecord._from_row(row) if row else None

    async def changes(self, project_id: str, *, username: str | None = None, device: str | None = None,
                      limit: int = 100) -> list[ChangeRecord]:
        """The project's changes, newest first (``username``: only theirs)."""
        clauses, params = ["project_id = ?"], [project_id]
        for column, value in (("username", username), ("device", device)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        rows = await self._database.fetchall(
            f"SELECT {_CHANGE_COLUMNS} FROM copilot_changes WHERE {' AND '.join(clauses)} "
            "ORDER BY created_at DESC LIMIT ?", (*params, max(1, min(limit, 1000))))
        return [ChangeRecord._from_row(r) for r in rows]

    async def claim_rollback(self, change_id: str, username: str) -> bool:
        """Mark the change rolled back now unless someone did (False); :meth:`release_rollback` undoes
        the claim when the rollback did not run."""
        return await self._database.execute(
            "UPDATE copilot_changes SET rolled_back_at = ?, rolled_back_by = ? WHERE change_id = ? "
            "AND rolled_back_at IS NULL", (time.time(), username, change_id)) == 1

    async def release_rollback(self, change_id: str) -> None:
        await self._database.execute(
            "UPDATE copilot_changes SET rolled_back_at = NULL, rolled_back_by = NULL WHERE change_id = ?", (change_id,))

    # ------------------------------------------------------------------ backups

    async def back_up(self, *, project_id: str, node_id: str, device: str, driver: str, commands: Sequence[str],
                      captures: Sequence[str], fingerprint: str, taken_by: str, reason: str,
                      change_id: str | None = None) -> Backup:
        """Store a new version of the device's configuration (the next number for that node)."""
        backup_id = str(uuid.uuid4())

        def insert(connection: Any) -> None:
            (latest,) = connection.execute(
                "SELECT COALESCE(MAX(version), 0) FROM copilot_config_backups WHERE project_id = ? AND node_id = ?",
                (project_id, node_id)).fetchone()
            connection.execute(
                f"INSERT INTO copilot_config_backups ({_BACKUP_COLUMNS}) VALUES ({', '.join('?' * 13)})",
                (backup_id, project_id, node_id, device, driver, latest + 1, json.dumps(list(commands)),
                 json.dumps(list(captures)), fingerprint, time.time(), taken_by, reason, change_id))

        await self._database.run(insert)  # one transaction: two changes at once never get one number
        backup = await self.backup(backup_id)
        assert backup is not None
        return backup

    async def link_backup(self, backup_id: str, change_id: str) -> None:
        await self._database.execute("UPDATE copilot_config_backups SET change_id = ? WHERE backup_id = ?",
                                     (change_id, backup_id))

    async def backup(self, backup_id: str) -> Backup | None:
        row = await self._database.fetchone(
            f"SELECT {_BACKUP_COLUMNS} FROM copilot_config_backups WHERE backup_id = ?", (backup_id,))
        return Backup._from_row(row) if row else None

    async def backups(self, project_id: str, node_id: str | None = None, limit: int = 200) -> list[Backup]:
        """The project's backups (one node's, if given), newest first."""
        where, params = ("project_id = ?", [project_id]) if node_id is None else (
            "project_id = ? AND node_id = ?", [project_id, node_id])
        rows = await self._database.fetchall(
            f"SELECT {_BACKUP_COLUMNS} FROM copilot_config_backups WHERE {where} ORDER BY taken_at DESC, version DESC "
            "LIMIT ?", (*params, max(1, min(limit, 1000))))
        return [Backup._from_row(r) for r in rows]
