"""The topology tool: the structured topology of a GNS3 project, for the agent.

The tool gets a ``client_factory`` at construction (a callable returning a fresh,
unopened :class:`GNS3Client` bound to the server and the requesting user's
token), so GNS3's own access control applies and nothing is global. Bound to
the run's project (``project_id``), it takes no argument. GNS3's failures become
a :class:`~.errors.ToolError` (a refusal a :class:`~.permissions.PermissionRefused`)
saying what was attempted; the agent's tools node answers the call with it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForToolRun, CallbackManagerForToolRun
from langchain_core.tools import BaseTool
from pydantic import BaseModel, ConfigDict, Field

from ..console.choices import FamilyChoices
from ..console.registry import Drivers
from ..gns3_client import GNS3AuthenticationError, GNS3Error, GNS3PermissionError, fetch_topology
from .errors import ToolError, tool_error
from .families import annotate_families
from .nodes import ClientFactory
from .permissions import gns3_refusal

log = logging.getLogger(__name__)

__all__ = ["GNS3TopologyTool", "OpenProjectTopologyInput", "TopologyInput"]


class TopologyInput(BaseModel):
    project_id: str = Field(description="UUID of the GNS3 project whose topology to read.")


class OpenProjectTopologyInput(BaseModel):
    """No arguments: the tool reads the project the conversation is about.

    Small models filled a required ``project_id`` with junk (and failed) again and
    again; what the run already knows is not asked for. Arguments sent anyway are ignored.
    """


class GNS3TopologyTool(BaseTool):
    """Read a project's nodes (type, status, console, ports) and links by name."""

    name: str = "gns3_topology"
    description: str = (
        "Read the current topology of a GNS3 project: every node with its type, status, "
        "console (type, host, port), CLI family and ports with what each is linked to, and every link "
        "as 'nodeA portA <-> nodeB portB'. Input: project_id (UUID). Use it for details that "
        "the topology summary in the system prompt leaves out, or after changing the lab."
    )
    args_schema: type[BaseModel] = TopologyInput
    client_factory: ClientFactory = Field(exclude=True)
    project_id: str | None = None
    """The run's project: when set, the model gives no argument (``OpenProjectTopologyInput``)."""
    drivers: Drivers | None = Field(None, exclude=True)  # with them, each node says its CLI family (``cli``)
    choices: FamilyChoices | None = Field(None, exclude=True)

    model_config = ConfigDict(arbitrary_types_allowed=True)

    def model_post_init(self, context: Any) -> None:
        super().model_post_init(context)
        if self.project_id is not None and self.args_schema is TopologyInput:
            self.args_schema = OpenProjectTopologyInput
            self.description = (
                "Read the current topology of the open GNS3 project (no arguments): every node with its "
                "type, status, console (type, host, port), CLI family and ports with what each is linked to, and every "
                "link as 'nodeA portA <-> nodeB portB'. Use it for details that the topology summary in "
                "the system prompt leaves out, or after changing the lab."
            )

    async def _arun(
        self, project_id: str | None = None, run_manager: AsyncCallbackManagerForToolRun | None = None
    ) -> dict[str, Any]:
        project_id = self.project_id if self.project_id is not None else project_id
        if project_id is None:
            raise ToolError("project_id is required")
        try:
            async with self.client_factory() as client:
                topology = await fetch_topology(client, project_id)
                families: dict[str, dict[str, Any]] = {}
                if self.drivers is not None:
                    nodes = [dict(node) for node in topology.rest_nodes]
                    await annotate_families(client, project_id, nodes, self.choices, self.drivers)
                    families = {str(n.get("node_id")): {k: n[k] for k in ("cli", "cli_assumed") if k in n} for n in nodes}
        except (GNS3PermissionError, GNS3AuthenticationError) as exc:
            log.info("topology of project %s refused: %s", project_id, exc)
            raise gns3_refusal(exc, f"project {project_id}") from exc
        except GNS3Error as exc:
            log.info("topology of project %s not available: %s", project_id, exc)
            raise tool_error(exc) from exc
        result = topology.to_dict()
        for node in result["nodes"]:
            node.update(families.get(str(node.get("node_id")), {}))
        return result

    def _run(self, project_id: str | None = None, run_manager: CallbackManagerForToolRun | None = None) -> dict[str, Any]:
        """Blocking variant for scripts; the agent uses the async one."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self._arun(project_id))
        raise ToolError("gns3_topology was called synchronously inside an event loop; use ainvoke")
