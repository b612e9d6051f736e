"""The copilot panel in a real headless Chromium, against the real server and the stub LLM.

The server is the session's gns3-server started through ``gns3server-copilot``
(``conftest.gns3_server``); the LLM is the OpenAI-compatible stub on loopback,
reached by the server's own provider client. The browser is Debian's Chromium
driven by Selenium (``tests/browser``), one per module, signed in as a GNS3 user
of its own. Everything is observed in the DOM with explicit waits; stub replies
are held mid-stream (and released) to see streaming and to stop runs.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select
from vpcs_process import VPCSProcess

from tests.browser.chromium import chromium, visible, wait_for
from tests.browser.panel import Panel
from tests.browser.rest import Rest
from tests.support.openai_stub import OpenAIStub, reply, server_error, tool_call

pytestmark = pytest.mark.integration

KEY = "sk-panel-secret-5a8e1c0d9b7f4e21"
USER = "panel-tester"
PASSWORD = "panel-tester-password-1"
# docs/panel.png is refreshed on request only (PANEL_SCREENSHOT=docs/panel.png): a test run
# must not change the work tree.
SCREENSHOT_TO = os.environ.get("PANEL_SCREENSHOT")
COPILOT = "/v3/copilot"

RICH_ANSWER = (
    "## PC1 and PC2\n\n"
    "Both PCs are **VPCS** nodes, linked directly:\n\n"
    "| node | port | peer |\n|---|---|---|\n| PC1 | e0 | PC2 e0 |\n| PC2 | e0 | PC1 e0 |\n\n"
    "- Start them with the *Start* tool\n- Then run `ping 10.0.0.2` on PC1\n\n"
    "```\nPC1> ip 10.0.0.1/24\nPC2> ip 10.0.0.2/24\n```\n"
)

MALICIOUS_ANSWER = (
    "Here you go <script>window.__pwned = 'script'</script>\n\n"
    "<img src=\"x\" onerror=\"window.__pwned = 'img'\">\n\n"
    "[click me](javascript:window.__pwned='md-link')\n\n"
    "<a href=\"javascript:window.__pwned='a'\" id=\"raw-link\">raw link</a>\n\n"
    "<iframe src=\"javascript:window.__pwned='iframe'\"></iframe>\n\n"
    "<svg onload=\"window.__pwned='svg'\"><circle r=\"4\"/></svg>\n\n"
    "<details open ontoggle=\"window.__pwned='details'\"><summary>x</summary>y</details>\n\n"
    "![pic](x\" onerror=\"window.__pwned='md-img')\n\n"
    "[safe docs](https://docs.gns3.com/) and **still bold**\n"
)


# ------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def admin_rest(gns3_server: Any) -> Rest:
    return Rest(gns3_server.base_url).login(gns3_server.username, gns3_server.password)


@pytest.fixture(scope="module")
def user_rest(gns3_server: Any, admin_rest: Rest) -> Iterator[Rest]:
    """A GNS3 user of the panel tests' own, with GNS3's "User" role on every project."""
    user_id = admin_rest.add_user(USER, PASSWORD)
    yield Rest(gns3_server.base_url).login(USER, PASSWORD)
    admin_rest.call("DELETE", f"/v3/access/users/{user_id}")


@pytest.fixture(scope="module")
def project(admin_rest: Rest, user_rest: Rest) -> Iterator[dict[str, Any]]:
    """A project with two linked VPCS PCs (created, never started)."""
    # auto_close off: GNS3 closes a project 5 s after the web UI's tab that opened it left.
    created = admin_rest.ok("POST", "/v3/projects", {"name": f"Panel lab {uuid.uuid4().hex[:6]}", "auto_close": False})
    pid = created["project_id"]
    nodes = [admin_rest.ok("POST", f"/v3/projects/{pid}/nodes",
                           {"name": name, "node_type": "vpcs", "compute_id": "local", "x": x, "y": 0})
             for name, x in (("PC1", -100), ("PC2", 100))]
    admin_rest.ok("POST", f"/v3/projects/{pid}/links", {"nodes": [
        {"node_id": n["node_id"], "adapter_number": 0, "port_number": 0} for n in nodes]})
    yield created
    admin_rest.call("DELETE", f"/v3/projects/{pid}")


@pytest.fixture(scope="module")
def stub() -> Iterator[OpenAIStub]:
    with OpenAIStub.in_thread(api_key=KEY) as server:
        yield server


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    with chromium(tmp_path_factory.mktemp("chromium-profile")) as browser:
        yield browser


@pytest.fixture
def panel(driver: WebDriver, gns3_server: Any, stub: OpenAIStub) -> Iterator[Panel]:
    """The panel at 1280x800; after the test, no JavaScript error and no unused stub reply."""
    page = Panel(driver, gns3_server.base_url)
    page.set_viewport(1280, 800)
    driver.get_log("browser")  # start from an empty console
    yield page
    errors = [e["message"] for e in driver.get_log("browser")
              if e.get("level") == "SEVERE" and e.get("source") == "javascript"]
    assert not errors, f"JavaScript errors in the panel: {errors}"
    # Every held reply is released once (stopped runs' too), so the next test's holds count from zero.
    outstanding = int(stub._holds - stub._released)
    if outstanding > 0:
        stub.release(outstanding)
    assert stub.pending == 0, "the test left scripted LLM replies unused"


def llm_config(stub: OpenAIStub, **extra: Any) -> dict[str, Any]:
    return {"name": "Stub", "model": "stub-model", "base_url": stub.base_url, "api_key": KEY,
            "context_limit": 16, "max_retries": 0, "timeout": 20, **extra}


@pytest.fixture
def with_llm(user_rest: Rest, stub: OpenAIStub) -> None:
    """The test user has an LLM config pointing at the stub (made through REST if the UI test did not)."""
    configs = user_rest.ok("GET", f"{COPILOT}/llm-configs")["configs"]
    if not any(c["config"].get("base_url") == stub.base_url for c in configs):
        user_rest.ok("POST", f"{COPILOT}/llm-configs", {"config": llm_config(stub), "is_default": True})


@pytest.fixture
def signed_in(panel: Panel, project: dict[str, Any], user_rest: Rest, with_llm: None) -> Panel:
    """The panel open on the project, signed in as the test user, in a new conversation."""
    panel.open(f"?project_id={project['project_id']}")
    if visible(panel.by_id("login-view")):
        panel.sign_in(USER, PASSWORD)
    panel.wait_signed_in()
    wait_for(panel.driver, lambda d: panel.by_id("prompt").is_enabled(), "composer not enabled")
    panel.by_id("new-session").click()
    wait_for(panel.driver, lambda d: panel.current_session() is None, "not in a new conversation")
    return panel


def sessions(rest: Rest, project_id: str) -> list[dict[str, Any]]:
    return rest.ok("GET", f"{COPILOT}/projects/{project_id}/chat/sessions")


def start_background_run(rest: Rest, project_id: str, message: str) -> tuple[str, threading.Thread, list[str]]:
    """A chat run started outside the browser: its session id, and a thread reading it to the end."""
    request = urllib.request.Request(
        f"{rest.base_url}{COPILOT}/projects/{project_id}/chat/stream",
        data=json.dumps({"message": message, "stream": True}).encode(), method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {rest.token}"})
    response = urllib.request.urlopen(request, timeout=60)
    session_id = response.headers["X-Copilot-Session-Id"]
    lines: list[str] = []

    def drain() -> None:
        with response:
            lines.extend(line.decode() for line in response if line.startswith(b"data: "))

    thread = threading.Thread(target=drain, daemon=True)
    thread.start()
    return session_id, thread, lines


# ------------------------------------------------------------------- tests


def test_sign_in_and_the_no_llm_message(panel: Panel, project: dict[str, Any], user_rest: Rest) -> None:
    for config in user_rest.ok("GET", f"{COPILOT}/llm-configs")["configs"]:
        user_rest.ok("DELETE", f"{COPILOT}/llm-configs/{config['config_id']}")
    panel.open()
    panel.js("sessionStorage.clear()")
    panel.open()
    panel.by_id("login-username").send_keys(USER)
    panel.by_id("login-password").send_keys("wrong password", Keys.ENTER)
    wait_for(panel.driver, lambda d: visible(panel.by_id("login-error")), "no sign-in error")
    assert visible(panel.by_id("login-view"))

    panel.by_id("login-password").clear()
    panel.sign_in(USER, PASSWORD)
    assert panel.by_id("user-name").text == USER
    assert "No LLM is configured" in panel.notice()

    panel.choose_project(project["project_id"])
    panel.send("Hello?")
    assert "No LLM is configured" in panel.notice()
    assert panel.by_id("prompt").get_attribute("value") == "Hello?", "the typed message was lost"
    assert not panel.css(".message-assistant")


def test_llm_settings_show_the_servers_validation_errors(panel: Panel, project: dict[str, Any],
                                                        user_rest: Rest, stub: OpenAIStub) -> None:
    panel.open(f"?project_id={project['project_id']}")
    if visible(panel.by_id("login-view")):
        panel.sign_in(USER, PASSWORD)
    if not user_rest.ok("GET", f"{COPILOT}/llm-configs")["configs"]:
        assert "No LLM is configured" in panel.notice()
        panel.by_id("notice-action").click()  # "Open LLM settings"
    else:
        panel.by_id("settings-button").click()
    dialog = panel.by_id("settings-dialog")
    wait_for(panel.driver, lambda d: dialog.get_attribute("open") is not None, "settings did not open")
    wait_for(panel.driver, lambda d: panel.by_id("settings-status").text != "Loading…", "settings did not load")
    Select(panel.by_id("config-select")).select_by_value("")  # a new configuration

    fields = {"name": "Stub", "model": "stub-model", "base_url": "ftp://not-http", "api_key": KEY,
              "context_limit": "0", "max_retries": "0", "timeout": "20"}
    for name, value in fields.items():
        panel.by_id(f"cfg-{name}").clear()
        panel.by_id(f"cfg-{name}").send_keys(value)
    panel.by_id("settings-save").click()
    wait_for(panel.driver, lambda d: visible(panel.by_id("err-context_limit")), "no error under context_limit")
    assert "greater than 0" in panel.by_id("err-context_limit").text
    assert panel.by_id("cfg-context_limit").get_attribute("aria-invalid") == "true"
    assert "http" in panel.by_id("err-base_url").text
    stored = user_rest.ok("GET", f"{COPILOT}/llm-configs")["configs"]
    assert not any(c["config"].get("base_url") == "ftp://not-http" for c in stored)  # nothing was stored

    panel.by_id("cfg-base_url").clear()
    panel.by_id("cfg-base_url").send_keys(stub.base_url)
    panel.by_id("cfg-context_limit").clear()
    panel.by_id("cfg-context_limit").send_keys("16")
    if not panel.by_id("cfg-default").is_selected():
        panel.by_id("cfg-default").click()
    panel.by_id("settings-save").click()
    wait_for(panel.driver, lambda d: panel.by_id("settings-status").text.startswith("Saved"), "not saved")
    assert not visible(panel.by_id("err-context_limit"))
    chosen = Select(panel.by_id("config-select")).first_selected_option.text
    assert chosen.startswith("Stub") and "(default)" in chosen

    # The key is write-only: the field is empty again, the stored key only shows masked.
    key_input = panel.by_id("cfg-api_key")
    assert key_input.get_attribute("value") == ""
    assert "stored: sk-" in key_input.get_attribute("placeholder")
    assert KEY not in panel.driver.page_source
    assert KEY not in str(panel.js("return document.getElementById('settings-dialog').outerHTML"))

    saved = [c for c in user_rest.ok("GET", f"{COPILOT}/llm-configs")["configs"] if c["name"] == "Stub"]
    assert saved and saved[-1]["is_default"] and saved[-1]["config"]["context_limit"] == 16

    panel.by_id("cfg-api_key").send_keys(Keys.ESCAPE)  # a native dialog closes on Escape
    wait_for(panel.driver, lambda d: dialog.get_attribute("open") is None, "settings did not close")
    wait_for(panel.driver, lambda d: not visible(panel.by_id("notice")), "the no-LLM notice stayed")


def test_chat_streams_markdown_with_a_tool_card_and_the_meter(signed_in: Panel, stub: OpenAIStub,
                                                              project: dict[str, Any], user_rest: Rest) -> None:
    panel = signed_in
    assert panel.meter()["total"] == ""
    stub.enqueue(reply(tool_calls=[tool_call("gns3_topology", {"project_id": project["project_id"]})]), reply(RICH_ANSWER, hold_after=6))
    panel.send("What is in my lab?")

    # The tool card appears, runs and shows its output; the answer streams in.
    card = wait_for(panel.driver, lambda d: panel.css(".message-assistant .tool-card"), "no tool card")[0]
    assert card.find_element(By.CSS_SELECTOR, ".tool-name").text == "gns3_topology"
    wait_for(panel.driver, lambda d: card.get_attribute("data-status") in ("success", "error"), "the tool did not end")
    assert card.get_attribute("data-status") == "success", panel.js("return arguments[0].textContent", card)
    wait_for(panel.driver, lambda d: "PC1" in panel.turn_text(panel.last_turn()), "no streamed text")
    assert panel.js("return document.body.classList.contains('running')"), "the run ended before the release"
    assert visible(panel.by_id("stop-button")) and not visible(panel.by_id("send-button"))
    partial = panel.turn_text(panel.last_turn())
    assert "still bold" not in partial and "ping" not in partial
    meter = panel.meter()
    assert meter["total"].isdigit() and int(meter["total"]) > 0
    assert "tokens" in meter["text"] and "%" in meter["text"] and "balanced" in meter["text"]

    stub.release()
    turn = panel.wait_turn_status("completed")
    bubble = turn.find_elements(By.CSS_SELECTOR, ".bubble.markdown")[-1]
    assert bubble.find_element(By.CSS_SELECTOR, "h2").text == "PC1 and PC2"
    assert bubble.find_element(By.CSS_SELECTOR, "strong").text == "VPCS"
    assert len(bubble.find_elements(By.CSS_SELECTOR, "li")) == 2
    assert len(bubble.find_elements(By.CSS_SELECTOR, "table tr")) == 3
    assert "ping 10.0.0.2" in bubble.find_element(By.CSS_SELECTOR, "li code").text
    assert "PC2> ip 10.0.0.2/24" in bubble.find_element(By.CSS_SELECTOR, "pre code").text

    # The card is collapsible: closed at first, opened with the keyboard.
    assert card.get_attribute("open") is None
    summary = card.find_element(By.CSS_SELECTOR, "summary")
    summary.send_keys(Keys.ENTER)
    wait_for(panel.driver, lambda d: card.get_attribute("open") is not None, "the card did not open")
    assert project["project_id"] in card.find_element(By.CSS_SELECTOR, ".tool-args").text
    output = card.find_element(By.CSS_SELECTOR, ".tool-output").text
    assert "PC1" in output and "PC2" in output
    assert card.find_element(By.CSS_SELECTOR, ".tool-status").text == "done"

    # The session exists, is listed and current; the URL names it.
    session_id = panel.current_session()
    assert session_id and panel.session_item(session_id).get_attribute("class").find("current") >= 0
    assert [s["session_id"] for s in sessions(user_rest, project["project_id"])].count(session_id) == 1

    # docs/panel.png: the answer in full, the card closed again (Enter on its summary).
    summary.send_keys(Keys.ENTER)
    wait_for(panel.driver, lambda d: card.get_attribute("open") is None, "the card did not close")
    panel.js("const m = document.getElementById('messages'); m.scrollTop = m.scrollHeight;"
             "document.activeElement.blur()")
    if SCREENSHOT_TO:
        assert panel.driver.find_element(By.TAG_NAME, "body").screenshot(SCREENSHOT_TO)

    # A second question: the meter follows the growing conversation.
    first_total = int(panel.meter()["total"])
    stub.enqueue("The link is PC1 e0 to PC2 e0.")
    panel.send("Which link joins them?")
    panel.wait_turn_status("completed")
    wait_for(panel.driver, lambda d: int(panel.meter()["total"] or 0) > first_total, "the meter did not change")
    assert panel.current_session() == session_id
    assert stub.requests[-1]["messages"][-1]["content"] == "Which link joins them?"


def test_stop_button_aborts_the_run(signed_in: Panel, stub: OpenAIStub, project: dict[str, Any],
                                   user_rest: Rest) -> None:
    panel = signed_in
    stub.enqueue(reply("Counting: one two three four five six seven eight nine ten", hold_after=3))
    panel.send("Count slowly")
    wait_for(panel.driver, lambda d: "Counting" in panel.turn_text(panel.last_turn()), "no streamed text")
    session_id = wait_for(panel.driver, lambda d: panel.current_session(), "the session id did not arrive")
    panel.by_id("stop-button").click()
    turn = panel.wait_turn_status("aborted")
    assert "Stopped." in turn.text
    assert visible(panel.by_id("send-button")) and not visible(panel.by_id("stop-button"))
    listed = {s["session_id"]: s for s in sessions(user_rest, project["project_id"])}
    assert listed[session_id]["running"] is False

    # The panel is usable again at once, in the same conversation.
    stub.enqueue("Ten.")
    panel.send("Just the last number")
    panel.wait_turn_status("completed")
    assert panel.current_session() == session_id


def test_escape_stops_a_run_and_the_partial_answer_survives_a_reload(signed_in: Panel, stub: OpenAIStub) -> None:
    panel = signed_in
    stub.enqueue(reply("Partial answer that goes on and on", hold_after=4))
    panel.send("Tell me a long story")
    wait_for(panel.driver, lambda d: "Partial" in panel.turn_text(panel.last_turn()), "no streamed text")
    wait_for(panel.driver, lambda d: panel.current_session(), "the session id did not arrive")
    ActionChains(panel.driver).send_keys(Keys.ESCAPE).perform()
    panel.wait_turn_status("aborted")
    shown = panel.turn_text(panel.last_turn())
    assert shown.startswith("Partial") and "and on" not in shown

    panel.reload()
    wait_for(panel.driver, lambda d: panel.css(".message-user"), "no history after the reload")
    assert panel.css(".message-user")[-1].text == "Tell me a long story"
    assert panel.turn_text(panel.last_turn()) == shown


def test_reload_restores_the_history_and_sessions_can_be_switched_renamed_deleted(
        signed_in: Panel, stub: OpenAIStub, project: dict[str, Any], user_rest: Rest) -> None:
    panel = signed_in
    pid = project["project_id"]
    stub.enqueue(reply(tool_calls=[tool_call("gns3_topology", {"project_id": project["project_id"]})]), "First conversation answer.")
    panel.send("First conversation question")
    panel.wait_turn_status("completed")
    first = panel.current_session()

    panel.reload()
    wait_for(panel.driver, lambda d: "First conversation answer." in panel.turn_text(panel.last_turn()),
             "the history did not come back after a reload")
    assert panel.css(".message-user")[-1].text == "First conversation question"
    restored_card = panel.last_turn().find_element(By.CSS_SELECTOR, ".tool-card")
    assert restored_card.find_element(By.CSS_SELECTOR, ".tool-name").text == "gns3_topology"
    assert restored_card.get_attribute("data-status") == "success"
    assert panel.current_session() == first

    # Alt+N: a new conversation.
    ActionChains(panel.driver).key_down(Keys.ALT).send_keys("n").key_up(Keys.ALT).perform()
    wait_for(panel.driver, lambda d: panel.current_session() is None and not panel.css(".message-user"),
             "Alt+N did not start a new conversation")
    stub.enqueue("Second conversation answer.")
    panel.send("Second conversation question")
    panel.wait_turn_status("completed")
    second = panel.current_session()
    assert second and second != first
    panel.wait_session_listed(second)

    # Switch back to the first one.
    panel.session_item(first).find_element(By.CSS_SELECTOR, ".session-open").click()
    wait_for(panel.driver, lambda d: panel.current_session() == first and panel.css(".message-assistant") and
             "First conversation answer." in panel.turn_text(panel.last_turn()), "did not switch back")
    assert "Second conversation" not in panel.by_id("messages").text

    # Rename it (Enter saves).
    panel.session_item(first).find_element(By.CSS_SELECTOR, ".session-rename").click()
    field = wait_for(panel.driver, lambda d: panel.css(".session-rename-input"), "no rename field")[0]
    field.send_keys(Keys.CONTROL, "a")
    field.send_keys("Renamed lab chat", Keys.ENTER)
    wait_for(panel.driver, lambda d: panel.session_item(first).find_element(
        By.CSS_SELECTOR, ".session-open").text == "Renamed lab chat", "not renamed in the list")
    assert {s["session_id"]: s["title"] for s in sessions(user_rest, pid)}[first] == "Renamed lab chat"

    # Delete the second one (after confirming).
    panel.session_item(second).find_element(By.CSS_SELECTOR, ".session-delete").click()
    confirm = panel.by_id("confirm-dialog")
    wait_for(panel.driver, lambda d: confirm.get_attribute("open") is not None, "no confirmation")
    panel.by_id("confirm-ok").click()
    wait_for(panel.driver, lambda d: not panel.css(f'#session-list li[data-session-id="{second}"]'),
             "still listed after delete")
    assert second not in {s["session_id"] for s in sessions(user_rest, pid)}
    assert panel.current_session() == first


def test_html_in_answers_runs_nothing(signed_in: Panel, stub: OpenAIStub) -> None:
    panel = signed_in
    panel.js("delete window.__pwned")
    stub.enqueue(MALICIOUS_ANSWER)
    panel.send("<img src=x onerror=\"window.__pwned='user'\"> show me HTML")
    turn = panel.wait_turn_status("completed")

    def check(turn: Any) -> None:
        assert panel.js("return window.__pwned") is None
        messages = panel.by_id("messages")
        for tag in ("script", "img", "iframe", "svg", "object", "embed"):
            assert not messages.find_elements(By.TAG_NAME, tag), f"a <{tag}> reached the DOM"
        handlers = panel.js(
            "return [...document.querySelectorAll('#messages *')].flatMap(e => [...e.attributes])"
            ".filter(a => a.name.startsWith('on')).map(a => a.name)")
        assert handlers == []
        hrefs = [a.get_attribute("href") or "" for a in turn.find_elements(By.TAG_NAME, "a")]
        assert not [h for h in hrefs if h.strip().lower().startswith("javascript:")]
        assert "https://docs.gns3.com/" in hrefs
        safe = turn.find_element(By.PARTIAL_LINK_TEXT, "safe docs")
        assert safe.get_attribute("target") == "_blank" and "noopener" in safe.get_attribute("rel")
        assert "still bold" in turn.find_element(By.CSS_SELECTOR, "strong").text

    check(turn)
    assert panel.css(".message-user")[-1].text.startswith("<img src=x")  # the user's text, shown as text
    # Clicking what is left of the javascript: links does nothing either.
    for link in turn.find_elements(By.TAG_NAME, "a"):
        if link.text in ("click me", "raw link"):
            link.click()
    assert panel.js("return window.__pwned") is None
    assert len(panel.driver.window_handles) == 1

    panel.reload()  # the history is rendered by the same sanitising path
    wait_for(panel.driver, lambda d: "still bold" in panel.turn_text(panel.last_turn()), "no history")
    check(panel.last_turn())


def test_a_busy_session_says_so_and_can_be_stopped(signed_in: Panel, stub: OpenAIStub, project: dict[str, Any],
                                                   user_rest: Rest) -> None:
    panel = signed_in
    stub.enqueue(reply("Working on it", hold_after=1))
    session_id, reader, lines = start_background_run(user_rest, project["project_id"], "A long job elsewhere")
    panel.open(f"?project_id={project['project_id']}&session_id={session_id}")
    panel.wait_signed_in()
    panel.wait_session_listed(session_id)
    panel.send("Are you free?")
    assert "still answering another request" in panel.notice()
    assert panel.by_id("prompt").get_attribute("value") == "Are you free?"

    panel.by_id("notice-action").click()  # "Stop it"
    reader.join(timeout=30)
    assert not reader.is_alive(), "the other run did not end"
    assert any('"type": "abort"' in line for line in lines)
    wait_for(panel.driver, lambda d: not visible(panel.by_id("notice")), "the busy notice stayed")

    stub.enqueue("Free now.")
    panel.by_id("prompt").send_keys(Keys.ENTER)
    assert "Free now." in panel.turn_text(panel.wait_turn_status("completed"))


def test_device_configuration_waits_for_approval_across_a_reload(signed_in: Panel, stub: OpenAIStub,
                                                                project: dict[str, Any], user_rest: Rest) -> None:
    panel = signed_in
    pid = project["project_id"]
    call = {"device": "PC1", "commands": ["ip 10.0.0.1/24"]}
    stub.enqueue(reply("I will set PC1's address.", tool_calls=[tool_call("gns3_config_commands", call)]))
    panel.send("Give PC1 the address 10.0.0.1/24")
    panel.wait_turn_status("waiting_confirmation")

    def check_card() -> None:
        card = panel.wait_confirm_card()
        assert card.find_element(By.CSS_SELECTOR, ".confirm-device-name").text == "PC1"
        assert card.find_element(By.CSS_SELECTOR, "pre.confirm-commands").text == "ip 10.0.0.1/24"
        assert [b.text for b in card.find_elements(By.CSS_SELECTOR, ".confirm-actions button")] == [
            "Approve", "Reject"]
        wait_for(panel.driver, lambda d: panel.confirm_card_focused(), "the approval card is not focused")
        tool = panel.last_turn().find_element(By.CSS_SELECTOR, ".tool-card")
        assert tool.find_element(By.CSS_SELECTOR, ".tool-name").text == "gns3_config_commands"
        assert tool.get_attribute("data-status") == "waiting"

    check_card()
    session_id = panel.current_session()
    assert session_id
    waiting = user_rest.ok("GET", f"{COPILOT}/projects/{pid}/chat/sessions/{session_id}")
    assert [(c["name"], c["args"]) for c in waiting["pending_calls"]] == [("gns3_config_commands", call)]
    # The card holds the approval it will answer (sent back with the decision).
    approval_id = waiting["approval"]["approval_id"]
    assert panel.css(".confirm-card")[-1].get_attribute("data-approval-id") == approval_id

    # A new message is refused while the session waits: said clearly, the card stays.
    panel.send("Something else meanwhile?")
    assert "Approve or reject" in panel.notice()
    assert panel.by_id("notice").get_attribute("data-code") == "confirmation_pending"
    assert panel.by_id("prompt").get_attribute("value") == "Something else meanwhile?"
    panel.by_id("prompt").clear()
    assert len(panel.css('.confirm-card[data-state="waiting"]')) == 1

    # After a reload the card is back, and the keyboard reaches its buttons (Tab, Tab, Enter: Reject).
    panel.reload()
    panel.wait_signed_in()
    check_card()
    assert panel.current_session() == session_id
    assert panel.css(".confirm-card")[-1].get_attribute("data-approval-id") == approval_id
    stub.enqueue("Understood: PC1 was left unchanged.")
    ActionChains(panel.driver).send_keys(Keys.TAB).perform()
    wait_for(panel.driver, lambda d: "confirm-approve" in panel.js("return document.activeElement.className"),
             "Tab did not reach Approve")
    ActionChains(panel.driver).send_keys(Keys.TAB).perform()
    wait_for(panel.driver, lambda d: "confirm-reject" in panel.js("return document.activeElement.className"),
             "Tab did not reach Reject")
    ActionChains(panel.driver).send_keys(Keys.ENTER).perform()

    turn = panel.wait_turn_status("completed")
    assert "Understood: PC1 was left unchanged." in panel.turn_text(turn)
    card = panel.css(".confirm-card")[-1]
    assert card.get_attribute("data-state") == "rejected"
    assert not card.find_elements(By.CSS_SELECTOR, "button")
    assert "Rejected" in card.find_element(By.CSS_SELECTOR, ".confirm-result").text
    tool = turn.find_element(By.CSS_SELECTOR, ".tool-card")
    assert tool.find_element(By.CSS_SELECTOR, ".tool-status").text == "rejected"  # not "failed"
    assert user_rest.ok("GET", f"{COPILOT}/projects/{pid}/chat/sessions/{session_id}")["pending_calls"] == []
    # The model was told: the rejection reached it as the tool's result.
    assert "Rejected by the user" in json.dumps(stub.requests[-1])


def test_approving_in_the_panel_configures_a_real_device(signed_in: Panel, stub: OpenAIStub, project: dict[str, Any],
                                                         admin_rest: Rest, tmp_path: Path) -> None:
    """PC2's console is served by a real VPCS daemon (GNS3 cannot start VPCS here; it reports PC2 stopped)."""
    panel = signed_in
    pc2 = next(n for n in admin_rest.ok("GET", f"/v3/projects/{project['project_id']}/nodes") if n["name"] == "PC2")
    vpcs = VPCSProcess.start(tmp_path, pc2["console"])
    try:
        call = {"device": "PC2", "commands": ["ip 10.0.0.2/24"]}
        stub.enqueue(reply("Setting PC2's address.", tool_calls=[tool_call("gns3_config_commands", call)]),
                     "PC2 now has 10.0.0.2/24.")
        panel.send("Give PC2 the address 10.0.0.2/24")
        panel.wait_turn_status("waiting_confirmation")
        card = panel.wait_confirm_card()
        approval_id = card.get_attribute("data-approval-id")
        card.find_element(By.CSS_SELECTOR, ".confirm-approve").click()

        turn = panel.wait_turn_status("completed")
        assert "PC2 now has 10.0.0.2/24." in panel.turn_text(turn)
        tool = turn.find_element(By.CSS_SELECTOR, ".tool-card")
        assert tool.find_element(By.CSS_SELECTOR, ".tool-status").text == "done"
        assert "10.0.0.2 255.255.255.0" in panel.js("return arguments[0].textContent", tool.find_element(
            By.CSS_SELECTOR, ".tool-output"))
        card = panel.css(".confirm-card")[-1]
        assert card.get_attribute("data-state") == "approved" and not card.find_elements(By.CSS_SELECTOR, "button")
        assert asyncio.run(vpcs.address(tmp_path)) == "IP/MASK     : 10.0.0.2/24"
        # The audit says under which approval the command ran, and who gave it.
        session_id = panel.current_session()
        # (The change's baseline and verification reads are audited around it: docs/changes.md.)
        entries = admin_rest.ok("GET", f"{COPILOT}/console/audit?session_id={session_id}")
        (entry,) = [e for e in entries if e["command"] == "ip 10.0.0.2/24"]
        assert (entry["outcome"], entry["approval_id"]) == ("ok", approval_id)
        assert entry["approved_by"] == USER and entry["approval_digest"].startswith("sha256:")
    finally:
        vpcs.stop()


