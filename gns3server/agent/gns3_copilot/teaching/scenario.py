"""A teaching scenario as data: the roles it needs, how to break the lab, how to judge it, hints.

A scenario is written once for any project: its commands, checks and hints name
*roles* (``{host}``, ``{r1}``) and *parameters* (``{host_ip}``) in braces; an
assignment binds each role to one of the project's nodes (:mod:`.match`) and may
override the parameters, and :meth:`Scenario.render` fills them in. Validation
(:func:`parse_scenario`) refuses a scenario whose placeholders name nothing, whose
checks would not parse, or whose hints give the fix away (a revert command, or a
value only the fix uses): the hints guide, the student types the fix.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..checks import Check, parse_checks
from ..errors import CopilotError, ErrorKind
from .dns import DNSServer

__all__ = ["FAMILIES", "LEVELS", "RenderedScenario", "Role", "Scenario", "Step", "fix_values", "parse_scenario"]

LEVELS = ("ccna", "ccnp")
"""Exam-like levels: CCNA (addressing, gateways, interfaces, static routes, DNS), CCNP (OSPF, BGP, policy)."""
FAMILIES = ("vpcs", "linux", "frr")
"""The CLI families a role may ask for (the console drivers' names)."""
HINTS = 3
Ident = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,39}$")]
ScenarioId = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_.-]{1,79}$")]
Text = Annotated[str, Field(min_length=1, max_length=1000)]
Command = Annotated[str, Field(min_length=1, max_length=500)]
_VALUE = re.compile(r"\d+(?:\.\d+){1,3}(?:/\d+)?|\d+")


class Role(BaseModel):
    """A part the scenario needs the project to have: a node of ``family``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    family: Literal["vpcs", "linux", "frr"]
    description: str = Field("", max_length=300)


class Step(BaseModel):
    """Commands sent in configuration mode to the node playing ``role``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Ident
    commands: tuple[Command, ...] = Field(min_length=1, max_length=32)


