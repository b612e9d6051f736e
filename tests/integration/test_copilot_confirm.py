"""Device configuration through the HTTP API waits for the user's approval, then reaches a real device.

The real server offers ``gns3_config_commands``; the stub LLM calls it. The run
pauses before anything is sent (``confirm`` event, ``done`` waiting), the session
shows the pending call, a new message is refused, and ``.../confirm`` resumes.

The device is real: each test's project has a GNS3 VPCS node "PC1", and a
Debian VPCS daemon listens on the console port GNS3 gave it (GNS3 itself cannot
start VPCS here: no uBridge, and Debian's VPCS is older than it accepts). GNS3
therefore reports PC1 "stopped"; the console tools take that status as a hint
and use a console that answers. What the device holds is checked through its
own console, and what was sent through the administrators' audit route.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from conftest import COPILOT_SETTINGS
from gns3_process import GNS3ServerProcess

# The API client and its fixtures live with the API tests; reused here as they are.
from test_copilot_api import (  # noqa: F401
    API,
    COPILOT,
    SECRET,
    add_vpcs_node,
    admin,
    admin_llm,
    chat_path,
    http,
    lab,
    project,
    sessions_path,
    stub,
    users,
)

from gns3server.agent.gns3_copilot.console import AuditLog, Who
from tests.support.openai_stub import OpenAIStub, reply, tool_call

pytestmark = pytest.mark.integration

CALL = {"device": "PC1", "commands": ["ip 10.0.0.1/24 10.0.0.254"]}
SHOW = {"devices": ["PC1"], "commands": ["show ip"]}


async def wait_for_approval(admin: API, stub: OpenAIStub, project: str) -> str:
    stub.enqueue(reply("I will set PC1's address.", tool_calls=[tool_call("gns3_config_commands", CALL)]))
    result = await admin.chat(project, "Give PC1 the address 10.0.0.1/24")
    assert result["status"] == "waiting_confirmation", result
    (pending,) = result["pending_calls"]
    assert (pending["name"], pending["args"]) == ("gns3_config_commands", CALL)
    return result["session_id"]


async def sent_to_devices(admin: API, session_id: str) -> list[tuple[str, str, str]]:
    status, entries = await admin.get(f"{COPILOT}/console/audit?session_id={session_id}")
    assert status == 200, entries
    return [(e["device"], e["command"], e["outcome"]) for e in reversed(entries)]


async def changes_sent(admin: API, session_id: str) -> list[tuple[str, str, str]]:
    """What was sent to change devices: without the reads of each change's transaction and its summary line."""
    return [s for s in await sent_to_devices(admin, session_id) if s[1] not in ("show ip", "<change>")]


async def test_approved_commands_configure_the_device(admin, admin_llm, stub, lab, tmp_path):
    project, vpcs = lab
    session_id = await wait_for_approval(admin, stub, project)
    status, session = await admin.get(sessions_path(project, session_id))
    assert status == 200 and session["pending_calls"][0]["tool_call_id"] and not session["running"]
    status, body = await admin.post(chat_path(project), {"message": "anything?", "session_id": session_id})
    assert status == 409 and body["code"] == "confirmation_pending"
    assert await sent_to_devices(admin, session_id) == []  # waiting: nothing sent yet
    assert await vpcs.address(tmp_path) == "IP/MASK     : 0.0.0.0/0"

    # Approved: the change runs, then the model checks it with a read-only command (no approval needed).
    stub.enqueue(reply("Checking.", tool_calls=[tool_call("gns3_show_commands", SHOW)]), "PC1 is now 10.0.0.1/24.")
    async with admin.confirm_stream(project, session_id, approved=True) as sse:
        events = await sse.rest()
    ends = [e for e in events if e["type"] == "tool_end"]
    assert [(e["name"], e["status"]) for e in ends] == [("gns3_config_commands", "success"), ("gns3_show_commands", "success")]
    assert "10.0.0.1 255.255.255.0 gateway 10.0.0.254" in ends[0]["output"]
    assert "IP/MASK     : 10.0.0.1/24" in ends[1]["output"]
    assert events[-1]["type"] == "done" and events[-1]["status"] == "completed"
    assert await vpcs.address(tmp_path) == "IP/MASK     : 10.0.0.1/24"

    status, entries = await admin.get(f"{COPILOT}/console/audit?session_id={session_id}")
    sent = [(e["device"], e["command"], e["outcome"]) for e in reversed(entries)]
    # The change's baseline read first, its verdict, and the model's own read last.
    assert sent[0] == ("PC1", "show ip", "ok") and ("PC1", "<change>", "verified") in sent
    assert [s for s in sent if s[1] not in ("show ip", "<change>")] == [("PC1", "ip 10.0.0.1/24 10.0.0.254", "ok")]
    assert sent[-1] == ("PC1", "show ip", "ok")
    assert {(e["user"], e["project"]) for e in entries} == {("admin", project)}
    status, session = await admin.get(sessions_path(project, session_id))
    assert session["pending_calls"] == []
    status, body = await admin.post(sessions_path(project, session_id, "/confirm"), {"approved": True})
    assert status == 409 and body["code"] == "no_pending_confirmation"


