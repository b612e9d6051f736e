"""Which CLI family each node runs: read for any user who may see the node, chosen by one who may edit it.

``GET /v3/copilot/projects/{project_id}/families`` and ``GET .../nodes/{node_id}/family``
give the detection (``console/detect.py``): family, confidence, evidence and, when the
family is assumed, why. ``PUT .../nodes/{node_id}/family`` stores a user's choice: GNS3
must let the user edit the node (``Node.Modify`` on it, GNS3's own check asked
in-process), and the change is written to the console audit log.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter

from ...console import Who
from ...console.choices import Choice, FamilyChoices
from ...console.detect import KNOWN_FAMILIES, Detection, detect_family
from ...errors import CopilotError, ErrorKind
from ...gns3_client.exceptions import GNS3NotFoundError, GNS3PermissionError
from ...tools.permissions import refusal
from ..dependencies import CurrentUser, ProjectId, State
from ..schemas import NodeFamily, NodeFamilyUpdate
from ..state import CopilotState

log = logging.getLogger(__name__)

router = APIRouter()

NODE_MODIFY = "Node.Modify"


class UnknownFamilyError(CopilotError, ValueError):
    code = "unknown_family"
    kind = ErrorKind.INVALID


class FamilyChoicesUnavailableError(CopilotError):
    code = "family_choices_unavailable"
    kind = ErrorKind.UNAVAILABLE


def _choices(state: CopilotState) -> FamilyChoices:
    choices = state.console.choices
    if choices is None:
        raise FamilyChoicesUnavailableError("This server keeps no per-node family choices")
    return choices


def _view(node: Mapping[str, Any], detection: Detection, choice: Choice | None) -> NodeFamily:
    data = detection.as_dict()
    return NodeFamily(
        node_id=str(node.get("node_id")), name=str(node.get("name")), family=data["family"],
        confidence=data["confidence"], assumed=data["assumed"], note=data["note"], evidence=data["evidence"],
        chosen_by=choice.set_by if choice else None, chosen_at=choice.set_at if choice else None,
    )


async def _template(state: CopilotState, token: str, node: Mapping[str, Any]) -> dict[str, Any] | None:
    """The node's template as the user may read it (None if gone or not theirs to read)."""
    template_id = node.get("template_id")
    if not template_id:
        return None
    try:
        async with state.gns3_client(token) as client:
            template: dict[str, Any] = await client.request("GET", f"/templates/{template_id}")
            return template
    except (GNS3NotFoundError, GNS3PermissionError):
        return None


async def _node(state: CopilotState, token: str, project_id: str, node_id: str) -> dict[str, Any]:
    async with state.gns3_client(token) as client:
        node: dict[str, Any] = await client.request("GET", f"/projects/{project_id}/nodes/{node_id}")
        return node


@router.get("/projects/{project_id}/families", response_model=list[NodeFamily])
async def project_families(project_id: ProjectId, user: CurrentUser, state: State) -> list[NodeFamily]:
    """The family of every node of the project, as the console tools will take it."""
    async with state.gns3_client(user.token) as client:
        nodes = await client.nodes(project_id)
        try:
            templates = {str(t.get("template_id")): t for t in await client.templates()}
        except GNS3PermissionError:
            templates = {}
    chosen = await _choices(state).for_project(project_id)
    views = []
    for node in nodes:
        choice = chosen.get(str(node.get("node_id")))
        template = templates.get(str(node.get("template_id")))
        views.append(_view(node, detect_family(node, template, choice.family if choice else None), choice))
    return views


@router.get("/projects/{project_id}/nodes/{node_id}/family", response_model=NodeFamily)
async def node_family(project_id: ProjectId, node_id: str, user: CurrentUser, state: State) -> NodeFamily:
    """The node's family, with the evidence and confidence (GNS3's 403/404 if the user may not see the node)."""
    node = await _node(state, user.token, project_id, node_id)
    choice = await _choices(state).get(project_id, node_id)
    template = await _template(state, user.token, node)
    return _view(node, detect_family(node, template, choice.family if choice else None), choice)


@router.put(
    "/projects/{project_id}/nodes/{node_id}/family",
    response_model=NodeFamily,
    responses={403: {"description": "GNS3 does not let the user edit the node (Node.Modify)"},
               413: {"description": "Request body too large"},
               422: {"description": "Not a CLI family the console knows"}},
)
async def choose_node_family(
    project_id: ProjectId, node_id: str, body: NodeFamilyUpdate, user: CurrentUser, state: State
) -> NodeFamily:
    """Choose the node's family (``null`` forgets the choice), as GNS3 lets the user edit the node."""
    family = body.family.strip().casefold() if body.family is not None else None
    if family is not None and family not in KNOWN_FAMILIES:
        raise UnknownFamilyError(f"family: unknown CLI family {body.family!r} (known: {', '.join(KNOWN_FAMILIES)})")
    node = await _node(state, user.token, project_id, node_id)
    name = str(node.get("name"))
    who = Who(user.username, "", project_id)
    verdict = await state.console.permissions(user.user_id)(NODE_MODIFY, f"/projects/{project_id}/nodes/{node_id}")
    if verdict != "allowed":
        refused = refusal(verdict, NODE_MODIFY, name)
        await state.console.audit.record(who, name, f"family {family or 'detected'}", "denied", str(refused))
        raise refused
    choices = _choices(state)
    before = await choices.get(project_id, node_id)
    choice = await choices.set(project_id, node_id, family, user.username)
    await state.console.audit.record(
        who, name, f"family {family or 'detected'}", "ok", f"was {before.family if before else 'detected'}"
    )
    log.info("User %s set the CLI family of %s (%s) to %s", user.username, name, node_id, family or "detected")
    template = await _template(state, user.token, node)
    return _view(node, detect_family(node, template, family), choice)
