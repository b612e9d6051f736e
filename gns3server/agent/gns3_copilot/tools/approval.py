"""Approvals of device-changing tool calls: what one is bound to, who gave it, for how long.

One digest format for every way a tool runs (the agent's graph, MCP, a fault's
revert, and what comes through :class:`~.gate.ToolGate` next): ``sha256:`` and the
hex SHA-256 of canonical JSON (sorted keys, no spaces, UTF-8 kept) of the scope the
calls are bound to (``session_id`` for the agent, ``project_id`` for MCP, ...) and,
per call, its id, tool and arguments (for a console change: device, driver and the
exact command list). A pending approval stored by an earlier release was made by the
agent in this same format (``{"session_id", "calls"}``), so it still matches; MCP's
and a revert's were never stored (MCP keeps its own in memory).

An :class:`ApprovalGrant` is an approval given: its id, the digest it covers, who
gave it and when. A tool that runs under one finds it in the run's configurable
under :data:`APPROVAL_KEY` (:func:`grant_of`), and the console audit records it with
each command. A :class:`PendingApproval` is a request the user has not decided yet:
an id, the digest, the calls shown, an expiry (``[Copilot] approval_minutes``).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from langchain_core.runnables import RunnableConfig

DEFAULT_APPROVAL_SECONDS = 600.0
"""``[Copilot] approval_minutes`` when it is not set (10 minutes)."""
APPROVAL_KEY = "copilot_approval"
"""Where a call run under an approval finds it in the run's configurable (the console audit reads it)."""


def approval_digest(calls: Sequence[Mapping[str, Any]], **scope: str) -> str:
    """The digest an approval of ``calls`` (LangChain tool calls: id, name, args) within ``scope`` is bound to.

    ``scope`` names what the calls are bound to besides themselves (``session_id=...``,
    ``project_id=...``): the same calls in another session or project have another digest.
    """
    bound: dict[str, Any] = {
        **scope,
        "calls": [{"id": c.get("id") or "", "name": c.get("name"), "args": c.get("args") or {}} for c in calls],
    }
    text = json.dumps(bound, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class ApprovalGrant:
    """An approval given: which request (``approval_id``), for what (``digest``), by whom, when."""

    approval_id: str
    digest: str
    approved_by: str
    approved_at: float

    @classmethod
    def from_mapping(cls, value: Any) -> ApprovalGrant | None:
        """From a decision's JSON (what the service hands the agent on resume); None without a digest."""
        if not isinstance(value, Mapping) or not value.get("digest"):
            return None
        at = value.get("approved_at")
        return cls(
            str(value.get("approval_id") or ""), str(value["digest"]), str(value.get("approved_by") or ""),
            float(at) if isinstance(at, (int, float)) else 0.0,
        )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def grant_of(config: RunnableConfig | None) -> Mapping[str, Any]:
    """The approval a tool call runs under (``{}``: none), as the gate put it in the run's configurable."""
    grant = ((config or {}).get("configurable") or {}).get(APPROVAL_KEY)
    return grant if isinstance(grant, Mapping) else {}


@dataclass(frozen=True)
class PendingApproval:
    """What a paused session waits for the user to decide on."""

    approval_id: str
    digest: str
    created_at: float
    expires_at: float
    calls: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def new(cls, digest: str, calls: Sequence[Mapping[str, Any]], *, now: float, lifetime: float) -> PendingApproval:
        return cls(uuid.uuid4().hex, digest, now, now + lifetime, [dict(c) for c in calls])

    @classmethod
    def from_stored(cls, stored: Any) -> PendingApproval | None:
        """From the session record's JSON; a bare list of calls (stored before approvals had ids) never expires
        into a usable one: it can only be rejected."""
        if not stored:
            return None
        if isinstance(stored, list):
            return cls("", "", 0.0, 0.0, [dict(c) for c in stored])
        return cls(
            str(stored.get("approval_id") or ""), str(stored.get("digest") or ""),
            float(stored.get("created_at") or 0.0), float(stored.get("expires_at") or 0.0),
            [dict(c) for c in stored.get("calls") or []],
        )

    def expired(self, now: float) -> bool:
        return now >= self.expires_at

    def grant(self, approved_by: str, now: float) -> ApprovalGrant:
        """This request, approved by ``approved_by`` at ``now``."""
        return ApprovalGrant(self.approval_id, self.digest, approved_by, now)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def public(self) -> dict[str, Any]:
        """What a client is shown, and may echo back with its decision."""
        return {"approval_id": self.approval_id, "digest": self.digest, "expires_at": self.expires_at}
