"""The GNS3 client against a real gns3-server: auth, errors, nodes, links, actions."""

from __future__ import annotations

import asyncio
import signal
import socket
from datetime import timedelta
from typing import Any

import pytest
from gns3_process import GNS3ServerProcess, sign_token

from gns3server.agent.gns3_copilot.gns3_client import (
    GNS3AuthenticationError,
    GNS3Client,
    GNS3ConflictError,
    GNS3ConnectionError,
    GNS3NotFoundError,
    GNS3PermissionError,
    GNS3TimeoutError,
)
from tests.support.gns3_admin import AdminClient

pytestmark = pytest.mark.integration

UNKNOWN_PROJECT = "00000000-0000-4000-8000-000000000000"


async def _vpcs_template(client: GNS3Client) -> str:
    templates = await client.templates()
    return next(t["template_id"] for t in templates if t["template_type"] == "vpcs" and t.get("builtin"))


async def test_version_login_and_projects(gns3_server: GNS3ServerProcess, gns3_project: dict[str, Any]) -> None:
    async with AdminClient(gns3_server.base_url + "/v3/") as client:
        assert client.base_url == gns3_server.base_url
        assert (await client.version())["version"] == gns3_server.version
        token = await client.login(gns3_server.username, gns3_server.password)
        assert client.token == token
        projects = await client.projects()
    assert gns3_project["project_id"] in {p["project_id"] for p in projects}


async def test_given_token_is_used(gns3_server: GNS3ServerProcess, gns3_project: dict[str, Any]) -> None:
    token = await gns3_server.token()
    async with gns3_server.client(token=token) as client:
        project = await client.project(gns3_project["project_id"])
        assert client.token == token
    assert project["name"] == gns3_project["name"]


async def test_wrong_password(gns3_server: GNS3ServerProcess) -> None:
    async with AdminClient(gns3_server.base_url) as client:
        with pytest.raises(GNS3AuthenticationError) as caught:
            await client.login(gns3_server.username, "not-the-password")
    assert caught.value.status == 401
    assert caught.value.message == "Authentication was unsuccessful."
    assert "/v3/access/users/authenticate" in str(caught.value)


@pytest.mark.parametrize("kind", ["garbage", "wrong-key"])
async def test_invalid_token_is_refused_by_gns3(gns3_server: GNS3ServerProcess, kind: str) -> None:
    token = "not-a-jwt" if kind == "garbage" else sign_token("0" * 64, expires_in=timedelta(hours=1))
    async with gns3_server.client(token=token) as client:
        with pytest.raises(GNS3AuthenticationError) as caught:
            await client.projects()
    assert caught.value.status == 401
    assert caught.value.message == "Could not validate credentials"


async def test_expired_token_is_refused_by_the_client(gns3_server: GNS3ServerProcess) -> None:
    # Signed with the server's own key: GNS3 3.0 would accept it (it skips the exp check).
    expired = gns3_server.signed_token(expires_in=timedelta(minutes=-5))
    async with gns3_server.client(token=expired) as client:
        with pytest.raises(GNS3AuthenticationError, match="expired") as caught:
            await client.projects()
    assert caught.value.status is None  # refused before sending


async def test_expired_token_with_credentials_logs_in_again(gns3_server: GNS3ServerProcess) -> None:
    expired = gns3_server.signed_token(expires_in=timedelta(minutes=-5))
    async with gns3_server.client(token=expired, username="admin", password="admin") as client:
        await asyncio.gather(*(client.projects() for _ in range(5)))
        assert client.token not in (None, expired)


async def test_refused_token_with_credentials_logs_in_again(gns3_server: GNS3ServerProcess) -> None:
    async with gns3_server.client(token="revoked-token", username="admin", password="admin") as client:
        assert isinstance(await client.projects(), list)
        assert client.token != "revoked-token"


async def test_unknown_project(gns3_client: AdminClient) -> None:
    with pytest.raises(GNS3NotFoundError) as caught:
        await gns3_client.project(UNKNOWN_PROJECT)
    assert caught.value.status == 404
    assert caught.value.message == f"Project ID {UNKNOWN_PROJECT} doesn't exist"
    with pytest.raises(GNS3NotFoundError) as malformed:
        await gns3_client.nodes("no-such-project")
    assert malformed.value.status is None  # a malformed id never reaches the server


async def test_permission_denied_for_unprivileged_user(
    gns3_server: GNS3ServerProcess, gns3_client: AdminClient, gns3_project: dict[str, Any]
) -> None:
    user = await gns3_client.request("POST", "/access/users", json={
        "username": "viewer", "password": "viewer-password-1", "email": "viewer@example.com"})
    try:
        async with gns3_server.client(username="viewer", password="viewer-password-1") as client:
            with pytest.raises(GNS3PermissionError) as caught:
                await client.nodes(gns3_project["project_id"])
        assert caught.value.status == 403
        assert "privilege" in caught.value.message
    finally:
        await gns3_client.request("DELETE", f"/access/users/{user['user_id']}")


