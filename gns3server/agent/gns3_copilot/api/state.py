"""The copilot's server-wide state: settings, storage, the service and LLM configs.

One :class:`CopilotState` is opened by the launcher's startup hook and kept on
``app.state.copilot``; routes reach it through a dependency. It is closed on
shutdown: runs are cancelled (each saves what it had), then the databases and
the HTTP connection pool are closed. When the server is asked to exit, runs are
cancelled at once (:meth:`CopilotState.begin_shutdown`) so that open event
streams end with ``abort``/``done`` instead of holding the server up.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Mapping
from typing import Any

import aiohttp

from ..agent.model_factory import create_base_model_with_tools, is_context_length_error
from ..gns3_client.client import GNS3Client
from ..service.copilot import CopilotService
from ..service.storage import Storage, open_sqlite_storage
from ..console import AuditLog, DeviceLocks, load_policy
from ..tools.toolset import ConsoleServices, build_tools
from .crypto import SecretBox, load_or_create_key
from .errors import ModeNotAllowedError, NoLLMConfigError
from .llm_store import LLMConfigRecord, LLMConfigStore
from .settings import CopilotSettings

log = logging.getLogger(__name__)

# Requests from this server to itself (project checks, tools, topology) share one pool.
CONNECTION_LIMIT = 200
# GNS3 3.1 clients send mode "text"; it stands for this server's default mode.
COMPAT_MODES = frozenset({"text"})


class CopilotState:
    """Everything the copilot routes need, for the lifetime of one server process."""

    def __init__(
        self,
        settings: CopilotSettings,
        storage: Storage,
        llm_configs: LLMConfigStore,
        connector: aiohttp.TCPConnector,
        console: ConsoleServices,
    ) -> None:
        self.settings = settings
        self.storage = storage
        self.llm_configs = llm_configs
        self.console = console
        self._connector = connector
        self._loop = asyncio.get_running_loop()
        self._closing: asyncio.Task[None] | None = None
        self.service = CopilotService(
            storage,
            tools_factory=lambda context: build_tools(context, console),
            bind_tools=create_base_model_with_tools,
            bind_tools_unstreamed=functools.partial(create_base_model_with_tools, stream=False),
            is_context_length_error=is_context_length_error,
            client_factory=self.gns3_client,
            max_llm_calls=settings.max_llm_calls,
            heartbeat_seconds=settings.heartbeat_seconds,
        )

    @classmethod
    async def open(cls, settings: CopilotSettings) -> CopilotState:
        key = await asyncio.to_thread(load_or_create_key, settings.secrets_dir)
        storage = await open_sqlite_storage(settings.data_dir)
        try:
            llm_configs = await LLMConfigStore.open(settings.data_dir, SecretBox(key))
        except BaseException:
            await storage.close()
            raise
        connector = aiohttp.TCPConnector(limit=CONNECTION_LIMIT, ssl=None if settings.verify_tls else False)
        policy = await asyncio.to_thread(load_policy, settings.console_policy)
        console = ConsoleServices(policy=policy, locks=DeviceLocks(), audit=AuditLog(settings.data_dir))
        state = cls(settings, storage, llm_configs, connector, console)
        default = settings.default_llm_config
        log.info(
            "Copilot started: data in %s, GNS3 API at %s, modes %s, server default LLM %s",
            settings.data_dir,
            settings.server_url,
            ", ".join(settings.modes),
            f"{default['provider']}/{default['model']}" if default else "none",
        )
        return state

    @property
    def closing(self) -> bool:
        return self._closing is not None

    def gns3_client(self, token: str) -> GNS3Client:
        """A client of this server acting as the user whose token it is."""
        return GNS3Client(self.settings.server_url, token=token, session_factory=self._session)

    def _session(self) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(connector=self._connector, connector_owner=False)

    def mode(self, requested: str | None) -> str:
        """The mode a request runs in: the server default when none (or 3.1's ``text``) is named."""
        if requested is None or requested in COMPAT_MODES:
            return self.settings.default_mode
        if requested not in self.settings.modes:
            raise ModeNotAllowedError(f"mode: must be one of {', '.join(self.settings.modes)}")
        return requested

    async def llm_config_for(self, user_id: str, config_id: str | None = None) -> dict[str, Any]:
        """The full LLM config (key decrypted) a run of this user uses."""
        record: LLMConfigRecord | None
        if config_id is not None:
            record = await self.llm_configs.get(user_id, config_id)
        else:
            record = await self.llm_configs.default(user_id)
        if record is not None:
            return self.llm_configs.usable(record)
        if self.settings.default_llm_config is not None:
            return dict(self.settings.default_llm_config)
        raise NoLLMConfigError(
            "No LLM is configured: add one with POST /v3/copilot/llm-configs "
            "(or ask the administrator for a server default in the [Copilot] config section)."
        )

    @property
    def server_default(self) -> Mapping[str, Any] | None:
        return self.settings.default_llm_config

    def begin_shutdown(self) -> None:
        """Cancel every run now (callable from a signal handler); streams then end by themselves."""
        self._loop.call_soon_threadsafe(self._start_closing)

    def _start_closing(self) -> None:
        if self._closing is None:
            log.info("Server exiting: cancelling copilot runs")
            self._closing = self._loop.create_task(self.service.close())

    async def close(self) -> None:
        """Cancel runs (each saves its state), then close storage and connections."""
        self._start_closing()
        assert self._closing is not None
        try:
            await self._closing
        finally:
            try:
                await self.llm_configs.close()
                await self.console.audit.close()
                await self.storage.close()
            finally:
                await self._connector.close()
        log.info("Copilot stopped")
