"""How to talk to each kind of device CLI: prompts, paging, config mode, errors.

A :class:`Driver` is pure data (regexes and command lists); :class:`DriverSession`
applies one to a :class:`~.telnet.TelnetConsole`. :func:`driver_for` picks the
driver from a GNS3 node's ``node_type`` and ``tags``, or an explicit override.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ErrorKind
from .telnet import ConsoleError, ConsoleTimeout, TelnetConsole

log = logging.getLogger(__name__)

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# What a pager leaves after it is answered: backspaces over "--More--", spaces, backspaces.
_BACKSPACES = re.compile(r"\x08+ *\x08*")


class UnknownDriverError(ConsoleError):
    """No driver fits the node (unknown type and no usable tag or override)."""

    code = "unknown_driver"
    kind = ErrorKind.INVALID


def _any_of(*patterns: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p) for p in patterns)


@dataclass(frozen=True)
class Driver:
    """The conventions of one CLI family."""

    name: str
    prompt: re.Pattern[str]  # any prompt, anchored at the end of the output read so far
    errors: tuple[re.Pattern[str], ...]
    pager: re.Pattern[str] | None = None  # a paging prompt answered with a space
    setup: tuple[str, ...] = ()  # sent once after login (paging off ...)
    config_enter: tuple[str, ...] = ()
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

    def error_lines(self, output: str) -> list[str]:
        """The lines of ``output`` that the CLI uses to report a failed command."""
        return [line.strip() for line in output.splitlines() if any(p.search(line) for p in self.errors)]


VPCS = Driver(
    name="vpcs",
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
)

IOS = Driver(
    name="ios",
    prompt=re.compile(r"(?:^|[\r\n])[\w.\-@/:]+(?:\([\w.\-/: ]+\))?[>#] ?\Z"),
    errors=_any_of(
        r"^\s*% ?Invalid input",
        r"^\s*% ?Incomplete command",
        r"^\s*% ?Ambiguous command",
        r"^\s*% ?Unknown command",
        r"^\s*% ?Bad ",
        r"^\s*%Error",
        r"^\s*% ?Error",
    ),
    pager=re.compile(r" ?--More-- ?"),
    setup=("terminal length 0", "terminal width 0"),
    config_enter=("configure terminal",),
    config_exit=("end",),
    config_prompt=re.compile(r"\([\w.\-/: ]+\)#\s*\Z"),
    user_prompt=re.compile(r">\s*\Z"),
    enable=("enable",),
)

LINUX = Driver(
    name="linux",
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

DRIVERS: Mapping[str, Driver] = {"vpcs": VPCS, "ios": IOS, "linux": LINUX}
_BY_NODE_TYPE = {"vpcs": "vpcs", "qemu": "ios", "iou": "ios", "dynamips": "ios", "docker": "linux"}
_TAG_PREFIXES = ("driver:", "driver=", "copilot-driver:")


# Node types that run one CLI only (a QEMU VM may run IOS, Linux or anything else).
_ONE_CLI_TYPES = frozenset({"vpcs", "iou", "dynamips", "docker"})


def _tagged_driver(node: Mapping[str, Any]) -> str | None:
    """The driver a ``driver:<name>`` (or bare ``<name>``) tag names, if any."""
    for tag in node.get("tags") or ():
        tag = str(tag).strip().casefold()
        for prefix in _TAG_PREFIXES:
            if tag.startswith(prefix):
                return tag[len(prefix):].strip()
        if tag in DRIVERS:
            return tag
    return None


def cli_known(node: Mapping[str, Any], override: str | None = None) -> bool:
    """Whether GNS3's own data (a tag, or a node type with one CLI) says which CLI the node runs,
    and ``override`` (the caller's choice) agrees with it.

    When it does not, the console policy must judge a line in every CLI's grammar: what the
    device executes is not what a caller-chosen grammar reads (``sh -c reboot`` is a ``show``
    abbreviation to IOS and a shell to Linux).
    """
    node_type = str(node.get("node_type", ""))
    known = _tagged_driver(node) or (_BY_NODE_TYPE.get(node_type) if node_type in _ONE_CLI_TYPES else None)
    return known is not None and (override is None or override.strip().casefold() == known)


def driver_for(node: Mapping[str, Any], override: str | None = None) -> Driver:
    """The driver for a GNS3 node: ``override``, else a ``driver:<name>`` tag, else its node type."""
    name = override if override is not None else _tagged_driver(node)
    if name is None:
        name = _BY_NODE_TYPE.get(str(node.get("node_type", "")))
    if name is None:
        raise UnknownDriverError(
            f"no console driver for node {node.get('name')!r} of type {node.get('node_type')!r}; "
            f"tag it driver:<{'|'.join(DRIVERS)}>"
        )
    try:
        return DRIVERS[name.casefold()]
    except KeyError:
        raise UnknownDriverError(f"unknown console driver {name!r} (known: {', '.join(DRIVERS)})") from None


def clean_output(command: str, raw: str, prompt: re.Pattern[str]) -> str:
    """The command's own output: no echo, no trailing prompt, no CRs or ANSI codes."""
    text = _ANSI.sub("", raw)
    match = prompt.search(text)
    if match:
        text = text[: match.start()]
    text = _BACKSPACES.sub("", text).replace("\r\n", "\n").replace("\r", "")
    lines = text.split("\n")
    if lines and lines[0].strip() == command.strip():
        lines = lines[1:]
    return "\n".join(lines).strip("\n")


def _echo_pattern(command: str) -> re.Pattern[str]:
    """The echo of ``command``, allowing the line breaks and backspaces a terminal
    inserts when a long line wraps (a shell at 80 columns)."""
    return re.compile(r"(?:\r\n?| \r|\x08)*".join(re.escape(ch) for ch in command))


class DriverSession:
    """A console driven with one driver: every read is bounded by a timeout."""

    def __init__(self, console: TelnetConsole, driver: Driver) -> None:
        self.console = console
        self.driver = driver
        self._wait_for = driver.prompt if driver.pager is None else re.compile(
            f"(?P<prompt>{driver.prompt.pattern})|(?P<pager>{driver.pager.pattern})"
        )

    async def open(self, timeout: float, sync_wait: float = 1.0) -> None:
        """Connect, wake the console up to a prompt, and run the driver's setup commands.

        With a sync command, it is re-sent every ``sync_wait`` seconds until its
        output shows the CLI is listening (bounded by ``timeout`` overall).
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        await self.console.connect(timeout)
        driver = self.driver
        if driver.sync_command and driver.sync_output is not None:
            while True:
                await self.console.send_line(driver.sync_command)
                left = deadline - loop.time()
                try:
                    await self.console.read_until(driver.sync_output, max(min(sync_wait, left), 0.001))
                    break
                except ConsoleTimeout:
                    if loop.time() >= deadline:
                        raise
                    log.debug("No answer to the sync command on %s:%s; again", self.console.host, self.console.port)
        else:
            await self.console.send_line("")
        raw, _ = await self.console.read_until(driver.prompt, max(deadline - loop.time(), 0.001))
        # The banner or the wake-up may leave more prompts in flight: start clean.
        self.console.discard_pending()
        if driver.config_prompt is not None and driver.config_prompt.search(raw):
            log.info("Console %s:%s was left in config mode; leaving it", self.console.host, self.console.port)
            await self.exit_config(max(deadline - loop.time(), 0.001))
        elif driver.user_prompt is not None and driver.user_prompt.search(raw):
            for command in driver.enable:
                await self.command(command, max(deadline - loop.time(), 0.001))
        for command in driver.setup:
            await self.command(command, max(deadline - loop.time(), 0.001))

    async def command(self, command: str, timeout: float) -> str:
        """Send one command and return its cleaned output, answering pagers on the way.

        The command's echo is awaited first: prompts still in flight from earlier
        lines (a banner, the wake-up line) must not be taken for this command's end.
        ``timeout`` bounds the whole command, its echo and every page together: a
        long paged output must not get the full timeout again for each page.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        await self.console.send_line(command)
        echoed = self.driver.echoes and bool(command)
        if echoed:
            await self.console.read_until(_echo_pattern(command), timeout, lookback=None)
        parts: list[str] = []
        while True:
            left = max(deadline - loop.time(), 0.001)
            try:
                raw, match = await self.console.read_until(self._wait_for, left)
            except ConsoleTimeout as exc:  # the pages already read are output too
                raise ConsoleTimeout(str(exc), "".join(parts) + exc.output) from exc
            if self.driver.pager is not None and match.lastgroup == "pager":
                parts.append(raw[: match.start()])
                # A page already buffered is read without waiting, so the read's own timeout
                # never fires while pages keep coming at once (a busy event loop sees the
                # next page before the timer): the deadline is checked here.
                if loop.time() >= deadline:
                    raise ConsoleTimeout(f"{command!r} was still paging after {timeout:g}s", "".join(parts))
                await self.console.send(" ")
                continue
            parts.append(raw)
            output = "".join(parts)
            if echoed:
                # The rest of the echo's line is echo too (normally just its line
                # break): when a command ends exactly at the right margin, bash's
                # readline forces the wrap with a space and a CR, moves the cursor
                # back with ANSI sequences and prints the last character again, which
                # leaked into the output. Cut here rather than awaited with the echo,
                # so that the echo read still ends with the command's own text.
                output = command + "\n" + output.partition("\n")[2]
            return clean_output(command, output, self.driver.prompt)

    async def enter_config(self, timeout: float) -> None:
        for command in self.driver.config_enter:
            await self.command(command, timeout)

    async def exit_config(self, timeout: float) -> None:
        for command in self.driver.config_exit:
            await self.command(command, timeout)
