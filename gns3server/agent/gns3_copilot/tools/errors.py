"""How tools fail: one convention, so the agent's graph stays generic.

A tool that cannot do what the model asked raises :class:`ToolError` (a member
of the copilot's error tree and LangChain's ``ToolException``) whose text is
written for the model: it says what failed and, where it helps, what to try.
Tools translate what they meet themselves (GNS3's refusals, console failures,
a wrong name) with :func:`tool_error`, ``raise ... from`` keeping the original
for the log. A failure is always raised, never returned: a call on several
items (nodes, devices) returns each item's outcome as data while at least one
of them succeeded, and raises :func:`every_item_failed` when none did. A failed
call may still report what it did (:attr:`ToolError.outcome`: each item's
outcome, the undo of a change it may have half made).

:func:`model_message` and :func:`failure_outcome` are the error policy
(:data:`TOOL_ERRORS`) of every tool gate that runs these tools: the text the
model may read for an exception (its outcome included), or None for a bug (the
gate then answers "failed unexpectedly" and logs the traceback); and what a
failed call still reports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.tools import ToolException

from ..as_data import as_data, json_as_data, one_line
from ..errors import CopilotError, ErrorKind
from .gate import ToolErrorPolicy

__all__ = ["TOOL_ERRORS", "ToolError", "every_item_failed", "failure_outcome", "model_message", "tool_error"]


class ToolError(CopilotError, ToolException):
    """A tool call that failed for a reason the model can act on; ``str()`` is written for it.

    ``outcome``: what the call still reports (JSON-able: each item's outcome, an ``undo``
    for a change it may have half made), shown to the model after the text.
    """

    code = "tool_error"
    kind = ErrorKind.UPSTREAM

    def __init__(self, message: str, *, outcome: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.outcome = outcome

    @property
    def public_message(self) -> str:
        """For a client (a route that runs a tool): what the translated error would say, else the text."""
        cause = self.__cause__
        return cause.public_message if isinstance(cause, CopilotError) else str(self)


def tool_error(exc: CopilotError) -> ToolError:
    """``exc`` (GNS3's, a console's) as a tool error with its full text, which names what was attempted.

    Raise it ``from exc``.
    """
    return ToolError(str(exc))


def every_item_failed(
    what: str, failures: Sequence[tuple[str, str]], outcome: Mapping[str, Any] | None = None
) -> ToolError:
    """The error of a call on several items (nodes, devices) none of which succeeded: ``what``
    was asked, ``failures`` says (item, why) for each (the item's name shown as data, each reason
    on its own line). Raise it; while one item succeeds, the call returns every item's outcome instead."""
    reasons = "\n".join(f"- {as_data(item)}: {one_line(why)}" for item, why in failures)
    return ToolError(f"{what}: every one failed\n{reasons}", outcome=outcome)


def model_message(exc: BaseException) -> str | None:
    """What the model reads for a tool's exception (with the outcome a failed call still reports);
    None when it is a bug (only the log sees it)."""
    if isinstance(exc, ToolException):
        outcome = failure_outcome(exc)
        return str(exc) if outcome is None else f"{exc}\n{json_as_data(outcome)}"
    if isinstance(exc, CopilotError) and exc.kind is not ErrorKind.INTERNAL:
        return str(exc)  # a tool that did not translate: ours, written to be read
    return None


def failure_outcome(exc: BaseException) -> Mapping[str, Any] | None:
    """What a call that raised still reports (each item's outcome, an ``undo``), or None."""
    return exc.outcome if isinstance(exc, ToolError) else None


TOOL_ERRORS = ToolErrorPolicy(message=model_message, outcome=failure_outcome)
"""The copilot tools' error policy, for every gate that runs them (the graph, MCP, a revert)."""
