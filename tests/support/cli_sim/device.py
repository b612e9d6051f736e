"""A vendor CLI replayed from a transcript: modes and prompts, abbreviations, errors, paging, config, commit.

A :class:`Transcript` (``transcripts/<family>.toml``) holds what the real CLI prints:
its prompts per mode, the outputs of the commands it was recorded running, its error
lines, its pager, how it enters and leaves configuration mode, how it commits (and
rolls a confirmed commit back) and its login dialog. A :class:`Device` plays it:
one device state (the running configuration, a pending confirmed commit) shared by
every console session, each :class:`Session` with its own mode, paging and candidate.

It behaves like the device where the copilot can tell: a word is resolved as the
CLI resolves unique prefixes among the commands it knows (an ambiguous or unknown
word gets the vendor's error line, with the caret under it where the vendor prints
one), output longer than a page stops at the vendor's pager until a key comes, a
configuration line the transcript does not accept is an error, and a confirmed
commit not confirmed in time is rolled back by the device itself.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TRANSCRIPTS = Path(__file__).parent / "transcripts"
ARG = "<arg>"  # one word of any value
REST = "..."  # any further words


@dataclass(frozen=True)
class Entry:
    """A command the transcript knows, in the modes it runs in."""

    modes: tuple[str, ...]
    words: tuple[str, ...]
    output: str = ""
    to: str | None = None  # the mode it leaves the session in
    render: str | None = None  # "running" / "candidate": the configuration, as typed
    repeat: str = ""  # a line printed again and again until the interrupt key (ping without a count)
    paging_off: bool = False
    json: str | None = None  # the output with the family's JSON modifier
    ask: str = ""  # a question the CLI asks first; answered "y..." it goes on
    context: str = ""  # "push" (the last word names the new context, FortiOS's "(interface)"), "pop", "clear"
    origin: str = ""


@dataclass(frozen=True)
class Transcript:
    family: str
    hostname: str
    user: str
    origin: str
    modes: dict[str, str]  # mode -> prompt template ({host}, {user})
    start_mode: str
    entries: tuple[Entry, ...]
    errors: dict[str, str]  # unknown, ambiguous, incomplete, config -> template ({caret} line, {word}, {line})
    pager: str = ""  # the pager prompt; empty: the CLI never pages
    page_lines: int = 24
    pager_erase: str = ""  # what the CLI prints once the pager is answered
    modifiers: dict[str, str] = field(default_factory=dict)  # typed word(s) -> include/exclude/begin/count/json/none
    config: dict[str, Any] = field(default_factory=dict)
    login: dict[str, Any] = field(default_factory=dict)
    echo_twice: bool = False
    # RouterOS: commands are menu paths, "/ip/address/print" and "/ip address print" alike.
    path_commands: bool = False

    @classmethod
    def load(cls, family: str) -> Transcript:
        return cls.read(TRANSCRIPTS / f"{family}.toml")

    @classmethod
    def read(cls, path: Path) -> Transcript:
        data = tomllib.loads(path.read_text("utf-8"))
        entries = tuple(
            Entry(
                modes=tuple(e["modes"]) if "modes" in e else tuple(data["modes"]),
                words=tuple(e["command"].split()),
                output=e.get("output", "").strip("\n"),
                to=e.get("to"),
                render=e.get("render"),
                repeat=e.get("repeat", ""),
                paging_off=e.get("paging_off", False),
                json=e.get("json"),
                ask=e.get("ask", ""),
                context=e.get("context", ""),
                origin=e.get("origin", ""),
            )
            for e in data.get("commands", [])
        )
        return cls(
            family=data["family"], hostname=data["hostname"], user=data.get("user", "admin"), origin=data["origin"],
            modes=data["modes"], start_mode=data["start_mode"], entries=entries, errors=data["errors"],
            pager=data.get("pager", {}).get("prompt", ""), page_lines=data.get("pager", {}).get("lines", 24),
            pager_erase=data.get("pager", {}).get("erase", ""), modifiers=data.get("modifiers", {}),
            config=data.get("config", {}), login=data.get("login", {}), echo_twice=data.get("echo_twice", False),
            path_commands=data.get("path_commands", False),
        )


class Device:
    """The device's own state, shared by its console sessions; ``events`` says what it did."""

    def __init__(self, transcript: Transcript, *, seconds_per_unit: float | None = None) -> None:
        self.transcript = transcript
        self.running: list[str] = list(transcript.config.get("running", []))
        self.events: list[str] = []
        self.pending: tuple[list[str], float] | None = None  # the configuration to go back to, and when
        # A confirmed commit's time counts in the CLI's unit (minutes, seconds); tests shrink it.
        unit = float(transcript.config.get("confirmed_unit_seconds", 60))
        self.seconds_per_unit = unit if seconds_per_unit is None else seconds_per_unit

    def session(self) -> Session:
        """A new console connection's session (a device with a CLI of its own returns its own kind)."""
        return Session(self)

    def rollback_due(self, now: float) -> bool:
        """Roll a confirmed commit back if its time is up (the device does it by itself)."""
        if self.pending is not None and now >= self.pending[1]:
            self.running = self.pending[0]
            self.pending = None
            self.events.append("rolled back")
            return True
        return False


