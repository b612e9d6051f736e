"""Where conversations live: a checkpointer plus the session table, behind one object.

The embedded default is one SQLite file in the server's data directory, one
:class:`..db.Database` (one connection on a thread of its own) shared by
LangGraph's SQLite checkpointer and our session, in-flight, fault and evidence tables, so
the event loop never waits on SQLite. Anything else (PostgreSQL for several
servers) only needs to provide a ``BaseCheckpointSaver`` with ``adelete_thread``
and a ``SessionStore``.

A checkpoint's message list is stored a row per message beside it (``message_log.py``):
a run writes what it added, not the whole conversation. LangGraph keeps every checkpoint (for
time travel, which the copilot does not offer), so a conversation's storage would
grow with the square of its length (769 MB after 200 turns with a checkpoint per
graph step). Only each conversation's latest checkpoint (and its pending writes,
which hold a waiting approval) is ever read, so the others are deleted after
every run and at start-up (:meth:`Storage.prune`); SQLite zeroes and reuses the
freed pages. That SQL reads LangGraph's tables, whose schema is LangGraph's: at
start-up the columns it uses are checked (:func:`check_checkpoint_tables`), and a
version of ``langgraph-checkpoint-sqlite`` that changed them stops the start with
an error naming what is missing, rather than growth going unnoticed.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite import SqliteSaver

from ..db import Database, SchemaError, checkpoint_wal
from ..evidence.store import EVIDENCE_SCHEMA, SQLiteEvidenceStore
from ..teaching.store import TEACHING_SCHEMA, TeachingStore
from .checkpointer import ThreadedCheckpointer
from .faults import FAULTS_SCHEMA, SQLiteFaultStore
from .message_log import MessageLog
from .session_store import SESSIONS_SCHEMA, SessionStore, SQLiteSessionStore

log = logging.getLogger(__name__)

DATABASE_NAME = "copilot.sqlite3"
CHECKPOINT_COLUMNS = {
    "checkpoints": ("thread_id", "checkpoint_ns", "checkpoint_id"),
    "writes": ("thread_id", "checkpoint_ns", "checkpoint_id"),
}
"""LangGraph's tables and the columns of them that pruning reads."""


class CheckpointSchemaError(SchemaError):
    """LangGraph's checkpoint tables lack what pruning needs (a changed ``langgraph-checkpoint-sqlite``)."""

    code = "checkpoint_schema_unsupported"


@dataclass
class Storage:
    """An open checkpointer and session store; close it once at shutdown."""

    checkpointer: BaseCheckpointSaver
    sessions: SessionStore
    faults: SQLiteFaultStore | None = None
    """Faults injected by ``chat/inject`` (None: this storage does not keep them)."""
    teaching: TeachingStore | None = None
    """Graded labs' assignments, attempts and hints (``teaching/store.py``)."""
    evidence: SQLiteEvidenceStore | None = None
    """What tools read from devices and each answer's judgement (None: no evidence is kept)."""
    database: Database | None = None
    """The database they share (None: whoever made them closes them)."""
    _prune: Callable[[sqlite3.Connection, str | None], int] | None = None

    async def prune(self, thread_id: str | None = None) -> int:
        """Delete the checkpoints that a newer one of the same conversation supersedes
        (of every conversation if ``thread_id`` is None); returns how many went."""
        prune = self._prune
        if prune is None or self.database is None:
            return 0
        return await self.database.run(lambda connection: prune(connection, thread_id))

    async def finish_run(
        self, thread_id: str, usage: Mapping[str, int], *, clear_inflight: bool
    ) -> bool | None:
        """A run's closing writes as one transaction, one job on the database's thread, when the session
        store and the checkpointer share this storage's database: the in-flight record forgotten (if
        ``clear_inflight``), the superseded checkpoints pruned, the message count (when known without
        reading the state) and the run's usage stored. A failing prune or count is logged and undone
        alone (a savepoint): it never fails the run nor the other writes.

        Returns whether the message count was stored (False: it is known only by reading the state), or
        None when the stores do not share the database (the caller writes each step itself)."""
        sessions, database = self.sessions, self.database
        if not isinstance(sessions, SQLiteSessionStore) or database is None or sessions.database is not database:
            return None
        count_here = getattr(self.checkpointer, "message_count_here", None)
        prune = self._prune

        def finish(connection: sqlite3.Connection) -> bool:
            if prune is not None:
                _in_savepoint(connection, "prune", lambda: prune(connection, thread_id),
                              f"Could not prune the old checkpoints of session {thread_id}")
            count: int | None = None
            try:
                count = count_here(thread_id) if count_here is not None else None
            except Exception:
                log.exception("Could not count the messages of session %s", thread_id)
            sessions.finish_run_on(connection, thread_id, usage, clear_inflight=clear_inflight, message_count=count)
            return count is not None

        return await database.run(finish)

    async def message_count(self, thread_id: str) -> int | None:
        """How many messages the conversation's latest state holds, when known without reading it
        (the checkpointer remembers the list it last read or wrote); None: read the state."""
        count = getattr(self.checkpointer, "message_count", None)
        return await count(thread_id) if count is not None else None

    async def latest_messages(self, thread_id: str) -> list[Any] | None:
        """The conversation's latest messages, when known without reading its state (as
        :meth:`message_count`); None: read the state."""
        latest = getattr(self.checkpointer, "latest_messages", None)
        found = await latest(thread_id) if latest is not None else None
        return None if found is None else list(found)

    async def scrub(self) -> None:
        """Push deleted content out of the write-ahead log too (after a conversation is deleted).

        The WAL keeps recent page images, old content included, until a checkpoint;
        TRUNCATE copies them into the (zeroing) database file and empties the log.
        """
        if self.database is not None:
            await self.database.call(checkpoint_wal)

    async def close(self) -> None:
        """Close the stores, then the database once its queued work is done."""
        try:
            await self.sessions.close()
        finally:
            if self.database is not None:
                await self.database.close()