def test_an_llm_failure_is_shown_in_the_conversation(signed_in: Panel, stub: OpenAIStub) -> None:
    panel = signed_in
    stub.enqueue(server_error("internal-provider-detail-0x5eed"))
    panel.send("Will this fail?")
    turn = panel.wait_turn_status("error")
    note = turn.find_element(By.CSS_SELECTOR, ".turn-note-error").text
    assert "LLM provider" in note and "500" in note
    assert "0x5eed" not in panel.by_id("messages").text


def test_the_end_of_a_turn_leaves_the_focus_where_the_user_took_it(signed_in: Panel, stub: OpenAIStub) -> None:
    panel = signed_in
    stub.enqueue(reply("Still answering while you look around.", hold_after=1, chunk_chars=6))
    panel.send("Take your time")
    wait_for(panel.driver, lambda d: "Still" in panel.last_turn().text, "the answer did not start")
    # Alt+L: to the conversation list while the answer streams.
    ActionChains(panel.driver).key_down(Keys.ALT).send_keys("l").key_up(Keys.ALT).perform()
    listed = "return document.getElementById('session-list').contains(document.activeElement)"
    wait_for(panel.driver, lambda d: panel.js(listed), "Alt+L did not move the focus to the list")
    focused = panel.js("return document.activeElement.closest('.session-item').dataset.sessionId")
    stub.release()
    panel.wait_turn_status("completed")  # the list was reloaded on the way: its items are new elements
    assert panel.js(listed), "the end of the turn took the focus away from the list"
    assert panel.js("return document.activeElement.closest('.session-item').dataset.sessionId") == focused
    # Without a detour, the focus is back in the message box for the next question.
    stub.enqueue("Done.")
    panel.send("And now?")
    panel.wait_turn_status("completed")
    assert panel.js("return document.activeElement.id") == "prompt"


