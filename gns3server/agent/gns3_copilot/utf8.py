"""Text that can be stored and sent back: valid UTF-8, which a lone surrogate is not.

JSON may spell half of a UTF-16 pair (``"\\ud83d"``) and Python's parser gives
back a string holding it. Such a string can be kept in memory, even stored (as
JSON, which escapes it), but never encoded as UTF-8: SQLite refuses it, and so
does every JSON response that contains it. Accepted once, it makes every later
answer that shows it fail, a list of configs included, for good.

So every text a client sends that we store is checked where it enters:
:data:`UTF8Text` is the pydantic type of the API's text fields (a 422 naming
the field), :func:`first_unencodable` finds such a string anywhere in a JSON
value (an LLM config, an MCP message) and says where. :func:`repaired` turns a
value stored by an older version into one that can be shown (each lone
surrogate becomes U+FFFD), so that what is already stored cannot break a list.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from pydantic import AfterValidator

__all__ = ["NOT_UTF8", "UTF8Text", "check_utf8", "first_unencodable", "is_utf8", "repaired", "shown_key"]

NOT_UTF8 = "must be valid UTF-8 text (it holds half of a UTF-16 surrogate pair)"


def is_utf8(text: str) -> bool:
    """Whether ``text`` can be encoded as UTF-8 (it holds no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_utf8(text: str) -> str:
    """``text`` if it is valid UTF-8, else ValueError (pydantic names the field)."""
    if not is_utf8(text):
        raise ValueError(NOT_UTF8)
    return text


UTF8Text = Annotated[str, AfterValidator(check_utf8)]
"""A text field of a request body: refused (422 naming the field) unless it is valid UTF-8."""


def shown_key(key: Any) -> str:
    """A key as it may be shown in an error (its lone surrogates escaped)."""
    return str(key).encode("utf-8", "backslashreplace").decode("utf-8")


def first_unencodable(value: Any, path: str = "") -> str | None:
    """Where in ``value`` (a JSON value) the first string that is not valid UTF-8 is, keys included:
    ``name``, ``tools[2]``, ``params.arguments.commands[0]``; ``""`` for ``value`` itself; None if none."""
    if isinstance(value, str):
        return None if is_utf8(value) else path
    if isinstance(value, Mapping):
        for key, item in value.items():
            here = f"{path}.{shown_key(key)}" if path else shown_key(key)
            if isinstance(key, str) and not is_utf8(key):
                return here
            found = first_unencodable(item, here)
            if found is not None:
                return found
        return None
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        for index, item in enumerate(value):
            found = first_unencodable(item, f"{path}[{index}]")
            if found is not None:
                return found
    return None


def repaired(value: Any) -> Any:
    """``value`` with every lone surrogate of its strings (keys included) replaced by U+FFFD."""
    if isinstance(value, str):
        return value if is_utf8(value) else "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in value)
    if isinstance(value, Mapping):
        return {repaired(k): repaired(v) for k, v in value.items()}
    if isinstance(value, list):
        return [repaired(item) for item in value]
    return value
