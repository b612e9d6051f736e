"""GNS3Client policy (errors, re-login, injection) against a scripted loopback HTTP stub.

The real server is exercised in tests/integration; here a tiny aiohttp app plays
answers GNS3 gives rarely or never on demand (5xx, HTML bodies, revoked tokens).
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from gns3server.agent.gns3_copilot.gns3_client import (
    GNS3APIError,
    GNS3AuthenticationError,
    GNS3Client,
    GNS3ConflictError,
    GNS3Connection,
    GNS3ConnectionError,
    GNS3Error,
    GNS3NotFoundError,
    GNS3PermissionError,
    GNS3ServerError,
    fetch_rest_topology,
    fetch_topology,
)
from gns3server.agent.gns3_copilot.tools import GNS3TopologyTool
from gns3server.agent.gns3_copilot.tools.errors import ToolError, model_message
from tests.support.gns3_admin import AdminClient, OwnSessionClient

PID = "5a1c3f0e-8d2b-4c6a-9e7f-0123456789ab"


def _jwt(exp: float) -> str:
    def part(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")
    return f"{part({'alg': 'HS256'})}.{part({'sub': 'admin', 'exp': exp})}.c2ln"


@dataclass
class Stub:
    """Answers ``answers[(method, path)]`` = (status, body, content_type); records calls."""

    base_url: str = ""
    answers: dict[tuple[str, str], tuple[int, str, str]] = field(default_factory=dict)
    calls: list[tuple[str, str, str | None]] = field(default_factory=list)
    valid_tokens: set[str] = field(default_factory=set)
    logins: int = 0
    peers: set[Any] = field(default_factory=set)

    once: dict[tuple[str, str], tuple[int, str, str]] = field(default_factory=dict)

    def answer(self, method: str, path: str, status: int, body: Any, content_type: str = "application/json",
               *, first: bool = False) -> None:
        """Answer ``method path`` so from now on (``first``: to its next request only, then as before)."""
        text = body if isinstance(body, str) else json.dumps(body)
        (self.once if first else self.answers)[(method, path)] = (status, text, content_type)

    async def handle(self, request: web.Request) -> web.Response:
        auth = request.headers.get("Authorization")
        self.peers.add(request.transport.get_extra_info("peername") if request.transport else None)
        self.calls.append((request.method, request.path, auth))
        if request.path == "/v3/access/users/authenticate":
            self.logins += 1
            body = await request.json()
            if body != {"username": "admin", "password": "admin"}:
                return web.json_response({"message": "Authentication was unsuccessful."}, status=401)
            token = _jwt(time.time() + 3600) + str(self.logins)
            self.valid_tokens.add(token)
            return web.json_response({"access_token": token, "token_type": "bearer"})
        if self.valid_tokens and (auth is None or auth[7:] not in self.valid_tokens):
            return web.json_response({"message": "Could not validate credentials"}, status=401)
        status, text, content_type = self.once.pop((request.method, request.path), None) or self.answers.get(
            (request.method, request.path), (404, json.dumps({"message": "no such route"}), "application/json"))
        return web.Response(status=status, text=text, content_type=content_type)


@pytest.fixture
async def stub() -> AsyncIterator[Stub]:
    stub = Stub()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", stub.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    stub.base_url = f"http://127.0.0.1:{port}"
    try:
        yield stub
    finally:
        await runner.cleanup()


@pytest.mark.parametrize(
    ("status", "error"),
    [(401, GNS3AuthenticationError), (403, GNS3PermissionError), (404, GNS3NotFoundError),
     (409, GNS3ConflictError), (422, GNS3APIError), (500, GNS3ServerError), (503, GNS3ServerError)],
)
async def test_status_maps_to_one_error_class(stub: Stub, status: int, error: type[GNS3APIError]) -> None:
    stub.answer("GET", f"/v3/projects/{PID}", status, {"message": f"GNS3 says {status}"})
    async with OwnSessionClient(stub.base_url, token="t") as client:
        with pytest.raises(error) as caught:
            await client.project(PID)
    assert type(caught.value) is error and isinstance(caught.value, GNS3Error)
    assert caught.value.status == status and caught.value.message == f"GNS3 says {status}"
    assert str(caught.value) == f"GNS3 answered {status} to GET {stub.base_url}/v3/projects/{PID}: GNS3 says {status}"


async def test_validation_message_loses_the_server_traceback(stub: Stub) -> None:
    message = ("1 validation error:\n  {'type': 'missing', 'loc': ('body',)}\n\n"
               '  File "/srv/gns3server/api/routes/controller/nodes.py", line 268, in start_node\n'
               "    POST /v3/projects/{project_id}/nodes/{node_id}/start")
    stub.answer("POST", f"/v3/projects/{PID}/nodes/start", 422, {"message": message})
    async with OwnSessionClient(stub.base_url, token="t") as client:
        with pytest.raises(GNS3APIError) as caught:
            await client.node_action(PID, "start")
    assert caught.value.message == "1 validation error:\n  {'type': 'missing', 'loc': ('body',)}"


async def test_bodies_that_are_not_json(stub: Stub) -> None:
    stub.answer("GET", "/v3/projects", 200, "<html>proxy</html>", "text/html")
    stub.answer("GET", "/v3/templates", 502, "<html>Bad Gateway</html>", "text/html")
    async with OwnSessionClient(stub.base_url, token="t") as client:
        with pytest.raises(GNS3ServerError, match="not JSON") as not_json:
            await client.projects()
        with pytest.raises(GNS3ServerError) as bad_gateway:
            await client.templates()
    assert not_json.value.status == 200
    assert isinstance(not_json.value.__cause__, ValueError)
    assert bad_gateway.value.message == "<html>Bad Gateway</html>"


async def test_refused_token_is_replaced_by_one_login(stub: Stub) -> None:
    stub.answer("GET", "/v3/projects", 200, [])
    stub.valid_tokens.add("never-used")  # the stub now checks tokens
    async with AdminClient(stub.base_url, token="revoked", username="admin", password="admin") as client:
        assert await client.projects() == []
    assert stub.logins == 1
    assert [c[:2] for c in stub.calls] == [
        ("GET", "/v3/projects"), ("POST", "/v3/access/users/authenticate"), ("GET", "/v3/projects")]


async def test_expired_token_many_calls_one_login(stub: Stub) -> None:
    stub.answer("GET", "/v3/projects", 200, [])
    async with AdminClient(stub.base_url, token=_jwt(time.time() - 1), username="admin", password="admin") as client:
        await asyncio.gather(*(client.projects() for _ in range(20)))
    assert stub.logins == 1


async def test_expired_token_without_credentials_is_not_sent(stub: Stub) -> None:
    async with OwnSessionClient(stub.base_url, token=_jwt(time.time() - 60)) as client:
        with pytest.raises(GNS3AuthenticationError, match="expired at"):
            await client.projects()
    assert stub.calls == []


async def test_wrong_password_raises(stub: Stub) -> None:
    async with AdminClient(stub.base_url) as client:
        with pytest.raises(GNS3AuthenticationError, match="unsuccessful"):
            await client.login("admin", "nope")
        with pytest.raises(GNS3AuthenticationError, match="no GNS3 token"):
            await client.projects()
    assert [c[1] for c in stub.calls] == ["/v3/access/users/authenticate"]


async def test_a_borrowed_session_is_used_and_left_open(stub: Stub) -> None:
    stub.answer("GET", "/v3/projects", 200, [])
    async with aiohttp.ClientSession(headers={"X-Test": "injected"}) as session:
        async with GNS3Client(stub.base_url, token="t", session=session) as client:
            assert await client.projects() == []
        assert not session.closed  # the owner closes it, not each client
        async with GNS3Client(stub.base_url, token="u", session=session) as client:
            assert await client.projects() == []
    assert [c[2] for c in stub.calls] == ["Bearer t", "Bearer u"]


async def test_one_connection_many_users_per_request_tokens(stub: Stub) -> None:
    """One pool for the server; each client sends its own user's token, connections are reused."""
    stub.answer("GET", "/v3/projects", 200, [])
    async with GNS3Connection(stub.base_url, limit=2) as connection:
        for token in ("alice", "bob", "alice"):
            async with connection.client(token) as client:
                assert await client.projects() == []
        await asyncio.gather(*(connection.client(f"u{i}").projects() for i in range(6)))
    assert [c[2] for c in stub.calls[:3]] == ["Bearer alice", "Bearer bob", "Bearer alice"]
    assert sorted(c[2] or "" for c in stub.calls[3:]) == [f"Bearer u{i}" for i in range(6)]
    assert len(stub.peers) <= 2  # at most `limit` connections, reused across users
    with pytest.raises(RuntimeError, match="not open"):
        connection.client("late")


