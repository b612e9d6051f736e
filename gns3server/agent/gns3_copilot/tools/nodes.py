"""Tools that read templates and change the lab: node actions, new nodes, new links.

Each tool is bound to one run: the project the user has open and a factory of
GNS3 clients carrying that user's token, so GNS3's own access control decides
what the copilot may do. Nodes, templates and ports are named as the user sees
them. GNS3's refusals (404, 409 ...) become a :class:`~.errors.ToolError` quoting
GNS3's answer; the agent's tools node answers the call with its text. A node
action on several nodes reports each node's outcome while one of them succeeded,
and fails as a whole (every node's reason in its text) when none did. A
permission refusal (GNS3's 401/403) is said plainly ("you lack Node.PowerMgmt on
R1 ...") and, when the tool has the audit log, audited as "denied".
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from langchain_core.tools import BaseTool
from pydantic import BaseModel, ConfigDict, Field

from ..as_data import as_data
from ..console.audit import AuditLog, Who
from ..gns3_client import GNS3Client, GNS3Error, NodeAction
from ..gns3_client.client import find_named, gather_cancelling
from ..gns3_client.exceptions import GNS3AuthenticationError, GNS3PermissionError
from .errors import ToolError, every_item_failed, tool_error
from .permissions import PermissionRefused, gns3_refusal

log = logging.getLogger(__name__)

ClientFactory = Callable[[], GNS3Client]
ALL_NODES = "all"


PermissionErrors = (GNS3PermissionError, GNS3AuthenticationError)


class ProjectTool(BaseTool):
    """A tool acting on one project with the requesting user's GNS3 identity."""

    client_factory: ClientFactory = Field(exclude=True)
    project_id: str
    audit: AuditLog | None = Field(default=None, exclude=True)
    user: str = ""
    session_id: str = ""
    model_config = ConfigDict(arbitrary_types_allowed=True)

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        raise ToolError(f"{self.name} is asynchronous; call it with ainvoke")

    async def _refused(
        self, exc: GNS3PermissionError | GNS3AuthenticationError, target: str, action: str
    ) -> PermissionRefused:
        """GNS3's permission refusal, plainly worded, audited (``action`` on ``target``)."""
        refused = gns3_refusal(exc, target)
        log.info("GNS3 refused %s on %s to user %s: %s", action, target, self.user or "?", exc.message)
        if self.audit is not None:
            await self.audit.record(Who(self.user, self.session_id, self.project_id), target, action, "denied", str(refused))
        return refused


def _by_name(items: Sequence[Mapping[str, Any]], wanted: str, what: str) -> Mapping[str, Any]:
    """Find an item by exact name, then case-insensitively; a clear error otherwise."""
    item = find_named(items, wanted)
    if item is not None:
        return item
    available = ", ".join(sorted(as_data(i.get("name")) for i in items)) or "none"
    raise ToolError(f"no {what} named {wanted!r} (available: {available})")


class TemplatesInput(BaseModel):
    category: str | None = Field(
        default=None, description="Only templates of this category (router, switch, guest, firewall)."
    )


class ListTemplatesTool(ProjectTool):
    name: str = "gns3_list_templates"
    description: str = "List the templates nodes can be created from: name, type and category."
    args_schema: type[BaseModel] = TemplatesInput
    metadata: dict[str, Any] = Field(default_factory=lambda: {"read_only": True})

    async def _arun(self, category: str | None = None, **_: Any) -> list[dict[str, Any]]:
        try:
            async with self.client_factory() as client:
                templates = await client.templates()
        except PermissionErrors as exc:
            raise await self._refused(exc, "the templates", "list templates") from exc
        except GNS3Error as exc:
            raise tool_error(exc) from exc
        return [
            {"name": t.get("name"), "type": t.get("template_type"), "category": t.get("category")}
            for t in sorted(templates, key=lambda t: str(t.get("name")))
            if category is None or t.get("category") == category
        ]


class NodeActionInput(BaseModel):
    action: Literal["start", "stop", "suspend", "reload"] = Field(description="What to do with the nodes.")
    nodes: list[str] = Field(
        min_length=1, description='Node names, or ["all"] for every node of the project.'
    )


