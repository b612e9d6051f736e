"""How to talk to each kind of device CLI: prompts, modes, paging, errors, login, interrupt.

A :class:`Driver` is pure data (regexes, command lists, dialogue steps, privilege
levels and commits: ``modes.py``) plus, where a family needs one, a small strategy
object (:class:`StructuredOutput`); the session (``session.py``) and the config
transaction (``transaction.py``) apply any driver the same way and know no family by
name. The built-in drivers are :data:`DRIVERS`; the vendor families' are built from
scrapli's platform data at start-up (``families.load_drivers``). A family is added by
writing one ``Driver`` (``docs/console.md``, "Adding a CLI family"). Which driver a
node gets is the detected family's (``detect.py``, ``registry.py``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ..errors import ErrorKind
from .grammar import frr as frr_grammar
from .modes import Commit, Level, SafeMode, level_at
from .telnet import ConsoleError

log = logging.getLogger(__name__)


class UnknownDriverError(ConsoleError):
    """No driver fits the node (unknown type and no usable tag or override)."""

    code = "unknown_driver"
    kind = ErrorKind.INVALID


def _any_of(*patterns: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p) for p in patterns)


@dataclass(frozen=True)
class Step:
    """One step of a dialogue the CLI may hold before its prompt (a login, a first-boot question).

    ``pattern`` is searched in the text read so far (anchor it at the end, ``\\Z``, for a
    question waiting for its answer); its flags must be scoped (``(?i:...)``): the
    session joins every step's pattern into one.
    ``answer`` is typed as a line; ``{username}``, ``{password}`` in it stand for the
    device's console credentials (a step needing one the device has none of stops the
    session with "set its console credentials"). ``fails``: the CLI refused the login.
    """

    pattern: re.Pattern[str]
    answer: str
    what: str
    fails: bool = False

    @property
    def needs(self) -> tuple[str, ...]:
        return tuple(name for name in ("username", "password") if "{" + name + "}" in self.answer)


def step(pattern: str, answer: str, what: str, *, fails: bool = False) -> Step:
    return Step(re.compile(pattern), answer, what, fails)


@dataclass(frozen=True)
class Pager:
    """A paging prompt: ``answer`` (typed without Enter) shows more, ``leave`` ends the listing."""

    pattern: re.Pattern[str]
    answer: str = " "
    leave: str = "q"


@dataclass(frozen=True)
class StructuredOutput:
    """How a family gives machine-readable output: the words that ask for it, and where.

    ``offered(line)`` says whether the CLI has that form for ``line`` (FRR: only the
    commands whose syntax takes ``json``); ``request(line)`` is the line to send.
    ``textfsm_platform`` names ntc-templates' templates for the CLI's text, and ``forms``
    the form measured best per show command (``structured.toml``: json, textfsm or raw).
    """

    suffix: str
    offered: Callable[[str], bool]
    format: str = "json"
    textfsm_platform: str = ""
    forms: Mapping[str, str] = field(default_factory=dict)  # normalised command -> json, textfsm, raw

    def form_of(self, line: str) -> str:
        """The measured best form for ``line`` (raw when it was not measured)."""
        return self.forms.get(" ".join(line.casefold().split()), "raw")

    def request(self, line: str) -> str:
        return line if line.rstrip().endswith(self.suffix.strip()) else line.rstrip() + self.suffix


# Getty, busybox/util-linux login, IOS's line login, and the first-boot questions of IOS.
# Shared by the families whose consoles may show them; a family may list its own.
LOGIN: tuple[Step, ...] = (
    step(r"(?:Login incorrect|% ?Login invalid|% ?Authentication failed|% ?Access denied)", "", "login refused", fails=True),
    step(r"(?:^|[\r\n])[^\r\n]*\blogin: ?\Z", "{username}", "login"),
    step(r"(?:^|[\r\n])\s*(?i:user ?name): ?\Z", "{username}", "username"),
    step(r"(?:^|[\r\n])[^\r\n]*(?i:password): ?\Z", "{password}", "password"),
    step(r"Press RETURN to get started", "", "press RETURN"),
    step(r"initial configuration dialog\? \[yes/no\]: ?\Z", "no", "initial configuration dialog"),
    step(r"terminate autoinstall\? \[yes\]: ?\Z", "yes", "autoinstall"),
)

MORE = Pager(re.compile(r" ?--More--(?:\(\d+%\))? ?"))
# less, as vtysh runs it when VTYSH_PAGER is set (even for its banner): ":" between
# pages, "(END)" after the last one; both are drawn at the start of the last line.
LESS = (Pager(re.compile(r"(?:^|[\r\n])\(END\) ?\Z"), answer="q"), Pager(re.compile(r"(?:^|[\r\n]):\Z")))


@dataclass(frozen=True)
class Driver:
    """The conventions of one CLI family (see ``docs/console.md`` for each field's use)."""

    name: str
    prompt: re.Pattern[str]  # any prompt, anchored at the end of the output read so far
    errors: tuple[re.Pattern[str], ...]
    # The prompt as the CLI may draw it when nothing is pending (after the wake-up line),
    # where ``prompt`` must tell it from one drawn while a command's answer is on its way.
    idle_prompt: re.Pattern[str] | None = None
    pagers: tuple[Pager, ...] = ()
    setup: tuple[str, ...] = ()  # sent once at the prompt (paging off ...)
    config_enter: tuple[str, ...] = ()
    config_commit: tuple[str, ...] = ()  # sent after a config batch, before config_exit
    config_exit: tuple[str, ...] = ()
    echoes: bool = True  # the CLI echoes what is typed (used to sync on each command)
    # A harmless command whose output proves the CLI reads our lines, and that output.
    sync_command: str = ""
    sync_output: re.Pattern[str] | None = None
    # Prompts found on opening that need a step first: leave a config mode left
    # behind by an earlier session, enable from user exec.
    config_prompt: re.Pattern[str] | None = None
    user_prompt: re.Pattern[str] | None = None
    enable: tuple[str, ...] = ()
    enable_dialogue: tuple[Step, ...] = ()  # what enable may ask (its password)
    login: tuple[Step, ...] = LOGIN  # the dialogue a console may hold before the prompt
    interrupt: str = "\x03"  # what stops a running command (Ctrl-C; IOS: Ctrl-^; "": nothing does)
    # How long to wait for a prompt the CLI draws by itself before typing the wake-up line:
    # a CLI started for each connection draws one, and a line typed while its editor starts
    # is drawn twice. 0: the wake-up line is typed at once.
    wake_wait: float = 0.0
    busy_after: float = 5.0  # output but no prompt this long after the wake-up: interrupt once
    recovery: float = 5.0  # after a command's deadline, how long interrupting may take
    structured: StructuredOutput | None = None
    title: str = ""  # the CLI's name for people ("Juniper Junos")
    # The CLI's privilege levels (modes.Level), where show commands run and where configuration
    # commands do (None: typed where they are). With levels, the session finds the level from the
    # prompt and climbs or descends to the one it needs (config_prompt, user_prompt and enable
    # are then not used).
    levels: tuple[Level, ...] = ()
    read_level: str = ""
    config_level: str | None = None
    commit: Commit | None = None  # a candidate committed after a config batch (modes.Commit)
    safe_mode: SafeMode | None = None  # RouterOS: held while a config batch runs
    # Questions the CLI asks after a command, answered on the way to the prompt (Junos's
    # "Exit with uncommitted changes?", VyOS's "Proceed? [confirm]").
    dialogs: tuple[Step, ...] = ()
    return_char: str = "\r"  # the Enter key (RouterOS: CR LF)
    echo_twice: bool = False  # the CLI prints the prompt and the line once more after Enter (RouterOS)

    def error_lines(self, output: str) -> list[str]:
        """The lines of ``output`` that the CLI uses to report a failed command."""
        return [line.strip() for line in output.splitlines() if any(p.search(line) for p in self.errors)]

    def level_of(self, output: str) -> Level | None:
        """The level whose prompt ends ``output`` (None without levels, or at no level's prompt)."""
        found = level_at(self.levels, output)
        return found[0] if found else None

    def prompt_in(self, output: str) -> str | None:
        """The prompt that ends ``output`` as this CLI draws it, if it does (for telling families apart)."""
        if self.levels:
            found = level_at(self.levels, output)
            return found[1] if found else None
        match = self.prompt.search(output)
        return match.group(0).strip("\r\n") if match else None


VPCS = Driver(
    name="vpcs",
    title="VPCS",
    prompt=re.compile(r"(?:^|[\r\n])[\w.\-\[\]]+> ?\Z"),
    # Right after a connection VPCS (Debian's 0.5b2) often loses the first line
    # typed, so opening repeats a harmless echo until its output comes back.
    sync_command="echo copilot-sync",
    sync_output=re.compile(r"[\r\n]copilot-sync\r?\n"),
    errors=_any_of(
        r"^\s*Bad command",
        r"^\s*Invalid\b",
        r"^\s*Incomplete command",
        r"^\s*Unknown\b",
        r"^\s*(?:Error|ERROR)\b",
    ),
    login=(),
)

_CISCO_PROMPT = re.compile(r"(?:^|[\r\n])[\w.\-@/:]+(?:\([\w.\-/: ]+\))?[>#] ?\Z")
_CISCO_CONFIG_PROMPT = re.compile(r"\([\w.\-/: ]+\)#\s*\Z")

IOS = Driver(
    name="ios",
    title="Cisco IOS",
    prompt=_CISCO_PROMPT,
    errors=_any_of(
        r"^\s*% ?Invalid input",
        r"^\s*% ?Incomplete command",
        r"^\s*% ?Ambiguous command",
        r"^\s*% ?Unknown command",
        r"^\s*% ?Bad ",
        r"^\s*%Error",
        r"^\s*% ?Error",
        # Configuration lines IOS refuses in words of their own (the line is not applied).
        r"^\s*% ?Specify remote-as or peer-group commands first",
        r"^\s*% ?BGP is already running",
        r"^\s*% ?\S+ overlaps with ",
    ),
    pagers=(MORE,),
    setup=("terminal length 0", "terminal width 0"),
    config_enter=("configure terminal",),
    config_exit=("end",),
    config_prompt=_CISCO_CONFIG_PROMPT,
    user_prompt=re.compile(r">\s*\Z"),
    enable=("enable",),
    enable_dialogue=(
        step(r"% ?(?:Bad secrets|Access denied|Bad passwords)", "", "enable refused", fails=True),
        step(r"(?:^|[\r\n])\s*(?i:password): ?\Z", "{password}", "enable password"),
    ),
    # Ctrl-Shift-6, IOS's escape sequence: it stops ping and traceroute. (Ctrl-C is
    # the console's break on some lines, which during a boot drops into ROMMON.)
    interrupt="\x1e",
)

LINUX = Driver(
    name="linux",
    title="a Linux shell",
    prompt=re.compile(r"(?:^|[\r\n])[^\r\n]{0,200}[$#] ?\Z"),
    errors=_any_of(
        r"command not found",
        r"^\S+: (?:line \d+: )?\S+: not found",
        r"No such file or directory",
        r"Permission denied",
        r"^\S+: (?:invalid|unrecognized) option",
        # iproute2 (ip), whose failures a fault revert must see: "RTNETLINK answers: File exists",
        # "Error: Nexthop has invalid gateway.", 'Cannot find device "eth9"', 'Device "eth9" does not exist.'
        r"^(?:RTNETLINK answers|Error): ",
        r'^(?:Cannot find device "|Device "\S+" does not exist)',
    ),
    # TERM stays what the console set: on a "dumb" terminal bash's readline scrolls
    # a line longer than the screen sideways, so a long command's echo comes back as
    # "<" and its tail only, never whole, and the command timed out.
    setup=("export PAGER=cat SYSTEMD_PAGER=cat",),
)

FRR = Driver(
    name="frr",
    title="FRR (vtysh)",
    # vtysh: "R1# ", "R1(config)# ", "R1(config-router)# ", "R1(config-router-af)# ".
    prompt=_CISCO_PROMPT,
    errors=_any_of(
        # "% Unknown command: ...", "% Command incomplete: ...", "% Ambiguous command: ...",
        # "% Unknown action 'x'", "% Can't find BGP instance", "% Need a regexp to filter with"
        r"^\s*% ",
        r"^Can't execute ",  # vtysh running ping/traceroute that the host lacks
    ),
    # VTYSH_PAGER set: vtysh pipes its banner through the pager even before the prompt.
    pagers=(MORE, *LESS),
    setup=("terminal length 0", "no terminal paginate"),
    config_enter=("configure terminal",),
    config_exit=("end",),
    config_prompt=_CISCO_CONFIG_PROMPT,
    user_prompt=re.compile(r">\s*\Z"),
    enable=("enable",),
    enable_dialogue=IOS.enable_dialogue,
    structured=StructuredOutput(" json", frr_grammar.offers_json),
)

BIRD = Driver(
    name="bird",
    title="BIRD (birdc)",
    # birdc draws "bird> " again while it waits for the daemon's answer, then erases it
    # (CR, erase line) and prints the answer: that early prompt follows a CR, the real
    # one a line break. After an empty line (the wake-up) the prompt follows a CR too.
    prompt=re.compile(r"(?:^|\n)bird> ?\Z"),
    idle_prompt=re.compile(r"(?:^|[\r\n])bird> ?\Z"),
    # Ctrl-C ends birdc itself (it has no handler), and its commands end by themselves.
    interrupt="",
    wake_wait=2.0,
    errors=_any_of(
        r"^[89]\d{3}[ -]",  # birdc -v: 8xxx run-time errors, 9xxx parse errors
        r"syntax error",
        r"^No such command",
        r"^Network not found",
        r"^No protocols match",
        r"^Access denied",
        r": No such file or directory",
        r"^Unable to connect to server",
    ),
)

DRIVERS: Mapping[str, Driver] = {d.name: d for d in (VPCS, IOS, LINUX, FRR, BIRD)}
"""The built-in drivers; ``families.load_drivers()`` adds the vendor families' at start-up."""