async def test_a_client_has_no_session_of_its_own() -> None:
    """The copilot cannot open a session per operation: a client borrows one (its connection's)."""
    with pytest.raises(TypeError, match="session"):
        GNS3Client("http://127.0.0.1:9", token="t")  # no session=


async def test_refused_connection_names_the_url() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: connections are refused
        async with OwnSessionClient(f"http://127.0.0.1:{port}", token="t") as client:
            with pytest.raises(GNS3ConnectionError) as caught:
                await client.projects()
    assert caught.value.url == f"http://127.0.0.1:{port}/v3/projects"
    assert f"http://127.0.0.1:{port}/v3/projects" in str(caught.value)
    assert isinstance(caught.value.__cause__, aiohttp.ClientConnectionError)


async def test_link_ports_by_name_short_name_or_case(stub: Stub) -> None:
    nodes = [
        {"node_id": "11111111-1111-4111-8111-111111111111", "name": "R1",
         "ports": [{"name": "FastEthernet0/0", "short_name": "f0/0", "adapter_number": 0, "port_number": 0},
                   {"name": "FastEthernet0/1", "short_name": "f0/1", "adapter_number": 0, "port_number": 1}]},
        {"node_id": "22222222-2222-4222-8222-222222222222", "name": "PC1",
         "ports": [{"name": "Ethernet0", "short_name": "e0", "adapter_number": 0, "port_number": 0}]},
    ]
    stub.answer("POST", f"/v3/projects/{PID}/links", 201, {"link_id": "l1"})
    async with OwnSessionClient(stub.base_url, token="t") as client:
        for port_a, port_b in (("f0/1", "e0"), ("FastEthernet0/1", "Ethernet0"), ("fastethernet0/1", "E0")):
            assert await client.create_link(PID, "R1", port_a, "PC1", port_b, nodes=nodes) == {"link_id": "l1"}
        # Node names as the other tools take them: exactly, else ignoring case.
        assert await client.create_link(PID, "r1", "f0/1", "pc1", "e0", nodes=nodes) == {"link_id": "l1"}
        with pytest.raises(GNS3NotFoundError, match=r"'R1' has no port 'f0/9' \(ports: f0/0, f0/1\)"):
            await client.create_link(PID, "R1", "f0/9", "PC1", "e0", nodes=nodes)
        with pytest.raises(GNS3NotFoundError, match=r"no node 'PC2'"):
            await client.create_link(PID, "R1", "f0/0", "PC2", "e0", nodes=nodes)
    assert len([c for c in stub.calls if c[1].endswith("/links")]) == 4


