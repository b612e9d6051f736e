"""The grammars under the console policy: what a line runs, as each CLI family reads it."""

from __future__ import annotations

import pytest

from gns3server.agent.gns3_copilot.console.grammar import IncompleteLine, ios, linux, vpcs
from gns3server.agent.gns3_copilot.console.grammar.shell import parse


@pytest.mark.parametrize(
    ("line", "commands"),
    [
        ("ls -la", [("ls", "-la")]),
        ("r''e\\boot", [("reboot",)]),
        ('"/usr/sbin/reboot" now', [("reboot", "now")]),
        ("cat a ; rm b", [("cat", "a"), ("rm", "b")]),
        ("a && b || c | d & e", [("a",), ("b",), ("c",), ("d",), ("e",)]),
        ("sudo -u root -- nice -n 5 timeout -s KILL 3 rm -f x", [("rm", "-f", "x")]),
        ("env -i A=1 B=2 ionice -c3 stdbuf -oL rm x", [("=", "A"), ("=", "B"), ("rm", "x")]),
        ("busybox rm x", [("rm", "x")]),
        ("xargs -n1 -I{} rm {}", [("rm", "{}")]),
        ("xargs", [("xargs",), ("echo",)]),
        ("sh -c 'a; b'", [("a",), ("b",)]),
        ("bash -lc \"a | b\"", [("a",), ("b",)]),
        ("sh script.sh -c x", [("sh", "script.sh", "-c", "x")]),
        ("su - root -c 'rm x'", [("rm", "x")]),
        ("eval 'rm x'", [("rm", "x")]),
        ("watch -n 1 'rm x'", [("rm", "x")]),
        ("watch -x rm x", [("rm", "x")]),
        ("find . -name y -exec rm {} \\; -print", [("find", ".", "-name", "y", "-exec", "rm", "{}", ";", "-print"), ("rm", "{}")]),
        ("ip netns exec blue rm x", [("rm", "x")]),
        ("command -v rm", [("command", "-v", "rm")]),
        ("exec rm x", [("exec", "rm", "x"), ("rm", "x")]),
        ("echo $(rm x) `id`", [("echo", "$$(rm x)", "$`id`"), ("rm", "x"), ("id",)]),
        ("cat <(rm x)", [("cat", "$<(rm x)"), ("rm", "x")]),  # the substitution as written
        ("X=1 Y=$(id) ls", [("=", "X"), ("=", "Y"), ("ls",), ("id",)]),
        ("export PATH=/tmp", [("=", "PATH"), ("export", "PATH=/tmp")]),
        ("echo x > /tmp/../etc//hosts 2>&1 >> /dev/null", [(">", "/etc/hosts"), ("echo", "x")]),
        ("echo x > $F", [(">", "$$F"), ("echo", "x")]),
        ("cd /etc; echo x > hosts", [("cd", "/etc"), (">", "$hosts"), ("echo", "x")]),
        ("f() { rm x; }", [("()", "f"), ("rm", "x")]),
        ("function g { rm x; }", [("()", "g"), ("rm", "x")]),
        ("if a; then b; else c; fi", [("a",), ("b",), ("c",)]),
        ("for i in $(id) 2; do rm $i; done", [("rm", "$$i"), ("id",)]),
        ("time -p rm x", [("rm", "x")]),
        ("$CMD x", [("$$CMD", "x")]),
        ("/sbin/re* now", [("$/sbin/re*", "now")]),
        ("!!", [("$!!",)]),
        ("ls # ; rm x", [("ls", "#"), ("rm", "x")]),  # "#" is not taken for a comment: more gets judged
    ],
)
def test_linux_commands(line, commands):
    assert list(linux.analyze(line).commands) == commands


@pytest.mark.parametrize(
    ("line", "refusal"),
    [
        ("ls; ls", "command separators"),
        ("ls &", "background jobs"),
        ("ls > x", "redirections"),
        ("ls 2>&1", "redirections"),
        ("cat <<EOF", "here-documents"),
        ("cat <<< x", "here-strings"),
        ("ls $(pwd)", "command substitutions"),
        ("ls `pwd`", "backticks"),
        ("diff <(ls) x", "process substitutions"),
        ("echo $((1+2))", "arithmetic expansions"),
        ("ls $HOME", "variables"),
        ("echo $'a'", "$'...' quoting"),
        ("ls !$", "history expansion"),
        ("(ls)", "subshells"),
        ("{ ls; }", "shell keywords"),
        ("X=1 ls", "variable assignments"),
        ("sudo ls", "commands that run other commands (sudo)"),
        ("/bin/ls", "path-qualified binaries (/bin/ls)"),
        ("^a^b", "history expansion (^old^new)"),
    ],
)
def test_linux_refusals(line, refusal):
    assert any(r.startswith(refusal) for r in linux.analyze(line).refusals), linux.analyze(line).refusals


