"""The running summary end to end: the real gns3-server, its SQLite checkpoints and the
OpenAI-compatible stub reached by the server's own provider client.

Message sizes are derived from the session's own budget (``GET .../context``), so the
turn at which the history window moves is known before the stub's replies are scripted.
Summary calls are answered from their own script (``enqueue_for``): they run beside
the chat calls, so their order of arrival is not fixed.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from gns3_process import GNS3ServerProcess

# The API client and its fixtures live with the API tests; reused here as they are.
from test_copilot_api import (  # noqa: F401
    API,
    SECRET,
    admin,
    answer,
    http,
    kinds,
    project,
    sessions_path,
    stub,
)

from gns3server.agent.gns3_copilot.agent.context.summary import SUMMARY_HEADING
from tests.support.openai_stub import OpenAIStub, fault, reply

pytestmark = pytest.mark.integration

NOTES = "- PC1: no IP address\n- open: PC2 not checked yet"
STATE_DEADLINE = 60.0  # generous: the CI machine is busy


def words(n: int) -> str:
    # One token per word in cl100k_base (the stub model's encoding), and ~4 characters a
    # token as the stub's usage estimate assumes: the usage calibration stays near 1.
    return " ".join(["the"] * n)


def is_summary_request(body: Any) -> bool:
    return isinstance(body, dict) and not body.get("tools") and "running notes" in body["messages"][0]["content"]


def chat_requests(stub: OpenAIStub) -> list[dict[str, Any]]:
    return [r for r in stub.requests if not is_summary_request(r)]


def summary_requests(stub: OpenAIStub) -> list[dict[str, Any]]:
    return [r for r in stub.requests if is_summary_request(r)]


async def fill(admin: API, stub: OpenAIStub, project: str, **llm: Any) -> tuple[str, int]:
    """A session with two turns; returns it and the size of a question that makes the window move.

    Sizes come from the preview of the next call (``GET .../context``), which uses the
    session's stored usage calibration as the next call will.
    """
    await admin.use_llm(stub, **llm)
    stub.enqueue("Hello.")
    session_id = (await admin.chat(project, "hi, PC1 cannot ping PC2"))["session_id"]
    status, report = await admin.get(sessions_path(project, session_id, "/context"))
    assert status == 200, report
    stub.enqueue("PC1 has no address.")
    await admin.chat(project, f"check PC1: {words(int(report['message_budget'] * 0.3))}", session_id=session_id)
    status, report = await admin.get(sessions_path(project, session_id, "/context"))
    assert report["window_moved"] is False and report["messages_dropped"] == 0, report
    room = report["message_budget"] - (report["total_tokens"] - report["tools_tokens"])
    return session_id, room + report["message_budget"] // 10


async def stored_summary(admin: API, project: str, session_id: str) -> dict[str, Any]:
    """The session's context preview once it carries a summary (written in the background:
    no event says when it is stored, so the preview is polled, with a deadline)."""
    deadline = asyncio.get_running_loop().time() + STATE_DEADLINE
    while True:
        status, preview = await admin.get(sessions_path(project, session_id, "/context"))
        assert status == 200, preview
        if preview["summary_text"]:  # stored (it goes out with the next question)
            return preview
        assert asyncio.get_running_loop().time() < deadline, f"no summary stored within {STATE_DEADLINE} s"
        await asyncio.sleep(0.1)


async def test_a_held_summary_does_not_delay_the_question_and_lands_in_the_next_request(admin, stub, project):
    session_id, big = await fill(admin, stub, project)
    asked = len(stub.requests)
    stub.enqueue_for(is_summary_request, reply(NOTES, hold_after=0))  # held until released
    stub.enqueue("PC2 is fine.")
    # The whole answer streams, and only then (the stub is a local server: one slot) the summary
    # call goes out, and is held: the question never waited for it.
    async with admin.stream(project, message=f"check PC2: {words(big)}", session_id=session_id) as sse:
        events = await sse.rest()
    assert answer(events) == "PC2 is fine." and events[-1]["status"] == "completed"
    await stub.wait_for_requests(asked + 2, STATE_DEADLINE)
    assert is_summary_request(stub.requests[asked + 1])  # after the question's call
    (summary_call,) = summary_requests(stub)
    assert "PC1 cannot ping PC2" in summary_call["messages"][1]["content"]  # the dropped turns
    main_call = chat_requests(stub)[-1]
    assert main_call["messages"][-1]["content"].startswith("check PC2:")
    assert all(SUMMARY_HEADING not in str(m["content"]) for m in main_call["messages"])
    report = next(e for e in events if e["type"] == "context")["report"]
    assert report["window_moved"] and report["summary_tokens"] == 0

    stub.release()  # the summary comes back after the run: stored with the session
    preview = await stored_summary(admin, project, session_id)
    assert preview["summary_text"] == NOTES and preview["summarized_turns"] >= 1
    _status, history = await admin.get(sessions_path(project, session_id, "/history"))
    assert next(m["content"] for m in history["messages"]) == "hi, PC1 cannot ping PC2"  # history keeps all

    # The next request carries it on its new question; all the previous request sent (the system
    # message included) is repeated unchanged, so the summary's landing costs the cache nothing.
    stub.enqueue("Done.")
    await admin.chat(project, "thanks", session_id=session_id)
    last = chat_requests(stub)[-1]
    assert last["messages"][: len(main_call["messages"])] == main_call["messages"]
    question = last["messages"][-1]["content"]
    assert question.startswith(SUMMARY_HEADING) and NOTES in question and question.endswith("\n\nthanks")
    assert len(summary_requests(stub)) == 1


async def test_a_failing_summary_never_loses_the_question(admin, stub, project):
    session_id, big = await fill(admin, stub, project)
    asked = len(stub.requests)
    stub.enqueue_for(is_summary_request, fault(500, "summary backend down"))
    stub.enqueue("Answered anyway.")
    async with admin.stream(project, message=f"check PC2: {words(big)}", session_id=session_id) as sse:
        events = await sse.rest()
    assert answer(events) == "Answered anyway." and events[-1]["status"] == "completed"
    assert "error" not in kinds(events)
    await stub.wait_for_requests(asked + 2, STATE_DEADLINE)
    assert len(summary_requests(stub)) == 1
    main_call = chat_requests(stub)[-1]
    assert all(SUMMARY_HEADING not in str(m["content"]) for m in main_call["messages"])
    assert main_call["messages"][-1]["content"].startswith("check PC2:")


async def test_abort_while_the_summary_is_written_leaves_a_consistent_session(admin, stub, project):
    session_id, big = await fill(admin, stub, project)
    stub.enqueue_for(is_summary_request, reply(NOTES, hold_after=0))  # held until released
    stub.enqueue(reply("Half an answer", hold_after=1, chunk_chars=5))  # held mid-answer
    async with admin.stream(project, message=f"check PC2: {words(big)}", session_id=session_id) as sse:
        await sse.until("content")
        status, body = await admin.post(sessions_path(project, session_id, "/abort"))
        assert status == 200, body
        events = await sse.rest()
    assert kinds(events)[-2:] == ["abort", "done"] and events[-1]["status"] == "aborted"
    status, history = await admin.get(sessions_path(project, session_id, "/history"))
    roles = [(m["role"], m["content"][:10]) for m in history["messages"]]
    assert roles[-2:] == [("user", "check PC2:"), ("assistant", "Half ")]

    stub.release(2)  # both holds (whichever came first): the summary, still out after the abort, comes back
    preview = await stored_summary(admin, project, session_id)
    assert preview["summary_text"] == NOTES
    stub.enqueue("Carrying on.")
    result = await admin.chat(project, "go on", session_id=session_id)
    assert result["content"] == "Carrying on." and result["status"] == "completed"
    last = chat_requests(stub)[-1]
    users = [m["content"] for m in last["messages"] if m["role"] == "user"]
    # The aborted run saved no window, so this request cuts again: the summary opens the first
    # user message sent (everything after the system message is sent anew at a cut anyway).
    assert users[0].startswith(SUMMARY_HEADING) and NOTES in users[0] and users[0].endswith(words(big))
    assert users[-1] == "go on" and sum(SUMMARY_HEADING in u for u in users) == 1
    status, history = await admin.get(sessions_path(project, session_id, "/history"))
    assert [(m["role"], m["content"][:10]) for m in history["messages"]][-4:] == [
        ("user", "check PC2:"), ("assistant", "Half "), ("user", "go on"), ("assistant", "Carrying o"),
    ]


async def test_a_summary_call_out_to_the_same_local_server_gives_way_to_a_question(admin, stub, project, gns3_server):
    """A one-slot server (llama.cpp) would queue the question behind the summary call, for up to the
    summary's 30 s: the call gives way (the stub sees its client leave), the question is answered at
    once, and the summary is sent again once that run has ended."""
    session_id, big = await fill(admin, stub, project)
    stub.enqueue_for(is_summary_request, reply(NOTES, hold_after=0), NOTES)  # the first held for good
    stub.enqueue("PC2 is fine.")
    asked = len(stub.requests)
    assert (await admin.chat(project, f"check PC2: {words(big)}", session_id=session_id))["content"] == "PC2 is fine."
    await stub.wait_for_requests(asked + 2, STATE_DEADLINE)  # the summary call went out after the run
    assert len(summary_requests(stub)) == 1 and stub.disconnects == 0
    stub.enqueue("Thanks.")
    result = await admin.chat(project, "thanks", session_id=session_id)
    assert result["content"] == "Thanks." and result["status"] == "completed"
    await stub.wait_for_disconnects(1, STATE_DEADLINE)  # the summary call, cancelled
    log = gns3_server.log_file.read_text(errors="replace")
    assert f"Summary call of session {session_id} gives way: a question to the same model server goes first" in log
    preview = await stored_summary(admin, project, session_id)  # sent again after "thanks", and stored
    assert preview["summary_text"] == NOTES and len(summary_requests(stub)) == 2
    first, again = summary_requests(stub)
    assert again["messages"] == first["messages"]  # the same summary, not a new one


async def test_with_a_cloud_service_the_summary_goes_out_beside_the_question(admin, stub, project):
    """``local_server: false`` (a service with slots for everyone; the stub's loopback address would
    say local): the summary call is sent while the question's answer is still held, and lands."""
    session_id, big = await fill(admin, stub, project, local_server=False)
    asked = len(stub.requests)
    stub.enqueue_for(is_summary_request, NOTES)
    stub.enqueue(reply("PC2 is fine.", hold_after=0))  # held until the summary call has come
    async with admin.stream(project, message=f"check PC2: {words(big)}", session_id=session_id) as sse:
        await stub.wait_for_requests(asked + 2, STATE_DEADLINE)  # both out while the run goes on
        assert len(summary_requests(stub)) == 1
        stub.release()
        events = await sse.rest()
    assert answer(events) == "PC2 is fine." and events[-1]["status"] == "completed"
    preview = await stored_summary(admin, project, session_id)
    assert preview["summary_text"] == NOTES


