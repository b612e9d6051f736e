"""Inputs that cannot break a list, one spelling of a session id, an MCP endpoint nobody can
exhaust, the projects a user may open (pure and SQLite-level; through the real server:
``tests/integration/test_security_round3.py``)."""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from cryptography.fernet import Fernet
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from pydantic import ValidationError

from gns3server.agent.gns3_copilot.agent.model.config import LLMConfigError, validate_llm_config
from gns3server.agent.gns3_copilot.api import llm_config_store
from gns3server.agent.gns3_copilot.api.crypto import SecretBox
from gns3server.agent.gns3_copilot.api.llm_config_store import LLMConfigStore
from gns3server.agent.gns3_copilot.api.mcp_schemas import ApprovalDecision, MCPKeyCreate
from gns3server.agent.gns3_copilot.api.middleware import BodySizeLimitMiddleware
from gns3server.agent.gns3_copilot.api.projects import VisibleProjects
from gns3server.agent.gns3_copilot.api.schemas import ChatRequest, InjectRequest, SessionUpdate
from gns3server.agent.gns3_copilot.mcp import keys as keys_module
from gns3server.agent.gns3_copilot.mcp.admission import Admission
from gns3server.agent.gns3_copilot.mcp.auth import Caller
from gns3server.agent.gns3_copilot.mcp.keys import MCPKey, MCPKeyNameTakenError, MCPKeyStore
from gns3server.agent.gns3_copilot.mcp.requests import MAX_DEPTH, body_problem
from gns3server.agent.gns3_copilot.service import storage as storage_module
from gns3server.agent.gns3_copilot.service.session_ids import canonical_session_id
from gns3server.agent.gns3_copilot.service.storage import open_sqlite_storage
from gns3server.agent.gns3_copilot.utf8 import first_unencodable, repaired
from tests.unit.test_db import OLD_CONVERSATIONS, echo_graph, raw

pytestmark = pytest.mark.security

HALF = "half \ud83d emoji"
# The previous release's conversation tables, without its rows.
OLD_TABLES = "\n".join(line for line in OLD_CONVERSATIONS.splitlines() if not line.startswith(("INSERT", "    'success'")))


# ------------------------------------------------------------------ text that is not UTF-8


def test_where_a_string_that_is_not_utf8_is() -> None:
    assert first_unencodable({"a": ["ok", {"b": HALF}]}) == "a[1].b"
    assert first_unencodable({"\udc00": 1}) == "\\udc00"  # a key, shown escaped
    assert first_unencodable(HALF) == "" and first_unencodable({"a": "ok", "n": 1, "x": None}) is None
    assert repaired({"\udc00k": [HALF]}) == {"\ufffdk": ["half \ufffd emoji"]}


