"""The copilot's lifespan: start-up failing at any step leaves nothing open; exit signals are scoped.

"Open" is observed from outside, not from the objects' own flags: file
descriptors of this process under the test's directory (every database is a
file there), aiohttp sessions not closed (every one made during the test is
kept, so one leaked and unreachable is not collected out of sight), database
threads alive — compared with what was open before (other tests of the process
may leave theirs).
"""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from fastapi import FastAPI

from gns3server.agent.gns3_copilot.agent.model.prompts import PromptFileError
from gns3server.agent.gns3_copilot.api.launcher import install
from gns3server.agent.gns3_copilot.api.lifecycle import copilot_running, exit_signals, young_generation_widened
from gns3server.agent.gns3_copilot.api.llm_config_store import DATABASE_NAME as LLM_DB
from gns3server.agent.gns3_copilot.api.settings import CopilotSettings
from gns3server.agent.gns3_copilot.changes.store import CHANGES_DB_NAME
from gns3server.agent.gns3_copilot.console.audit import AUDIT_DB_NAME, AUDIT_SCHEMA
from gns3server.agent.gns3_copilot.console.choices import CHOICES_DB_NAME
from gns3server.agent.gns3_copilot.console.credentials import DATABASE_NAME as CREDENTIALS_DB
from gns3server.agent.gns3_copilot.console.policy import PolicyError
from gns3server.agent.gns3_copilot.db.schema import VERSION_TABLE, SchemaTooNewError
from gns3server.agent.gns3_copilot.mcp.keys import DATABASE_NAME as MCP_KEYS_DB
from gns3server.agent.gns3_copilot.service.storage import DATABASE_NAME as STORAGE_DB


async def _no_user(kind: str, value: str) -> Any:
    return None


def _open_files_under(root: Path) -> list[str]:
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # closed while listing
        if target.startswith(str(root)):
            found.append(target)
    return sorted(found)


_MADE: list[aiohttp.ClientSession] = []
"""Every aiohttp session made during the current test (see ``_keep_every_session``)."""


@pytest.fixture(autouse=True)
def _keep_every_session(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    made = aiohttp.ClientSession.__init__

    def keeping(self: aiohttp.ClientSession, *args: Any, **kwargs: Any) -> None:
        made(self, *args, **kwargs)
        _MADE.append(self)

    monkeypatch.setattr(aiohttp.ClientSession, "__init__", keeping)
    yield
    _MADE.clear()


def _open_sessions() -> list[aiohttp.ClientSession]:
    gc.collect()
    found = {id(o): o for o in gc.get_objects() if isinstance(o, aiohttp.ClientSession)}
    found.update((id(o), o) for o in _MADE)
    return [o for o in found.values() if not o.closed]


def _live_database_threads() -> list[threading.Thread]:
    """The threads of our databases (gns3_copilot.db names them copilot-db-<file>)."""
    return [t for t in threading.enumerate() if t.name.startswith("copilot-db-")]


def _what_is_open(root: Path) -> dict[str, set[Any]]:
    return {"files": set(_open_files_under(root)), "http sessions": {id(s) for s in _open_sessions()},
            "database threads": {id(t) for t in _live_database_threads()}}


def _opened_since(before: dict[str, set[Any]], root: Path) -> dict[str, set[Any]]:
    """What is open now and was not before (empty sets: nothing left open)."""
    now = _what_is_open(root)
    return {kind: now[kind] - before[kind] for kind in now}


NOTHING: dict[str, set[Any]] = {"files": set(), "http sessions": set(), "database threads": set()}


def _settings(root: Path, **changes: Any) -> CopilotSettings:
    return CopilotSettings(data_dir=root / "data", secrets_dir=root / "secrets",
                           server_url="http://127.0.0.1:9", **changes)


def _break_storage(root: Path) -> dict[str, Any]:
    (root / "data" / STORAGE_DB).mkdir(parents=True)  # a directory where the database should be
    return {}


def _break_llm_store(root: Path) -> dict[str, Any]:
    (root / "data" / LLM_DB).mkdir(parents=True)
    return {}


def _break_audit(root: Path) -> dict[str, Any]:
    """An audit file written by a newer copilot: refused (SchemaTooNewError) once the GNS3 pool is open."""
    (root / "data").mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(root / "data" / AUDIT_DB_NAME)) as db, db:
        db.execute(f"CREATE TABLE {VERSION_TABLE} (component TEXT PRIMARY KEY, version INTEGER NOT NULL)")
        db.execute(f"INSERT INTO {VERSION_TABLE} VALUES (?, ?)", (AUDIT_SCHEMA.component, AUDIT_SCHEMA.latest + 1))
    return {}


def _break_policy(root: Path) -> dict[str, Any]:
    return {"console_policy": root / "no-such-policy.toml"}


