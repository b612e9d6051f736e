"""Graded labs on real FRR routers: an FRR scenario breaks the network and its checks say so.

The network is ``frr_lab.FRRLab`` (three FRR 8.4 routers in namespaces of their own,
OSPF and eBGP) with each router's vtysh on its GNS3 node's console (``frr_project``);
the server, its users and RBAC are real, the LLM is the scripted stub. Each test
leaves the network as its baseline (``frr_restored``).
"""

from __future__ import annotations

import asyncio
import os

import pytest
from frr_project import frr_gns3, frr_lab, frr_restored  # noqa: F401  (fixtures)
from test_copilot_api import (  # noqa: F401  (fixtures)
    COPILOT,
    admin,
    http,
    stub,
    users,
)
from test_teaching_labs import class_of, copilot_config, teaching

from gns3server.agent.gns3_copilot.teaching.catalogue import SHIPPED, read_catalogue

pytestmark = pytest.mark.integration

ALL_FRR = sorted(s.id for s in read_catalogue([SHIPPED]).scenarios.values()
                 if {r.family for r in s.roles.values()} == {"frr"})
SAMPLE = ("frr-ospf-hello-mismatch", "frr-ospf-mtu-mismatch", "frr-bgp-prefix-list-in", "frr-redistribution-filtered")
"""One scenario per kind of check and protocol, for every run; each takes about a minute (a fault must show,
then heal), so the whole FRR catalogue (19) runs with TEACHING_ALL_SCENARIOS=1 (about 20 minutes)."""
FRR_SCENARIOS = ALL_FRR if os.environ.get("TEACHING_ALL_SCENARIOS") == "1" else sorted(SAMPLE)
MTU_LINK = {"r1": "R3", "r2": "R2"}
"""The MTU scenario's roles: R3's eth1 has the smaller MTU (its OSPF ignores the difference)."""


@pytest.mark.parametrize("scenario_id", FRR_SCENARIOS)
async def test_an_frr_scenario_fails_while_injected_and_passes_once_reverted(
        scenario_id, gns3_server, admin, stub, frr_lab, frr_gns3):
    project_id = frr_gns3.project_id
    teacher, alice, _ = await class_of(admin, gns3_server, stub)
    nodes = MTU_LINK if scenario_id == "frr-ospf-mtu-mismatch" else {"r1": "R1", "r2": "R2"}
    params = {"r1_if": "eth1", "r2_id": "10.255.0.2"} if scenario_id == "frr-ospf-mtu-mismatch" else {}
    status, made = await teacher.post(teaching(project_id, "/assignments"),
                                      {"scenario_ids": [scenario_id], "nodes": nodes, "params": params})
    assert status == 201, made
    (assignment,) = made
    assert assignment["broken"] is True, assignment
    status, graded = await alice.post(teaching(project_id, "/check"), {"assignment_id": assignment["assignment_id"]})
    assert status == 200 and graded[0]["score"] < 100.0, graded

    for fault_id in assignment["fault_ids"]:  # the teacher reverts; the student's next check gets full marks
        status, body = await teacher.post(f"{COPILOT}/projects/{project_id}/faults/{fault_id}/revert")
        assert status == 200, body
    status, graded = await alice.post(teaching(project_id, "/check"), {"assignment_id": assignment["assignment_id"]})
    assert status == 200 and graded[0]["score"] == 100.0, graded
    status, body = await teacher.post(teaching(project_id, f"/assignments/{assignment['assignment_id']}/close"))
    assert status == 204, body
    await asyncio.to_thread(frr_lab.wait_converged)


async def test_a_student_fixes_a_wrong_remote_as_their_own_way_the_copilot_refusing_the_recorded_undo(
        gns3_server, admin, stub, frr_lab, frr_gns3):
    project_id = frr_gns3.project_id
    teacher, alice, bob = await class_of(admin, gns3_server, stub)
    status, made = await teacher.post(teaching(project_id, "/assignments"),
                                      {"scenario_ids": ["frr-bgp-wrong-remote-as"], "nodes": {"r1": "R1", "r2": "R2"}})
    assert status == 201 and made[0]["broken"] is True, made
    assignment_id = made[0]["assignment_id"]
    status, graded = await alice.post(teaching(project_id, "/check"), {"assignment_id": assignment_id})
    assert [g["checks"] for g in graded] == [[{"device": "R1", "kind": "bgp_neighbor", "passed": False,
                                               "status": "fail"}]]
    status, hint = await alice.post(teaching(project_id, f"/assignments/{assignment_id}/hint"))
    assert hint["level"] == 1 and "65002" not in hint["hint"]

    status, faults = await teacher.get(f"{COPILOT}/projects/{project_id}/faults")
    (fault,) = [f for f in faults if f["fault_id"] in made[0]["fault_ids"]]
    args = {**fault["undo"]["args"], "driver": "frr"}
    status_, output = await copilot_config(alice, stub, project_id, args)
    assert status_ == "error" and "does not apply the solution for you" in output, output

    own = {"device": "R1", "driver": "frr", "commands": ["router bgp 65001", "neighbor 10.0.12.2 remote-as external"]}
    status_, output = await copilot_config(alice, stub, project_id, own)
    assert status_ == "success", output
    status, graded = await alice.post(teaching(project_id, "/check"), {"assignment_id": assignment_id})
    assert status == 200 and [g["score"] for g in graded] == [100.0], graded

    status, results = await teacher.get(teaching(project_id, "/results"))
    (row,) = [r for r in results["results"] if r["assignment_id"] == assignment_id]
    assert [a["score"] for a in row["attempts"]] == [0.0, 100.0] and row["hints_used"] == 1
    status, theirs = await bob.get(teaching(project_id, "/results"))
    assert theirs["results"] == [], theirs
    status, body = await teacher.post(teaching(project_id, f"/assignments/{assignment_id}/close"))
    assert status == 204, body
