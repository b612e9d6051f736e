"""Approvals of device-changing tool calls: what one is bound to, and for how long.

An approval covers one set of tool calls of one session, nothing else: its
digest is a SHA-256 over canonical JSON of the session id and, per call, the
call id, the tool and its arguments (for a console change: device, driver and
the exact command list). The agent computes the digest when it pauses for the
user and again when it resumes, and runs nothing if they differ. The service
gives each pause an id and an expiry, and lets a decision be used once.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

DEFAULT_APPROVAL_SECONDS = 600.0


def approval_digest(session_id: str, calls: Sequence[Mapping[str, Any]]) -> str:
    """The digest an approval of ``calls`` (LangChain tool calls: id, name, args) in this session is bound to."""
    bound = {
        "session_id": session_id,
        "calls": [{"id": c.get("id") or "", "name": c.get("name"), "args": c.get("args") or {}} for c in calls],
    }
    text = json.dumps(bound, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


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

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def public(self) -> dict[str, Any]:
        """What a client is shown, and may echo back with its decision."""
        return {"approval_id": self.approval_id, "digest": self.digest, "expires_at": self.expires_at}
