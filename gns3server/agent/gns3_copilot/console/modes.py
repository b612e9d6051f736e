"""Privilege levels and commits: what a :class:`~.drivers.Driver` holds for a CLI with modes.

A :class:`Level` is one mode of a CLI (user exec, privileged exec, configuration, a
configuration session): its prompt, the level below it, and the commands that climb to it
and go back. The levels form a tree through ``previous``; :func:`path` is the commands
from one level to another, :func:`level_at` the level whose prompt ends what a console
printed. A :class:`Commit` says how the CLI turns a candidate configuration into the
running one (and back by itself, for a confirmed commit); :class:`SafeMode` is
RouterOS's undo-if-the-session-is-lost. All of it is data: the session and the config
transaction (``session.py``, ``transaction.py``) apply it the same way for every family.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

# Escape sequences a console may mix into a prompt (colours, cursor moves); scrapli strips
# the same kinds before matching (scrapli/channel/base_channel.py, ANSI_ESCAPE_PATTERN).
_ANSI = re.compile(r"\x1b(?:\[[0-9;?]*[@-~]|\][^\x07]*\x07|[78ME])")
TAIL = 2048
"""How much of the end of the output a prompt is looked for in (the longest prompt is well under it)."""


@dataclass(frozen=True)
class Level:
    """A privilege level: its prompt, and how to reach it from the level before it and go back."""

    name: str
    pattern: str  # the library's own regular expression (re.M | re.I, on text without CRs)
    prompt: re.Pattern[str]  # the same, anchored at the end of the output read so far
    previous: str = ""  # the level below ("": the lowest)
    escalate: str = ""  # typed at ``previous`` to get here
    deescalate: str = ""  # typed here to go back to ``previous``
    escalate_auth: bool = False  # escalating may ask for a password (the enable password)
    escalate_prompt: str = ""
    not_contains: tuple[str, ...] = ()

    def match(self, tail: str) -> str | None:
        """The prompt that ends ``tail`` (CRs removed), if it is this level's."""
        found = self.prompt.search(tail)
        if found is None or any(word in found.group(0) for word in self.not_contains):
            return None
        return found.group(0)


def level_at(levels: Sequence[Level], output: str) -> tuple[Level, str] | None:
    """The level whose prompt ends ``output`` (CRs and escape codes ignored), and the prompt."""
    tail = _ANSI.sub("", output[-TAIL:]).replace("\r", "")
    for level in levels:
        prompt = level.match(tail)
        if prompt is not None:
            return level, prompt
    return None


def _chain(levels: Sequence[Level], name: str) -> list[Level]:
    """``name``'s level and those below it, down to the lowest."""
    by_name = {level.name: level for level in levels}
    chain: list[Level] = []
    while name:
        if name not in by_name or any(level.name == name for level in chain):
            raise ValueError(f"level: no level {name!r} (known: {', '.join(by_name)})")
        chain.append(by_name[name])
        name = by_name[name].previous
    return chain


def path(levels: Sequence[Level], start: str, target: str) -> list[tuple[str, Level]]:
    """The commands from level ``start`` to level ``target``, each with the level it leads to:
    down with each level's ``deescalate`` to the level both stand on, then up with ``escalate``.

    A ValueError when a step has no command (the CLI cannot be driven there from here)."""
    down, up = _chain(levels, start), _chain(levels, target)
    common = next(level for level in down if level in up) if any(level in up for level in down) else None
    steps: list[tuple[str, Level]] = []
    for level in down:
        if level is common:
            break
        below = next((lv for lv in levels if lv.name == level.previous), None)
        if not level.deescalate or below is None:
            raise ValueError(f"level: no way down from {level.name!r}")
        steps.append((level.deescalate, below))
    climb = up[: up.index(common)] if common is not None else up
    for level in reversed(climb):
        if not level.escalate:
            raise ValueError(f"level: no way up to {level.name!r}")
        steps.append((level.escalate, level))
    return steps


def above(levels: Sequence[Level], level: str, base: str) -> bool:
    """Whether ``level`` is reached from ``base`` by climbing (configuration is above exec)."""
    return level != base and any(lv.name == base for lv in _chain(levels, level))


@dataclass(frozen=True)
class Commit:
    """How a candidate configuration becomes the running one, and how it rolls back by itself.

    ``confirmed`` is a template with ``{minutes}``, ``{seconds}`` or ``{hms}`` (the unit the
    CLI takes): the device reverts unless ``confirm`` is sent before the time is up.
    ``session`` opens a named candidate (``{name}``) where plain config mode applies each
    line at once (EOS, NX-OS: ``configure session {name}``); ``confirm`` and ``abort`` may
    name it too. ``typed``: the commit is part of what the user types (FortiOS's ``end``
    closes a block and applies it): a batch is only aborted when it fails.
    """

    commit: str
    confirmed: str = ""
    confirm: str = ""
    abort: str = ""
    check: str = ""
    session: str = ""
    min_seconds: int = 1  # the shortest rollback timer the CLI accepts
    # What the device prints once a confirmed commit waits for its confirmation.
    pending: str = ""
    typed: bool = False

    def confirmed_command(self, seconds: int, name: str = "") -> str:
        """The command committing with an automatic rollback after ``seconds`` (minutes rounded up)."""
        if not self.confirmed:
            raise ValueError("seconds: this CLI has no confirmed commit")
        if seconds < self.min_seconds:
            raise ValueError(f"seconds: this CLI takes at least {self.min_seconds}")
        hms = f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
        return self.confirmed.format(seconds=seconds, minutes=-(-seconds // 60), hms=hms, name=name)

    def timer_seconds(self, seconds: int) -> int:
        """How long the device waits for the confirmation when asked for ``seconds`` (its unit rounds up)."""
        return -(-seconds // 60) * 60 if "{minutes}" in self.confirmed else max(seconds, self.min_seconds)


@dataclass(frozen=True)
class SafeMode:
    """RouterOS's safe mode: ``key`` takes it and, pressed again, releases it keeping the changes;
    ``undo`` ends the session undoing every change made since it was taken."""

    key: str
    undo: str
    marker: str  # what the prompt shows while it is held