@pytest.mark.parametrize(
    ("model", "body", "field"),
    [
        (ChatRequest, {"message": HALF}, "message"),
        (ChatRequest, {"message": "hi", "session_id": "\ud83d"}, "session_id"),
        (ChatRequest, {"message": "hi", "llm_config_id": "\ud83d"}, "llm_config_id"),
        (InjectRequest, {"message": HALF}, "message"),
        (SessionUpdate, {"title": HALF}, "title"),
        (MCPKeyCreate, {"name": HALF}, "name"),
    ],
)
def test_every_stored_text_field_refuses_a_lone_surrogate_naming_itself(model: Any, body: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(body)
    (error,) = caught.value.errors()
    # (pydantic refuses it by itself where a length is checked; UTF8Text everywhere else)
    assert error["loc"] == (field,) and (error["type"] == "string_unicode" or "UTF-8" in error["msg"])


@pytest.mark.parametrize(("config", "field"), [
    ({"name": HALF}, "name"), ({"model": "m\udc00"}, "model"), ({"\ud83d": 1}, "\\ud83d"),
    ({"extra_body": {"k": [HALF]}}, "extra_body"),
])
def test_an_llm_config_holding_one_anywhere_is_refused_first(config: dict[str, Any], field: str) -> None:
    with pytest.raises(LLMConfigError) as caught:
        validate_llm_config({"model": "m", "context_limit": 8, **config})
    assert (caught.value.field, caught.value.rule) == (field, "encoding")
    assert json.dumps(caught.value.errors, ensure_ascii=False).encode("utf-8")  # the 422 can be sent


async def test_configs_an_older_version_stored_with_one_are_repaired_at_start_up(tmp_path: Path, caplog) -> None:
    raw(tmp_path / llm_config_store.DATABASE_NAME, """
        CREATE TABLE copilot_llm_configs (config_id TEXT PRIMARY KEY, user_id TEXT NOT NULL, config TEXT NOT NULL,
        api_key TEXT, is_default INTEGER NOT NULL DEFAULT 0, created_at REAL NOT NULL, updated_at REAL NOT NULL);""")
    with contextlib.closing(sqlite3.connect(tmp_path / llm_config_store.DATABASE_NAME)) as db, db:
        db.execute("INSERT INTO copilot_llm_configs VALUES ('c1', 'alice', ?, NULL, 1, 1.0, 1.0)",
                   (json.dumps({"name": HALF, "model": "m", "context_limit": 8}),))
    with caplog.at_level(logging.WARNING, llm_config_store.__name__):
        store = await LLMConfigStore.open(tmp_path, SecretBox(Fernet.generate_key()))
    try:
        (record,) = await store.list("alice")
        assert record.config["name"] == "half \ufffd emoji"
        assert json.dumps(record.config, ensure_ascii=False).encode("utf-8")
        assert any("c1" in r.getMessage() and "repaired" in r.getMessage() for r in caplog.records)
    finally:
        await store.close()
    with contextlib.closing(sqlite3.connect(tmp_path / llm_config_store.DATABASE_NAME)) as db:
        (text,) = db.execute("SELECT config FROM copilot_llm_configs").fetchone()
    assert first_unencodable(json.loads(text)) is None  # written back repaired


# ------------------------------------------------------------------ one spelling of a session id


def test_every_spelling_of_a_uuid_is_one_session_id() -> None:
    value = uuid.UUID("5a1c3f0e-8d2b-4c6a-9e7f-0123456789ab")
    for spelling in (str(value).upper(), f"{{{value}}}", value.hex, value.hex.upper(), f"urn:uuid:{value}"):
        assert canonical_session_id(spelling) == str(value)
        assert ChatRequest(message="hi", session_id=spelling).session_id == str(value)
    assert canonical_session_id("not-a-uuid") == "not-a-uuid"  # names no session: kept as it is


async def test_stored_session_ids_are_given_their_one_spelling(tmp_path: Path) -> None:
    kept, upper, twin = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    path = tmp_path / storage_module.DATABASE_NAME
    with contextlib.closing(sqlite3.connect(path, check_same_thread=False)) as db:
        saver = SqliteSaver(db)
        saver.setup()
        graph = echo_graph(saver)
        for thread in (str(upper).upper(), str(twin), str(twin).upper()):
            graph.invoke({"messages": [HumanMessage(thread)]}, {"configurable": {"thread_id": thread}})
        db.executescript(f"""
            {OLD_TABLES}
            INSERT INTO copilot_sessions (session_id, user_id, project_id, title, created_at, updated_at)
                VALUES ('{kept}', 'alice', 'p1', 'kept', 1, 1), ('{str(upper).upper()}', 'alice', 'p1', 'upper', 1, 1),
                       ('{twin}', 'alice', 'p1', 'twin', 1, 1), ('{str(twin).upper()}', 'alice', 'p1', 'twin again', 1, 1);
            INSERT INTO copilot_inflight VALUES ('{str(upper).upper()}', 'q', 'p', 1);
        """)
        db.commit()
    storage = await open_sqlite_storage(tmp_path)
    try:
        sessions = {s.title: s.session_id for s in await storage.sessions.list("alice", "p1")}
        assert sessions["kept"] == str(kept) and sessions["upper"] == str(upper) and sessions["twin"] == str(twin)
        again = sessions["twin again"]
        assert again == canonical_session_id(again) and again not in (str(twin), str(kept), str(upper))
        assert await storage.sessions.inflight(str(upper)) is not None
        for session_id, said in ((str(upper), str(upper).upper()), (str(twin), str(twin)), (again, str(twin).upper())):
            saved = await storage.checkpointer.aget_tuple({"configurable": {"thread_id": session_id}})
            assert saved is not None and saved.checkpoint["channel_values"]["messages"][0].content == said
    finally:
        await storage.close()


# ------------------------------------------------------------------ MCP


def test_approval_decisions_take_json_booleans_only() -> None:
    assert ApprovalDecision.model_validate({"approve": True}).approve is True
    for loose in ("yes", "true", 1, "on", "1", 0, "false", None):
        with pytest.raises(ValidationError):
            ApprovalDecision.model_validate({"approve": loose})


async def test_key_names_are_unique_per_user_and_older_duplicates_are_renamed(tmp_path: Path) -> None:
    raw(tmp_path / keys_module.DATABASE_NAME, """
        CREATE TABLE copilot_mcp_keys (key_id TEXT PRIMARY KEY, user_id TEXT NOT NULL, name TEXT NOT NULL,
            scope TEXT NOT NULL, digest TEXT NOT NULL UNIQUE, prefix TEXT NOT NULL, created_at REAL NOT NULL,
            expires_at REAL, revoked_at REAL, last_used_at REAL);
        INSERT INTO copilot_mcp_keys VALUES ('k1', 'alice', 'laptop', 'full', 'd1', 'p', 1.0, NULL, NULL, NULL);
        INSERT INTO copilot_mcp_keys VALUES ('k2', 'alice', 'laptop', 'full', 'd2', 'p', 2.0, NULL, 3.0, NULL);
        INSERT INTO copilot_mcp_keys VALUES ('k3', 'alice', 'laptop', 'full', 'd3', 'p', 3.0, NULL, NULL, NULL);
        INSERT INTO copilot_mcp_keys VALUES ('k4', 'bob', 'laptop', 'full', 'd4', 'p', 4.0, NULL, NULL, NULL);
    """)
    keys = await MCPKeyStore.open(tmp_path)
    try:
        assert [k.name for k in await keys.list("alice")] == ["laptop", "laptop (2)", "laptop (3)"]
        assert [k.name for k in await keys.list("bob")] == ["laptop"]
        with pytest.raises(MCPKeyNameTakenError):
            await keys.create("alice", "laptop (2)", "read_only")  # a revoked key's name stays taken
        made, _secret = await keys.create("bob", "desktop", "full")
        assert made.name == "desktop"
    finally:
        await keys.close()


def caller(user: str, key: str | None = None) -> Caller:
    record = MCPKey(key, user, key, "read_only", "p", 0.0, None, None, None) if key else None
    return Caller(user, user, False, key=record)


def test_sessions_are_capped_per_credential_and_per_user_and_given_back() -> None:
    admission = Admission(per_credential=2, per_user=3, per_session=2)
    first, second, stranger = caller("u1", "k1"), caller("u1", "k2"), caller("u2")
    tickets = [admission.open(first), admission.open(first)]
    refused = admission.open(first)
    assert isinstance(refused, str) and "this MCP key (2)" in refused
    tickets.append(admission.open(second))
    assert isinstance(admission.open(second), str) and "GNS3 user u1 (3" in admission.open(second)  # type: ignore[operator]
    assert not isinstance(admission.open(stranger), str)  # another user is not locked out
    # A session's server task holds its ticket too: it is given back when both have let go.
    ticket = tickets[0]
    assert not isinstance(ticket, str)
    with admission.held(ticket):
        with admission.held(ticket, taken=True):
            pass
        assert isinstance(admission.open(first), str)  # the session still lives
    assert not isinstance(admission.open(first), str)  # now its place is free


def test_requests_in_flight_are_capped_per_session() -> None:
    admission = Admission(per_session=2)
    user = caller("u1", "k1")
    with (admission.request(user, "s1") as one, admission.request(user, "s1") as two,
          admission.request(user, "s1") as three, admission.request(user, "s2") as other):
        assert (one, two, three, other) == (True, True, False, True)
    with admission.request(user, "s1") as again:
        assert again


@pytest.mark.parametrize(
    ("body", "code"),
    [(b'{"jsonrpc": "2.0", "id": 1, "method": "x", "params": {"a": "\xff"}}', -32700),
     (b"[" * 5000, -32700), (b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1), -32700),
     (b'{"jsonrpc": "2.0", "id": 4, "method": "x", "params": {"a": "\\ud83d"}}', -32602)],
)
def test_bodies_the_sdk_would_fail_on_are_refused_first(body: bytes, code: int) -> None:
    problem = body_problem(body)
    assert problem is not None and problem.code == code
    assert problem.request_id == (4 if code == -32602 else "server-error")


