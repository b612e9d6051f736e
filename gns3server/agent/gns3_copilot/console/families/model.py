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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ..drivers import IOS, LOGIN, Driver, Pager, Step, StructuredOutput
from ..modes import Commit, Level, SafeMode, level_at


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
    echo_twice: bool = False
    shell_escapes: tuple[str, ...] = ()  # commands that leave the CLI for a shell (the policy blocks them)
    json_suffix: str = ""
    # Prompts the library's patterns leave out that the family's consoles print (each cited), and
    # the command leaving each (a configuration session's prompt: "end").
    extra_prompts: Mapping[str, str] = field(default_factory=dict)
    extra_exits: Mapping[str, str] = field(default_factory=dict)
    textfsm_platform: str = ""  # ntc-templates' platform when the library names none
    # RouterOS: safe mode (its key, undo key, prompt marker): changes undone if the session is lost.
    safe_mode: SafeMode | None = None
    # Facts copied from library code rather than data: (module, the literal text), checked by a
    # test against the installed library so that a change there is noticed.
    checks: tuple[tuple[str, str], ...] = ()
    sources: Mapping[str, str] = field(default_factory=dict)  # field name -> where the fact came from


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

    @property
    def title(self) -> str:
        return self.spec.title

    def level(self, name: str) -> Level:
        for level in self.levels:
            if level.name == name:
                return level
        raise KeyError(name)

    def prompt_of(self, output: str) -> tuple[Level, str] | None:
        """The privilege level whose prompt ends ``output`` (CRs and escape codes are ignored), and the prompt."""
        return level_at(self.levels, output)

    def level_of(self, output: str) -> Level | None:
        found = self.prompt_of(output)
        return found[0] if found else None

    def prompt_in(self, output: str) -> str | None:
        found = self.prompt_of(output)
        return found[1] if found else None

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

    def driven_levels(self) -> tuple[Level, ...]:
        """The levels a session moves between: the read and config levels and those below them, and
        the extra prompts (shells the library also knows, Junos's or NX-OS's Tcl, are left out: the
        session never goes there, and a console found there is reported, not used)."""
        spec = self.spec
        wanted: list[str] = []
        for top in (spec.read_level, spec.config_level):
            name = top or ""
            while name and name not in wanted:
                wanted.append(name)
                name = self.level(name).previous
        return tuple(level for level in self.levels if level.name in wanted or level.name in spec.extra_prompts)

    def to_driver(self, forms: Mapping[str, str] | None = None) -> Driver:
        """The family's :class:`~..drivers.Driver`: every fact the session and the config transaction use.

        ``forms``: the best structured form per show command (``structured.toml``).
        """
        spec = self.spec
        levels = self.driven_levels()
        read = self.level(spec.read_level)
        config = self.level(spec.config_level) if spec.config_level else None
        lower = [level for level in levels if level.name == read.previous]
        structured = None
        if self.structured.json_suffix or self.structured.textfsm_platform:
            suffix = self.structured.json_suffix
            structured = StructuredOutput(
                suffix, _offers_json(suffix), textfsm_platform=self.structured.textfsm_platform, forms=dict(forms or {}),
            )
        return Driver(
            name=spec.name,
            title=spec.title,
            # Flags inline: the session joins the prompt with its dialogue steps into one pattern.
            prompt=re.compile("|".join(f"(?im:{level.prompt.pattern})" for level in levels)),
            errors=tuple(re.compile(re.escape(e)) for e in self.errors),
            pagers=(Pager(re.compile(f"(?i:{spec.pager})")),) if spec.pager else (),
            setup=spec.setup,
            config_enter=(config.escalate,) if config and config.escalate else (),
            config_exit=(config.deescalate,) if config and config.deescalate else (),
            config_prompt=config.prompt if config else None,
            user_prompt=lower[0].prompt if lower else None,
            enable=(read.escalate,) if lower and read.escalate else (),
            enable_dialogue=IOS.enable_dialogue if read.escalate_auth else (),
            login=_login(spec.login),
            # A console caught booting shows its login prompt by itself; an Enter typed over it would
            # make getty ask again and the session take that for a refusal. A quiet console (one at
            # its prompt already) gets the wake-up line after this long.
            wake_wait=1.0,
            interrupt=spec.interrupt,
            structured=structured,
            levels=levels,
            read_level=spec.read_level,
            config_level=spec.config_level,
            commit=spec.commit,
            safe_mode=spec.safe_mode,
            dialogs=tuple(_step(d.prompt, d.answer, d.why) for d in spec.dialogs),
            return_char="\r\n" if self.return_char == "\r\n" else "\r",
            echo_twice=spec.echo_twice,
        )


def _step(pattern: str, answer: str, what: str) -> Step:
    """A dialog of ours as a session step: a question waiting at the end of the output (flags scoped,
    since the session joins every step's pattern into one)."""
    return Step(re.compile(f"(?im:{pattern})[ \t]*" + r"\Z"), answer, what)


def _login(login: Login) -> tuple[Step, ...]:
    """The console's dialogue before the prompt: scrapli's login prompts (its telnet defaults,
    answered with the console credentials and the family's login options), the family's own
    questions (a banner to accept, Junos root's shell), then the shared first-boot steps."""
    refused = tuple(s for s in LOGIN if s.fails)
    library = (
        _step(login.username, "{username}" + login.username_suffix.replace("{", "{{").replace("}", "}}"), "login"),
        _step(login.password, "{password}", "password"),
    )
    own = tuple(_step(d.prompt, d.answer, d.why) for d in (*login.wake, *login.after))
    shared = tuple(s for s in LOGIN if not s.fails and not s.needs)
    return (*refused, *own, *library, *shared)


def _offers_json(suffix: str) -> Callable[[str], bool]:
    """Whether a line has the CLI's JSON form: its show and info commands, not already asking for it."""
    marker = suffix.strip().split()[-1] if suffix.strip() else ""

    def offered(line: str) -> bool:
        words = line.split()
        return bool(suffix) and bool(words) and words[0].casefold() in ("show", "sh", "info", "nv") and marker not in words

    return offered
