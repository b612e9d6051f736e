"""Graded labs for real: a scenario assigned, its checks failing, a student's fix, 100%, hints, results.

The real server and GNS3 users (a teacher with GNS3's "User" role, students with a
role that may read the project and use consoles but not modify it), the
OpenAI-compatible stub as the student's model, and real devices: a root bash in a
network namespace of the test's own on Host1's console port, a VPCS daemon on PC1's.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from mcp import types
from test_copilot_api import (  # noqa: F401  (fixtures)
    API,
    COPILOT,
    admin,
    chat_path,
    http,
    lab,
    sessions_path,
    stub,
    users,
)
from test_fault_revert import console
from test_fault_revert_linux import device_state, linux_lab, netns  # noqa: F401  (fixtures)
from test_mcp_endpoint import mcp_client, payload
from test_permissions_gns3 import person, role_id

from tests.support.openai_stub import reply, tool_call

pytestmark = pytest.mark.integration

CHECK_WORK = "gns3_check_work"
STUDENT_PRIVILEGES = ("Project.Audit", "Node.Audit", "Node.Console", "Link.Audit")


async def student_role(admin: API) -> str:
    """A role that may read projects and use their consoles, not modify them (a student's)."""
    name = f"Student-{uuid.uuid4().hex[:6]}"
    status, role = await admin.post("/v3/access/roles", {"name": name})
    assert status == 201, role
    status, privileges = await admin.get("/v3/access/privileges")
    assert status == 200
    for privilege in privileges:
        if privilege["name"] in STUDENT_PRIVILEGES:
            status, body = await admin.put(f"/v3/access/roles/{role['role_id']}/privileges/{privilege['privilege_id']}")
            assert status == 204, body
    return name


async def class_of(admin: API, gns3_server: Any, stub: Any) -> tuple[API, API, API]:
    teacher = (await person(admin, gns3_server, "teacher", "User", "/projects")).api
    role = await student_role(admin)
    assert await role_id(admin, role)
    alice = (await person(admin, gns3_server, "alice", role, "/projects")).api
    bob = (await person(admin, gns3_server, "bob", role, "/projects")).api
    for api in (alice, bob):
        await api.use_llm(stub)
    return teacher, alice, bob


def offered(request: dict[str, Any]) -> set[str]:
    """The tool names a model request offered."""
    return {t["function"]["name"] for t in request.get("tools") or []}


def teaching(project_id: str, tail: str) -> str:
    return f"{COPILOT}/projects/{project_id}/teaching{tail}"


async def copilot_config(api: API, stub: Any, project_id: str, args: dict[str, Any]) -> tuple[str, str]:
    """The student's model calls gns3_config_commands with ``args``; the student approves. (status, output)."""
    stub.enqueue(reply(tool_calls=[tool_call("gns3_config_commands", args)]), "Done.")
    status, result = await api.post(chat_path(project_id), {"message": "please change it", "stream": False})
    assert status == 200 and result["status"] == "waiting_confirmation", result
    status, result = await api.post(sessions_path(project_id, result["session_id"], "/confirm"),
                                    {"approved": True, "stream": False, "approval_id": result["approval"]["approval_id"]})
    assert status == 200, result
    status, history = await api.get(sessions_path(project_id, result["session_id"], "/history"))
    (answered,) = [m for m in history["messages"] if m["role"] == "tool"]
    return answered["status"], answered["content"]


async def test_a_linux_lab_is_graded_from_fault_to_full_marks(gns3_server, admin, stub, linux_lab, tmp_path):
    project_id, shell = linux_lab
    teacher, alice, bob = await class_of(admin, gns3_server, stub)

    # No lab assigned: the student's runs are not offered gns3_check_work.
    stub.enqueue("Nothing to check.")
    status, answer = await alice.post(chat_path(project_id), {"message": "check my work", "stream": False})
    assert status == 200 and CHECK_WORK not in offered(stub.requests[-1]), answer

    # A student may not assign; the teacher assigns, and the answer comes once the fault shows.
    body = {"scenario_ids": ["linux-wrong-gateway"], "nodes": {"host": "Host1"}, "time_limit_minutes": 30}
    status, refused = await alice.post(teaching(project_id, "/assignments"), body)
    assert status == 403 and refused["code"] == "teaching_forbidden", refused
    status, made = await teacher.post(teaching(project_id, "/assignments"), body)
    assert status == 201, made
    (assignment,) = made
    assert assignment["broken"] is True and assignment["nodes"] == {"host": "Host1"}
    assignment_id = assignment["assignment_id"]
    assert "default via 10.0.0.250 dev eth0" in (await device_state(shell, tmp_path))[2]

    # The student's view: the brief, no nodes, params, faults or solution anywhere.
    status, seen = await alice.get(teaching(project_id, "/assignments"))
    assert status == 200 and [a["assignment_id"] for a in seen] == [assignment_id], seen
    assert "fault_ids" not in seen[0] and "params" not in seen[0]
    status, faults = await alice.get(f"{COPILOT}/projects/{project_id}/faults")
    assert status == 200 and faults == [], faults
    status, teacher_faults = await teacher.get(f"{COPILOT}/projects/{project_id}/faults")
    (fault,) = teacher_faults
    assert fault["undo"]["args"]["commands"] == ["ip route replace default via 10.0.0.254 dev eth0"]
    status, refused = await alice.post(f"{COPILOT}/projects/{project_id}/faults/{fault['fault_id']}/revert")
    assert status == 404, refused

    # Checked while the fault is there: 0 %, each check by kind and device, nothing it expects.
    status, graded = await alice.post(teaching(project_id, "/check"), {})
    assert status == 200, graded
    assert [(g["score"], g["passed"], g["total"]) for g in graded] == [(0.0, 0, 1)]
    assert graded[0]["checks"] == [{"device": "Host1", "kind": "route", "passed": False, "status": "fail"}]

    # Hints, in order, each once; then no more.
    served = []
    for level in (1, 2, 3):
        status, hint = await alice.post(teaching(project_id, f"/assignments/{assignment_id}/hint"))
        assert status == 200 and hint["level"] == level and hint["remaining"] == 3 - level, hint
        served.append(hint["hint"])
    status, body_ = await alice.post(teaching(project_id, f"/assignments/{assignment_id}/hint"))
    assert status == 409 and body_["code"] == "no_more_hints", body_
    assert not any("10.0.0.254" in h for h in served)

    # The copilot refuses to replay the recorded undo for the student; nothing is sent.
    status, output = await copilot_config(alice, stub, project_id, fault["undo"]["args"])
    assert status == "error" and "does not apply the solution for you" in output, output
    assert "default via 10.0.0.250 dev eth0" in (await device_state(shell, tmp_path))[2]

    # The student's own fix, approved, through the copilot's tools: full marks.
    own = {"device": "Host1", "driver": "linux", "commands": ["ip route change default via 10.0.0.254"]}
    status, output = await copilot_config(alice, stub, project_id, own)
    assert status == "success", output
    status, graded = await alice.post(teaching(project_id, "/check"), {"assignment_id": assignment_id})
    assert status == 200 and [(g["score"], g["passed"]) for g in graded] == [(100.0, 1)], graded

    # "Check my work" in the chat: the model calls gns3_check_work, offered now that a lab is assigned.
    stub.enqueue(reply(tool_calls=[tool_call(CHECK_WORK, {})]), "Full marks.")
    status, answer = await alice.post(chat_path(project_id), {"message": "check my work", "stream": False})
    assert status == 200 and answer["content"] == "Full marks.", answer
    assert CHECK_WORK in offered(stub.requests[-2])
    told = json.loads(stub.requests[-1]["messages"][-1]["content"])
    assert [(a["score"], a["checks"]) for a in told["assignments"]] == [
        (100.0, [{"device": "Host1", "kind": "route", "passed": True, "status": "pass"}])]

    everything = json.dumps([seen, graded, served, told])
    assert "10.0.0.254" not in everything and "ip route replace" not in everything

    # The teacher sees every attempt, the hints used, the time; a student only their own.
    status, results = await teacher.get(teaching(project_id, "/results"))
    assert status == 200 and results["teacher"] is True, results
    (row,) = results["results"]
    assert row["student"].startswith("alice") and [a["score"] for a in row["attempts"]] == [0.0, 100.0, 100.0]
    assert row["hints_used"] == 3 and row["best_score"] == 100.0 and row["solved_seconds"] > 0
    assert row["in_time"] is True and row["attempts"][0]["checks"][0]["expected"] == "present via 10.0.0.254"
    status, theirs = await bob.get(teaching(project_id, "/results"))
    assert status == 200 and theirs == {"teacher": False, "results": []}, theirs
    status, mine = await alice.get(teaching(project_id, "/results"))
    assert [r["student"] for r in mine["results"]] == [row["student"]]
    assert "expected" not in json.dumps(mine)
    status, text = await teacher.call("GET", teaching(project_id, "/results.csv"))
    assert status == 200 and row["student"] in str(text) and "100.0" in str(text), text
    status, refused = await alice.call("GET", teaching(project_id, "/results.csv"))
    assert status == 403, refused


async def test_a_vpcs_dns_fault_assigned_from_the_inject_dialog_fails_then_passes_once_the_student_fixes_it(
        gns3_server, admin, stub, lab, tmp_path):
    project_id, vpcs = lab
    teacher, alice, _ = await class_of(admin, gns3_server, stub)
    await console(vpcs, tmp_path, ["ip 10.0.0.1/24 10.0.0.254", "ip dns 10.0.0.53"], "config")
    # From GNS3 3.1's Inject Fault dialog: its message names the scenario (PC1 is matched by its family).
    inject = f"{COPILOT}/projects/{project_id}/chat/inject"
    status, refused = await alice.post(inject, {"message": "scenario: vpcs-wrong-dns", "stream": False})
    assert status == 403 and refused["code"] == "teaching_forbidden", refused
    status, said = await teacher.post(inject, {"message": "scenario: vpcs-wrong-dns", "stream": False})
    assert status == 200 and said["content"].startswith("Assigned vpcs-wrong-dns on PC1"), said
    status, made = await teacher.get(teaching(project_id, "/assignments"))
    assert [(a["scenario_id"], a["nodes"]) for a in made] == [("vpcs-wrong-dns", {"pc": "PC1"})], made
    assert "10.0.0.99" in await console(vpcs, tmp_path, ["show ip"])
    status, graded = await alice.post(teaching(project_id, "/check"), {})
    assert [g["score"] for g in graded] == [0.0], graded
    # The student types the fix on the PC's console, as in class.
    await console(vpcs, tmp_path, ["ip dns 10.0.0.53"], "config")
    status, graded = await alice.post(teaching(project_id, "/check"), {})
    assert status == 200 and [g["score"] for g in graded] == [100.0], graded


async def test_over_mcp_a_teachers_agent_assigns_and_collects_and_a_students_agent_cannot_replay_the_fix(
        gns3_server, admin, stub, lab, tmp_path):
    project_id, vpcs = lab
    teacher, alice, _ = await class_of(admin, gns3_server, stub)
    await console(vpcs, tmp_path, ["ip 10.0.0.1/24 10.0.0.254"], "config")

    async def accept(context: Any, params: Any) -> Any:
        return types.ElicitResult(action="accept", content={"approve": True})

    async with mcp_client(gns3_server.base_url, teacher.token, elicitation=accept) as client:
        listed = payload(await client.call_tool("gns3_lab_scenarios", {"project_id": project_id}))
        (gateway,) = [s for s in listed["scenarios"] if s["id"] == "vpcs-wrong-gateway"]
        assert set(gateway) == {"id", "title", "level", "topic", "roles", "params", "time_limit_minutes"}
        made = await client.call_tool("gns3_lab_assign", {"project_id": project_id,
                                                          "scenario_ids": ["vpcs-wrong-gateway"]})
        assert not made.isError, payload(made)
        (assignment,) = payload(made)["assignments"]
        assert assignment["broken"] is True and assignment["nodes"] == {"pc": "PC1"}
    assert "10.0.0.250" in await console(vpcs, tmp_path, ["show ip"])

    async with mcp_client(gns3_server.base_url, alice.token, elicitation=accept) as client:
        refused = await client.call_tool("gns3_lab_assign", {"project_id": project_id, "scenario_ids": ["vpcs-wrong-dns"]})
        assert refused.isError and "teacher" in payload(refused), payload(refused)
        checked = payload(await client.call_tool("gns3_check_work", {"project_id": project_id}))
        assert [a["score"] for a in checked["assignments"]] == [0.0]
        replay = await client.call_tool("gns3_config_commands", {
            "project_id": project_id, "device": "PC1", "driver": "vpcs", "commands": ["ip 10.0.0.1/24 10.0.0.254"]})
        assert replay.isError and "does not apply the solution for you" in str(payload(replay)), payload(replay)
        assert "10.0.0.250" in await console(vpcs, tmp_path, ["show ip"])
        mine = payload(await client.call_tool("gns3_lab_results", {"project_id": project_id}))
        assert mine["teacher"] is False and [len(r["attempts"]) for r in mine["results"]] == [1]

    async with mcp_client(gns3_server.base_url, teacher.token) as client:
        collected = payload(await client.call_tool("gns3_lab_results", {"project_id": project_id}))
        (row,) = collected["results"]
        assert collected["teacher"] is True and row["student"].startswith("alice") and row["best_score"] == 0.0
