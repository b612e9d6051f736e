"""Injected faults reverted for real: a device's address and a link's state put back.

The real server, real GNS3 users, the OpenAI-compatible stub as the LLM issuing
the tool calls, ``chat/inject`` then ``POST .../faults/{id}/revert``. The device
is real: a Debian VPCS daemon serves the console port GNS3 gave node PC1 (GNS3
3.0 cannot start VPCS here), and what it holds is read on its own console,
outside the copilot. Link state is read back from GNS3's own link route.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from test_copilot_api import (  # noqa: F401  (fixtures)
    API,
    COPILOT,
    add_vpcs_node,
    admin,
    http,
    lab,
    sessions_path,
    stub,
    users,
)
from test_permissions_gns3 import person
from vpcs_process import VPCSProcess

from gns3server.agent.gns3_copilot.console import VPCS, AuditLog, Device, DeviceLocks, Who, load_policy, run_commands
from tests.support.openai_stub import reply, tool_call

pytestmark = pytest.mark.integration

INJECT = "Inject an addressing fault"


async def console(vpcs: VPCSProcess, workdir: Path, commands: list[str], mode: str = "show") -> str:
    """Type commands on the daemon's console outside the copilot (no GNS3, no copilot audit)."""
    audit = AuditLog(workdir / f"check-{uuid.uuid4().hex[:6]}")
    try:
        result = await run_commands(
            Device("PC", vpcs.host, vpcs.port, VPCS), commands, mode=mode,  # type: ignore[arg-type]
            policy=load_policy(), locks=DeviceLocks(), audit=audit, who=Who("tests", "-", "-"), timeout=15,
        )
    finally:
        await audit.close()
    assert result.status == "ok", result
    return "\n".join(r.output for r in result.results)


def addressing(show_ip: str) -> dict[str, str]:
    """The fields of ``show ip`` a revert must restore."""
    wanted = ("IP/MASK", "GATEWAY", "DNS", "DOMAIN NAME")
    fields = {}
    for line in show_ip.splitlines():
        name, _, value = line.partition(":")
        if name.strip() in wanted:
            fields[name.strip()] = value.strip()
    return fields


async def faults(api: API, project_id: str) -> list[dict[str, Any]]:
    status, body = await api.get(f"{COPILOT}/projects/{project_id}/faults")
    assert status == 200, body
    return list(body)


