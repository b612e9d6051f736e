"""Assignments, attempts and hints served, in SQLite (the conversations' database, like the faults).

An assignment is one scenario put into one project by a teacher: which nodes play
its roles, the parameters, the seed it was drawn with and the fault records its
injection left (``copilot_faults``: the teacher's, with their undo). An attempt is
one "check my work" of a student: the score and each check's verdict. A hint row
says that a student was served that level of that assignment's hints, once.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..db import Database, Migration, Schema

__all__ = ["TEACHING_SCHEMA", "Assignment", "Attempt", "TeachingStore"]

TEACHING_SCHEMA = Schema("teaching", (
    Migration(1, (
        """CREATE TABLE IF NOT EXISTS copilot_assignments (
            assignment_id TEXT PRIMARY KEY,
            project_id    TEXT NOT NULL,
            teacher_id    TEXT NOT NULL,
            teacher_name  TEXT NOT NULL,
            scenario_id   TEXT NOT NULL,
            nodes         TEXT NOT NULL,
            params        TEXT NOT NULL,
            seed          TEXT,
            fault_ids     TEXT NOT NULL,
            time_limit_minutes INTEGER,
            created_at    REAL NOT NULL,
            closed_at     REAL
        )""",
        "CREATE INDEX IF NOT EXISTS copilot_assignments_project ON copilot_assignments (project_id, created_at)",
        """CREATE TABLE IF NOT EXISTS copilot_attempts (
            attempt_id    TEXT PRIMARY KEY,
            assignment_id TEXT NOT NULL,
            project_id    TEXT NOT NULL,
            student_id    TEXT NOT NULL,
            student_name  TEXT NOT NULL,
            at            REAL NOT NULL,
            passed        INTEGER NOT NULL,
            total         INTEGER NOT NULL,
            score         REAL NOT NULL,
            results       TEXT NOT NULL
        )""",
        "CREATE INDEX IF NOT EXISTS copilot_attempts_assignment ON copilot_attempts (assignment_id, student_id, at)",
        """CREATE TABLE IF NOT EXISTS copilot_hints (
            assignment_id TEXT NOT NULL,
            student_id    TEXT NOT NULL,
            level         INTEGER NOT NULL,
            served_at     REAL NOT NULL,
            PRIMARY KEY (assignment_id, student_id, level)
        )""",
    ), "assignments, attempts and hints of graded labs"),
))
_ASSIGNMENT = ("assignment_id, project_id, teacher_id, teacher_name, scenario_id, nodes, params, seed, fault_ids, "
               "time_limit_minutes, created_at, closed_at")
_ATTEMPT = "attempt_id, assignment_id, project_id, student_id, student_name, at, passed, total, score, results"


@dataclass(frozen=True)
class Assignment:
    assignment_id: str
    project_id: str
    teacher_id: str
    teacher_name: str
    scenario_id: str
    nodes: dict[str, str]
    params: dict[str, str]
    seed: str | None
    fault_ids: list[str]
    time_limit_minutes: int | None
    created_at: float
    closed_at: float | None = None

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> Assignment:
        v = list(row)
        v[5], v[6], v[8] = json.loads(v[5]), json.loads(v[6]), json.loads(v[8])
        return cls(*v)


@dataclass(frozen=True)
class Attempt:
    attempt_id: str
    assignment_id: str
    project_id: str
    student_id: str
    student_name: str
    at: float
    passed: int
    total: int
    score: float
    results: list[dict[str, Any]]

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> Attempt:
        v = list(row)
        v[9] = json.loads(v[9])
        return cls(*v)


class TeachingStore:
    """The graded labs' tables (schema :data:`TEACHING_SCHEMA`) on a shared database."""

    def __init__(self, database: Database) -> None:
        self._db = database

    @staticmethod
    def new_id() -> str:
        return str(uuid.uuid4())

    async def add_assignment(self, assignment: Assignment) -> None:
        a = assignment
        await self._db.execute(
            f"INSERT INTO copilot_assignments ({_ASSIGNMENT}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (a.assignment_id, a.project_id, a.teacher_id, a.teacher_name, a.scenario_id, json.dumps(a.nodes),
             json.dumps(a.params), a.seed, json.dumps(a.fault_ids), a.time_limit_minutes, a.created_at, a.closed_at))

    async def assignments(self, project_id: str, *, open_only: bool = False) -> list[Assignment]:
        where = "project_id = ?" + (" AND closed_at IS NULL" if open_only else "")
        rows = await self._db.fetchall(
            f"SELECT {_ASSIGNMENT} FROM copilot_assignments WHERE {where} ORDER BY created_at", (project_id,))
        return [Assignment.from_row(r) for r in rows]

    async def close(self, assignment_id: str) -> bool:
        done = await self._db.execute(
            "UPDATE copilot_assignments SET closed_at = ? WHERE assignment_id = ? AND closed_at IS NULL",
            (time.time(), assignment_id))
        return done == 1

    async def add_attempt(
        self, assignment: Assignment, student_id: str, student_name: str, passed: int, total: int,
        results: Sequence[Mapping[str, Any]],
    ) -> Attempt:
        score = round(100.0 * passed / total, 1) if total else 0.0
        attempt = Attempt(self.new_id(), assignment.assignment_id, assignment.project_id, student_id, student_name,
                          time.time(), passed, total, score, [dict(r) for r in results])
        await self._db.execute(
            f"INSERT INTO copilot_attempts ({_ATTEMPT}) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (attempt.attempt_id, attempt.assignment_id, attempt.project_id, student_id, student_name, attempt.at,
             passed, total, score, json.dumps(attempt.results, default=str)))
        return attempt

    async def attempts(self, project_id: str, student_id: str | None = None) -> list[Attempt]:
        """The project's attempts, oldest first: one student's, or everyone's (None)."""
        where, args = ("project_id = ?", (project_id,)) if student_id is None else (
            "project_id = ? AND student_id = ?", (project_id, student_id))
        rows = await self._db.fetchall(f"SELECT {_ATTEMPT} FROM copilot_attempts WHERE {where} ORDER BY at", args)
        return [Attempt.from_row(r) for r in rows]

    async def serve_hint(self, assignment_id: str, student_id: str, last: int) -> int | None:
        """The next hint level for the student (recorded as served), None once all ``last`` were served."""
        def take(connection: Any) -> int | None:
            (served,) = connection.execute(
                "SELECT COUNT(*) FROM copilot_hints WHERE assignment_id = ? AND student_id = ?",
                (assignment_id, student_id)).fetchone()
            if served >= last:
                return None
            connection.execute("INSERT INTO copilot_hints VALUES (?,?,?,?)",
                               (assignment_id, student_id, served + 1, time.time()))
            return int(served) + 1

        return await self._db.run(take)

    async def hints_used(self, project_id: str) -> dict[tuple[str, str], int]:
        """(assignment, student) -> how many hints were served."""
        rows = await self._db.fetchall(
            "SELECT h.assignment_id, h.student_id, COUNT(*) FROM copilot_hints h JOIN copilot_assignments a "
            "ON a.assignment_id = h.assignment_id WHERE a.project_id = ? GROUP BY h.assignment_id, h.student_id",
            (project_id,))
        return {(r[0], r[1]): int(r[2]) for r in rows}
