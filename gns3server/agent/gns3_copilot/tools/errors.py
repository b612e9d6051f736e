"""How tools fail: one convention, so the agent's graph stays generic.

A tool that cannot do what the model asked raises :class:`ToolError` (a member
of the copilot's error tree and LangChain's ``ToolException``) whose text is
written for the model: it says what failed and, where it helps, what to try.
Tools translate what they meet themselves (GNS3's refusals, console failures,
a wrong name) with :func:`tool_error`, ``raise ... from`` keeping the original
for the log. :func:`model_message` is the policy the service hands to the graph
factory: the text the model may read for an exception, or None for a bug (the
graph then answers "failed unexpectedly" and logs the traceback).
:func:`result_failed` is the other half of it: a result that a tool returns
but that reports a failure (a device's blocked or failed batch).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.tools import ToolException

from ..errors import CopilotError, ErrorKind

__all__ = ["ToolError", "model_message", "result_failed", "tool_error"]


class ToolError(CopilotError, ToolException):
    """A tool call that failed for a reason the model can act on; ``str()`` is written for it."""

    code = "tool_error"
    kind = ErrorKind.UPSTREAM

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


def model_message(exc: BaseException) -> str | None:
    """What the model reads for a tool's exception; None when it is a bug (only the log sees it)."""
    if isinstance(exc, ToolException):
        return str(exc)
    if isinstance(exc, CopilotError) and exc.kind is not ErrorKind.INTERNAL:
        return str(exc)  # a tool that did not translate: ours, written to be read
    return None


def result_failed(result: Any) -> bool:
    """Whether a returned result reports a failure: one device's batch that was blocked or failed."""
    return isinstance(result, Mapping) and "device" in result and result.get("status") in ("blocked", "failed")
