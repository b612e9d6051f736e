"""The one error tree (errors.py), its HTTP table at the boundary, and the translation of foreign errors."""

from __future__ import annotations

import ast
import gc
import importlib
import json
import pkgutil
import re
from pathlib import Path

import httpx
import openai
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

import gns3server.agent.gns3_copilot as package
from gns3server.agent.gns3_copilot.agent.context.tokenizer import TokenizerDataError
from gns3server.agent.gns3_copilot.agent.model.config import LLMConfigError
from gns3server.agent.gns3_copilot.agent.model.errors import (
    LLMEmptyAnswerError,
    LLMStreamCutError,
    provider_error,
)
from gns3server.agent.gns3_copilot.agent.model.prompts import PromptFileError
from gns3server.agent.gns3_copilot.api.endpoints import EndpointNotAllowedError
from gns3server.agent.gns3_copilot.api.errors import (
    HTTP_STATUS,
    NoLLMConfigError,
    ServiceUnavailableError,
    TokenExpiredError,
    http_status,
    install_error_handlers,
)
from gns3server.agent.gns3_copilot.api.sse import RunFailedError
from gns3server.agent.gns3_copilot.console import ConsoleError, PolicyError
from gns3server.agent.gns3_copilot.db import DatabaseClosedError, MigrationError, SchemaError, SchemaTooNewError
from gns3server.agent.gns3_copilot.errors import CopilotError, ErrorKind, InternalError
from gns3server.agent.gns3_copilot.gns3_client.exceptions import (
    GNS3ConflictError,
    GNS3ConnectionError,
    GNS3Error,
    GNS3NotFoundError,
    GNS3PermissionError,
    GNS3ServerError,
)
from gns3server.agent.gns3_copilot.mcp.approvals import TooManyApprovalsError
from gns3server.agent.gns3_copilot.service.errors import (
    ApprovalExpiredError,
    SessionBusyError,
    SessionNotFoundError,
    as_copilot_error,
    public_message,
)
from gns3server.agent.gns3_copilot.service.storage import CheckpointSchemaError
from gns3server.agent.gns3_copilot.tools.errors import (
    ToolError,
    every_item_failed,
    failure_outcome,
    model_message,
    tool_error,
)
from gns3server.agent.gns3_copilot.tools.permissions import PermissionRefused

ROOT = Path(package.__file__).parent


def _every_module() -> None:
    for info in pkgutil.walk_packages([str(ROOT)], prefix=package.__name__ + "."):
        importlib.import_module(info.name)


def _members(cls: type[BaseException]) -> list[type[BaseException]]:
    found: list[type[BaseException]] = []
    for sub in cls.__subclasses__():
        found += [sub, *_members(sub)]
    return found


OUTSIDE_THE_TREE = {
    "agent.model.openai_payload._NotMessages",
    "agent.model.openai_payload._NotPerMessage",
    "api.middleware.BodyTooLarge",
    "console.grammar.IncompleteLine",
    "console.grammar.TooComplex",
    "console.grammar.patterns.PatternError",
    "tools.linux_undo._Unknown",
}
"""Signals that never leave the module raising them (docs/errors.md says why, one by one)."""


def _outside_the_tree() -> set[str]:
    """Every exception class of the package (any module, any nesting) that is not a CopilotError."""
    _every_module()
    prefix = package.__name__ + "."
    return {
        f"{cls.__module__.removeprefix(prefix)}.{cls.__qualname__}"
        for cls in set(_members(BaseException))
        if cls.__module__.startswith(prefix) and not issubclass(cls, CopilotError)
    }


def test_every_exception_of_the_package_is_in_the_tree_or_on_the_documented_list() -> None:
    assert _outside_the_tree() == OUTSIDE_THE_TREE
    documented = (Path(__file__).parents[2] / "docs" / "errors.md").read_text(encoding="utf-8")
    for name in OUTSIDE_THE_TREE:
        assert f"`{name.rsplit('.', 1)[1]}`" in documented, name


