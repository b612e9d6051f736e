"""Conversations stored a message per row beside their checkpoint: a run writes what it added."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, MessagesState, StateGraph

from gns3server.agent.gns3_copilot.service.message_log import REFERENCE
from gns3server.agent.gns3_copilot.service.storage import DATABASE_NAME, Storage, open_sqlite_storage


def graph(checkpointer):
    builder = StateGraph(MessagesState)
    builder.add_node("answer", lambda state: {"messages": [AIMessage(f"echo {state['messages'][-1].content}")]})
    builder.add_edge(START, "answer")
    return builder.compile(checkpointer=checkpointer)


CONFIG = {"configurable": {"thread_id": "t"}}


async def turns(storage: Storage, start: int, end: int) -> None:
    app = graph(storage.checkpointer)
    for n in range(start, end):
        await app.ainvoke({"messages": [HumanMessage(f"question {n} " + "x" * 200)]}, CONFIG, durability="exit")
        await storage.prune("t")


async def written(directory: Path, end: int) -> None:
    """``end`` turns of a conversation stored in ``directory``, the store closed after them."""
    storage = await open_sqlite_storage(directory)
    try:
        await turns(storage, 0, end)
    finally:
        await storage.close()


def latest_checkpoint_bytes(path: Path) -> int:
    with contextlib.closing(sqlite3.connect(path)) as db:
        return db.execute("SELECT length(checkpoint) FROM checkpoints WHERE thread_id = 't' "
                          "ORDER BY checkpoint_id DESC LIMIT 1").fetchone()[0]


async def test_a_run_serialises_only_the_messages_it_added(tmp_path: Path) -> None:
    storage = await open_sqlite_storage(tmp_path)
    try:
        await turns(storage, 0, 5)
        early = latest_checkpoint_bytes(tmp_path / DATABASE_NAME)
        await turns(storage, 5, 60)
        later = latest_checkpoint_bytes(tmp_path / DATABASE_NAME)
        serialised = []
        serde = storage.checkpointer.log.serde
        original = serde.dumps_typed

        def counted(value):
            serialised.append(value)
            return original(value)

        serde.dumps_typed = counted
        await turns(storage, 60, 61)
        del serde.dumps_typed
        # The checkpoint (whole conversation inline before) stays the same size; the turn wrote its two messages.
        assert later <= early + 64
        assert [type(m) for m in serialised if isinstance(m, (HumanMessage, AIMessage))] == [HumanMessage, AIMessage]
        assert await storage.message_count("t") == 122
    finally:
        await storage.close()


async def test_a_conversation_survives_a_restart_and_its_deletion_leaves_no_row(tmp_path: Path) -> None:
    await written(tmp_path, 3)
    storage = await open_sqlite_storage(tmp_path)
    try:
        assert await storage.message_count("t") is None  # nothing in memory after a restart: read, then known
        state = await graph(storage.checkpointer).aget_state(CONFIG)
        assert [m.content[:10] for m in state.values["messages"]] == [
            "question 0", "echo quest", "question 1", "echo quest", "question 2", "echo quest"]
        await turns(storage, 3, 4)
        assert await storage.message_count("t") == 8
        await storage.checkpointer.adelete_thread("t")
        assert await storage.checkpointer.aget_tuple(CONFIG) is None
    finally:
        await storage.close()
    with contextlib.closing(sqlite3.connect(tmp_path / DATABASE_NAME)) as db:
        assert db.execute("SELECT COUNT(*) FROM copilot_messages").fetchone()[0] == 0


async def test_a_checkpoint_stored_whole_by_an_earlier_release_reads_and_goes_on(tmp_path: Path) -> None:
    with contextlib.closing(sqlite3.connect(tmp_path / DATABASE_NAME, check_same_thread=False)) as db:
        old = SqliteSaver(db)  # how checkpoints were written before: the messages inside
        graph(old).invoke({"messages": [HumanMessage("one")]}, CONFIG)
    storage = await open_sqlite_storage(tmp_path)
    try:
        saved = await storage.checkpointer.aget_tuple(CONFIG)
        assert saved is not None
        assert [m.content for m in saved.checkpoint["channel_values"]["messages"]] == ["one", "echo one"]
        await turns(storage, 0, 1)
        state = await graph(storage.checkpointer).aget_state(CONFIG)
        assert [m.content[:10] for m in state.values["messages"]] == ["one", "echo one", "question 0", "echo quest"]
    finally:
        await storage.close()
    with contextlib.closing(sqlite3.connect(tmp_path / DATABASE_NAME)) as db:
        assert db.execute("SELECT COUNT(*) FROM copilot_messages").fetchone()[0] == 4
        blob = db.execute("SELECT checkpoint FROM checkpoints ORDER BY checkpoint_id DESC LIMIT 1").fetchone()[0]
        assert REFERENCE.encode() in blob and b"question 0" not in blob


async def test_a_checkpoint_that_fails_to_store_leaves_no_row_behind(tmp_path: Path) -> None:
    storage = await open_sqlite_storage(tmp_path)
    try:
        await turns(storage, 0, 2)
        serde = storage.checkpointer.log.serde
        original = serde.dumps_typed

        def failing(value):
            if isinstance(value, AIMessage):
                raise TypeError("cannot serialise this")
            return original(value)

        serde.dumps_typed = failing
        try:
            await turns(storage, 2, 3)
        except TypeError:
            pass
        del serde.dumps_typed
        await storage.sessions.list("nobody", "p")  # another transaction commits on the same connection
        with contextlib.closing(sqlite3.connect(tmp_path / DATABASE_NAME)) as db:
            assert db.execute("SELECT COUNT(*) FROM copilot_messages").fetchone()[0] == 4
        await turns(storage, 3, 4)
        state = await graph(storage.checkpointer).aget_state(CONFIG)
        assert [m.content[:10] for m in state.values["messages"]][-2:] == ["question 3", "echo quest"]
    finally:
        await storage.close()


async def test_a_conversation_whose_rows_are_missing_is_refused_by_name(tmp_path: Path) -> None:
    from gns3server.agent.gns3_copilot.service.message_log import StoredMessagesError

    await written(tmp_path, 2)
    with contextlib.closing(sqlite3.connect(tmp_path / DATABASE_NAME)) as db, db:
        db.execute("DELETE FROM copilot_messages WHERE position = 3")
    storage = await open_sqlite_storage(tmp_path)
    try:
        try:
            await storage.checkpointer.aget_tuple(CONFIG)
        except StoredMessagesError as exc:
            assert exc.code == "stored_messages_missing" and "names 4 messages, 3 are stored" in str(exc)
        else:
            raise AssertionError("a damaged conversation read as if whole")
    finally:
        await storage.close()


async def test_the_release_before_message_rows_refuses_the_file_rather_than_read_a_reference(tmp_path: Path) -> None:
    """The previous release knew the conversations' tables at version 2 (session ids in one spelling)
    and read a checkpoint's messages from the checkpoint itself: a file this one wrote (a reference in
    each checkpoint) must be refused by it, as a file from a newer copilot, and left as it is."""
    import pytest

    from gns3server.agent.gns3_copilot.db import Database, Schema, SchemaTooNewError
    from gns3server.agent.gns3_copilot.service.faults import FAULTS_SCHEMA
    from gns3server.agent.gns3_copilot.service.session_store import SESSIONS_SCHEMA

    await written(tmp_path, 2)
    path = tmp_path / DATABASE_NAME
    before = path.read_bytes()
    previous = Schema("sessions", SESSIONS_SCHEMA.migrations[:2])  # what the previous release declared
    assert [m.version for m in previous.migrations] == [1, 2]
    with pytest.raises(SchemaTooNewError, match="sessions tables are at schema version 3"):
        await Database.open(path, (previous, FAULTS_SCHEMA), synchronous="NORMAL", name="conversations")
    assert path.read_bytes() == before


def test_a_write_stores_exactly_the_new_and_the_replaced_messages() -> None:
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from gns3server.agent.gns3_copilot.service.message_log import MESSAGES_TABLE, MessageLog

    log = MessageLog(JsonPlusSerializer())
    with contextlib.closing(sqlite3.connect(":memory:")) as db:
        db.execute(MESSAGES_TABLE)
        messages = [HumanMessage(f"q{i}", id=f"q{i}") for i in range(6)]
        _, kept = log.write(db, "t", {"channel_values": {"messages": messages}})
        log.keep("t", kept)
        dumped = []
        real = log.serde.dumps_typed
        log.serde.dumps_typed = lambda value: dumped.append(value.id) or real(value)
        later = [*messages[:2], AIMessage("cut copy", id="q2"), *messages[3:], HumanMessage("new", id="n")]
        stored, kept = log.write(db, "t", {"channel_values": {"messages": later}})
        assert dumped == ["q2", "n"] and stored["channel_values"]["messages"] == {REFERENCE: 7}
        rows = db.execute("SELECT position FROM copilot_messages WHERE thread_id = 't' ORDER BY position").fetchall()
        assert [r[0] for r in rows] == list(range(7)) and list(kept) == later


async def test_the_list_read_back_after_replacements_and_removals_knows_exactly_its_ids(tmp_path: Path) -> None:
    """The list each read hands the graph carries its ids' index, made from the last stored list's
    and what changed: after messages replaced by id and removed, it is the list's ids, no more."""
    from langchain_core.messages import RemoveMessage

    from gns3server.agent.gns3_copilot.agent.state_messages import IndexedMessages

    storage = await open_sqlite_storage(tmp_path)
    try:
        app = graph(storage.checkpointer)
        for n in range(4):
            await app.ainvoke({"messages": [HumanMessage(f"q{n}", id=f"q{n}")]}, CONFIG, durability="exit")
        messages = (await app.aget_state(CONFIG)).values["messages"]
        await app.aupdate_state(CONFIG, {"messages": [AIMessage("cut", id=messages[1].id)]})  # replaced by id
        await app.aupdate_state(CONFIG, {"messages": [RemoveMessage(id="q3"), RemoveMessage(id=messages[-1].id)]})
        for _ in range(2):  # read back, then after a turn that appends to it
            tuple_ = await storage.checkpointer.aget_tuple(CONFIG)
            assert tuple_ is not None
            read = tuple_.checkpoint["channel_values"]["messages"]
            assert isinstance(read, IndexedMessages) and read._owned_index() == {m.id for m in read}
            await app.ainvoke({"messages": [HumanMessage("again")]}, CONFIG, durability="exit")
        final = (await app.aget_state(CONFIG)).values["messages"]
        assert [m.content for m in final[:3]] == ["q0", "cut", "q1"] and "q3" not in {m.id for m in final}
    finally:
        await storage.close()


