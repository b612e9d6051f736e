"""What a terminal would show: escape sequences out of the text a CLI sends.

CLIs written for terminals send escape sequences between their text: busybox's
ash asks for the cursor position (``ESC[6n``) right after every prompt, readline
(bash, BIRD's birdc) switches bracketed paste on (``ESC[?2004h``) before its
prompt and redraws lines with "erase to end of line" (``ESC[K``), ``less`` (a
pager vtysh may use) switches to the alternate screen and draws its prompt in
reverse video, some shells set the window title (OSC) or select character sets
(``ESC ( B``). A prompt anchored at the end of the text is never found behind
them, and they must not reach the model either.

:class:`TerminalFilter` removes them from the text as it arrives (incrementally:
a sequence split across two reads is held back until it is whole), for every
family alike. What changes the text of a line is kept in a form :func:`render`
applies: CR, backspace, cursor-left (as backspaces) and the erase-in-line
sequences, as single private-use characters (:data:`ERASE_TO_END` ...), and only
when they erase something (an "erase to end" at the end of what the line holds is
dropped, so a prompt followed by one is still at the end of the text).

Requests the terminal is expected to answer (cursor position ``ESC[6n``, device
status ``ESC[5n``, device attributes ``ESC[c``) are counted, not answered: the
CLIs tried here do not wait for the answer (busybox 1.35's line editor then
assumes the prompt's length), and an answer is text typed into the CLI, which a
console replaying an old request (a serial console's buffer) would read as input.
"""

from __future__ import annotations

import re

ERASE_TO_END = "\ue000"
"""``ESC[K`` / ``ESC[0K``: erase from the cursor to the end of the line."""
ERASE_LINE = "\ue001"
"""``ESC[2K``: erase the whole line (the cursor stays where it is)."""
ERASE_TO_START = "\ue002"
"""``ESC[1K``: erase from the start of the line to the cursor."""
MARKERS = ERASE_TO_END + ERASE_LINE + ERASE_TO_START

# Longest sequence held back while waiting for its end; a longer one is dropped as it is.
MAX_SEQUENCE = 4096
_TAB = 8

# The next character that is not plain text: C0 controls, DEL, C1 controls.
_SPECIAL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_CSI = re.compile(r"(?:\x1b\[|\x9b)([0-?]*)([ -/]*)([@-~])")
_CSI_OPEN = re.compile(r"(?:\x1b\[|\x9b)[0-?]*[ -/]*\Z")
# OSC ends at BEL or ST (ESC \ or its C1 form); DCS, SOS, PM and APC end at ST.
_STRING = re.compile(r"(?:\x1b\]|\x9d)(?:[^\x07\x1b\x9c]|\x1b(?!\\))*(?:\x07|\x1b\\|\x9c)"
                     r"|(?:\x1b[PX^_]|[\x90\x98\x9e\x9f])(?:[^\x1b\x9c]|\x1b(?!\\))*(?:\x1b\\|\x9c)")
_STRING_OPEN = re.compile(r"\x1b[\]PX^_]|[\x9d\x90\x98\x9e\x9f]")
# ESC, intermediates (charset selects ESC ( B, ESC # 8 ...), a final: every other escape.
_ESCAPE = re.compile(r"\x1b[ -/]*[0-~]")
_ESCAPE_OPEN = re.compile(r"\x1b[ -/]*\Z")


