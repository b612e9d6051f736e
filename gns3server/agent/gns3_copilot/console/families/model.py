"""What a CLI family is: the library's knowledge, read at run time, plus our own cited tables.

A :class:`FamilySpec` is the constant part, written in this package's modules: which
scrapli platform holds the family's knowledge, and the facts no library holds as data
(paging off lives in code, in the platform's ``on_open`` function), each with where it
came from. :class:`Family` is what :func:`..library.load_family` builds from a spec and
the installed library: the privilege levels with their prompts, escalate/deescalate
commands and error strings exactly as scrapli defines them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..drivers import Driver, Pager

# Escape sequences a console may mix into a prompt (colours, cursor moves); scrapli strips
# the same kinds before matching (scrapli/channel/base_channel.py, ANSI_ESCAPE_PATTERN).
_ANSI = re.compile(r"\x1b(?:\[[0-9;?]*[@-~]|\][^\x07]*\x07|[78ME])")
_TAIL = 2048  # the longest prompt any library pattern allows is well under this


@dataclass(frozen=True)
class Library:
    """Where a family's knowledge lives in scrapli (2025.1.30) or scrapli-community.

    ``platform`` is scrapli's platform name: a core one (``arista_eos``:
    ``scrapli.driver.core.arista_eos``) or a community one (``vyos_vyos``:
    ``scrapli_community.vyos.vyos``). ``on_open`` names the function whose commands
    :attr:`FamilySpec.setup` copies (a test checks they are still there).
    """

    platform: str
    community: bool
    on_open: str = ""
    driver_class: str = ""  # core platforms: the async driver whose defaults hold textfsm_platform


@dataclass(frozen=True)
class Commit:
    """How a candidate configuration becomes the running one, and how it rolls back by itself.

    ``confirmed`` is a template with ``{minutes}``, ``{seconds}`` or ``{hms}`` (the unit the
    CLI takes): the device reverts unless ``confirm`` is sent before the time is up.
    ``session`` opens a named candidate where plain config mode applies each line at
    once (EOS, NX-OS: ``configure session {name}``).
    """

    commit: str
    confirmed: str = ""
    confirm: str = ""
    abort: str = ""
    check: str = ""
    session: str = ""
    min_seconds: int = 1  # the shortest rollback timer the CLI accepts
    # What the device prints once a confirmed commit waits for its confirmation.
    pending: str = ""

    def confirmed_command(self, seconds: int) -> str:
        """The command committing with an automatic rollback after ``seconds`` (minutes rounded up)."""
        if not self.confirmed:
            raise ValueError("seconds: this CLI has no confirmed commit")
        if seconds < self.min_seconds:
            raise ValueError(f"seconds: this CLI takes at least {self.min_seconds}")
        hms = f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
        return self.confirmed.format(seconds=seconds, minutes=-(-seconds // 60), hms=hms)


@dataclass(frozen=True)
class Dialog:
    """A question the CLI asks on its own, and the answer that keeps the session safe."""

    prompt: str  # regular expression, case-insensitive, on the output's last line
    answer: str
    why: str


@dataclass(frozen=True)
class Login:
    """What a console shows before the CLI: login prompts, "press RETURN", banners."""

    # scrapli's telnet defaults (scrapli/channel/base_channel.py, BaseChannelArgs).
    username: str = r"^(.*username:)|(.*login:)\s?$"
    password: str = r"(.*@.*)?password:\s?$"
    username_suffix: str = ""
    # Lines a console prints while the CLI waits for a key, and the key to send.
    wake: tuple[Dialog, ...] = ()
    # Once logged in, a step still needed to reach the CLI (Junos root lands in a shell).
    after: tuple[Dialog, ...] = ()


@dataclass(frozen=True)
class Structured:
    """How the CLI prints a show command's output as data."""

    json_suffix: str = ""  # appended to a show command: " | json", " | display json"
    textfsm_platform: str = ""  # ntc-templates' platform name (from the library where it has one)