def _break_prompts(root: Path) -> dict[str, Any]:
    prompts = root / "prompts"
    prompts.mkdir()
    (prompts / "system.md").write_text("   \n")
    return {"prompts_dir": prompts}


def _break_mcp_keys(root: Path) -> dict[str, Any]:
    (root / "data" / MCP_KEYS_DB).mkdir(parents=True)
    return {}


# In start-up order: each step fails after every step before it has opened its part.
FAILING_STEPS: dict[str, tuple[Callable[[Path], dict[str, Any]], type[BaseException]]] = {
    "session storage": (_break_storage, Exception),
    "LLM config store": (_break_llm_store, Exception),
    "audit log": (_break_audit, SchemaTooNewError),
    "console policy": (_break_policy, PolicyError),
    "prompt files": (_break_prompts, PromptFileError),
    "MCP keys": (_break_mcp_keys, Exception),
}


@pytest.mark.parametrize("step", FAILING_STEPS)
async def test_start_up_failing_at_any_step_leaves_nothing_open(tmp_path: Path, step: str) -> None:
    breaker, error = FAILING_STEPS[step]
    settings = _settings(tmp_path, **breaker(tmp_path))
    before = _what_is_open(tmp_path)
    with pytest.raises(error):
        async with copilot_running(settings, FastAPI(), _no_user):
            pytest.fail("start-up should have failed")
    assert _opened_since(before, tmp_path) == NOTHING


async def test_a_started_copilot_is_open_and_closes_everything(tmp_path: Path) -> None:
    """The same observations see the parts while the copilot runs (so the test above can fail)."""
    before = _what_is_open(tmp_path)
    async with copilot_running(_settings(tmp_path), FastAPI(), _no_user) as (state, mcp):
        running = _opened_since(before, tmp_path)
        assert any(f.endswith(STORAGE_DB) for f in running["files"])
        assert any(f.endswith(MCP_KEYS_DB) for f in running["files"])
        assert any(f.endswith(CREDENTIALS_DB) for f in running["files"])
        assert any(f.endswith(CHANGES_DB_NAME) for f in running["files"])
        assert any(f.endswith(CHOICES_DB_NAME) for f in running["files"])
        assert len(running["http sessions"]) == 1  # one pool for every user and operation
        # conversations, LLM configs, console credentials, audit, node families, MCP keys, changes and backups
        assert len(running["database threads"]) == 7
        async with state.gns3_client("token-a") as a, state.gns3_client("token-b") as b:
            assert (a.token, b.token) == ("token-a", "token-b")
            assert len(_opened_since(before, tmp_path)["http sessions"]) == 1  # clients borrow the pool
        assert mcp.running
    assert _opened_since(before, tmp_path) == NOTHING


async def test_approval_minutes_bound_every_approval_mcp_asks_for(tmp_path: Path) -> None:
    """``[Copilot] approval_minutes`` holds for MCP's approvals as for the panel's (not a fixed 10 minutes)."""
    async with copilot_running(_settings(tmp_path, approval_seconds=90.0), FastAPI(), _no_user) as (_, mcp):
        asked = mcp.approvals.request(user_id="u1", credential_id="k1", via="mcp:token", tool="gns3_config_commands",
                                      project_id="p1", arguments={"device": "R1", "commands": ["hostname R1"]})
        assert asked.expires_at - asked.created_at == 90.0


async def test_a_failing_body_still_closes_everything(tmp_path: Path) -> None:
    before = _what_is_open(tmp_path)
    with pytest.raises(RuntimeError, match="boom"):
        async with copilot_running(_settings(tmp_path), FastAPI(), _no_user):
            raise RuntimeError("boom")
    assert _opened_since(before, tmp_path) == NOTHING


def test_exit_signals_call_ours_then_the_previous_handler_and_are_removed() -> None:
    calls: list[str] = []

    def previous(signum: int, frame: Any) -> None:
        calls.append(f"previous {signal.Signals(signum).name}")

    original = signal.signal(signal.SIGTERM, previous)
    try:
        with exit_signals(lambda: calls.append("copilot"), signals=(signal.SIGTERM,)):
            signal.raise_signal(signal.SIGTERM)
            assert calls == ["copilot", "previous SIGTERM"]
        assert signal.getsignal(signal.SIGTERM) is previous  # scoped: restored on leaving
        signal.raise_signal(signal.SIGTERM)
        assert calls == ["copilot", "previous SIGTERM", "previous SIGTERM"]
    finally:
        signal.signal(signal.SIGTERM, original)


async def test_installing_patches_no_uvicorn_class_and_uses_the_lifespan() -> None:
    from uvicorn.main import Server as UvicornServer

    handle_exit = UvicornServer.handle_exit
    app = FastAPI()
    host = app.router.lifespan_context
    install(app)
    assert UvicornServer.handle_exit is handle_exit
    assert app.router.lifespan_context is not host
    assert app.router.on_startup == [] and app.router.on_shutdown == []


