"""GNS3 3.1's own web UI, its AI chat driven in Debian's Chromium, against our server.

The client is the real one: the compiled Angular app of the ``gns3-server``
3.1.0a7 wheel (``pip download`` only, never installed; ``tests/browser/webui31``),
served by a proxy in the test process that forwards ``/v3`` (HTTP, SSE and
WebSocket) to the session's gns3-server with the copilot. The LLM is the
OpenAI-compatible stub. The tests run in order on one browser, as one user
would: chat, reopen, switch model and mode, pin. After each, the page has
logged no JavaScript error and no ``/v3`` request of the page got a 404 or 5xx.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement

from tests.browser.chromium import chromium, visible, wait_for
from tests.browser.rest import Rest
from tests.browser.webui31 import WebUIProxy, webui31_dir
from tests.support.openai_stub import OpenAIStub, reply, tool_call

pytestmark = pytest.mark.integration

KEY = "sk-webui31-secret-0c4f9a7e2d1b"
USER = "webui31-student"
PASSWORD = "webui31-student-password-1"
COPILOT = "/v3/copilot"
SLOW = 90.0  # a run on the busy CI machine: tools built, topology fetched, two model calls


# ------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def webui() -> Path:
    return webui31_dir()


@pytest.fixture(scope="module")
def admin_rest(gns3_server: Any) -> Rest:
    return Rest(gns3_server.base_url).login(gns3_server.username, gns3_server.password)


@pytest.fixture(scope="module")
def user_rest(gns3_server: Any, admin_rest: Rest) -> Iterator[Rest]:
    """A GNS3 user (not an administrator) with GNS3's "User" role on every project."""
    user_id = admin_rest.add_user(USER, PASSWORD)
    rest = Rest(gns3_server.base_url).login(USER, PASSWORD)
    rest.user_id = user_id  # type: ignore[attr-defined]
    yield rest
    admin_rest.call("DELETE", f"/v3/access/users/{user_id}")


@pytest.fixture(scope="module")
def project(admin_rest: Rest, user_rest: Rest) -> Iterator[dict[str, Any]]:
    # auto_close off: GNS3 closes a project 5 s after its last notification listener left, and a
    # page reload on a busy machine can take longer than that to reconnect (the next REST call
    # then got 403 "The project is not opened").
    created = admin_rest.ok("POST", "/v3/projects",
                            {"name": f"Web UI 3.1 lab {uuid.uuid4().hex[:6]}", "auto_close": False})
    pid = created["project_id"]
    for name, x in (("PC1", -100), ("PC2", 100)):
        admin_rest.ok("POST", f"/v3/projects/{pid}/nodes",
                      {"name": name, "node_type": "vpcs", "compute_id": "local", "x": x, "y": 0})
    yield created
    admin_rest.call("DELETE", f"/v3/projects/{pid}")


@pytest.fixture(scope="module")
def stub() -> Iterator[OpenAIStub]:
    with OpenAIStub.in_thread(api_key=KEY) as server:
        yield server


@pytest.fixture(scope="module")
def model_configs(user_rest: Rest, stub: OpenAIStub) -> list[dict[str, Any]]:
    """Two configs of the user, made through 3.1's route as its settings page makes them."""
    base = f"/v3/access/users/{user_rest.user_id}/llm-model-configs"  # type: ignore[attr-defined]
    made = []
    for name, model, default in (("Stub A", "stub-model", True), ("Stub B", "stub-model-b", False)):
        made.append(user_rest.ok("POST", base, {
            "name": name, "model_type": "text", "provider": "openai", "base_url": stub.base_url, "model": model,
            "api_key": KEY, "temperature": 0.7, "context_limit": 16, "context_strategy": "balanced",
            "copilot_mode": "teaching_assistant", "is_default": default, "max_retries": 0, "timeout": 20}))
    return made


@pytest.fixture(scope="module")
def proxy(webui: Path, gns3_server: Any) -> Iterator[WebUIProxy]:
    with WebUIProxy.running(webui, gns3_server.base_url) as running:
        yield running


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    with chromium(tmp_path_factory.mktemp("chromium-webui31"), width=1600, height=1000) as browser:
        yield browser


