"""The panel's Labs dialog in a real Chromium: a teacher assigns, a student checks, asks hints, fixes, scores 100%.

The real server and GNS3 users (the panel tests' user, with GNS3's "User" role, is the
teacher; a student has a role that may read the project and use consoles, not modify
it), a VPCS daemon on PC1's console port, the fault injected through the copilot's
tools by the teacher's click, the student's fix typed on the console outside the
copilot. Whether a user is a teacher is the server's answer; the student's dialog
has no teacher control and no solution text.
"""

from __future__ import annotations

import asyncio
import tomllib
import uuid
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from test_fault_revert import console

# The browser, the server user, the stub and the panel fixtures live with the panel tests.
from test_panel_browser import (  # noqa: F401
    PASSWORD,
    USER,
    admin_rest,
    driver,
    panel,
    project,
    stub,
    user_rest,
)
from test_teaching_labs import STUDENT_PRIVILEGES
from vpcs_process import VPCSProcess

from gns3server.agent.gns3_copilot.teaching.catalogue import read_catalogue
from tests.browser.chromium import visible, wait_for
from tests.browser.panel import Panel
from tests.browser.rest import Rest

pytestmark = pytest.mark.integration

SCENARIO = "vpcs-wrong-dns"
LONG = 90.0  # an assignment waits up to 60 s for its fault to show


SHIPPED = resources.files("gns3server.agent.gns3_copilot.teaching") / "scenarios"


def scenario(scenario_id: str) -> dict[str, Any]:
    return next(s for s in tomllib.loads((SHIPPED / "vpcs.toml").read_text())["scenario"] if s["id"] == scenario_id)


@pytest.fixture(scope="module")
def student(admin_rest: Rest) -> Iterator[tuple[str, str]]:
    """A GNS3 user whose role may read projects and use their consoles, not modify them."""
    role = admin_rest.ok("POST", "/v3/access/roles", {"name": f"Student-{uuid.uuid4().hex[:6]}"})
    for privilege in admin_rest.ok("GET", "/v3/access/privileges"):
        if privilege["name"] in STUDENT_PRIVILEGES:
            admin_rest.ok("PUT", f"/v3/access/roles/{role['role_id']}/privileges/{privilege['privilege_id']}")
    name, password = f"student-{uuid.uuid4().hex[:6]}", "student-password-1"
    user_id = admin_rest.add_user(name, password, role=role["name"])
    yield name, password
    admin_rest.call("DELETE", f"/v3/access/users/{user_id}")
    admin_rest.call("DELETE", f"/v3/access/roles/{role['role_id']}")


@pytest.fixture
def pc1(admin_rest: Rest, project: dict[str, Any], tmp_path: Path) -> Iterator[VPCSProcess]:
    """A VPCS daemon on PC1's console port, addressed with the lab's DNS server."""
    node = next(n for n in admin_rest.ok("GET", f"/v3/projects/{project['project_id']}/nodes") if n["name"] == "PC1")
    vpcs = VPCSProcess.start(tmp_path, node["console"])
    try:
        asyncio.run(console(vpcs, tmp_path, ["ip 10.0.0.1/24 10.0.0.254", "ip dns 10.0.0.53"], "config"))
        yield vpcs
    finally:
        vpcs.stop()


def open_labs(panel: Panel, username: str, password: str, project_id: str, role: str) -> Any:
    """Sign in as ``username`` on the project and open the Labs dialog; wait for the server's verdict."""
    panel.open(f"?project_id={project_id}")
    if not visible(panel.by_id("login-view")):
        panel.sign_out()
    panel.sign_in(username, password)
    panel.by_id("labs-button").click()
    dialog = panel.by_id("labs-dialog")
    wait_for(panel.driver, lambda d: dialog.get_attribute("data-role") == role, f"the dialog is not a {role}'s")
    return dialog


def texts(dialog: Any, selector: str) -> list[str]:
    return [e.text for e in dialog.find_elements(By.CSS_SELECTOR, selector)]


