"""The console command policy: what the copilot may send to a device.

Checked before anything is sent. Dangerous commands (reload, erase, delete, copy
to startup ...) are blocked in every mode unless the administrator allows them by
rule name; read-only mode only lets through commands on its allow list and never
enters configuration mode. Patterns understand IOS-style abbreviations, so that
``wr er`` is seen as ``write erase``; see ``policy.default.toml`` for the syntax.
"""

from __future__ import annotations

import logging
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

DEFAULT_POLICY_FILE = "policy.default.toml"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class PolicyError(ValueError):
    """The policy file is missing or malformed."""


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str


@dataclass(frozen=True)
class _Word:
    """One word of a pattern: alternatives of (full word, shortest accepted prefix, glob)."""

    choices: tuple[tuple[str, int, bool], ...]

    def matches(self, token: str) -> bool:
        return any(
            token.startswith(full) if glob else len(token) >= minimum and full.startswith(token)
            for full, minimum, glob in self.choices
        )


_ANY_ONE, _ANY_MANY, _END = "*", "...", "$"
Token = _Word | str


def _parse_word(text: str) -> _Word:
    alternatives = text[1:-1].split("|") if text.startswith("{") and text.endswith("}") else [text]
    choices = []
    for alt in alternatives:
        if alt.endswith("*") and len(alt) > 1:
            choices.append((alt[:-1].casefold(), len(alt) - 1, True))
        elif "[" in alt:
            if not alt.endswith("]") or alt.count("[") != 1:
                raise PolicyError(f"bad word pattern {text!r}")
            head, tail = alt[:-1].split("[")
            choices.append(((head + tail).casefold(), len(head), False))
        else:
            choices.append((alt.casefold(), len(alt), False))
    if not all(full for full, _, _ in choices):
        raise PolicyError(f"bad word pattern {text!r}")
    return _Word(tuple(choices))


@dataclass(frozen=True)
class Pattern:
    """A compiled command pattern."""

    text: str
    tokens: tuple[Token, ...]

    @classmethod
    def parse(cls, text: str) -> Pattern:
        if not isinstance(text, str) or not text.strip():
            raise PolicyError(f"empty command pattern {text!r}")
        tokens: list[Token] = []
        for part in text.split():
            if part in (_ANY_ONE, _ANY_MANY):
                tokens.append(part)
            elif part.endswith(_END) and len(part) > 1:
                tokens += [_parse_word(part[:-1]), _END]
            elif part == _END:
                tokens.append(_END)
            else:
                tokens.append(_parse_word(part))
        return cls(text, tuple(tokens))

    def matches(self, words: Sequence[str]) -> bool:
        return _match(self.tokens, list(words))


def _match(tokens: Sequence[Token], words: Sequence[str]) -> bool:
    if not tokens:
        return True  # a pattern matches the start of a command
    head, rest = tokens[0], tokens[1:]
    if head == _END:
        return not words
    if head == _ANY_MANY:
        return any(_match(rest, words[i:]) for i in range(len(words) + 1))
    if not words:
        return False
    if head == _ANY_ONE or (isinstance(head, _Word) and head.matches(words[0])):
        return _match(rest, words[1:])
    return False


def _words(command: str) -> list[str]:
    words = command.casefold().split()
    if words[:1] == ["do"]:  # IOS runs exec commands from config mode with "do"
        words = words[1:]
    return words


@dataclass(frozen=True)
class Rule:
    name: str
    patterns: tuple[Pattern, ...]
    reason: str

    def matches(self, words: Sequence[str]) -> bool:
        return any(p.matches(words) for p in self.patterns)


@dataclass(frozen=True)
class Policy:
    """The rules in force; :meth:`check` decides about one command."""

    dangerous: tuple[Rule, ...]
    allow: frozenset[str]
    read_only_allowed: tuple[Pattern, ...]
    source: str = "<default>"

    def check(self, command: str, *, read_only: bool, config_mode: bool = False) -> Decision:
        """Whether ``command`` may be sent, and why not if it may not."""
        if _CONTROL.search(command):
            # A line break would smuggle a second, unchecked command; Ctrl-Z, tabs
            # and escapes act on the CLI before any Enter.
            return Decision(False, "blocked: control characters (line breaks, tabs, Ctrl-keys) are not allowed")
        words = _words(command)
        if not words:
            return Decision(True, "empty line")
        for rule in self.dangerous:
            if rule.matches(words) and rule.name not in self.allow:
                return Decision(False, f"blocked by policy ({rule.name}): {rule.reason}")
        if read_only:
            if config_mode:
                return Decision(False, "read-only mode: configuration mode is not allowed")
            if not any(p.matches(words) for p in self.read_only_allowed):
                return Decision(False, "read-only mode: only show, ping, traceroute and similar commands are allowed")
        return Decision(True, "allowed")


def _rules(table: Any, where: str) -> tuple[Rule, ...]:
    if not isinstance(table, Mapping):
        raise PolicyError(f"{where}: [dangerous] must be a table of rules")
    rules = []
    for name, body in table.items():
        if not isinstance(body, Mapping) or not isinstance(body.get("patterns"), list):
            raise PolicyError(f"{where}: rule {name!r} needs a list of patterns")
        rules.append(
            Rule(str(name), tuple(Pattern.parse(p) for p in body["patterns"]), str(body.get("reason", "dangerous command")))
        )
    return tuple(rules)


def _read(text: str, where: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(f"{where}: {exc}") from exc


def load_policy(path: str | Path | None = None) -> Policy:
    """Load the packaged default policy, overlaid with the administrator's file at ``path``.

    Tables the administrator's file leaves out keep the default; ``allow`` is
    taken from that file.
    """
    default = _read(resources.files(__package__).joinpath(DEFAULT_POLICY_FILE).read_text("utf-8"), DEFAULT_POLICY_FILE)
    data, where = default, DEFAULT_POLICY_FILE
    if path is not None:
        where = str(path)
        try:
            text = Path(path).read_text("utf-8")
        except OSError as exc:
            raise PolicyError(f"cannot read policy file {where}: {exc.strerror or exc}") from exc
        data = {**default, **_read(text, where)}
    allow = data.get("allow", [])
    if not isinstance(allow, list) or not all(isinstance(a, str) for a in allow):
        raise PolicyError(f"{where}: allow must be a list of rule names")
    rules = _rules(data.get("dangerous", {}), where)
    unknown = set(allow) - {r.name for r in rules}
    if unknown:
        raise PolicyError(f"{where}: allow names unknown rules: {', '.join(sorted(unknown))}")
    read_only = data.get("read_only", {})
    allowed = read_only.get("allowed") if isinstance(read_only, Mapping) else None
    if not isinstance(allowed, list):
        raise PolicyError(f"{where}: [read_only] needs an allowed list")
    policy = Policy(rules, frozenset(allow), tuple(Pattern.parse(p) for p in allowed), where)
    log.info("Console policy loaded from %s (allowed dangerous rules: %s)", where, ", ".join(sorted(allow)) or "none")
    return policy
