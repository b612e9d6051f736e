"""The copilot HTTP API, end to end: the real gns3-server started through
``gns3server-copilot``, real JWT auth and RBAC, and the OpenAI-compatible stub
as the LLM (reached by the server's own provider client).

Every response body read here is checked for the API key (``SECRET``): it must
never come back, in any route, success or failure. Nothing sleeps to
synchronise: streams are read event by event, the stub holds a reply until
released, and the one state change with no event of its own (a run cancelled by
a disconnect) is awaited by polling the session with a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import stat
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from gns3_process import GNS3ServerProcess
from vpcs_process import VPCSProcess

from gns3server.agent.gns3_copilot.api.schemas import MAX_MESSAGE_CHARS
from tests.support.openai_stub import OpenAIStub, fault, reply, tool_call

pytestmark = pytest.mark.integration

SECRET = "sk-copilot-test-7f3a9c1e5b2d4086"
RAW_PROVIDER_TEXT = "internal-provider-detail-0x5eed"
EVENT_TIMEOUT = 30.0
COPILOT = "/v3/copilot"


# ------------------------------------------------------------------ helpers


class SSE:
    """Reads a chat stream event by event (``data: {json}`` + blank line)."""

    def __init__(self, response: aiohttp.ClientResponse, secrets: tuple[str, ...]) -> None:
        self.response = response
        self.secrets = secrets
        self.events: list[dict[str, Any]] = []

    @property
    def session_id(self) -> str:
        return self.response.headers["X-Copilot-Session-Id"]

    async def next(self) -> dict[str, Any]:
        data: list[str] = []
        while True:
            raw = await asyncio.wait_for(self.response.content.readline(), EVENT_TIMEOUT)
            if not raw:
                raise EOFError(f"stream ended without done; events so far: {[e['type'] for e in self.events]}")
            line = raw.decode("utf-8").rstrip("\n")
            for secret in self.secrets:
                assert secret not in line
            if line.startswith("data: "):
                data.append(line[len("data: ") :])
            elif line == "" and data:
                event = json.loads("\n".join(data))
                self.events.append(event)
                return event
            else:
                assert line == "", f"unexpected SSE line {line!r}"

    async def until(self, kind: str) -> dict[str, Any]:
        while True:
            event = await self.next()
            if event["type"] == kind:
                return event
            assert event["type"] != "done", f"done before {kind}: {[e['type'] for e in self.events]}"

    async def rest(self) -> list[dict[str, Any]]:
        """Every event up to ``done``, then the end of the stream."""
        while not self.events or self.events[-1]["type"] != "done":
            await self.next()
        assert await asyncio.wait_for(self.response.content.read(), EVENT_TIMEOUT) == b""
        return self.events


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events if e["type"] != "heartbeat"]


def answer(events: list[dict[str, Any]]) -> str:
    """The text of the last model call."""
    text: list[str] = []
    for event in events:
        if event["type"] == "context":
            text = []
        elif event["type"] == "content":
            text.append(event["content"])
    return "".join(text)


class API:
    """One GNS3 user talking to the server; checks every body for the secrets."""

    def __init__(self, http: aiohttp.ClientSession, base_url: str, token: str | None, secrets: tuple[str, ...]):
        self.http = http
        self.base_url = base_url
        self.token = token
        self.secrets = secrets

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    async def call(self, method: str, path: str, body: Any = None, *, raw: bytes | None = None) -> tuple[int, Any]:
        kwargs: dict[str, Any] = {"headers": self.headers()}
        if raw is not None:
            kwargs["data"] = raw
            kwargs["headers"]["Content-Type"] = "application/json"
        elif body is not None:
            kwargs["json"] = body
        async with self.http.request(method, self.base_url + path, **kwargs) as response:
            text = await response.text()
            for secret in self.secrets:
                assert secret not in text, f"{method} {path} returned a secret"
            if response.content_type == "application/json" and text:
                return response.status, json.loads(text)
            return response.status, text

    async def get(self, path: str) -> tuple[int, Any]:
        return await self.call("GET", path)

    async def post(self, path: str, body: Any = None) -> tuple[int, Any]:
        return await self.call("POST", path, body)

    async def put(self, path: str, body: Any = None) -> tuple[int, Any]:
        return await self.call("PUT", path, body)

    async def patch(self, path: str, body: Any = None) -> tuple[int, Any]:
        return await self.call("PATCH", path, body)

    async def delete(self, path: str) -> tuple[int, Any]:
        return await self.call("DELETE", path)

    @contextlib.asynccontextmanager
    async def stream(self, project_id: str, **body: Any) -> AsyncIterator[SSE]:
        url = f"{self.base_url}{COPILOT}/projects/{project_id}/chat/stream"
        async with self.http.post(url, json=body, headers=self.headers()) as response:
            assert response.status == 200, await response.text()
            assert response.headers["Content-Type"].startswith("text/event-stream")
            yield SSE(response, self.secrets)

    @contextlib.asynccontextmanager
    async def confirm_stream(self, project_id: str, session_id: str, **body: Any) -> AsyncIterator[SSE]:
        url = f"{self.base_url}{sessions_path(project_id, session_id, '/confirm')}"
        async with self.http.post(url, json=body, headers=self.headers()) as response:
            assert response.status == 200, await response.text()
            yield SSE(response, self.secrets)

    async def chat(self, project_id: str, message: str, **body: Any) -> dict[str, Any]:
        """A non-streamed chat that must succeed."""
        status, result = await self.post(chat_path(project_id), {"message": message, "stream": False, **body})
        assert status == 200, result
        return result

    async def use_llm(self, stub: OpenAIStub, api_key: str = SECRET, **extra: Any) -> str:
        """Point this user's default LLM config at ``stub``; returns its id."""
        config = {"name": "stub", "model": "stub-model", "base_url": stub.base_url, "api_key": api_key,
                  "context_limit": 16, "max_retries": 0, "timeout": 20, **extra}
        status, body = await self.post(f"{COPILOT}/llm-configs", {"config": config, "is_default": True})
        assert status == 201, body
        return str(body["config_id"])


