"""The console command policy: families, dangerous rules, read-only mode, the file and its patterns."""

from __future__ import annotations

import pytest

from gns3server.agent.gns3_copilot.console import DRIVERS, PolicyError, load_policy
from gns3server.agent.gns3_copilot.console.families import FAMILY_NAMES
from gns3server.agent.gns3_copilot.console.grammar.patterns import Pattern, PatternError
from gns3server.agent.gns3_copilot.console.policy import FAMILIES


@pytest.mark.parametrize(
    ("family", "command", "rule"),
    [
        ("ios", "rel", "reload"),
        ("ios", "Reload in 5", "reload"),
        ("ios", "do reload", "reload"),
        ("ios", "wr er", "erase"),
        ("ios", "copy run start", "startup_config"),
        ("ios", "debug all", "debug_all"),
        ("linux", "mkfs.ext4 /dev/sda1", "erase"),
        ("linux", "rm -rf /", "delete"),
        ("vpcs", "quit", "leave_console"),
        ("vpcs", "!ls", "host_access"),
    ],
)
@pytest.mark.parametrize("read_only", [True, False])
def test_dangerous_commands_are_blocked_in_every_mode(policy, family, command, rule, read_only):
    decision = policy.check(command, family=family, read_only=read_only)
    assert not decision.allowed
    assert decision.reason.startswith(f"blocked by policy ({rule}):")


def test_rules_are_per_family(policy):
    # "shutdown" is an interface command on IOS, and powers a Linux host off.
    assert policy.check("shutdown", family="ios", read_only=False).allowed
    assert not policy.check("shutdown", family="linux", read_only=False).allowed
    # "sh ip" is show on IOS and VPCS; on Linux it would start a shell reading a script "ip".
    assert policy.check("sh ip", family="vpcs", read_only=True).allowed
    assert policy.check("sh ip", family="ios", read_only=True).allowed
    assert "(scripts)" in policy.check("sh ip", family="linux", read_only=False).reason


def test_without_a_family_every_grammar_must_agree(policy):
    """A caller that does not know the device gets the strictest answer for danger."""
    assert not policy.check("shutdown", read_only=False).allowed  # dangerous on Linux
    assert not policy.check("sh ip int br", read_only=False).allowed  # a shell on Linux
    assert policy.check("uname -s", read_only=True).allowed  # read-only on Linux, harmless elsewhere
    assert not policy.check("echo $((6*7))", read_only=True).allowed


@pytest.mark.parametrize(("command", "read_only"), [
    ("show run", True), ("show interfaces | include up", True), ("show ip route", True), ("show version", True),
    ("ping 10.0.0.2", True), ("int lo 0", False), ("shut", False), ("no shut", False),
    ("ip address 10.0.0.1 255.255.255.0", False), ("router ospf 1", False),
    ("network 10.0.0.0 0.0.0.255 area 0", False), ("hostname R1", False), ("end", False),
])
def test_an_ios_node_whose_cli_is_not_known_keeps_its_everyday_commands(policy, command, read_only):
    """A QEMU node's line is judged in all fifteen grammars: the vendor families' rules must not
    refuse what engineers type on IOS every day (RouterOS's relative commands caught "run" and
    "up" anywhere in a line, and "shut", before their patterns were narrowed to a command's start)."""
    assert policy.check(command, read_only=read_only).allowed, policy.check(command, read_only=read_only).reason


def test_do_is_down_to_birdc_so_a_node_whose_cli_is_not_known_refuses_it(policy):
    """birdc expands "do" to "down" (and BIRD shuts down on "down /* a comment */"): judged in every
    grammar, "do show ..." is refused; a node known to be IOS keeps it."""
    assert "(reload)" in policy.check("do show ip route", read_only=False).reason
    assert policy.check("do show ip route", family="ios", read_only=False).allowed


def test_unknown_family_is_a_value_error_naming_the_field(policy):
    with pytest.raises(ValueError, match="family"):
        policy.check("show ip", family="cisco", read_only=True)


@pytest.mark.parametrize(
    ("family", "command"),
    [("ios", "conf t"), ("ios", "interface e0/0"), ("vpcs", "ip 10.0.0.1/24 10.0.0.254"), ("vpcs", "set pcname PC9"),
     ("linux", "ip addr add 10.0.0.1/24 dev eth0"), ("ios", "copy run tftp:"), ("ios", "debug ip packet")],
)
def test_read_only_mode_blocks_configuration_commands(policy, family, command):
    decision = policy.check(command, family=family, read_only=True)
    assert not decision.allowed and decision.reason.startswith("read-only mode")
    assert policy.check(command, family=family, read_only=False).allowed


