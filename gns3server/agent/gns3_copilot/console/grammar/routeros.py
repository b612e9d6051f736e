"""A MikroTik RouterOS line as the console reads it: menu paths, scripts, substitutions.

RouterOS commands are a menu path and a command (``/system reboot``,
``/system/reboot``, ``/ip address print``); every word resolves unique prefixes
(``/sys reb``; left to the policy's patterns). The path becomes plain words: the
line's words with the leading ``/`` gone and path words split at ``/``
(``/ip/address print`` is ``ip address print``). What else the console reads:

- ``;`` separates commands; ``[ ... ]`` runs a command and uses its value; ``{ ... }``
  is a block of commands (``:do { ... }``, ``:if (...) do={ ... }``): all are judged;
- values that are scripts run later (``source=``, ``on-event=``, ``on-up=``,
  ``on-down=``, ``on-error=``, ``do=``, ``else=``) are judged as commands too;
- a command that does not start with ``/`` or ``:`` runs in the console's current
  menu, which the policy cannot know (another session may have left the console in
  ``/system``, where ``reboot`` reboots): it comes as ``~`` followed by its words, for
  the rule that refuses it (a ``find``/``get`` inside ``[ ]`` is relative to its own
  command's menu and stays plain);
- a word holding ``$`` (a variable) is dynamic: ``$`` and its text.

Read-only mode takes one absolute command with none of the above, and no argument
that writes a file (``file=``) or never ends (``follow``, ``interval=``, ``monitor``
without ``once`` is the rules' to refuse).
"""

from __future__ import annotations

import re

from . import Analysis, IncompleteLine, TooComplex

_MAX_DEPTH = 6
_SCRIPT_VALUES = frozenset({"source", "on-event", "on-up", "on-down", "on-error", "do", "else", "on-login", "on-logout"})
_PATH_WORD = re.compile(r"[A-Za-z][A-Za-z0-9-]*(?:/[A-Za-z][A-Za-z0-9-]*)+/?")
_RELATIVE_IN_VALUE = ("f", "fi", "fin", "find", "g", "ge", "get")
_NEVER_ENDS = ("follow", "follow-only", "interval=", "duration=")
# Plain text to RouterOS (it has no pipes or redirections): never needed to read.
_NOT_FOR_READING = frozenset("<>&|`'\\")


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""


def _read_until(s: _Scanner, closing: str) -> str:
    """The text up to the ``closing`` bracket that matches (quotes and nested brackets skipped)."""
    opening = {"]": "[", "}": "{", ")": "("}[closing]
    depth, start = 1, s.pos
    while s.pos < len(s.text):
        ch = s.text[s.pos]
        if ch == '"':
            _quoted(s)
            continue
        s.pos += 1
        if ch == "\\":
            s.pos += 1
        elif ch == opening:
            depth += 1
        elif ch == closing:
            depth -= 1
            if depth == 0:
                return s.text[start : s.pos - 1]
    raise IncompleteLine(f"unclosed {opening!r}")


def _quoted(s: _Scanner) -> str:
    """A double-quoted string (``s.pos`` on its opening quote), escapes resolved."""
    s.pos += 1
    out: list[str] = []
    while s.pos < len(s.text):
        ch = s.text[s.pos]
        s.pos += 1
        if ch == "\\" and s.pos < len(s.text):
            escaped = s.text[s.pos]
            s.pos += 1
            out.append({"n": "\n", "t": "\t", "r": "\r"}.get(escaped, escaped))
        elif ch == '"':
            return "".join(out)
        else:
            out.append(ch)
    raise IncompleteLine("unclosed quote")


class _Line:
    def __init__(self) -> None:
        self.commands: list[tuple[str, ...]] = []
        self.stages: list[tuple[str, ...]] = []
        self.refusals: list[str] = []