class Scenario(BaseModel):
    """One fault for students to find and fix (see the module's docstring and ``docs/teaching.md``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: ScenarioId
    title: Text
    level: Literal["ccna", "ccnp"]
    topic: Ident
    brief: Text
    """What the student is told: the symptom, never the cause."""
    roles: dict[Ident, Role] = Field(min_length=1, max_length=8)
    params: dict[Ident, Annotated[str, Field(max_length=200)]] = Field(default_factory=dict)
    inject: tuple[Step, ...] = Field(min_length=1, max_length=8)
    revert: tuple[Step, ...] = Field(min_length=1, max_length=8)
    """What restores the lab (the fault's recorded undo: the teacher's, never shown to a student)."""
    checks: tuple[dict[str, Any], ...] = Field(min_length=1, max_length=16)
    """Checks (``checks/``'s JSON form, ``device`` a role) that fail while the fault is there, pass once fixed."""
    hints: tuple[Text, Text, Text]
    """Three levels, vaguest first; none may contain a revert command or a value only the fix uses."""
    time_limit_minutes: int | None = Field(None, ge=1, le=600)

    @field_validator("hints", mode="before")
    @classmethod
    def _three(cls, value: Any) -> Any:
        if isinstance(value, list | tuple) and len(value) != HINTS:
            raise ValueError(f"exactly {HINTS} hints are needed (vaguest first), not {len(value)}")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        known = set(self.roles) | set(self.params)
        clash = set(self.roles) & set(self.params)
        if clash:
            raise ValueError(f"roles and params share the names {sorted(clash)}")
        for where, text in self._templates():
            unknown = sorted(set(_placeholders(text, where)) - known)
            if unknown:
                raise ValueError(f"{where}: {', '.join('{' + u + '}' for u in unknown)} is neither a role nor a param")
        for where, steps in (("inject", self.inject), ("revert", self.revert)):
            for i, step in enumerate(steps):
                if step.role not in self.roles:
                    raise ValueError(f"{where}.{i}.role: {step.role!r} is not one of the roles {sorted(self.roles)}")
        for i, check in enumerate(self.checks):
            if check.get("device") not in self.roles:
                raise ValueError(f"checks.{i}.device: {check.get('device')!r} is not one of the roles {sorted(self.roles)}")
        rendered = self.render({r: r for r in self.roles})
        _hints_keep_the_fix(self, rendered)
        return self

    def _templates(self) -> Iterable[tuple[str, str]]:
        for where, steps in (("inject", self.inject), ("revert", self.revert)):
            for i, step in enumerate(steps):
                for j, command in enumerate(step.commands):
                    yield f"{where}.{i}.commands.{j}", command
        for i, check in enumerate(self.checks):
            for key, value in check.items():
                if isinstance(value, str):
                    yield f"checks.{i}.{key}", value
        for i, hint in enumerate(self.hints):
            yield f"hints.{i}", hint
        yield "brief", self.brief

    def render(self, nodes: Mapping[str, str], params: Mapping[str, str] | None = None) -> RenderedScenario:
        """The scenario for one project: roles as node names, parameters as given (else the defaults).

        ValueError naming the check or parameter when the values make a check invalid.
        """
        unknown = sorted(set(params or {}) - set(self.params))
        if unknown:
            raise ValueError(f"params: {', '.join(unknown)} not a parameter of {self.id} (it has {sorted(self.params)})")
        values = {**self.params, **(params or {}), **nodes}

        def fill(text: str) -> str:
            return string.Formatter().vformat(text, (), values)

        def steps(of: tuple[Step, ...]) -> tuple[tuple[str, tuple[str, ...]], ...]:
            return tuple((nodes[s.role], tuple(fill(c) for c in s.commands)) for s in of)

        checks: list[Check | DNSServer] = []
        for i, check in enumerate(self.checks):
            raw = {k: fill(v) if isinstance(v, str) else v for k, v in check.items()}
            if isinstance(raw.get("device"), str):  # a check's device is a role: the node playing it
                raw["device"] = nodes.get(raw["device"], raw["device"])
            try:
                checks.append(DNSServer.model_validate(raw) if raw.get("kind") == "dns_server"
                              else parse_checks([raw])[0])
            except ValidationError as exc:
                raise ValueError(f"checks.{i}: {_loc(exc)[0]}: {_loc(exc)[1]}") from None
            except ValueError as exc:
                raise ValueError(f"checks.{i}: {str(exc).removeprefix('0.')}") from None
        return RenderedScenario(self, steps(self.inject), steps(self.revert), tuple(checks),
                                tuple(fill(h) for h in self.hints), fill(self.brief))


@dataclass(frozen=True)
class RenderedScenario:
    """A scenario with its roles and parameters filled in: ``(device, commands)`` steps, typed checks."""

    scenario: Scenario
    inject: tuple[tuple[str, tuple[str, ...]], ...]
    revert: tuple[tuple[str, tuple[str, ...]], ...]
    checks: tuple[Check | DNSServer, ...]
    hints: tuple[str, ...]
    brief: str


def _placeholders(text: str, where: str) -> list[str]:
    try:
        return [name for _, name, _, _ in string.Formatter().parse(text) if name is not None]
    except ValueError as exc:  # an unmatched brace
        raise ValueError(f"{where}: {exc}") from None


def fix_values(rendered: RenderedScenario) -> set[str]:
    """The values (addresses, numbers) the revert types that the injection does not: what the fix is."""
    def values(steps: tuple[tuple[str, tuple[str, ...]], ...]) -> set[str]:
        found = {v for _, commands in steps for c in commands for v in _VALUE.findall(c)}
        return found | {v.split("/")[0] for v in found}

    return {v for v in values(rendered.revert) - values(rendered.inject) if not _trivial(v)}


def _trivial(value: str) -> bool:
    """Small numbers (an interface index, a count) say nothing about the fix."""
    return value.isdigit() and int(value) < 10


def _hints_keep_the_fix(scenario: Scenario, rendered: RenderedScenario) -> None:
    """ValueError when a hint contains a revert command or a value only the fix uses."""
    # A one-word command ("exit", "shutdown") is structure, not the fix.
    commands = {" ".join(c.split()).casefold() for _, cs in rendered.revert for c in cs if len(c.split()) > 1}
    secrets = fix_values(rendered)
    for i, hint in enumerate(rendered.hints):
        text = " ".join(hint.split()).casefold()
        told = sorted(c for c in commands if c in text)
        if told:
            raise ValueError(f"hints.{i}: gives the fix away (it contains the revert command {told[0]!r})")
        words = set(_VALUE.findall(hint))
        words |= {w.split("/")[0] for w in words}
        shown = sorted(words & secrets)
        if shown:
            raise ValueError(f"hints.{i}: gives the fix away (it contains {shown[0]!r}, a value only the fix uses)")


def _loc(exc: ValidationError) -> tuple[str, str]:
    first = exc.errors()[0]
    field, why = ".".join(map(str, first["loc"])), str(first["msg"]).removeprefix("Value error, ")
    if not field and re.match(r"^[a-z_]+(\.\w+)*: ", why):  # a whole-scenario rule names its own field
        field, _, why = why.partition(": ")
    return field or "scenario", why


def parse_scenario(data: Any) -> Scenario:
    """A scenario from its table; ScenarioInvalid naming the field and why otherwise."""
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        field, why = _loc(exc)
        raise ScenarioInvalid(field, why) from None


class ScenarioInvalid(CopilotError, ValueError):
    """One scenario's field is wrong (the catalogue adds the file and entry)."""

    kind = ErrorKind.INVALID
    code = "scenario_invalid"

    def __init__(self, field: str, why: str) -> None:
        super().__init__(f"{field}: {why}")
        self.field = field
        self.why = why