def test_narrow_layout_and_keyboard(signed_in: Panel, stub: OpenAIStub) -> None:
    panel = signed_in
    assert panel.js("return document.documentElement.scrollWidth") <= 1280
    panel.set_viewport(400, 800)
    assert panel.js("return document.documentElement.scrollWidth") <= 400, "horizontal overflow at 400px"
    sidebar = panel.by_id("sidebar")
    assert not visible(sidebar)
    for element_id in ("prompt", "send-button", "project-select", "sessions-toggle", "settings-button"):
        rect = panel.js("const r = arguments[0].getBoundingClientRect(); return [r.left, r.right, r.width]",
                        panel.by_id(element_id))
        assert rect[0] >= 0 and rect[1] <= 400 and rect[2] > 0, f"#{element_id} is off screen: {rect}"

    # Shift+Enter is a new line, Enter sends.
    prompt = panel.by_id("prompt")
    prompt.clear()
    prompt.send_keys("line one")
    ActionChains(panel.driver).key_down(Keys.SHIFT).send_keys(Keys.ENTER).key_up(Keys.SHIFT).perform()
    prompt.send_keys("line two")
    assert prompt.get_attribute("value") == "line one\nline two"
    assert not panel.css(".message-user")
    stub.enqueue("Two lines received.")
    prompt.send_keys(Keys.ENTER)
    panel.wait_turn_status("completed")
    assert panel.css(".message-user")[-1].text == "line one\nline two"

    # Alt+L opens the conversations drawer with focus in it; Escape closes it.
    ActionChains(panel.driver).key_down(Keys.ALT).send_keys("l").key_up(Keys.ALT).perform()
    wait_for(panel.driver, lambda d: visible(sidebar) and panel.js(
        "return document.getElementById('sidebar').contains(document.activeElement)"), "the drawer did not open")
    ActionChains(panel.driver).send_keys(Keys.ESCAPE).perform()
    wait_for(panel.driver, lambda d: not visible(sidebar), "Escape did not close the drawer")
    panel.by_id("sessions-toggle").click()
    wait_for(panel.driver, lambda d: visible(sidebar), "the menu button did not open the drawer")
    assert panel.by_id("sessions-toggle").get_attribute("aria-expanded") == "true"

    # Alt+S opens the settings, whose form fits the width.
    ActionChains(panel.driver).send_keys(Keys.ESCAPE).perform()
    ActionChains(panel.driver).key_down(Keys.ALT).send_keys("s").key_up(Keys.ALT).perform()
    dialog = panel.by_id("settings-dialog")
    wait_for(panel.driver, lambda d: dialog.get_attribute("open") is not None, "Alt+S did not open the settings")
    assert panel.js("return arguments[0].getBoundingClientRect().right", dialog) <= 400
    ActionChains(panel.driver).send_keys(Keys.ESCAPE).perform()
    wait_for(panel.driver, lambda d: dialog.get_attribute("open") is None, "the settings did not close")


