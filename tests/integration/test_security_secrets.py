"""Through a real gns3-server: secrets kept out of logs, streams and storage, outbound requests, input limits.

The server here is one of this module's own, started in debug mode (the most
verbose log: HTTP client request lines included) with the *default* endpoint
policy (ordinary users: public https endpoints only). Canary keys are grepped
for in the server's log, in every file under its root (the SQLite databases and
their ``-wal`` included) and in every response and event stream. The LLM is the
OpenAI-compatible stub, made to quote the wrong key it is sent in its 401, as
OpenAI does ("Incorrect API key provided: sk-...").
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from gns3_process import GNS3ServerProcess

# The API client and its helpers live with the API tests; reused here as they are.
from test_copilot_api import API, COPILOT, chat_path, kinds

from gns3server.agent.gns3_copilot.api.middleware import MAX_BODY_BYTES, path_matches
from gns3server.agent.gns3_copilot.api.routes import OUR_PATHS
from tests.support.openai_stub import OpenAIStub

pytestmark = [pytest.mark.integration, pytest.mark.security]

SHAPED = "sk-canary-" + secrets.token_hex(12)
"""A key shaped like OpenAI's: hidden by shape and as the run's key."""
PLAIN = "Plain" + secrets.token_hex(10) + "Canary"
"""A key shaped like nothing: only hiding the configured key itself catches it."""
URL_SECRET = "UrlCanary" + secrets.token_hex(8)
CANARIES = (SHAPED, PLAIN, URL_SECRET)
CONFIGS = f"{COPILOT}/llm-configs"


def files_holding(root: Path, needles: tuple[str, ...]) -> list[str]:
    """Every file under ``root`` (databases, their -wal and -shm, logs...) that holds a needle."""
    found = []
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            found += [f"{path}: {n}" for n in needles if n.encode() in data]
    return found


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GNS3ServerProcess]:
    process = GNS3ServerProcess.start(
        tmp_path_factory.mktemp("security"), copilot={"heartbeat_seconds": 0.5}, extra_args=["--debug"]
    )
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as session:
        yield session


@pytest.fixture(scope="module")
async def admin(server: GNS3ServerProcess, http: aiohttp.ClientSession) -> API:
    return API(http, server.base_url, await server.token(), CANARIES)


@pytest.fixture(scope="module")
async def user(server: GNS3ServerProcess, admin: API, http: aiohttp.ClientSession) -> API:
    """An ordinary GNS3 user with the built-in "User" role on every project."""
    password = "ordinary-password-1"
    status, made = await admin.post("/v3/access/users", {"username": "ordinary", "password": password})
    assert status == 201, made
    status, roles = await admin.get("/v3/access/roles")
    role = next(r["role_id"] for r in roles if r["name"] == "User")
    ace = {"ace_type": "user", "path": "/projects", "propagate": True, "allowed": True,
           "user_id": made["user_id"], "role_id": role}
    status, body = await admin.post("/v3/access/acl", ace)
    assert status == 201, body
    return API(http, server.base_url, await server.token("ordinary", password), CANARIES)


@pytest.fixture(scope="module")
async def project(admin: API) -> AsyncIterator[str]:
    status, body = await admin.post("/v3/projects", {"name": f"security-{uuid.uuid4().hex[:8]}"})
    assert status == 201, body
    yield body["project_id"]
    await admin.delete(f"/v3/projects/{body['project_id']}")


def stub_config(stub: OpenAIStub, api_key: str, **extra: Any) -> dict[str, Any]:
    return {"model": "stub-model", "base_url": stub.base_url, "api_key": api_key, "context_limit": 16,
            "max_retries": 0, "timeout": 20, **extra}


# ------------------------------------------------------------------ secrets


async def test_a_provider_error_quoting_the_key_reaches_no_log_stream_or_file(server, admin, project):
    async with OpenAIStub(api_key="sk-the-right-key-0000000000", echo_key=True) as stub:
        for canary in (SHAPED, PLAIN):
            status, config = await admin.post(CONFIGS, {"config": stub_config(stub, canary), "is_default": True})
            assert status == 201, config
            async with admin.stream(project, message="hello") as sse:  # every line is checked for canaries
                events = await sse.rest()
            assert kinds(events)[-2:] == ["error", "done"] and events[-2]["code"] == "llm_auth", events
            status, body = await admin.post(chat_path(project), {"message": "again", "stream": False})
            assert status == 502 and "API key" in body["message"], body
            # The stub did receive the canary, and quoted it back: the copilot had it in hand.
            assert stub.received[-1].headers["Authorization"] == f"Bearer {canary}"
            status, sessions = await admin.get(f"{COPILOT}/projects/{project}/chat/sessions")
            for session in sessions:
                status, _history = await admin.get(f"{COPILOT}/projects/{project}/chat/sessions/{session['session_id']}/history")
                assert status == 200
    # The failure was logged with its traceback, and LangGraph stored the node's error:
    # what is checked below is really there, only without the key.
    log = server.log_file.read_text(errors="replace")
    assert "Incorrect API key provided: [REDACTED]" in log and "Traceback" in log
    assert "HTTP Request: POST http://127.0.0.1" in log  # the client's request lines are logged (debug)
    database = server.root / "config" / "copilot" / "copilot.sqlite3"
    stored = sqlite3.connect(database).execute("SELECT value FROM writes WHERE channel = '__error__'").fetchall()
    assert stored and all(b"Incorrect API key provided: [REDACTED]" in bytes(v) for (v,) in stored), stored
    assert files_holding(server.root, (SHAPED, PLAIN)) == []


async def test_credentials_in_base_url_are_refused_and_kept_nowhere(server, admin):
    url = f"http://copilot:{URL_SECRET}@127.0.0.1:9/v1"
    config = {"model": "m", "context_limit": 8, "base_url": url}
    status, body = await admin.post(CONFIGS, {"config": config})
    assert status == 422 and (body["field"], body["rule"]) == ("base_url", "credentials"), body
    assert "api_key" in body["message"]
    status, listed = await admin.get(CONFIGS)
    assert all(c["config"].get("base_url") != url for c in listed["configs"])
    status, made = await admin.post(CONFIGS, {"config": {"model": "m", "context_limit": 8}})
    assert status == 201
    status, body = await admin.put(f"{CONFIGS}/{made['config_id']}", {"config": {"base_url": url}})
    assert status == 422 and body["rule"] == "credentials"
    await admin.delete(f"{CONFIGS}/{made['config_id']}")
    assert files_holding(server.root, (URL_SECRET,)) == []


# --------------------------------------------------------- outbound requests


async def test_ordinary_users_may_use_public_https_endpoints_only(server, admin, user, project):
    async with OpenAIStub(api_key=SHAPED) as stub:
        internal = [
            stub.base_url,                                   # loopback, by address
            f"http://localhost:{stub.port}/v1",              # loopback, by name (resolved)
            f"https://127.0.0.1:{stub.port}/v1",             # https does not make loopback public
            f"http://[::1]:{stub.port}/v1",
            f"http://[::ffff:127.0.0.1]:{stub.port}/v1",     # IPv4-mapped loopback
            "http://169.254.169.254/latest/meta-data",       # cloud metadata (link-local)
            "http://10.20.30.40:11434/v1",                   # private
            "https://192.168.1.10/v1",
            "http://0.0.0.0:8000/v1",
        ]
        for url in internal:
            status, body = await user.post(CONFIGS, {"config": stub_config(stub, SHAPED, base_url=url)})
            assert status == 403 and body["code"] == "llm_endpoint_not_allowed", (url, body)
            assert "user_llm_endpoints" in body["message"] and "public https endpoints" in body["message"]
        # Native Ollama without a base_url means the server's own localhost.
        status, body = await user.post(CONFIGS, {"config": {"provider": "ollama", "model": "m", "context_limit": 8}})
        assert status == 403 and "localhost" in body["message"], body
        # The provider's own public API needs no base_url and is allowed; moving it inside is not.
        status, public = await user.post(CONFIGS, {"config": {"model": "gpt-4o-mini", "context_limit": 128}})
        assert status == 201, public
        status, body = await user.put(f"{CONFIGS}/{public['config_id']}", {"config": {"base_url": stub.base_url}})
        assert status == 403, body
        status, kept = await user.get(f"{CONFIGS}/{public['config_id']}")
        assert "base_url" not in kept["config"]
        status, listed = await user.get(CONFIGS)
        assert [c["config_id"] for c in listed["configs"]] == [public["config_id"]]

        # The administrator may point the server anywhere.
        status, mine = await admin.post(CONFIGS, {"config": stub_config(stub, SHAPED)})
        assert status == 201, mine
        await admin.delete(f"{CONFIGS}/{mine['config_id']}")
        assert stub.received == []  # nothing was ever sent to the internal endpoints


HIDDEN_IPV6 = [  # each carries an internal IPv4 address, or is site-local
    "[64:ff9b::7f00:1]", "[64:ff9b::a00:1]", "[64:ff9b:1::a00:1]", "[2002:7f00:1::]", "[2002:a00:1::]",
    "[::127.0.0.1]", "[::ffff:0:7f00:1]", "[fec0::1]", "[::ffff:10.0.0.1]",
]


@pytest.mark.parametrize("host", HIDDEN_IPV6)
async def test_ipv6_addresses_carrying_an_internal_ipv4_address_are_refused_on_both_routes(server, admin, user, host):
    config = {"model": "m", "base_url": f"https://{host}/v1", "api_key": SHAPED, "context_limit": 16}
    status, body = await user.post(CONFIGS, {"config": config})
    assert status == 403 and body["code"] == "llm_endpoint_not_allowed", body
    assert "carrying" in body["message"] or "site-local" in body["message"] or "private" in body["message"], body
    status, me = await user.get("/v3/access/users/me")
    three_one = f"/v3/access/users/{me['user_id']}/llm-model-configs"
    status, body = await user.post(three_one, {**config, "name": "hidden"})
    assert status == 403 and body["code"] == "llm_endpoint_not_allowed", body
    status, listed = await user.get(CONFIGS)
    assert all(c["config"].get("base_url") != config["base_url"] for c in listed["configs"])  # nothing stored
    status, mine = await admin.post(CONFIGS, {"config": config})  # a superadmin's choice
    assert status == 201, mine
    await admin.delete(f"{CONFIGS}/{mine['config_id']}")


async def test_an_endpoint_is_judged_again_when_a_run_uses_it(server, user, project):
    """A config saved while its host was allowed (a name since re-pointed, a policy since
    tightened) is refused at use: written straight into the store, as an older server would have."""
    async with OpenAIStub(api_key=SHAPED) as stub:
        status, me = await user.get("/v3/access/users/me")
        assert status == 200
        config_id = str(uuid.uuid4())
        stored = {"provider": "openai", "model": "stub-model", "base_url": stub.base_url, "context_limit": 16,
                  "context_strategy": "balanced", "timeout": 20, "max_retries": 0}
        now = time.time()
        with sqlite3.connect(server.root / "config" / "copilot" / "llm_configs.sqlite3") as db:
            db.execute("INSERT INTO copilot_llm_configs VALUES (?, ?, ?, NULL, 0, ?, ?)",
                       (config_id, me["user_id"], json.dumps(stored), now, now))
        status, body = await user.post(chat_path(project), {"message": "hi", "llm_config_id": config_id})
        assert status == 403 and body["code"] == "llm_endpoint_not_allowed", body
        status, body = await user.put(f"{CONFIGS}/default/{config_id}")
        assert status == 200
        status, body = await user.post(chat_path(project), {"message": "hi", "stream": False})
        assert status == 403, body
        assert stub.received == []
        status, _ = await user.delete(f"{CONFIGS}/{config_id}")
        assert status == 204


# ------------------------------------------------------------- input limits


def log_size(server: GNS3ServerProcess) -> int:
    return server.log_file.stat().st_size


def peak_rss_kib(server: GNS3ServerProcess) -> int:
    for line in Path(f"/proc/{server.process.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM in /proc status")


async def chunked(total: int, prefix: bytes = b'{"message": "') -> AsyncIterator[bytes]:
    """A JSON-looking body of ``total`` bytes, sent without Content-Length (chunked)."""
    yield prefix
    block = b"x" * 65536
    sent = len(prefix)
    while sent < total:
        piece = block[: total - sent]
        sent += len(piece)
        yield piece


async def test_a_chunked_body_over_the_limit_is_refused_while_it_streams(server, http, admin, project):
    before_log, before_rss = log_size(server), peak_rss_kib(server)
    url = server.base_url + chat_path(project)
    async with http.post(url, data=chunked(20 * 1024 * 1024), headers=admin.headers()) as response:
        assert response.status == 413
        assert "too large" in (await response.json())["message"]
    # Nothing near 20 MB was held or logged (the server's peak memory grew by well under 20 MB).
    assert log_size(server) - before_log < 1024 * 1024
    assert peak_rss_kib(server) - before_rss < 10 * 1024
    # Just under the limit, chunked too, the body reaches the route intact.
    padding = "z" * (MAX_BODY_BYTES - 200)  # an extra field: ignored once parsed, but part of the body
    body = json.dumps({"message": "y", "padding": padding, "llm_config_id": str(uuid.uuid4())}).encode()
    assert MAX_BODY_BYTES - 200 < len(body) <= MAX_BODY_BYTES

    async def pieces() -> AsyncIterator[bytes]:
        for start in range(0, len(body), 50_000):
            yield body[start : start + 50_000]

    async with http.post(url, data=pieces(), headers={**admin.headers(), "Content-Type": "application/json"}) as response:
        assert response.status == 404, await response.text()  # parsed whole: the config named does not exist


async def test_validation_errors_quote_no_input(server, admin, project):
    before = log_size(server)
    filler = PLAIN * (800_000 // len(PLAIN))  # a large body carrying a canary, in a field that must be a boolean
    status, body = await admin.post(chat_path(project), {"message": "x", "stream": filler})
    assert status == 422 and body["errors"][0]["loc"] == ["body", "stream"], body
    assert len(json.dumps(body)) < 2000
    status, body = await admin.post(chat_path(project), {filler[:5000]: 1})
    assert status == 422 and len(json.dumps(body)) < 2000
    # The debug log keeps running in the background; the 800 kB body itself was not logged.
    assert log_size(server) - before < len(filler) // 4
    assert PLAIN not in server.log_file.read_text(errors="replace")


@pytest.mark.parametrize(
    ("path", "raw", "field"),
    [
        (CONFIGS, b'{"config": {"model": "m", "context_limit": 8, "temperature": NaN}}', "temperature"),
        (CONFIGS, b'{"config": {"model": "m", "context_limit": 8, "timeout": Infinity}}', "timeout"),
        (CONFIGS, b'{"config": {"model": "m", "context_limit": 8, "temperature": -Infinity}}', "temperature"),
        (CONFIGS, b'{"config": {"model": "m", "context_limit": 8}, "is_default": 1}', "is_default"),
        (CONFIGS, b'{"config": {"model": "m", "context_limit": 8}, "is_default": "true"}', "is_default"),
        ("chat", b'{"message": "x", "stream": 0}', "stream"),
        ("chat", b'{"message": "x", "stream": "false"}', "stream"),
    ],
)
async def test_not_a_number_and_not_a_boolean_are_refused(admin, project, path, raw, field):
    target = chat_path(project) if path == "chat" else path
    status, body = await admin.call("POST", target, raw=raw)
    assert status == 422, body
    assert body.get("field") == field or body["errors"][0]["loc"][-1] == field, body
    status, listed = await admin.get(CONFIGS)
    assert all(c["config"]["model"] != "m" for c in listed["configs"])  # nothing was stored


async def test_the_openapi_lists_the_answers_the_routes_give(http, server):
    async with http.get(server.base_url + "/openapi.json") as response:
        spec = await response.json()
    operations = {(m.upper(), p): op for p, ops in spec["paths"].items() if path_matches(OUR_PATHS, p)
                  for m, op in ops.items()}
    assert ("GET", "/v3/access/users/{user_id}/llm-model-configs") in operations  # 3.1's face is ours too
    for (method, path), op in operations.items():
        answers = set(op["responses"])
        assert "401" in answers, (method, path)
        if method in ("POST", "PUT", "PATCH") and "requestBody" in op:
            assert {"413", "422"} <= answers, (method, path, answers)
        if "{config_id}" in path or "{session_id}" in path:
            assert "404" in answers, (method, path)
    chat = operations[("POST", f"{COPILOT}/projects/{{project_id}}/chat/stream")]["responses"]
    assert {"400", "403", "404", "409", "413", "422"} <= set(chat)
    assert "403" in operations[("POST", CONFIGS)]["responses"]
