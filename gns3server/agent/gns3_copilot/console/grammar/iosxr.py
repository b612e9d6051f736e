"""A Cisco IOS-XR line as the device reads it: IOS's shape, XR's prefixes and aliases.

XR resolves unique prefixes (the policy's patterns). ``do`` (exec commands from
configuration) and ``admin`` (the admin plane's commands, ``admin reload location all``)
are prefixes: the rest is judged as the command. ``alias NAME COMMAND`` is judged for
its command. ``run`` (a shell command, or the shell) is left whole for the rules.
"""

from __future__ import annotations

from collections.abc import Sequence

from . import Analysis
from .cli import Dialect, words
from .cli import analyze as analyze_cli
from .ios import SHELLISH
from .patterns import parse_word

_ALIAS = parse_word("al[ias]")


def _nested(words: Sequence[str], head: str) -> list[str]:
    if len(words) >= 3 and _ALIAS.matches(words[0]):
        return [head.split(None, 2)[2]]
    return []


IOSXR = Dialect(prefixes=words("do", "adm[in]"), nested=_nested, shellish=SHELLISH)


def analyze(text: str) -> Analysis:
    return analyze_cli(text, IOSXR)