async def test_the_lifespan_runs_the_host_start_up_first_and_its_shutdown_last(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside the app's real lifespan (the ASGI protocol, as uvicorn drives it)."""
    from gns3server.agent.gns3_copilot.api import lifecycle

    order: list[str] = []
    app = FastAPI()
    app.state._db_engine = None

    async def host_start() -> None:
        order.append("host start")

    async def host_stop() -> None:
        order.append("host stop" + (" (copilot gone)" if app.state.copilot is None else ""))

    app.router.on_startup.append(host_start)
    app.router.on_shutdown.append(host_stop)
    install(app)
    monkeypatch.setattr(lifecycle, "settings_from_gns3", lambda: _settings(tmp_path))  # not GNS3's config
    before = _what_is_open(tmp_path)

    messages: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    sent: list[dict[str, Any]] = []
    frozen: list[int] = []  # objects out of the cyclic collector's passes, while it runs
    thresholds: list[tuple[int, ...]] = []  # the collector's, while it runs
    set_before = gc.get_threshold()
    started = asyncio.Event()

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "lifespan.startup.complete":
            order.append("copilot " + ("running" if app.state.copilot is not None else "missing"))
            frozen.append(gc.get_freeze_count())
            thresholds.append(gc.get_threshold())
            started.set()

    lifespan = asyncio.create_task(app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}},
                                       messages.get, send))
    await messages.put({"type": "lifespan.startup"})
    await asyncio.wait_for(started.wait(), timeout=60)
    await messages.put({"type": "lifespan.shutdown"})
    await asyncio.wait_for(lifespan, timeout=60)
    assert [m["type"] for m in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert order == ["host start", "copilot running", "host stop (copilot gone)"]
    assert frozen[0] > 10_000 and gc.get_freeze_count() == 0  # start-up's heap, frozen while it ran
    assert thresholds == [(lifecycle.YOUNG_GENERATION, *set_before[1:])] and gc.get_threshold() == set_before
    assert _opened_since(before, tmp_path) == NOTHING


_PRELOAD_PROBE = """
import asyncio, sys, threading
seen = {}
class Spy:
    def find_spec(self, name, path, target=None):
        if name == "langchain_openai":
            seen["thread"] = threading.current_thread().name
        return None
sys.meta_path.insert(0, Spy())
from gns3server.agent.gns3_copilot.api.lifecycle import preload_models
async def main():
    before = "langchain_openai" in sys.modules
    loaded = await preload_models()
    later = all(m in sys.modules for m in ("langchain_openai", "openai.resources.chat.chat", "httpcore"))
    print(before, loaded, seen.get("thread"), later)
asyncio.run(main())
"""


def test_the_model_stack_is_imported_in_a_worker_thread_while_the_loop_runs() -> None:
    """The first model a server builds imported langchain-openai and the SDK (~0.7 s): done at start-up now,
    in a worker thread (the event loop goes on with the rest of the start-up meanwhile)."""
    done = subprocess.run([sys.executable, "-c", _PRELOAD_PROBE], check=False, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    before, loaded, thread, after = done.stdout.split()
    assert (before, loaded, after) == ("False", "True", "True")
    assert thread != "MainThread"


def test_a_model_stack_that_cannot_be_imported_is_left_to_the_first_model(monkeypatch: pytest.MonkeyPatch) -> None:
    from gns3server.agent.gns3_copilot.agent.model import factory

    def missing(name: str) -> None:
        raise ImportError(f"No module named {name!r}")

    monkeypatch.setattr(factory.importlib, "import_module", missing)
    assert factory.preload_openai() is False


async def test_a_start_up_whose_model_stack_cannot_be_imported_goes_on_and_says_so(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from gns3server.agent.gns3_copilot.api import lifecycle

    monkeypatch.setattr(lifecycle, "preload_openai", lambda: False)
    assert await lifecycle.preload_models() is False
    assert "could not be imported at start-up" in caplog.text


def test_the_young_generation_is_widened_while_inside_and_a_wider_one_is_kept() -> None:
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        with young_generation_widened(10_000) as inside:
            assert inside == gc.get_threshold() == (10_000, 10, 10)  # the older generations as they were
        assert gc.get_threshold() == (700, 10, 10)
        gc.set_threshold(50_000, 20, 5)
        with young_generation_widened(10_000):
            assert gc.get_threshold() == (50_000, 20, 5)  # someone's higher threshold is kept
        assert gc.get_threshold() == (50_000, 20, 5)
        with pytest.raises(RuntimeError), young_generation_widened(10_000):
            raise RuntimeError("start-up failed")
        assert gc.get_threshold() == (50_000, 20, 5)  # restored however it is left
    finally:
        gc.set_threshold(*before)
