"""Device configuration through the HTTP API waits for the user's approval.

The real server offers ``gns3_config_commands``; the stub LLM calls it. The run
pauses before anything is sent (``confirm`` event, ``done`` waiting), the session
shows the pending call, a new message is refused, and ``.../confirm`` resumes:
rejected calls are answered "rejected"; approved ones run (here the node is
stopped, so the tool answers with GNS3's state, which is what a user would see).
"""

from __future__ import annotations

import pytest
# The API client and its fixtures live with the API tests; reused here as they are.
from test_copilot_api import COPILOT, admin, admin_llm, chat_path, http, project, sessions_path, stub, users  # noqa: F401
from tests.support.openai_stub import reply, tool_call

from gns3server.agent.gns3_copilot.console import AuditLog, Who

pytestmark = pytest.mark.integration

CALL = {"device": "PC1", "commands": ["ip 10.0.0.1/24 10.0.0.254"]}


async def wait_for_approval(admin, stub, project) -> str:
    template = await vpcs_template(admin)
    status, node = await admin.post(f"/v3/projects/{project}/templates/{template}", {"x": 0, "y": 0})
    assert status == 201, node
    status, _ = await admin.put(f"/v3/projects/{project}/nodes/{node['node_id']}", {"name": "PC1"})
    assert status == 200
    stub.enqueue(reply("I will set PC1's address.", tool_calls=[tool_call("gns3_config_commands", CALL)]))
    result = await admin.chat(project, "Give PC1 the address 10.0.0.1/24")
    assert result["status"] == "waiting_confirmation", result
    (pending,) = result["pending_calls"]
    assert (pending["name"], pending["args"]) == ("gns3_config_commands", CALL)
    return result["session_id"]


async def vpcs_template(admin) -> str:
    status, templates = await admin.get("/v3/templates")
    assert status == 200
    return next(t["template_id"] for t in templates if t["name"] == "VPCS")


async def test_approval_flow_over_http(admin, admin_llm, stub, project):
    session_id = await wait_for_approval(admin, stub, project)
    status, session = await admin.get(sessions_path(project, session_id))
    assert status == 200 and session["pending_calls"][0]["tool_call_id"] and not session["running"]
    status, body = await admin.post(chat_path(project), {"message": "anything?", "session_id": session_id})
    assert status == 409 and body["code"] == "confirmation_pending"

    stub.enqueue("PC1 must be started before I can configure it.")
    async with admin.confirm_stream(project, session_id, approved=True) as sse:
        events = await sse.rest()
    end = next(e for e in events if e["type"] == "tool_end")
    assert end["name"] == "gns3_config_commands" and end["status"] == "error" and "stopped" in end["output"]
    assert events[-1]["status"] == "completed"
    status, session = await admin.get(sessions_path(project, session_id))
    assert session["pending_calls"] == []
    status, body = await admin.post(sessions_path(project, session_id, "/confirm"), {"approved": True})
    assert status == 409 and body["code"] == "no_pending_confirmation"


async def test_rejection_sends_nothing(admin, admin_llm, stub, project, users):
    session_id = await wait_for_approval(admin, stub, project)
    other = await users("eve")
    status, _ = await other.post(sessions_path(project, session_id, "/confirm"), {"approved": True})
    assert status in (403, 404)  # not her project, or not her session
    stub.enqueue("OK, I left PC1 as it is.")
    path = sessions_path(project, session_id, "/confirm")
    status, result = await admin.post(path, {"approved": False, "stream": False})
    assert status == 200 and result["status"] == "completed", result
    tool_result = stub.requests[-1]["messages"][-1]
    assert tool_result["role"] == "tool" and tool_result["content"].startswith("Rejected by the user")


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