def test_the_walk_finds_a_new_exception_outside_the_tree() -> None:
    """So that the test above can fail: a module of the package defining a stray exception, nested too."""
    module = package.__name__ + ".db.schema"
    stray = type("StrayError", (RuntimeError,), {"__module__": module})
    nested = type("Inner", (ValueError,), {"__module__": module, "__qualname__": "Database.Inner"})
    try:
        assert {"db.schema.StrayError", "db.schema.Database.Inner"} <= _outside_the_tree()
    finally:
        del stray, nested
        gc.collect()  # a class lives in its bases' subclass lists until collected
    assert "db.schema.StrayError" not in _outside_the_tree()


def test_every_member_has_a_code_and_a_kind_the_boundary_maps_and_no_http_status() -> None:
    _every_module()
    members = [m for m in _members(CopilotError) if m.__module__.startswith(package.__name__)]
    assert len(members) > 40  # the tree holds the package's errors, not a handful
    for member in members:
        assert re.fullmatch(r"[a-z0-9_]+", member.code), member
        assert member.kind in HTTP_STATUS, member
        assert isinstance(member.retryable, bool), member
        # The HTTP status is the boundary's choice: no member carries one.
        assert not any("status" in vars(c) for c in member.__mro__ if issubclass(c, CopilotError)), member
    assert set(HTTP_STATUS) == set(ErrorKind)


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (NoLLMConfigError("x"), 400, "llm_not_configured"),
        (TokenExpiredError("x"), 401, "token_expired"),
        (EndpointNotAllowedError("x"), 403, "llm_endpoint_not_allowed"),
        (SessionNotFoundError("x"), 404, "session_not_found"),
        (SessionBusyError("x"), 409, "session_busy"),
        (ApprovalExpiredError("x"), 410, "approval_expired"),
        (LLMConfigError("model", "type", "must be a string"), 422, "llm_config_invalid"),
        (PromptFileError("x"), 422, "prompt_file_invalid"),
        (TooManyApprovalsError("x"), 429, "too_many_approvals"),
        (RunFailedError("x"), 502, "run_failed"),
        (ServiceUnavailableError("x"), 503, "copilot_unavailable"),
        (GNS3PermissionError("Permission denied", status=403), 403, "gns3_error"),
        (GNS3NotFoundError("Project not found", status=404), 404, "gns3_error"),
        (GNS3ConflictError("busy", status=409), 502, "gns3_error"),
        (GNS3ConnectionError("refused", url="http://x"), 502, "gns3_error"),
        (SchemaTooNewError("x"), 503, "database_schema_too_new"),
        (MigrationError("x"), 503, "database_migration_failed"),
        (CheckpointSchemaError("x"), 503, "checkpoint_schema_unsupported"),
        (DatabaseClosedError("x"), 503, "copilot_stopping"),
    ],
)
def test_the_table_gives_the_documented_answers(error: CopilotError, status: int, code: str) -> None:
    assert (http_status(error), error.code) == (status, code)


def test_validation_errors_stay_value_errors() -> None:
    """FastAPI, pydantic validators and callers catch these as ValueError."""
    for error in (LLMConfigError("f", "type", "m"), PromptFileError("x"), PolicyError("x")):
        assert isinstance(error, ValueError) and isinstance(error, CopilotError)


def _app() -> TestClient:
    app = FastAPI()
    install_error_handlers(app, "/v3/copilot/")
    raised = {
        "config": LLMConfigError("temperature", "maximum", "must be at most 2"),
        "gns3-404": GNS3NotFoundError("Project ab not found", status=404, method="GET", url="http://gns3/v3/projects/ab"),
        "gns3-down": GNS3ConnectionError("cannot reach http://gns3 (ClientConnectorError: secret detail)", url="http://gns3"),
        "gns3-500": GNS3ServerError("Traceback: /srv/secret.py", status=500, method="GET", url="http://gns3/v3/x"),
        "busy": SessionBusyError("Session s is busy with another request"),
    }

    @app.get("/v3/copilot/{which}")
    async def fail(which: str) -> None:
        raise raised[which]

    return TestClient(app)


