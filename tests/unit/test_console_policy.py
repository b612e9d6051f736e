"""The console command policy: dangerous commands, abbreviations, read-only mode, the file."""

from __future__ import annotations

import pytest

from gns3server.agent.gns3_copilot.console import PolicyError, load_policy


@pytest.mark.parametrize(
    ("command", "rule"),
    [
        ("reload", "reload"),
        ("rel", "reload"),
        ("RELOAD", "reload"),
        ("Reload in 5", "reload"),
        ("do reload", "reload"),
        ("wr er", "erase"),
        ("write erase", "erase"),
        ("erase startup-config", "erase"),
        ("format flash:", "erase"),
        ("del flash:x", "delete"),
        ("delete /force nvram:startup-config", "delete"),
        ("rm -rf /", "delete"),
        ("copy run start", "startup_config"),
        ("copy running-config startup-config", "startup_config"),
        ("COPY tftp: nvram:startup-config", "startup_config"),
        ("wr", "startup_config"),
        ("write mem", "startup_config"),
        ("debug all", "debug_all"),
        ("deb al", "debug_all"),
        ("mkfs.ext4 /dev/sda1", "erase"),
        ("quit", "leave_console"),
    ],
)
@pytest.mark.parametrize("read_only", [True, False])
def test_dangerous_commands_are_blocked_in_every_mode(policy, command, rule, read_only):
    decision = policy.check(command, read_only=read_only)
    assert not decision.allowed
    assert f"({rule})" in decision.reason


@pytest.mark.parametrize(
    "command",
    ["show ip", "sh ip int br", "show running-config", "ping 10.0.0.1", "traceroute 10.0.0.2", "trace 10.0.0.2",
     "SHOW VERSION", "arp", "ip a", "ip route show", "cat /etc/hosts", "do show ip route"],
)
def test_read_only_commands_pass_in_both_modes(policy, command):
    assert policy.check(command, read_only=True).allowed
    assert policy.check(command, read_only=False).allowed


@pytest.mark.parametrize(
    "command",
    ["conf t", "configure terminal", "interface e0/0", "ip address 10.0.0.1 255.255.255.0", "ip 10.0.0.1/24 10.0.0.254",
     "hostname R9", "set pcname PC9", "ip addr add 10.0.0.1/24 dev eth0", "no shutdown", "copy run tftp:",
     "debug ip packet", "clear ip"],
)
def test_read_only_mode_blocks_configuration_commands(policy, command):
    decision = policy.check(command, read_only=True)
    assert not decision.allowed and decision.reason.startswith("read-only mode")
    assert policy.check(command, read_only=False).allowed


def test_read_only_mode_refuses_config_mode_even_for_show(policy):
    assert not policy.check("show ip", read_only=True, config_mode=True).allowed
    assert policy.check("show ip", read_only=False, config_mode=True).allowed


def test_abbreviations_need_their_minimum_and_must_be_prefixes(policy):
    assert policy.check("re", read_only=False).allowed  # "re" is shorter than rel[oad]
    assert policy.check("reloadx", read_only=False).allowed  # not a prefix of reload
    assert policy.check("copy run tftp:", read_only=False).allowed
    assert not policy.check("copy flash:x st", read_only=False).allowed


def test_admin_file_allows_reload_and_keeps_the_rest(tmp_path):
    path = tmp_path / "policy.toml"
    path.write_text('allow = ["reload"]\n')
    policy = load_policy(path)
    assert policy.check("rel", read_only=False).allowed
    assert policy.check("reload", read_only=True).reason.startswith("read-only mode")
    assert not policy.check("wr er", read_only=False).allowed
    assert policy.source == str(path)


def test_admin_file_can_replace_rules(tmp_path):
    path = tmp_path / "policy.toml"
    path.write_text(
        '[dangerous.shut]\npatterns = ["shut[down]"]\nreason = "takes links down"\n'
        '[read_only]\nallowed = ["sh[ow]"]\n'
    )
    policy = load_policy(path)
    assert not policy.check("shut", read_only=False).allowed
    assert policy.check("reload", read_only=False).allowed
    assert not policy.check("ping 10.0.0.1", read_only=True).allowed


@pytest.mark.parametrize(
    "text",
    ['allow = ["nonsense"]', "allow = 3", "[dangerous.x]\nreason = 'no patterns'", "not toml [", '[read_only]\nallowed = "sh"',
     '[dangerous.x]\npatterns = ["wr[ite"]'],
)
def test_bad_policy_files_are_refused(tmp_path, text):
    path = tmp_path / "policy.toml"
    path.write_text(text)
    with pytest.raises(PolicyError):
        load_policy(path)


def test_missing_policy_file_is_a_policy_error(tmp_path):
    with pytest.raises(PolicyError, match="cannot read"):
        load_policy(tmp_path / "absent.toml")


@pytest.mark.parametrize("command", ["show ip\nreload", "show ip\rconf t", "show\x1a", "sh\tip", "show ip\x1b[A"])
def test_control_characters_are_blocked(policy, command):
    decision = policy.check(command, read_only=False)
    assert not decision.allowed and "control characters" in decision.reason
