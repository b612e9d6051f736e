"""Run events on the wire: Server-Sent Events, or one JSON answer gathered from them.

Each event is one ``data: {json}`` line followed by a blank line. Events keep the
service's fields and gain the field names GNS3 3.1's copilot chat API uses
(``tool_call`` object, ``tool_name``, ``tool_output``, ``error``), so that a client
written for either server can read them.

A client that disconnects cancels its run: Starlette cancels the response's
generator (``stream: false``: :func:`unless_disconnected` does), and closing the
service's event iterator cancels the run and lets it save its state. The
service's iterator always ends with ``done`` (after ``error`` or ``abort`` when
the run did not complete), so neither path needs its own.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Mapping
from typing import Any, Literal, TypeVar

from starlette.types import Receive

from ..errors import CopilotError, ErrorKind
from ..service.copilot import EventStream
from .schemas import Approval, ChatResult, ToolCallSummary

log = logging.getLogger(__name__)

T = TypeVar("T")

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no", "Connection": "keep-alive"}


class RunFailedError(CopilotError):
    """A ``stream: false`` run that ended with an error event (the message is already public)."""

    kind = ErrorKind.UPSTREAM
    code = "run_failed"


def wire_event(event: Mapping[str, Any]) -> dict[str, Any]:
    """The event as sent: our fields plus GNS3 3.1's names for the same facts."""
    data = dict(event)
    kind = data.get("type")
    if kind == "tool_call":
        arguments = json.dumps(data.get("args", {}), ensure_ascii=False, default=str)
        data["tool_call"] = {"id": data.get("tool_call_id"), "type": "function",
                             "function": {"name": data.get("name"), "arguments": arguments}}
    elif kind in ("tool_start", "tool_end"):
        data["tool_name"] = data.get("name")
        if kind == "tool_end":
            data["tool_output"] = data.get("output")
    elif kind == "error":
        data["error"] = data.get("message")
    return data


def encode(event: Mapping[str, Any]) -> bytes:
    """One SSE message."""
    return b"data: " + json.dumps(wire_event(event), ensure_ascii=False, default=str).encode("utf-8") + b"\n\n"


async def sse_stream(events: EventStream) -> AsyncIterator[bytes]:
    """The run's events as SSE; leaving early (disconnect, shutdown) cancels the run."""
    try:
        async for event in events:
            yield encode(event)
    finally:
        await events.aclose()


async def gather_result(session_id: str, events: EventStream) -> ChatResult:
    """Drain the run for ``stream: false``; an error event becomes RunFailedError (502)."""
    parts: list[str] = []
    calls: dict[str, ToolCallSummary] = {}
    error: Mapping[str, Any] | None = None
    pending: list[ToolCallSummary] = []
    approval: Approval | None = None
    evidence: dict[str, Any] | None = None
    done: Mapping[str, Any] = {}
    try:
        async for event in events:
            kind = event["type"]
            if kind == "context":
                parts = []  # a new model call: only the last one's text is the answer
            elif kind == "content":
                parts.append(event["content"])
            elif kind == "tool_call":
                calls[event["tool_call_id"]] = ToolCallSummary(
                    tool_call_id=event["tool_call_id"], name=event["name"], args=event.get("args") or {}
                )
            elif kind == "tool_start" and event["tool_call_id"] not in calls:
                # A resumed run (after .../confirm) starts calls announced by the run that paused.
                calls[event["tool_call_id"]] = ToolCallSummary(
                    tool_call_id=event["tool_call_id"], name=event["name"], args=event.get("args") or {}
                )
            elif kind == "tool_end" and event["tool_call_id"] in calls:
                calls[event["tool_call_id"]].status = event.get("status")
            elif kind == "confirm":
                pending = [ToolCallSummary.model_validate(c) for c in event["calls"]]
                approval = Approval.model_validate(event) if event.get("approval_id") else None
            elif kind == "evidence":
                evidence = {k: v for k, v in event.items() if k != "type"}
            elif kind == "error":
                error = event
            elif kind == "done":
                done = event
    finally:
        await events.aclose()
    if error is not None or done.get("status") == "error":
        message = (error or {}).get("message") or "The copilot run failed."
        raise RunFailedError(f"{message} (session {session_id})")
    final = done.get("status")
    status: Literal["completed", "aborted", "waiting_confirmation"] = (
        final if final in ("aborted", "waiting_confirmation") else "completed"
    )
    return ChatResult(
        session_id=session_id,
        status=status,
        content="".join(parts),
        tool_calls=list(calls.values()),
        usage=dict(done.get("usage") or {}),
        pending_calls=pending,
        approval=approval,
        evidence=evidence,
    )


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def unless_disconnected(receive: Receive, work: Awaitable[T]) -> T | None:
    """``work``'s result; None, with ``work`` cancelled, if the client leaves first.

    A plain (non-streaming) response is not cancelled when its client goes away,
    so the request's ``receive`` is watched for ``http.disconnect`` meanwhile.
    """
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnected(receive))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        if not task.done():
            task.cancel()
            await asyncio.wait({task})  # the run saves its state before we go on
    return None if task.cancelled() else task.result()
