"""Changes on a VPCS (a real VPCS daemon on PC1's console): baselined, applied, diffed, verified, restored.

The real server and GNS3 users, the scripted LLM proposing the change, the user
approving it with ``confirm``; PC1 is read on its own console outside the copilot
too (``test_fault_revert.console``). Then ``POST .../verify`` runs checks on demand
and ``POST .../backups/{id}/restore`` puts back the addressing the backup holds.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from test_copilot_api import (  # noqa: F401  (fixtures)
    COPILOT,
    admin,
    http,
    lab,
    sessions_path,
    stub,
    users,
)
from test_fault_revert import addressing, console

from tests.support.openai_stub import reply, tool_call

pytestmark = pytest.mark.integration


async def approved_change(person: Any, stub: Any, project_id: str, call: dict[str, Any]) -> dict[str, Any]:
    """A turn in which the model proposes ``call`` and the user approves it: the tool result it was given."""
    stub.enqueue(reply(tool_calls=[tool_call("gns3_config_commands", call)]))
    session_id = str(uuid.uuid4())
    result = await person.chat(project_id, "Change it", session_id=session_id)
    assert result["status"] == "waiting_confirmation", result
    stub.enqueue("Done.")
    status, done = await person.post(sessions_path(project_id, session_id, "/confirm"),
                                     {"approved": True, "stream": False})
    assert status == 200, done
    (told,) = [json.loads(m["content"]) for m in stub.requests[-1]["messages"] if m["role"] == "tool"]
    return dict(told)


async def test_a_vpcs_change_is_verified_and_its_backup_restored(users, stub, admin, lab, tmp_path):
    project_id, vpcs = lab
    person, other = await users("vpcs_changer"), await users("vpcs_other")
    await person.use_llm(stub, context_limit=128)
    await console(vpcs, tmp_path, ["ip 10.0.0.1/24 10.0.0.254"], "config")
    before = addressing(await console(vpcs, tmp_path, ["show ip"]))

    call = {"device": "PC1", "commands": ["ip 10.0.0.7/24 10.0.0.254"]}
    change = (await approved_change(person, stub, project_id, call))["change"]
    assert any(line.startswith("-IP/MASK") and "10.0.0.1/24" in line for line in change["diff"]["config"])
    assert any(line.startswith("+IP/MASK") and "10.0.0.7/24" in line for line in change["diff"]["config"])
    assert {(d["aspect"], d["before"], d["after"]) for d in change["diff"]["state"]} >= {
        ("interfaces", "up 10.0.0.1/24", "up 10.0.0.7/24")}
    assert change["verified"] == "pass", change["checks"]
    assert {v["subject"]: v["status"] for v in change["checks"]["checks"]}["PC1: address 10.0.0.7/24"] == "pass"
    assert change["rollback"]["commands"][:2] == ["clear ip", "ip 10.0.0.1/24 10.0.0.254"]
    assert addressing(await console(vpcs, tmp_path, ["show ip"]))["IP/MASK"] == "10.0.0.7/24"

    # Checks on demand through the API: verdicts with the values read; a line not understood is a 422.
    status, report = await person.post(f"{COPILOT}/projects/{project_id}/verify",
                                       {"checks": ["PC1 address 10.0.0.7/24", "PC1 address 10.0.0.1/24"]})
    assert status == 200, report
    assert [v["status"] for v in report["checks"]] == ["pass", "fail"] and report["passed"] is False
    status, bad = await person.post(f"{COPILOT}/projects/{project_id}/verify", {"checks": ["PC1 teleport 1.2.3.4"]})
    assert status == 422 and "unknown kind 'teleport'" in bad["message"], bad

    # The backup taken before the change: listed, restorable by its owner's POST (their approval).
    status, backups = await person.get(f"{COPILOT}/projects/{project_id}/backups")
    assert status == 200 and backups[0]["backup_id"] == change["backup"]["backup_id"], backups
    status, body = await person.post(f"{COPILOT}/projects/{project_id}/backups/{'0' * 8}/restore")
    assert status == 404, body
    status, restored = await person.post(f"{COPILOT}/projects/{project_id}/backups/{backups[0]['backup_id']}/restore")
    assert status == 200 and restored["commands"][:2] == ["clear ip", "ip 10.0.0.1/24 10.0.0.254"], restored
    assert addressing(await console(vpcs, tmp_path, ["show ip"])) == before
    status, changes = await person.get(f"{COPILOT}/projects/{project_id}/changes")
    assert status == 200 and changes[-1]["commands"] == call["commands"], changes
    status, theirs = await other.get(f"{COPILOT}/projects/{project_id}/changes")
    assert status == 200 and theirs == [], theirs  # another user's changes are not listed to them

    status, entries = await admin.get(f"{COPILOT}/console/audit?session_id=restore-{backups[0]['backup_id']}")
    assert status == 200 and {e["approval_id"] for e in entries} == {f"restore:{backups[0]['backup_id']}"}, entries


async def test_a_rollback_refuses_a_vpcs_changed_since_and_runs_on_one_as_the_change_left_it(users, stub, lab,
                                                                                               tmp_path):
    """A recorded inverse (``clear ip`` and the addressing typed again) would throw away what was set since."""
    project_id, vpcs = lab
    person = await users("vpcs_rollbacker")
    await person.use_llm(stub, context_limit=128)
    await console(vpcs, tmp_path, ["ip 10.0.0.1/24 10.0.0.254"], "config")
    change = (await approved_change(person, stub, project_id,
                                    {"device": "PC1", "commands": ["ip 10.0.0.7/24 10.0.0.254"]}))["change"]
    assert set(change["rollback"]["expects"]) == {"commands", "after"}
    await console(vpcs, tmp_path, ["ip dns 10.0.0.53"], "config")  # changed since, outside the copilot
    path = f"{COPILOT}/projects/{project_id}/changes/{change['change_id']}/rollback"
    status, refused = await person.post(path)
    assert status == 409 and refused["code"] == "change_not_rollbackable", refused
    assert "PC1 no longer holds what change" in refused["message"], refused
    assert addressing(await console(vpcs, tmp_path, ["show ip"]))["DNS"] == "10.0.0.53"  # nothing was run

    await console(vpcs, tmp_path, ["clear ip", "ip 10.0.0.7/24 10.0.0.254"], "config")  # as the change left it
    status, done = await person.post(path)
    assert status == 200 and done["result"]["status"] == "ok", done
    assert addressing(await console(vpcs, tmp_path, ["show ip"]))["IP/MASK"] == "10.0.0.1/24"