def test_one_handler_answers_every_member_in_gns3s_shape(caplog: pytest.LogCaptureFixture) -> None:
    client = _app()
    config = client.get("/v3/copilot/config")
    assert config.status_code == 422
    assert config.json() == {
        "message": "temperature: must be at most 2", "code": "llm_config_invalid", "field": "temperature",
        "rule": "maximum", "errors": [{"field": "temperature", "rule": "maximum", "message": "must be at most 2"}],
    }
    missing = client.get("/v3/copilot/gns3-404")
    assert (missing.status_code, missing.json()["message"]) == (404, "Project ab not found")
    busy = client.get("/v3/copilot/busy")
    assert busy.status_code == 409 and busy.json() == {"message": "Session s is busy with another request", "code": "session_busy"}
    for which in ("gns3-down", "gns3-500"):
        answer = client.get(f"/v3/copilot/{which}")
        assert answer.status_code == 502 and answer.json()["code"] == "gns3_error"
        assert "secret" not in answer.text and "ClientConnectorError" not in answer.text
    assert "secret detail" in caplog.text  # what went wrong is in the log


def _request() -> httpx.Request:
    return httpx.Request("POST", "http://model.test/v1/chat/completions")


def _status_error(cls: type[openai.APIStatusError], status: int) -> openai.APIStatusError:
    return cls("refused: sk-secret", response=httpx.Response(status, request=_request()), body=None)


def _wrapped(outer: Exception, inner: Exception) -> Exception:
    outer.__cause__ = inner
    return outer


@pytest.mark.parametrize(
    ("exc", "code", "retryable"),
    [
        (_status_error(openai.AuthenticationError, 401), "llm_auth", False),
        (_status_error(openai.RateLimitError, 429), "llm_rate_limited", True),
        (_status_error(openai.InternalServerError, 503), "llm_server_error", True),
        (_status_error(openai.BadRequestError, 400), "llm_error", False),
        (openai.APITimeoutError(request=_request()), "llm_timeout", True),
        (openai.APIConnectionError(request=_request()), "llm_unreachable", True),
        (httpx.ConnectError("refused"), "llm_unreachable", True),
        (ConnectionRefusedError(111, "refused"), "llm_unreachable", True),
        (TimeoutError(), "llm_timeout", True),
        (_wrapped(openai.APIConnectionError(request=_request()), httpx.RemoteProtocolError("peer closed")),
         "llm_stream_cut", True),
        (httpx.ReadError("connection reset mid-body"), "llm_stream_cut", True),
        (LLMEmptyAnswerError("empty"), "llm_empty_answer", False),
    ],
)
def test_provider_failures_are_translated_by_type(exc: Exception, code: str, retryable: bool) -> None:
    error = provider_error(exc)
    assert error is not None and (error.code, error.retryable) == (code, retryable)
    assert "sk-secret" not in error.public_message and public_message(exc) == (code, error.public_message)


def test_class_names_are_not_guessed_from() -> None:
    """An unknown exception named like a timeout or a connection error is not one: it is internal."""

    class ReadTimeoutInMyPlugin(Exception):
        pass

    class ConnectionPoolBug(Exception):
        pass

    for exc in (ReadTimeoutInMyPlugin("/secret/path"), ConnectionPoolBug("/secret/path"), KeyError("x")):
        code, message = public_message(exc)
        assert code == "internal_error" and "secret" not in message and "failed unexpectedly" in message
        assert as_copilot_error(exc).kind is ErrorKind.INTERNAL


def test_ours_pass_as_they_are_and_gns3s_say_nothing_of_their_transport() -> None:
    busy = SessionBusyError("Session s is busy")
    assert as_copilot_error(busy) is busy and public_message(busy) == ("session_busy", "Session s is busy")
    cut = LLMStreamCutError("The model server's streamed answer stopped after 3 chunk(s)")
    assert public_message(cut) == ("llm_stream_cut", str(cut))
    down = GNS3ConnectionError("cannot reach http://10.0.0.1:3080 (ClientConnectorError: x)", url="http://10.0.0.1:3080")
    code, message = public_message(down)
    assert code == "gns3_error" and "10.0.0.1" not in message and "ClientConnectorError" not in message
    assert isinstance(down, GNS3Error) and down.retryable
    # An internal member of the tree says no more than an untranslated bug.
    tokenizer = TokenizerDataError("Cannot read tokenizer file /srv/secret/cl100k_base.tiktoken")
    assert public_message(tokenizer) == ("tokenizer_data_invalid", InternalError.MESSAGE)
    # A database's text is for the administrator: the path and SQLite's words stay in the log.
    for error in (SchemaTooNewError("/srv/secret/copilot.sqlite3: the sessions tables are at version 9"),
                  MigrationError("/srv/secret/copilot.sqlite3: migration 2 failed: disk I/O error")):
        assert isinstance(error, SchemaError) and isinstance(error, RuntimeError)
        assert "secret" not in error.public_message and "database" in error.public_message
    closed = DatabaseClosedError("the copilot database conversations is closed")
    assert closed.retryable and isinstance(closed, RuntimeError)
    assert public_message(closed) == ("copilot_stopping", "The GNS3 server is stopping; try again once it is back")


