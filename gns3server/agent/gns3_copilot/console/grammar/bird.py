"""A BIRD ``birdc`` line as birdc reads it: keywords expanded one by one, like birdc itself.

birdc expands each keyword of the command tree to the one it is a unique prefix of
before it sends the line to the daemon (``do`` is ``down``, which shuts BIRD down;
``dis`` is ``disable``; ``d`` alone is ambiguous and nothing is sent). This module
does the same with birdc's own command table, as its ``?`` help prints it on this
machine (``data/bird-commands.txt``, recorded by ``tests/integration/bird_process.py``):
the keywords of the tree come out whole, the rest (protocol names, prefixes,
``"patterns"``, the daemon's own keywords such as ``for`` and ``all``) as typed.
A word that is ambiguous or unknown stops the expansion (birdc refuses the line,
or the daemon's parser does), and so does anything after it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from . import Analysis

DATA_FILE = "bird-commands.txt"
_KEYWORDS = re.compile(r"^(?:[a-z][a-z0-9-]*(?: |$))+")


@dataclass(frozen=True)
class Tree:
    """birdc's keyword tree: each keyword and what may follow it."""

    children: Mapping[str, Tree]

    def expand(self, words: Sequence[str]) -> tuple[str, ...]:
        """``words`` with the keywords birdc would expand, expanded."""
        node, out = self, list[str]()
        for i, word in enumerate(words):
            lowered = word.casefold()
            if lowered in node.children:
                key = lowered
            else:
                matches = [k for k in node.children if k.startswith(lowered)]
                if len(matches) != 1:
                    return (*out, *words[i:])
                key = matches[0]
            out.append(key)
            node = node.children[key]
        return tuple(out)


def read_tree(text: str) -> Tree:
    """The keyword tree of a data file: one command of birdc's help a line, ``#`` comments."""
    root: dict[str, Any] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        keywords = _KEYWORDS.match(line)
        level = root
        for word in (keywords.group(0).split() if keywords else ()):
            level = level.setdefault(word, {})

    def build(level: dict[str, Any]) -> Tree:
        return Tree({word: build(sub) for word, sub in level.items()})

    return build(root)


@functools.cache
def tree() -> Tree:
    """birdc's command tree from the packaged data file, read once per process on first use."""
    return read_tree(resources.files(__package__).joinpath("data", DATA_FILE).read_text("utf-8"))


def analyze(text: str) -> Analysis:
    words = tuple(text.split())
    expanded = tree().expand(words)
    odd = sorted({ch for ch in text if ch in ";|&<>$`\\'"})
    refusals = (f"characters birdc does not need for reading ({' '.join(odd)})",) if odd else ()
    return Analysis((expanded,), (expanded,), refusals)