async def test_rejected_commands_never_reach_the_device(admin, admin_llm, stub, lab, users, tmp_path):
    project, vpcs = lab
    session_id = await wait_for_approval(admin, stub, project)
    other = await users("eve")
    status, _ = await other.post(sessions_path(project, session_id, "/confirm"), {"approved": True})
    assert status in (403, 404)  # not her project, or not her session
    assert await sent_to_devices(admin, session_id) == []  # her approval did nothing

    stub.enqueue(reply(tool_calls=[tool_call("gns3_show_commands", SHOW)]), "OK, I left PC1 as it is.")
    status, result = await admin.post(sessions_path(project, session_id, "/confirm"), {"approved": False, "stream": False})
    assert status == 200 and result["status"] == "completed", result
    first_answer = stub.requests[-2]["messages"][-1]
    assert first_answer["role"] == "tool" and first_answer["content"].startswith("Rejected by the user")
    assert await sent_to_devices(admin, session_id) == [("PC1", "show ip", "ok")]  # only the read
    assert await vpcs.address(tmp_path) == "IP/MASK     : 0.0.0.0/0"
    status, history = await admin.get(sessions_path(project, session_id, "/history"))
    assert [m["status"] for m in history["messages"] if m["role"] == "tool"] == ["rejected", "success"]


async def test_blocked_commands_are_refused_after_approval_too(admin, admin_llm, stub, lab, tmp_path):
    """Approval does not override the policy: a dangerous command in the batch sends nothing at all."""
    project, vpcs = lab
    batch = {"device": "PC1", "commands": ["ip 10.0.0.7/24", "QUIT"]}  # quit stops VPCS
    stub.enqueue(reply(tool_calls=[tool_call("gns3_config_commands", batch)]))
    session_id = (await admin.chat(project, "Set the address and stop PC1"))["session_id"]
    stub.enqueue("The policy refused the quit; nothing was changed.")
    status, result = await admin.post(sessions_path(project, session_id, "/confirm"), {"approved": True, "stream": False})
    assert status == 200 and result["status"] == "completed", result
    assert "blocked by the console policy" in stub.requests[-1]["messages"][-1]["content"]
    assert await sent_to_devices(admin, session_id) == [("PC1", "ip 10.0.0.7/24", "not_run"), ("PC1", "QUIT", "blocked")]
    assert await vpcs.address(tmp_path) == "IP/MASK     : 0.0.0.0/0"


