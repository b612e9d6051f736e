"""Input limits at the ASGI level: the streamed body limit, and request schemas that refuse
NaN, Infinity and non-booleans. (Through the real server: tests/integration/test_security_secrets.py.)"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import ValidationError

from gns3server.agent.gns3_copilot.api import middleware
from gns3server.agent.gns3_copilot.api.errors import EXCERPT_CHARS, install_error_handlers
from gns3server.agent.gns3_copilot.api.middleware import BodySizeLimitMiddleware, path_matches
from gns3server.agent.gns3_copilot.api.routes import OUR_PATHS
from gns3server.agent.gns3_copilot.api.schemas import ChatRequest, ConfirmRequest, LLMConfigCreate

pytestmark = pytest.mark.security

LIMIT = 1000


class Client:
    """Plays the server side of one request: messages in, what the app saw and sent out."""

    def __init__(self, chunks: Iterator[dict[str, Any]], headers: list[tuple[bytes, bytes]] = ()) -> None:
        self.chunks = chunks
        self.pulled = 0
        self.sent: list[dict[str, Any]] = []
        self.app_saw: list[dict[str, Any]] | None = None
        self.scope = {"type": "http", "path": "/v3/copilot/x", "headers": list(headers)}

    async def receive(self) -> dict[str, Any]:
        self.pulled += 1
        return next(self.chunks)

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)

    async def app(self, scope: Any, receive: Any, send: Any) -> None:
        self.app_saw = [await receive(), await receive()]
        await send({"type": "http.response.start", "status": 200, "headers": []})

    async def run(self) -> None:
        await BodySizeLimitMiddleware(self.app, prefix="/v3/copilot/", max_bytes=LIMIT)(self.scope, self.receive, self.send)

    @property
    def status(self) -> int | None:
        return next((m["status"] for m in self.sent if m["type"] == "http.response.start"), None)


def body(*sizes: int, more_after: bool = False) -> Iterator[dict[str, Any]]:
    for index, size in enumerate(sizes):
        last = index == len(sizes) - 1 and not more_after
        yield {"type": "http.request", "body": b"x" * size, "more_body": not last}
    while True:
        yield {"type": "http.disconnect"}


def endless(size: int) -> Iterator[dict[str, Any]]:
    while True:
        yield {"type": "http.request", "body": b"x" * size, "more_body": True}


async def test_a_chunked_body_within_the_limit_reaches_the_app_whole_then_the_disconnect():
    client = Client(body(400, 400, 200))
    await client.run()
    assert client.status == 200
    assert client.app_saw == [{"type": "http.request", "body": b"x" * 1000, "more_body": False},
                              {"type": "http.disconnect"}]


async def test_a_chunked_body_over_the_limit_is_refused_without_reaching_the_app():
    client = Client(body(400, 400, 201, 5000))
    await client.run()
    assert client.app_saw is None and client.status == 413
    assert json.loads(client.sent[1]["body"])["message"] == f"Request body too large (limit: {LIMIT} bytes)"
    assert client.pulled == 4  # read to its end (drained) so that the client reads the answer


async def test_an_endless_refused_body_is_drained_only_so_far(monkeypatch):
    monkeypatch.setattr(middleware, "DRAIN_LIMIT_BYTES", 100_000)
    client = Client(endless(10_000))
    await client.run()
    assert client.status == 413 and client.pulled < 20


async def test_a_declared_length_over_the_limit_is_refused_before_reading():
    client = Client(body(10), headers=[(b"content-length", b"1001")])
    await client.run()
    assert client.app_saw is None and client.status == 413


async def test_a_client_leaving_mid_body_gets_nothing():
    client = Client(body(400, more_after=True))
    await client.run()
    assert client.app_saw is None and client.sent == []


async def test_other_paths_are_not_touched():
    client = Client(endless(10_000))
    client.scope["path"] = "/v3/projects"
    seen = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(await receive())

    await BodySizeLimitMiddleware(app, prefix="/v3/copilot/", max_bytes=LIMIT)(client.scope, client.receive, client.send)
    assert len(seen) == 1 and client.pulled == 1


# ------------------------------------------------------------------ schemas


@pytest.mark.parametrize("value", [0, 1, "true", "false", "yes", None, 1.0])
def test_booleans_are_booleans(value):
    with pytest.raises(ValidationError):
        ChatRequest.model_validate({"message": "x", "stream": value})
    with pytest.raises(ValidationError):
        ConfirmRequest.model_validate({"approved": value})
    with pytest.raises(ValidationError):
        LLMConfigCreate.model_validate({"config": {}, "is_default": value})
    assert ChatRequest.model_validate({"message": "x", "stream": False}).stream is False


# --------------------------------------------------- validation error answer


def test_validation_errors_of_our_routes_quote_nothing_of_the_input():
    app = FastAPI()

    @app.post("/v3/copilot/chat")
    async def chat(body: ChatRequest) -> dict[str, str]:
        return {"ok": "yes"}

    @app.post("/v3/other")
    async def other(body: ChatRequest) -> dict[str, str]:
        return {"ok": "yes"}

    install_error_handlers(app, "/v3/copilot/")
    canary = "CanaryValue" * 10_000
    with TestClient(app) as http:
        answer = http.post("/v3/copilot/chat", json={"message": "x", "stream": canary, canary: 1})
        assert answer.status_code == 422
        assert "CanaryValue" not in answer.text and len(answer.text) < 1000
        assert answer.json()["errors"][0]["loc"] == ["body", "stream"]
        extra = http.post("/v3/copilot/chat", json={"message": ["a"], "x" * 500: 1})
        assert all(len(part) <= EXCERPT_CHARS for e in extra.json()["errors"] for part in e["loc"])
        # Other routes keep the host's handler (FastAPI's default here).
        assert "detail" in http.post("/v3/other", json={"message": "x", "stream": "no!"}).json()


@pytest.mark.parametrize(
    ("path", "ours"),
    [
        ("/v3/copilot/projects/p/chat/stream", True),
        ("/v3/access/users/0b5c/llm-model-configs", True),
        ("/v3/access/groups/0b5c/llm-model-configs/default/x", True),
        ("/v3/access/users/0b5c", False),  # GNS3's own user routes keep the host's limits and handlers
        ("/v3/access/users/0b5c/llm-model-configsX", False),
        ("/v3/projects", False),
        ("/v3/copilotX", False),
    ],
)
def test_the_limits_and_quiet_422s_cover_every_path_of_ours_and_no_other(path, ours):
    assert path_matches(OUR_PATHS, path) is ours
