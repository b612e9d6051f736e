"""An IOS-style CLI line as the device reads it: ``do``, output modifiers, nested commands.

The common shape (words, abbreviations left for the policy's patterns, ``|``
modifiers, quotes) is :mod:`.cli`'s. What IOS adds:
- a leading ``do`` or ``do-exec`` (exec commands from configuration mode) is dropped;
- commands that define or schedule other commands are judged for those too:
  EEM ``action <label> cli command "<cmd>"``, kron's ``cli <cmd>`` and
  ``alias <mode> <name> <cmd>``. An EEM command holding a ``$variable`` is
  given as ``$...``: what it runs is only known when the applet runs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from . import Analysis
from .cli import Dialect, words
from .cli import analyze as analyze_cli
from .patterns import parse_word

_ACTION, _CLI, _COMMAND, _ALIAS = parse_word("ac[tion]"), parse_word("cl[i]"), parse_word("com[mand]"), parse_word("al[ias]")
QUOTED = re.compile(r'"([^"]*)"')
# What some CLIs of the family read as separators, redirections or substitutions
# (NX-OS, run by the same driver, takes "show run > bootflash:x"); IOS itself reads
# them as text. A "$" ending a regular expression is fine.
SHELLISH = re.compile(r"[;<>&`]|\$[({A-Za-z_]")


def eem_action(words: Sequence[str], head: str) -> list[str]:
    """The command an EEM ``action <label> cli command "<cmd>"`` runs (``$...`` when it holds a variable)."""
    if len(words) >= 4 and _ACTION.matches(words[0]) and _CLI.matches(words[2]) and _COMMAND.matches(words[3]):
        quoted = QUOTED.search(head)
        nested = quoted.group(1) if quoted else " ".join(words[4:])
        return ["$" + nested] if "$" in nested else [nested]
    return []


def _nested(words: Sequence[str], head: str) -> list[str]:
    """Commands the line makes the device run later (EEM, kron, alias)."""
    found = eem_action(words, head)
    if found:
        return found
    if len(words) >= 2 and words[0].casefold() == "cli":
        return [head.split(None, 1)[1]]
    if len(words) >= 4 and _ALIAS.matches(words[0]):
        return [head.split(None, 3)[3]]
    return []


IOS = Dialect(prefixes=words("do", "do-exec"), nested=_nested, shellish=SHELLISH)


def analyze(text: str) -> Analysis:
    """The commands ``text`` runs on an IOS-style CLI, and its head and modifiers as stages."""
    return analyze_cli(text, IOS)
