"""Console credentials per node and per template: set, read (masked) and forget them.

``PUT|GET|DELETE /v3/copilot/projects/{project_id}/nodes/{node_id}/console-credentials``
and ``/v3/copilot/templates/{template_id}/console-credentials``. Who may: whom GNS3
lets edit the node (``Node.Modify`` on the node's path) or the template
(``Template.Modify``), asked in-process of GNS3's own check (superadmins pass), after
GNS3 has let the user read the node or template with their own token (its 403/404
otherwise). The secrets go in and never come out; setting and forgetting them is
audited in the console audit (who, which node, which fields), their use by a session
too (``console/runner.py``).
"""

from __future__ import annotations

import logging
from uuid import UUID

from fastapi import APIRouter, Response, status

from ...console import Credentials, CredentialStore, Who
from ...console.credentials import CredentialsInfo, Scope, mask
from ...errors import CopilotError, ErrorKind
from ...service.copilot import User
from ...tools.permissions import refusal
from ..credential_schemas import ConsoleCredentials, ConsoleCredentialsSet
from ..dependencies import CurrentUser, ProjectId, State
from ..errors import ServiceUnavailableError
from ..state import CopilotState

log = logging.getLogger(__name__)

router = APIRouter()

NODE_MODIFY = "Node.Modify"
TEMPLATE_MODIFY = "Template.Modify"
_RESPONSES: dict[int | str, dict[str, str]] = {
    403: {"description": "GNS3 does not let the user edit this node (Node.Modify) or template (Template.Modify)"},
    404: {"description": "No such node or template (GNS3), or no credentials set"},
}
_SET_RESPONSES: dict[int | str, dict[str, str]] = {
    **_RESPONSES,
    413: {"description": "Request body too large"},
    422: {"description": "Invalid credentials: none given, a control character, an unknown field"},
}


class CredentialsNotFoundError(CopilotError):
    """No console credentials are set for this node or template."""

    kind = ErrorKind.NOT_FOUND
    code = "console_credentials_not_found"


class CredentialsForbiddenError(CopilotError):
    """GNS3 does not let the user edit the node or template whose credentials these are."""

    kind = ErrorKind.FORBIDDEN
    code = "console_credentials_forbidden"


def _shown(info: CredentialsInfo) -> ConsoleCredentials:
    return ConsoleCredentials.model_validate(info, from_attributes=True)


async def _may_edit(state: CopilotState, user: User, privilege: str, path: str, what: str) -> None:
    """GNS3's own verdict on ``privilege`` at ``path`` for the user (read afresh), or 403."""
    verdict = await state.console.permissions(user.user_id)(privilege, path)
    if verdict != "allowed":
        raise CredentialsForbiddenError(str(refusal(verdict, privilege, what)))


async def _node(state: CopilotState, user: User, project_id: str, node_id: UUID) -> str:
    """The node's name, once GNS3 let the user read it and edit it."""
    async with state.gns3_client(user.token) as client:
        node = await client.node(project_id, str(node_id))
    name = str(node.get("name") or node_id)
    await _may_edit(state, user, NODE_MODIFY, f"/projects/{project_id}/nodes/{node_id}", name)
    return name


async def _template(state: CopilotState, user: User, template_id: UUID) -> str:
    async with state.gns3_client(user.token) as client:
        template = await client.template(str(template_id))
    name = str(template.get("name") or template_id)
    await _may_edit(state, user, TEMPLATE_MODIFY, f"/templates/{template_id}", f"template {name}")
    return name


def _store(state: CopilotState) -> CredentialStore:
    if state.console.credentials is None:  # the lifespan opens it with the other console services
        raise ServiceUnavailableError("The copilot keeps no console credentials on this server.")
    return state.console.credentials


async def _set(
    state: CopilotState, user: User, scope: Scope, scope_id: str, name: str, body: ConsoleCredentialsSet, project_id: str
) -> ConsoleCredentials:
    creds = Credentials(body.username, body.password, body.enable_password, source=scope)
    info = await _store(state).set(scope, scope_id, creds, project_id=project_id, set_by=user.username)
    fields = ", ".join(f for f, v in (("username " + mask(body.username), body.username), ("password", body.password),
                                      ("enable password", body.enable_password)) if v)
    await state.console.audit.record(Who(user.username, "", project_id), name, f"<set {scope} console credentials>",
                                     "ok", fields)
    log.info("Console credentials of %s %s set by %s", scope, scope_id, user.username)
    return _shown(info)


async def _get(state: CopilotState, scope: Scope, scope_id: str) -> ConsoleCredentials:
    info = await _store(state).info(scope, scope_id)
    if info is None:
        raise CredentialsNotFoundError(f"no console credentials are set for this {scope}")
    return _shown(info)


async def _delete(state: CopilotState, user: User, scope: Scope, scope_id: str, name: str, project_id: str) -> Response:
    if not await _store(state).delete(scope, scope_id):
        raise CredentialsNotFoundError(f"no console credentials are set for this {scope}")
    await state.console.audit.record(Who(user.username, "", project_id), name, f"<forget {scope} console credentials>", "ok")
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.put("/projects/{project_id}/nodes/{node_id}/console-credentials", response_model=ConsoleCredentials,
            responses=_SET_RESPONSES)
async def set_node_credentials(
    project_id: ProjectId, node_id: UUID, body: ConsoleCredentialsSet, user: CurrentUser, state: State
) -> ConsoleCredentials:
    """Set what this node's console login (and enable) ask for; they replace any set before."""
    name = await _node(state, user, project_id, node_id)
    return await _set(state, user, "node", str(node_id), name, body, project_id)


@router.get("/projects/{project_id}/nodes/{node_id}/console-credentials", response_model=ConsoleCredentials,
            responses=_RESPONSES)
async def get_node_credentials(project_id: ProjectId, node_id: UUID, user: CurrentUser, state: State) -> ConsoleCredentials:
    """What is set for this node (the username masked, passwords as flags)."""
    await _node(state, user, project_id, node_id)
    return await _get(state, "node", str(node_id))


@router.delete("/projects/{project_id}/nodes/{node_id}/console-credentials", status_code=204, responses=_RESPONSES)
async def delete_node_credentials(project_id: ProjectId, node_id: UUID, user: CurrentUser, state: State) -> Response:
    name = await _node(state, user, project_id, node_id)
    return await _delete(state, user, "node", str(node_id), name, project_id)


@router.put("/templates/{template_id}/console-credentials", response_model=ConsoleCredentials,
            responses=_SET_RESPONSES)
async def set_template_credentials(
    template_id: UUID, body: ConsoleCredentialsSet, user: CurrentUser, state: State
) -> ConsoleCredentials:
    """Set the console credentials of every node made from this template (a node's own win)."""
    name = await _template(state, user, template_id)
    return await _set(state, user, "template", str(template_id), f"template {name}", body, "")


@router.get("/templates/{template_id}/console-credentials", response_model=ConsoleCredentials, responses=_RESPONSES)
async def get_template_credentials(template_id: UUID, user: CurrentUser, state: State) -> ConsoleCredentials:
    await _template(state, user, template_id)
    return await _get(state, "template", str(template_id))


@router.delete("/templates/{template_id}/console-credentials", status_code=204, responses=_RESPONSES)
async def delete_template_credentials(template_id: UUID, user: CurrentUser, state: State) -> Response:
    name = await _template(state, user, template_id)
    return await _delete(state, user, "template", str(template_id), f"template {name}", "")
