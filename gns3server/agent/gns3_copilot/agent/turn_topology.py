"""The project's topology for the model calls of one run: one snapshot, read when the turn starts.

Every model call shows the model the lab's live topology (in the system prompt's
``{{topology_info}}``). It was read over GNS3's REST API (the project, its nodes and
its links, with the user's token) before each call: twice in a turn with one tool
round. A :class:`TurnTopology` reads it at the run's first call and gives that
snapshot to the run's later calls, so they all see the same lab, until a tool that
may change the lab has run (any tool not flagged read-only, unless the user
rejected the call): the next call reads it afresh, and sees the change. A read
that fails (None: GNS3 could not give it) is tried again at the next call.

The snapshot lives as long as its run: the next turn reads the lab again, with the
token of whoever asks then. Inside gns3-server that read is cheap while nothing
changed: the server keeps each project's topology between turns and forgets it on
GNS3's notifications (``gns3_client/kept_topology.py``); a tool that may change the
lab forgets it there too (:func:`may_change_lab`, the same rule as here). Once the
run has answered, its evidence is judged against the snapshot its last call showed
(:attr:`TurnTopology.shown`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ..tools.gate import ToolOutcome

__all__ = ["TurnTopology", "may_change_lab"]


def may_change_lab(outcome: ToolOutcome) -> bool:
    """A tool call that may have changed the lab: any not flagged read-only, unless the user rejected it."""
    return not outcome.read_only and outcome.status != "rejected"


class TurnTopology:
    """One run's topology snapshot (see the module's docstring)."""

    def __init__(self, load: Callable[[str], Awaitable[Any]]) -> None:
        self._load = load
        self._project: str | None = None
        self._snapshot: Any = None

    async def get(self, project_id: str, *, turn_starts: bool = False) -> Any:
        """The topology the run's model calls show: read now if the turn starts or there is no current one."""
        if turn_starts or self._snapshot is None or self._project != project_id:
            self._snapshot = await self._load(project_id)
            self._project = project_id
        return self._snapshot

    def shown(self, project_id: str) -> Any:
        """The snapshot the run's last model call was shown, if it is of ``project_id`` and still holds (else None)."""
        return self._snapshot if self._project == project_id else None

    async def after_tool(self, outcome: ToolOutcome) -> None:
        """A tool gate's ``after`` callback: a call that may have changed the lab ends the snapshot."""
        if may_change_lab(outcome):
            self._snapshot = None