def test_a_row_that_cannot_be_decoded_leaves_no_statement_open(tmp_path: Path) -> None:
    """The rows are decoded as the cursor gives them: one that cannot be decoded must not leave the
    read's statement active on the database's connection (it would block a WAL checkpoint, and the
    cursor would be freed by whichever thread drops the error)."""
    from langgraph.checkpoint.base import CheckpointTuple
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from gns3server.agent.gns3_copilot.service.message_log import MESSAGES_TABLE, MessageLog

    serde = JsonPlusSerializer()
    with contextlib.closing(sqlite3.connect(tmp_path / "c.sqlite3", isolation_level=None)) as connection:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute(MESSAGES_TABLE)
        rows = [("t", 0, *serde.dumps_typed(HumanMessage("q"))), ("t", 1, "msgpack", b"\xc1"),
                ("t", 2, *serde.dumps_typed(AIMessage("a")))]
        connection.executemany("INSERT INTO copilot_messages VALUES (?, ?, ?, ?)", rows)
        found = CheckpointTuple({"configurable": {"thread_id": "t"}},
                                {"channel_values": {"messages": {REFERENCE: 3}}}, {}, None, None)  # type: ignore[typeddict-item]
        with pytest.raises(ValueError) as failed:  # msgpack's decoding error, as LangGraph's serializer raises it
            MessageLog(serde).read(connection, found)
        assert failed.value is not None  # the error (and its traceback) still held here
        busy, _, _ = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        assert busy == 0
