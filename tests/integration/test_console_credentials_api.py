"""Console credentials through a real gns3-server: who may set them (GNS3's own Node.Modify /
Template.Modify verdict, compared with GNS3's own route), that they never come back or sit in
the database in clear, that setting and using them is audited, and that a node whose console
asks for a login (busybox's real login on the port GNS3 gave the node) is read through the
copilot's tool with them: the node's own, else its template's."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import login_console
import pytest
from login_console import PASSWORD, USER
from test_copilot_api import API, COPILOT, SECRET, add_vpcs_node, admin, http  # noqa: F401
from test_mcp_endpoint import mcp_client, payload
from test_permissions_gns3 import gns3_verdict, person

pytestmark = pytest.mark.integration

CREDENTIALS = {"username": USER, "password": PASSWORD, "enable_password": "Enable-Pw-77"}


def node_path(project_id: str, node_id: str) -> str:
    return f"{COPILOT}/projects/{project_id}/nodes/{node_id}/console-credentials"


def template_path(template_id: str) -> str:
    return f"{COPILOT}/templates/{template_id}/console-credentials"


@pytest.fixture(scope="module")
async def lab(admin: API, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[dict[str, Any]]:
    """A project with Host1 (a VPCS node whose console port serves busybox's login) and PC2."""
    status, project = await admin.post("/v3/projects", {"name": f"credentials-{tmp_path_factory.getbasetemp().name}"})
    assert status == 201, project
    host = await add_vpcs_node(admin, project["project_id"], "Host1")
    other = await add_vpcs_node(admin, project["project_id"], "PC2")
    server = await asyncio.to_thread(login_console.start, tmp_path_factory.mktemp("login-etc"), host["console"])
    try:
        yield {"project_id": project["project_id"], "host": host, "other": other}
    finally:
        await asyncio.to_thread(server.stop)
        await admin.delete(f"/v3/projects/{project['project_id']}")


def never_shown(*bodies: Any) -> None:
    text = json.dumps(bodies)
    assert PASSWORD not in text and "Enable-Pw-77" not in text and USER not in text


async def test_who_may_set_them_is_gns3s_verdict(admin, gns3_server, lab):
    project_id, node_id = lab["project_id"], lab["other"]["node_id"]
    node = f"/v3/projects/{project_id}/nodes/{node_id}"
    user = await person(admin, gns3_server, "editor", "User", "/projects")
    auditor = await person(admin, gns3_server, "auditor", "Auditor", "/projects")
    for who, expected in ((admin, "allowed"), (user.api, "allowed"), (auditor.api, "refused")):
        assert await gns3_verdict(who, "PUT", node, {}) == expected  # GNS3's own route, Node.Modify
        status, body = await who.put(node_path(project_id, node_id), CREDENTIALS)
        assert ("allowed" if status == 200 else "refused") == expected, body
        never_shown(body)
        if expected == "refused":
            assert status == 403 and body["code"] == "console_credentials_forbidden"
            assert "Node.Modify" in body["message"]
            status, body = await who.get(node_path(project_id, node_id))
            assert status == 403
    status, shown = await admin.get(node_path(project_id, node_id))
    assert status == 200, shown
    assert shown["username"] == "c***" and shown["password_set"] and shown["enable_password_set"]
    assert shown["set_by"] == user.username  # the last to set them
    never_shown(shown)

    # A template of the administrator's own (GNS3 lets nobody change its built-in ones at all).
    status, template = await admin.post("/v3/templates", {"name": f"pc-{project_id[:8]}", "template_type": "vpcs",
                                                          "compute_id": "local"})
    assert status == 201, template
    try:
        for who, expected in ((admin, "allowed"), (user.api, "refused")):
            assert await gns3_verdict(who, "PUT", f"/v3/templates/{template['template_id']}", {}) == expected
            status, body = await who.put(template_path(template["template_id"]), {"username": USER, "password": PASSWORD})
            assert ("allowed" if status == 200 else "refused") == expected, body
            never_shown(body)
        assert body["code"] == "console_credentials_forbidden" and "Template.Modify" in body["message"]
        status, _ = await admin.delete(template_path(template["template_id"]))
        assert status == 204
    finally:
        await admin.delete(f"/v3/templates/{template['template_id']}")


async def test_bad_bodies_are_refused_and_store_nothing(admin, lab):
    path = node_path(lab["project_id"], lab["host"]["node_id"])
    for body, field in (({}, "body"), ({"password": "a\nreboot"}, "password"), ({"username": ""}, "username"),
                        ({"password": "x", "secret": "y"}, "secret")):
        status, answer = await admin.put(path, body)
        assert status == 422, answer
        assert field in json.dumps(answer) and "reboot" not in json.dumps(answer)
    status, answer = await admin.get(path)
    assert status == 404 and answer["code"] == "console_credentials_not_found"
    status, answer = await admin.put(f"{COPILOT}/projects/{lab['project_id']}/nodes/00000000-0000-0000-0000-000000000000"
                                     "/console-credentials", CREDENTIALS)
    assert status == 404  # GNS3's: no such node


async def test_a_login_console_is_read_with_the_nodes_then_the_templates_credentials(admin, gns3_server, lab):
    project_id, host = lab["project_id"], lab["host"]
    call = {"devices": ["Host1"], "commands": ["id -un"], "driver": "linux"}
    token = await gns3_server.token()
    async with mcp_client(gns3_server.base_url, token) as client:
        await client.call_tool("gns3_select_project", {"project_id": project_id})
        missing = payload(await client.call_tool("gns3_show_commands", call))
        assert "asks for a login" in json.dumps(missing)

        status, _ = await admin.put(node_path(project_id, host["node_id"]), CREDENTIALS)
        assert status == 200
        (device,) = payload(await client.call_tool("gns3_show_commands", call))["devices"]
        assert device["status"] == "ok", device
        assert device["results"][0]["output"] == USER

        status, _ = await admin.delete(node_path(project_id, host["node_id"]))
        assert status == 204
        status, _ = await admin.put(template_path(host["template_id"]), {"username": USER, "password": PASSWORD})
        assert status == 200
        try:
            (device,) = payload(await client.call_tool("gns3_show_commands", call))["devices"]
        finally:
            await admin.delete(template_path(host["template_id"]))
        assert device["status"] == "ok", device
        never_shown(device["results"][0]["reason"], device["error"])

    status, entries = await admin.get(f"{COPILOT}/console/audit?project_id={project_id}&limit=1000")
    assert status == 200
    mine = [(e["device"], e["command"], e["outcome"], e["detail"]) for e in reversed(entries)]
    assert ("Host1", "<set node console credentials>", "ok", "username c***, password, enable password") in mine
    assert ("Host1", "<forget node console credentials>", "ok", "") in mine
    logins = [detail for device, command, outcome, detail in mine if command == "<console login>" and outcome == "ok"]
    assert logins == ["as c*** with the node's console credentials", "as c*** with the template's console credentials"]
    assert not any(PASSWORD in json.dumps(e) for e in entries)


async def test_they_are_encrypted_at_rest(admin, gns3_server, lab):
    status, _ = await admin.put(node_path(lab["project_id"], lab["other"]["node_id"]), CREDENTIALS)
    assert status == 200
    files = list(Path(gns3_server.root).rglob("copilot_console_credentials.sqlite3*"))
    assert files
    assert not any(PASSWORD.encode() in f.read_bytes() or b"Enable-Pw-77" in f.read_bytes() for f in files)
    # Nor in the server's log, which saw them set and typed.
    assert PASSWORD not in (Path(gns3_server.root) / "gns3server.log").read_text(errors="replace")
