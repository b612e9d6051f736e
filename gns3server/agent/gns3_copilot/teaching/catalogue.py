"""The scenario catalogue: the shipped TOML files and an administrator's, validated when loaded.

Each file holds ``[[scenario]]`` tables (``docs/teaching.md``). :func:`load_catalogue`
reads the shipped directory, then the administrator's (``[Copilot] teaching_dir``),
in a worker thread (TOML parsing and validation are CPU and file work); nothing is
read at import. A file that cannot be used is refused as a whole, with the file, the
entry and the field and why (:class:`ScenarioFileError`), so an administrator's typo
never half-loads; two scenarios with one id are refused too (an administrator's file
may not silently replace a shipped scenario).
"""

from __future__ import annotations

import asyncio
import logging
import random
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ..errors import CopilotError, ErrorKind
from .scenario import LEVELS, Scenario, ScenarioInvalid, parse_scenario

log = logging.getLogger(__name__)

__all__ = ["SHIPPED", "Catalogue", "ScenarioFileError", "load_catalogue", "read_catalogue"]

SHIPPED = Path(__file__).parent / "scenarios"
MAX_FILE_BYTES = 1_000_000


class ScenarioFileError(CopilotError, ValueError):
    """A scenario file that cannot be used: which file, which entry, which field, and why."""

    kind = ErrorKind.INVALID
    code = "scenario_file_invalid"

    def __init__(self, path: Path | str, entry: str, field: str, why: str) -> None:
        super().__init__(f"{path}: scenario {entry}: {field}: {why}")
        self.path, self.entry, self.field, self.why = str(path), entry, field, why


class ScenarioNotFoundError(CopilotError):
    kind = ErrorKind.NOT_FOUND
    code = "scenario_not_found"


@dataclass(frozen=True)
class Catalogue:
    """Every scenario known, by id (read-only once loaded)."""

    scenarios: MappingProxyType[str, Scenario]
    sources: MappingProxyType[str, str]
    """Scenario id -> the file it came from."""

    def get(self, scenario_id: str) -> Scenario:
        found = self.scenarios.get(scenario_id)
        if found is None:
            raise ScenarioNotFoundError(f"No scenario {scenario_id!r} in the catalogue")
        return found

    def by_level(self, level: str) -> list[Scenario]:
        if level not in LEVELS:
            raise ValueError(f"level: {level!r} is not one of {', '.join(LEVELS)}")
        return [s for s in self.scenarios.values() if s.level == level]

    def draw(self, level: str, count: int, seed: int | str, eligible: Iterable[Scenario] | None = None) -> list[Scenario]:
        """``count`` distinct scenarios of ``level`` drawn with ``seed``: the same seed, the same faults."""
        pool = sorted(eligible if eligible is not None else self.by_level(level), key=lambda s: s.id)
        pool = [s for s in pool if s.level == level]
        if count < 1 or count > len(pool):
            raise ValueError(f"count: {count} scenarios of level {level} asked, {len(pool)} fit this project")
        return random.Random(f"{seed}").sample(pool, count)


def _entry_name(index: int, table: Any) -> str:
    given = table.get("id") if isinstance(table, dict) else None
    return f"#{index + 1}" + (f" ({given})" if isinstance(given, str) else "")


def read_file(path: Path) -> list[Scenario]:
    """A file's scenarios, or ScenarioFileError saying where and why. Blocking."""
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise ScenarioFileError(path, "-", "file", f"larger than {MAX_FILE_BYTES} bytes")
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioFileError(path, "-", "file", f"cannot be read ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioFileError(path, "-", "file", f"not valid TOML ({exc})") from None
    extra = sorted(set(data) - {"scenario"})
    if extra:
        raise ScenarioFileError(path, "-", extra[0], "unknown top-level key (scenarios are [[scenario]] tables)")
    tables = data.get("scenario")
    if not isinstance(tables, list) or not tables:
        raise ScenarioFileError(path, "-", "scenario", "no [[scenario]] table in the file")
    scenarios = []
    for index, table in enumerate(tables):
        try:
            scenarios.append(parse_scenario(table))
        except ScenarioInvalid as exc:
            raise ScenarioFileError(path, _entry_name(index, table), exc.field, exc.why) from None
    return scenarios


def read_catalogue(directories: Sequence[Path]) -> Catalogue:
    """The scenarios of every ``*.toml`` in ``directories`` (in order, files sorted). Blocking."""
    scenarios: dict[str, Scenario] = {}
    sources: dict[str, str] = {}
    for directory in directories:
        if not directory.is_dir():
            raise ScenarioFileError(directory, "-", "directory", "not a directory")
        for path in sorted(directory.glob("*.toml")):
            for scenario in read_file(path):
                if scenario.id in scenarios:
                    raise ScenarioFileError(path, scenario.id, "id", f"already defined in {sources[scenario.id]}")
                scenarios[scenario.id] = scenario
                sources[scenario.id] = str(path)
    return Catalogue(MappingProxyType(scenarios), MappingProxyType(sources))


async def load_catalogue(extra_dir: Path | None = None) -> Catalogue:
    """The shipped scenarios and the administrator's (``extra_dir``), read in a worker thread."""
    directories = [SHIPPED, *([extra_dir] if extra_dir is not None else [])]
    catalogue = await asyncio.to_thread(read_catalogue, directories)
    log.info("Teaching catalogue: %d scenarios from %s", len(catalogue.scenarios), ", ".join(map(str, directories)))
    return catalogue