async def test_tool_lets_a_bug_through_as_a_bug() -> None:
    """A bug is not dressed as GNS3's answer: the graph's policy logs it and tells the model only that it failed."""

    def broken_factory() -> GNS3Client:
        raise KeyError("settings")

    with pytest.raises(KeyError) as caught:
        await GNS3TopologyTool(client_factory=broken_factory).ainvoke({"project_id": PID})
    assert model_message(caught.value) is None


async def test_tool_reports_an_unreachable_server() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        base_url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        tool = GNS3TopologyTool(client_factory=lambda: OwnSessionClient(base_url, token="t"))
        with pytest.raises(ToolError) as caught:
            await tool.ainvoke({"project_id": PID})
    assert isinstance(caught.value.__cause__, GNS3ConnectionError)
    assert f"{base_url}/v3/projects/{PID}" in str(caught.value)
    assert model_message(caught.value) == str(caught.value)


async def test_rest_topology_is_the_raw_payloads(stub: Stub) -> None:
    """What the context manager gets: GNS3's payloads as they are, as Topology.as_rest gives them."""
    project = {"project_id": PID, "name": "lab", "status": "opened", "auto_open": False}
    nodes = [{"node_id": "n1", "name": "PC1", "node_type": "vpcs", "ports": []}]
    links = [{"link_id": "l1", "nodes": [{"node_id": "n1", "adapter_number": 0, "port_number": 0},
                                          {"node_id": "gone", "adapter_number": 0, "port_number": 0}]}]
    stub.answer("GET", f"/v3/projects/{PID}", 200, project)
    stub.answer("GET", f"/v3/projects/{PID}/nodes", 200, nodes)
    stub.answer("GET", f"/v3/projects/{PID}/links", 200, links)
    async with OwnSessionClient(stub.base_url, token="t") as client:
        rest = await fetch_rest_topology(client, PID)
        built = await fetch_topology(client, PID)
    assert rest == built.as_rest() == {"project_id": PID, "name": "lab", "status": "opened", "nodes": nodes, "links": links}


SNAPSHOT = "5b1e3c7a-9d2f-4e8b-a6c0-1f2e3d4c5b6a"


async def test_a_snapshot_restore_that_races_gns3s_own_file_removal_is_tried_once_more(stub: Stub) -> None:
    restore = f"/v3/projects/{PID}/snapshots/{SNAPSHOT}/restore"
    stub.answer("GET", f"/v3/projects/{PID}", 200, {"project_id": PID, "status": "closed"})
    stub.answer("POST", restore, 200, {"project_id": PID, "status": "opened"})
    stub.answer("POST", restore, 409, {"message": "[Errno 39] Directory not empty: 'qemu'"}, first=True)
    async with OwnSessionClient(stub.base_url, token="t") as client:
        restored = await client.restore_snapshot(PID, SNAPSHOT)
    assert restored == {"project_id": PID, "status": "opened"}
    assert [(m, p) for m, p, _ in stub.calls] == [("POST", restore), ("GET", f"/v3/projects/{PID}"), ("POST", restore)]


@pytest.mark.parametrize("message", ["[Errno 39] Directory not empty: 'qemu'", "Snapshot is locked"])
async def test_a_snapshot_restore_is_tried_once_more_only_for_that_error_and_only_once(stub: Stub,
                                                                                       message: str) -> None:
    restore = f"/v3/projects/{PID}/snapshots/{SNAPSHOT}/restore"
    stub.answer("GET", f"/v3/projects/{PID}", 200, {"project_id": PID, "status": "closed"})
    stub.answer("POST", restore, 409, {"message": message})  # every time
    async with OwnSessionClient(stub.base_url, token="t") as client:
        with pytest.raises(GNS3ConflictError, match=re.escape(message)):
            await client.restore_snapshot(PID, SNAPSHOT)
    posts = [p for m, p, _ in stub.calls if m == "POST"]
    assert len(posts) == (2 if "Errno 39" in message else 1)