async def test_an_address_fault_is_reverted_to_what_the_device_had(users, stub, admin, lab, tmp_path):
    project_id, vpcs = lab
    teacher, student = await users("revert_teacher"), await users("revert_student")
    await teacher.use_llm(stub)
    # The student's PC as it was set up: an address, gateway, DNS server and domain.
    await console(vpcs, tmp_path, ["ip 10.0.0.1/24 10.0.0.254", "ip dns 10.0.0.53", "ip domain lab.example"], "config")
    before = addressing(await console(vpcs, tmp_path, ["show ip"]))
    assert before == {"IP/MASK": "10.0.0.1/24", "GATEWAY": "10.0.0.254", "DNS": "10.0.0.53",
                      "DOMAIN NAME": "lab.example"}

    # The copilot breaks it: a wrong address and a wrong gateway, then a change it cannot undo.
    wrong = {"device": "PC1", "commands": ["ip 10.0.0.99/24 10.0.0.250"]}
    opaque = {"device": "PC1", "commands": ["arp"]}  # not an addressing command: no undo known
    stub.enqueue(reply(tool_calls=[tool_call("gns3_config_commands", wrong), tool_call("gns3_config_commands", opaque)]))
    session_id = str(uuid.uuid4())
    status, result = await teacher.post(f"{COPILOT}/projects/{project_id}/chat/inject",
                                        {"message": INJECT, "session_id": session_id, "stream": False})
    assert status == 200 and result["status"] == "waiting_confirmation", result  # config commands: approval
    stub.enqueue("A fault was injected.")
    status, result = await teacher.post(sessions_path(project_id, session_id, "/confirm"),
                                        {"approved": True, "stream": False})
    assert status == 200 and result["content"] == "A fault was injected.", result
    broken = addressing(await console(vpcs, tmp_path, ["show ip"]))
    assert (broken["IP/MASK"], broken["GATEWAY"]) == ("10.0.0.99/24", "10.0.0.250")

    # The history still hides the fault, the undo included.
    status, history = await teacher.get(sessions_path(project_id, session_id, "/history"))
    assert "10.0.0.99" not in json.dumps(history) and "10.0.0.1/24" not in json.dumps(history)

    # What the revert will run, recorded from what the device said before the change.
    recorded = await faults(teacher, project_id)  # the two calls ran concurrently: either may be first
    (changed,) = [f for f in recorded if f["args"] == wrong]
    (unknown,) = [f for f in recorded if f["args"] == opaque]
    assert (changed["tool"], changed["args"], changed["revertible"]) == ("gns3_config_commands", wrong, True)
    assert changed["undo"] == {"tool": "gns3_config_commands", "args": {"device": "PC1", "commands": [
        "clear ip", "ip 10.0.0.1/24 10.0.0.254", "ip dns 10.0.0.53", "ip domain lab.example"]}}
    assert (unknown["revertible"], unknown["undo"]) == (False, None)

    status, body = await student.post(f"{COPILOT}/projects/{project_id}/faults/{changed['fault_id']}/revert")
    assert status == 404, body
    assert addressing(await console(vpcs, tmp_path, ["show ip"])) == broken

    status, body = await teacher.post(f"{COPILOT}/projects/{project_id}/faults/{changed['fault_id']}/revert")
    assert status == 200 and body["reverted_at"] and body["revertible"] is False, body
    assert addressing(await console(vpcs, tmp_path, ["show ip"])) == before

    status, body = await teacher.post(f"{COPILOT}/projects/{project_id}/faults/{changed['fault_id']}/revert")
    assert status == 409 and "already reverted" in body["message"], body
    status, body = await teacher.post(f"{COPILOT}/projects/{project_id}/faults/{unknown['fault_id']}/revert")
    assert status == 409 and body["code"] == "fault_not_revertible" and "by hand" in body["message"], body

    # Everything sent is audited: the read before the change, the change (approved in the session) and
    # the revert, approved by the teacher's POST under an id naming the fault.
    status, entries = await admin.get(f"{COPILOT}/console/audit?session_id={session_id}")
    assert status == 200, entries
    sent = [(e["command"], e["outcome"], e["approval_id"] or "", e["approved_by"]) for e in reversed(entries)]
    assert ("arp", "ok") in [s[:2] for s in sent[:3]]  # the other call of the batch, concurrent
    sent = [s for s in sent if s[0] != "arp"]
    assert [s[:2] for s in sent] == [
        ("show ip", "ok"), ("ip 10.0.0.99/24 10.0.0.250", "ok"),
        ("clear ip", "ok"), ("ip 10.0.0.1/24 10.0.0.254", "ok"), ("ip dns 10.0.0.53", "ok"),
        ("ip domain lab.example", "ok"),
    ]
    reverts = sent[2:]
    assert {(s[2], s[3]) for s in reverts} == {(f"revert:{changed['fault_id']}", "revert_teacher")}
    assert not sent[1][2].startswith("revert:") and sent[1][3] == "revert_teacher"  # the injection's own approval
    assert {e["user"] for e in entries} == {"revert_teacher"}


async def test_a_revert_that_cannot_reach_the_device_is_a_409_and_the_fault_stays(users, stub, admin, lab, tmp_path):
    """A revert that cannot reach the device is a 409 that says so; the fault stays revertible."""
    project_id, vpcs = lab
    teacher = await users("revert_teacher2")
    await teacher.use_llm(stub)
    stub.enqueue(reply(tool_calls=[tool_call("gns3_config_commands", {"device": "PC1", "commands": ["ip 10.9.9.9/8"]})]))
    session_id = str(uuid.uuid4())
    status, result = await teacher.post(f"{COPILOT}/projects/{project_id}/chat/inject",
                                        {"message": INJECT, "session_id": session_id, "stream": False})
    assert status == 200 and result["status"] == "waiting_confirmation", result
    stub.enqueue("Done.")
    status, result = await teacher.post(sessions_path(project_id, session_id, "/confirm"), {"approved": True, "stream": False})
    assert status == 200, result
    (fault,) = await faults(teacher, project_id)
    assert fault["undo"]["args"]["commands"] == ["clear ip"]  # the PC had no address: clearing restores it

    await asyncio.to_thread(vpcs.stop)  # the device is gone
    status, body = await teacher.post(f"{COPILOT}/projects/{project_id}/faults/{fault['fault_id']}/revert")
    assert status == 409 and body["code"] == "fault_not_revertible" and "PC1 was not restored" in body["message"], body
    (fault,) = await faults(teacher, project_id)
    assert fault["reverted_at"] is None and fault["revertible"] is True


