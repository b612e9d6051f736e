"""The console command policy: what the copilot may send to a device.

Checked before anything is sent, on the command as the device will read it: the
grammar of the device's CLI family (``grammar/``: a shell for ``linux``, the IOS
CLI for ``ios``, VPCS's for ``vpcs``, vtysh for ``frr``, birdc for ``bird``, and one
grammar per vendor CLI: EOS, Junos, IOS-XR, NX-OS, SR Linux, RouterOS, VRP, VyOS,
FortiOS, Cumulus) turns the line into the commands it runs, with wrappers unwrapped,
abbreviations resolved as the CLI resolves them (FRR, BIRD, RouterOS) or left for the
patterns to resolve (IOS and the CLIs shaped like it), nested commands (``sh -c``,
``$(...)``, EEM ``cli command``) included. A family whose CLI is a shell with more on
top (VyOS, Cumulus) inherits every Linux rule (:data:`INHERITS`). Dangerous
commands are blocked in every mode unless the administrator allows their rule by
name; read-only mode allows only a line that is one allow-listed command (Linux:
piped into filters only; IOS, FRR: output modifiers that only filter) and never
enters configuration mode. In read-only mode, a command that never ends by itself
(``[unbounded]``: ``ping`` without a count ...) is refused with what to type
instead, and one that needs the user's approval (``[needs_approval]``: ``clear ip
ospf process`` ...) says so. See ``policy.default.toml`` and ``docs/console.md``.
"""

from __future__ import annotations

import logging
import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import CopilotError, ErrorKind
from .grammar import (
    Analysis,
    IncompleteLine,
    TooComplex,
    bird,
    cumulus,
    eos,
    fortios,
    frr,
    ios,
    iosxr,
    junos,
    linux,
    nxos,
    routeros,
    srlinux,
    vpcs,
    vrp,
    vyos,
)
from .grammar.patterns import Pattern, PatternError

log = logging.getLogger(__name__)

DEFAULT_POLICY_FILE = "policy.default.toml"
_ANALYZERS: Mapping[str, Callable[[str], Analysis]] = {
    "ios": ios.analyze,
    "linux": linux.analyze,
    "vpcs": vpcs.analyze,
    "frr": frr.analyze,
    "bird": bird.analyze,
    "eos": eos.analyze,
    "junos": junos.analyze,
    "iosxr": iosxr.analyze,
    "nxos": nxos.analyze,
    "srlinux": srlinux.analyze,
    "routeros": routeros.analyze,
    "vrp": vrp.analyze,
    "vyos": vyos.analyze,
    "fortios": fortios.analyze,
    "cumulus": cumulus.analyze,
}
FAMILIES = tuple(_ANALYZERS)
# Families whose CLI is a Linux shell with more commands on top (VyOS's op mode is bash; Cumulus
# is Debian): every Linux rule, read-only command, filter and refused option holds for them too.
INHERITS: Mapping[str, tuple[str, ...]] = {"vyos": ("linux",), "cumulus": ("linux",)}
# Families whose allow lists are matched with case (Linux options: -t is not -T).
_CASE_SENSITIVE = frozenset({"linux", "vyos", "cumulus"})
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_EVERY = "patterns"  # a rule's or read-only list's key for patterns of every family
_RULE_KEYS = {_EVERY, "reason", *FAMILIES}
# The legacy keys of what may follow a read-only command, and the families they are for.
_LEGACY_FOLLOWERS = {"ios_output_modifiers": "ios", "linux_filters": "linux"}
_READ_ONLY_KEYS = {"allowed", *FAMILIES, *_LEGACY_FOLLOWERS, "followers", "linux_refused_options"}
_UNBOUNDED_KEYS = {"commands", "unless", "instead"}


def lineage(family: str) -> tuple[str, ...]:
    """The family and the ones whose rules it inherits (``vyos`` -> ``vyos``, ``linux``)."""
    return (family, *INHERITS.get(family, ()))