def chat_path(project_id: str) -> str:
    return f"{COPILOT}/projects/{project_id}/chat/stream"


def sessions_path(project_id: str, session_id: str | None = None, tail: str = "") -> str:
    path = f"{COPILOT}/projects/{project_id}/chat/sessions"
    return path + (f"/{session_id}" if session_id else "") + tail


async def add_vpcs_node(api: API, project_id: str, name: str) -> dict[str, Any]:
    """A VPCS node made the way the GNS3 web UI makes one: from the built-in template, then renamed."""
    status, templates = await api.get("/v3/templates")
    assert status == 200
    template = next(t["template_id"] for t in templates if t["name"] == "VPCS")
    status, node = await api.post(f"/v3/projects/{project_id}/templates/{template}", {"x": 0, "y": 0})
    assert status == 201, node
    status, node = await api.put(f"/v3/projects/{project_id}/nodes/{node['node_id']}", {"name": name})
    assert status == 200 and node["console_type"] == "telnet", node
    return node


@pytest.fixture
async def lab(admin: API, tmp_path: Path) -> AsyncIterator[tuple[str, VPCSProcess]]:
    """A project of its own with PC1, whose console port is served by a real VPCS daemon."""
    status, made = await admin.post("/v3/projects", {"name": f"lab-{uuid.uuid4().hex[:8]}"})
    assert status == 201, made
    node = await add_vpcs_node(admin, made["project_id"], "PC1")
    vpcs = await asyncio.to_thread(VPCSProcess.start, tmp_path, node["console"])
    try:
        yield made["project_id"], vpcs
    finally:
        await asyncio.to_thread(vpcs.stop)
        await admin.delete(f"/v3/projects/{made['project_id']}")


async def settled(api: API, project_id: str, session_id: str) -> dict[str, Any]:
    """The session once its (already cancelled) run has saved what it had.

    ``abort`` returns when the run has stopped and saved; a 409 means it had already.
    """
    status, body = await api.post(sessions_path(project_id, session_id, "/abort"))
    assert status in (200, 409), body
    status, session = await api.get(sessions_path(project_id, session_id))
    assert status == 200 and session["running"] is False, session
    return session


# ----------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as session:
        yield session


@pytest.fixture(scope="module")
async def users(gns3_server: GNS3ServerProcess, http: aiohttp.ClientSession) -> Callable[..., Awaitable[API]]:
    """``await users(name, access=True)``: an API client for a (new) GNS3 user.

    With ``access`` the user gets GNS3's built-in "User" role on ``/projects``
    (every project); without, the user exists but may see no project.
    """
    admin_token = await gns3_server.token()
    admin = API(http, gns3_server.base_url, admin_token, (SECRET,))
    status, roles = await admin.get("/v3/access/roles")
    assert status == 200
    user_role = next(r["role_id"] for r in roles if r["name"] == "User")
    made: dict[str, API] = {}

    async def make(name: str, access: bool = True) -> API:
        if name not in made:
            password = f"{name}-password-1"
            status, user = await admin.post("/v3/access/users", {"username": name, "password": password})
            assert status == 201, user
            if access:
                ace = {"ace_type": "user", "path": "/projects", "propagate": True, "allowed": True,
                       "user_id": user["user_id"], "role_id": user_role}
                status, body = await admin.post("/v3/access/acl", ace)
                assert status == 201, body
            made[name] = API(http, gns3_server.base_url, await gns3_server.token(name, password), (SECRET,))
        return made[name]

    return make


@pytest.fixture(scope="module")
async def admin(gns3_server: GNS3ServerProcess, http: aiohttp.ClientSession) -> API:
    return API(http, gns3_server.base_url, await gns3_server.token(), (SECRET,))


@pytest.fixture(scope="module")
async def project(admin: API) -> AsyncIterator[str]:
    status, body = await admin.post("/v3/projects", {"name": f"copilot-api-{uuid.uuid4().hex[:8]}"})
    assert status == 201, body
    yield body["project_id"]
    await admin.delete(f"/v3/projects/{body['project_id']}")


@pytest.fixture
async def stub() -> AsyncIterator[OpenAIStub]:
    """The LLM, checking that the (decrypted) key arrives; released on exit so no run stays held."""
    async with OpenAIStub(api_key=SECRET) as server:
        yield server


@pytest.fixture
async def admin_llm(admin: API, stub: OpenAIStub) -> str:
    return await admin.use_llm(stub)


# -------------------------------------------------------------------- chat


