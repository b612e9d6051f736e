"""One console session driven by a :class:`~.drivers.Driver`: login, prompt, commands, interrupt.

The session knows no CLI family: everything it does comes from the driver's data
(prompts, dialogue steps, pagers, setup and config commands, the interrupt). What
it guarantees, for every family:

- reaching the prompt: a wake-up line, then the console's dialogue answered step
  by step (a getty or IOS login with the device's console credentials, "Press
  RETURN", first-boot questions, a pager showing a banner); a console that
  answers but shows no prompt gets the family's interrupt once;
- a command's echo is awaited before its prompt, pagers are answered, and one
  deadline bounds the whole command;
- a command that reaches its deadline can be interrupted (:meth:`interrupt`) and
  the prompt recovered, so the next session finds the console free; one that stays
  busy raises :class:`ConsoleBusyError` (``console_busy``).

Console credentials are typed and never kept in an error, a log line or the
output: what a login printed is discarded, and messages name only the step.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import Counter
from collections.abc import Mapping, Sequence

from ..errors import ErrorKind
from .credentials import Credentials
from .drivers import Driver, Pager, Step
from .telnet import ConsoleError, ConsoleTimeout, TelnetConsole
from .terminal import render

log = logging.getLogger(__name__)

# What a pager leaves after it is answered: backspaces over "--More--", spaces, backspaces.
_BACKSPACES = re.compile(r"\x08+ *\x08*")
MAX_DIALOGUE_STEPS = 8
"""Questions answered before the prompt, at most (a login, a first-boot dialog, a pager ...)."""
INTERRUPTS = 3
"""Interrupts sent to a command past its deadline before the console is reported busy."""


class ConsoleBusyError(ConsoleError):
    """The console answers but never shows its prompt, even after the family's interrupt."""

    code = "console_busy"
    kind = ErrorKind.CONFLICT
    retryable = True


class ConsoleLoginError(ConsoleError):
    """The console refused the login (or kept asking) with the credentials it was given."""

    code = "console_login_failed"


class CredentialsNeededError(ConsoleError):
    """The console asks for a login and the device has no console credentials."""

    code = "console_credentials_missing"
    kind = ErrorKind.NOT_CONFIGURED


def clean_output(command: str, raw: str, prompt: re.Pattern[str]) -> str:
    """The command's own output: no echo, no trailing prompt, lines as a terminal shows them."""
    text = raw
    match = prompt.search(text)
    if match:
        text = text[: match.start()]
    lines = render(_BACKSPACES.sub("", text)).split("\n")
    if lines and lines[0].strip() == command.strip():
        lines = lines[1:]
    return "\n".join(lines).strip("\n")


def _echo_pattern(command: str) -> re.Pattern[str]:
    """The echo of ``command``, allowing the line breaks and backspaces a terminal
    inserts when a long line wraps (a shell at 80 columns)."""
    return re.compile(r"(?:\r\n?| \r|\x08)*".join(re.escape(ch) for ch in command))


def _alternatives(prompt: re.Pattern[str], steps: Sequence[Step], pagers: Sequence[Pager]) -> re.Pattern[str]:
    """One pattern for the prompt, each dialogue step (``s0``...) and each pager (``g0``...)."""
    parts = [f"(?P<prompt>{prompt.pattern})"]
    parts += [f"(?P<s{i}>{s.pattern.pattern})" for i, s in enumerate(steps)]
    parts += [f"(?P<g{i}>{p.pattern.pattern})" for i, p in enumerate(pagers)]
    return re.compile("|".join(parts))


def _last_line(text: str, secrets: Sequence[str]) -> str:
    line = next((ln.strip() for ln in reversed(render(text).split("\n")) if ln.strip()), "")
    for secret in secrets:
        if secret:
            line = line.replace(secret, "***")
    return line[-80:]


