"""Evidence records and each turn's judgement, in the conversations' database.

A record is one read (``reads.py``) numbered in its session (``E1``, ``E2`` ...:
short, so that a model can cite it), with the turn it belongs to (the id of the
user's message that opened the turn) and when it was read. A turn's judgement
(its claims and their verdicts, the ``evidence`` event) is stored once the
answer is judged, so that the history shows it after a restart without judging
again. Both go with their session (:meth:`SQLiteEvidenceStore.delete_session`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from ..db import Database, Migration, Schema
from .reads import DeviceRead, Evidence

__all__ = ["EVIDENCE_SCHEMA", "SQLiteEvidenceStore"]

EVIDENCE_SCHEMA = Schema("evidence", (
    Migration(1, (
        """CREATE TABLE IF NOT EXISTS copilot_evidence (
            session_id   TEXT NOT NULL,
            seq          INTEGER NOT NULL,
            turn_id      TEXT NOT NULL,
            at           REAL NOT NULL,
            device       TEXT NOT NULL,
            command      TEXT NOT NULL,
            output       TEXT NOT NULL,
            status       TEXT NOT NULL,
            source       TEXT NOT NULL,
            tool         TEXT NOT NULL,
            tool_call_id TEXT NOT NULL,
            PRIMARY KEY (session_id, seq)
        )""",
        "CREATE INDEX IF NOT EXISTS copilot_evidence_turn ON copilot_evidence (session_id, turn_id)",
        """CREATE TABLE IF NOT EXISTS copilot_evidence_turns (
            session_id TEXT NOT NULL,
            turn_id    TEXT NOT NULL,
            message_id TEXT NOT NULL,
            body       TEXT NOT NULL,
            at         REAL NOT NULL,
            PRIMARY KEY (session_id, turn_id)
        )""",
    ), "device reads kept as evidence, and each turn's judgement of its claims"),
    Migration(2, (
        "CREATE INDEX IF NOT EXISTS copilot_evidence_device ON copilot_evidence (session_id, device COLLATE NOCASE, seq)",
    ), "each device's reads found by its name (a turn's judgement looks up the latest one of each it names)"),
))
"""The evidence tables, in the conversations' database (``service/storage.py``)."""

_COLUMNS = "seq, session_id, turn_id, at, device, command, output, status, source, tool, tool_call_id"
PREFIX = "E"


def _evidence(row: Sequence[Any]) -> Evidence:
    seq, session_id, turn_id, at, *read = row
    return Evidence(*read, evidence_id=f"{PREFIX}{seq}", session_id=session_id, turn_id=turn_id, at=at)


def parse_id(evidence_id: str) -> int | None:
    """``E12`` -> 12; None for anything else."""
    text = evidence_id.strip().upper()
    return int(text[1:]) if text.startswith(PREFIX) and text[1:].isdigit() and len(text) < 12 else None


class SQLiteEvidenceStore:
    """Evidence in SQLite, on the session store's database (its schema: :data:`EVIDENCE_SCHEMA`)."""

    def __init__(self, database: Database) -> None:
        self._database = database

    async def add(self, session_id: str, turn_id: str, reads: Sequence[DeviceRead], at: float) -> list[Evidence]:
        """Store ``reads``, numbered after the session's last record (one transaction: the numbers are unique)."""
        if not reads:
            return []

        def insert(db: sqlite3.Connection) -> list[Evidence]:
            (last,) = db.execute("SELECT COALESCE(MAX(seq), 0) FROM copilot_evidence WHERE session_id = ?",
                                 (session_id,)).fetchone()
            rows = [(last + i + 1, session_id, turn_id, at, r.device, r.command, r.output, r.status, r.source, r.tool,
                     r.tool_call_id) for i, r in enumerate(reads)]
            db.executemany(f"INSERT INTO copilot_evidence ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)", rows).close()
            return [_evidence(row) for row in rows]

        return await self._database.run(insert)

    async def turn(self, session_id: str, turn_id: str) -> list[Evidence]:
        """The turn's records, in the order they were read."""
        rows = await self._database.fetchall(
            f"SELECT {_COLUMNS} FROM copilot_evidence WHERE session_id = ? AND turn_id = ? ORDER BY seq",
            (session_id, turn_id),
        )
        return [_evidence(r) for r in rows]

    async def get(self, session_id: str, evidence_id: str) -> Evidence | None:
        seq = parse_id(evidence_id)
        if seq is None:
            return None
        row = await self._database.fetchone(
            f"SELECT {_COLUMNS} FROM copilot_evidence WHERE session_id = ? AND seq = ?", (session_id, seq)
        )
        return _evidence(row) if row else None

    async def list(self, session_id: str) -> list[Evidence]:
        rows = await self._database.fetchall(
            f"SELECT {_COLUMNS} FROM copilot_evidence WHERE session_id = ? ORDER BY seq", (session_id,)
        )
        return [_evidence(r) for r in rows]

    async def latest(self, session_id: str, devices: Sequence[str], before_turn: str) -> dict[str, Evidence]:
        """Each device's latest record from an earlier turn than ``before_turn`` (what the user may look at)."""
        if not devices:
            return {}
        marks = ",".join("?" * len(devices))
        # The newest read of each device, found on its index: a long session holds thousands of
        # reads (with their outputs), and every turn that names a device asks this.
        rows = await self._database.fetchall(
            f"SELECT {_COLUMNS} FROM copilot_evidence WHERE session_id = ? AND seq IN ("
            f"SELECT MAX(seq) FROM copilot_evidence WHERE session_id = ? AND turn_id <> ? "
            f"AND device COLLATE NOCASE IN ({marks}) GROUP BY device COLLATE NOCASE) ORDER BY seq",
            (session_id, session_id, before_turn, *devices),
        )
        found: dict[str, Evidence] = {}
        for row in rows:
            evidence = _evidence(row)
            found[evidence.device.casefold()] = evidence
        return found

    async def save_judgement(self, session_id: str, turn_id: str, message_id: str, body: Mapping[str, Any],
                             at: float) -> None:
        await self._database.execute(
            "INSERT OR REPLACE INTO copilot_evidence_turns (session_id, turn_id, message_id, body, at) "
            "VALUES (?, ?, ?, ?, ?)",
            (session_id, turn_id, message_id, json.dumps(body, ensure_ascii=False, default=str), at),
        )

    async def judgements(self, session_id: str) -> dict[str, dict[str, Any]]:
        """The session's judgements by the id of the answer they judge."""
        rows = await self._database.fetchall(
            "SELECT message_id, body FROM copilot_evidence_turns WHERE session_id = ? ORDER BY at", (session_id,)
        )
        return {message_id: json.loads(body) for message_id, body in rows}

    async def delete_session(self, session_id: str) -> None:
        def delete(db: sqlite3.Connection) -> None:
            db.execute("DELETE FROM copilot_evidence WHERE session_id = ?", (session_id,)).close()
            db.execute("DELETE FROM copilot_evidence_turns WHERE session_id = ?", (session_id,)).close()

        await self._database.run(delete)
