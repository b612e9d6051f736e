"""What detecting nodes' CLI families needs from GNS3 and the copilot: templates and users' choices.

One helper for every place that shows or uses a node's family (the console tools, the
topology, the families routes), so that each reads the same evidence the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from ..console.choices import FamilyChoices
from ..gns3_client.exceptions import GNS3PermissionError

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
