"""Pydantic schemas of the MCP routes: API keys and approvals."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, StrictBool, field_validator

from ..mcp.approvals import Approval as ApprovalRecord
from ..mcp.keys import MCPKey as MCPKeyRecord
from ..utf8 import UTF8Text
from .schemas import RequestBody

MAX_EXPIRY_DAYS = 3650


def _timestamp(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def _maybe(seconds: float | None) -> datetime | None:
    return _timestamp(seconds) if seconds is not None else None


class MCPKeyCreate(RequestBody):
    name: UTF8Text = Field(
        ..., min_length=1, max_length=100,
        description="Shown in the list and in the console audit; unique among the user's keys (revoked ones included)",
    )
    scope: Literal["read_only", "full"] = Field(
        "read_only", description="read_only: the read-only tools only; full: every tool (config commands need approval)"
    )
    expires_in_days: int | None = Field(
        None, ge=1, le=MAX_EXPIRY_DAYS, description="The key stops working after this many days (none: never)"
    )

    @field_validator("name")
    @classmethod
    def _printable(cls, value: str) -> str:
        if not value.strip() or not value.isprintable():
            raise ValueError("must be printable text, not only spaces")
        return value.strip()


class MCPKey(BaseModel):
    key_id: str
    name: str
    scope: Literal["read_only", "full"]
    prefix: str = Field(..., description="The key's first characters, to recognise it")
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    last_used_at: datetime | None
    active: bool

    @classmethod
    def of(cls, record: MCPKeyRecord, now: float) -> MCPKey:
        return cls(
            key_id=record.key_id, name=record.name, scope=record.scope, prefix=record.prefix,
            created_at=_timestamp(record.created_at), expires_at=_maybe(record.expires_at),
            revoked_at=_maybe(record.revoked_at), last_used_at=_maybe(record.last_used_at),
            active=record.usable(now),
        )


class MCPKeyCreated(MCPKey):
    key: str = Field(..., description="The key itself: shown this once, never again")
    endpoint: str = Field(..., description="Path of the MCP endpoint on this server")


class MCPInfo(BaseModel):
    endpoint: str = Field(..., description="Path of the streamable-HTTP MCP endpoint on this server")
    transport: Literal["streamable-http"] = "streamable-http"


class ApprovalDecision(RequestBody):
    """A JSON boolean, strictly: ``"yes"``, ``"true"``, ``1`` or ``"on"`` is a 422, never an approval."""

    approve: StrictBool = Field(..., description="true runs the call when the client repeats it; false refuses it")


class MCPApproval(BaseModel):
    approval_id: str
    tool: str
    project_id: str
    arguments: dict[str, Any]
    via: str = Field(..., description="mcp:key:<key name> or mcp:token")
    state: Literal["pending", "approved", "rejected"]
    created_at: datetime
    expires_at: datetime

    @classmethod
    def of(cls, record: ApprovalRecord) -> MCPApproval:
        return cls(
            approval_id=record.approval_id, tool=record.tool, project_id=record.project_id,
            arguments=record.arguments, via=record.via, state=record.state,
            created_at=_timestamp(record.created_at), expires_at=_timestamp(record.expires_at),
        )