class PolicyError(CopilotError, ValueError):
    """The policy file is missing or malformed."""

    code = "console_policy_invalid"
    kind = ErrorKind.INVALID


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str


@dataclass(frozen=True)
class Rule:
    """A named set of dangerous command patterns, per CLI family."""

    name: str
    patterns: Mapping[str, tuple[Pattern, ...]]  # family -> patterns; "patterns" applies to all
    reason: str
    instead: str = ""  # [needs_approval]: how to send it with the configuration tool ({line})

    def matches(self, family: str, words: Sequence[str]) -> bool:
        own = (p for fam in lineage(family) for p in self.patterns.get(fam, ()))
        return any(p.matches(words) for p in (*self.patterns.get(_EVERY, ()), *own))


@dataclass(frozen=True)
class Unbounded:
    """Commands of one family that never end by themselves, and what to type instead."""

    commands: tuple[Pattern, ...]
    unless: tuple[Pattern, ...]  # the same command given a bound (a count, a deadline)
    instead: str  # with {line} (the line) and {args} (the words after the first)

    def matches(self, words: Sequence[str], fold: bool) -> bool:
        return any(p.matches(words, fold) for p in self.commands) and not any(p.matches(words, fold) for p in self.unless)


@dataclass(frozen=True)
class ReadOnly:
    """What read-only mode lets through."""

    allowed: Mapping[str, tuple[Pattern, ...]]  # family -> patterns; "patterns" (the file's "allowed") for all
    followers: Mapping[str, tuple[Pattern, ...]] = field(default_factory=dict)  # family -> what may follow "|"
    linux_refused_options: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def commands(self, family: str) -> tuple[Pattern, ...]:
        return (*self.allowed.get(_EVERY, ()), *(p for fam in lineage(family) for p in self.allowed.get(fam, ())))

    def followers_of(self, family: str) -> tuple[Pattern, ...]:
        """What a read command of ``family`` may be piped into, its lineage's included."""
        return tuple(p for fam in lineage(family) for p in self.followers.get(fam, ()))

    def refused_options(self, family: str) -> Mapping[str, tuple[str, ...]]:
        """The options refused on a shell's read commands (Linux and the families on top of it)."""
        return self.linux_refused_options if "linux" in lineage(family) else {}

    @property
    def ios_output_modifiers(self) -> tuple[Pattern, ...]:
        return self.followers.get("ios", ())

    @property
    def linux_filters(self) -> tuple[Pattern, ...]:
        return self.followers.get("linux", ())