async def summaries_idle(admin: API, project: str, session_id: str) -> dict[str, Any]:
    """The session's context preview once no summary of it is being written: a summary started by
    a run is pending from that run on, and is sent to a local server only once the run has ended."""
    deadline = asyncio.get_running_loop().time() + STATE_DEADLINE
    while True:
        status, preview = await admin.get(sessions_path(project, session_id, "/context"))
        assert status == 200, preview
        if preview["summary_pending"] is False:
            return preview
        assert asyncio.get_running_loop().time() < deadline, f"a summary still pending after {STATE_DEADLINE} s"
        await asyncio.sleep(0.1)


async def test_summary_switched_off(admin, stub, project):
    session_id, big = await fill(admin, stub, project, context_summary=False)
    asked = len(stub.requests)
    stub.enqueue_for(is_summary_request, NOTES)  # what a wrongly started summary would get
    stub.enqueue("No summary.")
    async with admin.stream(project, message=f"check PC2: {words(big)}", session_id=session_id) as sse:
        events = await sse.rest()
    assert answer(events) == "No summary."
    report = next(e for e in events if e["type"] == "context")["report"]
    assert report["window_moved"] and report["summary_tokens"] == 0
    preview = await summaries_idle(admin, project, session_id)
    assert len(stub.requests) == asked + 1 and summary_requests(stub) == []
    assert preview["summary_text"] is None


