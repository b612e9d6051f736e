"""The per-node CLI family a user chose: stored by the copilot, since GNS3 3.0 nodes have no field for it.

One row per (project, node); who set it and when. A :class:`..db.Database` in the
copilot data dir (queries on its own thread). Who may set it (a user GNS3 lets edit
the node) is the route's to check; the change is audited there too.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from ..db import Database, Migration, Schema

CHOICES_DB_NAME = "copilot_console_families.sqlite3"

_TABLE = """CREATE TABLE IF NOT EXISTS node_family (
    project_id TEXT NOT NULL,
    node_id TEXT NOT NULL,
    family TEXT NOT NULL,
    set_by TEXT NOT NULL,
    set_at REAL NOT NULL,
    PRIMARY KEY (project_id, node_id)
)"""
CHOICES_SCHEMA = Schema("node_family", (Migration(1, (_TABLE,), "per-node CLI family"),))


@dataclass(frozen=True)
class Choice:
    project_id: str
    node_id: str
    family: str
    set_by: str  # the GNS3 user name
    set_at: float  # seconds since the epoch


class FamilyChoices:
    """The families users chose for nodes; opened by its first use, closed with :meth:`close`."""

    def __init__(self, data_dir: str | Path) -> None:
        self.path = Path(data_dir) / CHOICES_DB_NAME
        self._database = Database(self.path, (CHOICES_SCHEMA,), name="families")

    @classmethod
    async def open(cls, data_dir: str | Path) -> FamilyChoices:
        """Open the file now, so that one the copilot cannot use (SchemaError) stops the start."""
        choices = cls(data_dir)
        await choices._database.start()
        return choices

    async def get(self, project_id: str, node_id: str) -> Choice | None:
        row = await self._database.fetchone(
            "SELECT project_id, node_id, family, set_by, set_at FROM node_family WHERE project_id = ? AND node_id = ?",
            (project_id, node_id),
        )
        return Choice(*row) if row else None

    async def for_project(self, project_id: str) -> dict[str, Choice]:
        """Every choice made in the project, by node id."""
        rows = await self._database.fetchall(
            "SELECT project_id, node_id, family, set_by, set_at FROM node_family WHERE project_id = ?", (project_id,)
        )
        return {row[1]: Choice(*row) for row in rows}

    async def set(self, project_id: str, node_id: str, family: str | None, user: str) -> Choice | None:
        """Record ``user``'s choice (``None`` forgets it: detection decides again)."""
        if family is None:
            await self._database.execute(
                "DELETE FROM node_family WHERE project_id = ? AND node_id = ?", (project_id, node_id)
            )
            return None
        choice = Choice(project_id, node_id, family, user, time.time())
        await self._database.execute(
            "INSERT INTO node_family (project_id, node_id, family, set_by, set_at) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (project_id, node_id) DO UPDATE SET family = excluded.family, set_by = excluded.set_by, "
            "set_at = excluded.set_at",
            (choice.project_id, choice.node_id, choice.family, choice.set_by, choice.set_at),
        )
        return choice

    async def close(self) -> None:
        await self._database.close()
