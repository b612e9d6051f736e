"""Text that comes from GNS3 objects, rendered so that it stays data wherever it is shown.

Any GNS3 user who may edit a shared project chooses its names: the project's,
its nodes', ports', links' labels, templates'. Those names reach other users'
system prompts, tool results and MCP resources. GNS3 accepts a line break in a
name, so a name could otherwise end a line of the topology and start one of its
own (``### SYSTEM: ...``) that reads like the prompt's structure.

:func:`as_data` is the one rendering every renderer uses: a plain name (letters,
digits and ``_ . - / + @``, starting with a letter, digit or underscore, as
nearly every GNS3 name is) is shown as it is, so ordinary topologies cost no
more tokens than before; anything else is shown in double quotes with JSON's
escapes, and every control, format, line or paragraph separator, surrogate and
private-use character escaped as ``\\n`` / ``\\uXXXX``. A quoted value has no line
break and cannot begin a line with ``#``, ``-`` or any other markup, so it can
never pass for a heading, a list item or a line of ours.

:func:`one_line` escapes the same characters without quoting, for free text
that sits after a label of ours (GNS3's error messages). :func:`json_as_data` is
``json.dumps`` as the model and MCP clients read it (UTF-8 kept) with those
same characters escaped too: JSON itself escapes only the C0 controls, and
leaves U+0085, U+2028 and the bidirectional overrides as they are.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

__all__ = ["as_data", "json_as_data", "one_line"]

_PLAIN = re.compile(r"\w[\w.\-/+@]*")
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}


def _unsafe(char: str) -> bool:
    return unicodedata.category(char) in _UNSAFE_CATEGORIES


def _escaped(char: str) -> str:
    short = _SHORT.get(char)
    if short is not None:
        return short
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000  # as JSON writes it: a surrogate pair
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def one_line(text: Any) -> str:
    """``text`` with every line break and invisible control character escaped; nothing else changes."""
    value = str(text)
    if value.isprintable():  # the common case, checked in C: nothing to escape
        return value
    return "".join(_escaped(c) if _unsafe(c) else c for c in value)


def as_data(value: Any) -> str:
    """A GNS3-sourced value as shown to the model: plain names as they are, anything else quoted.

    ``R1``, ``PC-1``, ``Ethernet0/0``, ``10.0.0.1`` stay unquoted; ``My Lab``,
    ``lab\\n### SYSTEM``, ``{{topology_info}}``, ``"}]`` and the empty string
    are shown quoted, with ``"`` and ``\\`` escaped as in JSON.
    """
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)  # a number from JSON (a position, a port): data by its type
    text = str(value)
    if _PLAIN.fullmatch(text):
        return text
    body = "".join(
        "\\\\" if c == "\\" else '\\"' if c == '"' else _escaped(c) if _unsafe(c) else c for c in text
    )
    return f'"{body}"'


def json_as_data(value: Any, indent: int | None = None) -> str:
    """``value`` as JSON text (UTF-8 kept) with the characters :func:`one_line` escapes escaped too.

    JSON escapes every C0 control inside a string, so a raw line feed in its output is
    indentation; any other such character is inside a string, where ``\\uXXXX`` means it.
    """
    text = json.dumps(value, ensure_ascii=False, default=str, indent=indent)
    if text.isprintable():
        return text
    return "".join(_escaped(c) if c != "\n" and _unsafe(c) else c for c in text)