class CliError(Exception):
    def __init__(self, kind: str, word: str = "", position: int = 0) -> None:
        super().__init__(kind)
        self.kind, self.word, self.position = kind, word, position


@dataclass
class Reply:
    """What the session prints for one line, and what it waits for next."""

    text: str = ""
    pages: list[str] = field(default_factory=list)  # more output, each shown after a pager key
    repeat: str = ""  # a line printed until the interrupt key
    question: bool = False  # the text is a question: the next line is its answer (:meth:`Session.answer`)
    close: bool = False


class Session:
    """One console connection to the device."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.t = device.transcript
        self.mode = self.t.start_mode
        self.paging = bool(self.t.pager)
        self.candidate: list[str] = []
        self.contexts: list[str] = []
        self._asked: tuple[Entry, str, list[str]] | None = None

    def prompt(self) -> str:
        return self.t.modes[self.mode].format(
            host=self.t.hostname, user=self.t.user, dirty="*" if self.candidate else "~",
            ctx=self.contexts[-1] if self.contexts else "",
        )

    def _candidates(self) -> list[Entry]:
        return [e for e in self.t.entries if self.mode in e.modes or "*" in e.modes]

    def resolve(self, words: list[str]) -> tuple[Entry, str]:
        """The entry ``words`` name, resolving each word as a unique prefix among the known commands,
        and the line as the CLI reads it (every word in full)."""
        candidates = self._candidates()
        full: list[str] = []
        for i, typed in enumerate(words):
            low = typed.casefold()
            options: dict[str, list[Entry]] = {}
            for entry in candidates:
                if i < len(entry.words):
                    word = entry.words[i]
                    if word in (ARG, REST) or word.casefold() == low or word.casefold().startswith(low):
                        key = "*" if word in (ARG, REST) else word.casefold()
                        options.setdefault(key, []).append(entry)
                elif entry.words and entry.words[-1] == REST:
                    options.setdefault("*", []).append(entry)
            exact = options.get(low)
            literal = {k: v for k, v in options.items() if k != "*"}
            if exact is not None:
                candidates, word = exact + options.get("*", []), low
            elif len(literal) == 1:
                (word, chosen), = literal.items()
                candidates = chosen + options.get("*", [])
            elif len(literal) > 1:
                raise CliError("ambiguous", typed, i)
            elif "*" in options:
                candidates, word = options["*"], typed
            else:
                raise CliError("unknown", typed, i)
            full.append(word)
        complete = [e for e in candidates if len(e.words) == len(words) or (e.words and e.words[-1] == REST
                                                                             and len(words) >= len(e.words) - 1)]
        if not complete:
            raise CliError("incomplete", words[-1] if words else "", len(words))
        return complete[0], " ".join(full)

    def error(self, err: CliError, line: str) -> str:
        template = self.t.errors.get(err.kind) or self.t.errors["unknown"]
        offset = len(self.prompt().split("\n")[-1]) + _word_offset(line, err.position)
        return template.format(caret=" " * offset + "^", word=err.word, line=line.strip())

    def handle(self, line: str, now: float) -> Reply:
        """The reply to one line typed at the prompt."""
        self.device.rollback_due(now)
        line = line.strip()
        if not line:
            return Reply()
        if self.t.path_commands and line.startswith("/"):
            first, _, rest = line[1:].partition(" ")
            line = " ".join([*first.split("/"), rest]).strip()
        head, *pipes = [part.strip() for part in line.split(" | ")]
        words = head.split()
        config = self.t.config
        try:
            entry, canonical = self.resolve(words)
        except CliError as exc:
            if self.mode in config.get("modes", ()) and _accepted(config, line):
                return self._configure(line)
            if exc.kind != "unknown" or self.mode not in config.get("modes", ()):
                return Reply(self.error(exc, line))
            return Reply(self.error(CliError("config", exc.word, exc.position), line))
        if entry.ask:
            self._asked = (entry, canonical, pipes)
            return Reply(entry.ask, question=True)
        return self._run(entry, canonical, pipes, now)

    def answer(self, line: str, now: float) -> Reply:
        """The reply to the answer of the question the last reply asked."""
        if self._asked is not None:
            (entry, canonical, pipes), self._asked = self._asked, None
            if line.strip().casefold().startswith("y"):
                return self._run(entry, canonical, pipes, now)
            return Reply(self.t.config.get("declined_output", ""))
        question = self.t.config["uncommitted"]
        typed = line.strip().casefold() or question.get("default", "")
        for name, effect in question["answers"].items():
            if name.casefold().startswith(typed) and typed:
                if effect.get("discard"):
                    self.candidate = []
                    self.device.events.append("discarded")
                if effect.get("to"):
                    self.mode = effect["to"]
                return Reply(effect.get("output", ""))
        return Reply(question["question"], question=True)

    def _configure(self, line: str) -> Reply:
        if self.t.config.get("apply", "commit") == "immediate":
            self.device.running.append(line)
        else:
            self.candidate.append(line)
        return Reply(self.t.config.get("line_output", ""))

    def _run(self, entry: Entry, line: str, pipes: list[str], now: float) -> Reply:
        config = self.t.config
        confirming = bool(config.get("confirm_command")) and line == config["confirm_command"]
        if line in config.get("commit", ()) or _matches(config.get("confirmed", ""), line) or confirming:
            return self._commit(line, now)
        if line in config.get("abort", ()):
            self.candidate = []
            self.device.events.append("aborted")
        if entry.paging_off:
            self.paging = False
        if entry.to is not None and entry.to != self.mode:
            if self.candidate and entry.to not in config.get("modes", ()) and line not in config.get("abort", ()):
                if config.get("uncommitted"):
                    return Reply(config["uncommitted"]["question"], question=True)
                if config.get("uncommitted_refused"):
                    return Reply(config["uncommitted_refused"])
            self.mode = entry.to
        if entry.context == "push":
            self.contexts.append(line.split()[-1])
        elif entry.context == "pop" and self.contexts:
            self.contexts.pop()
        elif entry.context == "clear":
            self.contexts = []
        if line in config.get("commit_on", ()):
            self._commit(line, now)
        output = self.render(entry, line) if entry.render else entry.output
        for pipe in pipes:
            output, paging = self._modifier(pipe, entry, output)
            if not paging:
                return Reply(output)
        if entry.repeat:
            return Reply(output, repeat=entry.repeat)
        return self._paged(output)

    def render(self, entry: Entry, line: str) -> str:
        """The output of a command whose answer is the device's state (``render``), for ``line`` as read."""
        if entry.render == "running":
            lines = entry.output.split("\n") if entry.output else []
            end = len(lines) - 1 if lines and lines[-1].strip() == "end" else len(lines)
            return "\n".join([*lines[:end], *self.device.running, *lines[end:]])
        if entry.render == "candidate":
            return "\n".join(self.candidate)
        return entry.output

    def _modifier(self, pipe: str, entry: Entry, output: str) -> tuple[str, bool]:
        words = pipe.split()
        for typed, action in self.t.modifiers.items():
            known = typed.split()
            if len(words) >= len(known) and all(k.startswith(w.casefold()) for k, w in zip(known, words, strict=False)):
                argument = " ".join(words[len(known):])
                lines = output.split("\n")
                if action == "include":
                    return "\n".join(x for x in lines if re.search(argument, x)), True
                if action == "exclude":
                    return "\n".join(x for x in lines if not re.search(argument, x)), True
                if action == "begin":
                    start = next((i for i, x in enumerate(lines) if re.search(argument, x)), len(lines))
                    return "\n".join(lines[start:]), True
                if action == "count":
                    return f"Count: {len([x for x in lines if x.strip()])} lines", True
                if action == "json":
                    if entry.json is None:
                        raise_unknown = self.t.errors.get("no_json", self.t.errors["unknown"])
                        return raise_unknown.format(caret="^", word=pipe, line=pipe), False
                    return entry.json.strip("\n"), True
                if action == "none":
                    return output, False
                if action == "running":  # Junos "| display set": the configuration as set commands
                    return "\n".join(self.device.running), True
        return self.error(CliError("unknown", words[0] if words else "|", 0), pipe), False

    def _commit(self, line: str, now: float) -> Reply:
        config, device = self.t.config, self.device
        confirmed = re.fullmatch(config.get("confirmed", "(?!)"), line)
        if device.pending is not None and not confirmed:
            device.pending = None
            device.events.append("confirmed")
            return Reply(config.get("confirm_output", config.get("commit_output", "")))
        before = list(device.running)
        device.running = before + self.candidate
        self.candidate = []
        if confirmed:
            amount = int(confirmed.group(1)) if confirmed.groups() and confirmed.group(1) else int(
                config.get("confirmed_default", 10))
            device.pending = (before, now + amount * device.seconds_per_unit)
            device.events.append(f"committed, confirmed in {amount}")
            return Reply(config["confirmed_output"].format(n=amount))
        device.events.append("committed")
        if config.get("confirm_command") and line == config["confirm_command"]:
            return Reply(config.get("confirm_output", ""))
        return Reply(config.get("commit_output", ""))

    def _paged(self, output: str) -> Reply:
        lines = output.split("\n")
        size = self.t.page_lines
        if not self.paging or len(lines) <= size:
            return Reply(output)
        chunks = ["\n".join(lines[i : i + size]) for i in range(0, len(lines), size)]
        return Reply(chunks[0], pages=chunks[1:])


def _accepted(config: dict[str, Any], line: str) -> bool:
    return any(re.fullmatch(pattern, line) for pattern in config.get("accept", ()))


def _matches(pattern: str, line: str) -> bool:
    return bool(pattern) and re.fullmatch(pattern, line) is not None


def _word_offset(line: str, index: int) -> int:
    """Where word ``index`` of ``line`` starts (past the end for a missing word)."""
    positions = [m.start() for m in re.finditer(r"\S+", line)]
    return positions[index] if index < len(positions) else len(line.rstrip()) + 1


def families() -> Iterator[str]:
    return (path.stem for path in sorted(TRANSCRIPTS.glob("*.toml")))
