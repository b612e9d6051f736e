"""Token usage as a run adds it up: the provider's counts of each answer (and of summaries)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.messages import AIMessage

__all__ = ["add_usage", "sum_usage"]

USAGE_KEYS = ("input_tokens", "output_tokens", "total_tokens")


def sum_usage(total: Mapping[str, int] | None, more: Mapping[str, Any]) -> dict[str, int]:
    """``total`` plus the counts of ``more`` (other keys, and values that are not ints, are left out)."""
    usage = dict(total or {})
    for key, value in more.items():
        if key in USAGE_KEYS and isinstance(value, int):
            usage[key] = usage.get(key, 0) + value
    return usage


def add_usage(total: Mapping[str, int] | None, message: AIMessage) -> dict[str, int]:
    """``total`` plus what the provider reported for one answer."""
    return sum_usage(total, message.usage_metadata or {})
