"""An Arista EOS line as the device reads it: IOS's shape, EOS's own nested commands.

EOS resolves unique prefixes like IOS (left to the policy's patterns). A leading
``do`` is dropped. Commands that make the device run others later are judged for
those too: ``alias NAME COMMAND`` (EOS's alias has no mode word, IOS's has: both
readings are judged), ``schedule NAME ... command COMMAND``, an event handler's
``action bash COMMAND`` (a shell command: blocked with the shell itself).
"""

from __future__ import annotations

from collections.abc import Sequence

from . import Analysis
from .cli import Dialect, words
from .cli import analyze as analyze_cli
from .ios import SHELLISH
from .patterns import parse_word

_ALIAS, _SCHEDULE, _COMMAND = parse_word("al[ias]"), parse_word("sch[edule]"), parse_word("com[mand]")


def _nested(words: Sequence[str], head: str) -> list[str]:
    if len(words) >= 3 and _ALIAS.matches(words[0]):
        found = [head.split(None, 2)[2]]
        return found + ([head.split(None, 3)[3]] if len(words) >= 4 else [])
    if len(words) >= 3 and _SCHEDULE.matches(words[0]):
        for i, word in enumerate(words[2:], 2):
            if _COMMAND.matches(word) and i + 1 < len(words):
                return [head.split(None, i + 1)[i + 1]]
    return []


EOS = Dialect(prefixes=words("do"), nested=_nested, shellish=SHELLISH)


def analyze(text: str) -> Analysis:
    return analyze_cli(text, EOS)
