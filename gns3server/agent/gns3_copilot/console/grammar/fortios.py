"""A Fortinet FortiOS line as the device reads it: words, ``| grep``, commands that hold commands.

FortiOS takes unique prefixes (``exe reboot``, ``sh sys int``, ``diag sys top``; left to
the policy's patterns). ``|`` pipes into ``grep`` only. Values that are CLI scripts are
judged as commands too: ``set script "..."`` (``config system auto-script``) and ``set
command "..."`` (``config system alias``).
"""

from __future__ import annotations

from collections.abc import Sequence

from . import Analysis
from .cli import Dialect
from .cli import analyze as analyze_cli
from .ios import QUOTED, SHELLISH
from .patterns import parse_word

_SET, _SCRIPT, _COMMAND = parse_word("se[t]"), parse_word("scr[ipt]"), parse_word("com[mand]")


def _nested(words: Sequence[str], head: str) -> list[str]:
    if len(words) >= 3 and _SET.matches(words[0]) and (_SCRIPT.matches(words[1]) or _COMMAND.matches(words[1])):
        quoted = QUOTED.search(head)
        body = quoted.group(1) if quoted else head.split(None, 2)[2]
        # An auto-script holds one command a line ("\n" in the quoted value).
        return [part for part in body.replace("\\n", "\n").splitlines() if part.strip()]
    return []


FORTIOS = Dialect(nested=_nested, shellish=SHELLISH)


def analyze(text: str) -> Analysis:
    return analyze_cli(text, FORTIOS)
