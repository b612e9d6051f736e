"""The agent's modes, and which tools each may use.

Teaching mode guides a student: it runs read-only tools only (tools flagged
``read_only``), enforced by the run's tool gate, not only by the prompt. Lab
automation may use every tool; device changes still wait for the user's approval.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.tools import BaseTool

from ...tools.gate import AfterCall, ToolErrorPolicy, ToolGate, is_read_only

__all__ = ["DEFAULT_MODE", "MODES", "check_mode", "gate_for_mode", "tools_for_mode"]

MODES = ("teaching", "lab_automation")
DEFAULT_MODE = "lab_automation"


def check_mode(mode: str) -> None:
    """Refuse a mode the agent does not know (ValueError naming the allowed ones)."""
    if mode not in MODES:
        raise ValueError(f"Invalid mode: {mode!r} (allowed: {', '.join(MODES)})")


def tools_for_mode(tools: Sequence[BaseTool], mode: str) -> list[BaseTool]:
    """The tools a mode may use: all in lab automation, read-only ones in teaching."""
    check_mode(mode)
    return [t for t in tools if mode == "lab_automation" or is_read_only(t)]


def gate_for_mode(
    tools: Sequence[BaseTool], mode: str, errors: ToolErrorPolicy | None = None, after: Sequence[AfterCall] = ()
) -> ToolGate:
    """The tool gate of a run in ``mode``: every tool known, read-only ones only in teaching."""
    check_mode(mode)
    return ToolGate(tools, read_only=mode != "lab_automation", restriction=f"in {mode} mode", errors=errors, after=after)
