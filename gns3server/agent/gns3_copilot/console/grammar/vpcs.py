"""A VPCS line: one command, blank-separated words, unique prefixes (``sh ip``, ``q``).

VPCS has no pipes, separators or quoting: ``;``, ``|``, ``>`` and the like are plain
text to it. Read-only mode refuses them all the same (nothing a show command needs),
and ``!`` at the start, VPCS's escape to the host's shell, is left for the
policy's rules to block.
"""

from __future__ import annotations

from . import Analysis

_SPECIAL = set(";|&<>$`\\\"'")


def analyze(text: str) -> Analysis:
    words = tuple(text.split())
    odd = sorted({ch for ch in text if ch in _SPECIAL})
    refusals = (f"characters VPCS does not need for reading ({' '.join(odd)})",) if odd else ()
    return Analysis((words,), (words,), refusals)
