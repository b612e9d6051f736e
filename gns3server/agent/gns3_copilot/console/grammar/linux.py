"""A Linux shell line as it will run: the executed binaries after unwrapping wrappers.

``sudo -u x /sbin/reboot`` runs ``reboot``; ``env A=1 nice -n 5 timeout 3 rm f`` runs
``rm``; ``sh -c 'x; y'``, ``eval``, ``watch``, ``su -c``, ``find -exec``, ``xargs``
and ``busybox`` run their argument as a command, parsed in turn. Redirections that
write, assignments and function definitions become pseudo-commands (see
:class:`~.Analysis`). Paths are normalised (``/tmp/../etc`` is ``/etc``).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from . import Analysis, TooComplex
from .shell import Command, Line, Word, parse

_MAX_DEPTH = 8  # sh -c 'sh -c ...' nesting before the line is refused as incomplete

# Wrapper: (short options taking a value, long options taking a value, positionals before the command).
_WRAPPERS: dict[str, tuple[str, frozenset[str], int]] = {
    "sudo": ("uUgpChrtTDR", frozenset({"--user", "--group", "--prompt", "--close-from", "--host", "--role", "--type",
                                       "--command-timeout", "--chdir", "--chroot", "--other-user"}), 0),
    "doas": ("uC", frozenset(), 0),
    "env": ("uCS", frozenset({"--unset", "--chdir", "--split-string"}), 0),
    "exec": ("a", frozenset(), 0),
    "nice": ("n", frozenset({"--adjustment"}), 0),
    "ionice": ("cnp", frozenset({"--class", "--classdata", "--pid"}), 0),
    "stdbuf": ("ioe", frozenset({"--input", "--output", "--error"}), 0),
    "chrt": ("", frozenset(), 1),
    "taskset": ("", frozenset(), 1),
    "timeout": ("sk", frozenset({"--signal", "--kill-after"}), 1),
    "nohup": ("", frozenset(), 0),
    "setsid": ("", frozenset(), 0),
    "time": ("fo", frozenset({"--format", "--output"}), 0),
    "command": ("", frozenset(), 0),
    "builtin": ("", frozenset(), 0),
    "unbuffer": ("", frozenset(), 0),
    "chroot": ("", frozenset({"--userspec", "--groups"}), 1),
    "xargs": ("aEdILnPs", frozenset({"--arg-file", "--delimiter", "--eof", "--max-lines", "--max-args", "--max-procs",
                                      "--max-chars", "--process-slot-var"}), 0),
    "nsenter": ("tSG", frozenset({"--target", "--setuid", "--setgid"}), 0),
    "unshare": ("", frozenset(), 0),
    "strace": ("oeEpPsSuabIX", frozenset(), 0),
    "ltrace": ("oeEpPsSuabIX", frozenset(), 0),
    "runuser": ("ugG", frozenset({"--user", "--group", "--supp-group"}), 0),
    "flock": ("wE", frozenset({"--timeout", "--conflict-exit-code"}), 1),
    "systemd-run": ("pEMu", frozenset({"--property", "--setenv", "--uid", "--gid", "--unit", "--machine"}), 0),
    "watch": ("n", frozenset({"--interval"}), 0),
}
# Options whose value is itself a command line, run by a shell.
_SCRIPT_OPTIONS = {"su": ("c", "--command"), "runuser": ("c", "--command"), "sg": ("c", ""), "flock": ("c", "--command"),
                   "script": ("c", "--command"), "watch": ("", "")}
# Where a system's own programs live: /sbin/reboot is reboot. A program run from anywhere else
# (./s, /tmp/s) is a file whose content no rule can judge; it keeps its path (rule unknown_program).
SYSTEM_BIN_DIRS = frozenset({"/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin"})


def _program(text: str) -> str:
    """The name a command's first word runs: the base name of a system program, else the word."""
    if "/" not in text:
        return text
    directory, base = posixpath.split(posixpath.normpath(text))
    return base if base and directory in SYSTEM_BIN_DIRS else text