@dataclass(frozen=True)
class Policy:
    """The rules in force; :meth:`check` decides about one command."""

    dangerous: tuple[Rule, ...]
    allow: frozenset[str]
    read_only: ReadOnly
    source: str = "<default>"
    unbounded: Mapping[str, Mapping[str, Unbounded]] = field(default_factory=dict)  # rule -> family -> commands
    unbounded_reasons: Mapping[str, str] = field(default_factory=dict)
    needs_approval: tuple[Rule, ...] = ()

    def check(self, command: str, *, family: str | None = None, read_only: bool, config_mode: bool = False) -> Decision:
        """Whether ``command`` may be sent to a device of CLI ``family`` (a driver name), and why not.

        Without a family (a caller that does not know the device), the command must
        be harmless in every family's grammar to pass, and read-only mode lets it
        through if one family's read-only rules do.
        """
        if family is not None and family not in FAMILIES:
            raise ValueError(f"family: unknown CLI family {family!r} (known: {', '.join(FAMILIES)})")
        # Leading and trailing blanks (a trailing tab included) are not part of the
        # command; the runner sends the stripped line.
        command = command.strip(" \t")
        if _CONTROL.search(command):
            # A line break would smuggle a second, unchecked command; a tab is the
            # CLI's completion key (the device would run a completed line we never
            # saw); Ctrl-Z and escapes act on the CLI before any Enter.
            return Decision(False, "blocked: control characters (line breaks, tabs, Ctrl-keys) are not allowed")
        if not command:
            return Decision(True, "empty line")
        families = (family,) if family is not None else FAMILIES
        analyses: dict[str, Analysis] = {}
        for fam in families:
            try:
                analyses[fam] = _ANALYZERS[fam](command)
            except TooComplex as exc:
                return Decision(False, f"blocked: the {fam} command line is too complex to judge ({exc})")
            except IncompleteLine as exc:
                return Decision(False, f"blocked: incomplete {fam} command line ({exc}); the device would read the next line as part of it")
        for fam, analysis in analyses.items():
            for words in analysis.commands:
                for rule in self.dangerous:
                    if rule.name not in self.allow and rule.matches(fam, words):
                        return Decision(False, f"blocked by policy ({rule.name}): {rule.reason} [{' '.join(words)}]")
        if read_only:
            # Before the allow list, so that what never ends gets its alternative, not a generic refusal.
            endless = [self._unbounded(fam, analysis, command) for fam, analysis in analyses.items()]
            if all(endless):
                return Decision(False, f"read-only mode: {endless[0]}")
            # In any family's reading: a line another family would let through (Linux's "w", who
            # is logged in) must not save an FRR router's configuration ("w" is "write" there).
            for fam, analysis in analyses.items():
                approval = self._needs_approval(fam, analysis)
                if approval:
                    return Decision(False, f"read-only mode: {approval}")
            if config_mode:
                return Decision(False, "read-only mode: configuration mode is not allowed")
            refusals = [self._read_only_refusal(fam, analysis, command) for fam, analysis in analyses.items()]
            if all(refusals):
                return Decision(False, f"read-only mode: {refusals[0]}")
        return Decision(True, "allowed")

    def _unbounded(self, family: str, analysis: Analysis, line: str) -> str:
        """Why ``line`` never ends by itself in ``family``, and what to type instead; "" if it ends.

        A line with more than one command (a redirection giving ``cat`` its input ...) is
        left to the read-only refusals.
        """
        if analysis.refusals:
            return ""
        fold = family not in _CASE_SENSITIVE
        for name, per_family in self.unbounded.items():
            rule = next((per_family[fam] for fam in lineage(family) if fam in per_family), None)
            if rule is None:
                continue
            for stages in analysis.readings or (analysis.stages,):
                if stages and stages[0] and rule.matches(stages[0], fold):
                    args = line.split(None, 1)[1] if len(line.split(None, 1)) > 1 else ""
                    instead = rule.instead.format(line=line, args=args)
                    return f"{line!r} never ends by itself ({self.unbounded_reasons.get(name, name)}); send {instead} instead"
        return ""

    def _needs_approval(self, family: str, analysis: Analysis) -> str:
        """Why the line needs the user's approval in ``family`` (every reading of it), and how to send it."""
        for stages in analysis.readings or (analysis.stages,):
            if not stages:
                continue
            line = " ".join(stages[0])
            for rule in self.needs_approval:
                if rule.matches(family, stages[0]):
                    how = f" ({rule.instead.format(line=line)})" if rule.instead else ""
                    return f"{line} needs the user's approval ({rule.reason}): send it with the configuration tool{how}"
        return ""

    def _read_only_refusal(self, family: str, analysis: Analysis, command: str) -> str:
        """Why read-only mode refuses the line in ``family``; "" if it does not (every reading of it)."""
        for stages in analysis.readings or (analysis.stages,):
            refusal = self._refusal(family, analysis, stages, command)
            if refusal:
                return refusal
        return ""

    def _refusal(self, family: str, analysis: Analysis, stages: tuple[tuple[str, ...], ...], command: str) -> str:
        if analysis.refusals:
            return f"{', '.join(analysis.refusals)} not allowed"
        # Allowing is exact on Linux, where case matters (-t is not -T); everywhere else,
        # and for danger, case is ignored (the stricter reading).
        fold = family not in _CASE_SENSITIVE
        line = " ".join(stages[0]) if stages else ""
        if not stages or not any(p.matches(stages[0], fold) for p in self.read_only.commands(family)):
            # Say what the device would run when it reads the line otherwise ("w" is "write" to vtysh).
            read_as = f" (to this CLI it is {line!r})" if line and line.split() != command.split() else ""
            return f"only show, ping, traceroute and similar commands are allowed{read_as}"
        followers = self.read_only.followers_of(family)
        shell = "linux" in lineage(family)
        for stage in stages[1:]:
            if not any(p.matches(stage, fold) for p in followers):
                known = "; ".join(p.text for p in followers) or "none"
                what = f"pipes into anything but {known} are" if shell else f"output modifiers other than {known} are"
                return f"{what} not allowed ({' '.join(stage) or 'empty'})"
        refused_options = self.read_only.refused_options(family)
        for stage in stages if refused_options else ():
            refused = refused_options.get(stage[0], ())
            for word in stage[1:]:
                if refused and word.startswith("$"):
                    return f"{stage[0]}: a glob or variable among its arguments is not allowed"
                hit = _refused_option(word, refused)
                if hit:
                    return f"{stage[0]} {hit} is not allowed"
        return ""


