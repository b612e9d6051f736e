"""The panel marks where earlier conversation was summarised (real Chromium, real server, stub LLM).

The conversation is made through REST (big messages typed in a browser would be slow);
the panel then opens it, and its context preview places the marker.
"""

from __future__ import annotations

from typing import Any

import pytest
from selenium.webdriver.common.by import By

# The browser, the server user, the stub and the panel fixtures live with the panel tests.
from test_panel_browser import (  # noqa: F401
    COPILOT,
    admin_rest,
    driver,
    panel,
    project,
    signed_in,
    stub,
    user_rest,
    with_llm,
)

from tests.browser.chromium import visible, wait_for
from tests.browser.panel import Panel
from tests.browser.rest import Rest
from tests.support.openai_stub import OpenAIStub

pytestmark = pytest.mark.integration

SUMMARY = "- PC1: no IP address\n- open: PC2 not checked yet"


def words(n: int) -> str:
    return " ".join(["the"] * n)  # 1 token and ~4 characters a word: the stub's usage estimate stays near ours


def chat(rest: Rest, project_id: str, message: str, session_id: str | None = None) -> dict[str, Any]:
    body = {"message": message, "stream": False, **({"session_id": session_id} if session_id else {})}
    return rest.ok("POST", f"{COPILOT}/projects/{project_id}/chat/stream", body)


def context(rest: Rest, project_id: str, session_id: str) -> dict[str, Any]:
    return rest.ok("GET", f"{COPILOT}/projects/{project_id}/chat/sessions/{session_id}/context")


def test_the_summary_marker_sits_where_the_conversation_was_cut(signed_in: Panel, stub: OpenAIStub,
                                                               project: dict[str, Any], user_rest: Rest) -> None:
    pid = project["project_id"]
    stub.enqueue("Hello.")
    session_id = chat(user_rest, pid, "hi, PC1 cannot ping PC2")["session_id"]
    report = context(user_rest, pid, session_id)
    stub.enqueue("PC1 has no address.")
    chat(user_rest, pid, f"check PC1: {words(int(report['message_budget'] * 0.3))}", session_id)
    report = context(user_rest, pid, session_id)
    room = report["message_budget"] - (report["total_tokens"] - report["tools_tokens"])
    # The summary call runs beside the chat call (their order of arrival is not fixed): its own script.
    stub.enqueue_for(lambda body: not body.get("tools") and "running notes" in body["messages"][0]["content"], SUMMARY)
    stub.enqueue("PC2 is fine.")
    result = chat(user_rest, pid, f"check PC2: {words(room + report['message_budget'] // 10)}", session_id)
    assert result["content"] == "PC2 is fine."
    panel = signed_in
    # Written in the background, stored when it comes back: the session's preview says when.
    turns = wait_for(panel.driver, lambda d: context(user_rest, pid, session_id)["summarized_turns"],
                     "no summary stored")
    assert turns >= 1

    panel.open(f"?project_id={pid}&session_id={session_id}")
    marker = wait_for(panel.driver, lambda d: panel.css(".summary-marker"), "no summary marker")[0]
    head = marker.find_element(By.CSS_SELECTOR, "summary")
    assert head.text.startswith(f"Earlier conversation summarised: {turns} turn")
    # Before the first user message still sent to the model, after the summarised ones.
    order = panel.js("return [...document.querySelectorAll('#messages > .message-user, #messages > .summary-marker')]"
                     ".map((n) => n.classList.contains('summary-marker') ? 'marker' : 'user')")
    assert order == ["user"] * turns + ["marker"] + ["user"] * (3 - turns)
    text = marker.find_element(By.CSS_SELECTOR, ".summary-text")
    assert not visible(text)  # collapsed until asked
    head.click()
    wait_for(panel.driver, lambda d: visible(text), "the summary did not expand")
    assert text.text == SUMMARY