def test_each_conversation_uses_the_llm_chosen_for_it(signed_in: Panel, stub: OpenAIStub, user_rest: Rest) -> None:
    """Two configs, two stubs: the picker by the composer decides which one answers, per conversation."""
    panel = signed_in
    listed = user_rest.ok("GET", f"{COPILOT}/llm-configs")
    default_id = listed["default_config_id"]
    assert default_id and next(c for c in listed["configs"] if c["config_id"] == default_id)[
        "config"]["base_url"] == stub.base_url
    assert not visible(panel.by_id("llm-picker")), "a picker with a single config to choose"
    other_key = "sk-panel-other-7c1f0e93a2d84b65"
    with OpenAIStub.in_thread(api_key=other_key) as other:
        created = user_rest.ok("POST", f"{COPILOT}/llm-configs", {"config": {
            **llm_config(other, name="Other stub", context_limit=48), "api_key": other_key}, "is_default": False})
        other_id = created["config_id"]
        try:
            panel.reload()
            panel.wait_signed_in()
            select = panel.by_id("llm-select")
            wait_for(panel.driver, lambda d: visible(panel.by_id("llm-picker")), "no LLM picker with two configs")
            assert panel.js("return arguments[0].labels[0].textContent", select) == "LLM"
            assert Select(select).first_selected_option.get_attribute("value") == default_id
            assert Select(select).first_selected_option.text.endswith("(default)")
            assert "Other stub" in [o.text for o in Select(select).options]

            # The keyboard reaches the picker from the message box (Tab, Tab) and picks by typing.
            panel.by_id("prompt").click()
            for _ in range(2):
                ActionChains(panel.driver).send_keys(Keys.TAB).perform()
            wait_for(panel.driver, lambda d: panel.js("return document.activeElement.id") == "llm-select",
                     "Tab did not reach the LLM picker")
            ActionChains(panel.driver).send_keys("Other").perform()
            wait_for(panel.driver, lambda d: select.get_attribute("value") == other_id, "typing did not pick it")

            main_before = len(stub.requests)
            other.enqueue("Answered by the other model.")
            panel.send("Which model answers?")
            turn = panel.wait_turn_status("completed")
            assert "Answered by the other model." in panel.turn_text(turn)
            assert len(other.requests) == 1 and len(stub.requests) == main_before
            assert other.requests[0]["messages"][-1]["content"] == "Which model answers?"
            assert "/ 48,000 tokens" in panel.meter()["text"]
            chosen_session = panel.current_session()
            assert chosen_session

            # A reload keeps that conversation's choice: the picker, the meter and the next answer.
            panel.reload()
            panel.wait_signed_in()
            assert panel.current_session() == chosen_session
            wait_for(panel.driver, lambda d: panel.by_id("llm-select").get_attribute("value") == other_id,
                     "the choice was not restored after a reload")
            wait_for(panel.driver, lambda d: "/ 48,000 tokens" in panel.meter()["text"],
                     "the meter does not use the chosen config")
            other.enqueue("Still the other model.")
            panel.send("And now?")
            assert "Still the other model." in panel.turn_text(panel.wait_turn_status("completed"))
            assert len(other.requests) == 2 and len(stub.requests) == main_before

            # A new conversation starts on the default.
            panel.by_id("new-session").click()
            wait_for(panel.driver, lambda d: panel.current_session() is None and
                     panel.by_id("llm-select").get_attribute("value") == default_id,
                     "a new conversation did not start on the default")
            stub.enqueue("Answered by the default model.")
            panel.send("Who answers here?")
            assert "Answered by the default model." in panel.turn_text(panel.wait_turn_status("completed"))
            assert len(stub.requests) == main_before + 1 and len(other.requests) == 2
            assert "/ 16,000 tokens" in panel.meter()["text"]

            # Back to the first conversation: its choice again.
            panel.session_item(chosen_session).find_element(By.CSS_SELECTOR, ".session-open").click()
            wait_for(panel.driver, lambda d: panel.current_session() == chosen_session and
                     panel.by_id("llm-select").get_attribute("value") == other_id, "the choice did not come back")

            # Deleting the config in the LLM settings: the picker follows, the conversation falls back to the default.
            panel.by_id("settings-button").click()
            dialog = panel.by_id("settings-dialog")
            wait_for(panel.driver, lambda d: dialog.get_attribute("open") is not None, "settings did not open")
            wait_for(panel.driver, lambda d: panel.by_id("settings-status").text != "Loading…", "settings did not load")
            Select(panel.by_id("config-select")).select_by_value(other_id)
            panel.by_id("settings-delete").click()
            wait_for(panel.driver, lambda d: panel.by_id("settings-status").text.startswith("Deleted"), "not deleted")
            panel.by_id("settings-cancel").click()
            wait_for(panel.driver, lambda d: not visible(panel.by_id("llm-picker")) and
                     panel.by_id("llm-select").get_attribute("value") == default_id,
                     "the picker did not follow the deletion")
            assert other.pending == 0 and other.unscripted == 0
        finally:
            user_rest.call("DELETE", f"{COPILOT}/llm-configs/{other_id}")


