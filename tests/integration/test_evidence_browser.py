"""The panel shows an answer's evidence (real Chromium, real server, stub LLM, a real VPCS console).

The stub reads PC1 (a VPCS daemon serves its console port) and answers with a
claim the read shows and one about PC2, which nothing read. The panel puts a
mark after each sentence, links the first to the read (device, command, when)
whose output opens on a click, and marks the second "not verified"; a reload
draws the same from the history.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement

# The browser, the server user, the stub and the panel fixtures live with the panel tests.
from test_panel_browser import (  # noqa: F401
    admin_rest,
    driver,
    panel,
    project,
    signed_in,
    stub,
    user_rest,
    with_llm,
)
from vpcs_process import VPCSProcess

from tests.browser.chromium import visible, wait_for
from tests.browser.panel import Panel
from tests.browser.rest import Rest
from tests.support.openai_stub import OpenAIStub, reply, tool_call

pytestmark = pytest.mark.integration

VERIFIED = "PC1's MAC address is 00:50:79:66:68:00 [E1]."
UNREAD = "PC2 has the address 10.0.0.2/24."


def marks(panel: Panel, turn: WebElement) -> list[tuple[str, str, str]]:
    """Each mark in the answer's text: its verdict, its text, and the sentence's text just before it."""
    return [(str(verdict), str(text), str(before)) for verdict, text, before in panel.js(
        "return [...arguments[0].querySelectorAll('.bubble.markdown .claim-mark')].map(m => "
        "[m.dataset.verdict, m.textContent, (m.previousSibling?.textContent || '').slice(-24)])", turn)]


def check_evidence(panel: Panel, turn: WebElement, first_id: str) -> None:
    wait_for(panel.driver, lambda d: turn.find_elements(By.CSS_SELECTOR, ".evidence-card"), "no evidence card")
    assert marks(panel, turn) == [
        ("verified", "\u2713", VERIFIED[-24:]),
        ("unverified", "? not verified", UNREAD[-24:]),
    ]
    card = turn.find_element(By.CSS_SELECTOR, ".evidence-card")
    assert card.get_attribute("open") is not None  # something is not verified: shown without a click
    claims = card.find_elements(By.CSS_SELECTOR, ".evidence-claim")
    assert [(c.get_attribute("data-verdict"), c.find_element(By.CSS_SELECTOR, "q").text) for c in claims] == [
        ("verified", VERIFIED), ("unverified", UNREAD)]
    assert claims[1].find_element(By.CSS_SELECTOR, ".evidence-verdict").text == "not verified"
    assert "no tool read PC2 in this turn" in claims[1].text
    (link,) = claims[0].find_elements(By.CSS_SELECTOR, ".evidence-link")
    assert link.text.startswith(f"{first_id}: PC1 \u00b7 show ip \u00b7 ")  # device, command, when
    assert not claims[1].find_elements(By.CSS_SELECTOR, ".evidence-link")
    output = card.find_element(By.CSS_SELECTOR, f'.evidence-read[data-evidence-id="{first_id}"] .evidence-output')
    assert not visible(output)
    link.click()  # the read's output, fetched from the session's evidence
    wait_for(panel.driver, lambda d: "00:50:79:66:68:00" in (output.get_attribute("textContent") or ""),
             "the read's output did not open")
    assert visible(output) and "IP/MASK" in output.get_attribute("textContent")


def test_the_answer_links_its_claims_to_the_reads_and_marks_what_was_not_read(
        signed_in: Panel, stub: OpenAIStub, project: dict[str, Any], admin_rest: Rest, tmp_path: Path) -> None:
    panel = signed_in
    pc1 = next(n for n in admin_rest.ok("GET", f"/v3/projects/{project['project_id']}/nodes") if n["name"] == "PC1")
    vpcs = VPCSProcess.start(tmp_path, pc1["console"])
    try:
        stub.enqueue(reply("Reading PC1.", tool_calls=[tool_call("gns3_show_commands",
                                                                 {"devices": ["PC1"], "commands": ["show ip"]})]),
                     f"{VERIFIED} {UNREAD}")
        panel.send("What are PC1's MAC and PC2's address?")
        turn = panel.wait_turn_status("completed")
        check_evidence(panel, turn, "E1")

        panel.reload()  # drawn again from the history
        wait_for(panel.driver, lambda d: panel.css(".message-assistant .evidence-card"),
                 "the history did not come back with its evidence after a reload")
        check_evidence(panel, panel.last_turn(), "E1")
    finally:
        vpcs.stop()