SHELLS = frozenset({"sh", "bash", "dash", "ash", "zsh", "ksh", "mksh", "yash", "busybox-sh"})
_DECLARERS = frozenset({"export", "declare", "typeset", "readonly", "local"})
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?:\[[^\]]*\])?\+?=")
_HARMLESS_DEVICES = re.compile(r"/dev/(?:null|zero|stdout|stderr|tty|fd/\d+)")
_FEATURES = {
    "separator": "command separators (; && ||)",
    "background": "background jobs (&)",
    "redirection": "redirections (< > >> 2>&1 ...)",
    "heredoc": "here-documents (<<)",
    "herestring": "here-strings (<<<)",
    "command substitution": "command substitutions $(...)",
    "backtick": "backticks `...`",
    "process substitution": "process substitutions <(...) >(...)",
    "arithmetic": "arithmetic expansions $((...))",
    "parameter expansion": "variables ($NAME, ${...})",
    "ansi-c quoting": "$'...' quoting",
    "history": "history expansion (!)",
    "subshell": "subshells ( ... )",
    "keyword": "shell keywords (if, for, while, { } ...)",
    "function": "function definitions",
    "assignment": "variable assignments (NAME=value)",
}


@dataclass
class _State:
    commands: list[tuple[str, ...]]
    refusals: list[str]
    changes_directory: bool


def analyze(text: str) -> Analysis:
    """What ``text`` runs on a Linux shell.

    Raises :class:`~.IncompleteLine` if the shell would wait for more, and
    :class:`~.TooComplex` past the nesting it follows.
    """
    line = parse(text)
    lines = line.all_lines()
    state = _State([], [], any(_is_cd(c) for l in lines for p in l.pipelines for c in p))
    for feature, message in _FEATURES.items():
        if any(feature in l.features for l in lines):
            state.refusals.append(message)
    _collect(line, state, depth=0)
    stages: tuple[tuple[str, ...], ...] = ()
    if len(line.pipelines) == 1 and not line.nested and not line.keywords and not line.functions:
        stages = tuple(_plain(c, state) for c in line.pipelines[0])
    if text.lstrip().startswith("^"):  # ^old^new: bash re-runs the previous command, edited
        state.commands.append(("$" + text.split()[0],))
        state.refusals.append("history expansion (^old^new)")
    return Analysis(tuple(state.commands), stages, tuple(dict.fromkeys(state.refusals)))


def _is_cd(command: Command) -> bool:
    return bool(command.words) and command.words[0].text in ("cd", "pushd", "popd")


def _plain(command: Command, state: _State) -> tuple[str, ...]:
    """The stage's words as typed; a wrapped or path-qualified binary is a refusal for read-only mode."""
    if command.words and not command.words[0].dynamic:
        name = command.words[0].text
        if "/" in name:
            state.refusals.append(f"path-qualified binaries ({name})")
        elif (name in _WRAPPERS and len(command.words) > 1) or name in SHELLS or name in _SCRIPT_OPTIONS or name in ("eval", "busybox", "find"):
            state.refusals.append(f"commands that run other commands ({name})")
    return tuple(_canonical(w, state) for w in command.words)


def _collect(line: Line, state: _State, depth: int) -> None:
    """Record what ``line`` runs: its functions, commands and substitutions' commands."""
    if depth > _MAX_DEPTH:
        raise TooComplex("commands nested too deeply to judge")
    for name in line.functions:
        state.commands.append(("()", name))
    for pipeline in line.pipelines:
        for command in pipeline:
            _command(command, state, depth)
    for nested in line.nested:
        _collect(nested, state, depth)


