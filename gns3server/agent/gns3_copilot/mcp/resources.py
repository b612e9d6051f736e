"""MCP resources: each project's topology as compact text, with change notifications.

``gns3://projects/{project_id}/topology`` is the topology the copilot's agent
sees in its system prompt (the same renderer), read as the caller. A client that
subscribes to it gets ``notifications/resources/updated`` whenever GNS3's
notification stream for that project reports a node or link change; the watch
reads the stream as the caller (GNS3 checks ``Project.Audit``), holds the MCP
session only weakly, and ends on unsubscribe, when the session is gone (seen at
GNS3's next ping, every few seconds), when the caller's key is revoked, or when
the server stops.
"""

from __future__ import annotations

import asyncio
import logging
import re
import weakref
from collections.abc import Callable

import anyio
from mcp import types
from mcp.server.session import ServerSession
from pydantic import AnyUrl

from ..agent.context.topology import render_topology
from ..as_data import as_data
from ..errors import CopilotError, ErrorKind
from ..gns3_client.client import GNS3Client
from ..gns3_client.exceptions import GNS3Error
from ..gns3_client.topology import fetch_rest_topology
from ..tools.families import topology_with_families
from ..tools.toolset import ConsoleServices
from .auth import Caller
from .keys import MCPKeyStore
from .projects import ProjectLister

log = logging.getLogger(__name__)

URI_TEMPLATE = "gns3://projects/{project_id}/topology"
_URI = re.compile(r"^gns3://projects/(?P<project_id>[0-9a-fA-F-]{36})/topology$")
TOPOLOGY_EVENTS = ("node.", "link.")
MAX_WATCHES_PER_CREDENTIAL = 20


class ResourceError(CopilotError, ValueError):
    """A resource URI we do not serve, or a watch over the limit (the message says which)."""

    code = "mcp_resource_invalid"
    kind = ErrorKind.INVALID


def project_of(uri: AnyUrl | str) -> str:
    match = _URI.match(str(uri))
    if match is None:
        raise ResourceError(f"Unknown resource: {uri} (expected {URI_TEMPLATE})")
    return match["project_id"]


async def topology_text(client: GNS3Client, project_id: str, console: ConsoleServices | None = None) -> str:
    """The project's topology as the agent's system prompt shows it (compact text, each node's CLI
    family with the console services)."""
    if console is None:
        return render_topology(await fetch_rest_topology(client, project_id))
    return render_topology(await topology_with_families(client, project_id, console.choices, console.drivers))


TEMPLATES = [
    types.ResourceTemplate(
        uriTemplate=URI_TEMPLATE, name="topology", title="Project topology",
        description="A GNS3 project's nodes, ports and links as compact text.", mimeType="text/plain",
    )
]


class TopologyResources:
    """Lists, reads and watches project topologies for MCP callers."""

    def __init__(
        self, client_factory: Callable[[str], GNS3Client], keys: MCPKeyStore, projects: ProjectLister,
        console: ConsoleServices | None = None,
    ) -> None:
        self._client_factory = client_factory
        self._console = console
        self._keys = keys
        self._projects = projects
        self._watches: dict[tuple[int, str], asyncio.Task[None]] = {}
        self._owners: dict[tuple[int, str], str] = {}

    async def list(self, caller: Caller) -> list[types.Resource]:
        """A topology resource per project the caller may read (:mod:`.projects`)."""
        projects = await self._projects(caller)
        return [
            types.Resource(
                uri=AnyUrl(URI_TEMPLATE.format(project_id=p["project_id"])), name=f"{as_data(p.get('name'))} topology",
                description=f"Topology of the GNS3 project {as_data(p.get('name'))}", mimeType="text/plain",
            )
            for p in sorted(projects, key=lambda p: str(p.get("name")))
        ]

    async def read(self, caller: Caller, uri: AnyUrl) -> str:
        async with self._client_factory(caller.token()) as client:
            return await topology_text(client, project_of(uri), self._console)

    async def subscribe(self, caller: Caller, session: ServerSession, uri: AnyUrl) -> None:
        project_id = project_of(uri)
        async with self._client_factory(caller.token()) as client:
            await client.project(project_id)  # GNS3's 403/404 now, not silence later
        key = (id(session), str(uri))
        if key in self._watches and not self._watches[key].done():
            return
        owned = sum(owner == caller.credential_id for k, owner in self._owners.items() if not self._watches[k].done())
        if owned >= MAX_WATCHES_PER_CREDENTIAL:
            raise ResourceError(f"At most {MAX_WATCHES_PER_CREDENTIAL} topology subscriptions per credential")
        task = asyncio.create_task(self._watch(caller, weakref.ref(session), str(uri), project_id))
        self._watches[key], self._owners[key] = task, caller.credential_id
        task.add_done_callback(lambda _: self._forget(key, task))

    def _forget(self, key: tuple[int, str], task: asyncio.Task[None]) -> None:
        if self._watches.get(key) is task:
            del self._watches[key]
            del self._owners[key]

    async def unsubscribe(self, session: ServerSession, uri: AnyUrl) -> None:
        task = self._watches.get((id(session), str(uri)))
        if task is not None:
            task.cancel()

    async def close(self) -> None:
        tasks = list(self._watches.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _watch(
        self, caller: Caller, session_ref: weakref.ref[ServerSession], uri: str, project_id: str
    ) -> None:
        try:
            async with self._client_factory(caller.token()) as client:
                async for event in client.notifications(project_id):
                    action = str(event.get("action", ""))
                    if caller.key is not None and not await self._keys.still_usable(caller.key.key_id):
                        log.info("Topology watch of %s ends: its MCP key is no longer valid", uri)
                        return
                    session = session_ref()
                    if session is None:
                        return
                    if action.startswith(TOPOLOGY_EVENTS):
                        await session.send_resource_updated(AnyUrl(uri))
                    del session
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            log.debug("Topology watch of %s ends with its MCP session", uri)
        except GNS3Error as exc:
            log.info("Topology watch of %s ends: %s", uri, exc)
        except ValueError:
            log.warning("Topology watch of %s ends: GNS3 sent a notification that is not JSON", uri)
