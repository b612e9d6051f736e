"""The copilot's life inside gns3-server: one lifespan, opened in order, closed in reverse.

:func:`copilot_running` opens every part the copilot holds for the server's
life (storage, LLM configs, console credentials, the GNS3 connection pool, the
audit log, the change store, the runs' service, the MCP endpoint), each registered on an ``AsyncExitStack`` as soon as
it is open. However start-up ends (a bad policy file, a prompt file that cannot
be used, a database that cannot be opened) and however the server stops, what
opened is closed, in reverse order, and nothing else.

:func:`install_lifespan` runs it inside gns3-server's own lifespan (GNS3's
start-up first: the copilot reads users from GNS3's database; the copilot stops
first: runs end and save while GNS3's controller and database are still up).

Why the exit signals: uvicorn waits for open responses to finish before it runs
the lifespan's shutdown, and a chat stream stays open as long as its run. So,
while the copilot runs, SIGINT/SIGTERM first cancel the runs and end MCP sessions
(their streams then end by themselves), then go on to the handler that was there
before (uvicorn's). The handler is installed by the lifespan and removed by it;
no class is patched.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import (
    AbstractAsyncContextManager,
    AsyncExitStack,
    asynccontextmanager,
    contextmanager,
)
from types import FrameType
from typing import Any

from fastapi import FastAPI

from ..agent.model.factory import preload_openai
from ..agent.model.prompts import load_prompts
from ..changes.store import ChangeStore
from ..console import AuditLog, CredentialStore, DeviceLocks, load_policy
from ..console.choices import FamilyChoices
from ..console.registry import Drivers
from ..gns3_client.client import GNS3Connection
from ..gns3_client.kept_topology import KeptTopologies
from ..mcp.auth import Caller, UserLookup, gns3_user_lookup
from ..mcp.server import ENDPOINT_STATE, MCPEndpoint
from ..service.storage import open_sqlite_storage
from ..teaching.catalogue import load_catalogue
from ..tools.toolset import ConsoleServices
from .crypto import SecretBox, load_or_create_key
from .llm_config_store import LLMConfigStore
from .permissions import HostPermissions
from .projects import VisibleProjects
from .settings import CopilotSettings, SettingsError, settings_from_gns3
from .state import CopilotState

log = logging.getLogger(__name__)

__all__ = ["CONNECTION_LIMIT", "EXIT_SIGNALS", "copilot_running", "exit_signals", "install_lifespan"]

# Requests from this server to itself (project checks, tools, topology) share one pool.
CONNECTION_LIMIT = 200
EXIT_SIGNALS = (signal.SIGINT, signal.SIGTERM)

Lifespan = Callable[[Any], AbstractAsyncContextManager[Any]]


@asynccontextmanager
async def copilot_running(
    settings: CopilotSettings, app: FastAPI, lookup: UserLookup
) -> AsyncIterator[tuple[CopilotState, MCPEndpoint]]:
    """Open the copilot's parts in order and yield the state and the MCP endpoint.

    ``app`` is gns3-server's (whose RBAC the tools ask), ``lookup`` reads GNS3's
    users (for MCP keys). On leaving, or when a step fails, every part that opened
    is closed in reverse order: runs are cancelled (each saves what it had) before
    the databases close.
    """
    async with AsyncExitStack() as stack:
        key = await asyncio.to_thread(load_or_create_key, settings.secrets_dir)
        box = SecretBox(key)
        storage = await open_sqlite_storage(settings.data_dir)
        stack.push_async_callback(storage.close)
        llm_configs = await LLMConfigStore.open(settings.data_dir, box)
        stack.push_async_callback(llm_configs.close)
        # Device console credentials: encrypted with the key of the LLM configs' API keys.
        credentials = await CredentialStore.open(settings.data_dir, box)
        stack.push_async_callback(credentials.close)
        gns3 = await stack.enter_async_context(
            GNS3Connection(settings.server_url, limit=CONNECTION_LIMIT, verify_tls=settings.verify_tls)
        )
        audit = await AuditLog.open(settings.data_dir)  # a file the copilot cannot use stops the start
        stack.push_async_callback(audit.close)
        changes = await ChangeStore.open(settings.data_dir)  # changes and configuration backups
        stack.push_async_callback(changes.close)
        choices = await FamilyChoices.open(settings.data_dir)
        stack.push_async_callback(choices.close)
        policy = await asyncio.to_thread(load_policy, settings.console_policy)
        host_permissions = HostPermissions(app)
        console = ConsoleServices(
            policy=policy, locks=DeviceLocks(), audit=audit, permissions=host_permissions.for_user,
            credentials=credentials, changes=changes, verify_seconds=settings.verify_seconds, choices=choices,
            drivers=await Drivers.load(),
        )
        prompts = await asyncio.to_thread(load_prompts, settings.prompts_dir)
        projects = VisibleProjects(host_permissions)
        catalogue = await load_catalogue(settings.teaching_dir)  # a bad scenario file stops the start, saying where
        # GNS3's controller runs in this process: its notifications say when a project's topology changed.
        topologies = KeptTopologies(gns3_controller(), host_permissions.token_allows)
        stack.push_async_callback(topologies.aclose)
        state = CopilotState(settings, storage, llm_configs, gns3, console, projects, prompts, catalogue, topologies)
        stack.push_async_callback(state.agent.aclose)  # the model servers' clients, once the runs have ended
        stack.push_async_callback(state.resolutions.aclose)  # TTLs still being asked of DNS
        stack.push_async_callback(state.stop_runs)

        async def mcp_projects(caller: Caller) -> list[Mapping[str, Any]]:
            return list(await projects.of_user(caller.user_id))

        mcp = await MCPEndpoint.open(
            settings.data_dir, lookup, console, state.gns3_client, mcp_projects, settings.approval_seconds,
            state.teaching,
        )
        stack.push_async_callback(mcp.close)
        default = settings.default_llm_config
        log.info(
            "Copilot started: data in %s, GNS3 API at %s, modes %s, server default LLM %s",
            settings.data_dir,
            settings.server_url,
            ", ".join(settings.modes),
            f"{default['provider']}/{default['model']}" if default else "none",
        )
        yield state, mcp
    log.info("Copilot stopped")


def gns3_controller() -> Any:
    """GNS3's controller, the one of this process (imported late: the copilot's modules import without GNS3 running)."""
    from gns3server.controller import Controller

    return Controller.instance()


@contextmanager
def exit_signals(on_exit: Callable[[], None], signals: tuple[signal.Signals, ...] = EXIT_SIGNALS) -> Iterator[None]:
    """While inside, ``signals`` call ``on_exit`` first, then whatever handled them before.

    ``on_exit`` runs in a signal handler: it must only schedule work (e.g. with
    ``loop.call_soon_threadsafe``). Outside the main thread, where Python cannot
    take signals, this does nothing (uvicorn does the same).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, Any] = {}

    def handler(signum: int, frame: FrameType | None) -> None:
        on_exit()
        before = previous.get(signum)
        if callable(before):
            before(signum, frame)
        elif before == signal.SIG_DFL:  # nobody else handled it: what it would have done
            signal.signal(signum, signal.SIG_DFL)
            signal.raise_signal(signum)

    for sig in signals:
        previous[sig] = signal.signal(sig, handler)
    try:
        yield
    finally:
        for signum, before in previous.items():
            if signal.getsignal(signum) is handler:  # left alone if someone replaced it since
                signal.signal(signum, before if before is not None else signal.SIG_DFL)