def test_bodies_the_sdk_parses_itself_are_passed_on() -> None:
    for body in (b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}', b"not json", b"[" * MAX_DEPTH + b"]" * MAX_DEPTH):
        assert body_problem(body) is None


async def test_the_body_limit_answers_the_mcp_endpoint_in_json_rpc() -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("the route must not see it")

    middleware = BodySizeLimitMiddleware(app, prefix="/v3/", max_bytes=10, jsonrpc="/v3/copilot/mcp")
    for path, shape in (("/v3/copilot/mcp", {"jsonrpc", "id", "error"}), ("/v3/copilot/x", {"message"})):
        sent: list[Any] = []
        incoming = [{"type": "http.request", "body": b"x" * 11, "more_body": False}]

        async def receive(incoming: list[Any] = incoming) -> Any:
            return incoming.pop(0) if incoming else {"type": "http.disconnect"}

        async def send(message: Any, sent: list[Any] = sent) -> None:
            sent.append(message)

        await middleware({"type": "http", "path": path, "headers": []}, receive, send)
        assert sent[0]["status"] == 413 and set(json.loads(sent[1]["body"])) == shape


# ------------------------------------------------------------------ the projects a user may open


class FakePermissions:
    """Answers as GNS3's check would for a user granted one project; records what was asked."""

    def __init__(self, allowed: set[str]) -> None:
        self.allowed = allowed
        self.asked: list[tuple[str, str, list[str]]] = []

    async def verdicts(self, user_id: str, privilege: str, paths: list[str]) -> list[str]:
        self.asked.append((user_id, privilege, list(paths)))
        return ["allowed" if p in self.allowed else "denied" for p in paths]

    async def verdict(self, user_id: str, privilege: str, path: str) -> str:
        (verdict,) = await self.verdicts(user_id, privilege, [path])
        return verdict

    async def verdict_for(self, user: Any, rbac: Any, privilege: str, path: str) -> str:
        (verdict,) = await self.verdicts(user.user_id, privilege, [path])
        return verdict


