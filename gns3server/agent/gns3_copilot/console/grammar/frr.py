"""An FRR ``vtysh`` line as vtysh reads it: whole-line abbreviation, ``do``, ``| include``.

vtysh resolves abbreviations against whole commands, not word by word: a line runs
the command whose syntax it matches to the end, each typed word a prefix of the
keyword there (or a value of the variable there). So ``w`` alone is ``write`` (the
one command of the enable node starting with ``w`` that may end there: ``write``,
which saves the configuration), and ``wr t`` is ``write terminal``. This module
matches a line against FRR's own command syntaxes, as ``vtysh``'s ``list`` prints
them on this machine (``data/frr-commands.txt``, recorded from Debian's FRR by
``tests/integration/frr_router.py``), and gives every command it can be
(``Analysis.readings``), with full keywords and the values as typed:

- the syntaxes of every node recorded (enable, config, router ospf/bgp ...) are
  tried, since a config batch moves between nodes and vtysh also tries the parent
  nodes of the current one; every match is kept (vtysh would run one, or refuse an
  ambiguous line): stricter, never looser;
- keywords match case-insensitively (vtysh is case-sensitive: a reading it would
  refuse costs nothing but strictness); a line matching no syntax is judged as typed;
- a leading ``do`` (exec commands from config nodes) is dropped; a line starting
  with ``!`` or ``#`` is a comment and runs nothing;
- `` | `` (blanks around it) starts vtysh's output filter, ``include REGEX`` or
  ``exclude REGEX`` (the rest of the line is the expression, ``|`` included: vtysh
  splits at the first one only, and takes no abbreviation of the action), given as a
  ``|`` pseudo-command and as a second stage.

:func:`offers_json` says whether a line has a ``json`` form (its syntax takes
``json`` at the end), for the structured output of the show tool.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib import resources

from . import Analysis

DATA_FILE = "frr-commands.txt"
_TOKEN = re.compile(r"\s+|[<>\[\]{}|]|[^\s<>\[\]{}|]+")
_RANGE = re.compile(r"\((-?\d+)-(-?\d+)\)\Z")
_VARIABLE = re.compile(r"[A-Z][-_A-Z:0-9./]*\Z")
_IPV4 = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}\Z")
_IPV4_PREFIX = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}/\d{1,2}\Z")
_IPV6 = re.compile(r"[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*\Z")
_IPV6_PREFIX = re.compile(r"[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*/\d{1,3}\Z")
_MAC = re.compile(r"(?:[0-9A-Fa-f]{1,4}[:.]){2,5}[0-9A-Fa-f]{1,4}(?:/\d{1,2})?\Z")
_PIPE = " | "
# A typed word only that very keyword takes (no variable): how offers_json asks for "json" itself.
_KEYWORD_ONLY = "\x01"
MAX_READINGS = 64
"""Distinct readings kept for a line (beyond that the line is judged as typed too)."""


# ------------------------------------------------------------------ the syntax of a command


@dataclass(frozen=True)
class Token:
    """A keyword (``show``), a variable (``WORD``, ``A.B.C.D``, ``(1-65535)``), maybe repeated (``LINE...``)."""

    text: str
    keyword: bool
    repeated: bool = False

    def accepts(self, word: str) -> bool:
        if word.startswith(_KEYWORD_ONLY):
            return self.keyword and self.text == word[len(_KEYWORD_ONLY):]
        if self.keyword:
            return self.text.startswith(word.casefold())
        return _value_fits(self.text, word)


def _value_fits(kind: str, word: str) -> bool:
    """Whether ``word`` can be a value of the variable ``kind`` (loosely: stricter readings, never fewer)."""
    bounds = _RANGE.match(kind)
    if bounds:
        return re.fullmatch(r"-?\d+", word) is not None and int(bounds.group(1)) <= int(word) <= int(bounds.group(2))
    if kind == "A.B.C.D":
        return _IPV4.match(word) is not None
    if kind == "A.B.C.D/M":
        return _IPV4_PREFIX.match(word) is not None
    if kind == "X:X::X:X":
        return _IPV6.match(word) is not None
    if kind == "X:X::X:X/M":
        return _IPV6_PREFIX.match(word) is not None
    if kind in ("X:X:X:X:X:X", "X:X:X:X:X:X/M"):
        return _MAC.match(word) is not None
    return True  # WORD, NAME, IFNAME, LINE ...: anything


@dataclass(frozen=True)
class Seq:
    items: tuple[Node, ...]


@dataclass(frozen=True)
class Choice:
    """``<a|b>`` (one of), ``[a|b]`` (optional), ``{a|b}`` (one or more, any order, each once)."""

    options: tuple[Seq, ...]
    optional: bool = False
    repeated: bool = False


Node = Token | Seq | Choice


def parse_syntax(text: str) -> Seq:
    """FRR's command syntax (``clear [ip] bgp <*|A.B.C.D> [soft]``) as a tree (ValueError if unbalanced)."""
    tokens = [t for t in _TOKEN.findall(text) if not t.isspace()]
    seq, end = _sequence(tokens, 0, closer=None)
    if end != len(tokens):
        raise ValueError(f"unbalanced syntax: {text!r}")
    return seq


