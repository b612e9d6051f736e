"""Approvals of device-changing calls made through MCP by clients without elicitation.

Such a call is not run: it gets an approval id, bound to a digest of exactly
what would run (tool, project, arguments), to the user and to the credential
that asked. The user approves or rejects it in the copilot's API (or panel);
the client then calls the same tool again with the same arguments and
``approval_id``. An approval is single-use and expires (``[Copilot]
approval_minutes``); a call whose arguments differ in any way does not match it
(the digest is the one every approval is bound to, ``tools.approval``, with the
project as its scope). Approvals live in memory: a server restart forgets them,
and the client asks again.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import CopilotError, ErrorKind
from ..tools.approval import DEFAULT_APPROVAL_SECONDS, approval_digest

MAX_PENDING_PER_USER = 50
State = Literal["pending", "approved", "rejected"]


class ApprovalNotFoundError(CopilotError):
    """No such approval of this user (expired, used, or another user's: they look the same)."""

    kind = ErrorKind.NOT_FOUND
    code = "approval_not_found"


class ApprovalDecidedError(CopilotError):
    """The approval was already approved or rejected."""

    kind = ErrorKind.CONFLICT
    code = "approval_decided"


class TooManyApprovalsError(CopilotError):
    kind = ErrorKind.TOO_MANY
    code = "too_many_approvals"


def call_digest(tool: str, project_id: str, arguments: Mapping[str, Any]) -> str:
    """The digest of what would run (an MCP call has no call id): key order does not matter, any value does."""
    return approval_digest([{"name": tool, "args": arguments}], project_id=project_id)


@dataclass
class Approval:
    approval_id: str
    user_id: str
    credential_id: str
    via: str
    tool: str
    project_id: str
    arguments: dict[str, Any]
    digest: str
    created_at: float
    expires_at: float
    state: State = "pending"
    decided_at: float | None = field(default=None)


class Approvals:
    """Pending and decided approvals of every user, for one server process."""

    def __init__(self, lifetime: float = DEFAULT_APPROVAL_SECONDS) -> None:
        self._lifetime = lifetime
        self._items: dict[str, Approval] = {}

    def _purge(self, now: float) -> None:
        for approval_id in [a.approval_id for a in self._items.values() if a.expires_at <= now]:
            del self._items[approval_id]

    def request(
        self, *, user_id: str, credential_id: str, via: str, tool: str, project_id: str, arguments: Mapping[str, Any]
    ) -> Approval:
        now = time.time()
        self._purge(now)
        if sum(a.user_id == user_id and a.state == "pending" for a in self._items.values()) >= MAX_PENDING_PER_USER:
            raise TooManyApprovalsError(f"More than {MAX_PENDING_PER_USER} calls wait for approval; decide those first")
        approval = Approval(
            approval_id=uuid.uuid4().hex, user_id=user_id, credential_id=credential_id, via=via, tool=tool,
            project_id=project_id, arguments=dict(arguments), digest=call_digest(tool, project_id, arguments),
            created_at=now, expires_at=now + self._lifetime,
        )
        self._items[approval.approval_id] = approval
        return approval

    def of_user(self, user_id: str) -> list[Approval]:
        self._purge(time.time())
        return sorted((a for a in self._items.values() if a.user_id == user_id), key=lambda a: a.created_at)

    def get(self, user_id: str, approval_id: str) -> Approval:
        self._purge(time.time())
        approval = self._items.get(approval_id)
        if approval is None or approval.user_id != user_id:
            raise ApprovalNotFoundError(f"Approval {approval_id} not found (it may have expired or been used)")
        return approval

    def decide(self, user_id: str, approval_id: str, approve: bool) -> Approval:
        approval = self.get(user_id, approval_id)
        if approval.state != "pending":
            raise ApprovalDecidedError(f"Approval {approval_id} was already {approval.state}")
        approval.state = "approved" if approve else "rejected"
        approval.decided_at = time.time()
        return approval

    def redeem(self, *, user_id: str, credential_id: str, approval_id: str, tool: str, project_id: str,
               arguments: Mapping[str, Any]) -> Approval:
        """The approval for exactly this call, consumed if approved or rejected (a pending one stays).

        ApprovalNotFoundError when it does not exist for this caller, has expired,
        or was given for a different call (the caller's tool, project or arguments differ).
        """
        approval = self.get(user_id, approval_id)
        if approval.credential_id != credential_id or approval.digest != call_digest(tool, project_id, arguments):
            raise ApprovalNotFoundError(
                f"Approval {approval_id} is for a different call: repeat the approved call exactly, or ask again"
            )
        if approval.state != "pending":
            del self._items[approval_id]  # single use
        return approval
