"""A session's conversation as the history API shows it.

The service returns the stored messages (LangChain's); this is their public
shape: role, text, tool calls and results (a rejected call says ``rejected``),
ids. A fault-injection session hides what would give its faults away (the tool
calls' arguments and results) unless its owner asks to reveal them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from ..agent.context.counting import content_text, role_of
from ..agent.model.prompts import FAULT_INJECTION
from ..service.copilot import CopilotService, User

__all__ = ["HIDDEN_FAULT", "hide_fault_details", "history_view", "message_to_dict", "session_history"]

HIDDEN_FAULT = "[hidden: an injected fault; the person who injected it reveals it with GET .../faults]"


def message_to_dict(message: BaseMessage) -> dict[str, Any]:
    """A stored message as the history API returns it."""
    data: dict[str, Any] = {"role": role_of(message), "content": content_text(message.content)}
    if isinstance(message, AIMessage) and message.tool_calls:
        data["tool_calls"] = [{"id": c["id"], "name": c["name"], "args": c["args"]} for c in message.tool_calls]
    if isinstance(message, ToolMessage):
        status = message.response_metadata.get("copilot_status", message.status)
        data.update(tool_call_id=message.tool_call_id, name=message.name, status=status)
    if message.id:
        data["id"] = message.id
    return data


def hide_fault_details(message: dict[str, Any]) -> dict[str, Any]:
    """A message of a fault-injection session without what would give the fault away."""
    shown = dict(message)
    if shown.get("tool_calls"):
        shown["tool_calls"] = [{**c, "args": {}} for c in shown["tool_calls"]]
    if shown.get("role") == "tool":
        shown["content"] = HIDDEN_FAULT
    return shown


def history_view(messages: Sequence[BaseMessage], *, hide_faults: bool) -> list[dict[str, Any]]:
    shown = [message_to_dict(m) for m in messages]
    return [hide_fault_details(m) for m in shown] if hide_faults else shown


async def session_history(
    service: CopilotService, user: User, session_id: str, *, reveal: bool = False
) -> list[dict[str, Any]]:
    """The stored conversation of the user's session. A fault-injection session's tool calls (the
    faults) are hidden unless ``reveal`` (only its owner, or a superadmin, reaches it at all)."""
    record = await service.session(user, session_id)
    messages = await service.messages(user, session_id)
    return history_view(messages, hide_faults=record.kind == FAULT_INJECTION and not reveal)
