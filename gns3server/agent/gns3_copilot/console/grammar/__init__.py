"""Command grammars: what a device will run, parsed from the line the copilot would type.

One module per CLI family (``linux`` over the shell parser in ``shell``, ``ios``,
``vpcs``, ``frr``, ``bird``), each with ``analyze(line) -> Analysis``; ``patterns`` is the policy
file's pattern language. The policy judges an :class:`Analysis`, never the text.
"""

from __future__ import annotations

from dataclasses import dataclass


class IncompleteLine(ValueError):
    """The line is unfinished: the device would read the next line as part of it."""


class TooComplex(IncompleteLine):
    """Nested deeper than the grammar follows (substitutions, ``sh -c`` in ``sh -c`` ...)."""


@dataclass(frozen=True)
class Analysis:
    """A line as the device reads it.

    ``commands``: every command that may run, nested ones included (substitutions,
    ``sh -c``, ``find -exec``, EEM ``cli command``, ``alias`` bodies ...), as
    canonical words (for Linux the executed binary's base name first), plus
    pseudo-commands for side effects patterns must see: ``> path`` for a file
    written by a redirection, ``= NAME`` for a variable assigned, ``() name`` for a
    function defined, ``| modifier ...`` for an IOS output modifier. A word only
    known at run time (a variable, substitution, glob) is given as ``$`` + its text.

    ``stages``: the line as one plain command, or pipeline of them (Linux filters,
    IOS output modifiers): what read-only mode judges. ``refusals``: what makes the
    line more than that (separators, redirections, substitutions, wrappers ...);
    read-only mode refuses a line that has any. ``readings``: when the line may run
    one of several commands (an FRR abbreviation matching more than one syntax),
    the stages of each; read-only mode allows the line only if it allows every one.
    """

    commands: tuple[tuple[str, ...], ...]
    stages: tuple[tuple[str, ...], ...]
    refusals: tuple[str, ...] = ()
    readings: tuple[tuple[tuple[str, ...], ...], ...] = ()
