"""The terminal filter: escape sequences out of what a CLI sends, however it is cut into reads."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gns3server.agent.gns3_copilot.console.terminal import (
    ERASE_LINE,
    ERASE_TO_END,
    MAX_SEQUENCE,
    TerminalFilter,
    render,
    strip,
)

# What the real CLIs sent, recorded on this machine (busybox ash, birdc, vtysh with VTYSH_PAGER=less, bash).
ASH = "echo hi\r\nhi\r\n/ # \x1b[6n"
BIRDC = ("show status\r\n\x1b[?2004l\r\x1b[?2004hbird> \r\x1b[KBIRD 2.0.12\r\nRouter ID is 10.0.0.1\r\n"
         "Daemon is up and running\r\nbird> ")
LESS = ("\r\nHello, this is FRRouting (version 8.4.4).\r\n\r\n\x1b[?1049h\x1b[22;0;0t\x1b[?1h\x1b=\r\r\x1b[K"
        "\x1b[7m(END)\x1b[27m\x1b[K\r\x1b[K\x1b[?1l\x1b>\x1b[?1049l\x1b[23;0;0tR1# ")
BASH = "\x1b[?2004hroot@copilot-test:~# "


@pytest.mark.parametrize(
    ("raw", "filtered"),
    [
        (ASH, "echo hi\r\nhi\r\n/ # "),  # the cursor position request after the prompt
        (BASH, "root@copilot-test:~# "),  # bracketed paste before it
        ("\x1b[1mbold\x1b[0m \x1b[38;5;196mred\x1b[m", "bold red"),  # SGR, 256 colours
        ("\x1b]0;user@host: ~\x07ok", "ok"),  # OSC ended by BEL
        ("\x1b]2;title\x1b\\ok", "ok"),  # OSC ended by ST
        ("\x1bPq#0;2;0;0;0\x1b\\ok", "ok"),  # DCS
        ("\x1b(B\x1b)0\x1b#8ok\x1b=\x1b>\x1b7\x1b8", "ok"),  # charset selects, keypad modes, save/restore cursor
        ("\x9b31mC1\x9b0m", "C1"),  # 8-bit CSI
        ("a\x07b\x00c\x0ed\x0fe", "abcde"),  # BEL, NUL, shift out/in
        ("abc\x1b[2Dx", "abc\b\bx"),  # cursor left: backspaces
        ("abc\x1b[1Gx", "abc\rx"),  # to the first column: a CR
    ],
)
def test_sequences_are_removed(raw, filtered):
    assert TerminalFilter().feed(raw) == filtered


def test_an_erase_is_kept_only_when_it_erases_and_a_prompt_still_follows_a_cr():
    # At the end of what the line holds an "erase to end" erases nothing: dropped, so the
    # prompt stays at the end of the text. Over a line redrawn from its start: kept, then the CR again.
    assert TerminalFilter().feed("R1# \x1b[K") == "R1# "
    assert TerminalFilter().feed("(END)\r\x1b[KR1# ") == f"(END)\r{ERASE_TO_END}\rR1# "
    assert TerminalFilter().feed("abc\x1b[2K") == f"abc{ERASE_LINE}"


def test_cursor_and_device_status_requests_are_counted_not_answered():
    terminal = TerminalFilter()
    terminal.feed(ASH + "\x1b[5n\x1b[c")
    assert terminal.requests == 3


@pytest.mark.parametrize("raw", [ASH, BIRDC, LESS, BASH + "\x1b]0;t\x07x\x1b[31my"])
def test_a_sequence_cut_between_two_reads_is_held_until_whole(raw):
    whole = TerminalFilter().feed(raw)
    for cut in range(len(raw) + 1):
        terminal = TerminalFilter()
        assert terminal.feed(raw[:cut]) + terminal.feed(raw[cut:]) == whole, cut


@given(st.lists(st.integers(0, 400), max_size=8))
def test_any_cuts_give_the_same_text(cuts):
    raw = ASH + BIRDC + LESS
    terminal = TerminalFilter()
    pieces, last = [], 0
    for cut in sorted(c % (len(raw) + 1) for c in cuts):
        pieces.append(terminal.feed(raw[last:cut]))
        last = cut
    pieces.append(terminal.feed(raw[last:]))
    assert "".join(pieces) == TerminalFilter().feed(raw)


def test_an_unended_string_is_dropped_past_its_limit():
    terminal = TerminalFilter()
    assert terminal.feed("\x1b]0;" + "x" * 10) == ""  # held: its end may come
    assert terminal.feed("y" * MAX_SEQUENCE).endswith("y" * 100)  # never ended: the text goes on


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("one\r\ntwo\r\n", "one\ntwo\n"),
        ("10%\r20%\r100%", "100%"),  # a progress counter redrawn in place
        (f"bird> \r{ERASE_TO_END}BIRD 2.0.12", "BIRD 2.0.12"),  # birdc's waiting prompt, erased
        (f"bird> \r{ERASE_TO_END}ok", "ok"),
        ("abc\b\bX", "aXc"),
        (f"long line\r{ERASE_LINE}\rhi", "hi"),
    ],
)
def test_render_shows_lines_as_a_terminal_does(text, shown):
    assert render(text) == shown


def test_strip_cleans_one_piece_of_text():
    assert strip(BIRDC).splitlines()[1:] == ["BIRD 2.0.12", "Router ID is 10.0.0.1", "Daemon is up and running", "bird> "]
