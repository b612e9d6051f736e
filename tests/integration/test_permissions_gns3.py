"""Every tool is allowed exactly when GNS3 allows the user the same action, with real GNS3 users.

The real server (through ``gns3server-copilot``), users and ACL entries made with
GNS3's own ``/v3/access`` API, the OpenAI-compatible stub as the model and real
VPCS daemons on the consoles GNS3 gave the nodes. Each case asks GNS3's own
route for the equivalent action *and* has the copilot run the tool, in the same
test, and asserts both give the same verdict; refusals read plainly, send
nothing to the device and are audited as "denied".

Equivalents: console tools — ``POST .../nodes/{id}/console/reset`` (Node.Console,
as GNS3's console WebSocket); node actions — ``POST .../nodes/{id}/stop``
(Node.PowerMgmt); new node — ``POST .../templates/{id}`` (Node.Allocate); new
link — ``POST .../links`` (Link.Allocate); topology — ``GET /projects/{id}``
(Project.Audit); templates — ``GET /templates`` (no privilege in GNS3 3.0).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from test_copilot_api import (  # noqa: F401
    API,
    COPILOT,
    SECRET,
    add_vpcs_node,
    admin,
    chat_path,
    http,
    sessions_path,
    stub,
)
from vpcs_process import VPCSProcess

from tests.support.openai_stub import OpenAIStub, reply, tool_call

pytestmark = pytest.mark.integration

REFUSED = (401, 403)


@dataclass
class Lab:
    project_id: str
    node: dict[str, Any]
    vpcs: VPCSProcess


@dataclass
class Person:
    api: API
    user_id: str
    username: str


async def new_lab(admin: API, workdir) -> Lab:
    status, project = await admin.post("/v3/projects", {"name": f"rbac-{uuid.uuid4().hex[:8]}"})
    assert status == 201, project
    node = await add_vpcs_node(admin, project["project_id"], "PC1")
    await add_vpcs_node(admin, project["project_id"], "PC2")
    workdir.mkdir(parents=True, exist_ok=True)
    vpcs = await asyncio.to_thread(VPCSProcess.start, workdir, node["console"])
    return Lab(project["project_id"], node, vpcs)


@pytest.fixture(scope="module")
async def labs(admin: API, tmp_path_factory) -> AsyncIterator[tuple[Lab, Lab]]:
    """Two projects, each with PC1 (a real VPCS daemon on its console) and PC2."""
    made = [await new_lab(admin, tmp_path_factory.mktemp("vpcs-a")), await new_lab(admin, tmp_path_factory.mktemp("vpcs-b"))]
    try:
        yield made[0], made[1]
    finally:
        for lab in made:
            await asyncio.to_thread(lab.vpcs.stop)
            await admin.delete(f"/v3/projects/{lab.project_id}")


async def role_id(admin: API, name: str) -> str:
    status, roles = await admin.get("/v3/access/roles")
    assert status == 200
    return next(r["role_id"] for r in roles if r["name"] == name)


async def person(admin: API, gns3_server, name: str, role: str, path: str) -> Person:
    """A GNS3 user with ``role`` on ``path`` (an ACL entry made through GNS3's API), logged in."""
    name = f"{name}-{uuid.uuid4().hex[:6]}"
    password = f"{name}-password"
    status, user = await admin.post("/v3/access/users", {"username": name, "password": password})
    assert status == 201, user
    ace = {"ace_type": "user", "path": path, "propagate": True, "allowed": True, "user_id": user["user_id"],
           "role_id": await role_id(admin, role)}
    status, body = await admin.post("/v3/access/acl", ace)
    assert status == 201, body
    token = await gns3_server.token(name, password)
    return Person(API(admin.http, admin.base_url, token, (SECRET,)), user["user_id"], name)


async def gns3_verdict(api: API, method: str, path: str, body: Any = None) -> str:
    """What GNS3's own route answers this user: "refused" (401/403) or "allowed" (anything else)."""
    status, _answer = await api.call(method, path, body)
    return "refused" if status in REFUSED else "allowed"


async def tool_result(api: API, stub: OpenAIStub, project_id: str, name: str, args: dict[str, Any]) -> tuple[str, str]:
    """Have the model call one tool for this user; (the tool's status, the result the model got)."""
    stub.enqueue(reply(tool_calls=[tool_call(name, args)]), "Noted.")
    status, result = await api.post(chat_path(project_id), {"message": f"use {name}", "stream": False})
    assert status == 200, result
    if result["status"] == "waiting_confirmation":  # a configuration: the user approves their own request
        status, result = await api.post(
            sessions_path(project_id, result["session_id"], "/confirm"),
            {"approved": True, "stream": False, "approval_id": result["approval"]["approval_id"]},
        )
        assert status == 200, result
    status, history = await api.get(sessions_path(project_id, result["session_id"], "/history"))
    assert status == 200, history
    (answered,) = [m for m in history["messages"] if m["role"] == "tool" and m["name"] == name]
    assert answered["content"] == stub.requests[-1]["messages"][-1]["content"]  # what the model was told
    return answered["status"], answered["content"]


def tool_verdict(status: str, output: str) -> str:
    refused = status == "error" and ("you lack" in output or "deactivated" in output or "no longer accepts" in output)
    return "refused" if refused else "allowed"


async def audited(admin: API, project_id: str, username: str) -> list[tuple[str, str, str]]:
    status, entries = await admin.get(f"{COPILOT}/console/audit?project_id={project_id}&username={username}")
    assert status == 200, entries
    return [(e["device"], e["command"], e["outcome"]) for e in reversed(entries)]


async def check_every_tool(admin: API, user: API, stub: OpenAIStub, lab: Lab, other: Lab, expected: dict[str, str]):
    """For each tool: GNS3's verdict on the equivalent route, the tool's verdict, and the expectation agree."""
    p, node = lab.project_id, lab.node["node_id"]
    status, templates = await admin.get("/v3/templates")
    vpcs_template = next(t["template_id"] for t in templates if t["name"] == "VPCS")
    cases = {
        "gns3_show_commands": (("POST", f"/v3/projects/{p}/nodes/{node}/console/reset"),
                               {"devices": ["PC1"], "commands": ["show ip"]}),
        "gns3_config_commands": (("POST", f"/v3/projects/{p}/nodes/{node}/console/reset"),
                                 {"device": "PC1", "commands": ["ip 10.66.66.66/24"]}),
        "gns3_node_action": (("POST", f"/v3/projects/{p}/nodes/{node}/stop"), {"action": "stop", "nodes": ["PC1"]}),
        "gns3_create_node": (("POST", f"/v3/projects/{p}/templates/{vpcs_template}", {"x": 10, "y": 10}),
                             {"template": "VPCS", "x": 50}),
        "gns3_create_link": (("POST", f"/v3/projects/{p}/links", {"nodes": []}),
                             {"node_a": "PC1", "port_a": "e0", "node_b": "PC2", "port_b": "e0"}),
        # Bound to the run's project: a model naming another project still reads this one.
        "gns3_topology": (("GET", f"/v3/projects/{p}"), {"project_id": other.project_id}),
        "gns3_list_templates": (("GET", "/v3/templates"), {}),
    }
    seen: dict[str, tuple[str, str, str]] = {}
    for name, (route, args) in cases.items():
        gns3 = await gns3_verdict(user, *route)
        status, output = await tool_result(user, stub, p, name, args)
        seen[name] = (gns3, tool_verdict(status, output), output)
    assert {n: (g, t) for n, (g, t, _) in seen.items()} == {n: (v, v) for n, v in expected.items()}, seen
    return {n: out for n, (_, _, out) in seen.items()}


async def test_the_auditor_role_reads_but_never_reaches_a_console(admin, gns3_server, stub, labs, tmp_path):
    lab, other = labs
    auditor = await person(admin, gns3_server, "auditor", "Auditor", "/projects")
    await auditor.api.use_llm(stub)
    outputs = await check_every_tool(admin, auditor.api, stub, lab, other, {
        "gns3_show_commands": "refused", "gns3_config_commands": "refused", "gns3_node_action": "refused",
        "gns3_create_node": "refused", "gns3_create_link": "refused",
        "gns3_topology": "allowed", "gns3_list_templates": "allowed",
    })
    assert "you lack Node.Console on PC1" in outputs["gns3_show_commands"]
    assert "you lack Node.Console on PC1" in outputs["gns3_config_commands"]
    assert "you lack Node.PowerMgmt on PC1" in outputs["gns3_node_action"]
    assert "you lack Node.Allocate" in outputs["gns3_create_node"]
    assert "you lack Link.Allocate" in outputs["gns3_create_link"]
    # Nothing reached the device, and every refusal is in the audit.
    assert await lab.vpcs.address(tmp_path) == "IP/MASK     : 0.0.0.0/0"
    assert await audited(admin, lab.project_id, auditor.username) == [
        ("PC1", "show ip", "denied"), ("PC1", "ip 10.66.66.66/24", "denied"), ("PC1", "stop", "denied"),
        ("this project", "create node from VPCS", "denied"), ("this project", "link PC1 e0 <-> PC2 e0", "denied"),
    ]
    _status, entries = await admin.get(f"{COPILOT}/console/audit?project_id={lab.project_id}&outcome=denied&limit=5")
    config_entry = next(e for e in entries if e["command"] == "ip 10.66.66.66/24")
    assert config_entry["approval_id"] and config_entry["approval_digest"].startswith("sha256:")
    assert config_entry["approved_by"] == auditor.username and config_entry["approved_at"] > 0


async def test_a_role_on_one_project_holds_there_only(admin, gns3_server, stub, labs, tmp_path):
    lab, other = labs
    member = await person(admin, gns3_server, "member", "User", f"/projects/{lab.project_id}")
    await member.api.use_llm(stub)
    outputs = await check_every_tool(admin, member.api, stub, lab, other, {
        "gns3_show_commands": "allowed", "gns3_config_commands": "allowed", "gns3_node_action": "allowed",
        "gns3_create_node": "allowed", "gns3_create_link": "allowed",
        "gns3_topology": "allowed", "gns3_list_templates": "allowed",
    })
    # The topology tool cannot be pointed at the other project: it read this one.
    assert "PC1" in outputs["gns3_topology"] and other.project_id not in outputs["gns3_topology"]
    assert "VPCS[1]" in outputs["gns3_show_commands"]
    assert await lab.vpcs.address(tmp_path) == "IP/MASK     : 10.66.66.66/24"  # the approved change ran
    # The other project: GNS3 refuses the project itself, and so does the copilot, before any tool.
    status, _ = await member.api.get(f"/v3/projects/{other.project_id}")
    assert status == 403
    stub_requests = len(stub.requests)
    status, body = await member.api.post(chat_path(other.project_id), {"message": "show ip on PC1", "stream": False})
    assert status == 403 and "Project.Audit" in body["message"] and len(stub.requests) == stub_requests
    assert await audited(admin, other.project_id, member.username) == []


async def test_a_deactivated_user_is_refused_before_any_tool_runs(admin, gns3_server, stub, labs):
    lab, _ = labs
    dora = await person(admin, gns3_server, "dora", "User", "/projects")
    await dora.api.use_llm(stub)
    status, _ = await admin.put(f"/v3/access/users/{dora.user_id}", {"is_active": False})
    assert status == 200
    # GNS3's own route and the copilot's answer the same: the login is no longer good.
    asked = len(stub.requests)
    gns3_status, _ = await dora.api.get(f"/v3/projects/{lab.project_id}/nodes")
    stub.enqueue(reply(tool_calls=[tool_call("gns3_show_commands", {"devices": ["PC1"], "commands": ["show ip"]})]))
    status, body = await dora.api.post(chat_path(lab.project_id), {"message": "show ip on PC1", "stream": False})
    assert gns3_status == status == 401, body
    assert len(stub.requests) == asked and await audited(admin, lab.project_id, dora.username) == []


async def test_a_user_deactivated_while_waiting_for_approval_cannot_approve(admin, gns3_server, stub, labs, tmp_path):
    lab, _ = labs
    erin = await person(admin, gns3_server, "erin", "User", "/projects")
    await erin.api.use_llm(stub)
    stub.enqueue(reply(tool_calls=[tool_call("gns3_config_commands", {"device": "PC1", "commands": ["ip 10.9.9.9/24"]})]))
    result = await erin.api.chat(lab.project_id, "give PC1 10.9.9.9")
    assert result["status"] == "waiting_confirmation"
    status, _ = await admin.put(f"/v3/access/users/{erin.user_id}", {"is_active": False})
    assert status == 200
    status, _ = await erin.api.post(sessions_path(lab.project_id, result["session_id"], "/confirm"),
                                    {"approved": True, "approval_id": result["approval"]["approval_id"]})
    assert status == 401
    assert await lab.vpcs.address(tmp_path) != "IP/MASK     : 10.9.9.9/24"
    assert await audited(admin, lab.project_id, erin.username) == []


async def test_a_user_deactivated_during_a_run_reaches_no_console(admin, gns3_server, stub, labs):
    """The run started while the account was active; by the time the tool runs, GNS3 refuses it."""
    lab, _ = labs
    frank = await person(admin, gns3_server, "frank", "User", "/projects")
    await frank.api.use_llm(stub)
    show = {"devices": ["PC1"], "commands": ["show ip"]}
    stub.enqueue(reply(tool_calls=[tool_call("gns3_show_commands", show)], hold_after=0), "Noted.")
    asked = len(stub.requests)
    run = asyncio.create_task(frank.api.post(chat_path(lab.project_id), {"message": "show ip on PC1", "stream": False}))
    await stub.wait_for_requests(asked + 1)  # the model is held: the run is under way
    status, _ = await admin.put(f"/v3/access/users/{frank.user_id}", {"is_active": False})
    assert status == 200
    gns3_status, _ = await frank.api.get(f"/v3/projects/{lab.project_id}/nodes/{lab.node['node_id']}")
    stub.release()
    status, result = await run
    assert gns3_status == 401 and status == 200 and result["status"] == "completed", result
    told = stub.requests[-1]["messages"][-1]["content"]
    assert "GNS3 no longer accepts your login" in told and "nothing was done" in told
    assert await audited(admin, lab.project_id, frank.username) == [("this project's nodes", "show ip", "denied")]
