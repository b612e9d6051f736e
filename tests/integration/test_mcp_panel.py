"""The panel's MCP settings in a real Chromium: the endpoint, a key created by its button, approvals.

The key the panel shows (once) is then used by the official MCP client against
the same server, and revoked with the panel's button; an MCP call waiting for
approval is approved in the panel and then runs for the client.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select
from test_mcp_endpoint import READ_ONLY_TOOLS, mcp_client, refused

from tests.browser.chromium import chromium, visible, wait_for
from tests.browser.panel import Panel
from tests.browser.rest import Rest

pytestmark = pytest.mark.integration

MCP = "/v3/copilot/mcp"


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    with chromium(tmp_path_factory.mktemp("chromium-profile")) as browser:
        yield browser


@pytest.fixture
def settings(driver: WebDriver, gns3_server: Any) -> Iterator[Panel]:
    """The panel signed in as admin with the settings dialog open; no JavaScript error afterwards."""
    panel = Panel(driver, gns3_server.base_url)
    panel.set_viewport(1280, 800)
    driver.get_log("browser")
    panel.open()
    if visible(panel.by_id("login-view")):
        panel.sign_in(gns3_server.username, gns3_server.password)
    panel.wait_signed_in()
    panel.by_id("settings-button").click()
    wait_for(driver, lambda d: panel.by_id("mcp-endpoint").get_attribute("value"), "the MCP endpoint is not shown")
    yield panel
    errors = [e["message"] for e in driver.get_log("browser")
              if e.get("level") == "SEVERE" and e.get("source") == "javascript"]
    assert not errors, f"JavaScript errors in the panel: {errors}"


def key_rows(panel: Panel) -> dict[str, str]:
    return {row.get_attribute("data-key-id"): row.text for row in panel.css("#mcp-keys li")}


def test_the_panel_shows_the_endpoint_and_creates_a_key_that_works_until_revoked(settings: Panel, gns3_server):
    panel = settings
    assert panel.by_id("mcp-endpoint").get_attribute("value") == gns3_server.base_url + MCP
    panel.by_id("mcp-create-key").click()  # no name: said so, nothing created
    wait_for(panel.driver, lambda d: "Name the key" in panel.by_id("mcp-status").text, "no message for a missing name")
    before = key_rows(panel)

    panel.by_id("mcp-key-name").send_keys("browser key")
    Select(panel.by_id("mcp-key-scope")).select_by_value("read_only")
    panel.by_id("mcp-create-key").click()
    wait_for(panel.driver, lambda d: visible(panel.by_id("mcp-new-key-box")), "the new key is not shown")
    key = panel.by_id("mcp-new-key").get_attribute("value")
    assert key.startswith("gns3c_mcp_") and "not shown again" in panel.by_id("mcp-status").text
    wait_for(panel.driver, lambda d: len(key_rows(panel)) == len(before) + 1, "the key is not listed")
    (key_id,) = set(key_rows(panel)) - set(before)
    assert "browser key" in key_rows(panel)[key_id] and "read-only" in key_rows(panel)[key_id]
    assert key not in panel.by_id("mcp-keys").text  # listed by its prefix only

    async def tools() -> set[str]:
        async with mcp_client(gns3_server.base_url, key) as client:
            return {t.name for t in (await client.list_tools()).tools}

    assert asyncio.run(tools()) == READ_ONLY_TOOLS

    row = next(r for r in panel.css("#mcp-keys li") if r.get_attribute("data-key-id") == key_id)
    row.find_element("css selector", "button").click()
    wait_for(panel.driver, lambda d: "revoked" in key_rows(panel).get(key_id, ""), "the key is not shown revoked")

    assert asyncio.run(refused(gns3_server.base_url, key)) == {401}
    # Reopened, the dialog no longer shows the key itself.
    panel.by_id("settings-cancel").click()
    panel.by_id("settings-button").click()
    wait_for(panel.driver, lambda d: not visible(panel.by_id("mcp-new-key-box")), "the key is still shown")
    assert panel.by_id("mcp-new-key").get_attribute("value") == ""


def test_an_mcp_call_waiting_for_approval_is_approved_in_the_panel(settings: Panel, gns3_server):
    panel = settings
    rest = Rest(gns3_server.base_url).login(gns3_server.username, gns3_server.password)
    project = rest.ok("POST", "/v3/projects", {"name": "mcp-panel-approval"})
    call = {"device": "PC1", "commands": ["ip 10.0.0.5/24"], "project_id": project["project_id"]}
    try:
        async def ask() -> str:
            async with mcp_client(gns3_server.base_url, rest.token) as client:
                result = await client.call_tool("gns3_config_commands", call)
                return result.structuredContent["approval_id"]

        approval_id = asyncio.run(ask())
        panel.by_id("mcp-refresh").click()
        wait_for(panel.driver, lambda d: any(r.get_attribute("data-approval-id") == approval_id
                                             for r in panel.css("#mcp-approvals li")), "the approval is not listed")
        row = next(r for r in panel.css("#mcp-approvals li") if r.get_attribute("data-approval-id") == approval_id)
        assert "gns3_config_commands on PC1: ip 10.0.0.5/24" in row.text
        row.find_element("css selector", "button.primary").click()  # Approve
        wait_for(panel.driver, lambda d: "Approved" in panel.by_id("mcp-status").text, "not approved")
        (decided,) = [a for a in rest.ok("GET", f"{MCP}/approvals") if a["approval_id"] == approval_id]
        assert decided["state"] == "approved"
    finally:
        rest.call("DELETE", f"/v3/projects/{project['project_id']}")