def test_a_lab_assigned_in_the_panel_is_checked_hinted_fixed_and_listed_with_its_csv(
        panel: Panel, project: dict[str, Any], user_rest: Rest, student: tuple[str, str], pc1: VPCSProcess,
        tmp_path: Path) -> None:
    project_id = project["project_id"]
    wanted = scenario(SCENARIO)

    # The teacher: the catalogue with what each scenario needs; tick one, a time limit, assign.
    dialog = open_labs(panel, USER, PASSWORD, project_id, "teacher")
    wait_for(panel.driver, lambda d: dialog.find_elements(By.CSS_SELECTOR, ".labs-catalogue tbody tr"),
             "no catalogue")
    rows = {r.find_elements(By.TAG_NAME, "td")[1].text: r
            for r in dialog.find_elements(By.CSS_SELECTOR, ".labs-catalogue tbody tr")}
    assert len(rows) >= 30
    cells = [c.text for c in rows[SCENARIO].find_elements(By.TAG_NAME, "td")[1:]]
    assert cells == [SCENARIO, wanted["title"], "ccna", "pc (vpcs)"]
    rows[SCENARIO].find_element(By.CSS_SELECTOR, ".labs-pick").click()
    panel.by_id("labs-time-limit").send_keys("30")
    panel.by_id("labs-assign").click()
    wait_for(panel.driver, lambda d: wanted["title"] in " ".join(texts(dialog, ".labs-open td")),
             "the assignment is not listed", timeout=LONG)
    assert "Assigned vpcs-wrong-dns" in panel.by_id("labs-status").text
    assert "pc: PC1" in texts(dialog, ".labs-open td") and "30 min" in texts(dialog, ".labs-open td")
    assert "10.0.0.99" in asyncio.run(console(pc1, tmp_path, ["show ip"]))  # the fault is on the device

    # The student: the lab's title, brief and limit; no teacher control, no solution anywhere.
    name, password = student
    dialog = open_labs(panel, name, password, project_id, "student")
    lab = wait_for(panel.driver, lambda d: dialog.find_elements(By.CSS_SELECTOR, ".labs-lab"), "no lab shown")[0]
    assert lab.find_element(By.CSS_SELECTOR, ".labs-title").text == wanted["title"]
    assert lab.find_element(By.CSS_SELECTOR, ".labs-brief").text == "PC1 reaches servers by address but not by name."
    assert lab.find_element(By.CSS_SELECTOR, ".labs-limit").text == "Time limit: 30 min"
    for teacher_only in (".labs-pick", "#labs-assign", "#labs-draw", "#labs-csv", ".labs-open", ".labs-results"):
        assert not dialog.find_elements(By.CSS_SELECTOR, teacher_only), teacher_only

    def check(score: str) -> list[tuple[str, str]]:
        lab.find_element(By.CSS_SELECTOR, ".labs-check").click()
        wait_for(panel.driver, lambda d: [e.get_attribute("data-score") for e in
                                          lab.find_elements(By.CSS_SELECTOR, ".labs-score")] == [score],
                 f"no score {score}", timeout=LONG)
        return [(e.get_attribute("data-passed"), e.text) for e in lab.find_elements(By.CSS_SELECTOR, ".labs-checks li")]

    def hint(count: int) -> None:
        lab.find_element(By.CSS_SELECTOR, ".labs-hint").click()
        wait_for(panel.driver, lambda d: len(texts(lab, ".labs-hints li")) == count, f"no hint {count}")

    assert check("0") == [("false", "✗ fail: dns_server on PC1")]
    hint(1)
    hint(2)
    assert texts(lab, ".labs-hints li") == wanted["hints"][:2]
    asyncio.run(console(pc1, tmp_path, ["ip dns 10.0.0.53"], "config"))  # the student's fix, on the console
    assert check("100") == [("true", "✓ pass: dns_server on PC1")]
    hint(3)
    assert lab.find_element(By.CSS_SELECTOR, ".labs-hint-note").text == "That was the last hint."
    lab.find_element(By.CSS_SELECTOR, ".labs-hint").click()
    wait_for(panel.driver, lambda d: lab.find_element(By.CSS_SELECTOR, ".labs-hint-note").text == "No more hints.",
             "no 'no more hints'")
    seen = dialog.text
    for solution in ("10.0.0.53", "10.0.0.99", "ip dns", "expected"):
        assert solution not in seen, solution

    # The teacher: the student's attempts, score, hints and time; the CSV downloads; close.
    dialog = open_labs(panel, USER, PASSWORD, project_id, "teacher")
    row = wait_for(panel.driver, lambda d: dialog.find_elements(By.CSS_SELECTOR, ".labs-results tbody tr"),
                   "no results")[0]
    cells = [c.text for c in row.find_elements(By.TAG_NAME, "td")]
    assert cells[:6] == [name, SCENARIO, "2", "100%", "100%", "3"] and cells[6].endswith(" s") and cells[7] == "yes"
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    panel.driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
    panel.by_id("labs-csv").click()
    csv_file = downloads / f"results-{project_id}.csv"
    wait_for(panel.driver, lambda d: csv_file.is_file() and csv_file.read_text().count("\n") >= 2, "no CSV")
    header, line = csv_file.read_text().splitlines()[:2]
    assert header.startswith("assignment_id,scenario_id,student,attempts,best_score")
    assert f",{SCENARIO},{name},2,100.0,100.0,3," in line
    dialog.find_element(By.CSS_SELECTOR, ".labs-open button").click()
    wait_for(panel.driver, lambda d: "No open assignment." in texts(dialog, ".labs-none"), "not closed")
    assert not [a for a in user_rest.ok("GET", f"/v3/copilot/projects/{project_id}/teaching/assignments")
                if not a["closed_at"]]


