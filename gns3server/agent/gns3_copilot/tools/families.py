"""What detecting nodes' CLI families needs from GNS3 and the copilot: templates and users' choices.

One helper for every place that shows or uses a node's family (the console tools, the
topology, the families routes), so that each reads the same evidence the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from typing import Any

from ..console.choices import FamilyChoices
from ..console.drivers import UnknownDriverError
from ..console.registry import Drivers
from ..gns3_client.exceptions import GNS3PermissionError
from ..gns3_client.topology import fetch_rest_topology

log = logging.getLogger(__name__)


async def node_evidence(
    client: Any, project_id: str, nodes: Sequence[Mapping[str, Any]], choices: FamilyChoices | None
) -> tuple[dict[str, Mapping[str, Any]], dict[str, str]]:
    """The nodes' templates by id (none when GNS3 does not let the user list templates: the
    detection then goes without) and the families users chose, by node id."""
    templates: dict[str, Mapping[str, Any]] = {}
    if any(node.get("template_id") for node in nodes):
        try:
            templates = {str(t.get("template_id")): t for t in await client.templates()}
        except GNS3PermissionError:
            log.debug("Templates not readable by this user: families detected without them")
    chosen = await choices.for_project(project_id) if choices is not None else {}
    return templates, {node_id: choice.family for node_id, choice in chosen.items()}


async def annotate_families(
    client: Any, project_id: str, nodes: Sequence[MutableMapping[str, Any]], choices: FamilyChoices | None,
    drivers: Drivers,
) -> None:
    """Give each node with a console CLI its family as the console tools will drive it: ``cli``
    (``"junos"``) and, when only weak evidence names it, ``cli_assumed`` (the model is told, never
    left to guess which commands the node takes). Nodes with no CLI (switches, clouds) get nothing."""
    templates, chosen = await node_evidence(client, project_id, nodes, choices)
    for node in nodes:
        try:
            picked = drivers.pick(node, templates.get(str(node.get("template_id"))), chosen.get(str(node.get("node_id"))))
        except UnknownDriverError:
            continue
        node["cli"] = picked.driver.name
        if not picked.cli_known:
            node["cli_assumed"] = True


async def topology_with_families(
    client: Any, project_id: str, choices: FamilyChoices | None, drivers: Drivers,
    read: Callable[[Any, str], Awaitable[dict[str, Any]]] = fetch_rest_topology,
) -> dict[str, Any]:
    """The project's REST-shaped topology (``read``: ``fetch_rest_topology``, or one kept between
    turns), each node with its CLI family (the users' choices read afresh)."""
    topology = await read(client, project_id)
    topology["nodes"] = [dict(node) for node in topology["nodes"]]
    await annotate_families(client, project_id, topology["nodes"], choices, drivers)
    return topology
