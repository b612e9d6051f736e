"""The running summary end to end: the real gns3-server, its SQLite checkpoints and the
OpenAI-compatible stub reached by the server's own provider client.

Message sizes are derived from the session's own budget (``GET .../context``), so the
turn at which the history window moves is known before the stub's replies are scripted.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
# The API client and its fixtures live with the API tests; reused here as they are.
from test_copilot_api import (  # noqa: F401
    API, admin, answer, http, kinds, project, sessions_path, stub,
)
from tests.support.openai_stub import OpenAIStub, fault

from gns3server.agent.gns3_copilot.agent.context.summary import SUMMARY_HEADING

pytestmark = pytest.mark.integration


def words(n: int) -> str:
    # One token per word in cl100k_base (the stub model's encoding), and ~4 characters a
    # token as the stub's usage estimate assumes: the usage calibration stays near 1.
    return " ".join(["the"] * n)


def is_summary_request(body: dict[str, Any]) -> bool:
    return not body.get("tools") and "running notes" in body["messages"][0]["content"]


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


async def test_a_cut_is_summarised_by_the_same_model_and_kept_with_the_session(admin, stub, project):
    session_id, big = await fill(admin, stub, project)
    asked = len(stub.requests)
    stub.enqueue("- PC1: no IP address\n- open: PC2 not checked yet", "PC2 is fine.")
    async with admin.stream(project, message=f"check PC2: {words(big)}", session_id=session_id) as sse:
        events = await sse.rest()
    assert answer(events) == "PC2 is fine." and events[-1]["status"] == "completed"

    summary_call, main_call = stub.requests[asked:]
    assert is_summary_request(summary_call)
    assert "PC1 cannot ping PC2" in summary_call["messages"][1]["content"]  # the dropped turns
    system = main_call["messages"][0]["content"]
    assert SUMMARY_HEADING in system and system.endswith("- PC1: no IP address\n- open: PC2 not checked yet")
    assert main_call["messages"][-1]["content"].startswith("check PC2:")
    report = next(e for e in events if e["type"] == "context")["report"]
    assert report["window_moved"] and report["summary_tokens"] > 0 and report["summarized_turns"] >= 1
    assert report["summary_text"] == "- PC1: no IP address\n- open: PC2 not checked yet"

    # The history keeps every message; the summary is stored with the session (read back from SQLite).
    status, history = await admin.get(sessions_path(project, session_id, "/history"))
    assert [m["content"] for m in history["messages"]][0] == "hi, PC1 cannot ping PC2"
    status, preview = await admin.get(sessions_path(project, session_id, "/context"))
    assert status == 200 and preview["summary_tokens"] == report["summary_tokens"]
    assert preview["summarized_turns"] == report["summarized_turns"]

    # The next question fits: no new summary, and the request starts like the previous one.
    stub.enqueue("Done.")
    await admin.chat(project, "thanks", session_id=session_id)
    last = stub.requests[-1]
    assert not is_summary_request(last) and last["messages"][: len(main_call["messages"])] == main_call["messages"]


async def test_a_failing_summary_never_loses_the_question(admin, stub, project):
    session_id, big = await fill(admin, stub, project)
    asked = len(stub.requests)
    stub.enqueue(fault(500, "summary backend down"), "Answered anyway.")
    async with admin.stream(project, message=f"check PC2: {words(big)}", session_id=session_id) as sse:
        events = await sse.rest()
    assert answer(events) == "Answered anyway." and events[-1]["status"] == "completed"
    assert "error" not in kinds(events)
    failed, main_call = stub.requests[asked:]
    assert is_summary_request(failed)
    assert SUMMARY_HEADING not in main_call["messages"][0]["content"]
    assert main_call["messages"][-1]["content"].startswith("check PC2:")


async def test_summary_switched_off(admin, stub, project):
    session_id, big = await fill(admin, stub, project, context_summary=False)
    asked = len(stub.requests)
    stub.enqueue("No summary.")
    async with admin.stream(project, message=f"check PC2: {words(big)}", session_id=session_id) as sse:
        events = await sse.rest()
    assert answer(events) == "No summary." and len(stub.requests) == asked + 1
    report = next(e for e in events if e["type"] == "context")["report"]
    assert report["window_moved"] and report["summary_tokens"] == 0


async def test_tokenizers_load_when_the_server_starts(gns3_server):
    """Off the event loop, at start-up: the line is in the log before any chat (or soon after start)."""
    deadline = asyncio.get_running_loop().time() + 60
    while "Tokenizers cl100k_base, o200k_base loaded in" not in gns3_server.log_file.read_text(errors="replace"):
        assert asyncio.get_running_loop().time() < deadline, "tokenizers not loaded within 60 s of start"
        await asyncio.sleep(0.2)  # polling the log file with a deadline: it has no event to wait on
