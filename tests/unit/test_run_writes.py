"""A run's own database work: its start and its end are one job each on the database's thread,
and a chat reads its session's row once (each job is a hop to that thread and a transaction)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from gns3server.agent.gns3_copilot.service.errors import SessionNotFoundError
from gns3server.agent.gns3_copilot.service.session_store import InFlight
from tests.support.scripted_model import ScriptedChatModel
from tests.support.streams import collect
from tests.unit.test_service import ALICE, BOB, LLM, make_service, stored_rows


@pytest.fixture
def model() -> ScriptedChatModel:
    return ScriptedChatModel()


def count_jobs(storage: Any) -> list[str]:
    """Every job submitted to the storage's database from now on (by the caller's name)."""
    jobs: list[str] = []
    database = storage.database
    real = database.call

    async def call(work: Any) -> Any:
        jobs.append(getattr(work, "__qualname__", repr(work)))
        return await real(work)

    database.call = call
    return jobs


async def test_a_runs_closing_writes_are_one_transaction(storage, model, tmp_path):
    service = make_service(storage, model)
    model.enqueue("one")
    record, stream = await service.chat(ALICE, "p1", "first", llm_config=LLM)
    await collect(stream)
    stepwise: list[str] = []
    for name in ("set_message_count", "record_run"):
        setattr(storage.sessions, name, lambda *args, name=name: stepwise.append(name))

    async def prune(thread_id: str | None = None) -> int:
        stepwise.append("prune")
        return 0

    storage.prune = prune
    finished = storage.finish_run
    finishes: list[str] = []

    async def finish_run(*args: Any, **kwargs: Any) -> Any:
        finishes.append(args[0])
        return await finished(*args, **kwargs)

    storage.finish_run = finish_run
    model.enqueue("two")
    _, stream = await service.chat(ALICE, "p1", "second", session_id=record.session_id, llm_config=LLM)
    assert (await collect(stream))[-1]["status"] == "completed"
    assert finishes == [record.session_id] and stepwise == []  # no write of its own after the transaction
    stored = await service.session(ALICE, record.session_id)
    assert (stored.runs, stored.message_count) == (2, 4)
    assert await storage.sessions.inflight(record.session_id) is None
    assert stored_rows(tmp_path / "data", record.session_id) == (1, 0)  # pruned in that transaction


async def test_closing_writes_are_one_job_and_a_failing_prune_undoes_only_itself(storage, model, caplog):
    service = make_service(storage, model)
    model.enqueue("one")
    record, stream = await service.chat(ALICE, "p1", "first", llm_config=LLM)
    await collect(stream)
    session_id = record.session_id
    await storage.sessions.set_inflight(session_id, InFlight("q", "partial"))
    real_prune = storage._prune

    def failing_prune(connection: Any, thread_id: str | None) -> int:
        real_prune(connection, thread_id)  # its deletes are rolled back with it
        raise RuntimeError("disk I/O error")

    storage._prune = failing_prune
    jobs = count_jobs(storage)
    with caplog.at_level(logging.ERROR):
        assert await storage.finish_run(session_id, {"total_tokens": 7}, clear_inflight=True) is True
    assert len(jobs) == 1
    assert f"Could not prune the old checkpoints of session {session_id}" in caplog.text
    stored = await service.session(ALICE, session_id)
    assert (stored.runs, stored.total_tokens, stored.message_count) == (2, 7, 2)
    assert await storage.sessions.inflight(session_id) is None


async def test_a_message_count_not_known_without_the_state_is_counted_by_the_service(storage, model):
    service = make_service(storage, model)
    model.enqueue("one")
    record, stream = await service.chat(ALICE, "p1", "first", llm_config=LLM)
    await collect(stream)
    storage.checkpointer.message_count_here = lambda thread_id: None
    storage.checkpointer.message_count = None  # not known by the checkpointer either: the state is read
    await storage.sessions.set_message_count(record.session_id, 0)
    assert await storage.finish_run(record.session_id, {}, clear_inflight=False) is False
    assert (await service.session(ALICE, record.session_id)).message_count == 0
    model.enqueue("two")
    _, stream = await service.chat(ALICE, "p1", "second", session_id=record.session_id, llm_config=LLM)
    assert (await collect(stream))[-1]["status"] == "completed"
    assert (await service.session(ALICE, record.session_id)).message_count == 4


async def test_a_runs_start_reads_and_records_its_turn_in_one_job_unless_a_killed_run_left_one(storage):
    record = await storage.sessions.create("u-alice", "p1", "t")
    jobs = count_jobs(storage)
    assert await storage.sessions.begin_inflight(record.session_id, InFlight("new", "")) is None
    assert len(jobs) == 1
    assert await storage.sessions.inflight(record.session_id) == InFlight("new", "")
    await storage.sessions.set_inflight(record.session_id, InFlight("killed", "half an ans"))
    left = await storage.sessions.begin_inflight(record.session_id, InFlight("next", ""))
    assert left == InFlight("killed", "half an ans")  # returned, and still there until it is folded in
    assert await storage.sessions.inflight(record.session_id) == InFlight("killed", "half an ans")


async def test_what_a_killed_run_left_is_folded_into_the_next_run(storage, model):
    service = make_service(storage, model)
    model.enqueue("one")
    record, stream = await service.chat(ALICE, "p1", "first", llm_config=LLM)
    await collect(stream)
    await storage.sessions.set_inflight(record.session_id, InFlight("killed question", "half an answer"))
    model.enqueue("two")
    _, stream = await service.chat(ALICE, "p1", "second", session_id=record.session_id, llm_config=LLM)
    assert (await collect(stream))[-1]["status"] == "completed"
    assert [m.content for m in model.calls[-1][1:]] == ["first", "one", "killed question", "half an answer", "second"]
    assert await storage.sessions.inflight(record.session_id) is None


async def test_a_chat_in_an_existing_session_reads_its_row_once(storage, model):
    service = make_service(storage, model)
    model.enqueue("one")
    record, stream = await service.chat(ALICE, "p1", "first", llm_config=LLM)
    await collect(stream)
    reads: list[str] = []
    real = storage.sessions.get

    async def get(session_id: str) -> Any:
        reads.append(session_id)
        return await real(session_id)

    storage.sessions.get = get
    assert (await service.session_or_new(ALICE, record.session_id)) == await real(record.session_id)
    assert reads == [record.session_id]
    reads.clear()
    model.enqueue("two")
    _, stream = await service.chat(ALICE, "p1", "second", session_id=record.session_id, llm_config=LLM)
    await collect(stream)
    assert reads == [record.session_id]
    # The answers are the same: a new client-chosen id is None, someone else's session or a bad id a 404.
    assert await service.session_or_new(ALICE, "8b1c2d3e-4f5a-4b6c-8d7e-9f0a1b2c3d4e") is None
    for who, session_id in ((BOB, record.session_id), (ALICE, "not-a-uuid")):
        with pytest.raises(SessionNotFoundError):
            await service.session_or_new(who, session_id)