def test_the_tools_policy_shows_tool_errors_and_hides_bugs() -> None:
    refused = PermissionRefused("you lack Node.Console on R1; GNS3 does not let you do this")
    assert model_message(refused) == str(refused) and refused.kind is ErrorKind.FORBIDDEN
    conflict = GNS3ConflictError("port e0 is already used", status=409, method="POST", url="/v3/projects/p/links")
    assert model_message(conflict) == str(conflict)  # untranslated but ours: written to be read
    assert model_message(ConsoleError("console closed")) == "console closed"
    assert model_message(ToolError("no node named 'R9' (available: R1)")) == "no node named 'R9' (available: R1)"
    # A route running a tool answers with what the translated error says to a client, not aiohttp's text.
    down = GNS3ConnectionError("cannot reach http://10.0.0.1 (ClientConnectorError: x)", url="http://10.0.0.1")
    try:
        raise tool_error(down) from down
    except ToolError as translated:
        assert "ClientConnectorError" in model_message(translated)  # the model is told what was attempted
        assert translated.public_message == down.public_message and "10.0.0.1" not in translated.public_message
    assert model_message(RuntimeError("/secret/path")) is None
    assert model_message(ValueError("invalid literal for int()")) is None
    assert failure_outcome(refused) is None and failure_outcome(RuntimeError("x")) is None


def test_a_call_whose_every_item_failed_is_one_error_that_still_reports_them() -> None:
    devices = [{"device": "R1", "status": "failed", "error": "timed out"},
               {"device": "R2", "status": "blocked", "error": "blocked by the console policy; nothing was sent"}]
    failed = every_item_failed("the commands on R1, R2", [(d["device"], d["error"]) for d in devices],
                               outcome={"devices": devices})
    assert isinstance(failed, ToolError) and failure_outcome(failed) == {"devices": devices}
    assert str(failed) == ("the commands on R1, R2: every one failed\n- R1: timed out\n"
                           "- R2: blocked by the console policy; nothing was sent")
    # The model reads the reasons, then each item's outcome (what was sent, what the device said).
    said = model_message(failed)
    assert said is not None and said.startswith(str(failed) + "\n")
    assert json.loads(said.split("\n", 3)[3]) == {"devices": devices}


GRAPH_MODULES = ("gns3_copilot.py", "tools_node.py", "fitting.py", "usage.py", "model/calls.py",
                 "policies/approval.py", "policies/modes.py", "summaries/coordinator.py")
"""The graph and the parts its nodes are made of (agent/)."""


def test_the_graph_imports_nothing_of_gns3_or_the_console() -> None:
    for module in GRAPH_MODULES:
        tree = ast.parse((ROOT / "agent" / module).read_text(encoding="utf-8"))
        ours = [(node.level - module.count("/"), node.module or "")
                for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level]
        # From the agent package (level 1) anything; from the copilot package (level 2) only the error
        # tree and the tool gate, which itself imports nothing of ours but the approvals beside it and
        # the one rendering of text as data (tool results are serialised with it).
        above = [imported for level, imported in ours if level > 1]
        assert set(above) <= {"errors", "tools.gate"}, (module, above)
    for gate_module in ("gate.py", "approval.py"):
        tree = ast.parse((ROOT / "tools" / gate_module).read_text(encoding="utf-8"))
        imported = {(n.level, n.module) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level}
        assert imported <= {(1, "approval"), (2, "as_data")}, (gate_module, imported)
    as_data = ast.parse((ROOT / "as_data.py").read_text(encoding="utf-8"))
    assert not [n for n in ast.walk(as_data) if isinstance(n, ast.ImportFrom) and n.level]