_CLOSERS = {"<": ">", "[": "]", "{": "}"}


def _sequence(tokens: Sequence[str], pos: int, closer: str | None) -> tuple[Seq, int]:
    items: list[Node] = []
    while pos < len(tokens):
        token = tokens[pos]
        if token == "|" or token == closer:
            break
        if token in _CLOSERS:
            choice, pos = _choice(tokens, pos + 1, token)
            items.append(choice)
            continue
        if token in _CLOSERS.values() or token == "|":
            raise ValueError(f"unexpected {token!r}")
        repeated = token.endswith("...")
        word = token[:-3] if repeated else token
        keyword = not (_VARIABLE.match(word) or _RANGE.match(word))
        items.append(Token(word, keyword, repeated))
        pos += 1
    return Seq(tuple(items)), pos


def _choice(tokens: Sequence[str], pos: int, opener: str) -> tuple[Choice, int]:
    closer = _CLOSERS[opener]
    options: list[Seq] = []
    while True:
        option, pos = _sequence(tokens, pos, closer)
        options.append(option)
        if pos >= len(tokens):
            raise ValueError(f"{opener!r} never closed")
        if tokens[pos] == closer:
            pos += 1
            break
        pos += 1  # "|"
    inner = options[0].items[0] if len(options) == 1 and len(options[0].items) == 1 else None
    if opener == "[" and isinstance(inner, Choice) and inner.repeated:  # [{a|b}]: zero or more
        return Choice(inner.options, optional=True, repeated=True), pos
    return Choice(tuple(options), optional=opener == "[", repeated=opener == "{"), pos


# ------------------------------------------------------------------ matching a line


Reading = tuple[str, ...]


def _match(node: Node, words: Sequence[str], pos: int) -> Iterator[tuple[int, Reading]]:
    """Every way ``node`` takes ``words[pos:...]``: the position after it and the canonical words."""
    if isinstance(node, Token):
        if pos < len(words) and node.accepts(words[pos]):
            yield pos + 1, (node.text if node.keyword else words[pos],)
            if node.repeated:  # LINE...: a value, the words after it too, as typed
                end = pos + 1
                while end < len(words) and node.accepts(words[end]):
                    end += 1
                    yield end, tuple(words[pos:end])
        return
    if isinstance(node, Seq):
        yield from _sequence_match(node.items, words, pos)
        return
    if node.optional:
        yield pos, ()
    if node.repeated:
        yield from _group_match(node.options, words, pos, frozenset())
        return
    for option in node.options:
        for end, got in _sequence_match(option.items, words, pos):
            if end != pos:
                yield end, got


def _group_match(options: Sequence[Seq], words: Sequence[str], pos: int, used: frozenset[int]) -> Iterator[tuple[int, Reading]]:
    """``{a|b|c}``: one or more of the options, in any order, each at most once (as FRR reads it)."""
    for index, option in enumerate(options):
        if index in used:
            continue
        for end, got in _sequence_match(option.items, words, pos):
            if end == pos:
                continue
            yield end, got
            for after, more in _group_match(options, words, end, used | {index}):
                yield after, (*got, *more)


def _sequence_match(items: Sequence[Node], words: Sequence[str], pos: int) -> Iterator[tuple[int, Reading]]:
    if not items:
        yield pos, ()
        return
    head, rest = items[0], items[1:]
    for middle, got in _match(head, words, pos):
        for end, more in _sequence_match(rest, words, middle):
            yield end, (*got, *more)


