"""Versioned schemas: each component's ordered migrations, and how far a file has got.

A component (sessions, faults, the console audit, LLM configs, MCP keys) owns some
tables and lists its migrations in order, version 1 first. The version each
component of a file has reached is a row of ``copilot_schema`` in that file, so
components sharing a file (sessions and faults share the conversations' file,
next to LangGraph's own tables) move on independently.

Version 1 of every component adopts a file written before versions were recorded:
it creates what is missing and adds the columns older releases lacked, so users'
existing data is upgraded in place. Each migration runs in one ``BEGIN IMMEDIATE``
transaction with its version bump, the version read again inside it: a failed
migration leaves the file as it was, and two processes opening the same file never
apply one twice. A file whose version is newer than this code knows is refused
rather than used (a newer copilot wrote it; this one could damage its data).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from ..errors import CopilotError, ErrorKind

log = logging.getLogger(__name__)

VERSION_TABLE = "copilot_schema"

Step = Callable[[sqlite3.Connection], None]
"""A migration written in Python: it runs inside the migration's transaction, so it must not
commit, nor call ``executescript`` (which commits first)."""


class SchemaError(CopilotError, RuntimeError):
    """A database file this copilot cannot use as it is; the message names the file and what to do.

    The message is for the administrator (it names a path on the server, and SQLite's text):
    start-up stops with it in the log. Should one ever reach a client, it is told only
    that the copilot cannot use its storage.
    """

    code = "database_unusable"
    kind = ErrorKind.UNAVAILABLE
    PUBLIC_MESSAGE: ClassVar[str] = "The copilot cannot use its database; the GNS3 server log says why."

    @property
    def public_message(self) -> str:
        return self.PUBLIC_MESSAGE


class SchemaTooNewError(SchemaError):
    """The file was migrated by a newer copilot than this one."""

    code = "database_schema_too_new"


class MigrationError(SchemaError):
    """A migration failed; the file is left as it was before it."""

    code = "database_migration_failed"


@dataclass(frozen=True)
class Migration:
    version: int
    apply: Sequence[str] | Step
    """SQL statements run in order, or a function of the connection."""
    note: str


@dataclass(frozen=True)
class Schema:
    """A component's migrations, versions 1, 2, ... in order."""

    component: str
    migrations: tuple[Migration, ...]

    def __post_init__(self) -> None:
        versions = [m.version for m in self.migrations]
        if versions != list(range(1, len(versions) + 1)):
            raise ValueError(f"migrations of {self.component}: versions must be 1..n in order, not {versions}")

    @property
    def latest(self) -> int:
        return len(self.migrations)


def add_missing_columns(db: sqlite3.Connection, table: str, columns: Mapping[str, str]) -> None:
    """``ALTER TABLE ... ADD COLUMN`` for each of ``columns`` (name: definition) the table lacks."""
    present = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
    for name, definition in columns.items():
        if name not in present:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {definition}")


def versions(db: sqlite3.Connection) -> dict[str, int]:
    """Each component's recorded version in this file (empty for a file from before versions)."""
    exists = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (VERSION_TABLE,)).fetchone()
    if not exists:
        return {}
    return dict(db.execute(f"SELECT component, version FROM {VERSION_TABLE}").fetchall())


def migrate(db: sqlite3.Connection, schemas: Iterable[Schema], where: str) -> None:
    """Bring every component of ``schemas`` to its latest version; ``where`` names the file in errors."""
    db.execute(f"CREATE TABLE IF NOT EXISTS {VERSION_TABLE} (component TEXT PRIMARY KEY, version INTEGER NOT NULL)")
    for schema in schemas:
        while _step(db, schema, where):
            pass


def _step(db: sqlite3.Connection, schema: Schema, where: str) -> bool:
    """Apply the component's next migration, if any; False once it is up to date."""
    db.execute("BEGIN IMMEDIATE")
    try:
        row = db.execute(f"SELECT version FROM {VERSION_TABLE} WHERE component = ?", (schema.component,)).fetchone()
        current = row[0] if row else 0
        if current > schema.latest:
            raise SchemaTooNewError(
                f"{where}: the {schema.component} tables are at schema version {current}, newer than this "
                f"copilot knows ({schema.latest}); they were written by a newer gns3server-copilot: "
                "run that version (or restore a backup of the file)"
            )
        if current == schema.latest:
            db.commit()
            return False
        migration = schema.migrations[current]
        try:
            if callable(migration.apply):
                migration.apply(db)
            else:
                for statement in migration.apply:
                    db.execute(statement)
            db.execute(
                f"INSERT INTO {VERSION_TABLE} (component, version) VALUES (?, ?) "
                "ON CONFLICT (component) DO UPDATE SET version = excluded.version",
                (schema.component, migration.version),
            )
        except sqlite3.Error as exc:
            raise MigrationError(
                f"{where}: migration {migration.version} of the {schema.component} tables "
                f"({migration.note}) failed, nothing was changed: {exc}"
            ) from exc
        db.commit()
    except BaseException:
        db.rollback()
        raise
    log.info("%s: %s tables migrated to version %d (%s)", where, schema.component, migration.version, migration.note)
    return True
