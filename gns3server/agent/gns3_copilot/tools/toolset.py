"""The copilot's tools for one run: bound to a project and the user's GNS3 identity."""

from __future__ import annotations

from langchain_core.tools import BaseTool

from .nodes import ClientFactory, CreateLinkTool, CreateNodeTool, ListTemplatesTool, NodeActionTool
from .topology import GNS3TopologyTool


def build_tools(client_factory: ClientFactory, project_id: str) -> list[BaseTool]:
    """Every tool the agent knows; the mode decides which it may use (read-only ones in teaching)."""
    return [
        GNS3TopologyTool(client_factory=client_factory, metadata={"read_only": True}),
        ListTemplatesTool(client_factory=client_factory, project_id=project_id),
        NodeActionTool(client_factory=client_factory, project_id=project_id),
        CreateNodeTool(client_factory=client_factory, project_id=project_id),
        CreateLinkTool(client_factory=client_factory, project_id=project_id),
    ]