# A race of the 3.1 client itself: when a project page loads with the chat window already open
# (its state is kept in localStorage), the chat asks for the sessions of project "undefined"
# before the project is loaded. 3.1's own server refuses that id exactly as ours does (422: the
# route's project_id is a UUID); the chat loads the sessions again once the project is there.
UNDEFINED_PROJECT = "/v3/copilot/projects/undefined/chat/sessions"


def page_errors(driver: WebDriver, proxy: WebUIProxy) -> list[str]:
    """Console errors of the page's own code (GNS3's analytics script, blocked here, and the
    client race above, when the proxy saw that very request refused with 422, aside)."""
    race = any(r.path == UNDEFINED_PROJECT and r.status == 422 for r in proxy.requests())
    return [e["message"] for e in driver.get_log("browser")
            if e.get("level") == "SEVERE" and e.get("source") in ("javascript", "console-api")
            and "[Analytics]" not in e["message"]
            and not (race and "Failed to get sessions" in e["message"] and "found `u` at 1" in e["message"])
            and not (race and "Failed to load sessions" in e["message"])]


@pytest.fixture
def ui(driver: WebDriver, proxy: WebUIProxy, stub: OpenAIStub) -> Iterator[WebUI]:
    """The page; afterwards no JavaScript error, no /v3 404 or 5xx, no unused stub reply."""
    driver.get_log("browser")
    yield WebUI(driver, proxy)
    errors = page_errors(driver, proxy)
    assert not errors, f"errors in the 3.1 web UI: {errors}"
    assert not proxy.failures(), f"/v3 requests of the page that failed: {proxy.failures()}"
    assert stub.pending == 0, "the test left scripted LLM replies unused"


# ------------------------------------------------------------------ the page


class WebUI:
    """GNS3 3.1's web UI and its AI chat window, by the classes its templates use."""

    def __init__(self, driver: WebDriver, proxy: WebUIProxy) -> None:
        self.driver = driver
        self.proxy = proxy

    def css(self, selector: str) -> WebElement:
        return self.driver.find_element(By.CSS_SELECTOR, selector)

    def all(self, selector: str) -> list[WebElement]:
        return self.driver.find_elements(By.CSS_SELECTOR, selector)

    def click(self, element: WebElement) -> None:
        """A click the way a user's lands, even where the chat window overlaps the map."""
        self.driver.execute_script("arguments[0].click()", element)

    def wait(self, condition: Any, message: str, timeout: float = 90.0) -> Any:
        """Wait on the page's state; generous: an Angular page on a saturated 2-core machine
        took over 30 s to render a list (the wait ends as soon as the state is there)."""
        return wait_for(self.driver, condition, message, timeout=timeout)

    def sign_in(self, username: str, password: str) -> None:
        self.driver.get(self.proxy.base_url + "/static/web-ui/bundled")
        self.wait(lambda d: self.css("input[formcontrolname=username]"), "no login form")
        self.css("input[formcontrolname=username]").send_keys(username)
        self.css("input[formcontrolname=password]").send_keys(password, Keys.ENTER)
        self.wait(lambda d: d.current_url.endswith("/projects"), "not signed in")

    def open_project(self, project_id: str) -> None:
        self.driver.get(f"{self.proxy.base_url}/static/web-ui/controller/1/project/{project_id}")
        self.wait(lambda d: self.ai_button(), "no AI button on the project page")

    def ai_button(self) -> WebElement | None:
        return next((b for b in self.all("button") if b.text.strip() == "AI"), None)

    def open_chat(self) -> None:
        """Open the chat window (it reopens by itself on a new page when it was left open)."""
        self.wait(lambda d: self.all("app-ai-chat .gns3-ai-chat") or self.ai_button(), "no AI button")
        if not self.all("app-ai-chat .gns3-ai-chat"):
            button = self.ai_button()
            assert button is not None
            self.click(button)
        self.wait(lambda d: self.css(".gns3-chat-input-area__textarea"), "the AI chat did not open")
        self.wait(lambda d: self.chip_text() not in ("", "Model"), "the model list did not load")

    def chip_text(self) -> str:
        """The model chip's label (textContent: the chip may be styled out of Selenium's sight)."""
        return (self.css(".gns3-chat-input-area__chip-text").get_attribute("textContent") or "").strip()

    def messages_text(self) -> str:
        return self.css("app-chat-message-list").text

    def send(self, text: str) -> None:
        area = self.css(".gns3-chat-input-area__textarea")
        area.send_keys(text)
        area.send_keys(Keys.CONTROL, Keys.ENTER)

    def open_sidebar(self) -> None:
        if not self.all(".gns3-chat-session-list"):
            self.click(self.css(".gns3-ai-chat__sidebar-title"))
        self.wait(lambda d: self.css(".gns3-chat-session-list"), "no session list")

    def session_rows(self) -> list[WebElement]:
        return self.all(".gns3-chat-session-list__session")

    def model_menu(self) -> str:
        """Open the model chip's menu; its text (textContent: the menu fades in, invisible to .text at first)."""
        self.click(self.css(".gns3-chat-input-area__model-chip"))
        return self.wait(lambda d: next((t for t in (p.get_attribute("textContent") or ""
                                                     for p in self.all(".mat-mdc-menu-panel"))
                                         if "Select AI Model" in t and "Copilot Mode" in t), None), "no model menu")

    def menu_item(self, text: str) -> WebElement:
        return self.wait(lambda d: next((i for i in self.all(".mat-mdc-menu-panel [mat-menu-item]")
                                         if text in (i.get_attribute("textContent") or "")), None),
                         f"no menu item {text!r}")

    def close_menus(self) -> None:
        for backdrop in self.all(".cdk-overlay-backdrop"):
            try:
                self.click(backdrop)
            except StaleElementReferenceException:
                pass  # the menu closed (its backdrop went) between finding and clicking it
        self.wait(lambda d: not self.all(".mat-mdc-menu-panel"), "a menu stayed open")


