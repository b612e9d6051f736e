"""A network OS command line as the device reads it: words, prefixes, ``|`` modifiers, nesting.

The CLIs of routers and switches (IOS and its cousins EOS, NX-OS, IOS-XR; Junos, VRP,
SR Linux, FortiOS) share one shape: blank-separated words, abbreviations left as typed
for the policy's patterns to resolve (``wr[ite]``), ``|`` starting an output modifier
or pipe, double quotes grouping words. A :class:`Dialect` says what one CLI adds:

- ``prefixes``: words a line may start with that only say where the rest runs
  (IOS ``do``, Junos ``run``/``top``/``up N``, IOS-XR ``admin``): dropped, any number of times;
- ``nested``: commands the line makes the device run later (EEM, aliases, schedules),
  each judged as a line of its own (depth-limited);
- ``shellish``: characters read-only mode refuses (what some CLI of the family reads as
  separators, redirections or substitutions);
- ``separators``: characters some CLI of the family splits a line at (NX-OS ``;``): the
  parts are judged too, besides the whole line.

An output modifier comes as a ``|`` pseudo-command (``| include x``). A ``|`` inside
double quotes is judged both ways for danger (quotes group on some CLIs and commands
only); read-only mode takes the quoted reading only when the quotes are balanced; a
regular expression holding ``|`` unquoted (``include a|b``) is judged as if ``b``
started another modifier: stricter, never looser.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from . import Analysis
from .patterns import Word, parse_word

_MAX_DEPTH = 4

Nested = Callable[[Sequence[str], str], list[str]]


def _no_nested(words: Sequence[str], head: str) -> list[str]:
    return []


@dataclass(frozen=True)
class Dialect:
    """What one CLI adds to the common shape (see the module docstring)."""

    prefixes: tuple[Word, ...] = ()
    # Prefixes followed by a number that belongs to them (Junos "up 2 set ...").
    numbered_prefixes: tuple[Word, ...] = ()
    nested: Nested = _no_nested
    shellish: re.Pattern[str] | None = None
    separators: str = ""


def words(*patterns: str) -> tuple[Word, ...]:
    return tuple(parse_word(p) for p in patterns)


def analyze(text: str, dialect: Dialect) -> Analysis:
    """The commands ``text`` runs, and its head and modifiers as stages, in ``dialect``."""
    commands: list[tuple[str, ...]] = []
    stages = _line(text, dialect, commands, depth=0)
    for part in split(text, dialect.separators) if dialect.separators else ():
        _line(part, dialect, commands, depth=1)
    refusals: tuple[str, ...] = ()
    if dialect.shellish is not None:
        odd = sorted({m.group(0) for m in dialect.shellish.finditer(text)})
        if odd:
            refusals = (f"characters some CLIs read as separators, redirections or substitutions ({' '.join(odd)})",)
    return Analysis(tuple(dict.fromkeys(commands)), stages, refusals)


def split(text: str, at: str, respect_quotes: bool = True) -> list[str]:
    """``text`` split at any character of ``at`` outside double quotes (or everywhere)."""
    parts: list[str] = []
    current: list[str] = []
    quoted = False
    for ch in text:
        if ch == '"' and respect_quotes:
            quoted = not quoted
        if ch in at and not quoted:
            parts.append("".join(current))
            current = []
            continue
        current.append(ch)
    parts.append("".join(current))
    return parts


def _strip_prefixes(words: list[str], head: str, dialect: Dialect) -> tuple[list[str], str]:
    """Drop the leading words that only say where the rest runs."""
    while words:
        if any(p.matches(words[0]) for p in dialect.prefixes):
            count = 1
        elif any(p.matches(words[0]) for p in dialect.numbered_prefixes):
            count = 2 if len(words) > 1 and words[1].isdigit() else 1
        else:
            break
        words = words[count:]
        parts = head.split(None, count)
        head = parts[count] if len(parts) > count else ""
    return words, head


def _line(text: str, dialect: Dialect, commands: list[tuple[str, ...]], depth: int) -> tuple[tuple[str, ...], ...]:
    """Record what ``text`` runs into ``commands``; return its head and modifiers."""
    readings = [split(text, "|")] if text.count('"') % 2 == 0 else []
    readings.append(split(text, "|", respect_quotes=False))
    stages: list[tuple[str, ...]] = []
    for reading in readings:
        head, *modifiers = reading
        found_words, head = _strip_prefixes(head.split(), head, dialect)
        found = [tuple(found_words)] + [tuple(m.split()) for m in modifiers]
        stages = stages or found
        commands.append(found[0])
        commands.extend(("|", *stage) for stage in found[1:])
        if depth < _MAX_DEPTH:
            for nested in dialect.nested(found_words, head):
                _line(nested, dialect, commands, depth + 1)
        else:
            commands.append(("$nested-too-deep",))
    return tuple(stages)
