"""The published JSON Schema of an LLM config (``llm_config.schema.json``, next to this module).

It is the one source of every field's type and range: the validator (``config.py``)
checks whole configs against it, and the context manager reads the ranges of the
fields it takes (:func:`field_range`) instead of writing them again. Read once,
from the package's own data (no network).
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

__all__ = ["SCHEMA_RESOURCE", "field_range", "llm_config_schema", "schema_text"]

SCHEMA_RESOURCE = "llm_config.schema.json"


@functools.cache
def schema_text() -> str:
    return resources.files(__package__).joinpath(SCHEMA_RESOURCE).read_text(encoding="utf-8")


def llm_config_schema() -> dict[str, Any]:
    """The published JSON Schema (a fresh copy, so callers may embed or modify it)."""
    return json.loads(schema_text())


@functools.cache
def field_range(name: str) -> tuple[float, float]:
    """A numeric field's ``minimum`` and ``maximum``, both included, as the schema states them."""
    field = llm_config_schema()["properties"][name]
    return field["minimum"], field["maximum"]