def test_the_gns3_web_ui_button_opens_the_panel_for_its_project(driver: WebDriver, gns3_server: Any,
                                                                 project: dict[str, Any], with_llm: None) -> None:
    base = gns3_server.base_url
    panel_tab = driver.current_window_handle
    driver.switch_to.new_window("tab")  # a new tab: no panel sign-in of its own (sessionStorage is per tab)
    try:
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                               {"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": False})
        # GNS3's own web UI and its own sign-in form.
        driver.get(f"{base}/static/web-ui/bundled")
        wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "input[formcontrolname=username]"),
                 "the web UI's login form did not appear", timeout=60)
        driver.find_element(By.CSS_SELECTOR, "input[formcontrolname=username]").send_keys(USER)
        driver.find_element(By.CSS_SELECTOR, "input[formcontrolname=password]").send_keys(PASSWORD)
        next(b for b in driver.find_elements(By.TAG_NAME, "button") if b.text.strip() == "Login").click()
        wait_for(driver, lambda d: d.current_url.endswith("/projects"), "the web UI did not sign in")
        assert driver.find_elements(By.CSS_SELECTOR, 'script[data-gns3-copilot="button"]')
        # No button outside a project.
        assert not visible(driver.find_element(By.ID, "gns3-copilot-button"))

        controller = driver.current_url.split("/controller/")[1].split("/")[0]
        driver.get(f"{base}/static/web-ui/controller/{controller}/project/{project['project_id']}")
        button = wait_for(driver, lambda d: [b for b in d.find_elements(By.ID, "gns3-copilot-button") if visible(b)],
                          "no Copilot button on the project page", timeout=60)[0]
        button.click()
        dock = driver.find_element(By.ID, "gns3-copilot-dock")
        wait_for(driver, lambda d: visible(dock), "the dock did not open")
        assert button.get_attribute("aria-expanded") == "true"
        frame = driver.find_element(By.ID, "gns3-copilot-frame")
        assert f"project_id={project['project_id']}" in frame.get_attribute("src")

        driver.switch_to.frame(frame)
        # Signed in with the web UI's token: no sign-in form, the user and the project are right.
        wait_for(driver, lambda d: visible(d.find_element(By.ID, "main-view")), "the panel did not sign in")
        assert not visible(driver.find_element(By.ID, "login-view"))
        assert driver.find_element(By.ID, "user-name").get_attribute("textContent") == USER
        wait_for(driver, lambda d: d.find_element(By.ID, "project-select").get_attribute("value")
                 == project["project_id"], "the panel is not on the web UI's project")
        assert driver.execute_script("return window.innerWidth") <= 420
        driver.switch_to.default_content()

        driver.find_element(By.CSS_SELECTOR, "#gns3-copilot-dock .gc-head button").click()
        wait_for(driver, lambda d: not visible(dock), "the dock did not close")
    finally:
        driver.switch_to.default_content()
        driver.close()
        driver.switch_to.window(panel_tab)


