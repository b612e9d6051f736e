"""The FRR and BIRD families as data: their grammars (abbreviations resolved from the real
command tables recorded on this machine), their policy rules, and how a family is described."""

from __future__ import annotations

import re
from typing import get_args

import pytest

from gns3server.agent.gns3_copilot.console import DRIVERS, FRR, PolicyError, load_policy
from gns3server.agent.gns3_copilot.console.families import load_drivers
from gns3server.agent.gns3_copilot.console.grammar import bird, frr
from gns3server.agent.gns3_copilot.tools.console import DriverName


def test_every_driver_can_be_named_by_the_tools():
    assert set(DRIVERS) < set(get_args(DriverName)) == set(load_drivers())


@pytest.mark.parametrize(
    ("syntax", "line", "reading"),
    [
        ("clear [ip] bgp <*|A.B.C.D|WORD> [soft]", "cl b *", ("clear", "bgp", "*")),
        ("clear [ip] bgp <*|A.B.C.D|WORD> [soft]", "clear ip bgp 10.0.0.1 so", ("clear", "ip", "bgp", "10.0.0.1", "soft")),
        ("[no] debug pbr [{map|zebra|nht}]", "no deb pbr z m", ("no", "debug", "pbr", "zebra", "map")),
        ("find REGEX...", "find a b c", ("find", "a", "b", "c")),
        ("terminal length (0-512)", "ter len 24", ("terminal", "length", "24")),
        ("show yang operational-data XPATH [{format <json|xml>|with-config}]<zebra|bgpd>", "show yang o /x b",
         ("show", "yang", "operational-data", "/x", "bgpd")),
    ],
)
def test_a_syntax_matches_lines_as_vtysh_does(syntax, line, reading):
    commands = frr.read_command_set(syntax)
    assert commands.readings(line.split()) == [reading]


@pytest.mark.parametrize("line", ["terminal length 999", "clear ip bgp", "find", "debug pbr extra"])
def test_lines_that_match_no_syntax_have_no_reading(line):
    commands = frr.read_command_set("terminal length (0-512)\nclear [ip] bgp <*|A.B.C.D>\nfind REGEX...\n[no] debug pbr [{map}]")
    assert commands.readings(line.split()) == []


@pytest.mark.parametrize(
    ("line", "commands"),
    [
        # Whole-line resolution in FRR 8.4's own syntaxes: w alone can only end as write.
        ("w", (("write",),)),
        ("w t", (("write", "terminal"),)),
        ("w m", (("write", "memory"),)),
        ("do sh run", (("show", "running-config"),)),
        ("sh run | include ^router", (("show", "running-config"), ("|", "include", "^router"))),
        ("show version | include a | exclude b", (("show", "version"), ("|", "include", "a", "|", "exclude", "b"))),
        ("! a comment", ()),
        ("start-shell", (("start-shell",),)),  # not in Debian's build: judged as typed
    ],
)
def test_the_frr_grammar_on_the_recorded_commands(line, commands):
    assert frr.analyze(line).commands == commands


def test_the_recorded_commands_are_frrs_and_hold_what_the_driver_types():
    table = frr.commands()
    assert table.version.startswith("FRRouting 8.4")
    for line in (*FRR.setup, *FRR.config_enter, *FRR.config_exit, *FRR.enable):
        assert table.readings(line.split()), line  # a complete command, not a guess


@pytest.mark.parametrize(("line", "offered"), [
    ("show ip ospf neighbor", True), ("sh ip bgp sum", True), ("show ip route json", True),
    ("show running-config", False), ("show version", False), ("show ip route | include x", False),
])
def test_json_forms_are_the_ones_vtysh_has(line, offered):
    assert frr.offers_json(line) is offered
    assert FRR.structured is not None and FRR.structured.request("show ip ospf") == "show ip ospf json"


@pytest.mark.parametrize(("line", "expanded"), [
    ("do", ("down",)), ("dis bgp1", ("disable", "bgp1")), ("sh pro a x", ("show", "protocols", "all", "x")),
    ("d", ("d",)), ("sh st", ("show", "st")), ("show route for 10.0.0.1", ("show", "route", "for", "10.0.0.1")),
])
def test_the_bird_grammar_expands_as_birdc(line, expanded):
    assert bird.analyze(line).commands == (expanded,)


@pytest.fixture(scope="module")
def policy():
    return load_policy()


@pytest.mark.parametrize(
    ("family", "line", "instead"),
    [
        ("linux", "ping 10.0.0.1", "ping 10.0.0.1 -c 5"),
        ("linux", "vmstat 1", "vmstat 1 5"),
        ("frr", "ping 10.0.0.1", "traceroute 10.0.0.1"),
        ("frr", "ping ip 10.0.0.1", "traceroute ip 10.0.0.1"),
        ("linux", "cat", None),
        ("linux", "tail -f /var/log/syslog", "tail -n 50 FILE"),
        ("vpcs", "ping 10.0.0.2 -t", None),
    ],
)
def test_a_command_that_never_ends_is_refused_with_what_to_send(policy, family, line, instead):
    decision = policy.check(line, family=family, read_only=True)
    assert not decision.allowed and "never ends by itself" in decision.reason and "instead" in decision.reason
    assert policy.check(line, family=family, read_only=False).allowed  # approved: it runs and is interrupted
    if instead is not None:
        assert f"`{instead}`" in decision.reason
        if "FILE" not in instead:
            assert policy.check(instead, family=family, read_only=True).allowed  # the alternative is a read


@pytest.mark.parametrize(
    ("family", "line", "how"),
    [
        ("frr", "clear ip ospf process", "as `do clear ip ospf process`"),
        ("frr", "clear bgp *", "as `do clear bgp *`"),
        ("frr", "no router bgp 65001", ""),
        ("frr", "w", ""),
        ("bird", "dis bgp1", ""),
        (None, "w", ""),  # a CLI the policy does not know: "w" is who on Linux, write in vtysh
    ],
)
def test_what_needs_approval_says_so_in_read_only_mode(policy, family, line, how):
    decision = policy.check(line, family=family, read_only=True)
    assert not decision.allowed and "needs the user's approval" in decision.reason, decision
    assert how in decision.reason
    assert policy.check(line, family=family, read_only=False).allowed


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[unbounded.x]\nlinux = { commands = ["ping ..."] }', "instead"),
        ('[unbounded.x]\nlinux = { commands = ["ping ..."], instead = "{host}" }', "{line} and {args}"),
        ('[unbounded.x]\nnosuch = { commands = ["ping ..."], instead = "x" }', "unknown keys"),
        ('[needs_approval.x]\nfrr = ["clear ..."]\ninstead = "{nope}"', "{line}"),
        ('[read_only]\nfrr = ["show ..."]\n[read_only.followers]\nnosuch = ["x"]', "families"),
    ],
)
def test_bad_new_tables_are_refused(tmp_path, text, message):
    path = tmp_path / "policy.toml"
    path.write_text(text)
    with pytest.raises(PolicyError, match=re.escape(message)):
        load_policy(path)
