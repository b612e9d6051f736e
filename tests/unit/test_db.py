"""The persistence layer: one thread per database file, versioned migrations, closing.

The "old" files below are written with the exact schemas of the release before
schema versions were recorded (sessions, in-flight turns and faults next to
LangGraph's tables in ``copilot.sqlite3``; LLM configs, console audit and MCP keys
in files of their own), holding data, and must open upgraded in place.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from fastapi import FastAPI
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, MessagesState, StateGraph

from gns3server.agent.gns3_copilot.api import llm_config_store as llm_store
from gns3server.agent.gns3_copilot.api.crypto import SecretBox
from gns3server.agent.gns3_copilot.api.lifecycle import copilot_running
from gns3server.agent.gns3_copilot.api.llm_config_store import LLMConfigStore
from gns3server.agent.gns3_copilot.api.settings import load_settings
from gns3server.agent.gns3_copilot.console import audit as audit_module
from gns3server.agent.gns3_copilot.console.audit import AuditLog, Who
from gns3server.agent.gns3_copilot.db import (
    Database,
    DatabaseClosedError,
    Migration,
    MigrationError,
    Schema,
    SchemaTooNewError,
)
from gns3server.agent.gns3_copilot.db.schema import VERSION_TABLE, versions
from gns3server.agent.gns3_copilot.mcp import keys as keys_module
from gns3server.agent.gns3_copilot.mcp.keys import MCPKeyStore, digest_of
from gns3server.agent.gns3_copilot.service import storage as storage_module
from gns3server.agent.gns3_copilot.service.session_store import InFlight
from gns3server.agent.gns3_copilot.service.storage import (
    CheckpointSchemaError,
    open_sqlite_storage,
)

# The previous release's schemas, as its code created them (executescript, no versions).
OLD_CONVERSATIONS = """
CREATE TABLE IF NOT EXISTS copilot_sessions (
    session_id TEXT PRIMARY KEY, user_id TEXT NOT NULL, project_id TEXT NOT NULL, title TEXT NOT NULL,
    created_at REAL NOT NULL, updated_at REAL NOT NULL, runs INTEGER NOT NULL DEFAULT 0,
    input_tokens INTEGER NOT NULL DEFAULT 0, output_tokens INTEGER NOT NULL DEFAULT 0,
    total_tokens INTEGER NOT NULL DEFAULT 0, pending TEXT, pinned INTEGER NOT NULL DEFAULT 0,
    message_count INTEGER NOT NULL DEFAULT 0, kind TEXT NOT NULL DEFAULT 'chat'
);
CREATE INDEX IF NOT EXISTS copilot_sessions_owner ON copilot_sessions (user_id, project_id, updated_at);
CREATE TABLE IF NOT EXISTS copilot_inflight (
    session_id TEXT PRIMARY KEY, question TEXT, partial TEXT NOT NULL DEFAULT '', updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS copilot_faults (
    fault_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, project_id TEXT NOT NULL, user_id TEXT NOT NULL,
    tool TEXT NOT NULL, args TEXT NOT NULL, status TEXT NOT NULL, output TEXT NOT NULL, created_at REAL NOT NULL,
    reverted_at REAL
);
CREATE INDEX IF NOT EXISTS copilot_faults_project ON copilot_faults (project_id, created_at);
INSERT INTO copilot_sessions VALUES ('s-old', 'alice', 'p1', 'Old talk', 1.0, 2.0, 2, 10, 5, 15, NULL, 1, 4, 'chat');
INSERT INTO copilot_inflight VALUES ('s-old', 'still running?', 'Let me', 3.0);
INSERT INTO copilot_faults VALUES ('f-old', 's-old', 'p1', 'alice', 'gns3_config_commands', '{"node": "R1"}',
    'success', 'done', 4.0, NULL);
"""
OLD_LLM_CONFIGS = """
CREATE TABLE IF NOT EXISTS copilot_llm_configs (
    config_id TEXT PRIMARY KEY, user_id TEXT NOT NULL, config TEXT NOT NULL, api_key TEXT,
    is_default INTEGER NOT NULL DEFAULT 0, created_at REAL NOT NULL, updated_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS copilot_llm_configs_owner ON copilot_llm_configs (user_id, created_at);
"""
# The first release's audit table: no approval columns, rollback journal.
OLD_AUDIT = """
CREATE TABLE IF NOT EXISTS console_audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT, time REAL NOT NULL, user TEXT NOT NULL, session TEXT NOT NULL,
    project TEXT NOT NULL, device TEXT NOT NULL, command TEXT NOT NULL, outcome TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS console_audit_time ON console_audit (time);
INSERT INTO console_audit (time, user, session, project, device, command, outcome)
    VALUES (5.0, 'alice', 's-old', 'p1', 'R1', 'show ip route', 'ok');
"""
OLD_MCP_KEYS = """
CREATE TABLE IF NOT EXISTS copilot_mcp_keys (
    key_id TEXT PRIMARY KEY, user_id TEXT NOT NULL, name TEXT NOT NULL, scope TEXT NOT NULL,
    digest TEXT NOT NULL UNIQUE, prefix TEXT NOT NULL, created_at REAL NOT NULL, expires_at REAL,
    revoked_at REAL, last_used_at REAL
);
CREATE INDEX IF NOT EXISTS copilot_mcp_keys_owner ON copilot_mcp_keys (user_id, created_at);
"""
OLD_KEY = "gns3c_mcp_" + "k" * 43


def copilot_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("copilot-db-")}


@contextlib.contextmanager
def no_thread_left() -> Iterator[None]:
    """Every database thread started inside the block has ended when it exits."""
    before = copilot_threads()
    yield
    assert copilot_threads() <= before, copilot_threads() - before


def raw(path: Path, script: str, wal: bool = True) -> None:
    """Write ``script`` into ``path`` with plain sqlite3, as the old code's connection did."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        if wal:
            db.execute("PRAGMA journal_mode=WAL")
        db.executescript(script)
        db.commit()


def recorded(path: Path) -> dict[str, int]:
    with contextlib.closing(sqlite3.connect(path)) as db:
        return versions(db)


def echo_graph(checkpointer: SqliteSaver):  # type: ignore[no-untyped-def]
    builder = StateGraph(MessagesState)
    builder.add_node("answer", lambda state: {"messages": [AIMessage(f"echo {state['messages'][-1].content}")]})
    builder.add_edge(START, "answer")
    return builder.compile(checkpointer=checkpointer)


def old_conversations_file(data_dir: Path) -> Path:
    """copilot.sqlite3 as the previous release left it: LangGraph's tables with every checkpoint, ours."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / storage_module.DATABASE_NAME
    with contextlib.closing(sqlite3.connect(path, check_same_thread=False)) as db:
        db.execute("PRAGMA journal_mode=WAL")
        saver = SqliteSaver(db)
        saver.setup()
        graph = echo_graph(saver)
        config = {"configurable": {"thread_id": "s-old"}}
        graph.invoke({"messages": [HumanMessage("one")]}, config)
        graph.invoke({"messages": [HumanMessage("two")]}, config)
        db.executescript(OLD_CONVERSATIONS)
        db.commit()
    return path


async def test_a_fresh_file_is_created_configured_and_recorded_at_the_latest_versions(tmp_path: Path) -> None:
    with no_thread_left():
        storage = await open_sqlite_storage(tmp_path)
        assert storage.database is not None
        pragmas = await storage.database.call(lambda db: tuple(
            db.execute(f"PRAGMA {name}").fetchone()[0]
            for name in ("journal_mode", "synchronous", "busy_timeout", "secure_delete")
        ))
        assert pragmas == ("wal", 1, 30_000, 1)  # synchronous NORMAL for the conversations
        await storage.close()
        store = await LLMConfigStore.open(tmp_path, SecretBox(Fernet.generate_key()))
        assert await store._database.call(lambda db: db.execute("PRAGMA synchronous").fetchone()[0]) == 2  # FULL
        await store.close()
    assert recorded(tmp_path / storage_module.DATABASE_NAME) == {"sessions": 3, "faults": 2, "teaching": 1, "evidence": 2}
    assert recorded(tmp_path / llm_store.DATABASE_NAME) == {"llm_configs": 1}


async def test_files_written_by_the_previous_release_are_upgraded_in_place(tmp_path: Path) -> None:
    conversations = old_conversations_file(tmp_path)
    box = SecretBox(Fernet.generate_key())
    old_config = {"model": "m", "context_limit": 8, "base_url": "http://10.0.0.5:11434/v1"}
    raw(tmp_path / llm_store.DATABASE_NAME, OLD_LLM_CONFIGS)
    with contextlib.closing(sqlite3.connect(tmp_path / llm_store.DATABASE_NAME)) as db, db:
        db.execute("INSERT INTO copilot_llm_configs VALUES ('c-old', 'alice', ?, ?, 1, 1.0, 1.0)",
                   (json.dumps(old_config), box.encrypt("sk-old-key")))
    raw(tmp_path / audit_module.AUDIT_DB_NAME, OLD_AUDIT, wal=False)
    raw(tmp_path / keys_module.DATABASE_NAME, OLD_MCP_KEYS)
    with contextlib.closing(sqlite3.connect(tmp_path / keys_module.DATABASE_NAME)) as db, db:
        db.execute("INSERT INTO copilot_mcp_keys VALUES ('k-old', 'alice', 'laptop', 'read_only', ?, ?, 1.0, NULL,"
                   " NULL, NULL)", (digest_of(OLD_KEY), OLD_KEY[:16]))

    with no_thread_left():
        storage = await open_sqlite_storage(tmp_path)
        try:
            session = await storage.sessions.get("s-old")
            assert session is not None and (session.title, session.runs, session.pinned) == ("Old talk", 2, True)
            assert await storage.sessions.inflight("s-old") == InFlight("still running?", "Let me")
            assert storage.faults is not None
            assert [(f.fault_id, f.args) for f in await storage.faults.list("p1", "alice")] == [("f-old", {"node": "R1"})]
            saved = await storage.checkpointer.aget_tuple({"configurable": {"thread_id": "s-old"}})
            assert saved is not None
            assert [m.content for m in saved.checkpoint["channel_values"]["messages"]] == ["one", "echo one", "two", "echo two"]
            assert await storage.prune() == 0  # the superseded copies went at start-up
            await storage.sessions.create("alice", "p1", "New talk")  # and it takes new writes
        finally:
            await storage.close()

        configs = await LLMConfigStore.open(tmp_path, box)
        try:
            record = await configs.get("alice", "c-old")
            assert record.is_default and configs.usable(record)["api_key"] == "sk-old-key"
        finally:
            await configs.close()

        audit = AuditLog(tmp_path)
        try:
            await audit.record(Who("bob", "s2", "p1", approval_id="a1", approved_by="alice"), "R2", "ip route", "ok")
            old, new = sorted(await audit.entries(), key=lambda e: e.id)
            assert (old.command, old.approval_id, new.approval_id, new.approved_by) == ("show ip route", None, "a1", "alice")
        finally:
            await audit.close()

        keys = await MCPKeyStore.open(tmp_path)
        try:
            verified = await keys.verify(OLD_KEY)
            assert verified is not None and verified.key_id == "k-old"
        finally:
            await keys.close()

    assert recorded(conversations) == {"sessions": 3, "faults": 2, "teaching": 1, "evidence": 2}
    assert recorded(tmp_path / llm_store.DATABASE_NAME) == {"llm_configs": 1}
    assert recorded(tmp_path / audit_module.AUDIT_DB_NAME) == {"console_audit": 1}
    assert recorded(tmp_path / keys_module.DATABASE_NAME) == {"mcp_keys": 2}


async def _open_conversations(data_dir: Path) -> None:
    await (await open_sqlite_storage(data_dir)).close()


async def _open_llm_configs(data_dir: Path) -> None:
    await (await LLMConfigStore.open(data_dir, SecretBox(Fernet.generate_key()))).close()


async def _open_audit(data_dir: Path) -> None:
    await (await AuditLog.open(data_dir)).close()


async def _open_mcp_keys(data_dir: Path) -> None:
    await (await MCPKeyStore.open(data_dir)).close()


@pytest.mark.parametrize(("opener", "file", "component"), [
    (_open_conversations, storage_module.DATABASE_NAME, "sessions"),
    (_open_conversations, storage_module.DATABASE_NAME, "faults"),
    (_open_llm_configs, llm_store.DATABASE_NAME, "llm_configs"),
    (_open_audit, audit_module.AUDIT_DB_NAME, "console_audit"),
    (_open_mcp_keys, keys_module.DATABASE_NAME, "mcp_keys"),
])
async def test_a_file_from_a_newer_copilot_is_refused_and_left_alone(tmp_path: Path, opener, file, component) -> None:
    await opener(tmp_path)
    known = recorded(tmp_path / file)[component]
    with contextlib.closing(sqlite3.connect(tmp_path / file)) as db, db:
        db.execute(f"UPDATE {VERSION_TABLE} SET version = 7 WHERE component = ?", (component,))
    before = (tmp_path / file).read_bytes()
    with no_thread_left(), pytest.raises(SchemaTooNewError) as refused:
        await opener(tmp_path)
    message = str(refused.value)
    assert str(tmp_path / file) in message and f"the {component} tables are at schema version 7" in message
    assert f"newer than this copilot knows ({known})" in message
    assert recorded(tmp_path / file)[component] == 7 and (tmp_path / file).read_bytes() == before


def counting_step(seen: list[int], version: int):  # type: ignore[no-untyped-def]
    def step(db: sqlite3.Connection) -> None:
        seen.append(version)
        db.execute(f"CREATE TABLE t{version} (x)")
    return step


async def test_migrations_run_once_in_order_and_a_failed_one_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "x.sqlite3"
    seen: list[int] = []
    first = Schema("things", (Migration(1, counting_step(seen, 1), "one"),))
    await (await Database.open(path, (first,))).close()
    broken = Schema("things", (
        Migration(1, counting_step(seen, 1), "one"),
        Migration(2, ("CREATE TABLE t2 (x)", "INSERT INTO no_such_table VALUES (1)"), "two"),
    ))
    with no_thread_left(), pytest.raises(MigrationError, match=r"migration 2 of the things tables \(two\) failed"):
        await Database.open(path, (broken,))
    with contextlib.closing(sqlite3.connect(path)) as db:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert recorded(path) == {"things": 1} and "t2" not in tables  # rolled back with its version

    fixed = Schema("things", (
        Migration(1, counting_step(seen, 1), "one"),
        Migration(2, ("CREATE TABLE t2 (x)",), "two"),
        Migration(3, counting_step(seen, 3), "three"),
    ))
    other = Schema("others", (Migration(1, ("CREATE TABLE o1 (x)",), "another component of the file"),))
    database = await Database.open(path, (fixed, other))
    await database.close()
    assert seen == [1, 3] and recorded(path) == {"things": 3, "others": 1}


def test_migration_versions_must_be_one_to_n() -> None:
    with pytest.raises(ValueError, match="versions must be 1..n"):
        Schema("bad", (Migration(1, (), "a"), Migration(3, (), "c")))


async def test_close_finishes_queued_work_then_ends_the_thread(tmp_path: Path) -> None:
    schema = Schema("rows", (Migration(1, ("CREATE TABLE rows (n INTEGER)",), "rows"),))
    database = await Database.open(tmp_path / "rows.sqlite3", (schema,))
    thread = await database.call(lambda db: threading.current_thread())
    assert thread is not threading.current_thread() and thread.is_alive()
    gate = threading.Event()
    loop = asyncio.get_running_loop()
    blocker = loop.create_task(database.call(lambda db: gate.wait(60)))  # holds the thread: the rest queue up
    writes = [loop.create_task(database.execute("INSERT INTO rows VALUES (?)", (n,))) for n in range(50)]
    closing = loop.create_task(database.close())
    loop.call_soon(gate.set)  # runs after every task above has submitted its work
    await closing
    assert all(w.done() and w.exception() is None for w in writes) and await blocker
    assert not thread.is_alive() and database.closed
    with contextlib.closing(sqlite3.connect(tmp_path / "rows.sqlite3")) as db:
        assert db.execute("SELECT COUNT(*) FROM rows").fetchone()[0] == 50
    with pytest.raises(DatabaseClosedError):
        await database.fetchone("SELECT 1")
    await database.close()  # twice is fine


async def test_a_failed_transaction_is_rolled_back_and_the_error_raised(tmp_path: Path) -> None:
    schema = Schema("rows", (Migration(1, ("CREATE TABLE rows (n INTEGER)",), "rows"),))
    database = await Database.open(tmp_path / "rows.sqlite3", (schema,))

    def half_then_fail(db: sqlite3.Connection) -> None:
        db.execute("INSERT INTO rows VALUES (1)")
        raise KeyError("boom")

    try:
        with pytest.raises(KeyError, match="boom"):
            await database.run(half_then_fail)
        assert await database.fetchone("SELECT COUNT(*) FROM rows") == (0,)
        # The connection never leaves its thread: sqlite3 itself refuses a use from elsewhere.
        connection = await database.call(lambda db: db)
        with pytest.raises(sqlite3.ProgrammingError, match="thread"):
            connection.execute("SELECT 1")
    finally:
        await database.close()


async def test_a_cursor_never_leaves_the_database_thread(tmp_path: Path) -> None:
    """Freed on the event loop's thread, a cursor resets its cached statement there, possibly while the
    database's thread runs that statement for someone else (sqlite3: "bad parameter or other API misuse")."""
    schema = Schema("rows", (Migration(1, ("CREATE TABLE rows (n INTEGER)",), "rows"),))
    database = await Database.open(tmp_path / "rows.sqlite3", (schema,))
    try:
        with pytest.raises(TypeError, match="returned a cursor"):
            await database.run(lambda db: db.execute("INSERT INTO rows VALUES (1)"))
        assert await database.fetchall("SELECT n FROM rows") == []  # and that transaction was rolled back
        assert await database.execute("INSERT INTO rows VALUES (?)", (2,)) == 1
        assert await database.executemany("INSERT INTO rows VALUES (?)", [(3,), (4,)]) == 2
        assert await database.fetchone("SELECT SUM(n) FROM rows") == (9,)
    finally:
        await database.close()


async def test_the_stores_under_concurrent_use_of_the_same_statements(tmp_path: Path) -> None:
    storage = await open_sqlite_storage(tmp_path)
    audit = AuditLog(tmp_path)
    keys = await MCPKeyStore.open(tmp_path)
    try:
        session = await storage.sessions.create("alice", "p1", "busy")
        _, secret = await keys.create("alice", "laptop", "full")
        usage = {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}

        async def worker(n: int) -> None:
            for step in range(30):
                await storage.sessions.record_run(session.session_id, usage)
                await storage.sessions.get(session.session_id)
                await audit.record(Who("alice", "s1", "p1"), "R1", f"show {n}.{step}", "ok")
                assert await keys.verify(secret) is not None

        await asyncio.gather(*(worker(n) for n in range(20)))
        stored = await storage.sessions.get(session.session_id)
        assert stored is not None and (stored.runs, stored.total_tokens) == (600, 1200)
        assert len(await audit.entries(limit=1000)) == 600
    finally:
        await keys.close()
        await audit.close()
        await storage.close()


async def test_checkpoint_tables_without_what_pruning_reads_stop_the_start(tmp_path: Path) -> None:
    """A LangGraph whose tables differ must not leave conversations growing unpruned, unnoticed."""
    raw(tmp_path / storage_module.DATABASE_NAME, """
        CREATE TABLE checkpoints (thread_id TEXT NOT NULL, checkpoint_id TEXT NOT NULL, parent_checkpoint_id TEXT,
            type TEXT, checkpoint BLOB, metadata BLOB, PRIMARY KEY (thread_id, checkpoint_id));
    """)
    with no_thread_left(), pytest.raises(CheckpointSchemaError, match=r"lack checkpoints\.checkpoint_ns"):
        await open_sqlite_storage(tmp_path)


async def test_the_running_copilot_closes_every_database_thread(tmp_path: Path) -> None:
    settings = load_settings({}, gns3_config_dir=tmp_path, gns3_secrets_dir=None, host="127.0.0.1", port=3080,
                             ssl=False)

    async def no_user(kind: str, value: str) -> None:
        return None

    before = copilot_threads()
    with no_thread_left():
        async with copilot_running(settings, FastAPI(), no_user) as (state, mcp):
            await state.storage.sessions.create("alice", "p1", "hello")
            await state.llm_configs.list("alice")
            await state.console.audit.record(Who("alice", "s1", "p1"), "R1", "show version", "ok")
            assert state.console.credentials is not None
            await state.console.credentials.info("node", "n1")
            assert mcp.running
            # One per file: conversations, LLM configs, console credentials, the console audit, node families,
            # MCP keys, changes and backups.
            assert len(copilot_threads() - before) == 7
