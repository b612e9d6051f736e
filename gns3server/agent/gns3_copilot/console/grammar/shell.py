"""A POSIX/bash command line, parsed as the shell will read it (one line, no execution).

This is the syntax only: words with quotes removed, redirections, operators,
substitutions (parsed recursively: their commands run too), keywords, and what
makes a line incomplete (the shell would read the next line as part of it).
What the words *mean* (wrappers, the binary that runs) is ``linux.py``'s job.

Two choices keep it on the safe side:
- ``#`` never starts a comment: bash only treats it so when ``interactive_comments``
  is on, and reading on past it can only find more to judge.
- ``time`` is left to ``linux.py`` as a wrapper (bash's keyword takes ``-p`` too);
- a word holding anything the shell expands (``$x``, ``$(...)``, backticks, globs,
  ``{a,b}``, ``$'...'``, ``!`` history) is marked ``dynamic``: its value is not known here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from . import IncompleteLine, TooComplex

_OPERATORS = ("&&", "||", ";;&", ";;", ";&", "|&", ";", "&", "|", "(", ")")
_REDIRECTIONS = ("<<<", "<<-", "&>>", "<<", "&>", ">>", ">|", "<>", "<&", ">&", "<", ">")
_METACHARS = set(" \t;&|()<>")
_GLOB = set("*?[")
KEYWORDS = frozenset(
    {"if", "then", "else", "elif", "fi", "case", "esac", "for", "select", "while", "until", "do", "done",
     "in", "function", "coproc", "{", "}", "!", "[[", "]]"}
)
_OPENERS = {"if": "fi", "case": "esac", "for": "done", "select": "done", "while": "done", "until": "done", "{": "}"}
_MAX_NESTING = 32
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=")


@dataclass
class Word:
    text: str  # the value after quote removal (what it is when not dynamic)
    raw: str
    dynamic: bool = False  # holds an expansion, substitution, glob or history reference
    quoted: bool = False
    features: set[str] = field(default_factory=set)


@dataclass
class Redirection:
    op: str
    fd: str
    target: Word | None

    @property
    def writes(self) -> bool:
        """Whether it opens a file for writing (not a duplication of a descriptor)."""
        if self.op in (">&", "<&"):
            return self.target is not None and not re.fullmatch(r"\d+-?|-", self.target.text)
        return self.op in (">", ">>", ">|", "&>", "&>>", "<>")


@dataclass
class Command:
    """A simple command: assignments, words, redirections."""

    assignments: list[Word] = field(default_factory=list)
    words: list[Word] = field(default_factory=list)
    redirections: list[Redirection] = field(default_factory=list)


@dataclass
class Line:
    """A parsed line: its simple commands grouped into pipelines, and what it holds."""

    pipelines: list[list[Command]] = field(default_factory=list)
    nested: list[Line] = field(default_factory=list)  # $(...), `...`, <(...) and >(...) bodies
    operators: list[str] = field(default_factory=list)  # separators and pipes, in order
    keywords: list[str] = field(default_factory=list)
    functions: list[str] = field(default_factory=list)  # names of functions defined
    features: set[str] = field(default_factory=set)

    def all_lines(self) -> list[Line]:
        found = [self]
        for line in self.nested:
            found += line.all_lines()
        return found


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.depth = 0  # nested substitutions and expansions being read

    def enter(self) -> None:
        self.depth += 1
        if self.depth > _MAX_NESTING:
            raise TooComplex("substitutions nested too deeply to judge")

    def peek(self, n: int = 1) -> str:
        return self.text[self.pos : self.pos + n]

    def at_end(self) -> bool:
        return self.pos >= len(self.text)


def parse(text: str) -> Line:
    """Parse one command line; raise :class:`IncompleteLine` if the shell would wait for more."""
    scanner = _Scanner(text)
    line = _parse_line(scanner, closing=None)
    if not scanner.at_end():  # an unmatched ")"
        raise IncompleteLine(f"unexpected {scanner.peek()!r}")
    return line


def _parse_line(s: _Scanner, closing: str | None) -> Line:
    """Parse up to ``closing`` (")" for a substitution body) or the end of the text."""
    line = Line()
    pipeline: list[Command] = []
    command = Command()
    open_blocks: list[str] = []
    depth = 0  # ( ... ) subshells
    dangling = ""  # a && || | waiting for its right-hand command

    def end_command() -> None:
        nonlocal command
        if command.words or command.assignments or command.redirections:
            pipeline.append(command)
        command = Command()

    def end_pipeline() -> None:
        nonlocal pipeline
        end_command()
        if pipeline:
            line.pipelines.append(pipeline)
        pipeline = []

    while True:
        while s.peek() in (" ", "\t") and not s.at_end():
            s.pos += 1
        if s.at_end():
            break
        if closing is not None and s.peek() == closing and depth == 0:
            break
        if s.peek(2) in ("<(", ">("):  # process substitution: a command whose output is a file name
            start = s.pos
            _subcommand(s, line, "an open process substitution")
            line.features.add("process substitution")
            command.words.append(Word("", s.text[start:s.pos], dynamic=True, features={"process substitution"}))
            continue
        op = next((o for o in _REDIRECTIONS if s.text.startswith(o, s.pos)), None)
        fd = ""
        if op is None:
            match = re.compile(r"(\d+|\{[A-Za-z_][A-Za-z0-9_]*\})(?=[<>])").match(s.text, s.pos)
            if match:
                fd = match.group(1)
                s.pos = match.end()
                op = next(o for o in _REDIRECTIONS if s.text.startswith(o, s.pos))
        if op is not None:
            s.pos += len(op)
            line.features.add("heredoc" if op in ("<<", "<<-") else "herestring" if op == "<<<" else "redirection")
            while s.peek() in (" ", "\t") and not s.at_end():
                s.pos += 1
            if s.at_end() or s.peek() in _METACHARS:
                raise IncompleteLine(f"redirection {op!r} without a target")
            target = _word(s, line)
            command.redirections.append(Redirection(op, fd, target))
            continue
        op = next((o for o in _OPERATORS if s.text.startswith(o, s.pos)), None)
        if op is not None:
            s.pos += len(op)
            line.operators.append(op)
            dangling = op if op in ("&&", "||", "|", "|&") else ""
            if op in ("|", "|&"):
                end_command()
                if not pipeline:
                    raise IncompleteLine("a pipe without a command before it")
                line.features.add("pipe")
                continue
            if op == "(":
                empty = re.compile(r"[ \t]*\)").match(s.text, s.pos)
                if empty and len(command.words) == 1 and not command.assignments:
                    line.functions.append(command.words[0].text)  # name() ...
                    s.pos = empty.end()
                    line.features.add("function")
                    command = Command()
                    end_pipeline()
                    continue
                depth += 1
                line.features.add("subshell")
            elif op == ")":
                if depth == 0:
                    if "case" in open_blocks:  # a case pattern's closing parenthesis
                        end_pipeline()
                        continue
                    raise IncompleteLine("unmatched ')'")
                depth -= 1
            else:
                line.features.add("background" if op == "&" else "separator")
            end_pipeline()
            continue
        dangling = ""
        word = _word(s, line)
        if not word.raw:
            raise IncompleteLine(f"unexpected {s.peek()!r}")
        at_start = not command.words
        if at_start and not word.quoted and word.text in KEYWORDS and not command.assignments:
            line.keywords.append(word.text)
            line.features.add("keyword")
            if word.text in _OPENERS:
                open_blocks.append(word.text)
            elif open_blocks and word.text == _OPENERS[open_blocks[-1]]:
                open_blocks.pop()
            elif word.text in ("fi", "esac", "done", "}"):
                raise IncompleteLine(f"unmatched {word.text!r}")
            if word.text == "function":
                line.features.add("function")
                while s.peek() in (" ", "\t") and not s.at_end():
                    s.pos += 1
                if not s.at_end() and s.peek() not in _METACHARS:
                    line.functions.append(_word(s, line).text)
            if word.text in ("for", "select", "case"):
                _skip_to_body(s, line)
            end_pipeline()
            continue
        if at_start and _ASSIGNMENT.match(word.raw):
            command.assignments.append(word)
            line.features.add("assignment")
            continue
        command.words.append(word)
    end_pipeline()
    if depth:
        raise IncompleteLine("unclosed '('")
    if open_blocks:
        raise IncompleteLine(f"{open_blocks[-1]!r} without {_OPENERS[open_blocks[-1]]!r}")
    if dangling:
        raise IncompleteLine(f"the line ends with {dangling!r}")
    return line


def _skip_to_body(s: _Scanner, line: Line) -> None:
    """``for x in a b;`` / ``case w in``: the words up to the body are data, not a command."""
    while not s.at_end():
        while s.peek() in (" ", "\t"):
            s.pos += 1
        if s.at_end() or s.peek() in _METACHARS:
            return
        word = _word(s, line)
        if word.text == "in" and line.keywords[-1] == "case":
            return


def _word(s: _Scanner, line: Line) -> Word:
    """Read one word at ``s.pos`` (quotes, escapes, expansions); nested commands go to ``line.nested``."""
    start = s.pos
    out: list[str] = []
    dynamic = quoted = False
    features: set[str] = set()
    while not s.at_end():
        ch = s.peek()
        if ch in _METACHARS:
            # <( and >( inside a word are process substitutions; other metacharacters end it.
            break
        if ch == "\\":
            if s.pos + 1 >= len(s.text):
                raise IncompleteLine("a trailing backslash continues the line")
            out.append(s.text[s.pos + 1])
            quoted = True
            s.pos += 2
        elif ch == "'":
            end = s.text.find("'", s.pos + 1)
            if end < 0:
                raise IncompleteLine("an open single quote")
            out.append(s.text[s.pos + 1 : end])
            quoted = True
            s.pos = end + 1
        elif ch == '"':
            s.pos += 1
            quoted = True
            while True:
                if s.at_end():
                    raise IncompleteLine("an open double quote")
                c = s.peek()
                if c == '"':
                    s.pos += 1
                    break
                if c == "\\" and s.pos + 1 < len(s.text):
                    nxt = s.text[s.pos + 1]
                    out.append(nxt if nxt in '$`"\\' else "\\" + nxt)
                    s.pos += 2
                elif c in "$`":
                    _expansion(s, line, features)
                    dynamic = True
                elif c == "!":
                    features.add("history")
                    dynamic = True
                    out.append(c)
                    s.pos += 1
                else:
                    out.append(c)
                    s.pos += 1
        elif ch == "$" and s.peek(2) == "$'":
            end = _ansi_c_end(s.text, s.pos + 2)
            out.append(s.text[s.pos + 2 : end])
            features.add("ansi-c quoting")
            dynamic = quoted = True
            s.pos = end + 1
        elif ch in "$`":
            _expansion(s, line, features)
            dynamic = True
        elif ch == "!" and s.pos + 1 < len(s.text) and s.text[s.pos + 1] not in " \t=(":
            features.add("history")
            dynamic = True
            out.append(ch)
            s.pos += 1
        else:
            if ch in _GLOB:
                features.add("glob")
                dynamic = True
            elif ch == "{" and re.match(r"\{[^{}\s]*(?:,|\.\.)[^{}\s]*\}", s.text[s.pos :]):
                features.add("brace expansion")
                dynamic = True
            out.append(ch)
            s.pos += 1
    line.features |= features
    return Word("".join(out), s.text[start : s.pos], dynamic, quoted, features)


def _ansi_c_end(text: str, pos: int) -> int:
    while pos < len(text):
        if text[pos] == "\\":
            pos += 2
            continue
        if text[pos] == "'":
            return pos
        pos += 1
    raise IncompleteLine("an open $'...' quote")


def _subcommand(s: _Scanner, line: Line, unclosed: str) -> None:
    """The command of a ``$(...)``, ``<(...)`` or ``>(...)`` at ``s.pos`` (two characters before
    it): parsed into ``line.nested``, nesting bounded; ``s.pos`` ends past its ``)``."""
    s.enter()
    try:
        s.pos += 2
        nested = _parse_line(s, closing=")")
        if s.at_end():
            raise IncompleteLine(unclosed)
        s.pos += 1
        line.nested.append(nested)
    finally:
        s.depth -= 1


def _expansion(s: _Scanner, line: Line, features: set[str]) -> None:
    """A ``$...`` or backtick expansion at ``s.pos``: skip it, parsing the commands it runs."""
    s.enter()
    try:
        _expansion_at(s, line, features)
    finally:
        s.depth -= 1


def _expansion_at(s: _Scanner, line: Line, features: set[str]) -> None:
    text = s.text
    if text[s.pos] == "`":
        end = s.pos + 1
        body: list[str] = []
        while True:
            if end >= len(text):
                raise IncompleteLine("an open backtick")
            if text[end] == "\\" and end + 1 < len(text):
                body.append(text[end + 1] if text[end + 1] in "$`\\" else text[end : end + 2])
                end += 2
                continue
            if text[end] == "`":
                break
            body.append(text[end])
            end += 1
        inner = _Scanner("".join(body))
        inner.depth = s.depth
        nested = _parse_line(inner, closing=None)
        if not inner.at_end():
            raise IncompleteLine(f"unexpected {inner.peek()!r} in backticks")
        line.nested.append(nested)
        features.add("backtick")
        s.pos = end + 1
        return
    nxt = text[s.pos + 1 : s.pos + 2]
    if text.startswith("$((", s.pos):
        s.pos += 3
        _balanced(s, line, features, "(", ")", 2)
        features.add("arithmetic")
    elif nxt == "(":
        _subcommand(s, line, "an open $(")
        features.add("command substitution")
    elif nxt == "{":
        s.pos += 2
        _balanced(s, line, features, "{", "}", 1)
        features.add("parameter expansion")
    elif nxt and (nxt.isalnum() or nxt in "_@*#?$!-"):
        s.pos += 2
        if nxt.isalpha() or nxt == "_":
            while s.pos < len(text) and (text[s.pos].isalnum() or text[s.pos] == "_"):
                s.pos += 1
        features.add("parameter expansion")
    else:
        s.pos += 1  # a lone "$" is a literal dollar
        return


def _balanced(s: _Scanner, line: Line, features: set[str], opening: str, closing: str, count: int) -> None:
    """Skip to ``count`` closing brackets at depth 0, parsing substitutions met on the way."""
    depth = 0
    while True:
        if s.at_end():
            raise IncompleteLine(f"an open {opening * count}")
        ch = s.peek()
        if ch in "$`":
            _expansion(s, line, features)
            continue
        if ch == "\\":
            s.pos += 2
            continue
        if ch == "'" and opening == "{":
            end = s.text.find("'", s.pos + 1)
            if end < 0:
                raise IncompleteLine("an open single quote")
            s.pos = end + 1
            continue
        s.pos += 1
        if ch == opening:
            depth += 1
        elif ch == closing:
            if depth:
                depth -= 1
            elif count == 1 or s.peek() == closing:
                s.pos += count - 1
                return