def test_the_teacher_draws_n_scenarios_of_a_level_with_a_seed_from_the_panel(
        panel: Panel, project: dict[str, Any], user_rest: Rest, pc1: VPCSProcess) -> None:
    project_id = project["project_id"]
    # What that seed draws among the ccna scenarios a project of VPCS PCs can fill.
    catalogue = read_catalogue([Path(str(SHIPPED))])
    fits = [s for s in catalogue.by_level("ccna") if all(r.family == "vpcs" for r in s.roles.values())]
    expected = [s.id for s in catalogue.draw("ccna", 2, "class-a", fits)]

    dialog = open_labs(panel, USER, PASSWORD, project_id, "teacher")
    wait_for(panel.driver, lambda d: dialog.find_elements(By.CSS_SELECTOR, ".labs-catalogue tbody tr"),
             "no catalogue")
    panel.by_id("labs-seed").send_keys("class-a")
    panel.by_id("labs-count").clear()
    panel.by_id("labs-count").send_keys("0")  # refused in words, nothing assigned
    panel.by_id("labs-draw").click()
    wait_for(panel.driver, lambda d: panel.by_id("labs-status").text == "Count: a whole number from 1 to 20.",
             "a bad count was not refused")
    assert panel.by_id("labs-draw").is_enabled()
    assert not [a for a in user_rest.ok("GET", f"/v3/copilot/projects/{project_id}/teaching/assignments")
                if not a["closed_at"]]
    panel.by_id("labs-count").clear()
    panel.by_id("labs-count").send_keys("2")
    panel.by_id("labs-draw").click()
    wait_for(panel.driver, lambda d: panel.by_id("labs-status").text.startswith("Assigned "),
             "not assigned", timeout=2 * LONG)
    assert panel.by_id("labs-status").text == f"Assigned {', '.join(expected)}."
    rows = [[c.text for c in r.find_elements(By.TAG_NAME, "td")]
            for r in dialog.find_elements(By.CSS_SELECTOR, ".labs-open tbody tr")]
    assert sorted((r[1], r[5]) for r in rows) == sorted((i, "class-a") for i in expected)
    made = [a for a in user_rest.ok("GET", f"/v3/copilot/projects/{project_id}/teaching/assignments")
            if not a["closed_at"]]
    assert sorted(a["scenario_id"] for a in made) == sorted(expected)
    for assignment in made:  # leave the project with no open lab
        user_rest.ok("POST", f"/v3/copilot/projects/{project_id}/teaching/assignments/{assignment['assignment_id']}/close")
