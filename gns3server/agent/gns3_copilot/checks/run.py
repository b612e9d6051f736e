"""Checks run against devices: read, judge, read again until every check is decided.

The I/O is the caller's: ``read(device, commands)`` runs read-only commands on one
device (through the console policy and the audit) and returns their
:class:`~.state.Reading`\\ s. :func:`run_checks` reads each device's aspects its
checks need, judges them (:func:`~.evaluate.evaluate`, in a worker thread: parsing
is CPU work), and while a check is undecided (it may take ``within`` seconds to come
true, or must ``hold``) reads again every ``interval`` seconds, until every check is
decided or the longest wait has passed. Devices are read concurrently.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .evaluate import Timeline, Verdict, commands_for, evaluate, needed_aspects, state_of
from .model import Check
from .state import DeviceState, Reading

log = logging.getLogger(__name__)

__all__ = ["CheckReport", "Read", "run_checks"]

Read = Callable[[str, list[str]], Awaitable[list[Reading]]]
INTERVAL = 1.0
"""Seconds between two readings of a device whose checks are still open (the reading itself takes time too)."""


@dataclass
class CheckReport:
    """Every check's verdict, and each device's last state read."""

    verdicts: list[Verdict]
    states: dict[str, DeviceState] = field(default_factory=dict)
    readings: int = 0

    @property
    def passed(self) -> bool:
        return all(v.passed for v in self.verdicts)

    @property
    def failed(self) -> list[Verdict]:
        return [v for v in self.verdicts if not v.passed]

    def as_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "checks": [v.as_dict() for v in self.verdicts],
                "summary": summary(self.verdicts)}


def summary(verdicts: Sequence[Verdict]) -> str:
    """One line per verdict that did not pass, after a count: what the model and the panel read first."""
    bad = [v for v in verdicts if not v.passed]
    head = f"{len(verdicts) - len(bad)} of {len(verdicts)} checks passed"
    return head + "".join(f"\n{v.status.upper()} {v.check.device}: {v.check.subject()} expected {v.check.expected()},"
                          f" read {v.observed}" for v in bad)


async def run_checks(
    checks: Sequence[Check], families: Mapping[str, str], read: Read, *, start: float | None = None,
    interval: float = INTERVAL, clock: Callable[[], float] = time.time,
) -> CheckReport:
    """Judge ``checks`` on their devices (``families``: device -> CLI family), reading them with ``read``.

    ``start``: when the waits count from (a change's end; default now).
    """
    begun = clock() if start is None else start
    timelines = [Timeline(c, begun) for c in checks]
    by_device: dict[str, list[Timeline]] = {}
    for timeline in timelines:
        by_device.setdefault(timeline.check.device, []).append(timeline)
    states: dict[str, DeviceState] = {}
    counts = {"readings": 0}

    async def follow(device: str, open_: list[Timeline]) -> None:
        family = families[device]
        while True:
            pending = [t for t in open_ if not t.decided]
            if not pending:
                return
            aspects = needed_aspects(t.check for t in pending)
            commands = commands_for(family, aspects)
            readings = await read(device, commands) if commands else []
            counts["readings"] += 1
            now = clock()
            state = await asyncio.to_thread(state_of, device, family, readings, aspects)
            states[device] = state
            for timeline in pending:
                timeline.add(evaluate(timeline.check, state), now)
            if all(t.decided for t in pending):
                return
            # Still open: wait for the next reading (an interval between readings of a state, not a synchronisation).
            last_deadline = max(t.start + max(t.check.within, 0) + t.check.hold for t in pending if not t.decided)
            if now >= last_deadline + interval:
                return
            await asyncio.sleep(interval)

    await asyncio.gather(*(follow(device, open_) for device, open_ in by_device.items()))
    return CheckReport([t.final() for t in timelines], states, counts["readings"])
