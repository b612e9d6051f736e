"""An IOS-style CLI line as the device reads it: ``do``, output modifiers, nested commands.

Words are separated by blanks; abbreviations are left as typed, for the policy's
patterns (``wr[ite]``: any prefix down to the shortest the device accepts) to
resolve. What this module adds:
- a leading ``do`` or ``do-exec`` (exec commands from configuration mode) is dropped;
- ``|`` starts an output modifier (``| include x``), given as a ``|``
  pseudo-command; an unquoted regular expression holding one (``include a|b``) is
  judged as if it started another modifier (stricter, never looser, whichever way
  the device reads it);
- commands that define or schedule other commands are judged for those too:
  EEM ``action <label> cli command "<cmd>"``, kron's ``cli <cmd>`` and
  ``alias <mode> <name> <cmd>``. An EEM command holding a ``$variable`` is
  given as ``$...``: what it runs is only known when the applet runs.
"""

from __future__ import annotations

import re

from . import Analysis
from .patterns import parse_word

_ACTION, _CLI, _COMMAND, _ALIAS = parse_word("ac[tion]"), parse_word("cl[i]"), parse_word("com[mand]"), parse_word("al[ias]")
_MAX_DEPTH = 4
_QUOTED = re.compile(r'"([^"]*)"')
# What some CLIs of the family read as separators, redirections or substitutions
# (NX-OS, run by the same driver, takes "show run > bootflash:x"); IOS itself reads
# them as text. A "$" ending a regular expression is fine.
_SHELLISH = re.compile(r"[;<>&`]|\$[({A-Za-z_]")


def analyze(text: str) -> Analysis:
    """The commands ``text`` runs on an IOS-style CLI, and its head and modifiers as stages."""
    commands: list[tuple[str, ...]] = []
    stages = _line(text, commands, depth=0)
    odd = sorted({m.group(0) for m in _SHELLISH.finditer(text)})
    refusals = (f"characters some CLIs read as separators, redirections or substitutions ({' '.join(odd)})",) if odd else ()
    return Analysis(tuple(dict.fromkeys(commands)), stages, refusals)


def _segments(text: str, respect_quotes: bool = True) -> list[str]:
    """Split at ``|`` outside double quotes (or at every ``|``)."""
    parts: list[str] = []
    current: list[str] = []
    quoted = False
    for ch in text:
        if ch == '"' and respect_quotes:
            quoted = not quoted
        if ch == "|" and not quoted:
            parts.append("".join(current))
            current = []
            continue
        current.append(ch)
    parts.append("".join(current))
    return parts


def _line(text: str, commands: list[tuple[str, ...]], depth: int) -> tuple[tuple[str, ...], ...]:
    """Record what ``text`` runs into ``commands``; return its head and modifiers.

    Quotes only group on some CLIs and in some commands: both readings (``|``
    inside quotes splitting or not) are judged for danger; read-only mode goes by
    the quoted reading only when the quotes are balanced.
    """
    readings = [_segments(text)] if text.count('"') % 2 == 0 else []
    readings.append(_segments(text, respect_quotes=False))
    stages: list[tuple[str, ...]] = []
    for reading in readings:
        head, *modifiers = reading
        words = head.split()
        while words and words[0].casefold() in ("do", "do-exec"):
            words = words[1:]
            head = head.split(None, 1)[1] if len(head.split(None, 1)) > 1 else ""
        found = [tuple(words)] + [tuple(m.split()) for m in modifiers]
        stages = stages or found
        commands.append(found[0])
        commands.extend(("|", *stage) for stage in found[1:])
        if depth < _MAX_DEPTH:
            for nested in _nested(words, head):
                _line(nested, commands, depth + 1)
        else:
            commands.append(("$nested-too-deep",))
    return tuple(stages)


def _nested(words: list[str], head: str) -> list[str]:
    """Commands the line makes the device run later (EEM, kron, alias)."""
    if len(words) >= 4 and _ACTION.matches(words[0]) and _CLI.matches(words[2]) and _COMMAND.matches(words[3]):
        quoted = _QUOTED.search(head)
        nested = quoted.group(1) if quoted else " ".join(words[4:])
        return ["$" + nested] if "$" in nested else [nested]
    if len(words) >= 2 and words[0].casefold() == "cli":
        return [head.split(None, 1)[1]]
    if len(words) >= 4 and _ALIAS.matches(words[0]):
        return [head.split(None, 3)[3]]
    return []
