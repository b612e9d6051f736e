"""Approval of device changes in the agent: the run pauses before any tool of the message runs.

The calls that need the user's yes (the gate's :meth:`~...tools.gate.ToolGate.gated`)
pause the run with a LangGraph interrupt that holds only the digest of those calls
in the session. Pausing, the node reports the calls (an internal ``approval_asked``
event), from which the service makes the session's one record of the request. On
resume LangGraph runs the node again from the top and ``interrupt()`` returns the
user's decision: rejected calls are answered as rejected; an approval is verified
by the gate against exactly these calls, and runs nothing if its digest differs.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from langgraph.config import get_stream_writer
from langgraph.errors import GraphInterrupt
from langgraph.types import interrupt

from ...tools.gate import NOT_APPROVED, REJECTED, Approved, ToolGate
from .. import events

log = logging.getLogger(__name__)

__all__ = ["Refusals", "decide"]

Refusals = dict[str, tuple[str, str]]
"""Call id -> (the answer, ``rejected`` or ``error``) for calls answered without running."""


def decide(gate: ToolGate, calls: Sequence[Mapping[str, Any]], session_id: str) -> tuple[Approved | None, Refusals]:
    """The approval the gated ``calls`` run under, or their refusals; pauses the run the first time."""
    gated = gate.gated(calls)
    if not gated:
        return None, {}
    digest = gate.digest(gated, session_id=session_id)
    try:
        decision = interrupt({"digest": digest})
    except GraphInterrupt:  # pausing (never on resume): the service keeps the one record of the request
        shown = [events.tool_call(c["id"] or "", c["name"], c["args"]) for c in gated]
        get_stream_writer()(events.approval_asked(shown, digest))
        raise
    if not (isinstance(decision, Mapping) and decision.get("approved") is True):
        return None, {c["id"] or "": (REJECTED, "rejected") for c in gated}
    approved = gate.verify(decision.get("approval"), gated, session_id=session_id)
    if approved is None:
        log.warning("An approval did not match the calls it was applied to; nothing was sent")
        return None, {c["id"] or "": (NOT_APPROVED, "error") for c in gated}
    return approved, {}
