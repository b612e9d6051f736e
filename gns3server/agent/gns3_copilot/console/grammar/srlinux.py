"""A Nokia SR Linux line as the device reads it: words, ``|`` into formatters and Linux filters.

``|`` pipes the output into ``as json``/``as table``/``as yaml``, ``filter``, ``more``
or a Linux command (``grep``): each stage is a ``|`` pseudo-command. An alias
(``environment alias NAME "COMMAND"``) is judged for its command.
"""

from __future__ import annotations

from collections.abc import Sequence

from . import Analysis
from .cli import Dialect
from .cli import analyze as analyze_cli
from .ios import QUOTED, SHELLISH
from .patterns import parse_word

_ENVIRONMENT, _ALIAS = parse_word("env[ironment]"), parse_word("al[ias]")


def _nested(words: Sequence[str], head: str) -> list[str]:
    if len(words) >= 4 and _ENVIRONMENT.matches(words[0]) and _ALIAS.matches(words[1]):
        quoted = QUOTED.search(head)
        return [quoted.group(1) if quoted else head.split(None, 3)[3]]
    return []


SRLINUX = Dialect(nested=_nested, shellish=SHELLISH)


def analyze(text: str) -> Analysis:
    return analyze_cli(text, SRLINUX)
