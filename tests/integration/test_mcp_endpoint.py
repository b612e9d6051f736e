"""The MCP endpoint through real MCP clients against a real server of ours.

Clients: the official MCP Python SDK client (``streamable_http_client`` and
``ClientSession``, with and without elicitation) and LangChain's MCP adapters.
Credentials: GNS3 tokens and MCP keys made through our API. The device is real:
the project's VPCS node "PC1" has a Debian VPCS daemon on the console port GNS3
gave it (as in test_copilot_confirm). Users without the GNS3 privilege are real
GNS3 users made through ``/v3/access``.
"""

from __future__ import annotations

import asyncio
import json
import signal
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import anyio
import pytest
from mcp import ClientSession, types
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from mcp.shared.context import RequestContext
from mcp.shared.exceptions import McpError
from test_copilot_api import API, COPILOT, add_vpcs_node, admin, http, lab, users  # noqa: F401

pytestmark = pytest.mark.integration

MCP = "/v3/copilot/mcp"
ALL_TOOLS = {
    "gns3_list_projects", "gns3_select_project", "gns3_topology", "gns3_topology_text", "gns3_list_templates",
    "gns3_node_action",
    "gns3_create_node", "gns3_create_link", "gns3_update_link", "gns3_show_commands", "gns3_config_commands",
    "gns3_check_work", "gns3_lab_scenarios", "gns3_lab_assign", "gns3_lab_results", "gns3_verify",
}
READ_ONLY_TOOLS = {"gns3_list_projects", "gns3_select_project", "gns3_topology", "gns3_topology_text",
                   "gns3_list_templates", "gns3_show_commands", "gns3_check_work", "gns3_lab_scenarios",
                   "gns3_lab_results", "gns3_verify"}
SET_IP = {"device": "PC1", "commands": ["ip 10.0.0.1/24 10.0.0.254"]}
ElicitationCallback = Callable[[RequestContext[ClientSession, Any], types.ElicitRequestParams], Awaitable[Any]]


@asynccontextmanager
async def mcp_client(
    base_url: str, credential: str | None, *, elicitation: ElicitationCallback | None = None,
    on_message: Callable[[Any], Awaitable[None]] | None = None,
) -> AsyncIterator[ClientSession]:
    """An initialized official MCP client session with ``credential`` as its bearer token."""
    headers = {"Authorization": f"Bearer {credential}"} if credential else {}
    async with (
        create_mcp_http_client(headers=headers) as http_client,
        streamable_http_client(base_url + MCP, http_client=http_client) as (read, write, _),
        ClientSession(read, write, elicitation_callback=elicitation, message_handler=on_message) as session,
    ):
        await session.initialize()
        yield session


def http_statuses(error: BaseException) -> set[int]:
    """HTTP statuses of the requests that failed inside the client's task groups."""
    if isinstance(error, BaseExceptionGroup):
        return set().union(*(http_statuses(e) for e in error.exceptions))
    response = getattr(error, "response", None)
    return {response.status_code} if response is not None else set()


async def refused(base_url: str, credential: str) -> set[int]:
    """The statuses the official client met when opening a session with ``credential``."""
    with pytest.raises(BaseException) as caught:
        async with mcp_client(base_url, credential):
            pass
    return http_statuses(caught.value)


def payload(result: types.CallToolResult) -> Any:
    (content,) = result.content
    assert isinstance(content, types.TextContent)
    try:
        return json.loads(content.text)
    except ValueError:
        return content.text


async def new_key(api: API, name: str, scope: str = "full", **extra: Any) -> dict[str, Any]:
    status, body = await api.post(f"{MCP}/keys", {"name": name, "scope": scope, **extra})
    assert status == 201, body
    assert body["key"].startswith("gns3c_mcp_") and body["endpoint"] == MCP
    return body


async def audit_entries(admin: API, session: str, project: str) -> list[dict[str, Any]]:
    """What the console audit holds for this MCP credential in this project, oldest first."""
    status, entries = await admin.get(f"{COPILOT}/console/audit?session_id={session}&project_id={project}")
    assert status == 200, entries
    return list(reversed(entries))