# ------------------------------------------------------------------------------------------ links


@pytest.fixture
async def linked_pcs(admin: API) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """A project of its own with PC1 e0 linked to PC2 e0: (project id, the link as GNS3 made it)."""
    status, made = await admin.post("/v3/projects", {"name": f"links-{uuid.uuid4().hex[:8]}"})
    assert status == 201, made
    pid = made["project_id"]
    try:
        pc1, pc2 = await add_vpcs_node(admin, pid, "PC1"), await add_vpcs_node(admin, pid, "PC2")
        ends = [{"node_id": n["node_id"], "adapter_number": 0, "port_number": 0} for n in (pc1, pc2)]
        status, link = await admin.post(f"/v3/projects/{pid}/links", {"nodes": ends})
        assert status == 201, link
        yield pid, link
    finally:
        await admin.delete(f"/v3/projects/{pid}")


async def link_state(api: API, project_id: str, link_id: str) -> tuple[bool, dict[str, Any]]:
    status, link = await api.get(f"/v3/projects/{project_id}/links/{link_id}")
    assert status == 200, link
    return link["suspend"], link["filters"]


async def test_link_faults_are_injected_and_reverted_as_gns3_reads_them(users, stub, admin, linked_pcs):
    teacher, student = await users("link_teacher"), await users("link_student")
    await teacher.use_llm(stub)
    pid, link = linked_pcs
    link_id = link["link_id"]
    # The lab as the teacher left it: the link already corrupts 5% of packets.
    status, body = await admin.put(f"/v3/projects/{pid}/links/{link_id}", {"filters": {"corrupt": [5]}})
    assert status == 200, body
    original = await link_state(admin, pid, link_id)
    assert original == (False, {"corrupt": [5]})

    lossy = {"node_a": "PC1", "node_b": "PC2", "filters": {"packet_loss": [30], "delay": [200]}}
    cut = {"node_a": "pc2", "node_b": "PC1", "suspend": True}
    stub.enqueue(reply(tool_calls=[tool_call("gns3_update_link", lossy)]),
                 reply(tool_calls=[tool_call("gns3_update_link", cut)]), "A fault was injected.")
    status, result = await teacher.post(f"{COPILOT}/projects/{pid}/chat/inject",
                                        {"message": "Inject link fault(s)", "stream": False})
    assert status == 200 and result["content"] == "A fault was injected.", result  # no approval: as node tools
    assert await link_state(admin, pid, link_id) == (True, {"packet_loss": [30], "delay": [200, 0]})

    loss_fault, cut_fault = await faults(teacher, pid)
    assert loss_fault["undo"] == {"tool": "gns3_update_link", "args": {"link_id": link_id, "filters": {"corrupt": [5]}}}
    assert cut_fault["undo"] == {"tool": "gns3_update_link", "args": {"link_id": link_id, "suspend": False}}
    assert await faults(student, pid) == []

    # Each fault reverts what it changed only, in any order.
    status, body = await teacher.post(f"{COPILOT}/projects/{pid}/faults/{loss_fault['fault_id']}/revert")
    assert status == 200 and body["reverted_at"], body
    assert await link_state(admin, pid, link_id) == (True, {"corrupt": [5]})
    status, body = await teacher.post(f"{COPILOT}/projects/{pid}/faults/{cut_fault['fault_id']}/revert")
    assert status == 200, body
    assert await link_state(admin, pid, link_id) == original

    status, entries = await admin.get(f"{COPILOT}/console/audit?session_id={result['session_id']}")
    assert [(e["device"], e["command"], e["outcome"]) for e in reversed(entries)] == [
        ("link PC1 e0 <-> PC2 e0", "filters delay=200/0, packet_loss=30", "ok"),
        ("link PC1 e0 <-> PC2 e0", "suspend", "ok"),
        ("link PC1 e0 <-> PC2 e0", "filters corrupt=5", "ok"),
        ("link PC1 e0 <-> PC2 e0", "resume", "ok"),
    ]