def sessions(rest: Rest, project_id: str) -> list[dict[str, Any]]:
    return rest.ok("GET", f"{COPILOT}/projects/{project_id}/chat/sessions")


# ------------------------------------------------------------------ tests


def test_a_new_chat_streams_shows_its_tool_call_and_is_listed(
    ui: WebUI, user_rest: Rest, project: dict[str, Any], model_configs: list[dict[str, Any]], stub: OpenAIStub
) -> None:
    ui.sign_in(USER, PASSWORD)
    ui.open_project(project["project_id"])
    ui.open_chat()
    # The UI's name for "stub-model", the default config ("Model" until the list is loaded).
    ui.wait(lambda d: ui.chip_text() == "Stub Model", "the model chip did not show the default model")

    stub.enqueue(reply("Let me look.", tool_calls=[tool_call("gns3_topology", {"project_id": project["project_id"]})]),
                 reply("Two PCs are in this lab.", hold_after=2))
    ui.send("What is in my lab?")
    # Streamed: part of the answer shows while the model is still held mid-reply.
    ui.wait(lambda d: "Two PCs " in ui.messages_text(), "no streamed text", timeout=SLOW)
    assert "Two PCs are in this lab." not in ui.messages_text()
    stub.release()
    ui.wait(lambda d: "Two PCs are in this lab." in ui.messages_text(), "the answer did not finish", timeout=SLOW)
    text = ui.messages_text()
    assert "What is in my lab?" in text and "Let me look." in text
    chips = [c.text for c in ui.all(".gns3-chat-message-list__tool-calls-container, "
                                    ".gns3-chat-message-list__tool-results-container")]
    assert any("gns3_topology" in c for c in chips), chips

    # The UI chose the session's id; the server created it for this user, and lists it.
    listed = sessions(user_rest, project["project_id"])
    assert len(listed) == 1 and listed[0]["message_count"] == 4 and listed[0]["title"] == "What is in my lab?"
    ui.open_sidebar()
    ui.wait(lambda d: "4 messages" in ui.session_rows()[0].text and "What is in my lab?" in ui.session_rows()[0].text,
            "no title and message count in the session list")
    row = ui.session_rows()[0].text
    assert "Just now" in row and "Invalid" not in row, row


