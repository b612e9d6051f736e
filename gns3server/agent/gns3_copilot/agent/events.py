"""The typed events a copilot run streams to its client.

Each event is a JSON-able dict with a ``type``; the HTTP layer sends one per
``data:`` line. The graph emits the run's own events (content, tool calls, the
context report); the service adds the lifecycle ones (error, abort, done,
heartbeat). Shapes follow GNS3 3.1's copilot chat API, plus our ``context``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Event = dict[str, Any]

# Tool output shown to the user is capped; the model gets the whole output.
DISPLAY_OUTPUT_CHARS = 4000


def content(text: str) -> Event:
    return {"type": "content", "content": text}


def tool_call(call_id: str, name: str, args: Mapping[str, Any]) -> Event:
    return {"type": "tool_call", "tool_call_id": call_id, "name": name, "args": dict(args)}


def tool_start(call_id: str, name: str, args: Mapping[str, Any]) -> Event:
    return {"type": "tool_start", "tool_call_id": call_id, "name": name, "args": dict(args)}


def tool_end(call_id: str, name: str, output: str, status: str, undo: Mapping[str, Any] | None = None) -> Event:
    """``undo``: the call that reverts what this one changed (fault injection records it)."""
    shown = output if len(output) <= DISPLAY_OUTPUT_CHARS else output[:DISPLAY_OUTPUT_CHARS] + "\n[... output truncated for display ...]"
    event: Event = {"type": "tool_end", "tool_call_id": call_id, "name": name, "output": shown, "status": status}
    if undo is not None:
        event["undo"] = dict(undo)
    return event


def context(report: Mapping[str, Any]) -> Event:
    return {"type": "context", "report": dict(report)}


def confirm(calls: Sequence[Mapping[str, Any]], approval: Mapping[str, Any] | None = None) -> Event:
    """The run waits for the user to approve or reject these tool calls.

    ``approval`` (approval_id, digest, expires_at) names this request for approval;
    the client may echo its id with the decision.
    """
    event: Event = {"type": "confirm", "calls": [dict(c) for c in calls]}
    if approval is not None:
        event.update(approval)
    return event


def approval_asked(calls: Sequence[Mapping[str, Any]], digest: str) -> Event:
    """The run pauses until the user decides on these calls (their approval bound to ``digest``);
    internal: the service stores the one record of the request and sends ``confirm``."""
    return {"type": "approval_asked", "calls": [dict(c) for c in calls], "digest": digest}


def usage(totals: Mapping[str, int]) -> Event:
    """The run's token usage so far; internal (the service folds it into ``done``)."""
    return {"type": "usage", "usage": dict(totals)}


def error(message: str, code: str = "error") -> Event:
    return {"type": "error", "message": message, "code": code}


def abort(reason: str = "aborted by user") -> Event:
    return {"type": "abort", "message": reason}


def heartbeat() -> Event:
    return {"type": "heartbeat"}


def done(session_id: str, usage: Mapping[str, int], status: str) -> Event:
    return {"type": "done", "session_id": session_id, "usage": dict(usage), "status": status}