def _tokens(text: str, line: _Line, depth: int) -> list[list[str]]:
    """Split ``text`` into commands (lists of words); nested scripts are judged on the way."""
    s = _Scanner(text)
    commands: list[list[str]] = [[]]
    word: list[str] = []
    dynamic = quoted_value = False

    def end_word() -> None:
        nonlocal word, dynamic, quoted_value
        if word:
            text_ = "".join(word)
            key, equals, value = text_.partition("=")
            if equals and not quoted_value and _is_script_key(key):
                _script(value, line, depth + 1)
            commands[-1].append("$" + text_ if dynamic else text_)
        word, dynamic, quoted_value = [], False, False

    while s.pos < len(s.text):
        ch = s.peek()
        if ch in " \t":
            end_word()
            s.pos += 1
        elif ch == ";":
            end_word()
            commands.append([])
            s.pos += 1
            line.refusals.append("separators (;)")
        elif ch == '"':
            value = _quoted(s)
            if "".join(word).endswith("=") and _is_script_key("".join(word)[:-1]):
                _script(value, line, depth + 1)
                quoted_value = True
            word.append(value)
            if "$" in value:
                dynamic = True
        elif ch in "[{(":
            s.pos += 1
            body = _read_until(s, {"[": "]", "{": "}", "(": ")"}[ch])
            if ch == "(":
                word.append(f"({body})")
                line.refusals.append("expressions")
                continue
            line.refusals.append("substitutions ([ ])" if ch == "[" else "blocks ({ })")
            _script(body, line, depth + 1, in_value=ch == "[")
            word.append(f"[{body}]" if ch == "[" else f"{{{body}}}")
            dynamic = dynamic or ch == "["
        elif ch == "$":
            dynamic = True
            word.append(ch)
            s.pos += 1
            line.refusals.append("variables ($)")
        elif ch == "\\":
            s.pos += 1
            if s.pos >= len(s.text):
                raise IncompleteLine("a trailing backslash continues the line")
            word.append(s.text[s.pos])
            s.pos += 1
        else:
            word.append(ch)
            s.pos += 1
    end_word()
    return [c for c in commands if c]


def _is_script_key(key: str) -> bool:
    """Whether argument ``key`` names a value that is a script (RouterOS takes unique prefixes of
    argument names too, in any case: ``so=`` and ``SOURCE=`` are ``source=``)."""
    key = key.casefold()
    return bool(key) and any(name.startswith(key) for name in _SCRIPT_VALUES)


def _canonical(words: list[str]) -> tuple[str, ...]:
    """A command's words with the path's ``/`` removed (``~`` first for a relative command)."""
    if words[0].startswith((":", "$")):  # a global command, or one known only at run time
        return tuple(words)
    relative = not words[0].startswith("/")
    out: list[str] = ["~"] if relative else []
    for i, word in enumerate(words):
        if i == 0 and word.startswith("/"):
            parts = [p for p in word.split("/") if p]
            out.extend(parts or ["/"])
        elif "=" not in word and _PATH_WORD.fullmatch(word):
            out.extend(p for p in word.split("/") if p)
        else:
            out.append(word)
    return tuple(out)


def _script(text: str, line: _Line, depth: int, in_value: bool = False) -> None:
    """Judge every command ``text`` holds (a script, a block, a substitution)."""
    if depth > _MAX_DEPTH:
        raise TooComplex("scripts nested too deep")
    for words in _tokens(text, line, depth):
        command = _canonical(words)
        if in_value and command[0] == "~" and len(command) > 1 and command[1].casefold() in _RELATIVE_IN_VALUE:
            command = command[1:]  # [find ...] reads its own command's menu
        line.commands.append(command)


def analyze(text: str) -> Analysis:
    """The commands a RouterOS console line runs, and the line as one command for read-only mode."""
    line = _Line()
    commands = _tokens(text, line, 0)
    for words in commands:
        line.commands.append(_canonical(words))
    odd = sorted({ch for ch in text if ch in _NOT_FOR_READING})
    if odd:
        line.refusals.append(f"characters RouterOS does not need for reading ({' '.join(odd)})")
    if len(commands) == 1:
        line.stages = [_canonical(commands[0])]
        if line.stages[0][0] == "~":
            line.refusals.append("a command relative to the current menu (start it with /)")
        for word in commands[0]:
            if word.casefold().startswith("file="):
                line.refusals.append("writing a file (file=)")
            if word.casefold().startswith(_NEVER_ENDS):
                line.refusals.append(f"an output that never ends ({word})")
    return Analysis(tuple(dict.fromkeys(line.commands)), tuple(line.stages), tuple(dict.fromkeys(line.refusals)))