async def test_filter_faults_on_one_link_revert_newest_first_and_once(users, stub, linked_pcs, admin):
    """A link's filters are replaced whole: the older fault waits for the newer; two reverts at once run one undo."""
    teacher = await users("filter_teacher")
    await teacher.use_llm(stub)
    pid, link = linked_pcs
    first = {"node_a": "PC1", "node_b": "PC2", "filters": {"packet_loss": [10]}}
    second = {"node_a": "PC1", "node_b": "PC2", "filters": {"packet_loss": [10], "delay": [300]}}
    stub.enqueue(reply(tool_calls=[tool_call("gns3_update_link", first)]),
                 reply(tool_calls=[tool_call("gns3_update_link", second)]), "Two faults.")
    status, result = await teacher.post(f"{COPILOT}/projects/{pid}/chat/inject",
                                        {"message": "Inject link fault(s)", "stream": False})
    assert status == 200, result
    older, newer = await faults(teacher, pid)

    status, body = await teacher.post(f"{COPILOT}/projects/{pid}/faults/{older['fault_id']}/revert")
    assert status == 409 and newer["fault_id"] in body["message"], body
    assert await link_state(admin, pid, link["link_id"]) == (False, {"packet_loss": [10], "delay": [300, 0]})

    revert = f"{COPILOT}/projects/{pid}/faults/{newer['fault_id']}/revert"
    answers = await asyncio.gather(teacher.post(revert), teacher.post(revert))
    assert sorted(status for status, _ in answers) == [200, 409], answers
    assert await link_state(admin, pid, link["link_id"]) == (False, {"packet_loss": [10]})
    status, body = await teacher.post(f"{COPILOT}/projects/{pid}/faults/{older['fault_id']}/revert")
    assert status == 200, body
    assert await link_state(admin, pid, link["link_id"]) == (False, {})
    status, entries = await admin.get(f"{COPILOT}/console/audit?session_id={result['session_id']}")
    assert [e["command"] for e in reversed(entries)] == [  # one undo per fault, none twice
        "filters packet_loss=10", "filters delay=300/0, packet_loss=10", "filters packet_loss=10", "filters none",
    ], entries


async def test_the_link_tool_refuses_bad_filters_and_unknown_links(users, stub, admin, linked_pcs):
    pid, link = linked_pcs
    await admin.use_llm(stub)
    calls = [
        tool_call("gns3_update_link", {"node_a": "PC1", "node_b": "PC2", "filters": {"packet_loss": [300]}}),
        tool_call("gns3_update_link", {"node_a": "PC1", "node_b": "PC9", "suspend": True}),
        tool_call("gns3_update_link", {"node_a": "PC1", "node_b": "PC2"}),
        tool_call("gns3_update_link", {"node_a": "PC1", "node_b": "PC2", "filters": {"jitter": [5]}}),
    ]
    stub.enqueue(reply(tool_calls=calls), "Nothing changed.")
    result = await admin.chat(pid, "Break the link", mode="lab_automation")
    assert result["status"] == "completed", result
    outputs = [m["content"] for m in stub.requests[-1]["messages"] if m["role"] == "tool"]
    assert "filters: Value error, packet_loss: 300 is out of range (0 to 100)" in outputs[0], outputs
    assert "no node named 'PC9'" in outputs[1], outputs
    assert "give suspend, filters or both" in outputs[2], outputs
    assert "unknown filter 'jitter'" in outputs[3], outputs
    assert await link_state(admin, pid, link["link_id"]) == (False, {})


async def test_gns3_decides_who_may_change_a_link(admin, gns3_server, stub, linked_pcs):
    """An Auditor (no Link.Modify): GNS3's own route refuses, so does the tool, plainly, audited; nothing changes."""
    pid, link = linked_pcs
    auditor = await person(admin, gns3_server, "link-auditor", "Auditor", "/projects")
    await auditor.api.use_llm(stub)
    status, _ = await auditor.api.put(f"/v3/projects/{pid}/links/{link['link_id']}", {"suspend": True})
    assert status == 403  # GNS3's own answer
    stub.enqueue(reply(tool_calls=[tool_call("gns3_update_link", {"node_a": "PC1", "node_b": "PC2", "suspend": True})]),
                 "I cannot.")
    result = await auditor.api.chat(pid, "Suspend the link", mode="lab_automation")
    assert result["status"] == "completed", result
    told = stub.requests[-1]["messages"][-1]
    assert told["role"] == "tool" and "you lack Link.Modify on link PC1 e0 <-> PC2 e0" in told["content"], told
    assert await link_state(admin, pid, link["link_id"]) == (False, {})
    status, entries = await admin.get(f"{COPILOT}/console/audit?project_id={pid}&username={auditor.username}")
    assert [(e["device"], e["command"], e["outcome"]) for e in entries] == [
        ("link PC1 e0 <-> PC2 e0", "suspend", "denied")]