async def test_projects_are_listed_as_gns3s_own_check_judges_each() -> None:
    projects = [{"project_id": "b", "name": "Bravo"}, {"project_id": "a", "name": "Alpha"}, {"project_id": "c", "name": "C"}]
    permissions = FakePermissions({"/projects/a", "/projects/c"})
    visible = VisibleProjects(permissions, lambda: projects)  # type: ignore[arg-type]
    assert [p["project_id"] for p in await visible.of_user("u1")] == ["a", "c"]
    assert permissions.asked == [("u1", "Project.Audit", ["/projects/b", "/projects/a", "/projects/c"])]
    assert await VisibleProjects(FakePermissions(set()), lambda: projects).of_user("u2") == []  # type: ignore[arg-type]


class RequestRbac:
    """GNS3's RbacRepository as the request holds it: answers from a set of grants, counts its queries."""

    def __init__(self, grants: set[tuple[str, str, str]], fails: bool = False) -> None:
        self.grants, self.fails = grants, fails
        self.asked: list[tuple[str, str, str]] = []

    async def check_user_has_privilege(self, user_id: str, path: str, privilege: str) -> bool:
        self.asked.append((user_id, path, privilege))
        if self.fails:
            raise RuntimeError("database is locked")
        return (user_id, path, privilege) in self.grants