def test_read_only_mode_refuses_config_mode_even_for_show(policy):
    assert not policy.check("show ip", family="ios", read_only=True, config_mode=True).allowed
    assert policy.check("show ip", family="ios", read_only=False, config_mode=True).allowed


@pytest.mark.parametrize(
    ("command", "why"),
    [
        ("cat /etc/hostname ; reboot", "(reload)"),
        ("ls `halt`", "(reload)"),
        ("netstat -an > /etc/passwd", "(system_files)"),
        ("cat /etc/hosts > /tmp/x", "redirections"),
        ("ls ; ls", "command separators"),
        ("ls $(pwd)", "command substitutions"),
        ("ls $HOME", "variables"),
        ("X=1 ls", "variable assignments"),
        ("sudo ls", "commands that run other commands (sudo)"),
        ("/bin/ls", "path-qualified binaries (/bin/ls)"),
        ("ls | tee /tmp/x", "pipes into anything but {grep|"),
        ("ps | sort -o /tmp/x", "sort -o is not allowed"),
        ("ps | sort --out=/tmp/x", "sort --output is not allowed"),
        ("ss -tK", "ss -K is not allowed"),
        ("cat <<EOF", "here-documents"),
        ("ls &", "background jobs"),
    ],
)
def test_linux_read_only_is_one_allow_listed_command(policy, command, why):
    decision = policy.check(command, family="linux", read_only=True)
    assert not decision.allowed and why in decision.reason, decision.reason


def test_ios_output_modifiers_in_read_only(policy):
    for modifier in ("include", "i", "inc", "exclude", "e", "begin", "b", "section", "s", "count", "c"):
        assert policy.check(f"sh run | {modifier} x", family="ios", read_only=True).allowed, modifier
    for modifier in ("redirect flash:x", "tee flash:x", "append flash:x", "archive", "format x", "xyz", ""):
        decision = policy.check(f"sh run | {modifier}", family="ios", read_only=True)
        assert not decision.allowed and "output modifiers" in decision.reason, modifier


def test_abbreviations_need_their_minimum_and_must_be_prefixes(policy):
    assert policy.check("re", family="ios", read_only=False).allowed  # ambiguous on IOS (reload, resume ...)
    assert policy.check("reloadx", family="ios", read_only=False).allowed  # not a prefix of reload
    assert policy.check("copy run tftp:", family="ios", read_only=False).allowed
    assert not policy.check("copy flash:x st", family="ios", read_only=False).allowed
    assert policy.check("w", family="ios", read_only=False).allowed  # where, which-route, write: ambiguous


@pytest.mark.parametrize("command", ["show ip\t", "show ip \t ", "\tshow ip", "show ip   "])
def test_surrounding_blanks_and_a_trailing_tab_are_not_part_of_the_command(policy, command):
    assert policy.check(command, family="ios", read_only=True).allowed


@pytest.mark.parametrize("command", ["show ip\nreload", "show ip\rconf t", "show\x1a", "sh\tip", "show ip\x1b[A", "ls\x00"])
def test_control_characters_are_blocked(policy, command):
    decision = policy.check(command, family="ios", read_only=False)
    assert not decision.allowed and "control characters" in decision.reason


def test_incomplete_lines_are_blocked_whatever_is_allowed(tmp_path):
    path = tmp_path / "policy.toml"
    path.write_text('allow = ["reload", "scripts", "redefine", "dynamic_command"]\n')
    policy = load_policy(path)
    for command in ("echo 'a", "ls \\", "if true; then ls", "ls &&"):
        decision = policy.check(command, family="linux", read_only=False)
        assert not decision.allowed and "incomplete" in decision.reason


def test_admin_file_allows_reload_and_keeps_the_rest(tmp_path):
    path = tmp_path / "policy.toml"
    path.write_text('allow = ["reload"]\n')
    policy = load_policy(path)
    assert policy.check("rel", family="ios", read_only=False).allowed
    assert policy.check("sudo reboot", family="linux", read_only=False).allowed
    assert policy.check("reload", family="ios", read_only=True).reason.startswith("read-only mode")
    assert not policy.check("wr er", family="ios", read_only=False).allowed
    # An allowed rule lets its own commands through, not whatever a line holds besides.
    assert "(delete)" in policy.check("reboot; rm -rf /", family="linux", read_only=False).reason
    assert policy.source == str(path)