def test_linux_plain_pipeline_has_stages_and_no_refusals():
    analysis = linux.analyze("ps aux | grep 'a b' | head -3")
    assert analysis.refusals == ()
    assert analysis.stages == (("ps", "aux"), ("grep", "a b"), ("head", "-3"))
    assert linux.analyze("env").refusals == ()  # env alone prints the environment: no wrapping


@pytest.mark.parametrize(
    "line",
    ["echo 'a", 'echo "a', "echo $'a", "ls \\", "ls |", "ls &&", "ls ||", "echo $(ls", "echo `ls", "echo ${x", "echo $((1",
     "(ls", "ls )", "if a; then b", "while a; do b", "case x in", "{ ls;", "fi", "ls >", "cat <<", "cat <(ls", "| ls"],
)
def test_incomplete_shell_lines(line):
    with pytest.raises(IncompleteLine):
        parse(line)


def test_deep_nesting_is_refused_not_recursed_forever():
    nested = "x"
    for _ in range(3):
        nested = f"sh -c {_quote(nested)}"
    assert linux.analyze(nested).commands == (("x",),)
    # Ten levels, two past the bound (each level triples the line: 15 levels were 21 MB and 48 s of lexing).
    for _ in range(7):
        nested = f"sh -c {_quote(nested)}"
    with pytest.raises(IncompleteLine, match="nested too deeply"):
        linux.analyze(nested)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


@pytest.mark.parametrize(
    ("line", "commands", "stages"),
    [
        ("sh run | i x", [("sh", "run"), ("|", "i", "x")], [("sh", "run"), ("i", "x")]),
        ("do  wr", [("wr",)], [("wr",)]),
        ("do-exec reload", [("reload",)], [("reload",)]),
        # Quotes group on some CLIs only: both readings are judged, read-only takes the quoted one.
        ('sh run | i "a|b"', [("sh", "run"), ("|", "i", '"a|b"'), ("|", "i", '"a'), ("|", 'b"')], [("sh", "run"), ("i", '"a|b"')]),
        ("alias exec z reload", [("alias", "exec", "z", "reload"), ("reload",)], [("alias", "exec", "z", "reload")]),
        ('action 1 cli command "do wr" pattern x', [("action", "1", "cli", "command", '"do', 'wr"', "pattern", "x"), ("wr",)],
         [("action", "1", "cli", "command", '"do', 'wr"', "pattern", "x")]),
        ('action 1 cli command "$c"', [("action", "1", "cli", "command", '"$c"'), ("$$c",)],
         [("action", "1", "cli", "command", '"$c"')]),
        ("cli copy run start", [("cli", "copy", "run", "start"), ("copy", "run", "start")], [("cli", "copy", "run", "start")]),
    ],
)
def test_ios_commands(line, commands, stages):
    analysis = ios.analyze(line)
    assert list(analysis.commands) == commands
    assert list(analysis.stages) == stages


def test_ios_unbalanced_quotes_are_judged_both_ways():
    analysis = ios.analyze('sh run | i "x | redirect nvram:startup-config')
    assert ("|", "redirect", "nvram:startup-config") in analysis.commands
    assert analysis.stages[-1] == ("redirect", "nvram:startup-config")


@pytest.mark.parametrize("line", ["show run > flash:x", "show ver ; reload", "show $(x)", "show `x`", "sh ${x}", "sh ip & x"])
def test_ios_shell_like_characters_are_read_only_refusals(line):
    assert ios.analyze(line).refusals


def test_ios_regex_end_anchor_is_fine():
    assert ios.analyze("sh run | i 0$").refusals == ()


def test_vpcs_is_one_command_and_refuses_odd_characters_for_reading():
    assert vpcs.analyze("show  ip all").commands == (("show", "ip", "all"),)
    assert vpcs.analyze("show ip; quit").refusals
    assert vpcs.analyze("ping 10.0.0.1 -c 3").refusals == ()
