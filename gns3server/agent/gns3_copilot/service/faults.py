"""Faults injected by ``chat/inject``: what the copilot changed, so that the injector can reveal it.

Each lab-changing tool call of a fault-injection run is one record (tool,
arguments, outcome, output), owned by the user who asked for the injection.
The student never sees them (they are not in anybody else's sessions, and the
injection session's history hides its tool calls); the injector reads them with
``GET .../faults`` and marks them reverted. A record keeps the tool call that
undoes it (``undo``) when the tool could tell (read before the change). The table lives next to the session
table, in the conversations' database (see ``storage.py``).
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..db import Database, Migration, Schema, add_missing_columns
from ..tools.gate import ToolOutcome


def _add_undo(db: sqlite3.Connection) -> None:
    add_missing_columns(db, "copilot_faults", {"undo": "TEXT"})


FAULTS_SCHEMA = Schema("faults", (
    Migration(1, (
        """CREATE TABLE IF NOT EXISTS copilot_faults (
            fault_id    TEXT PRIMARY KEY,
            session_id  TEXT NOT NULL,
            project_id  TEXT NOT NULL,
            user_id     TEXT NOT NULL,
            tool        TEXT NOT NULL,
            args        TEXT NOT NULL,
            status      TEXT NOT NULL,
            output      TEXT NOT NULL,
            created_at  REAL NOT NULL,
            reverted_at REAL
        )""",
        "CREATE INDEX IF NOT EXISTS copilot_faults_project ON copilot_faults (project_id, created_at)",
    ), "injected faults"),
    Migration(2, _add_undo, "the tool call that undoes a fault (automatic revert)"),
))
"""The fault table, in the conversations' database (``storage.py``)."""
_COLUMNS = "fault_id, session_id, project_id, user_id, tool, args, status, output, created_at, reverted_at, undo"
OUTPUT_MAX = 4000


@dataclass(frozen=True)
class FaultRecord:
    fault_id: str
    session_id: str
    project_id: str
    user_id: str
    tool: str
    args: dict[str, Any]
    status: str
    output: str
    created_at: float
    reverted_at: float | None = None
    undo: dict[str, Any] | None = None
    """The tool call that reverts the fault (``{"tool", "args"}``), when the tool could tell."""

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> FaultRecord:
        values = list(row)
        values[5] = json.loads(values[5])
        values[10] = json.loads(values[10]) if values[10] else None
        return cls(*values)


class SQLiteFaultStore:
    """Fault records in SQLite, on the session store's database (its schema: :data:`FAULTS_SCHEMA`)."""

    def __init__(self, database: Database) -> None:
        self._database = database

    async def record(
        self, session_id: str, project_id: str, user_id: str, tool: str, args: Mapping[str, Any], status: str,
        output: str, undo: Mapping[str, Any] | None = None,
    ) -> FaultRecord:
        record = FaultRecord(str(uuid.uuid4()), session_id, project_id, user_id, tool, dict(args), status,
                             output[:OUTPUT_MAX], time.time(), None, dict(undo) if undo else None)
        row = (record.fault_id, session_id, project_id, user_id, tool, json.dumps(record.args, default=str),
               status, record.output, record.created_at, None,
               json.dumps(record.undo, default=str) if record.undo else None)
        await self._database.execute(f"INSERT INTO copilot_faults ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)", row)
        return record

    async def list(self, project_id: str, user_id: str | None) -> list[FaultRecord]:
        """The project's faults injected by ``user_id`` (every user's when None), oldest first."""
        where, args = ("project_id = ?", (project_id,)) if user_id is None else (
            "project_id = ? AND user_id = ?", (project_id, user_id))
        query = f"SELECT {_COLUMNS} FROM copilot_faults WHERE {where} ORDER BY created_at"
        return [FaultRecord.from_row(r) for r in await self._database.fetchall(query, args)]

    async def get(self, fault_id: str) -> FaultRecord | None:
        row = await self._database.fetchone(f"SELECT {_COLUMNS} FROM copilot_faults WHERE fault_id = ?", (fault_id,))
        return FaultRecord.from_row(row) if row else None

    async def claim_revert(self, fault_id: str) -> bool:
        """Mark the fault reverted now if nobody has (False: reverted, or being reverted, already).

        Taken before the undo runs, so two requests never both run it; :meth:`release_revert`
        gives the claim back when the undo failed.
        """
        claimed = await self._database.execute(
            "UPDATE copilot_faults SET reverted_at = ? WHERE fault_id = ? AND reverted_at IS NULL",
            (time.time(), fault_id),
        )
        return claimed == 1

    async def release_revert(self, fault_id: str) -> None:
        await self._database.execute("UPDATE copilot_faults SET reverted_at = NULL WHERE fault_id = ?", (fault_id,))

    async def mark_reverted(self, fault_id: str) -> FaultRecord | None:
        await self._database.execute(
            "UPDATE copilot_faults SET reverted_at = ? WHERE fault_id = ?", (time.time(), fault_id)
        )
        return await self.get(fault_id)


class FaultRecorder:
    """Records the lab-changing tool calls of a fault-injection run as they end.

    An after-call callback of the run's tool gate: it sees each call's own arguments
    and outcome (its status, output and undo), refused calls included (a rejected
    change is shown to the injector as such); read-only tools change nothing.
    """

    def __init__(self, faults: SQLiteFaultStore, session_id: str, project_id: str, user_id: str) -> None:
        self._faults = faults
        self._where = (session_id, project_id, user_id)

    async def __call__(self, outcome: ToolOutcome) -> None:
        if outcome.read_only:
            return
        await self._faults.record(*self._where, outcome.name, outcome.call.get("args") or {}, outcome.status,
                                  outcome.output, undo=outcome.undo)