def _command(command: Command, state: _State, depth: int) -> None:
    for assignment in command.assignments:
        state.commands.append(_assigned(assignment.raw))
    for redirection in command.redirections:
        if redirection.writes and redirection.target is not None:
            target = _path(redirection.target, state, writing=True)
            if target is not None:
                state.commands.append((">", target))
    _words(list(command.words), state, depth)


def _assigned(raw: str) -> tuple[str, ...]:
    match = _ASSIGNMENT.match(raw)
    return ("=", match.group(1) if match else raw)


def _path(word: Word, state: _State, *, writing: bool = False) -> str | None:
    text = word.text
    if word.dynamic:
        return "$" + word.raw
    if writing and _HARMLESS_DEVICES.fullmatch(posixpath.normpath(text) if text.startswith("/") else text):
        return None
    if text.startswith("/"):
        return "/" + posixpath.normpath(text).lstrip("/")
    if writing and (state.changes_directory or ".." in text.split("/")):
        return "$" + word.raw  # where it lands depends on the directory the shell is in
    return text


def _canonical(word: Word, state: _State) -> str:
    if word.dynamic:
        return "$" + word.raw
    return _path(word, state) or word.text


def _words(words: list[Word], state: _State, depth: int) -> None:
    """Unwrap ``words`` down to the binary that runs; record it (and whatever else it runs)."""
    if depth > _MAX_DEPTH:
        raise TooComplex("commands nested too deeply to judge")
    while words:
        first = words[0]
        if first.dynamic:
            state.commands.append(tuple(_canonical(w, state) for w in words))
            return
        name = _program(first.text)
        args = words[1:]
        if name == "busybox" and args:
            words = args
            continue
        if name == "ip" and [w.text for w in args[:2]] == ["netns", "exec"] and len(args) > 3:
            words = args[3:]
            continue
        if name in SHELLS:
            script = _script_option(args, "c", "", shell=True)
            if script is not None:
                _script(script, state, depth)
                return
        elif name == "eval":
            if any(w.dynamic for w in args):
                state.commands.append(("$eval",) + tuple(_canonical(w, state) for w in args))
            else:
                _script(Word(" ".join(w.text for w in args), ""), state, depth)
            return
        elif name == "sg" and _script_option(args, "c", "") is None:
            if len(args) > 1:  # sg GROUP COMMAND...: the command is run by /bin/sh -c
                _script(Word(" ".join(w.text for w in args[1:]), "", any(w.dynamic for w in args[1:])), state, depth)
                return
        elif name in _SCRIPT_OPTIONS and name != "watch":
            short, long = _SCRIPT_OPTIONS[name]
            script = _script_option(args, short, long)
            if script is not None:
                _script(script, state, depth)
                if name != "flock":
                    return
        elif name == "find":
            state.commands.append((name,) + tuple(_canonical(w, state) for w in args))
            for exec_words in _find_execs(args):
                _words(exec_words, state, depth + 1)
            return
        elif name in _DECLARERS:
            for w in args:
                if _ASSIGNMENT.match(w.raw) or _ASSIGNMENT.match(w.text):
                    state.commands.append(_assigned(w.text))
        if name in _WRAPPERS:
            rest = _skip_options(name, args)
            if name == "sudo" and any(w.text in ("-e", "--edit") or (w.text[:1] == "-" and w.text[1:2] != "-" and "e" in w.text[1:])
                                      for w in args[: len(args) - len(rest)]):
                state.commands.append(("sudoedit",) + tuple(_canonical(w, state) for w in rest))  # sudo -e: an editor
                return
            if name == "exec" and rest:  # the shell is replaced: when the command ends, so does the console
                state.commands.append(("exec",) + tuple(_canonical(w, state) for w in rest))
            if name == "env":
                while rest and _ASSIGNMENT.match(rest[0].text):
                    state.commands.append(_assigned(rest[0].text))
                    rest = rest[1:]
                split = _split_string_option(args)
                if split is not None:
                    _script(split, state, depth)
                    return
            if name == "watch":
                if any(w.text in ("-x", "--exec") for w in args[: len(args) - len(rest)]):
                    words = rest
                    continue
                if rest:
                    _script(Word(" ".join(w.text for w in rest), "", any(w.dynamic for w in rest)), state, depth)
                return
            if name == "command" and any(w.text in ("-v", "-V") for w in args[: len(args) - len(rest)]):
                state.commands.append((name,) + tuple(_canonical(w, state) for w in args))
                return
            if name == "flock" and any(w.text in ("-c", "--command") or w.text.startswith("--command=") for w in args):
                return
            if not rest:
                state.commands.append((name,) + tuple(_canonical(w, state) for w in args))
                if name == "xargs":
                    state.commands.append(("echo",))
                return
            words = rest
            continue
        state.commands.append((name,) + tuple(_canonical(w, state) for w in args))
        return