def test_a_session_reopens_with_its_whole_history(ui: WebUI, user_rest: Rest, project: dict[str, Any]) -> None:
    ui.open_project(project["project_id"])  # a fresh page: nothing held in memory
    ui.open_chat()
    ui.open_sidebar()
    ui.wait(lambda d: ui.session_rows(), "no sessions listed")
    ui.click(ui.session_rows()[0])
    ui.wait(lambda d: "Two PCs are in this lab." in ui.messages_text(), "the history did not load")
    text = ui.messages_text()
    for part in ("What is in my lab?", "Let me look.", "gns3_topology", "Two PCs are in this lab."):
        assert part in text, (part, text)
    assert text.index("What is in my lab?") < text.index("Let me look.") < text.index("Two PCs are in this lab.")


def test_the_model_list_is_filled_and_model_and_mode_switch(
    ui: WebUI, user_rest: Rest, project: dict[str, Any], model_configs: list[dict[str, Any]], stub: OpenAIStub
) -> None:
    base = f"/v3/access/users/{user_rest.user_id}/llm-model-configs"  # type: ignore[attr-defined]
    ui.open_project(project["project_id"])
    ui.open_chat()
    menu = ui.model_menu()
    assert "stub-model (127.0.0.1)" in menu and "stub-model-b (127.0.0.1)" in menu
    assert "Teaching Assistant" in menu and "Lab Automation" in menu
    ui.click(ui.menu_item("stub-model-b"))
    ui.wait(lambda d: user_rest.ok("GET", base + "/default")["config_id"] == model_configs[1]["config_id"],
            "the default model did not change")
    ui.wait(lambda d: ui.chip_text() not in ("", "Stub Model"), "the chip did not change")

    ui.model_menu()
    ui.click(ui.menu_item("Lab Automation"))
    ui.wait(lambda d: user_rest.ok("GET", base + "/default")["config"]["copilot_mode"] == "lab_automation_assistant",
            "the copilot mode was not written into the config")
    ui.close_menus()

    # The next chat (the UI names no mode) runs with the chosen model in lab automation mode.
    ui.open_sidebar()
    ui.click(ui.css(".gns3-chat-session-list__new-button"))
    stub.enqueue("Ready to change the lab.")
    ui.send("Can you add a router?")
    ui.wait(lambda d: "Ready to change the lab." in ui.messages_text(), "no answer", timeout=SLOW)
    request = stub.requests[-1]
    assert request["model"] == "stub-model-b"
    assert "gns3_create_node" in {t["function"]["name"] for t in request["tools"]}


def test_pin_and_unpin_from_the_session_menu(ui: WebUI, user_rest: Rest, project: dict[str, Any]) -> None:
    ui.open_project(project["project_id"])
    ui.open_chat()
    ui.open_sidebar()
    # Newest first; the list renders its rows before their titles: wait for the text, not the count.
    ui.wait(lambda d: len(ui.session_rows()) == 2 and "Can you add a router?" in ui.session_rows()[0].text
            and "What is in my lab?" in ui.session_rows()[1].text, "two sessions, the newest first, expected")
    older = next(r for r in ui.session_rows() if "What is in my lab?" in r.text)
    ui.click(older.find_element(By.CSS_SELECTOR, ".gns3-chat-session-list__menu-button"))
    ui.click(ui.menu_item("Pin"))
    ui.wait(lambda d: "What is in my lab?" in ui.session_rows()[0].text, "the pinned session is not first")
    pinned = [s for s in sessions(user_rest, project["project_id"]) if s["pinned"]]
    assert [s["title"] for s in pinned] == ["What is in my lab?"]
    assert ui.session_rows()[0].find_elements(By.CSS_SELECTOR, ".gns3-chat-session-list__pin-icon")

    # Reloaded, the pin holds (it is the server's, not the page's).
    ui.open_project(project["project_id"])
    ui.open_chat()
    ui.open_sidebar()
    ui.wait(lambda d: len(ui.session_rows()) == 2 and "What is in my lab?" in ui.session_rows()[0].text,
            "the pin did not survive a reload")
    ui.click(ui.session_rows()[0].find_element(By.CSS_SELECTOR, ".gns3-chat-session-list__menu-button"))
    ui.click(ui.menu_item("Unpin"))
    ui.wait(lambda d: "Can you add a router?" in ui.session_rows()[0].text, "unpinned session still first")
    assert not any(s["pinned"] for s in sessions(user_rest, project["project_id"]))
    assert visible(ui.session_rows()[0])


