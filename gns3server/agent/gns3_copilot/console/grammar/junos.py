"""A Juniper Junos line as the device reads it: operational or configuration mode.

Junos resolves unique prefixes of every word (``req sys reb`` is ``request system
reboot``; left to the policy's patterns). Prefixes dropped: ``run`` (an operational
command from configuration mode), ``top`` and ``up [N]`` (the same command at another
level of the hierarchy). ``|`` starts a pipe (``| match``, ``| display json``,
``| save FILE``), given as a ``|`` pseudo-command.
"""

from __future__ import annotations

from . import Analysis
from .cli import Dialect, words
from .cli import analyze as analyze_cli
from .ios import SHELLISH

JUNOS = Dialect(prefixes=words("run", "top"), numbered_prefixes=words("up"), shellish=SHELLISH)


def analyze(text: str) -> Analysis:
    return analyze_cli(text, JUNOS)