async def test_nodes_links_by_port_name_and_conflicts(gns3_client: AdminClient, gns3_project: dict[str, Any]) -> None:
    pid = gns3_project["project_id"]
    vpcs = await _vpcs_template(gns3_client)
    pc1, pc2, pc3 = await asyncio.gather(
        *(gns3_client.create_node_from_template(pid, vpcs, x=i * 100, name=f"Host{i}") for i in (1, 2, 3))
    )
    assert [pc1["name"], pc2["name"], pc3["name"]] == ["Host1", "Host2", "Host3"]

    link = await gns3_client.create_link(pid, "Host1", "e0", pc2["node_id"], "Ethernet0")
    assert {(end["node_id"], end["adapter_number"], end["port_number"]) for end in link["nodes"]} == {
        (pc1["node_id"], 0, 0), (pc2["node_id"], 0, 0)}
    nodes, links = await gns3_client.nodes_and_links(pid)
    assert {n["name"] for n in nodes} == {"Host1", "Host2", "Host3"}
    assert [lk["link_id"] for lk in links] == [link["link_id"]]

    with pytest.raises(GNS3ConflictError) as conflict:
        await gns3_client.create_link(pid, "Host3", "e0", "Host1", "e0", nodes=nodes)
    assert conflict.value.status == 409
    assert conflict.value.message == "Port is already used"

    with pytest.raises(GNS3NotFoundError, match=r"no port 'e7' \(ports: e0\)"):
        await gns3_client.create_link(pid, "Host3", "e7", "Host2", "e0", nodes=nodes)
    with pytest.raises(GNS3NotFoundError, match="no node 'Host9'"):
        await gns3_client.create_link(pid, "Host3", "e0", "Host9", "e0", nodes=nodes)


async def test_node_actions(gns3_client: AdminClient, gns3_project: dict[str, Any]) -> None:
    pid = gns3_project["project_id"]
    node = await gns3_client.create_node(pid, name="PC1", node_type="vpcs")
    nid = node["node_id"]

    await gns3_client.node_action(pid, "stop", nid)
    await gns3_client.node_action(pid, "suspend", nid)
    await gns3_client.node_action(pid, "stop")  # every node
    assert (await gns3_client.node(pid, nid))["status"] == "stopped"

    # VPCS cannot run here (no vpcs binary, no uBridge): GNS3 refuses with 409 and says why.
    for action, target in (("start", nid), ("start", None), ("reload", nid)):
        with pytest.raises(GNS3ConflictError) as caught:
            await gns3_client.node_action(pid, action, target)
        assert caught.value.status == 409 and caught.value.message
        assert 'File "' not in caught.value.message
    assert (await gns3_client.node(pid, nid))["status"] == "stopped"

    with pytest.raises(ValueError, match="unknown node action"):
        await gns3_client.node_action(pid, "explode", nid)  # type: ignore[arg-type]


async def test_open_project_and_templates(gns3_client: AdminClient, gns3_project: dict[str, Any]) -> None:
    pid = gns3_project["project_id"]
    await gns3_client.close_project(pid)
    assert (await gns3_client.project(pid))["status"] == "closed"
    assert (await gns3_client.open_project(pid))["status"] == "opened"
    types = {t["template_type"] for t in await gns3_client.templates()}
    assert "vpcs" in types


async def test_stopped_server_names_the_url(tmp_path: Any) -> None:
    server = GNS3ServerProcess.start(tmp_path / "doomed")
    async with server.client() as client:
        await client.projects()  # logged in and working
        exit_code = server.stop()
        assert server.process.poll() is not None
        with pytest.raises(GNS3ConnectionError) as caught:
            await client.projects()
    # uvicorn shuts down cleanly on SIGTERM, then re-raises it: -15 is a clean stop.
    assert exit_code in (0, -signal.SIGTERM), server.log_tail()
    assert "Finished server process" in server.log_tail()
    assert caught.value.url == f"{server.base_url}/v3/projects"
    assert f"{server.base_url}/v3/projects" in str(caught.value)
    with socket.socket() as sock:  # nothing listens there any more
        assert sock.connect_ex((server.host, server.port)) != 0


async def test_slow_server_times_out() -> None:
    accepted = asyncio.Event()

    async def never_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.set()
        await reader.read()  # hold the connection until the client gives up
        writer.close()

    stub = await asyncio.start_server(never_answer, "127.0.0.1", 0)
    port = stub.sockets[0].getsockname()[1]
    try:
        async with AdminClient(f"http://127.0.0.1:{port}", timeout=0.5) as client:
            with pytest.raises(GNS3TimeoutError) as caught:
                await client.version()
        assert accepted.is_set()
        assert caught.value.timeout == 0.5
        assert f"http://127.0.0.1:{port}/v3/version" in str(caught.value)
        assert isinstance(caught.value.__cause__, asyncio.TimeoutError)
    finally:
        stub.close()
        await stub.wait_closed()