def test_an_injected_fault_is_shown_and_recorded_for_its_injector(
    ui: WebUI, user_rest: Rest, project: dict[str, Any], model_configs: list[dict[str, Any]], stub: OpenAIStub
) -> None:
    pid = project["project_id"]
    if not ui.driver.current_url.startswith(ui.proxy.base_url + "/static/web-ui/controller"):
        ui.sign_in(USER, PASSWORD)  # run on its own
    ui.open_project(pid)
    ui.click(ui.wait(lambda d: ui.css(".fault-inject-button"), "no Inject Fault button"))
    dialog = ui.wait(lambda d: ui.css("mat-dialog-container"), "no fault injection dialog")

    def dialog_button(text: str) -> WebElement:
        return ui.wait(lambda d: next((b for b in dialog.find_elements(By.CSS_SELECTOR, "button")
                                       if text in (b.get_attribute("textContent") or "")), None), f"no {text!r}")

    # Two faults: a node stopped, and the link between the PCs given 40% packet loss.
    nodes = {n["name"]: n["node_id"] for n in user_rest.ok("GET", f"/v3/projects/{pid}/nodes")}
    link = user_rest.ok("POST", f"/v3/projects/{pid}/links", {"nodes": [
        {"node_id": nodes[name], "adapter_number": 0, "port_number": 0} for name in ("PC1", "PC2")]})
    ui.click(dialog_button("Inject Fault"))
    ui.click(ui.wait(lambda d: next((t for t in dialog.find_elements(By.CSS_SELECTOR, "mat-button-toggle button")
                                     if (t.get_attribute("textContent") or "").strip() == "2"), None),
                     "no fault count toggle"))
    stop = {"action": "stop", "nodes": ["PC1"]}
    lossy = {"node_a": "PC1", "node_b": "PC2", "filters": {"packet_loss": [40]}}
    stub.enqueue(reply(tool_calls=[tool_call("gns3_node_action", stop)]),
                 reply(tool_calls=[tool_call("gns3_update_link", lossy)]),
                 reply("A fault was injected.", hold_after=1, chunk_chars=5))
    ui.click(dialog_button("Confirm & Inject"))
    # Held before its last answer: the dialog's progress shows the link tool's call done.
    ui.wait(lambda d: "Completed: gns3_update_link" in dialog.text, "the link fault is not in the progress",
            timeout=SLOW)
    stub.release()
    ui.wait(lambda d: "Fault injected successfully!" in dialog.text, "the injection did not complete", timeout=SLOW)

    faults = user_rest.ok("GET", f"{COPILOT}/projects/{pid}/faults")
    assert [(f["tool"], f["args"]) for f in faults] == [("gns3_node_action", stop), ("gns3_update_link", lossy)]
    assert user_rest.ok("GET", f"/v3/projects/{pid}/links/{link['link_id']}")["filters"] == {"packet_loss": [40]}
    injected = [s for s in sessions(user_rest, pid) if s["metadata"].get("copilot_mode") == "troubleshooting_injection"]
    assert len(injected) == 1 and injected[0]["session_id"] == faults[0]["session_id"]
    # The injector reverts the link fault (GNS3 reads the link back without filters).
    reverted = user_rest.ok("POST", f"{COPILOT}/projects/{pid}/faults/{faults[1]['fault_id']}/revert")
    assert reverted["reverted_at"] and reverted["undo"]["args"] == {"link_id": link["link_id"], "filters": {}}
    assert user_rest.ok("GET", f"/v3/projects/{pid}/links/{link['link_id']}")["filters"] == {}

    ui.click(dialog_button("View in AI Chat"))
    ui.open_chat()
    ui.open_sidebar()
    ui.wait(lambda d: any(r.find_elements(By.CSS_SELECTOR, ".gns3-chat-session-list__fault-icon")
                          for r in ui.session_rows()), "no fault-injection session in the list")
