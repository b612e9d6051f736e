"""A Cisco NX-OS line as the device reads it: IOS's shape, NX-OS's separators and nesting.

NX-OS resolves unique prefixes (the policy's patterns). What it adds to IOS: ``;``
is judged as a separator (the parts as well as the whole), ``>`` redirects output to
a file (a read-only refusal, and rule ``startup_config``/``delete`` patterns see the
words); nested commands: EEM ``action L cli [local] COMMAND`` (and IOS's ``cli
command "..."`` form), ``cli alias name NAME COMMAND``.
"""

from __future__ import annotations

from collections.abc import Sequence

from . import Analysis
from .cli import Dialect, words
from .cli import analyze as analyze_cli
from .ios import SHELLISH, eem_action
from .patterns import parse_word

_ACTION, _CLI, _LOCAL, _ALIAS, _NAME = (parse_word(w) for w in ("ac[tion]", "cl[i]", "loc[al]", "al[ias]", "n[ame]"))


def _nested(words: Sequence[str], head: str) -> list[str]:
    found = eem_action(words, head)
    if found:
        return found
    if len(words) >= 4 and _ACTION.matches(words[0]) and _CLI.matches(words[2]):
        skip = 4 if _LOCAL.matches(words[3]) else 3
        if len(words) > skip:
            return [head.split(None, skip)[skip]]
    if len(words) >= 5 and _CLI.matches(words[0]) and _ALIAS.matches(words[1]) and _NAME.matches(words[2]):
        return [head.split(None, 4)[4]]
    return []


NXOS = Dialect(prefixes=words("do"), nested=_nested, shellish=SHELLISH, separators=";")


def analyze(text: str) -> Analysis:
    return analyze_cli(text, NXOS)
