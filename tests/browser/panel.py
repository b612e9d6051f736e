"""The copilot panel as a test sees it: a page object over Selenium.

Methods act like a user (typing, clicking, keys) and wait for what a user would
see, with explicit waits on DOM state (see ``chromium.wait_for``).
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import Select

from .chromium import visible, wait_for


class Panel:
    def __init__(self, driver: WebDriver, base_url: str) -> None:
        self.driver = driver
        self.base_url = base_url.rstrip("/")

    # ------------------------------------------------------------ elements

    def by_id(self, element_id: str) -> WebElement:
        return self.driver.find_element(By.ID, element_id)

    def css(self, selector: str) -> list[WebElement]:
        return self.driver.find_elements(By.CSS_SELECTOR, selector)

    def js(self, script: str, *args: object) -> object:
        return self.driver.execute_script(script, *args)

    # ------------------------------------------------------------ navigation

    def open(self, query: str = "") -> None:
        self.driver.get(f"{self.base_url}/copilot/{query}")
        wait_for(self.driver, lambda d: self.js("return document.getElementById('boot').hidden === true"),
                 "the panel did not finish loading")

    def reload(self) -> None:
        self.driver.refresh()
        wait_for(self.driver, lambda d: self.js("return document.getElementById('boot').hidden === true"),
                 "the panel did not finish loading after a reload")

    def set_viewport(self, width: int, height: int) -> None:
        self.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                    {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        wait_for(self.driver, lambda d: self.js("return window.innerWidth") == width, f"viewport not {width} wide")

    def query(self) -> dict[str, str]:
        return {k: v[0] for k, v in parse_qs(urlparse(self.driver.current_url).query).items()}

    # ------------------------------------------------------------ sign-in

    def sign_in(self, username: str, password: str) -> None:
        wait_for(self.driver, lambda d: visible(self.by_id("login-view")), "no sign-in form")
        self.by_id("login-username").clear()
        self.by_id("login-username").send_keys(username)
        self.by_id("login-password").send_keys(password, Keys.ENTER)
        self.wait_signed_in()

    def wait_signed_in(self) -> None:
        wait_for(self.driver, lambda d: visible(self.by_id("main-view")), "not signed in")
        wait_for(self.driver, lambda d: self.js("return document.body.dataset.ready === 'true'"),
                 "the panel did not finish loading projects and settings")

    def sign_out(self) -> None:
        self.by_id("logout-button").click()
        wait_for(self.driver, lambda d: visible(self.by_id("login-view")), "still signed in")

    # ------------------------------------------------------------ projects and sessions

    def choose_project(self, project_id: str) -> None:
        Select(self.by_id("project-select")).select_by_value(project_id)
        wait_for(self.driver, lambda d: self.query().get("project_id") == project_id, "project not chosen")
        wait_for(self.driver, lambda d: self.by_id("prompt").is_enabled(), "composer not enabled")

    def session_titles(self) -> list[str]:
        return [e.text for e in self.css("#session-list .session-open")]

    def current_session(self) -> str | None:
        return self.query().get("session_id")

    def session_item(self, session_id: str) -> WebElement:
        return self.driver.find_element(By.CSS_SELECTOR, f'#session-list li[data-session-id="{session_id}"]')

    def wait_session_listed(self, session_id: str) -> WebElement:
        return wait_for(self.driver, lambda d: self.css(f'#session-list li[data-session-id="{session_id}"]'),
                        f"session {session_id} not in the list")[0]

    # ------------------------------------------------------------ chat

    def type_message(self, text: str) -> None:
        prompt = self.by_id("prompt")
        prompt.clear()
        prompt.send_keys(text)

    def send(self, text: str) -> None:
        """Type and press Enter (as a user would); waits for the run to start."""
        before = len(self.css(".message-assistant"))
        self.type_message(text)
        self.by_id("prompt").send_keys(Keys.ENTER)
        wait_for(self.driver, lambda d: len(self.css(".message-assistant")) > before or visible(self.by_id("notice")),
                 "the message was not sent")

    def last_turn(self) -> WebElement:
        return self.css(".message-assistant")[-1]

    def wait_turn_status(self, status: str = "completed", timeout: float = 30.0) -> WebElement:
        wait_for(self.driver, lambda d: self.css(".message-assistant") and
                 self.last_turn().get_attribute("data-status") == status and
                 not self.js("return document.body.classList.contains('running')"),
                 f"the answer did not end as {status}", timeout)
        return self.last_turn()

    def turn_text(self, turn: WebElement) -> str:
        return " ".join(e.text for e in turn.find_elements(By.CSS_SELECTOR, ".bubble"))

    def notice(self) -> str:
        wait_for(self.driver, lambda d: visible(self.by_id("notice")), "no notice shown")
        return self.by_id("notice-text").text

    def meter(self) -> dict[str, str]:
        meter = self.by_id("meter")
        return {"text": self.by_id("meter-text").text, "total": meter.get_attribute("data-total") or "",
                "percent": meter.get_attribute("data-percent") or "", "notes": self.by_id("meter-notes").text,
                "state": meter.get_attribute("data-state") or ""}

    # ------------------------------------------------------------ approvals

    def wait_confirm_card(self, timeout: float = 30.0) -> WebElement:
        """The approve/reject card still waiting for a decision (the last one)."""
        return wait_for(self.driver, lambda d: self.css('.confirm-card[data-state="waiting"]'),
                        "no approval card waiting", timeout)[-1]

    def confirm_card_focused(self) -> bool:
        return bool(self.js("const c = document.querySelectorAll('.confirm-card[data-state=\"waiting\"]');"
                            "return c.length > 0 && document.activeElement === c[c.length - 1]"))