def _refused_option(word: str, refused: Sequence[str]) -> str:
    """The refused option ``word`` gives (``-o``, ``-no`` bundling it, ``--output=f``), or ""."""
    if word.startswith("--"):
        name = word.split("=", 1)[0]
        # GNU getopt takes unique prefixes of long options: --out is --output.
        return next((r for r in refused if r.startswith("--") and len(name) > 2 and r.startswith(name)), "")
    if word.startswith("-") and len(word) > 1:
        return next((r for r in refused if len(r) == 2 and r[0] == "-" and r[1] in word[1:]), "")
    return ""


def _patterns(value: Any, where: str) -> tuple[Pattern, ...]:
    if not isinstance(value, list):
        raise PolicyError(f"{where} must be a list of patterns")
    try:
        return tuple(Pattern.parse(p) for p in value)
    except PatternError as exc:
        raise PolicyError(f"{where}: {exc}") from exc


def _rules(table: Any, where: str, section: str = "dangerous") -> tuple[Rule, ...]:
    if not isinstance(table, Mapping):
        raise PolicyError(f"{where}: [{section}] must be a table of rules")
    keys = _RULE_KEYS | ({"instead"} if section == "needs_approval" else set())
    rules = []
    for name, body in table.items():
        if not isinstance(body, Mapping) or not any(isinstance(body.get(k), list) for k in (_EVERY, *FAMILIES)):
            raise PolicyError(f"{where}: rule {name!r} needs a list of patterns (patterns, {', '.join(FAMILIES)})")
        unknown = set(body) - keys
        if unknown:
            raise PolicyError(f"{where}: rule {name!r} has unknown keys: {', '.join(sorted(unknown))}")
        patterns = {k: _patterns(body[k], f"{where}: {section}.{name}.{k}") for k in (_EVERY, *FAMILIES) if k in body}
        instead = str(body.get("instead", ""))
        try:
            instead.format(line="")
        except (KeyError, IndexError, ValueError) as exc:
            raise PolicyError(f"{where}: {section}.{name}.instead may only use {{line}} ({exc})") from None
        rules.append(Rule(str(name), patterns, str(body.get("reason", "dangerous command")), instead))
    return tuple(rules)


