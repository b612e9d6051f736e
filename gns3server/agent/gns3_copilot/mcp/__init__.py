"""The copilot's tools for any MCP client: a streamable-HTTP MCP endpoint inside gns3-server.

``server`` wires the MCP SDK's low-level server and session manager, ``auth``
turns a GNS3 token or an MCP API key into the GNS3 user a request acts as,
``keys`` stores those keys (hashed), ``tools`` offers the copilot's own tools
with the same rules, ``approvals`` holds approvals for clients without
elicitation, ``resources`` and ``prompts`` are the topology resource and the
ready-made prompts. See docs/mcp.md.
"""

from .server import MCP_PATH, MCPEndpoint, MCPRoute

__all__ = ["MCP_PATH", "MCPEndpoint", "MCPRoute"]
