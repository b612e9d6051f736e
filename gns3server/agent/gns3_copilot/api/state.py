"""The copilot's server-wide state: settings, storage, the service and LLM configs.

One :class:`CopilotState` is built by the copilot's lifespan (``lifecycle.py``,
which opens and closes the parts it holds) and kept on ``app.state.copilot``;
routes reach it through a dependency. When the server is asked to exit, runs are
cancelled at once (:meth:`CopilotState.begin_shutdown`) so that open event
streams end with ``abort``/``done`` instead of holding the server up.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Mapping
from typing import Any

from langchain_core.tools import BaseTool

from ..agent.assembly import AgentAssembly
from ..agent.context.tokenizer import warm_up
from ..agent.model.config import LLMProfile, llm_profile
from ..agent.model.errors import is_context_length_error
from ..agent.model.factory import create_base_model_with_tools
from ..agent.model.prompts import PromptSet, load_prompts
from ..gns3_client.client import GNS3Client, GNS3Connection
from ..gns3_client.kept_topology import KeptTopologies
from ..gns3_client.topology import fetch_rest_topology
from ..service.copilot import CopilotService, User
from ..service.storage import Storage
from ..teaching.catalogue import Catalogue
from ..teaching.service import TeachingService, learner_for
from ..teaching.tools import CheckWorkTool
from ..tools.families import topology_with_families
from ..tools.gate import BeforeCall
from ..tools.toolset import ConsoleServices, build_tools
from .endpoints import resolve_host
from .errors import ModeNotAllowedError, NoLLMConfigError
from .llm_config_store import LLMConfigRecord, LLMConfigStore
from .model_configs31 import SERVER_DEFAULT_ID, GroupIdsOf, default_record, named_record, no_groups
from .projects import VisibleProjects
from .resolution import ResolutionCache
from .settings import CopilotSettings

log = logging.getLogger(__name__)

# GNS3 3.1 clients send mode "text"; it stands for this server's default mode.
COMPAT_MODES = frozenset({"text"})
# An LLM config's ``copilot_mode`` (GNS3 3.1's names, or ours) as the agent's mode.
CONFIG_MODES = {
    "teaching_assistant": "teaching",
    "lab_automation_assistant": "lab_automation",
    "teaching": "teaching",
    "lab_automation": "lab_automation",
}


class CopilotState:
    """Everything the copilot routes need, for the lifetime of one server process.

    It owns none of the parts it is given (the lifespan closes them); it stops the
    runs it started (:meth:`stop_runs`).
    """

    def __init__(
        self,
        settings: CopilotSettings,
        storage: Storage,
        llm_configs: LLMConfigStore,
        gns3: GNS3Connection,
        console: ConsoleServices,
        projects: VisibleProjects,
        prompts: PromptSet | None = None,
        catalogue: Catalogue | None = None,
        topologies: KeptTopologies | None = None,
    ) -> None:
        self.settings = settings
        self.projects = projects
        """The projects each user may read, as GNS3 judges each one."""
        self.storage = storage
        self.llm_configs = llm_configs
        self.console = console
        self._gns3 = gns3
        self._loop = asyncio.get_running_loop()
        self._closing: asyncio.Task[None] | None = None
        # Tokenizer files load in a worker thread now, not on the first user's first call.
        self.tokenizers_ready: asyncio.Future[None] = self._loop.run_in_executor(None, warm_up)
        self.topologies = topologies
        """Projects' topologies kept between turns (None: each turn reads its project's over REST)."""
        read = topologies.read if topologies is not None else fetch_rest_topology
        self.agent = AgentAssembly(
            tools_factory=lambda context: build_tools(context, console),
            bind_tools=create_base_model_with_tools,
            bind_tools_unstreamed=functools.partial(create_base_model_with_tools, stream=False),
            is_context_length_error=is_context_length_error,
            client_factory=self.gns3_client,
            load_topology=lambda client, project_id: topology_with_families(
                client, project_id, console.choices, console.drivers, read),
            max_llm_calls=settings.max_llm_calls,
            prompts=prompts,
            lab_changed=topologies.forget if topologies is not None else None,
        )
        # The outbound policy's host resolutions, each kept no longer than its DNS records hold.
        self.resolutions = ResolutionCache(resolve_host)
        self.catalogue = catalogue
        """The teaching scenarios (None: graded labs are off, as in tests that build a state by hand)."""
        self.teaching: TeachingService | None = None
        if catalogue is not None and storage.teaching is not None:
            loaded = catalogue
            self.teaching = TeachingService(storage.teaching, storage.faults, lambda: loaded, console.permissions)
        self.service = CopilotService(
            storage, self.agent, heartbeat_seconds=settings.heartbeat_seconds, approval_seconds=settings.approval_seconds,
            before_tool=self._tool_guards, run_tools=self._teaching_tools,
        )

    def _tool_guards(self, user_id: str, project_id: str) -> tuple[BeforeCall, ...]:
        """A run's guards: a graded lab's recorded undo is refused to its students."""
        return () if self.teaching is None else (self.teaching.guard(user_id, project_id),)

    async def _teaching_tools(self, user: User, project_id: str) -> list[BaseTool]:
        """``gns3_check_work`` for a run in a project with an open graded lab; nothing elsewhere."""
        if self.teaching is None or not await self.teaching.has_open(project_id):
            return []
        who = learner_for(user.user_id, user.username, lambda: self.gns3_client(user.token), self.console)
        return [CheckWorkTool(service=self.teaching, learner=who, project_id=project_id)]

    async def reload_prompts(self) -> PromptSet:
        """Read the prompt files again (administrators' edits) and use them from the next run on.

        A bad file raises PromptFileError and the prompts in use stay as they were.
        """
        prompts = await asyncio.to_thread(load_prompts, self.settings.prompts_dir)
        self.agent.prompts = prompts
        log.info("Copilot prompts reloaded from %s", ", ".join(sorted(set(prompts.sources.values()))))
        return prompts

    @property
    def closing(self) -> bool:
        return self._closing is not None

    def gns3_client(self, token: str) -> GNS3Client:
        """A client of this server acting as the user whose token it is, over the one shared pool."""
        return self._gns3.client(token)

    def mode(self, requested: str | None, llm_config: Mapping[str, Any] | None = None) -> str:
        """The mode a request runs in. When it names none (or 3.1's ``text``): the LLM config's
        ``copilot_mode`` if the server allows that mode (GNS3 3.1's web UI switches modes by
        writing it into the config), else the server default."""
        if requested is None or requested in COMPAT_MODES:
            preferred = CONFIG_MODES.get(str((llm_config or {}).get("copilot_mode")))
            if preferred is not None and preferred in self.settings.modes:
                return preferred
            return self.settings.default_mode
        if requested not in self.settings.modes:
            raise ModeNotAllowedError(f"mode: must be one of {', '.join(self.settings.modes)}")
        return requested

    async def check_endpoint(self, user: User, config: Mapping[str, Any]) -> None:
        """EndpointNotAllowedError (403) unless ``user`` may make the server call ``config``'s endpoint
        (judged now, on the host's addresses: resolved afresh once DNS's TTL for them has run out)."""
        await self.settings.user_llm_endpoints.check(config, is_superadmin=user.is_superadmin,
                                                     resolve=self.resolutions)

    async def llm_config_for_run(
        self, user: User, config_id: str | None = None, groups: GroupIdsOf = no_groups
    ) -> LLMProfile:
        """As :meth:`llm_config_for`, for a run about to call the model, parsed once (the run reads
        the profile; nothing validates it again). Every config is validated now (one of the user's
        own stored by an older version may carry credentials in base_url or NaN: a 422 now rather
        than a failed run), and a user's own endpoint judged again (its host may resolve elsewhere
        than when it was saved); group configs and the server default are the administrator's choice."""
        record = await self._record_for(user.user_id, config_id, groups)
        profile = llm_profile(self._server_default() if record is None else self.llm_configs.usable(record))
        if record is not None and record.user_id == user.user_id:
            await self.check_endpoint(user, profile)
        # A model that cannot be built (a provider package missing, a key the provider needs)
        # is refused now, with what to do, rather than failing inside the stream. Built once per
        # user and profile (a worker thread's millisecond), then the runs' own; nothing is sent.
        await self.agent.check_model(user.user_id, profile)
        return profile

    async def llm_config_for(
        self, user_id: str, config_id: str | None = None, groups: GroupIdsOf = no_groups
    ) -> dict[str, Any]:
        """The full LLM config (key decrypted) a run of this user uses: the one named (the
        user's or a group's of theirs), else the user's default, a group's default, the server's.
        ``groups`` (the user's group ids) is awaited only when the user's own configs do not decide."""
        record = await self._record_for(user_id, config_id, groups)
        return self.llm_configs.usable(record) if record is not None else self._server_default()

    async def _record_for(self, user_id: str, config_id: str | None, groups: GroupIdsOf) -> LLMConfigRecord | None:
        if config_id == SERVER_DEFAULT_ID:  # 3.1's face lists the server's default under this id
            return None
        if config_id is not None:
            return await named_record(self.llm_configs, user_id, groups, config_id)
        return await default_record(self.llm_configs, user_id, groups)

    def _server_default(self) -> dict[str, Any]:
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

    def _start_closing(self) -> asyncio.Task[None]:
        if self._closing is None:
            log.info("Server exiting: cancelling copilot runs")
            self._closing = self._loop.create_task(self.service.close())
        return self._closing

    async def stop_runs(self) -> None:
        """Cancel every run and wait until each has saved its state (idempotent)."""
        await self._start_closing()