def _unbounded(table: Any, where: str) -> tuple[dict[str, dict[str, Unbounded]], dict[str, str]]:
    """``[unbounded.NAME]`` (a reason) with ``[unbounded.NAME.FAMILY]`` tables (commands, unless, instead)."""
    if not isinstance(table, Mapping):
        raise PolicyError(f"{where}: [unbounded] must be a table of rules")
    rules: dict[str, dict[str, Unbounded]] = {}
    reasons: dict[str, str] = {}
    for name, body in table.items():
        here = f"{where}: unbounded.{name}"
        if not isinstance(body, Mapping):
            raise PolicyError(f"{here} must be a table")
        unknown = set(body) - {"reason", *FAMILIES}
        if unknown:
            raise PolicyError(f"{here} has unknown keys: {', '.join(sorted(unknown))}")
        reasons[str(name)] = str(body.get("reason", "it runs until it is interrupted"))
        rules[str(name)] = {}
        for family in FAMILIES:
            spec = body.get(family)
            if spec is None:
                continue
            if not isinstance(spec, Mapping) or set(spec) - _UNBOUNDED_KEYS or not isinstance(spec.get("instead"), str):
                raise PolicyError(f"{here}.{family} needs commands, an instead text and optionally unless")
            try:
                spec["instead"].format(line="", args="")
            except (KeyError, IndexError, ValueError) as exc:
                raise PolicyError(f"{here}.{family}.instead may only use {{line}} and {{args}} ({exc})") from None
            rules[str(name)][family] = Unbounded(
                _patterns(spec.get("commands"), f"{here}.{family}.commands"),
                _patterns(spec.get("unless", []), f"{here}.{family}.unless"),
                spec["instead"],
            )
    return rules, reasons


def _read_only(table: Any, where: str) -> ReadOnly:
    if not isinstance(table, Mapping) or not any(k in table for k in ("allowed", *FAMILIES)):
        raise PolicyError(f"{where}: [read_only] needs an allowed list (allowed, {', '.join(FAMILIES)})")
    unknown = set(table) - _READ_ONLY_KEYS
    if unknown:
        raise PolicyError(f"{where}: [read_only] has unknown keys: {', '.join(sorted(unknown))}")
    allowed = {(_EVERY if k == "allowed" else k): _patterns(table[k], f"{where}: read_only.{k}")
               for k in ("allowed", *FAMILIES) if k in table}
    followers_table = table.get("followers", {})
    if not isinstance(followers_table, Mapping) or set(followers_table) - set(FAMILIES):
        raise PolicyError(f"{where}: read_only.followers must map families ({', '.join(FAMILIES)}) to patterns")
    followers = {k: _patterns(v, f"{where}: read_only.followers.{k}") for k, v in followers_table.items()}
    for key, family in _LEGACY_FOLLOWERS.items():
        if key in table:
            followers[family] = _patterns(table[key], f"{where}: read_only.{key}")
    refused = table.get("linux_refused_options", {})
    if not isinstance(refused, Mapping) or not all(
        isinstance(v, list) and all(isinstance(o, str) and o.startswith("-") for o in v) for v in refused.values()
    ):
        raise PolicyError(f"{where}: read_only.linux_refused_options must map commands to lists of options (-x, --long)")
    return ReadOnly(allowed, followers, {str(k): tuple(v) for k, v in refused.items()})


def _read(text: str, where: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(f"{where}: {exc}") from exc


def load_policy(path: str | Path | None = None) -> Policy:
    """Load the packaged default policy, overlaid with the administrator's file at ``path``.

    Tables the administrator's file leaves out keep the default ([dangerous],
    [read_only], [unbounded], [needs_approval]); ``allow`` is taken from that file.
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
    unbounded, reasons = _unbounded(data.get("unbounded", {}), where)
    approval = _rules(data.get("needs_approval", {}), where, "needs_approval")
    policy = Policy(rules, frozenset(allow), _read_only(data.get("read_only", {}), where), where,
                    unbounded, reasons, approval)
    log.info("Console policy loaded from %s (allowed dangerous rules: %s)", where, ", ".join(sorted(allow)) or "none")
    return policy
