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


def is_summary_request(body: Any) -> bool:
    return not body.get("tools") and "running notes" in body["messages"][0]["content"]


def marker_anchor(panel: Panel) -> str | None:
    """The message id of the user message right after the marker."""
    return panel.js("const next = document.querySelector('#messages > .summary-marker')?.nextElementSibling;"
                    "return next && next.classList.contains('message-user') ? next.dataset.messageId || '' : null")


def send_live(panel: Panel, text: str) -> None:
    """Send ``text`` from the panel's message box (put there at once: typing thousands of words is slow)."""
    before = len(panel.css(".message-assistant"))
    panel.js("document.getElementById('prompt').value = arguments[0]", text)
    panel.by_id("send-button").click()
    wait_for(panel.driver, lambda d: len(panel.css(".message-assistant")) > before, "the message was not sent")
    panel.wait_turn_status("completed", timeout=60)


def test_the_marker_is_placed_by_the_message_id_not_by_counting_turns(signed_in: Panel, stub: OpenAIStub,
                                                                     project: dict[str, Any], user_rest: Rest) -> None:
    """The page shows fewer turns than the session has (one came from another tab, or GNS3 3.1's
    web UI): counting user turns puts the marker a turn late; the report's message id does not."""
    pid = project["project_id"]
    stub.enqueue("Hello.")
    session_id = chat(user_rest, pid, "hi, PC1 cannot ping PC2")["session_id"]
    panel = signed_in
    panel.open(f"?project_id={pid}&session_id={session_id}")
    wait_for(panel.driver, lambda d: len(panel.css(".message-user")) == 1, "the conversation did not open")
    report = context(user_rest, pid, session_id)
    stub.enqueue("PC1 has no address.")  # from another client: not on this page
    chat(user_rest, pid, f"check PC1: {words(int(report['message_budget'] * 0.3))}", session_id)
    report = context(user_rest, pid, session_id)
    room = report["message_budget"] - (report["total_tokens"] - report["tools_tokens"])
    stub.enqueue_for(is_summary_request, SUMMARY)
    stub.enqueue("PC2 is fine.")
    send_live(panel, f"check PC2: {words(room + report['message_budget'] // 10)}")  # the cut
    def stored(driver: Any) -> dict[str, Any] | None:
        report = context(user_rest, pid, session_id)
        return report if report["summary_text"] and not report["summary_pending"] else None

    preview = wait_for(panel.driver, stored, "no summary stored")
    history = user_rest.ok("GET", f"{COPILOT}/projects/{pid}/chat/sessions/{session_id}/history")
    messages = history["messages"] if isinstance(history, dict) else history
    users = [m for m in messages if m["role"] == "user"]
    until = preview["summary_until_id"]
    covered = next(i for i, m in enumerate(users) if m["id"] == until)
    assert preview["summarized_turns"] == covered == 2  # the turn from the other client included
    stub.enqueue("You are welcome.")
    send_live(panel, "thanks")  # the summary lands on this question; its report places the marker
    marker = wait_for(panel.driver, lambda d: panel.css(".summary-marker"), "no summary marker")[0]
    assert marker.find_element(By.CSS_SELECTOR, "summary").text.startswith("Earlier conversation summarised: 2 turns")
    order = panel.js("return [...document.querySelectorAll('#messages > .message-user, #messages > .summary-marker')]"
                     ".map((n) => n.classList.contains('summary-marker') ? 'marker' : n.innerText.slice(0, 9))")
    assert order == ["hi, PC1 c", "marker", "check PC2", "thanks"]
    assert marker_anchor(panel) == until  # the message sent from this page, known by its id


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
    assert marker_anchor(panel) == context(user_rest, pid, session_id)["summary_until_id"]
    text = marker.find_element(By.CSS_SELECTOR, ".summary-text")
    assert not visible(text)  # collapsed until asked
    head.click()
    wait_for(panel.driver, lambda d: visible(text), "the summary did not expand")
    assert text.text == SUMMARY