async def test_two_users_read_one_device_at_once(admin, admin_llm, stub, lab, users):
    """Two users' runs on the same device at the same time both complete with whole
    outputs, and the audit tells their commands apart. (That the two batches take
    turns is the per-device lock's job, shown at the runner level in
    test_console_vpcs.py: VPCS itself copes with two consoles well enough that this
    test could not tell.)"""
    project, _ = lab
    dave = await users("dave-console")
    batch = {"devices": ["PC1"], "commands": ["show ip"] * 4}
    async with OpenAIStub(api_key=SECRET) as dave_stub:
        await dave.use_llm(dave_stub)
        for llm in (stub, dave_stub):
            llm.enqueue(reply(tool_calls=[tool_call("gns3_show_commands", batch)]), "Read.")
        mine, theirs = await asyncio.gather(
            admin.chat(project, "Read PC1 four times"), dave.chat(project, "Read PC1 four times too")
        )
    assert (mine["status"], theirs["status"]) == ("completed", "completed")
    for llm in (stub, dave_stub):
        (device,) = json.loads(llm.requests[-1]["messages"][-1]["content"])["devices"]
        assert device["status"] == "ok" and [r["output"].count("NAME        :") for r in device["results"]] == [1] * 4
    status, entries = await admin.get(f"{COPILOT}/console/audit?project_id={project}")
    assert status == 200
    assert sorted((e["user"], e["session"], e["command"], e["outcome"]) for e in entries) == sorted(
        [("admin", mine["session_id"], "show ip", "ok")] * 4 + [("dave-console", theirs["session_id"], "show ip", "ok")] * 4
    )


async def test_a_stopped_device_without_a_console_is_reported_stopped(admin, admin_llm, stub, lab):
    project, _ = lab
    await add_vpcs_node(admin, project, "PC2")  # stopped in GNS3, and nothing serves its console
    stub.enqueue(reply(tool_calls=[tool_call("gns3_show_commands", {"devices": ["PC1", "PC2"], "commands": ["show ip"]})]),
                 "PC2 must be started first.")
    async with admin.stream(project, message="Addresses of PC1 and PC2?") as sse:
        events = await sse.rest()
    (end,) = [e for e in events if e["type"] == "tool_end"]
    assert "VPCS[1]" in end["output"] and "PC2 is stopped; start it first" in end["output"]
    _status, entries = await admin.get(f"{COPILOT}/console/audit?project_id={project}")
    assert sorted((e["device"], e["outcome"]) for e in entries) == [("PC1", "ok"), ("PC2", "not_run")]


async def test_console_audit_is_for_administrators(admin, users, gns3_server, project):
    audit = AuditLog(gns3_server.root / "config" / "copilot")  # the server's copilot data dir
    try:
        who = Who(user="alice", session="s-1", project=project)
        await audit.record(who, "R1", "show ip route", "ok")
        await audit.record(who, "R1", "reload", "blocked", "dangerous: reload")
        await audit.record(Who("bob", "s-2", project), "PC1", "ip 10.0.0.1/24", "ok")
    finally:
        await audit.close()
    status, entries = await admin.get(f"{COPILOT}/console/audit?username=alice")
    assert status == 200
    assert [(e["device"], e["command"], e["outcome"]) for e in entries] == [
        ("R1", "reload", "blocked"), ("R1", "show ip route", "ok")
    ]
    status, entries = await admin.get(f"{COPILOT}/console/audit?outcome=ok&limit=1")
    assert status == 200 and [e["command"] for e in entries] == ["ip 10.0.0.1/24"]
    member = await users("audit-reader")
    status, body = await member.get(f"{COPILOT}/console/audit")
    assert status == 403 and body["code"] == "admin_only"