async def test_chat_streams_events_and_keeps_the_conversation(admin, admin_llm, stub, project):
    stub.enqueue(reply("Let me look.", tool_calls=[tool_call("gns3_topology", {"project_id": project})]),
                 "Your lab is empty.")
    async with admin.stream(project, message="What is in my lab?") as sse:
        session_id = sse.session_id
        events = await sse.rest()

    seen = kinds(events)
    assert seen[0] == "context" and seen[-1] == "done"
    assert seen.index("tool_call") < seen.index("tool_start") < seen.index("tool_end") < len(seen) - 1
    assert seen.count("context") == 2  # one per model call
    call = next(e for e in events if e["type"] == "tool_call")
    assert call["name"] == "gns3_topology" and call["args"] == {"project_id": project}
    # GNS3 3.1's field names for the same facts
    assert call["tool_call"]["function"]["name"] == "gns3_topology"
    assert json.loads(call["tool_call"]["function"]["arguments"]) == {"project_id": project}
    end = next(e for e in events if e["type"] == "tool_end")
    assert end["status"] == "success" and end["tool_name"] == "gns3_topology" and end["tool_output"] == end["output"]
    assert answer(events) == "Your lab is empty."
    assert events[-1] == {"type": "done", "session_id": session_id, "usage": events[-1]["usage"], "status": "completed"}
    assert events[-1]["usage"]["total_tokens"] > 0
    # The provider got the decrypted key, the question and the tools.
    assert stub.received[-1].headers["Authorization"] == f"Bearer {SECRET}"
    assert stub.requests[0]["messages"][-1] == {"role": "user", "content": "What is in my lab?"}
    offered = {t["function"]["name"] for t in stub.requests[0]["tools"]}
    assert {"gns3_topology", "gns3_node_action", "gns3_show_commands", "gns3_config_commands"} <= offered

    status, history = await admin.get(sessions_path(project, session_id, "/history"))
    assert status == 200 and history["session_id"] == session_id == history["thread_id"]
    assert [m["role"] for m in history["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert history["messages"][1]["tool_calls"][0]["name"] == "gns3_topology"
    assert history["messages"][3]["content"] == "Your lab is empty."

    # A second message continues the same conversation.
    stub.enqueue("Still empty.")
    async with admin.stream(project, message="And now?", session_id=session_id, mode="teaching") as sse:
        assert sse.session_id == session_id
        events = await sse.rest()
    assert answer(events) == "Still empty." and events[-1]["status"] == "completed"
    roles = [m["role"] for m in stub.requests[-1]["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "user"]
    teaching_tools = {t["function"]["name"] for t in stub.requests[-1]["tools"]}
    assert "gns3_topology" in teaching_tools and "gns3_create_node" not in teaching_tools

    status, sessions = await admin.get(sessions_path(project))
    assert status == 200
    mine = next(s for s in sessions if s["session_id"] == session_id)
    assert mine["title"] == "What is in my lab?" and mine["runs"] == 2 and mine["running"] is False
    assert mine["project_id"] == project and mine["total_tokens"] > 0


async def test_stream_false_returns_the_answer_as_json(admin, admin_llm, stub, project):
    stub.enqueue(reply(tool_calls=[tool_call("gns3_topology", {"project_id": project})]), "Nothing here yet.")
    result = await admin.chat(project, "Anything?", mode="text")  # GNS3 3.1's mode name
    assert result["status"] == "completed" and result["content"] == "Nothing here yet."
    assert [(c["name"], c["status"]) for c in result["tool_calls"]] == [("gns3_topology", "success")]
    assert result["usage"]["total_tokens"] > 0
    status, session = await admin.get(sessions_path(project, result["session_id"]))
    assert status == 200 and session["runs"] == 1


async def test_a_model_that_cannot_be_built_is_refused_before_the_stream_with_what_to_do(admin, project):
    # The Anthropic extra is not installed here: the user must learn which package to install,
    # as a 422 before any stream starts, not "failed unexpectedly" inside it.
    config = {"name": "claude", "provider": "anthropic", "model": "claude-x", "api_key": SECRET, "context_limit": 8}
    status, body = await admin.post(f"{COPILOT}/llm-configs", {"config": config})
    assert status == 201, body
    status, answer = await admin.post(chat_path(project), {"message": "hello", "llm_config_id": body["config_id"]})
    assert status == 422 and (answer["field"], answer["rule"]) == ("provider", "extra_missing")
    assert "pip install" in answer["message"] and "langchain-anthropic" in answer["message"]
    status, sessions = await admin.get(sessions_path(project))
    assert status == 200 and not [s for s in sessions if s["title"] == "hello"]  # nothing started


async def test_an_llm_error_mid_stream_ends_with_error_then_done_without_raw_text(admin, admin_llm, stub, project):
    stub.enqueue(fault(400, f"bad request: {RAW_PROVIDER_TEXT}", type_="invalid_request_error"))
    async with admin.stream(project, message="Fail please") as sse:
        sse.secrets += (RAW_PROVIDER_TEXT,)
        events = await sse.rest()
    assert kinds(events)[-2:] == ["error", "done"]
    error = events[-2]
    assert error["code"] == "llm_error" and "HTTP 400" in error["message"] and error["error"] == error["message"]
    assert events[-1]["status"] == "error"

    stub.enqueue(fault(400, f"bad request: {RAW_PROVIDER_TEXT}", type_="invalid_request_error"))
    admin.secrets += (RAW_PROVIDER_TEXT,)
    try:
        status, body = await admin.post(chat_path(project), {"message": "Fail again", "stream": False})
    finally:
        admin.secrets = admin.secrets[:-1]
    assert status == 502 and "HTTP 400" in body["message"]


async def test_heartbeats_busy_and_abort(admin, admin_llm, stub, project):
    stub.enqueue(reply("Hello there, friend", hold_after=1, chunk_chars=5))
    async with admin.stream(project, message="Say hello slowly") as sse:
        session_id = sse.session_id
        assert (await sse.until("content"))["content"] == "Hello"
        await sse.until("heartbeat")  # the model is held: the stream stays alive

        status, body = await admin.post(chat_path(project), {"message": "me too", "session_id": session_id})
        assert status == 409 and "busy" in body["message"]
        status, session = await admin.get(sessions_path(project, session_id))
        assert session["running"] is True

        status, body = await admin.post(sessions_path(project, session_id, "/abort"))
        assert status == 200 and body == {"status": "ok", "session_id": session_id}
        events = await sse.rest()
    assert kinds(events)[-2:] == ["abort", "done"] and events[-1]["status"] == "aborted"

    status, body = await admin.post(sessions_path(project, session_id, "/abort"))
    assert status == 409
    status, history = await admin.get(sessions_path(project, session_id, "/history"))
    assert [(m["role"], m["content"]) for m in history["messages"]] == [("user", "Say hello slowly"),
                                                                        ("assistant", "Hello")]


async def test_a_client_that_disconnects_cancels_its_run(admin, admin_llm, stub, project):
    stub.enqueue(reply("Partial answer here", hold_after=1, chunk_chars=7))
    async with admin.stream(project, message="Start and leave") as sse:
        session_id = sse.session_id
        await sse.until("content")
        sse.response.close()  # the client goes away mid-answer
    # The reply is held and never released: only a cancelled run lets go of the LLM.
    await stub.wait_for_disconnects(1)
    assert (await settled(admin, project, session_id))["runs"] == 1
    status, history = await admin.get(sessions_path(project, session_id, "/history"))
    assert status == 200, history
    assert [(m["role"], m["content"]) for m in history["messages"]][-1] == ("assistant", "Partial")
    assert len(stub.requests) == 1  # the held reply was never released, nothing else was asked

    stub.enqueue("Back again.")  # the saved history is valid: the session goes on
    result = await admin.chat(project, "Continue", session_id=session_id)
    assert result["content"] == "Back again."

    # stream: false too: the client gives up while the model is held.
    stub.enqueue(reply("Never sent", hold_after=0))
    asked = len(stub.requests)
    body = {"message": "Plain, then leave", "stream": False, "session_id": session_id}
    plain = asyncio.create_task(admin.post(chat_path(project), body))
    await stub.wait_for_requests(asked + 1)
    plain.cancel()  # aiohttp drops the connection
    with contextlib.suppress(asyncio.CancelledError):
        await plain
    await stub.wait_for_disconnects(2)
    assert (await settled(admin, project, session_id))["runs"] == 3
    _status, history = await admin.get(sessions_path(project, session_id, "/history"))
    assert history["messages"][-1] == {**history["messages"][-1], "role": "user", "content": "Plain, then leave"}
    assert len(stub.requests) == asked + 1


async def test_context_report_without_calling_the_llm(admin, admin_llm, stub, project):
    stub.enqueue("ok")
    session_id = (await admin.chat(project, "Hi"))["session_id"]
    calls = len(stub.requests)
    status, report = await admin.get(sessions_path(project, session_id, "/context"))
    assert status == 200, report
    assert report["context_limit"] == 16 and report["strategy"] == "balanced" and 0 < report["percent"] < 100
    assert report["history_tokens"] > 0
    status, teaching = await admin.get(sessions_path(project, session_id, "/context?mode=teaching"))
    assert status == 200 and teaching["tools_tokens"] < report["tools_tokens"]
    assert len(stub.requests) == calls
    status, _body = await admin.get(sessions_path(project, session_id, f"/context?llm_config_id={uuid.uuid4()}"))
    assert status == 404


# ---------------------------------------------------------------- sessions


async def test_rename_and_delete_a_session(admin, admin_llm, stub, project):
    stub.enqueue("ok")
    session_id = (await admin.chat(project, "Name me"))["session_id"]
    path = sessions_path(project, session_id)

    status, body = await admin.patch(path, {"title": "  Lab notes  "})
    assert status == 200 and body["title"] == "Lab notes" and body["session_id"] == session_id
    for bad in ({"title": "   "}, {}, {"title": "x" * 201}):
        status, _ = await admin.patch(path, bad)
        assert status == 422
    status, body = await admin.delete(path)
    assert status == 204
    for method, tail in (("GET", ""), ("GET", "/history"), ("DELETE", ""), ("POST", "/abort"), ("GET", "/context")):
        status, body = await admin.call(method, path + tail)
        assert status == 404 and "not found" in body["message"]
    status, sessions = await admin.get(sessions_path(project))
    assert session_id not in {s["session_id"] for s in sessions}


async def test_a_session_is_only_reachable_in_its_own_project(admin, admin_llm, stub, project):
    stub.enqueue("ok")
    session_id = (await admin.chat(project, "Here"))["session_id"]
    status, other = await admin.post("/v3/projects", {"name": f"copilot-other-{uuid.uuid4().hex[:8]}"})
    try:
        status, _body = await admin.get(sessions_path(other["project_id"], session_id, "/history"))
        assert status == 404
        status, _body = await admin.post(chat_path(other["project_id"]), {"message": "x", "session_id": session_id})
        assert status == 404
    finally:
        await admin.delete(f"/v3/projects/{other['project_id']}")


# -------------------------------------------------------- auth and access


def every_route(project_id: str, session_id: str, config_id: str) -> list[tuple[str, str, Any]]:
    session = sessions_path(project_id, session_id)
    configs = f"{COPILOT}/llm-configs"
    return [
        ("POST", chat_path(project_id), {"message": "hi"}),
        ("GET", sessions_path(project_id), None),
        ("GET", session, None),
        ("GET", session + "/history", None),
        ("PATCH", session, {"title": "t"}),
        ("DELETE", session, None),
        ("POST", session + "/abort", None),
        ("GET", session + "/context", None),
        ("POST", session + "/confirm", {"approved": True}),
        ("GET", configs, None),
        ("POST", configs, {"config": {"model": "m", "context_limit": 8}}),
        ("GET", configs + "/schema", None),
        ("GET", configs + "/default", None),
        ("DELETE", configs + "/default", None),
        ("PUT", f"{configs}/default/{config_id}", None),
        ("GET", f"{configs}/{config_id}", None),
        ("PUT", f"{configs}/{config_id}", {"config": {"model": "m"}}),
        ("DELETE", f"{configs}/{config_id}", None),
        ("GET", f"{COPILOT}/console/audit", None),
    ]


async def test_every_route_requires_a_logged_in_user(admin, admin_llm, stub, project, http, gns3_server):
    stub.enqueue("ok")
    session_id = (await admin.chat(project, "Mine"))["session_id"]
    anonymous = API(http, gns3_server.base_url, None, (SECRET,))
    forged = API(http, gns3_server.base_url, "not.a.jwt", (SECRET,))
    # Signed with the server's key, but expired a minute ago (GNS3 3.0's own routes would take it).
    expired = API(http, gns3_server.base_url, gns3_server.signed_token(expires_in=timedelta(minutes=-1)), (SECRET,))
    for method, path, body in every_route(project, session_id, admin_llm):
        for client in (anonymous, forged, expired):
            status, answer_ = await client.call(method, path, body)
            assert status == 401, (method, path, client.token, answer_)
        assert answer_.get("code") == "token_expired" and "log in again" in answer_["message"], (method, path, answer_)
    fresh = API(http, gns3_server.base_url, gns3_server.signed_token(expires_in=timedelta(minutes=5)), (SECRET,))
    status, _ = await fresh.get(sessions_path(project))
    assert status == 200  # the same kind of token, still valid, is taken
    status, _ = await admin.get(sessions_path(project, session_id))
    assert status == 200  # nothing was deleted by the refused calls


async def test_project_access_is_gns3s_decision(admin, users, project):
    outsider = await users("mallory", access=False)
    member = await users("alice")
    for method, path, body in every_route(project, str(uuid.uuid4()), str(uuid.uuid4()))[:9]:
        status, answer_ = await outsider.call(method, path, body)
        assert status == 403, (method, path, answer_)
        assert "privilege" in answer_["message"]  # GNS3's own words
    missing = str(uuid.uuid4())
    for client in (admin, member):
        status, body = await client.get(sessions_path(missing))
        assert status == 404, body
        status, body = await client.post(chat_path(missing), {"message": "hi"})
        assert status == 404, body
    status, body = await member.get(sessions_path(project))
    assert status == 200 and body == []
    status, body = await admin.get(sessions_path("not-a-uuid"))
    assert status == 422


async def test_two_users_are_isolated(admin, users, stub, project):
    alice = await users("alice")
    bob = await users("bob")
    status, body = await bob.post(chat_path(project), {"message": "hi"})
    assert status == 400 and body["code"] == "llm_not_configured"

    alice_config = await alice.use_llm(stub)
    stub.enqueue("Alice's answer")
    session_id = (await alice.chat(project, "Alice's question"))["session_id"]

    path = sessions_path(project, session_id)
    for method, tail, body in (("GET", "", None), ("GET", "/history", None), ("PATCH", "", {"title": "mine"}),
                               ("DELETE", "", None), ("POST", "/abort", None), ("GET", "/context", None),
                               ("POST", "/confirm", {"approved": True})):
        status, answer_ = await bob.call(method, path + tail, body)
        assert status == 404, (method, tail, answer_)
    status, body = await bob.post(chat_path(project), {"message": "hijack", "session_id": session_id})
    assert status == 404
    status, body = await bob.get(sessions_path(project))
    assert status == 200 and body == []

    configs = f"{COPILOT}/llm-configs"
    for method, path_, body in (("GET", f"{configs}/{alice_config}", None),
                                ("PUT", f"{configs}/{alice_config}", {"config": {"model": "x"}}),
                                ("PUT", f"{configs}/default/{alice_config}", None),
                                ("DELETE", f"{configs}/{alice_config}", None)):
        status, answer_ = await bob.call(method, path_, body)
        assert status == 404, (method, path_, answer_)
    status, body = await bob.post(chat_path(project), {"message": "x", "llm_config_id": alice_config})
    assert status == 404
    status, body = await bob.get(configs)
    assert body["configs"] == []

    # Alice's things are intact; the superadmin may read her session.
    status, history = await alice.get(path + "/history")
    assert status == 200 and history["messages"][-1]["content"] == "Alice's answer"
    status, history = await admin.get(path + "/history")
    assert status == 200 and len(history["messages"]) == 2
    status, listed = await alice.get(configs)
    assert [c["config_id"] for c in listed["configs"]] == [alice_config]


async def test_confirm_needs_a_session_that_waits(admin, admin_llm, stub, project):
    stub.enqueue("nothing to approve")
    session_id = (await admin.chat(project, "hello"))["session_id"]
    status, body = await admin.get(sessions_path(project, session_id))
    assert status == 200 and body["pending_calls"] == []
    status, body = await admin.post(sessions_path(project, session_id, "/confirm"), {"approved": True})
    assert status == 409 and body["code"] == "no_pending_confirmation"
    status, body = await admin.post(sessions_path(project, session_id, "/confirm"), {"approve": "yes"})
    assert status == 422


# ------------------------------------------------------------ bad requests


async def test_bad_chat_requests(admin, admin_llm, stub, project):
    path = chat_path(project)
    for body in ({}, {"message": ""}, {"message": "   "}, {"message": "x", "mode": "bogus"},
                 {"message": "x", "stream": "maybe"}, {"message": 42}):
        status, answer_ = await admin.post(path, body)
        assert status == 422, (body, answer_)
    status, answer_ = await admin.post(path, {"message": "x" * (MAX_MESSAGE_CHARS + 1)})
    assert status == 422
    status, answer_ = await admin.call("POST", path, raw=json.dumps({"message": "x" * 3_000_000}).encode())
    assert status == 413 and "too large" in answer_["message"]
    status, answer_ = await admin.call("POST", path, raw=b"{not json")
    assert status == 422
    # An unknown id that is not a UUID (a UUID names a new session: test_webui31_api)
    status, answer_ = await admin.post(path, {"message": "x", "session_id": "no-such-session"})
    assert status == 404
    status, answer_ = await admin.post(path, {"message": "x", "llm_config_id": str(uuid.uuid4())})
    assert status == 404
    assert stub.requests == []  # nothing reached the LLM


# ------------------------------------------------------------ LLM configs


async def test_llm_config_crud_masks_and_encrypts_the_key(users, stub, gns3_server):
    carol = await users("carol", access=False)  # LLM configs need no project
    configs = f"{COPILOT}/llm-configs"
    base = {"model": "stub-model", "context_limit": 16, "base_url": stub.base_url}

    status, first = await carol.post(configs, {"config": {**base, "name": "main", "api_key": SECRET}})
    assert status == 201, first
    assert first["config"]["api_key"] == f"sk-…{SECRET[-4:]}" and first["has_api_key"] is True
    assert first["is_default"] is True and first["name"] == "main"  # the first config is the default
    assert first["config"]["provider"] == "openai" and first["config"]["context_strategy"] == "balanced"
    status, second = await carol.post(configs, {"config": {**base, "model": "other"}})
    assert status == 201 and second["is_default"] is False and second["has_api_key"] is False
    assert "api_key" not in second["config"] and second["name"] == "other"

    status, listed = await carol.get(configs)
    assert [c["config_id"] for c in listed["configs"]] == [first["config_id"], second["config_id"]]
    assert listed["default_config_id"] == first["config_id"] and listed["server_default"] is None

    status, body = await carol.put(f"{configs}/default/{second['config_id']}")
    assert status == 200 and body["is_default"] is True
    status, body = await carol.get(f"{configs}/{first['config_id']}")
    assert body["is_default"] is False
    status, body = await carol.get(f"{configs}/default")
    assert status == 200 and body["source"] == "user" and body["config_id"] == second["config_id"]

    one = f"{configs}/{first['config_id']}"
    status, body = await carol.put(one, {"config": {"model": "renamed", "temperature": 0.5}})
    assert status == 200 and body["config"]["model"] == "renamed" and body["config"]["temperature"] == 0.5
    assert body["has_api_key"] is True  # kept when not given
    status, body = await carol.put(one, {"config": {"temperature": None}})
    assert status == 200 and "temperature" not in body["config"]
    status, body = await carol.put(one, {"config": {"api_key": None}})
    assert status == 200 and body["has_api_key"] is False and "api_key" not in body["config"]
    status, body = await carol.put(one, {"config": {"api_key": SECRET}})
    assert status == 200 and body["has_api_key"] is True

    # 422s name the field and the rule, and never echo a value.
    invalid = [
        ({"config": {"model": "m"}}, "context_limit", "required"),
        ({"config": {**base, "context_limit": 0, "api_key": SECRET}}, "context_limit", "minimum"),
        ({"config": {**base, "colour": "red"}}, "colour", "additionalProperties"),
        ({"config": {**base, "base_url": "ftp://x"}}, "base_url", "pattern"),
        ({"config": SECRET}, "config", "type"),
        ({**base, "api_key": SECRET}, "config", "type"),  # a bare config, not wrapped
    ]
    for body_, field, rule in invalid:
        status, body = await carol.post(configs, body_)
        assert status == 422 and body["field"] == field and body["rule"] == rule, (body_, body)
    status, body = await carol.put(one, {"config": {"context_limit": "big"}})
    assert status == 422 and body["field"] == "context_limit"
    status, body = await carol.call("POST", configs, raw=b"not json at all")
    assert status == 422

    status, schema = await carol.get(f"{configs}/schema")
    assert status == 200 and "api_key" in schema["properties"]

    status, _ = await carol.delete(f"{configs}/default")
    assert status == 204
    status, body = await carol.get(f"{configs}/default")
    assert status == 404  # no user default, no server default on this server
    status, _ = await carol.delete(f"{configs}/{second['config_id']}")
    assert status == 204
    for method in ("GET", "DELETE"):
        status, _ = await carol.call(method, f"{configs}/{second['config_id']}")
        assert status == 404

    # At rest: the key is in neither the database nor the log; the key file is private.
    config_dir = gns3_server.root / "config"
    for path in (config_dir / "copilot").iterdir():
        assert SECRET.encode() not in path.read_bytes(), path
    key_file = config_dir / "gns3_copilot_secret.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    log = gns3_server.log_file.read_text(errors="replace")
    assert "Copilot started" in log and SECRET not in log


# ------------------------------------------------------ panel and schema


async def test_panel_and_openapi(http, gns3_server):
    async with http.get(gns3_server.base_url + "/copilot") as response:  # redirected to /copilot/
        assert response.status == 200 and response.content_type == "text/html"
        assert "GNS3 Copilot" in await response.text()
    async with http.get(gns3_server.base_url + "/openapi.json") as response:
        spec = await response.json()
    copilot_paths = {p for p in spec["paths"] if p.startswith(COPILOT)}
    assert {
        f"{COPILOT}/projects/{{project_id}}/chat/stream",
        f"{COPILOT}/projects/{{project_id}}/chat/sessions",
        f"{COPILOT}/projects/{{project_id}}/chat/sessions/{{session_id}}",
        f"{COPILOT}/projects/{{project_id}}/chat/sessions/{{session_id}}/history",
        f"{COPILOT}/projects/{{project_id}}/chat/sessions/{{session_id}}/abort",
        f"{COPILOT}/projects/{{project_id}}/chat/sessions/{{session_id}}/context",
        f"{COPILOT}/llm-configs",
        f"{COPILOT}/llm-configs/{{config_id}}",
    } <= copilot_paths
    assert not any(p.startswith("/v3/compute") and "copilot" in p for p in spec["paths"])
    assert {"ChatRequest", "ChatResult", "Session", "SessionHistory", "SessionUpdate", "LLMConfig",
            "LLMConfigCreate", "LLMConfigUpdate"} <= set(spec["components"]["schemas"])


# ----------------------------------------------------------------- restart


async def test_a_server_killed_mid_answer_keeps_the_question_and_the_streamed_text(tmp_path: Path, http):
    """kill -9 while the answer streams: after the restart the turn is in the history, and goes on."""
    async with OpenAIStub(api_key=SECRET) as llm:
        root = tmp_path / "server"
        first = await asyncio.to_thread(GNS3ServerProcess.start, root)
        try:
            admin = API(http, first.base_url, await first.token(), (SECRET,))
            await admin.use_llm(llm)
            status, body = await admin.post("/v3/projects", {"name": "killed"})
            project = body["project_id"]
            llm.enqueue("First answer.")
            session_id = (await admin.chat(project, "First question"))["session_id"]
            llm.enqueue(reply("Half an answer", hold_after=1, chunk_chars=14))
            async with admin.stream(project, message="Second question", session_id=session_id) as sse:
                await sse.until("content")
                await asyncio.to_thread(first.kill)
        finally:
            first.stop()

        second = await asyncio.to_thread(GNS3ServerProcess.start, root)
        try:
            admin = API(http, second.base_url, await second.token(), (SECRET,))
            status, history = await admin.get(sessions_path(project, session_id, "/history"))
            expected = [("user", "First question"), ("assistant", "First answer."),
                        ("user", "Second question"), ("assistant", "Half an answer")]
            assert status == 200 and [(m["role"], m["content"]) for m in history["messages"]] == expected
            llm.enqueue("Third answer.")
            assert (await admin.chat(project, "Third question", session_id=session_id))["content"] == "Third answer."
            sent = [(m["role"], m["content"]) for m in llm.requests[-1]["messages"][1:]]
            assert sent == expected + [("user", "Third question")]
            status, history = await admin.get(sessions_path(project, session_id, "/history"))
            assert [(m["role"], m["content"]) for m in history["messages"]] == sent + [("assistant", "Third answer.")]
        finally:
            second.stop()


async def test_restart_keeps_sessions_configs_and_the_server_default(tmp_path: Path, monkeypatch, http):
    """Its own server (in debug mode, the most verbose log): shut down mid-run, then started again."""
    server_key, user_key = "sk-server-default-91c2e8a4b7d3", "sk-user-config-5a8f2c7e1d94"
    secrets = (server_key, user_key)
    monkeypatch.setenv("GNS3_COPILOT_LLM_API_KEY", server_key)  # the server default's key, from the environment
    async with OpenAIStub(api_key=server_key) as server_llm, OpenAIStub(api_key=user_key) as user_llm:
        settings = {"llm_model": "stub-model", "llm_base_url": server_llm.base_url, "llm_context_limit": 16,
                    "llm_max_retries": 0, "modes": "lab_automation", "heartbeat_seconds": 0.5}
        root = tmp_path / "server"

        async def start() -> tuple[GNS3ServerProcess, API]:
            process = await asyncio.to_thread(GNS3ServerProcess.start, root, copilot=settings, extra_args=["--debug"])
            return process, API(http, process.base_url, await process.token(), secrets)

        first, admin = await start()
        try:
            status, body = await admin.post("/v3/projects", {"name": "restart"})
            project = body["project_id"]
            status, default = await admin.get(f"{COPILOT}/llm-configs/default")
            assert status == 200 and default["source"] == "server"
            assert default["config"]["api_key"] == f"sk-…{server_key[-4:]}"
            status, body = await admin.post(chat_path(project), {"message": "x", "mode": "teaching"})
            assert status == 422 and "lab_automation" in body["message"]  # only that mode is allowed here

            server_llm.enqueue("First answer.")
            session_id = (await admin.chat(project, "First question"))["session_id"]
            config_id = await admin.use_llm(user_llm, api_key=user_key)
            status, _ = await admin.delete(f"{COPILOT}/llm-configs/default")  # back to the server default

            # A run that waits for the user's approval when the server stops.
            await add_vpcs_node(admin, project, "PC1")
            configure = tool_call("gns3_config_commands", {"device": "PC1", "commands": ["ip 10.0.0.1/24"]})
            server_llm.enqueue(reply(tool_calls=[configure]))
            waiting = await admin.chat(project, "Configure PC1")
            assert waiting["status"] == "waiting_confirmation"

            server_llm.enqueue(reply("Interrupted answer", hold_after=1, chunk_chars=11))
            async with admin.stream(project, message="Second question", session_id=session_id) as sse:
                await sse.until("content")
                stopping = asyncio.create_task(asyncio.to_thread(first.stop))
                events = await sse.rest()  # the exiting server cancels the run: the stream ends cleanly
            assert kinds(events)[-2:] == ["abort", "done"] and events[-1]["status"] == "aborted"
            await stopping
        finally:
            first.stop()
        first_log = first.log_file.read_text(errors="replace")
        assert "Copilot stopped" in first_log

        second, admin = await start()
        try:
            status, sessions = await admin.get(sessions_path(project))
            runs = {s["session_id"]: (s["runs"], [c["name"] for c in s["pending_calls"]]) for s in sessions}
            assert status == 200 and runs == {session_id: (2, []), waiting["session_id"]: (1, ["gns3_config_commands"])}
            # The user opens the project again, PC1's console comes up (a real VPCS), and they approve.
            status, _ = await admin.post(f"/v3/projects/{project}/open")
            assert status in (200, 201)
            status, (node,) = await admin.get(f"/v3/projects/{project}/nodes")
            vpcs = await asyncio.to_thread(VPCSProcess.start, tmp_path, node["console"])
            try:
                server_llm.enqueue("PC1 is configured.")
                status, resumed = await admin.post(
                    sessions_path(project, waiting["session_id"], "/confirm"), {"approved": True, "stream": False}
                )
                assert status == 200 and resumed["content"] == "PC1 is configured.", resumed
                assert "10.0.0.1 255.255.255.0" in server_llm.requests[-1]["messages"][-1]["content"]
                assert await vpcs.address(tmp_path) == "IP/MASK     : 10.0.0.1/24"
            finally:
                await asyncio.to_thread(vpcs.stop)
            status, history = await admin.get(sessions_path(project, session_id, "/history"))
            assert [(m["role"], m["content"]) for m in history["messages"]] == [
                ("user", "First question"), ("assistant", "First answer."),
                ("user", "Second question"), ("assistant", "Interrupted"),
            ]
            server_llm.enqueue("Third answer.")
            result = await admin.chat(project, "Third question", session_id=session_id)
            assert result["content"] == "Third answer."
            assert len(server_llm.requests[-1]["messages"]) == 6  # system + the 4 kept + the new question

            status, config = await admin.get(f"{COPILOT}/llm-configs/{config_id}")
            assert status == 200 and config["has_api_key"] is True
            user_llm.enqueue("Answered with the user's key.")
            result = await admin.chat(project, "Use my config", llm_config_id=config_id)
            assert result["content"] == "Answered with the user's key."  # decrypted after the restart
            assert user_llm.received[-1].headers["Authorization"] == f"Bearer {user_key}"
        finally:
            second.stop()
        second_log = second.log_file.read_text(errors="replace")
    for log in (first_log, second_log):
        assert " DEBUG " in log and "Copilot started" in log
        for secret in secrets:
            assert secret not in log


# ------------------------------------------------------ the topology kept between turns


@contextlib.asynccontextmanager
async def gns3_websocket(api: API, path: str) -> AsyncIterator[aiohttp.ClientWebSocketResponse]:
    """One of GNS3's notification WebSockets, once GNS3 counts it as a listener."""
    url = f"{api.base_url}{path}?token={api.token}"
    async with api.http.ws_connect(url, timeout=aiohttp.ClientWSTimeout(ws_close=EVENT_TIMEOUT)) as ws:
        # GNS3 sends nothing on opening: the socket counts once its first ping (every 5 s) arrives.
        async with asyncio.timeout(EVENT_TIMEOUT):
            message = await ws.receive()
        assert message.type == aiohttp.WSMsgType.TEXT, message
        yield ws


@contextlib.asynccontextmanager
async def web_ui_open(api: API, project_id: str) -> AsyncIterator[None]:
    """The project's notification WebSocket held open, as GNS3's web UI holds it while a user works in
    the project (its HTTP stream is no stand-in: GNS3 3.0 never auto-closes a project after one)."""
    async with gns3_websocket(api, f"/v3/projects/{project_id}/notifications/ws"):
        yield


async def shown_topology(api: API, stub: OpenAIStub, project_id: str, session_id: str | None) -> tuple[str, str]:
    """One turn; the session's id and the system prompt its model call was sent (the live topology is in it)."""
    stub.enqueue("Noted.")
    body = {"message": "What is in my lab?", **({"session_id": session_id} if session_id else {})}
    async with api.stream(project_id, **body) as sse:
        events = await sse.rest()
        assert events[-1]["status"] == "completed", events
        return sse.session_id, stub.requests[-1]["messages"][0]["content"]


async def test_a_change_made_in_gns3_shows_in_the_next_turns_topology(admin, admin_llm, stub):
    """Inside gns3-server the topology is kept between turns and forgotten on GNS3's notifications:
    whatever changes in GNS3 between two turns (a node added, renamed, deleted) is in the next one."""
    status, made = await admin.post("/v3/projects", {"name": f"kept-{uuid.uuid4().hex[:8]}"})
    assert status == 201, made
    project_id = made["project_id"]
    nodes = f"/v3/projects/{project_id}/nodes"
    try:
        async with web_ui_open(admin, project_id):
            status, pc1 = await admin.post(nodes, {"name": "PC1", "node_type": "vpcs", "compute_id": "local"})
            assert status == 201, pc1
            session, prompt = await shown_topology(admin, stub, project_id, None)
            assert "PC1" in prompt and "PC2" not in prompt
            _, prompt = await shown_topology(admin, stub, project_id, session)  # nothing changed
            assert "PC1" in prompt and "PC2" not in prompt
            status, pc2 = await admin.post(nodes, {"name": "PC2", "node_type": "vpcs", "compute_id": "local"})
            assert status == 201, pc2
            _, prompt = await shown_topology(admin, stub, project_id, session)
            assert "PC1" in prompt and "PC2" in prompt
            status, _ = await admin.put(f"{nodes}/{pc2['node_id']}", {"name": "PC7"})
            assert status == 200
            _, prompt = await shown_topology(admin, stub, project_id, session)
            assert "PC7" in prompt and "PC2" not in prompt
            status, _ = await admin.delete(f"{nodes}/{pc1['node_id']}")
            assert status == 204
            _, prompt = await shown_topology(admin, stub, project_id, session)
            assert "PC1" not in prompt and "PC7" in prompt
    finally:
        await admin.delete(f"/v3/projects/{project_id}")


async def test_a_project_still_closes_by_itself_once_the_web_ui_has_left(admin, admin_llm, stub):
    """GNS3 closes an auto-closing project 5 s after its last notification client left; the copilot's
    listener (it keeps the project's topology) must not count as one once the web UI is gone."""
    status, made = await admin.post("/v3/projects", {"name": f"closes-{uuid.uuid4().hex[:8]}"})
    assert status == 201, made
    project_id = made["project_id"]
    try:
        async with gns3_websocket(admin, "/v3/notifications/ws") as controller:  # GNS3 says there when it closes one
            async with web_ui_open(admin, project_id):
                status, node = await admin.post(f"/v3/projects/{project_id}/nodes",
                                                {"name": "PC1", "node_type": "vpcs", "compute_id": "local"})
                assert status == 201, node
                await shown_topology(admin, stub, project_id, None)  # the copilot listens to the project now
            async with asyncio.timeout(60):  # GNS3 looks 5 s after the web UI left
                while True:
                    event = json.loads(await controller.receive_str())
                    if event["action"] == "project.closed" and event["event"]["project_id"] == project_id:
                        break
        status, body = await admin.get(f"/v3/projects/{project_id}")
        assert status == 200 and body["status"] == "closed", body
    finally:
        await admin.delete(f"/v3/projects/{project_id}")