def _skip_options(name: str, args: Sequence[Word]) -> list[Word]:
    """The words after the wrapper's own options and positionals: the wrapped command."""
    short_values, long_values, positionals = _WRAPPERS[name]
    i = 0
    while i < len(args):
        text = args[i].text
        if text == "--":
            i += 1
            break
        if text.startswith("--"):
            i += 1 if "=" in text or text not in long_values else 2
            continue
        if text.startswith("-") and len(text) > 1 and not (name in ("nice",) and text[1:].isdigit()):
            letters = text[1:]
            takes = next((k for k, ch in enumerate(letters) if ch in short_values), None)
            i += 2 if takes is not None and takes == len(letters) - 1 else 1
            continue
        if name == "sudo" and text.startswith("+"):
            i += 1
            continue
        break
    return list(args[i + positionals :]) if i + positionals <= len(args) else []


def _script_option(args: Sequence[Word], short: str, long: str, *, shell: bool = False) -> Word | None:
    """The value of ``-c`` (also in a bundle like ``-lc``) or ``--command``, if given.

    For a shell (``shell=True``) options end at the first operand: ``sh file -c x``
    runs the script ``file``.
    """
    for i, word in enumerate(args):
        text = word.text
        if long and text.startswith(long + "="):
            return Word(text[len(long) + 1 :], word.raw, word.dynamic)
        if (long and text == long) or (short and text.startswith("-") and not text.startswith("--") and short in text[1:]):
            if i + 1 < len(args):
                return args[i + 1]
            return Word("", "")
        if shell and not text.startswith("-"):
            break
    return None


def _split_string_option(args: Sequence[Word]) -> Word | None:
    for i, word in enumerate(args):
        if word.text in ("-S", "--split-string") and i + 1 < len(args):
            rest = args[i + 1 :]
            return Word(" ".join(w.text for w in rest), "", any(w.dynamic for w in rest))
        if word.text.startswith("--split-string="):
            return Word(word.text.split("=", 1)[1], word.raw, word.dynamic)
        if word.text.startswith("-S") and len(word.text) > 2:
            return Word(word.text[2:], word.raw, word.dynamic)
    return None


def _script(script: Word, state: _State, depth: int) -> None:
    """A command line passed as a string (``sh -c``, ``eval``, ``su -c`` ...): parse and judge it too."""
    if script.dynamic:
        state.commands.append(("$" + (script.raw or script.text),))
        return
    nested = parse(script.text)
    for l in nested.all_lines():
        if any(_is_cd(c) for p in l.pipelines for c in p):
            state.changes_directory = True
    _collect(nested, state, depth + 1)


def _find_execs(args: Sequence[Word]) -> Iterator[list[Word]]:
    """The commands of ``find``'s ``-exec``/``-execdir``/``-ok``/``-okdir`` actions."""
    i = 0
    while i < len(args):
        if args[i].text in ("-exec", "-execdir", "-ok", "-okdir"):
            j = i + 1
            while j < len(args) and args[j].text not in (";", "+"):
                j += 1
            yield list(args[i + 1 : j])
            i = j
        i += 1