async def test_an_approval_is_used_once_and_only_for_its_own_request(admin, admin_llm, stub, lab, tmp_path):
    """The confirm event's approval_id, echoed: a foreign or replayed one is a 409 and runs nothing."""
    project, vpcs = lab
    stub.enqueue(reply(tool_calls=[tool_call("gns3_config_commands", CALL)]))
    first = await admin.chat(project, "Give PC1 the address 10.0.0.1/24")
    session_id, approval = first["session_id"], first["approval"]
    assert approval["digest"].startswith("sha256:") and approval["expires_at"] > 0
    status, session = await admin.get(sessions_path(project, session_id))
    assert session["approval"] == approval

    confirm = sessions_path(project, session_id, "/confirm")
    status, body = await admin.post(confirm, {"approved": True, "approval_id": "0" * 32})
    assert status == 409 and body["code"] == "approval_not_pending" and "nothing was run" in body["message"]
    assert await sent_to_devices(admin, session_id) == []

    # Approved; the model then asks for a second change: a new approval.
    second_call = {"device": "PC1", "commands": ["ip 10.0.0.99/24"]}
    stub.enqueue(reply(tool_calls=[tool_call("gns3_config_commands", second_call)]))
    status, result = await admin.post(confirm, {"approved": True, "stream": False, "approval_id": approval["approval_id"]})
    assert status == 200 and result["status"] == "waiting_confirmation", result
    # The JSON answer lists the approved call the resumed run ran, then the new one waiting.
    assert [(c["name"], c["args"], c["status"]) for c in result["tool_calls"]] == [
        ("gns3_config_commands", CALL, "success"), ("gns3_config_commands", second_call, None)]
    assert result["approval"]["approval_id"] != approval["approval_id"]
    assert await vpcs.address(tmp_path) == "IP/MASK     : 10.0.0.1/24"

    # The first approval, replayed, does not approve the second change.
    status, body = await admin.post(confirm, {"approved": True, "approval_id": approval["approval_id"]})
    assert status == 409 and body["code"] == "approval_not_pending"
    assert await changes_sent(admin, session_id) == [("PC1", "ip 10.0.0.1/24 10.0.0.254", "ok")]
    assert await vpcs.address(tmp_path) == "IP/MASK     : 10.0.0.1/24"

    stub.enqueue("Left as it is.")
    status, done = await admin.post(confirm, {"approved": False, "stream": False,
                                              "approval_id": result["approval"]["approval_id"]})
    assert status == 200 and done["status"] == "completed"
    status, body = await admin.post(confirm, {"approved": True, "approval_id": result["approval"]["approval_id"]})
    assert status == 409 and body["code"] == "approval_not_pending" and "already used" in body["message"]

    # The audit records the approval the command ran under: its id, its digest, who gave it and when.
    status, entries = await admin.get(f"{COPILOT}/console/audit?session_id={session_id}")
    (entry,) = [e for e in entries if e["command"] == CALL["commands"][0]]
    assert (entry["approval_id"], entry["approval_digest"], entry["approved_by"]) == (
        approval["approval_id"], approval["digest"], "admin")
    # The change's own reads and summary line ran under that approval too.
    assert {(e["approval_id"], e["approved_by"]) for e in entries} == {(approval["approval_id"], "admin")}
    assert entry["time"] >= entry["approved_at"] > 0


async def test_an_expired_approval_is_refused_with_410(http, tmp_path):
    """A server whose approvals last 0.6 s: approving later is a 410, nothing is sent, rejecting still works."""
    server = await asyncio.to_thread(
        GNS3ServerProcess.start, tmp_path / "server", copilot={**COPILOT_SETTINGS, "approval_minutes": 0.01}
    )
    try:
        admin = API(http, server.base_url, await server.token(), (SECRET,))
        async with OpenAIStub(api_key=SECRET) as llm:
            await admin.use_llm(llm)
            status, created = await admin.post("/v3/projects", {"name": "expiry"})
            assert status == 201, created
            project = created["project_id"]
            await add_vpcs_node(admin, project, "PC1")
            llm.enqueue(reply(tool_calls=[tool_call("gns3_config_commands", CALL)]))
            result = await admin.chat(project, "Give PC1 the address 10.0.0.1/24")
            approval = result["approval"]
            # Waiting for a deadline, not for a state: the approval's own expiry time.
            await asyncio.sleep(max(0.0, approval["expires_at"] - time.time()) + 0.05)
            confirm = sessions_path(project, result["session_id"], "/confirm")
            status, body = await admin.post(confirm, {"approved": True, "approval_id": approval["approval_id"]})
            assert status == 410 and body["code"] == "approval_expired" and "nothing was sent" in body["message"]
            status, session = await admin.get(sessions_path(project, result["session_id"]))
            assert session["approval"] == approval  # still there, to be rejected
            llm.enqueue("Nothing was changed.")
            status, done = await admin.post(confirm, {"approved": False, "stream": False})
            assert status == 200 and done["status"] == "completed", done
            assert await sent_to_devices(admin, result["session_id"]) == []
    finally:
        await asyncio.to_thread(server.stop)
