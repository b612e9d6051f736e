"""The graph's ``tools`` node: every call of the model's message through the run's tool gate.

Device changes wait for the user's approval first (``policies/approval.py``);
then the calls run concurrently, each announced (``tool_start``) and answered
(``tool_end``, a ``ToolMessage``) whatever happens: an unknown tool, one the mode
does not allow, a failure, a rejection. Calls whose arguments are not valid JSON
(LangChain's ``invalid_tool_calls``) are answered with an error, so that no call
is ever left without an answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_stream_writer

from ..tools.gate import Approved, ToolGate, ToolOutcome
from . import events
from .policies.approval import decide
from .policies.arguments import EXCERPT_CHARS, cut_arguments

__all__ = ["ToolsNode"]


class ToolsNode:
    """The ``tools`` node of a graph whose calls pass ``gate``."""

    def __init__(self, gate: ToolGate) -> None:
        self._gate = gate

    async def __call__(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        last = state["messages"][-1]
        assert isinstance(last, AIMessage)
        session_id = str((config.get("configurable") or {}).get("thread_id") or "")
        approved, refused = decide(self._gate, last.tool_calls, session_id)  # before any tool runs
        answers = list(await asyncio.gather(
            *(self._run(c, config, approved, refused.get(c["id"] or "")) for c in last.tool_calls)
        ))
        answers += [_invalid_arguments(bad) for bad in last.invalid_tool_calls]
        return {"messages": answers}

    async def _run(
        self, call: Mapping[str, Any], config: RunnableConfig, approved: Approved | None,
        refused: tuple[str, str] | None,
    ) -> ToolMessage:
        """Run one call; ``refused`` (its answer and status) answers it without running it."""
        writer = get_stream_writer()
        writer(events.tool_start(call.get("id") or "", call["name"], call.get("args") or {}))
        outcome: ToolOutcome
        if refused is not None:
            outcome = await self._gate.refuse(call, refused[0], status="rejected" if refused[1] == "rejected" else "error")
        else:
            outcome = await self._gate.run(call, config, approved=approved)
        writer(events.tool_end(outcome.call_id, outcome.name, outcome.output, outcome.status, outcome.undo))
        # ToolMessage knows only success/error; the user sees (live and in the history) a rejection as such.
        rejected = outcome.status == "rejected"
        return ToolMessage(
            content=outcome.output, tool_call_id=outcome.call_id, name=outcome.name,
            status="error" if rejected else outcome.status,
            response_metadata={"copilot_status": "rejected"} if rejected else {},
        )


def _invalid_arguments(bad: Mapping[str, Any]) -> ToolMessage:
    return ToolMessage(
        content=(
            f"Error: the arguments of {bad.get('name')} are not valid JSON: "
            f"{cut_arguments(str(bad.get('error') or bad.get('args') or ''), EXCERPT_CHARS)}"
        ),
        tool_call_id=bad.get("id") or "",
        name=bad.get("name") or None,
        status="error",
    )