@contextmanager
def start_up_heap_frozen() -> Iterator[int]:
    """While inside, the objects alive at start-up (GNS3's, the copilot's, their libraries': some
    700,000) are left out of the cyclic collector's passes; yields how many.

    Each full pass walked all of them, about 0.2 s idle and 0.7 s on a busy machine, stalling every
    stream once every few dozen turns (bench/turn_overhead.py: 0.85 -> 0.29 s of collection in a
    run). One collection first, so that start-up's garbage is not kept for good; it runs before the
    server takes requests. Leaving unfreezes them (a process may start the copilot again).
    """
    gc.collect()
    gc.freeze()
    try:
        yield gc.get_freeze_count()
    finally:
        gc.unfreeze()


YOUNG_GENERATION = 10_000
"""Allocations (net of deallocations) between two passes of the cyclic collector over the
youngest objects, while the copilot runs (CPython's default: 700)."""


@contextmanager
def young_generation_widened(threshold: int = YOUNG_GENERATION) -> Iterator[tuple[int, ...]]:
    """While inside, the cyclic collector passes over the youngest objects every ``threshold``
    allocations, not every 700 (a higher threshold someone set is kept); yields the thresholds.

    The older generations are passed over every 10 passes of the one before, and a full pass
    runs once the objects that survived since the last one are a quarter more than those it kept:
    a server reading conversations back (a restart, 20 sessions of 500 turns: ~25,000 messages
    and what is derived from them) grows its heap so fast that it ran a full pass, walking every
    one of those objects, every few hundred milliseconds. bench/turn_overhead.py's first turns
    after the restart spent 0.67 of their 2.5 s in the collector, 0.55 s in five full passes of
    up to 0.2 s, each stalling every stream. Passing over young objects 14x less often makes
    the full passes as much rarer; a young cycle still goes within 10,000 allocations (~1 MB).
    Leaving restores the thresholds that were set.
    """
    before = gc.get_threshold()
    gc.set_threshold(max(threshold, before[0]), *before[1:])
    try:
        yield gc.get_threshold()
    finally:
        gc.set_threshold(*before)


