"""The current user's MCP API keys and the approvals MCP calls wait for.

``/v3/copilot/mcp`` itself is the MCP endpoint (mounted by the launcher); these
routes sit under it: ``/info``, ``/keys`` (create: the key is shown once; list;
revoke) and ``/approvals`` (the user's pending calls; approve or reject one).
"""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, status

from ...mcp.server import ENDPOINT_STATE, MCP_PATH, MCPEndpoint
from ..dependencies import CurrentUser
from ..errors import ServiceUnavailableError
from ..mcp_schemas import ApprovalDecision, MCPApproval, MCPInfo, MCPKey, MCPKeyCreate, MCPKeyCreated

router = APIRouter()

_KEY_NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"description": "No such MCP key of this user"}}
_APPROVAL_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"description": "No such approval of this user (or expired)"},
    409: {"description": "Already approved or rejected"},
}
_BODY: dict[int | str, dict[str, Any]] = {
    413: {"description": "Request body too large"},
    422: {"description": "The body fails the schema (field and rule named)"},
}


def mcp_endpoint(request: Request) -> MCPEndpoint:
    endpoint = getattr(request.app.state, ENDPOINT_STATE, None)
    if not isinstance(endpoint, MCPEndpoint) or not endpoint.running:
        raise ServiceUnavailableError("The copilot's MCP endpoint is not running (starting or shutting down).")
    return endpoint


Endpoint = Annotated[MCPEndpoint, Depends(mcp_endpoint)]


@router.get("/info", response_model=MCPInfo)
async def mcp_info(user: CurrentUser, endpoint: Endpoint) -> MCPInfo:
    """Where MCP clients connect (the panel shows it)."""
    return MCPInfo(endpoint=MCP_PATH)


@router.get("/keys", response_model=list[MCPKey])
async def list_keys(user: CurrentUser, endpoint: Endpoint) -> list[MCPKey]:
    """The user's keys (never the keys themselves), revoked and expired ones included."""
    now = time.time()
    return [MCPKey.of(k, now) for k in await endpoint.keys.list(user.user_id)]


@router.post("/keys", response_model=MCPKeyCreated, status_code=status.HTTP_201_CREATED, responses=_BODY)
async def create_key(body: MCPKeyCreate, user: CurrentUser, endpoint: Endpoint) -> MCPKeyCreated:
    """A new key acting as this user; the answer holds the key itself, shown this once."""
    expires_at = time.time() + body.expires_in_days * 86400 if body.expires_in_days else None
    record, secret = await endpoint.keys.create(user.user_id, body.name, body.scope, expires_at)
    shown = MCPKey.of(record, time.time())
    return MCPKeyCreated(**shown.model_dump(), key=secret, endpoint=MCP_PATH)


@router.delete("/keys/{key_id}", status_code=status.HTTP_204_NO_CONTENT, responses=_KEY_NOT_FOUND)
async def revoke_key(key_id: str, user: CurrentUser, endpoint: Endpoint) -> None:
    """The key is refused from its next request on (the record stays, for the audit)."""
    await endpoint.keys.revoke(user.user_id, key_id)


@router.get("/approvals", response_model=list[MCPApproval])
async def list_approvals(user: CurrentUser, endpoint: Endpoint) -> list[MCPApproval]:
    """Calls made through MCP that wait for (or got) this user's decision, oldest first."""
    return [MCPApproval.of(a) for a in endpoint.approvals.of_user(user.user_id)]


@router.post("/approvals/{approval_id}", response_model=MCPApproval, responses={**_APPROVAL_NOT_FOUND, **_BODY})
async def decide_approval(
    approval_id: str, body: ApprovalDecision, user: CurrentUser, endpoint: Endpoint
) -> MCPApproval:
    """Approve or reject one call; the MCP client then repeats it with its approval_id."""
    return MCPApproval.of(endpoint.approvals.decide(user.user_id, approval_id, body.approve))