class DriverSession:
    """A console driven with one driver: every read is bounded by a timeout."""

    def __init__(self, console: TelnetConsole, driver: Driver, credentials: Credentials | None = None) -> None:
        self.console = console
        self.driver = driver
        self.credentials = credentials
        self.logged_in = False  # the console asked for a login and the credentials were typed
        self.prompt_reached = False
        self.answered: list[str] = []  # the dialogue steps answered on the way to the prompt
        self.opening = ""  # the end of what the console printed up to its first prompt (telling families apart)
        self._wait_for = _alternatives(driver.prompt, driver.dialogs, driver.pagers)

    @property
    def _secrets(self) -> list[str]:
        creds = self.credentials
        return [s for s in (creds.password, creds.enable_password) if s] if creds else []

    def _name(self) -> str:
        return f"{self.console.host}:{self.console.port}"

    async def open(self, timeout: float, sync_wait: float = 1.0) -> None:
        """Connect, wake the console up to a prompt (logging in if it asks), and run the driver's setup.

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
                    log.debug("No answer to the sync command on %s; again", self._name())
            raw, _ = await self.console.read_until(driver.prompt, max(deadline - loop.time(), 0.001))
        else:
            if driver.wake_wait <= 0:
                await self.console.send_line("")
            creds = self.credentials
            secrets = {k: v for k, v in (("username", creds.username), ("password", creds.password)) if v} if creds else {}
            raw = await self._reach_prompt(driver.login, deadline, secrets, wake=True)
        self.prompt_reached = True
        self.opening = raw[-2048:]
        # The banner or the wake-up may leave more prompts in flight: start clean.
        self.console.discard_pending()
        if driver.config_prompt is not None and driver.config_prompt.search(raw):
            log.info("Console %s was left in config mode; leaving it", self._name())
            await self.exit_config(max(deadline - loop.time(), 0.001), commit=False)
        elif driver.user_prompt is not None and driver.user_prompt.search(raw):
            await self._enable(deadline)
        for command in driver.setup:
            await self.command(command, max(deadline - loop.time(), 0.001))

    async def _enable(self, deadline: float) -> None:
        """From user exec to privileged exec, answering an enable password if one is asked."""
        loop = asyncio.get_running_loop()
        creds = self.credentials
        password = (creds.enable_password or creds.password) if creds else None
        for command in self.driver.enable:
            await self.console.send_line(command)
            await self.console.read_until(_echo_pattern(command), max(deadline - loop.time(), 0.001), lookback=None)
            await self._reach_prompt(self.driver.enable_dialogue, deadline, {"password": password} if password else {})
            self.console.discard_pending()

    async def _reach_prompt(
        self, steps: Sequence[Step], deadline: float, secrets: Mapping[str, str], *, wake: bool = False
    ) -> str:
        """Read to the prompt, answering ``steps`` and pagers; the text read up to the prompt.

        ``wake``: this opens the session, so a console that answers with output but no
        prompt for the driver's ``busy_after`` seconds gets one interrupt; with the
        driver's ``wake_wait``, the wake-up line is typed only if no prompt came by then.
        """
        loop = asyncio.get_running_loop()
        pattern = _alternatives(self.driver.idle_prompt or self.driver.prompt, steps, self.driver.pagers)
        asked: Counter[int] = Counter()
        given = False  # a credential was typed: from now on a refusal is one
        interrupted = not wake
        unwoken = wake and self.driver.wake_wait > 0
        while True:
            left = deadline - loop.time()
            wait = left if interrupted else min(left, self.driver.busy_after)
            if unwoken:
                wait = min(wait, self.driver.wake_wait)
            try:
                raw, match = await self.console.read_until(pattern, max(wait, 0.001))
            except ConsoleTimeout as exc:
                if unwoken and loop.time() < deadline:
                    unwoken = False
                    await self.console.send_line("")
                    continue
                if interrupted or loop.time() >= deadline:
                    if exc.output.strip() and not given:
                        raise ConsoleBusyError(
                            f"the console {self._name()} answers but shows no prompt within {wait:g}s "
                            f"(busy with a command or still starting; last line: {_last_line(exc.output, self._secrets)!r})"
                        ) from None
                    if given:  # never with what was read: it may hold an echoed password
                        raise ConsoleLoginError(f"no prompt from {self._name()} after the login") from None
                    raise
                interrupted = True
                if exc.output and self.driver.interrupt:
                    log.info("Console %s answers without a prompt: interrupting it", self._name())
                    await self.console.send(self.driver.interrupt)
                continue
            group = match.lastgroup or "prompt"
            if group == "prompt":
                return raw
            index = int(group[1:])
            if group[0] == "g":
                await self.console.send(self.driver.pagers[index].answer)
                continue
            current = steps[index]
            if current.fails:
                if given:
                    raise ConsoleLoginError(f"{self._name()} refused the login ({current.what})")
                continue  # an old refusal on the screen, before anything was typed
            missing = [name for name in current.needs if not secrets.get(name)]
            if missing:
                raise CredentialsNeededError(
                    f"the console {self._name()} asks for a {current.what}; the device has no console "
                    "credentials (an administrator, or a user who may edit the node, sets them)"
                )
            asked[index] += 1
            if (current.needs and asked[index] > 1) or sum(asked.values()) > MAX_DIALOGUE_STEPS:
                raise ConsoleLoginError(f"{self._name()} asked for the {current.what} again: the login was refused")
            if current.needs:
                given = True
                self.logged_in = True
            self.answered.append(current.what)
            await self.console.send_line(current.answer.format(**secrets) if current.needs else current.answer)

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
            group = match.lastgroup or "prompt"
            if group[0] == "s":  # a question the CLI asks after the command: the family's answer
                parts.append(raw)
                step = self.driver.dialogs[int(group[1:])]
                log.info("Console %s asks (%s): answered %r", self._name(), step.what, step.answer)
                await self.console.send_line(step.answer)
                continue
            if group != "prompt":
                parts.append(raw[: match.start()])
                # A page already buffered is read without waiting, so the read's own timeout
                # never fires while pages keep coming at once (a busy event loop sees the
                # next page before the timer): the deadline is checked here.
                if loop.time() >= deadline:
                    raise ConsoleTimeout(f"{command!r} was still paging after {timeout:g}s", "".join(parts))
                await self.console.send(self.driver.pagers[int(group[1:])].answer)
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

    async def interrupt(self, timeout: float) -> bool:
        """Stop what the CLI is running (its interrupt, then again) and wait for its prompt.

        A pager on the way is left (its ``leave`` key). True once the prompt is back;
        False if it is not within ``timeout`` after :data:`INTERRUPTS` interrupts. A family
        with no interrupt (BIRD) only waits for the prompt.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        for attempt in range(INTERRUPTS):
            if self.driver.interrupt:
                await self.console.send(self.driver.interrupt)
            share = (deadline - loop.time()) / (INTERRUPTS - attempt)
            try:
                while True:
                    _, match = await self.console.read_until(self._wait_for, max(share, 0.001))
                    group = match.lastgroup or "prompt"
                    if group == "prompt":
                        self.console.discard_pending()
                        log.info("Console %s interrupted: at its prompt again", self._name())
                        return True
                    if group[0] == "s":
                        await self.console.send_line(self.driver.dialogs[int(group[1:])].answer)
                        continue
                    await self.console.send(self.driver.pagers[int(group[1:])].leave)
            except ConsoleTimeout:
                continue
        log.warning("Console %s stayed busy after %d interrupts", self._name(), INTERRUPTS)
        return False

    async def enter_config(self, timeout: float) -> None:
        for command in self.driver.config_enter:
            await self.command(command, timeout)

    async def exit_config(self, timeout: float, *, commit: bool = True) -> None:
        """Leave config mode; after a batch, commit first (for the families that have a commit)."""
        for command in (*(self.driver.config_commit if commit else ()), *self.driver.config_exit):
            await self.command(command, timeout)
