"""A Cumulus Linux line as it runs: a bash line on Debian, with NVUE's ``nv`` and NCLU's ``net``.

``nv set ...``, ``nv config apply`` and ``net add ...`` are programs with arguments to the
shell, so :mod:`.linux` reads the line (wrappers, separators, substitutions, ``vtysh -c``)
and the policy's Linux rules apply as well; the Cumulus rules name ``nv`` and ``net``'s
own dangerous verbs. FRR's ``vtysh`` shell itself is the ``frr`` family's.
"""

from __future__ import annotations

from . import Analysis, linux


def analyze(text: str) -> Analysis:
    return linux.analyze(text)