@dataclass(frozen=True)
class FamilySpec:
    """The constant part of a family: the library reference and the facts of our own, cited."""

    name: str
    title: str
    library: Library
    read_level: str  # the privilege level show commands run in
    config_level: str | None  # the level configuration commands run in (None: typed where they are)
    setup: tuple[str, ...] = ()  # paging off and the like, sent once at the read level
    errors: tuple[str, ...] = ()  # error strings of ours, added to the library's
    pager: str | None = None  # a paging prompt (regular expression), answered with a space
    commit: Commit | None = None
    login: Login = field(default_factory=Login)
    dialogs: tuple[Dialog, ...] = ()
    interrupt: str = "\x03"  # the key that stops a running command
    line_end: str = "\r"
    echo_twice: bool = False
    shell_escapes: tuple[str, ...] = ()  # commands that leave the CLI for a shell (the policy blocks them)
    json_suffix: str = ""
    # Prompts the library's patterns leave out that the family's consoles print (each cited).
    extra_prompts: Mapping[str, str] = field(default_factory=dict)
    textfsm_platform: str = ""  # ntc-templates' platform when the library names none
    # RouterOS: the key that toggles safe mode (changes undone if the session is lost).
    safe_mode_key: str = ""
    # Facts copied from library code rather than data: (module, the literal text), checked by a
    # test against the installed library so that a change there is noticed.
    checks: tuple[tuple[str, str], ...] = ()
    sources: Mapping[str, str] = field(default_factory=dict)  # field name -> where the fact came from


@dataclass(frozen=True)
class Level:
    """A privilege level as scrapli defines it, with its prompt compiled for our consoles."""

    name: str
    pattern: str  # the library's own regular expression (re.M | re.I, on text without CRs)
    prompt: re.Pattern[str]  # the same, anchored at the end of the output read so far
    previous: str
    escalate: str
    deescalate: str
    escalate_auth: bool = False
    escalate_prompt: str = ""
    not_contains: tuple[str, ...] = ()

    def match(self, tail: str) -> str | None:
        """The prompt that ends ``tail`` (CRs removed), if it is this level's."""
        found = self.prompt.search(tail)
        if found is None or any(word in found.group(0) for word in self.not_contains):
            return None
        return found.group(0)


@dataclass(frozen=True)
class Family:
    """A CLI family: the spec's facts and the library's levels, prompts and errors."""

    spec: FamilySpec
    levels: tuple[Level, ...]
    errors: tuple[str, ...]  # substrings that mark a failed command (the library's, then ours)
    structured: Structured
    return_char: str  # what the library sends as Enter (RouterOS: CR LF)
    library_version: str

    @property
    def name(self) -> str:
        return self.spec.name

    def level(self, name: str) -> Level:
        for level in self.levels:
            if level.name == name:
                return level
        raise KeyError(name)

    def prompt_of(self, output: str) -> tuple[Level, str] | None:
        """The privilege level whose prompt ends ``output`` (CRs and escape codes are ignored), and the prompt."""
        tail = _ANSI.sub("", output[-_TAIL:]).replace("\r", "")
        for level in self.levels:
            prompt = level.match(tail)
            if prompt is not None:
                return level, prompt
        return None

    def level_of(self, output: str) -> Level | None:
        found = self.prompt_of(output)
        return found[0] if found else None

    def error_lines(self, output: str) -> list[str]:
        """The lines of ``output`` holding one of the family's error strings."""
        return [line.strip() for line in output.replace("\r", "").splitlines() if any(e in line for e in self.errors)]

    def escalation(self, to: str) -> tuple[str, ...]:
        """The commands that climb from the family's lowest level to level ``to``."""
        steps: list[str] = []
        level = self.level(to)
        while level.previous:
            if level.escalate:
                steps.append(level.escalate)
            level = self.level(level.previous)
        return tuple(reversed(steps))

    def to_driver(self) -> Driver:
        """Today's :class:`~..drivers.Driver` for the family (what pass 2 extends, see docs/console.md).

        The prompt is any level's; config mode is entered with the library's escalate
        commands and left with its deescalate command.
        """
        spec = self.spec
        prompt = re.compile("|".join(f"(?:{level.prompt.pattern})" for level in self.levels), re.MULTILINE | re.IGNORECASE)
        config = self.level(spec.config_level) if spec.config_level else None
        read = self.level(spec.read_level)
        lower = [level for level in self.levels if level.name == read.previous]
        return Driver(
            name=spec.name,
            prompt=prompt,
            errors=tuple(re.compile(re.escape(e)) for e in self.errors),
            pagers=(Pager(re.compile(spec.pager)),) if spec.pager else (),
            setup=spec.setup,
            config_enter=(config.escalate,) if config and config.escalate else (),
            config_exit=(config.deescalate,) if config and config.deescalate else (),
            config_prompt=config.prompt if config else None,
            user_prompt=lower[0].prompt if lower else None,
            enable=(read.escalate,) if lower and read.escalate else (),
        )