def test_admin_file_can_replace_rules_with_legacy_patterns(tmp_path):
    path = tmp_path / "policy.toml"
    path.write_text(
        '[dangerous.shut]\npatterns = ["shut[down]"]\nreason = "takes links down"\n'
        '[read_only]\nallowed = ["sh[ow]"]\n'
    )
    policy = load_policy(path)
    for family in ("ios", "linux", "vpcs"):  # "patterns" and "allowed" apply to every family
        assert not policy.check("shut", family=family, read_only=False).allowed
        assert policy.check("sh ip", family=family, read_only=True).allowed or family == "linux"
    assert policy.check("reload", family="ios", read_only=False).allowed
    assert not policy.check("ping 10.0.0.1", family="ios", read_only=True).allowed


def test_admin_file_with_per_family_lists(tmp_path):
    path = tmp_path / "policy.toml"
    path.write_text(
        '[dangerous.no_vi]\nlinux = ["vi ..."]\nreason = "an editor never returns to the prompt"\n'
        '[read_only]\nlinux = ["cat ..."]\nlinux_filters = ["grep"]\n'
    )
    policy = load_policy(path)
    assert "(no_vi)" in policy.check("sudo vi /tmp/x", family="linux", read_only=False).reason
    assert policy.check("cat x | grep y", family="linux", read_only=True).allowed
    assert not policy.check("cat x | head", family="linux", read_only=True).allowed
    assert not policy.check("show ip", family="ios", read_only=True).allowed


@pytest.mark.parametrize(
    "text",
    ['allow = ["nonsense"]', "allow = 3", "[dangerous.x]\nreason = 'no patterns'", "not toml [", '[read_only]\nallowed = "sh"',
     '[dangerous.x]\npatterns = ["wr[ite"]', '[dangerous.x]\nlinx = ["rm"]', '[read_only]\nlinux = ["ls"]\nfilters = []',
     '[read_only]\nlinux = ["ls"]\nlinux_refused_options = { sort = ["o"] }', '[dangerous.x]\nios = ["{a|b c}"]',
     '[dangerous.x]\nios = [""]', '[dangerous.x]\nios = [3]'],
)
def test_bad_policy_files_are_refused(tmp_path, text):
    path = tmp_path / "policy.toml"
    path.write_text(text)
    with pytest.raises(PolicyError):
        load_policy(path)


def test_missing_policy_file_is_a_policy_error(tmp_path):
    with pytest.raises(PolicyError, match="cannot read"):
        load_policy(tmp_path / "absent.toml")


@pytest.mark.parametrize(
    ("pattern", "words", "expected"),
    [
        ("terminal {len[gth]|wid[th]} *$", ["terminal", "length", "0"], True),  # "*$": any word, then the end
        ("terminal {len[gth]|wid[th]} *$", ["terminal", "length", "0", "x"], False),
        ("terminal {len[gth]|wid[th]} *$", ["terminal", "len"], False),
        ("wr[ite]", ["w"], False),
        ("wr[ite]", ["wri"], True),
        ("wr[ite]", ["writer"], False),
        ("wr[ite]", ["wrte"], False),
        ("mkfs*", ["mkfs.ext4"], True),
        ("*/*", ["a/b"], True),
        ("*/*", ["ab"], False),
        ("ip {-4|-br[ief]}... a[ddress]$", ["ip", "-br", "-4", "a"], True),
        ("ip {-4|-br[ief]}... a[ddress]$", ["ip", "-b", "a"], False),
        ("ip {-4|-br[ief]}... a[ddress]$", ["ip", "address"], True),
        ("cop[y] ... st[artup-config]$", ["copy", "run", "start"], True),
        ("cop[y] ... st[artup-config]$", ["copy", "start", "run"], False),
        ("| r[edirect]", ["|", "red"], True),
        ("rel[oad]", ["RELOAD"], True),
    ],
)
def test_pattern_language(pattern, words, expected):
    assert Pattern.parse(pattern).matches(words) is expected


@pytest.mark.parametrize("text", ["", "   ", "wr[ite", "w]", "{a|}", "{a|{b}}", "[x]"])
def test_bad_patterns(text):
    with pytest.raises(PatternError):
        Pattern.parse(text)


@pytest.mark.parametrize(
    "command",
    ["echo " + "$(" * 330 + ")" * 330, "$(" * 333 + ")" * 333, "echo " + "${x:-" * 190 + "}" * 190,
     "eval " * 200 + "x"],
)
def test_deep_nesting_is_refused_plainly(policy, command):
    """No RecursionError (a 500 from the tool) whatever a 1,000-character line nests."""
    decision = policy.check(command[:1000], family="linux", read_only=False)
    assert not decision.allowed


def test_every_driver_and_family_has_a_grammar():
    """The runner passes the driver's name as the family: a driver without a grammar could not run."""
    assert set(DRIVERS) <= set(FAMILIES)
    assert set(FAMILY_NAMES) <= set(FAMILIES)
