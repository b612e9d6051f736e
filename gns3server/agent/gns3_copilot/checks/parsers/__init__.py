"""Per-family parsers: a family's answers (:class:`~..state.Reading`) as the aspects of a device's state.

Every parser takes the readings of one aspect, in the order of its family's
commands (``..families``), and returns ``(value, timers)``: the aspect's facts
and what it tells about how long a change may take to show (``ospf_dead``,
``bgp_hold``, in seconds). Output that is not what the command answers raises
ValueError: the aspect is then reported as not read, never guessed.
"""

from __future__ import annotations

import json
from typing import Any

from ..state import Reading

Parsed = tuple[Any, dict[str, float]]


def json_of(reading: Reading) -> Any:
    """A reading's JSON: parsed already by the console layer, or parsed here."""
    if reading.data is not None:
        return reading.data
    text = reading.output.strip()
    if not text:
        raise ValueError(f"{reading.command!r} answered nothing")
    try:
        return json.loads(text)
    except ValueError:
        raise ValueError(f"{reading.command!r} did not answer JSON: {text[:80]!r}") from None


def role_free(state: str) -> str:
    """``Full/DR`` -> ``Full``; ``FULL/  -`` -> ``Full`` (IOS writes states in capitals)."""
    word = state.split("/")[0].strip()
    return word[:1].upper() + word[1:].lower() if word.isupper() else word