async def test_a_summary_is_pending_until_it_comes_back(admin, stub, project):
    """What test_summary_switched_off waits on: a summary started by a run is pending until it is over."""
    session_id, big = await fill(admin, stub, project)
    stub.enqueue_for(is_summary_request, reply(NOTES, hold_after=0))  # held until released
    stub.enqueue("PC2 is fine.")
    assert (await admin.chat(project, f"check PC2: {words(big)}", session_id=session_id))["content"] == "PC2 is fine."
    status, preview = await admin.get(sessions_path(project, session_id, "/context"))
    assert status == 200 and preview["summary_pending"] is True
    stub.release()
    preview = await summaries_idle(admin, project, session_id)
    assert len(summary_requests(stub)) == 1 and preview["summary_text"] == NOTES


async def test_the_summary_survives_a_server_restart(tmp_path: Path, http):
    """Chat until a summary is stored, stop the server, start it on the same home: the summary
    is in the session (through the API) and in the next request the LLM receives."""
    async with OpenAIStub(api_key=SECRET) as llm:
        root = tmp_path / "server"
        first = await asyncio.to_thread(GNS3ServerProcess.start, root)
        try:
            admin = API(http, first.base_url, await first.token(), (SECRET,))
            status, body = await admin.post("/v3/projects", {"name": "summary-restart"})
            assert status == 201, body
            project = body["project_id"]
            session_id, big = await fill(admin, llm, project)
            llm.enqueue_for(is_summary_request, NOTES)
            llm.enqueue("PC2 is fine.")
            assert (await admin.chat(project, f"check PC2: {words(big)}", session_id=session_id))["content"] == "PC2 is fine."
            before = await stored_summary(admin, project, session_id)
            assert before["summary_text"] == NOTES
        finally:
            await asyncio.to_thread(first.stop)
        assert "Copilot stopped" in first.log_file.read_text(errors="replace")

        second = await asyncio.to_thread(GNS3ServerProcess.start, root)
        try:
            admin = API(http, second.base_url, await second.token(), (SECRET,))
            status, preview = await admin.get(sessions_path(project, session_id, "/context"))
            assert status == 200, preview
            assert preview["summary_text"] == NOTES and preview["summarized_turns"] == before["summarized_turns"] > 0
            assert preview["window_start"] == before["window_start"] > 0
            llm.enqueue("Still fine.")
            assert (await admin.chat(project, "and now?", session_id=session_id))["content"] == "Still fine."
            sent = chat_requests(llm)[-1]["messages"]
            question = sent[-1]["content"]
            assert question.startswith(SUMMARY_HEADING) and NOTES in question and question.endswith("and now?")
            assert len(summary_requests(llm)) == 1
        finally:
            await asyncio.to_thread(second.stop)


async def test_tokenizers_load_when_the_server_starts(gns3_server):
    """Off the event loop, at start-up: the line is in the log before any chat (or soon after start),
    and no encoding was built on the event loop's thread (get_encoding logs a WARNING when one is)."""
    deadline = asyncio.get_running_loop().time() + 60
    while "Tokenizers cl100k_base, o200k_base loaded in" not in (log := gns3_server.log_file.read_text(errors="replace")):
        assert asyncio.get_running_loop().time() < deadline, "tokenizers not loaded within 60 s of start"
        await asyncio.sleep(0.2)  # polling the log file with a deadline: it has no event to wait on
    assert "is being loaded on the event loop" not in log