async def audit(admin: API, session: str, project: str) -> list[tuple[str, str, str, str]]:
    return [(e["user"], e["device"], e["command"], e["outcome"]) for e in await audit_entries(admin, session, project)]


# ------------------------------------------------------------------ authentication


async def test_requests_without_a_usable_credential_are_refused(gns3_server, http):
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": types.LATEST_PROTOCOL_VERSION, "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"}}}
    expired = gns3_server.signed_token(expires_in=timedelta(minutes=-1))
    forged = gns3_server.signed_token(expires_in=timedelta(minutes=5)).rsplit(".", 1)[0] + ".AAAA"
    headers = {"Accept": "application/json, text/event-stream"}
    for credential, message in [(None, "Not authenticated"), ("gns3c_mcp_nosuchkey", "Unknown, revoked or expired"),
                                (expired, "expired"), (forged, "Invalid GNS3 token")]:
        auth = {"Authorization": f"Bearer {credential}"} if credential else {}
        async with http.post(gns3_server.base_url + MCP, json=initialize, headers={**headers, **auth}) as response:
            body = await response.json()
            assert response.status == 401 and message in body["message"], (credential, body)
            assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert await refused(gns3_server.base_url, "gns3c_mcp_nosuchkey") == {401}  # the official client too


async def test_an_mcp_session_only_answers_the_credential_that_opened_it(gns3_server, admin, users, http):
    """Raw streamable HTTP: a session id is useless with another user's, or another key's, credential."""
    key = await new_key(admin, "session-owner", "full")
    other_key = await new_key(admin, "session-other", "full")
    stranger = await users(f"mcp-hijack-{uuid.uuid4().hex[:6]}")
    accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

    async def post(credential: str, message: dict[str, Any], session: str | None = None) -> tuple[int, str | None]:
        headers = {**accept, "Authorization": f"Bearer {credential}"}
        if session:
            headers["Mcp-Session-Id"] = session
        async with http.post(gns3_server.base_url + MCP, json=message, headers=headers) as response:
            await response.read()
            return response.status, response.headers.get("Mcp-Session-Id")

    status, session = await post(key["key"], {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": types.LATEST_PROTOCOL_VERSION, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
    assert status == 200 and session
    assert (await post(key["key"], {"jsonrpc": "2.0", "method": "notifications/initialized"}, session))[0] == 202
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    for credential in (other_key["key"], stranger.token, admin.token):
        assert (await post(credential, listing, session))[0] == 404, credential[:12]
    assert (await post(key["key"], listing, session))[0] == 200


# ------------------------------------------------------------------ tools


async def test_official_client_lists_and_calls_every_tool(gns3_server, admin, lab, tmp_path):
    project, _vpcs = lab
    async with mcp_client(gns3_server.base_url, admin.token) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == ALL_TOOLS
        assert tools["gns3_show_commands"].annotations.readOnlyHint is True
        assert "approval_id" in tools["gns3_config_commands"].inputSchema["properties"]

        listed = payload(await client.call_tool("gns3_list_projects", {}))
        assert project in {p["project_id"] for p in listed["projects"]}
        # Without a project: a clear error; then one is selected for the session.
        missing = await client.call_tool("gns3_topology", {})
        assert missing.isError and "project_id: required" in payload(missing)
        selected = await client.call_tool("gns3_select_project", {"project_id": project})
        assert not selected.isError and payload(selected)["selected"] == project

        topology = payload(await client.call_tool("gns3_topology", {}))
        assert [n["name"] for n in topology["nodes"]] == ["PC1"]
        text = payload(await client.call_tool("gns3_topology_text", {}))
        assert "PC1" in text and "links: none" in text
        templates = payload(await client.call_tool("gns3_list_templates", {"category": "guest"}))
        assert "VPCS" in {t["name"] for t in templates}
        created = await client.call_tool("gns3_create_node", {"template": "VPCS", "name": "PC2", "project_id": project})
        assert not created.isError and payload(created)["name"] == "PC2"
        link = payload(await client.call_tool("gns3_create_link", {
            "node_a": "PC1", "port_a": "e0", "node_b": "PC2", "port_b": "e0"}))
        assert link["link"] == "PC1 e0 <-> PC2 e0" and link["link_id"]
        action = payload(await client.call_tool("gns3_node_action", {"action": "stop", "nodes": ["PC2"]}))
        assert action["action"] == "stop" and [r["node"] for r in action["results"]] == ["PC2"]
        shown = payload(await client.call_tool("gns3_show_commands", {"devices": ["PC1"], "commands": ["show ip"]}))
        (device,) = shown["devices"]
        assert device["status"] == "ok" and "IP/MASK" in device["results"][0]["output"]
        # Checks on demand: a verdict with the values read (PC1 has no address in this lab).
        checked = payload(await client.call_tool("gns3_verify", {"checks": ["PC1 address 10.0.0.1/24"]}))
        (verdict,) = checked["checks"]
        assert checked["passed"] is False and verdict["status"] == "fail" and verdict["evidence"], checked

        bad = await client.call_tool("gns3_show_commands", {"devices": [], "commands": ["show ip"]})
        assert bad.isError and payload(bad).startswith("Invalid arguments: devices")
        unknown = await client.call_tool("gns3_no_such_tool", {})
        assert unknown.isError and "Unknown tool" in payload(unknown)
    after = await admin.get(f"/v3/projects/{project}/links")
    assert len(after[1]) == 1  # the link is really there


async def test_policy_refuses_commands_and_the_audit_names_the_key(gns3_server, admin, lab, tmp_path):
    project, vpcs = lab
    key = await new_key(admin, f"laptop-{uuid.uuid4().hex[:6]}", "read_only")
    async with mcp_client(gns3_server.base_url, key["key"]) as client:
        args = {"devices": ["PC1"], "commands": ["show ip", "ip 10.0.0.9/24"], "project_id": project}
        blocked = await client.call_tool("gns3_show_commands", args)
        assert blocked.isError and payload(blocked).startswith("the commands on PC1: every one failed\n- PC1: blocked")
        (device,) = blocked.structuredContent["devices"]  # what the failed call still reports
        assert device["status"] == "blocked" and [r["status"] for r in device["results"]] == ["not_run", "blocked"]
    assert await vpcs.address(tmp_path) == "IP/MASK     : 0.0.0.0/0"
    assert await audit(admin, f"mcp:key:{key['name']}", project) == [
        ("admin", "PC1", "show ip", "not_run"), ("admin", "PC1", "ip 10.0.0.9/24", "blocked")]


async def test_read_only_keys_get_the_read_only_tools(gns3_server, admin, lab):
    project, _ = lab
    key = await new_key(admin, "reader", "read_only")
    async with mcp_client(gns3_server.base_url, key["key"]) as client:
        assert {t.name for t in (await client.list_tools()).tools} == READ_ONLY_TOOLS
        result = await client.call_tool("gns3_config_commands", {**SET_IP, "project_id": project})
        assert result.isError and "read-only" in payload(result)
        result = await client.call_tool("gns3_create_node", {"template": "VPCS", "project_id": project})
        assert result.isError
    _status, nodes = await admin.get(f"/v3/projects/{project}/nodes")
    assert [n["name"] for n in nodes] == ["PC1"]


# ------------------------------------------------------------------ approval


async def test_elicitation_asks_the_client_and_only_an_approval_runs(gns3_server, admin, lab, tmp_path):
    project, vpcs = lab
    asked: list[str] = []
    answer = {"action": "decline"}

    async def elicit(context: RequestContext[ClientSession, Any], params: types.ElicitRequestParams) -> Any:
        asked.append(params.message)
        if answer["action"] == "accept":
            return types.ElicitResult(action="accept", content={"approve": True})
        return types.ElicitResult(action="decline")

    async with mcp_client(gns3_server.base_url, admin.token, elicitation=elicit) as client:
        declined = await client.call_tool("gns3_config_commands", {**SET_IP, "project_id": project})
        assert declined.isError and payload(declined).startswith("Rejected by the user")
        assert await vpcs.address(tmp_path) == "IP/MASK     : 0.0.0.0/0"
        answer["action"] = "accept"
        done = await client.call_tool("gns3_config_commands", {**SET_IP, "project_id": project})
        assert not done.isError and payload(done)["status"] == "ok", payload(done)
    assert len(asked) == 2 and "ip 10.0.0.1/24 10.0.0.254" in asked[0] and "PC1" in asked[0]
    assert await vpcs.address(tmp_path) == "IP/MASK     : 10.0.0.1/24"
    entries = await audit_entries(admin, "mcp:token", project)
    # The change is a transaction: its reads and its summary line come with it, under its approval.
    (entry,) = [e for e in entries if e["command"] == SET_IP["commands"][0]]
    assert {e["approval_id"] for e in entries} == {entry["approval_id"]} and "<change>" in [e["command"] for e in entries]
    assert (entry["user"], entry["command"], entry["outcome"]) == ("admin", "ip 10.0.0.1/24 10.0.0.254", "ok")
    assert entry["approval_id"].startswith("mcp-elicitation:") and entry["approved_by"] == "admin"
    assert entry["approval_digest"].startswith("sha256:")


async def test_approval_round_trip_without_elicitation(gns3_server, admin, users, lab, tmp_path):
    project, vpcs = lab
    key = await new_key(admin, f"agent-{uuid.uuid4().hex[:6]}", "full")
    call = {**SET_IP, "project_id": project}
    async with mcp_client(gns3_server.base_url, key["key"]) as client:
        invalid = await client.call_tool("gns3_config_commands", {**call, "commands": []})
        assert invalid.isError and payload(invalid).startswith("Invalid arguments: commands")  # never up for approval
        waiting = await client.call_tool("gns3_config_commands", call)
        assert not waiting.isError and waiting.structuredContent["status"] == "waiting_for_approval"
        approval_id = waiting.structuredContent["approval_id"]
        assert f"POST {MCP}/approvals/{approval_id}" == waiting.structuredContent["approve_with"]
        again = await client.call_tool("gns3_config_commands", {**call, "approval_id": approval_id})
        assert "Still waiting" in again.structuredContent["message"]
        assert await vpcs.address(tmp_path) == "IP/MASK     : 0.0.0.0/0"

        status, pending = await admin.get(f"{MCP}/approvals")
        (listed,) = [a for a in pending if a["approval_id"] == approval_id]
        assert listed["arguments"] == SET_IP and listed["via"] == f"mcp:key:{key['name']}" and listed["state"] == "pending"
        stranger = await users(f"mcp-stranger-{uuid.uuid4().hex[:6]}")
        status, _ = await stranger.post(f"{MCP}/approvals/{approval_id}", {"approve": True})
        assert status == 404
        status, decided = await admin.post(f"{MCP}/approvals/{approval_id}", {"approve": True})
        assert status == 200 and decided["state"] == "approved"
        status, _body = await admin.post(f"{MCP}/approvals/{approval_id}", {"approve": False})
        assert status == 409

        # Bound to the exact call: other commands with this id are refused and do not use it up.
        other = await client.call_tool("gns3_config_commands", {**call, "commands": ["ip 10.0.0.66/24"],
                                                                "approval_id": approval_id})
        assert other.isError and "different call" in payload(other)
        done = await client.call_tool("gns3_config_commands", {**call, "approval_id": approval_id})
        assert not done.isError and payload(done)["status"] == "ok"
        reused = await client.call_tool("gns3_config_commands", {**call, "approval_id": approval_id})
        assert reused.isError and "not found" in payload(reused)
    assert await vpcs.address(tmp_path) == "IP/MASK     : 10.0.0.1/24"
    entries = await audit_entries(admin, f"mcp:key:{key['name']}", project)
    # The change is a transaction: its reads and its summary line come with it, under its approval.
    (entry,) = [e for e in entries if e["command"] == SET_IP["commands"][0]]
    assert {e["approval_id"] for e in entries} == {entry["approval_id"]} and "<change>" in [e["command"] for e in entries]
    assert (entry["user"], entry["command"], entry["outcome"]) == ("admin", "ip 10.0.0.1/24 10.0.0.254", "ok")
    assert (entry["approval_id"], entry["approved_by"]) == (approval_id, "admin") and entry["approved_at"]

    # A rejection is final too.
    async with mcp_client(gns3_server.base_url, key["key"]) as client:
        second = {**call, "commands": ["ip 10.0.0.2/24"]}
        approval_id = (await client.call_tool("gns3_config_commands", second)).structuredContent["approval_id"]
        assert (await admin.post(f"{MCP}/approvals/{approval_id}", {"approve": False}))[0] == 200
        rejected = await client.call_tool("gns3_config_commands", {**second, "approval_id": approval_id})
        assert rejected.isError and payload(rejected).startswith("Rejected by the user")
    assert await vpcs.address(tmp_path) == "IP/MASK     : 10.0.0.1/24"


# ------------------------------------------------------------------ keys and users


async def test_keys_are_shown_once_and_a_revoked_key_stops_at_once(gns3_server, admin, users, lab):
    project, _ = lab
    key = await new_key(admin, "short-lived", "full", expires_in_days=1)
    status, listed = await admin.get(f"{MCP}/keys")
    (mine,) = [k for k in listed if k["key_id"] == key["key_id"]]
    assert "key" not in mine and key["key"] not in json.dumps(listed) and mine["prefix"] == key["key"][:16]
    assert mine["active"] and mine["expires_at"] is not None and mine["scope"] == "full"
    for bad in [{"name": " ", "scope": "full"}, {"name": "x", "scope": "admin"}, {"name": "x", "expires_in_days": 0}]:
        status, body = await admin.post(f"{MCP}/keys", bad)
        assert status == 422, body

    stranger = await users(f"mcp-other-{uuid.uuid4().hex[:6]}")
    status, _ = await stranger.delete(f"{MCP}/keys/{key['key_id']}")
    assert status == 404
    with pytest.raises(BaseException) as caught:
        async with mcp_client(gns3_server.base_url, key["key"]) as client:
            assert not (await client.call_tool("gns3_topology", {"project_id": project})).isError
            status, _ = await admin.delete(f"{MCP}/keys/{key['key_id']}")
            assert status == 204
            with anyio.fail_after(60):  # the next request of the open session is refused
                await client.call_tool("gns3_topology", {"project_id": project})
    assert http_statuses(caught.value) == {401}
    status, listed = await admin.get(f"{MCP}/keys")
    (mine,) = [k for k in listed if k["key_id"] == key["key_id"]]
    assert not mine["active"] and mine["revoked_at"] is not None and mine["last_used_at"] is not None
    assert await refused(gns3_server.base_url, key["key"]) == {401}


async def test_a_user_without_the_gns3_privilege_gets_nothing_more_through_mcp(gns3_server, admin, users, lab):
    project, _ = lab
    name = f"mcp-noaccess-{uuid.uuid4().hex[:6]}"
    nobody = await users(name, access=False)
    key = await new_key(nobody, "mine", "full")
    for credential in (nobody.token, key["key"]):
        async with mcp_client(gns3_server.base_url, credential) as client:
            assert payload(await client.call_tool("gns3_list_projects", {}))["projects"] == []
            for tool, args in [("gns3_topology", {}), ("gns3_select_project", {}), ("gns3_topology_text", {}),
                               ("gns3_show_commands", {"devices": ["PC1"], "commands": ["show ip"]}),
                               ("gns3_create_node", {"template": "VPCS"})]:
                result = await client.call_tool(tool, {**args, "project_id": project})
                assert result.isError and payload(result).startswith("GNS3 refused"), (tool, payload(result))
            with pytest.raises(McpError, match="GNS3|ermission|403"):
                await client.read_resource(f"gns3://projects/{project}/topology")
    status, nodes = await admin.get(f"/v3/projects/{project}/nodes")
    assert [n["name"] for n in nodes] == ["PC1"]

    # A deactivated user's key stops working (GNS3's own user record is read at every request).
    status, found = await admin.get("/v3/access/users")
    user_id = next(u["user_id"] for u in found if u["username"] == name)
    status, body = await admin.put(f"/v3/access/users/{user_id}", {"is_active": False})
    assert status == 200, body
    assert await refused(gns3_server.base_url, key["key"]) == {401}


async def test_an_auditor_reads_through_mcp_but_reaches_no_console_and_changes_nothing(
        gns3_server, admin, users, lab, tmp_path):
    """A real GNS3 user with the built-in Auditor role on /projects: Project.Audit, no Node.Console."""
    project, vpcs = lab
    name = f"mcp-auditor-{uuid.uuid4().hex[:6]}"
    auditor = await users(name, access=False)
    status, roles = await admin.get("/v3/access/roles")
    role_id = next(r["role_id"] for r in roles if r["name"] == "Auditor")
    status, found = await admin.get("/v3/access/users")
    user_id = next(u["user_id"] for u in found if u["username"] == name)
    status, body = await admin.post("/v3/access/acl", {"ace_type": "user", "path": "/projects", "propagate": True,
                                                      "allowed": True, "user_id": user_id, "role_id": role_id})
    assert status == 201, body
    key = await new_key(auditor, "audit-laptop", "full")
    async with mcp_client(gns3_server.base_url, key["key"]) as client:
        topology = payload(await client.call_tool("gns3_topology", {"project_id": project}))
        assert [n["name"] for n in topology["nodes"]] == ["PC1"]
        shown = await client.call_tool("gns3_show_commands", {"devices": ["PC1"], "commands": ["show ip"],
                                                              "project_id": project})
        assert shown.isError and "Node.Console" in payload(shown), payload(shown)
        created = await client.call_tool("gns3_create_node", {"template": "VPCS", "project_id": project})
        assert created.isError and "Node.Allocate" in payload(created), payload(created)
        waiting = await client.call_tool("gns3_config_commands", {**SET_IP, "project_id": project})
        approval_id = waiting.structuredContent["approval_id"]
        assert (await auditor.post(f"{MCP}/approvals/{approval_id}", {"approve": True}))[0] == 200
        refused = await client.call_tool("gns3_config_commands", {**SET_IP, "project_id": project,
                                                                  "approval_id": approval_id})
        assert refused.isError and "Node.Console" in payload(refused)  # approval does not widen GNS3's rights
    assert await audit(admin, "mcp:key:audit-laptop", project) == [
        (name, "PC1", "show ip", "denied"), (name, "this project", "create node from VPCS", "denied"),
        (name, "PC1", "ip 10.0.0.1/24 10.0.0.254", "denied")]
    assert await vpcs.address(tmp_path) == "IP/MASK     : 0.0.0.0/0"
    status, nodes = await admin.get(f"/v3/projects/{project}/nodes")
    assert [n["name"] for n in nodes] == ["PC1"]


# ------------------------------------------------------------------ resources and prompts


async def test_topology_resource_notifies_subscribers_and_prompts_fill_in(gns3_server, admin, lab):
    project, _ = lab
    uri = f"gns3://projects/{project}/topology"
    updated = asyncio.Event()

    async def on_message(message: Any) -> None:
        if (isinstance(message, types.ServerNotification) and isinstance(message.root, types.ResourceUpdatedNotification)
                and str(message.root.params.uri) == uri):
            updated.set()

    async with mcp_client(gns3_server.base_url, admin.token, on_message=on_message) as client:
        assert client.get_server_capabilities().resources.subscribe is True
        templates = (await client.list_resource_templates()).resourceTemplates
        assert [t.uriTemplate for t in templates] == ["gns3://projects/{project_id}/topology"]
        assert uri in {str(r.uri) for r in (await client.list_resources()).resources}
        (contents,) = (await client.read_resource(uri)).contents
        assert "PC1" in contents.text and "links: none" in contents.text

        await client.subscribe_resource(uri)
        await add_vpcs_node(admin, project, "PC7")
        with anyio.fail_after(60):
            await updated.wait()
        (contents,) = (await client.read_resource(uri)).contents
        assert "PC7" in contents.text
        with pytest.raises(McpError, match="Unknown resource"):
            await client.read_resource("gns3://projects/nope/topology")

        prompts = {p.name for p in (await client.list_prompts()).prompts}
        assert prompts == {"troubleshoot_connectivity", "explain_lab"}
        got = await client.get_prompt("troubleshoot_connectivity",
                                      {"project_id": project, "device_a": "PC1", "device_b": "PC7"})
        text = got.messages[0].content.text
        assert "PC1 cannot reach PC7" in text and project in text
        with pytest.raises(McpError, match="device_b: required"):
            await client.get_prompt("troubleshoot_connectivity", {"project_id": project, "device_a": "PC1"})


# ------------------------------------------------------------------ other clients, many clients


async def test_langchain_mcp_adapters_use_the_tools(gns3_server, admin, lab):
    from langchain_mcp_adapters.client import MultiServerMCPClient

    project, _ = lab
    key = await new_key(admin, "langgraph", "read_only")
    client = MultiServerMCPClient({"gns3": {
        "transport": "streamable_http", "url": gns3_server.base_url + MCP,
        "headers": {"Authorization": f"Bearer {key['key']}"}}})
    tools = {t.name: t for t in await client.get_tools()}
    assert set(tools) == READ_ONLY_TOOLS
    result = await tools["gns3_topology"].ainvoke({"project_id": project})
    assert "PC1" in json.dumps(result, default=str)


async def test_twenty_concurrent_clients(gns3_server, admin, lab):
    project, _ = lab
    key = await new_key(admin, "many", "read_only")

    async def one(index: int) -> list[str]:
        credential = key["key"] if index % 2 else admin.token
        async with mcp_client(gns3_server.base_url, credential) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert names == (READ_ONLY_TOOLS if index % 2 else ALL_TOOLS)
            topology = payload(await client.call_tool("gns3_topology", {"project_id": project}))
            return [n["name"] for n in topology["nodes"]]

    with anyio.fail_after(180):
        results = await asyncio.gather(*(one(i) for i in range(20)))
    assert results == [["PC1"]] * 20


# ------------------------------------------------------------------ restart


async def test_open_mcp_sessions_do_not_hold_the_exit_up_and_keys_survive_a_restart(tmp_path, http):
    """Its own server: stopped while an MCP client holds a session (and its event stream) open."""
    from gns3_process import GNS3ServerProcess

    root = tmp_path / "server"
    first = await asyncio.to_thread(GNS3ServerProcess.start, root)
    try:
        admin = API(http, first.base_url, await first.token(), ())
        key = await new_key(admin, "survivor", "read_only")
        seen: dict[str, Any] = {}

        async def use_until_stopped() -> None:
            async with mcp_client(first.base_url, key["key"]) as client:
                seen["before"] = await client.call_tool("gns3_list_projects", {})
                seen["code"] = await asyncio.to_thread(first.stop)  # SIGTERM, SIGKILL only after 20 s
                await client.call_tool("gns3_list_projects", {})

        # The client's connection ends with the server; whatever the client raises for that, the
        # checks are made outside (an assertion raised inside would be swallowed by the raises()).
        with pytest.raises(BaseException) as ended:
            await use_until_stopped()
        assert not isinstance(ended.value, AssertionError)
        assert not seen["before"].isError
        code = seen["code"]
    finally:
        first.stop()
    log = first.log_file.read_text(errors="replace")
    assert "Copilot MCP endpoint stopped" in log and "Copilot stopped" in log, first.log_tail()
    assert code in (0, -signal.SIGTERM)  # its own exit (uvicorn re-raises SIGTERM when done), not the kill

    second = await asyncio.to_thread(GNS3ServerProcess.start, root)
    try:
        async with mcp_client(second.base_url, key["key"]) as client:
            assert payload(await client.call_tool("gns3_list_projects", {}))["projects"] == []
    finally:
        second.stop()
