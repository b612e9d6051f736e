"""Session table upgrades, client-chosen ids and pinning; prompt files."""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path

import pytest

from gns3server.agent.gns3_copilot.agent.model.prompts import PromptFileError, default_prompts, load_prompts
from gns3server.agent.gns3_copilot.db import Database
from gns3server.agent.gns3_copilot.service.session_store import SESSIONS_SCHEMA, SQLiteSessionStore

# The session table as the first release created it (no pinned, message_count, kind).
OLD_TABLE = """
CREATE TABLE copilot_sessions (
    session_id TEXT PRIMARY KEY, user_id TEXT NOT NULL, project_id TEXT NOT NULL, title TEXT NOT NULL,
    created_at REAL NOT NULL, updated_at REAL NOT NULL, runs INTEGER NOT NULL DEFAULT 0,
    input_tokens INTEGER NOT NULL DEFAULT 0, output_tokens INTEGER NOT NULL DEFAULT 0,
    total_tokens INTEGER NOT NULL DEFAULT 0, pending TEXT
);
INSERT INTO copilot_sessions VALUES ('old-1', 'u1', 'p1', 'Older', 1.0, 2.0, 3, 10, 5, 15, NULL);
"""


async def test_an_older_table_gains_the_new_columns_and_keeps_its_sessions(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "db.sqlite3") as connection:
        connection.executescript(OLD_TABLE)
    connection.close()
    database = await Database.open(tmp_path / "db.sqlite3", (SESSIONS_SCHEMA,))
    store = SQLiteSessionStore(database)
    old = await store.get("old-1")
    assert old is not None and old.title == "Older" and old.runs == 3 and old.total_tokens == 15
    assert (old.pinned, old.message_count, old.kind) == (0, 0, "chat")
    await database.close()
    database = await Database.open(tmp_path / "db.sqlite3", (SESSIONS_SCHEMA,))  # opening again changes nothing
    store = SQLiteSessionStore(database)
    new = await store.create("u1", "p1", "Newer")
    await store.set_message_count(new.session_id, 4)
    assert [s.session_id for s in await store.list("u1", "p1")] == [new.session_id, "old-1"]
    assert (await store.set_pinned("old-1", True)).pinned  # type: ignore[union-attr]
    assert [s.session_id for s in await store.list("u1", "p1")] == ["old-1", new.session_id]
    assert (await store.get(new.session_id)).message_count == 4  # type: ignore[union-attr]
    await database.close()


async def test_a_chosen_id_is_created_once_and_never_changes_owner(tmp_path: Path) -> None:
    database = await Database.open(tmp_path / "db.sqlite3", (SESSIONS_SCHEMA,))
    store = SQLiteSessionStore(database)
    chosen = str(uuid.uuid4())
    first = await store.create("alice", "p1", "Alice's", chosen)
    again = await store.create("bob", "p2", "Bob's", chosen, kind="fault_injection")
    assert first == again and again.user_id == "alice" and again.kind == "chat"  # the caller checks the owner
    await database.close()


def test_prompt_files_replace_the_packaged_ones_file_by_file(tmp_path: Path) -> None:
    packaged = load_prompts(None)
    assert packaged == default_prompts() and set(packaged.sources.values()) == {"packaged"}
    assert "{{topology_info}}" in packaged.system_for("teaching")
    assert "read-only" in packaged.system_for("teaching") and "fault injection" in packaged.system_for("fault_injection")

    (tmp_path / "lab_automation.md").write_text("lab automation. Only touch routers.\n")
    custom = load_prompts(tmp_path)
    assert "Mode: lab automation. Only touch routers." in custom.system_for("lab_automation")
    assert custom.system_for("teaching") == packaged.system_for("teaching")
    assert custom.sources["lab_automation.md"] == str(tmp_path / "lab_automation.md")
    assert load_prompts(tmp_path / "missing") == packaged  # a directory with no files: the packaged prompts


@pytest.mark.parametrize(
    ("name", "text", "said"),
    [("system.md", "No placeholders.", "{mode_rules}"), ("teaching.md", "   \n", "is empty"),
     ("fault_injection.md", b"\xff\xfe\x00bad", "cannot be read")],
)
def test_a_bad_prompt_file_is_named(tmp_path: Path, name: str, text: str | bytes, said: str) -> None:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(PromptFileError) as error:
        load_prompts(tmp_path)
    assert name in str(error.value) and said in str(error.value)