@asynccontextmanager
async def _copilot_lifespan(app: FastAPI) -> AsyncIterator[None]:
    try:
        settings = await asyncio.to_thread(settings_from_gns3)
    except SettingsError as exc:
        log.critical("Cannot start the copilot: %s", exc)
        raise
    lookup = gns3_user_lookup(app.state._db_engine)  # GNS3's own start-up opened its database
    async with copilot_running(settings, app, lookup) as (state, mcp):
        app.state.copilot = state
        setattr(app.state, ENDPOINT_STATE, mcp)

        def begin_exit() -> None:
            try:
                state.begin_shutdown()  # runs cancelled now: their streams end with abort/done
                mcp.begin_shutdown()  # no new MCP requests; sessions end
            except RuntimeError:  # a second signal after uvicorn forced the exit: the loop is gone
                log.debug("exit signal after the event loop closed")

        try:
            await preload_models()  # before the heap is frozen: the imported modules are frozen with it
            with exit_signals(begin_exit), start_up_heap_frozen(), young_generation_widened():
                yield
        finally:
            app.state.copilot = None  # new requests get 503 while the parts close
            setattr(app.state, ENDPOINT_STATE, None)


async def preload_models() -> bool:
    """Import the OpenAI-protocol model stack in a worker thread (``factory.preload_openai``), before
    the server takes requests: the first question after a restart, and every one that came while the
    first model was built, waited ~0.7 s for that import. False: it could not be imported (the first
    model built says why)."""
    loaded = await asyncio.to_thread(preload_openai)
    if not loaded:
        log.warning("The OpenAI-protocol model stack could not be imported at start-up")
    return loaded


def install_lifespan(app: FastAPI) -> None:
    """Run the copilot inside ``app``'s lifespan: after GNS3's start-up, stopped before GNS3's shutdown."""
    host: Lifespan = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(asgi_app: Any) -> AsyncIterator[Any]:
        async with host(asgi_app) as host_state, _copilot_lifespan(app):
            yield host_state

    app.router.lifespan_context = lifespan