class TerminalFilter:
    """Strips escape sequences from a stream of decoded text (see the module docstring).

    ``feed`` returns the text ready to be searched for prompts; what it cannot
    decide yet (an escape sequence cut by the end of a read) waits for the next
    ``feed``. ``requests`` counts the answers the CLI asked the terminal for.
    """

    def __init__(self) -> None:
        self._held = ""
        self._column = 0  # where the cursor is on the current line
        self._length = 0  # how much the current line holds
        self.requests = 0

    def feed(self, text: str) -> str:
        text, self._held = self._held + text, ""
        out: list[str] = []
        pos = 0
        while True:
            special = _SPECIAL.search(text, pos)
            end = special.start() if special else len(text)
            if end > pos:
                self._write(end - pos)
                out.append(text[pos:end])
            if special is None:
                return "".join(out)
            pos = self._control(text, end, out)
            if pos < 0:  # an incomplete sequence: kept for the next feed
                self._held = text[end:]
                return "".join(out)

    def _write(self, count: int) -> None:
        self._column += count
        self._length = max(self._length, self._column)

    def _control(self, text: str, pos: int, out: list[str]) -> int:
        """Handle the control character at ``pos``; the position after it, or -1 if it is cut off."""
        char = text[pos]
        if char == "\n":
            self._column = self._length = 0
            out.append(char)
        elif char == "\r":
            self._column = 0
            out.append(char)
        elif char == "\b":
            self._column = max(self._column - 1, 0)
            out.append(char)
        elif char == "\t":
            self._write(_TAB - self._column % _TAB)
            out.append(char)
        elif char in "\x1b\x9b\x9d\x90\x98\x9e\x9f":
            return self._sequence(text, pos, out)
        # Any other control (NUL, BEL, SO/SI, DEL, form feed ...) shows nothing.
        return pos + 1

    def _sequence(self, text: str, pos: int, out: list[str]) -> int:
        csi = _CSI.match(text, pos)
        if csi:
            self._csi(csi.group(1), csi.group(2), csi.group(3), out)
            return csi.end()
        string = _STRING.match(text, pos)
        if string:
            return string.end()
        if _CSI_OPEN.match(text, pos) or _ESCAPE_OPEN.match(text, pos):
            return -1 if len(text) - pos < MAX_SEQUENCE else pos + 1
        if _STRING_OPEN.match(text, pos):
            # An OSC or DCS not ended yet: wait for its end, unless it never comes.
            return -1 if len(text) - pos < MAX_SEQUENCE else pos + 1
        escape = _ESCAPE.match(text, pos)
        return escape.end() if escape else pos + 1

    def _csi(self, params: str, intermediates: str, final: str, out: list[str]) -> None:
        """What one control sequence changes in the text of the line."""
        if intermediates or params.startswith(("?", ">", "<", "=")):
            return  # private modes (bracketed paste, alternate screen ...): nothing shown
        numbers = [int(p) if p.isdigit() else 0 for p in params.split(";")] if params else []
        first = numbers[0] if numbers else 0
        if final == "K":
            if first == 0 and self._column < self._length:
                out.append(ERASE_TO_END)
                self._length = self._column
            elif first == 1 and self._column > 0:
                out.append(ERASE_TO_START)
            elif first == 2 and self._length > 0:
                out.append(ERASE_LINE)
                self._length = 0
            else:
                return
            if self._column == 0:
                # A line redrawn from its start ("\r", erase, prompt): the CR again after the
                # marker, so that a prompt still follows a CR as its pattern expects.
                out.append("\r")
        elif final == "D":  # cursor left: what a backspace does
            steps = min(max(first, 1), self._column)
            self._column -= steps
            out.append("\b" * steps)
        elif final == "G" and first <= 1:  # to the first column: a CR
            self._column = 0
            out.append("\r")
        elif final == "c" or (final == "n" and first in (5, 6)):
            self.requests += 1


def strip(text: str) -> str:
    """``text`` without escape sequences and other controls (one piece of text, nothing held back)."""
    return render(TerminalFilter().feed(text))  # a sequence cut off at the end is dropped


def render(text: str) -> str:
    """The lines as a terminal shows them: CR returns to the line's start (what follows
    overwrites), backspace moves left, the erase markers erase; line ends are ``\\n``."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.endswith("\r"):
            line = line.rstrip("\r")
        if "\r" in line or "\b" in line or any(m in line for m in MARKERS):
            line = _render_line(line)
        lines[i] = line
    return "\n".join(lines)


def _render_line(line: str) -> str:
    cells: list[str] = []
    column = 0
    for char in line:
        if char == "\r":
            column = 0
        elif char == "\b":
            column = max(column - 1, 0)
        elif char == ERASE_TO_END:
            del cells[column:]
        elif char == ERASE_LINE:
            cells = []  # blanks: what is written later at the cursor is padded to it
        elif char == ERASE_TO_START:
            cells[: column + 1] = [" "] * min(column + 1, len(cells))
        else:
            if column < len(cells):
                cells[column] = char
            else:
                cells.extend(" " * (column - len(cells)))
                cells.append(char)
            column += 1
    return "".join(cells)