async def open_sqlite_storage(data_dir: str | Path) -> Storage:
    """Open (creating or upgrading if needed) the copilot database in ``data_dir``.

    SchemaError if the file cannot be used: a newer copilot's schema, a failed
    migration, LangGraph tables without the columns pruning reads.
    """
    path = Path(data_dir) / DATABASE_NAME
    database = await Database.open(path, (SESSIONS_SCHEMA, FAULTS_SCHEMA, TEACHING_SCHEMA, EVIDENCE_SCHEMA),
                                   synchronous="NORMAL", name="conversations")
    try:
        saver = await database.call(_open_saver)
        storage = Storage(
            checkpointer=ThreadedCheckpointer(saver, database, MessageLog(saver.serde)),
            sessions=SQLiteSessionStore(database),
            faults=SQLiteFaultStore(database), teaching=TeachingStore(database), evidence=SQLiteEvidenceStore(database),
            database=database, _prune=_prune_superseded,
        )
        removed = await storage.prune()  # left by a crash, or by a version that kept them all
    except BaseException:
        await database.close()
        raise
    log.info("Copilot storage opened at %s%s", path, f" ({removed} old checkpoints removed)" if removed else "")
    return storage


def _in_savepoint(connection: sqlite3.Connection, name: str, work: Callable[[], Any], failure: str) -> None:
    """``work()`` inside the caller's transaction, undone alone (and logged) if it raises."""
    connection.execute(f"SAVEPOINT {name}").close()
    try:
        work()
    except Exception:
        connection.execute(f"ROLLBACK TO {name}").close()
        log.exception(failure)
    connection.execute(f"RELEASE {name}").close()


def _open_saver(connection: sqlite3.Connection) -> SqliteSaver:
    """LangGraph's saver over the database's connection, its tables created and checked."""
    saver = SqliteSaver(connection)
    saver.setup()
    check_checkpoint_tables(connection)
    return saver


def check_checkpoint_tables(connection: sqlite3.Connection) -> None:
    """CheckpointSchemaError unless LangGraph's tables have the columns :func:`_prune_superseded` reads."""
    missing = []
    for table, columns in CHECKPOINT_COLUMNS.items():
        present = {row[1] for row in connection.execute(f"PRAGMA table_info({table})")}
        if not present:
            missing.append(f"table {table}")
        else:
            missing += [f"{table}.{column}" for column in columns if column not in present]
    if missing:
        raise CheckpointSchemaError(
            f"LangGraph's checkpoint tables lack {', '.join(missing)}: old conversation copies could not be "
            "pruned and storage would grow with the square of each conversation's length. This "
            "langgraph-checkpoint-sqlite is not one the copilot supports (see setup.cfg)."
        )


def _prune_superseded(connection: sqlite3.Connection, thread_id: str | None) -> int:
    """Keep only the latest checkpoint (by id, as LangGraph reads it) of each thread and namespace.

    Runs inside the caller's transaction (:meth:`..db.Database.run`).
    """
    where, args = ("WHERE thread_id = ?", (thread_id,)) if thread_id is not None else ("", ())
    removed = 0
    latest = connection.execute(
        f"SELECT thread_id, checkpoint_ns, MAX(checkpoint_id) FROM checkpoints {where} GROUP BY thread_id, checkpoint_ns",
        args,
    ).fetchall()
    for key in latest:
        for table in ("checkpoints", "writes"):
            cursor = connection.execute(
                f"DELETE FROM {table} WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id <> ?", key
            )
            removed += cursor.rowcount if table == "checkpoints" else 0
    return removed
