"""The copilot does not fix an assigned fault for a student: its tools refuse the fault's recorded undo.

A before-call callback of a tool gate (:class:`~..tools.gate.ToolGate`): for a user
who is not the assignment's teacher, a call of the undo's tool on the undo's device
whose commands include every command of a recorded undo (in order, spacing and case
aside) is refused before anything is sent. The student may still fix the lab with
commands of their own; the copilot only never replays the solution it holds.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from ..tools.errors import ToolError
from ..tools.gate import ToolCall

log = logging.getLogger(__name__)

__all__ = ["REFUSAL", "UndoGuard", "replays"]

REFUSAL = ("this would revert a fault your teacher assigned in this lab; the copilot does not apply the "
           "solution for you. Ask for a hint, or make the change yourself.")
Undos = Callable[[], Awaitable[Sequence[Mapping[str, Any]]]]
"""The recorded undo calls (``{"tool", "args"}``) of the open assignments the caller is a student of."""


def _norm(command: Any) -> str:
    return " ".join(str(command).split()).casefold()


def replays(call: ToolCall, undo: Mapping[str, Any]) -> bool:
    """Whether ``call`` applies ``undo``: same tool and device, and every undo command, in order."""
    args, wanted = call.get("args") or {}, undo.get("args") or {}
    if call.get("name") != undo.get("tool") or str(args.get("device")) != str(wanted.get("device")):
        return False
    sent = iter(_norm(c) for c in args.get("commands") or [])
    needed = [_norm(c) for c in wanted.get("commands") or [] if len(str(c).split()) > 1]
    return bool(needed) and all(any(s == n for s in sent) for n in needed)


class UndoGuard:
    """Refuses a call that replays a recorded undo (see the module's docstring)."""

    def __init__(self, undos: Undos) -> None:
        self._undos = undos

    async def __call__(self, call: ToolCall) -> None:
        if not (call.get("args") or {}).get("commands"):
            return
        for undo in await self._undos():
            if replays(call, undo):
                log.info("A call of %s replaying an assigned fault's undo was refused", call.get("name"))
                raise ToolError(REFUSAL)
