"""A Huawei VRP line as the device reads it: words, ``|`` modifiers.

VRP abbreviates any unique prefix ("key word fuzzy match": ``dis cur``, ``sys``; left
to the policy's patterns). ``|`` starts a modifier (``| include``, ``| begin``).
"""

from __future__ import annotations

from . import Analysis
from .cli import Dialect
from .cli import analyze as analyze_cli
from .ios import SHELLISH

VRP = Dialect(shellish=SHELLISH)


def analyze(text: str) -> Analysis:
    return analyze_cli(text, VRP)
