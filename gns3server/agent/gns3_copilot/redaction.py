"""Keeping API keys out of logs, events and stored errors.

A provider's error text may quote the key it was sent (OpenAI: "Incorrect API
key provided: sk-..."), and HTTP client logs may print URLs or headers. Text
bound for a log line or storage goes through :func:`scrub`, which replaces

* every key registered with :data:`SECRETS` (the keys of the runs in progress:
  a configured key need not look like a key to be hidden), and
* anything shaped like a key or a credential: ``sk-...`` keys (OpenAI,
  Anthropic, DeepSeek...), Google ``AIza...`` keys, ``Bearer`` tokens,
  ``api_key=...`` / ``"api-key": "..."`` pairs, ``user:password@`` in URLs and
  ``?token=`` (a GNS3 login in an access log line),

with ``[REDACTED]``. :func:`install_log_scrubber` makes every log record of the
process pass through it (message, arguments, traceback), whatever its logger or
level, so a library's request log or a traceback of a provider error cannot
carry a key to the server log.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import traceback
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from typing import Any

__all__ = ["MASK", "SECRETS", "SecretRegistry", "install_log_scrubber", "scrub"]

MASK = "[REDACTED]"
MIN_SECRET_CHARS = 4
"""Shorter registered secrets are not searched for (they would mangle every log line)."""

_KEY_SHAPES = re.compile(
    r"""
      \bsk-[A-Za-z0-9_\-*]{8,}                      # sk-..., sk-proj-..., sk-ant-... (masked ones too)
    | \bAIza[0-9A-Za-z_\-]{20,}                      # Google API keys
    | \b(?:xox[abposr]|ghp|gho|ghs|github_pat|glpat)[-_][A-Za-z0-9_\-]{10,}
    | (?<=\bBearer\ )[A-Za-z0-9._~+/=\-]{6,}          # Authorization: Bearer <token>
    | (?<=\bBasic\ )[A-Za-z0-9+/=]{6,}                # Authorization: Basic <base64>
    | (?<=://)[^/\s@'"<>]+(?=@)                       # user:password@ (or token@) in a URL
    | (?i:(?<=api[_-]key)|(?<=apikey)|(?<=x-api-key)|(?<=access_token)|(?<=password)|(?<=secret)|(?<=[?&]token))
      (["']?\s*[:=]\s*["']?)(?!\[REDACTED\])[^\s"'&,;}]{4,}   # key=value, "api_key": "value"
    """,
    re.VERBOSE,
)


# Every shape above contains one of these (lower case); text without any is left as is
# without running the expression: most log lines, at a fraction of the cost.
_SHAPE_HINTS = ("sk-", "aiza", "xox", "ghp_", "gho_", "ghs_", "github_pat", "glpat", "bearer ", "basic ", "@",
                "key", "token", "password", "secret")


def _may_hold_shape(text: str) -> bool:
    lowered = text.lower()
    return any(hint in lowered for hint in _SHAPE_HINTS)


def _mask_shape(match: re.Match[str]) -> str:
    separator = match.group(1)
    return f"{separator}{MASK}" if separator is not None else MASK


class SecretRegistry:
    """The secrets in use right now (the API keys of running runs), counted so that
    two runs with the same key can end in any order."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        # (the secrets, longest first; their pattern): replaced whole, so readers in other
        # threads never see a pattern and a list that disagree.
        self._current: tuple[tuple[str, ...], re.Pattern[str] | None] = ((), None)

    @contextlib.contextmanager
    def registered(self, *secrets: str | None) -> Iterator[None]:
        """Hide ``secrets`` from every scrubbed text while the block runs."""
        kept = [s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET_CHARS]
        self._change(kept, +1)
        try:
            yield
        finally:
            self._change(kept, -1)

    def _change(self, secrets: list[str], step: int) -> None:
        if not secrets:
            return
        with self._lock:
            for secret in secrets:
                self._counts[secret] += step
                if self._counts[secret] <= 0:
                    del self._counts[secret]
            # Longest first, so that a key containing another is hidden whole.
            ordered = tuple(sorted(self._counts, key=len, reverse=True))
            self._current = (ordered, re.compile("|".join(map(re.escape, ordered))) if ordered else None)

    def scrub(self, text: str) -> str:
        secrets, pattern = self._current
        if pattern is None or not any(secret in text for secret in secrets):
            return text
        return pattern.sub(MASK, text)


SECRETS = SecretRegistry()
"""The process's registry: runs register their key here (see ``service/copilot.py``)."""


def scrub(text: str, *extra: str | None) -> str:
    """``text`` with registered secrets, ``extra`` ones and key-shaped strings replaced by ``[REDACTED]``."""
    for secret in extra:
        if isinstance(secret, str) and len(secret) >= MIN_SECRET_CHARS:
            text = text.replace(secret, MASK)
    text = SECRETS.scrub(text)
    return _KEY_SHAPES.sub(_mask_shape, text) if _may_hold_shape(text) else text


# ------------------------------------------------------------------ logging


def _scrub_record(record: logging.LogRecord) -> None:
    """Scrub the record's message, arguments and traceback in place.

    A clean record is left as it is. Otherwise arguments stay arguments when they
    can (some formatters, uvicorn's access log among them, read ``record.args``);
    a record whose rendering would still carry a secret is rendered now, scrubbed.
    """
    try:
        message = record.getMessage()
    except Exception:  # noqa: BLE001  # a bad format string: logging reports it when it formats the record
        message = None
    if message is not None and scrub(message) != message:
        if isinstance(record.msg, str):
            record.msg = scrub(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(_scrub_arg(a) for a in record.args)
        elif isinstance(record.args, Mapping):
            record.args = {k: _scrub_arg(v) for k, v in record.args.items()}
        try:
            rendered = record.getMessage()
        except Exception:  # noqa: BLE001  # as above: a log filter never raises
            rendered = message
        if scrub(rendered) != rendered or rendered == message:
            record.msg, record.args = scrub(message), None
    if record.exc_info and not record.exc_text:
        record.exc_text = scrub("".join(traceback.format_exception(*record.exc_info)).rstrip("\n"))
    if record.stack_info:
        record.stack_info = scrub(record.stack_info)


def _scrub_arg(value: Any) -> Any:
    """A log argument as is, unless its text carries a secret (then that text, scrubbed)."""
    if isinstance(value, (int, float, type(None))):
        return value
    try:
        text = str(value)
    except Exception:  # noqa: BLE001  # any object's __str__ may fail: a log filter never raises
        return value
    cleaned = scrub(text)
    return value if cleaned == text else cleaned


_installed_lock = threading.Lock()
_installed: Callable[..., logging.LogRecord] | None = None


def install_log_scrubber() -> None:
    """Scrub every log record of the process from now on (idempotent).

    A record factory rather than a handler filter: it sees every record, whichever
    logger and handler it goes to, including handlers configured after this call.
    """
    global _installed
    with _installed_lock:
        if _installed is not None and logging.getLogRecordFactory() is _installed:
            return
        previous = logging.getLogRecordFactory()

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            _scrub_record(record)
            return record

        logging.setLogRecordFactory(factory)
        _installed = factory