def _first_keywords(node: Node) -> set[str] | None:
    """The keywords a line of this syntax may start with; None if it may start with a value."""
    if isinstance(node, Token):
        return {node.text} if node.keyword else None
    if isinstance(node, Seq):
        found: set[str] = set()
        for item in node.items:
            first = _first_keywords(item)
            if first is None:
                return None
            found |= first
            if not _may_be_empty(item):
                return found
        return found
    found = set()
    for option in node.options:
        first = _first_keywords(option)
        if first is None:
            return None
        found |= first
    return found


def _may_be_empty(node: Node) -> bool:
    if isinstance(node, Token):
        return False
    if isinstance(node, Seq):
        return all(_may_be_empty(i) for i in node.items)
    return node.optional or any(_may_be_empty(o) for o in node.options)


@dataclass(frozen=True)
class CommandSet:
    """FRR's command syntaxes, indexed by the keywords a line may start with."""

    by_first: dict[str, tuple[Seq, ...]]
    anywhere: tuple[Seq, ...]  # syntaxes that may start with a value (none in FRR 8.4)
    version: str

    def readings(self, words: Sequence[str]) -> list[Reading]:
        """The canonical words of every command ``words`` runs (a complete match), at most MAX_READINGS."""
        if not words:
            return []
        first = words[0].casefold()
        candidates = [s for keyword, syntaxes in self.by_first.items() if keyword.startswith(first) for s in syntaxes]
        found: dict[Reading, None] = {}
        for syntax in (*candidates, *self.anywhere):
            for end, got in _match(syntax, words, 0):
                if end == len(words):
                    found.setdefault(got)
                    if len(found) >= MAX_READINGS:
                        return list(found)
        return list(found)


def read_command_set(text: str) -> CommandSet:
    """The command set of a data file: one syntax a line; ``#`` starts a comment (``# version``, ``# node``)."""
    by_first: dict[str, dict[Seq, None]] = {}
    anywhere: dict[Seq, None] = {}
    version = ""
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("# version "):
            version = line[len("# version "):]
        if not line or line.startswith("#"):
            continue
        syntax = parse_syntax(line)
        first = _first_keywords(syntax)
        if first is None:
            anywhere.setdefault(syntax)
        else:
            for keyword in first:
                by_first.setdefault(keyword, {}).setdefault(syntax)
    return CommandSet({k: tuple(v) for k, v in by_first.items()}, tuple(anywhere), version)


@functools.cache
def commands() -> CommandSet:
    """FRR's commands from the packaged data file, read once per process on first use."""
    return read_command_set(resources.files(__package__).joinpath("data", DATA_FILE).read_text("utf-8"))


# ------------------------------------------------------------------ a whole line


def _head_and_filter(line: str) -> tuple[str, tuple[str, ...] | None]:
    """The command and vtysh's output filter after the first " | " (action and expression), if any."""
    head, pipe, rest = line.partition(_PIPE)
    if not pipe:
        return line, None
    return head, tuple(rest.split())


def _line_readings(head: str, command_set: CommandSet) -> list[Reading]:
    words = head.split()
    while words and words[0].casefold() == "do":
        words = words[1:]
    if not words:
        return [()]
    readings = command_set.readings(words)
    return readings if readings else [tuple(words)]


def analyze(text: str, command_set: CommandSet | None = None) -> Analysis:
    """The commands ``text`` runs in vtysh, every reading of it, and its head and filter as stages."""
    stripped = text.strip()
    if stripped.startswith(("!", "#")):
        return Analysis((), ((),), ())
    head, pipe = _head_and_filter(stripped)
    readings = _line_readings(head, command_set or commands())
    stage_lists = tuple((reading, pipe) if pipe else (reading,) for reading in readings)
    found: list[tuple[str, ...]] = list(readings)
    if pipe is not None:
        found.append(("|", *pipe))
    return Analysis(tuple(dict.fromkeys(found)), stage_lists[0], (), stage_lists)


def offers_json(line: str) -> bool:
    """Whether vtysh has a ``json`` form of ``line`` (a syntax taking ``json`` right after it)."""
    head, pipe = _head_and_filter(line.strip())
    if pipe or not head.split():
        return False
    words = head.split()
    if words[-1].casefold() == "json":
        return True
    return bool(commands().readings([*words, _KEYWORD_ONLY + "json"]))