class NodeActionTool(ProjectTool):
    name: str = "gns3_node_action"
    description: str = (
        "Start, stop, suspend or reload nodes of the open project, by name (or all of them). "
        "Returns the outcome per node; GNS3's reason is given when a node cannot do it."
    )
    args_schema: type[BaseModel] = NodeActionInput

    async def _arun(self, action: NodeAction, nodes: list[str], **_: Any) -> dict[str, Any]:
        """GNS3 checks each node (``Node.PowerMgmt``); refused on every node is a refusal of the call,
        failed on every node (refused or not) a failure of the call."""
        try:
            return await self._act(action, nodes)
        except GNS3Error as exc:
            raise tool_error(exc) from exc

    async def _act(self, action: NodeAction, nodes: list[str]) -> dict[str, Any]:
        async with self.client_factory() as client:
            if [n.casefold() for n in nodes] == [ALL_NODES]:
                try:
                    await client.node_action(self.project_id, action)
                except PermissionErrors as exc:
                    raise await self._refused(exc, "this project's nodes", f"{action} all nodes") from exc
                return {"action": action, "nodes": "all", "status": "ok"}
            try:
                known = await client.nodes(self.project_id)
            except PermissionErrors as exc:
                raise await self._refused(exc, "this project's nodes", f"{action} {', '.join(nodes)}") from exc
            targets = [_by_name(known, name, "node") for name in nodes]
            refusals: list[PermissionRefused] = []

            async def act(node: Mapping[str, Any]) -> dict[str, Any]:
                try:
                    await client.node_action(self.project_id, action, str(node["node_id"]))
                except PermissionErrors as exc:
                    refused = await self._refused(exc, as_data(node["name"]), action)
                    refusals.append(refused)
                    return {"node": node["name"], "status": "denied", "error": str(refused)}
                except GNS3Error as exc:
                    return {"node": node["name"], "status": "error", "error": getattr(exc, "message", str(exc))}
                return {"node": node["name"], "status": "ok"}

            results = await gather_cancelling(*(act(n) for n in targets))
        if len(refusals) == len(results):
            raise PermissionRefused("; ".join(str(r) for r in refusals))
        failed = [(str(r["node"]), str(r["error"])) for r in results if r["status"] != "ok"]
        outcome = {"action": action, "results": results, "failed": len(failed)}
        if len(failed) == len(results):
            raise every_item_failed(f"{action} {', '.join(as_data(r['node']) for r in results)}", failed, outcome)
        return outcome


class CreateNodeInput(BaseModel):
    template: str = Field(description="Template name, as gns3_list_templates shows it.")
    name: str | None = Field(default=None, description="Name for the new node (default: GNS3 picks one).")
    x: int = Field(default=0, description="Horizontal position on the canvas.")
    y: int = Field(default=0, description="Vertical position on the canvas.")


class CreateNodeTool(ProjectTool):
    name: str = "gns3_create_node"
    description: str = "Create a node in the open project from a template, optionally naming and placing it."
    args_schema: type[BaseModel] = CreateNodeInput

    async def _arun(self, template: str, name: str | None = None, x: int = 0, y: int = 0, **_: Any) -> dict[str, Any]:
        try:
            async with self.client_factory() as client:
                chosen = _by_name(await client.templates(), template, "template")
                node = await client.create_node_from_template(
                    self.project_id, str(chosen["template_id"]), x=x, y=y, name=name
                )
        except PermissionErrors as exc:
            action = f"create node from {template}" + (f" named {name}" if name else "")
            raise await self._refused(exc, "this project", action) from exc
        except GNS3Error as exc:
            raise tool_error(exc) from exc
        ports = [p.get("short_name") or p.get("name") for p in node.get("ports") or []]
        return {"name": node.get("name"), "node_type": node.get("node_type"), "status": node.get("status"), "ports": ports}


class CreateLinkInput(BaseModel):
    node_a: str = Field(description="First node name.")
    port_a: str = Field(description="Port of the first node, e.g. e0 or Ethernet0.")
    node_b: str = Field(description="Second node name.")
    port_b: str = Field(description="Port of the second node.")


class CreateLinkTool(ProjectTool):
    name: str = "gns3_create_link"
    description: str = "Link two ports of nodes in the open project, by node and port names."
    args_schema: type[BaseModel] = CreateLinkInput

    async def _arun(self, node_a: str, port_a: str, node_b: str, port_b: str, **_: Any) -> dict[str, Any]:
        try:
            async with self.client_factory() as client:
                link = await client.create_link(self.project_id, node_a, port_a, node_b, port_b)
        except PermissionErrors as exc:
            raise await self._refused(exc, "this project", f"link {node_a} {port_a} <-> {node_b} {port_b}") from exc
        except GNS3Error as exc:
            raise tool_error(exc) from exc
        link_name = f"{as_data(node_a)} {as_data(port_a)} <-> {as_data(node_b)} {as_data(port_b)}"
        return {"link_id": link.get("link_id"), "link": link_name}