def test_a_changes_diff_checks_and_rollback_are_shown_in_the_approval_card_as_text(
        signed_in: Panel, stub: OpenAIStub, project: dict[str, Any], admin_rest: Rest, tmp_path: Path) -> None:
    """A real VPCS change whose implied check fails (VPCS takes ``/32`` as ``/24``): the approval card's
    result shows the diff of PC1's addressing, the failed check with the value read and a Roll back
    button, which puts PC1 back; the device's text (a domain name that is markup) stays text."""
    panel = signed_in
    pc1 = next(n for n in admin_rest.ok("GET", f"/v3/projects/{project['project_id']}/nodes") if n["name"] == "PC1")
    vpcs = VPCSProcess.start(tmp_path, pc1["console"])
    markup = "<b>x<i>y<script>z"  # VPCS takes no "/" nor blank in a domain name
    try:
        call = {"device": "PC1", "commands": [f"ip domain {markup}", "ip 10.0.0.5/32"]}
        stub.enqueue(reply("Setting PC1 up.", tool_calls=[tool_call("gns3_config_commands", call)]),
                     "A check failed.")
        panel.send("Set PC1 up")
        panel.wait_turn_status("waiting_confirmation")
        panel.wait_confirm_card().find_element(By.CSS_SELECTOR, ".confirm-approve").click()
        panel.wait_turn_status("completed")
        card = panel.css(".confirm-card")[-1]
        view = wait_for(panel.driver, lambda d: card.find_elements(By.CSS_SELECTOR, ".change-view"),
                        "no change shown in the approval card")[0]
        assert view.get_attribute("data-verified") == "fail"
        added = [panel.js("return arguments[0].textContent", e)
                 for e in view.find_elements(By.CSS_SELECTOR, '.diff-line[data-kind="added"]')]
        assert any(markup in line for line in added), added  # the device's text, as text
        assert not view.find_elements(By.CSS_SELECTOR, "b, i, script")
        checks = {panel.js("return arguments[0].querySelector('.check-subject').textContent", c).strip():
                  (c.get_attribute("data-status"), c.find_element(By.CSS_SELECTOR, ".check-observed").text)
                  for c in view.find_elements(By.CSS_SELECTOR, ".change-check")}
        assert checks["PC1: address 10.0.0.5/32"][0] == "fail", checks
        assert all("read:" in observed for _, observed in checks.values()), checks

        view.find_element(By.CSS_SELECTOR, ".change-rollback").click()
        wait_for(panel.driver, lambda d: view.get_attribute("data-rolled-back") == "true",
                 "the rollback did not finish", timeout=90)
        assert "Rolled back" in view.find_element(By.CSS_SELECTOR, ".change-rollback-result").text
        assert not view.find_elements(By.CSS_SELECTOR, ".change-rollback")
        assert asyncio.run(vpcs.address(tmp_path)) == "IP/MASK     : 0.0.0.0/0"  # as the daemon started
    finally:
        vpcs.stop()
