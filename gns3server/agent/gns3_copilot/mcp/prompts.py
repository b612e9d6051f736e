"""MCP prompts: ready-made tasks that a client offers its user (slash commands in most clients)."""

from __future__ import annotations

from collections.abc import Mapping

from mcp import types

TROUBLESHOOT = "troubleshoot_connectivity"
EXPLAIN = "explain_lab"

PROMPTS = [
    types.Prompt(
        name=TROUBLESHOOT,
        title="Troubleshoot connectivity between two devices",
        description="Find out why device A cannot reach device B, reading the lab and the devices (no changes).",
        arguments=[
            types.PromptArgument(name="project_id", description="UUID of the GNS3 project", required=True),
            types.PromptArgument(name="device_a", description="Node name of the first device", required=True),
            types.PromptArgument(name="device_b", description="Node name (or address) of the second device", required=True),
        ],
    ),
    types.Prompt(
        name=EXPLAIN,
        title="Explain this lab",
        description="Describe what the lab is, how it is wired and what it is for.",
        arguments=[types.PromptArgument(name="project_id", description="UUID of the GNS3 project", required=True)],
    ),
]

_TEXT = {
    TROUBLESHOOT: (
        "In GNS3 project {project_id}, {device_a} cannot reach {device_b}. Find out why.\n"
        "1. Read the topology (resource gns3://projects/{project_id}/topology, or the gns3_topology tool): "
        "the path between them, node status, links.\n"
        "2. On the devices along that path, run read-only commands with gns3_show_commands (addresses, "
        "interfaces, routes, ARP; ping and traceroute from {device_a}).\n"
        "3. Explain the cause, with the evidence, and propose the fix as exact configuration commands. Do not "
        "change anything yourself unless I ask: configuration goes through gns3_config_commands and needs my approval."
    ),
    EXPLAIN: (
        "Explain the GNS3 lab in project {project_id}: read its topology (resource "
        "gns3://projects/{project_id}/topology, or the gns3_topology tool), then describe the devices, how they "
        "are connected, which ones are running, and what the lab seems designed to teach or test. Use read-only "
        "commands (gns3_show_commands) on running devices where addressing or routing matters."
    ),
}


def get_prompt(name: str, arguments: Mapping[str, str] | None) -> types.GetPromptResult:
    """The prompt's message with its arguments filled in (ValueError naming a missing one)."""
    prompt = next((p for p in PROMPTS if p.name == name), None)
    if prompt is None:
        raise ValueError(f"Unknown prompt: {name}")
    given = dict(arguments or {})
    for argument in prompt.arguments or []:
        if argument.required and not str(given.get(argument.name, "")).strip():
            raise ValueError(f"{argument.name}: required")
    text = _TEXT[name].format(**{a.name: given.get(a.name, "") for a in prompt.arguments or []})
    message = types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))
    return types.GetPromptResult(description=prompt.description, messages=[message])