async def test_a_routes_project_is_judged_by_gns3s_own_dependencies_on_the_requests_user_row() -> None:
    """The route's check runs GNS3's get_current_active_user and has_privilege on the row GNS3's
    authentication read for the request and its RBAC repository (no session or user read of its own):
    a superadmin passes without a query; an inactive user, a missing privilege or a failing
    check is no "yes" (the REST read then gives GNS3's own refusal)."""
    from gns3server.agent.gns3_copilot.api.permissions import HostPermissions

    project = "0b7c4f0e-6f0e-4b8e-9d5a-3c2b1a0f9e8d"
    visible = VisibleProjects(HostPermissions(None), list, has=lambda pid: pid == project)  # type: ignore[arg-type]
    grant = ("u1", f"/projects/{project}", "Project.Audit")

    def row(user_id: str, *, active: bool = True, superadmin: bool = False) -> Any:
        return SimpleNamespace(user_id=user_id, username=user_id, is_active=active, is_superadmin=superadmin)

    rbac = RequestRbac({grant})
    assert await visible.readable(row("admin", superadmin=True), rbac, project)  # type: ignore[arg-type]
    assert rbac.asked == []
    assert await visible.readable(row("u1"), rbac, project)  # type: ignore[arg-type]
    assert rbac.asked == [grant]
    assert not await visible.readable(row("u2"), rbac, project)  # type: ignore[arg-type]
    rbac.asked.clear()
    assert not await visible.readable(row("u1", active=False), rbac, project)  # type: ignore[arg-type]
    assert rbac.asked == []  # GNS3's get_current_active_user refused it first
    assert not await visible.readable(row("u1"), RequestRbac({grant}, fails=True), project)  # type: ignore[arg-type]
    assert not await visible.readable(row("u1"), rbac, "1c8d5a1f-7a1f-4c9f-8e6b-4d3c2b1a0f9e")  # type: ignore[arg-type]
    assert rbac.asked == []  # a project the controller does not hold is not asked about


async def test_a_routes_project_is_checked_in_process_and_only_a_refusal_goes_to_gns3() -> None:
    """Every route with a project in its path read the project over REST (a request to this same
    server, ~3-5 ms of a chat turn): GNS3's own check in-process says yes without it; anything else
    still reads it over REST, so the client gets GNS3's own 401/403/404."""
    from uuid import UUID

    from gns3server.agent.gns3_copilot.api.dependencies import accessible_project
    from gns3server.agent.gns3_copilot.service.copilot import User

    granted, unknown = "0b7c4f0e-6f0e-4b8e-9d5a-3c2b1a0f9e8d", "1c8d5a1f-7a1f-4c9f-8e6b-4d3c2b1a0f9e"
    denied = "2d9e6b2a-8b2a-4dae-9f7c-5e4d3c2b1a0f"
    permissions = FakePermissions({f"/projects/{granted}"})
    read_over_rest: list[str] = []

    class Client:
        async def __aenter__(self) -> Any:
            return self

        async def __aexit__(self, *exc: object) -> None:
            return None

        async def project(self, project_id: str) -> None:
            read_over_rest.append(project_id)
            raise PermissionError(f"GNS3 refused {project_id}")

    class State:
        projects = VisibleProjects(permissions, list, has=lambda pid: pid in (granted, denied))  # type: ignore[arg-type]

        def gns3_client(self, token: str) -> Client:
            return Client()

    user = User("u1", "alice", "token-alice")
    row = SimpleNamespace(user_id="u1")  # the row GNS3's authentication read for the request
    assert await accessible_project(UUID(granted), user, State(), row, None) == granted  # type: ignore[arg-type]
    for refused in (denied, unknown):
        with pytest.raises(PermissionError, match=refused):
            await accessible_project(UUID(refused), user, State(), row, None)  # type: ignore[arg-type]
    assert read_over_rest == [denied, unknown]
    assert permissions.asked == [("u1", "Project.Audit", [f"/projects/{granted}"]), ("u1", "Project.Audit", [f"/projects/{denied}"])]
