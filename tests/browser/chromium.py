"""Headless Chromium for the panel's tests: Debian's ``chromium`` and ``chromium-driver``.

Selenium is given both binaries explicitly and ``SE_OFFLINE`` is set, so Selenium
Manager never looks anything up or downloads a browser or driver. Every driver
gets a fresh profile directory. Waits are explicit (WebDriverWait on DOM state);
nothing here sleeps.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.common.exceptions import (
    JavascriptException,
    StaleElementReferenceException,
    TimeoutException,
    WebDriverException,
)
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-default-apps",
    "--password-store=basic",
    "--lang=en-US",
    # Only loopback resolves: pages under test (GNS3's web UI loads an analytics script)
    # never reach anything but the servers the tests run.
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost",
)
WAIT_SECONDS = 60.0  # generous: waits end when the state is there; a saturated machine renders slowly


def missing_binaries() -> list[str]:
    return [path for path in (CHROMIUM, CHROMEDRIVER) if shutil.which(path) is None]


def start_chromium(profile_dir: Path, *, width: int = 1280, height: int = 800) -> WebDriver:
    """A headless Chromium with a fresh profile in ``profile_dir`` (created if needed)."""
    missing = missing_binaries()
    if missing:
        raise RuntimeError(
            f"{', '.join(missing)} not found: install Debian's chromium and chromium-driver "
            "(scripts/test does it when run as root)"
        )
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager: never reach the network
    os.environ["SE_AVOID_STATS"] = "true"
    profile_dir.mkdir(parents=True, exist_ok=True)
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile_dir}")
    options.add_argument(f"--window-size={width},{height}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    driver.set_script_timeout(30)
    return driver


@contextlib.contextmanager
def chromium(profile_dir: Path, *, width: int = 1280, height: int = 800) -> Iterator[WebDriver]:
    """:func:`start_chromium` for the length of a ``with`` block (a module fixture's browser)."""
    driver = start_chromium(profile_dir, width=width, height=height)
    try:
        yield driver
    finally:
        driver.quit()


def wait_for(driver: WebDriver, condition: Callable[[WebDriver], Any], message: str = "",
             timeout: float = WAIT_SECONDS) -> Any:
    """Wait until ``condition(driver)`` is truthy; stale elements, script errors and missing items just mean "not yet"."""
    wait = WebDriverWait(driver, timeout, poll_frequency=0.05,
                         ignored_exceptions=(StaleElementReferenceException, JavascriptException, IndexError))
    try:
        return wait.until(condition, message)
    except TimeoutException as exc:
        raise TimeoutException(f"{message}\n{page_state(driver)}") from exc


def page_state(driver: WebDriver) -> str:
    """What the page showed (URL, visible text, console), for a failure message; a screenshot
    goes to ``$PANEL_FAILURE_DIR`` when set."""
    try:
        text = driver.execute_script("return document.body ? document.body.innerText : ''") or ""
        logs = [e["message"] for e in driver.get_log("browser")][-10:]
        shot = os.environ.get("PANEL_FAILURE_DIR")
        if shot:
            Path(shot).mkdir(parents=True, exist_ok=True)
            driver.save_screenshot(str(Path(shot) / f"failure-{len(os.listdir(shot))}.png"))
        return f"url: {driver.current_url}\npage text: {text[-1500:]}\nconsole: {logs}"
    except WebDriverException as exc:  # the page itself may be the problem
        return f"(page state unavailable: {exc.msg})"


def visible(element: WebElement) -> bool:
    try:
        return element.is_displayed()
    except StaleElementReferenceException:
        return False
