"""The console policy corpus (tests/unit/data/console_policy_corpus.tsv), read once for the tests.

Each line gives a CLI family, the expected verdict and the command: ``read``
(allowed in read-only and config mode), ``config`` (refused in read-only mode,
allowed in config mode), ``blocked:<rule>`` (blocked in every mode by that rule),
``incomplete`` (blocked in every mode: the device would read on into the next line).
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

CORPUS = Path(__file__).parent / "data" / "console_policy_corpus.tsv"


class Entry(NamedTuple):
    line: int
    family: str
    verdict: str
    command: str


def corpus() -> list[Entry]:
    entries = []
    for number, line in enumerate(CORPUS.read_text("utf-8").splitlines(), 1):
        if line.strip() and not line.startswith("#"):
            family, verdict, command = line.split("\t", 2)
            entries.append(Entry(number, family, verdict, command))
    return entries
