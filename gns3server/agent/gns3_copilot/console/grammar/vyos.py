"""A VyOS line as it runs: a bash line (op and configuration mode are both vbash).

Everything :mod:`.linux` reads holds (separators, substitutions, wrappers such as
``sudo``; VyOS's own commands ``show``, ``set``, ``commit`` are programs to it), and the
policy's Linux rules apply to VyOS as well. What VyOS adds: ``run`` runs an operational
command from configuration mode, judged as that command too. VyOS completes unique
prefixes of its own commands (``sh int``, ``reb``; left to the policy's patterns).
"""

from __future__ import annotations

from . import Analysis, linux
from .patterns import parse_word

_RUN = parse_word("run")


def analyze(text: str) -> Analysis:
    analysis = linux.analyze(text)
    extra = tuple(words[1:] for words in analysis.commands if len(words) > 1 and _RUN.matches(words[0]))
    return Analysis(tuple(dict.fromkeys(analysis.commands + extra)), analysis.stages, analysis.refusals)
