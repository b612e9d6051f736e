"""What undoes an injected configuration change, from what the device said before it."""

from __future__ import annotations

import pytest

from gns3server.agent.gns3_copilot.tools.config_undo import plan, vpcs_undo

# Debian's VPCS 0.8, as read on its console (tests/integration/test_fault_revert.py checks it live).
SHOW_IP = """NAME        : VPCS[1]
IP/MASK     : 10.0.0.1/24
GATEWAY     : 10.0.0.254
DNS         : 10.0.0.53  
DOMAIN NAME : lab.example
MAC         : 00:50:79:66:68:00
LPORT       : 46586
RHOST:PORT  : 127.0.0.1:52064
MTU:        : 1500"""
EMPTY = """NAME        : VPCS[1]
IP/MASK     : 0.0.0.0/0
GATEWAY     : 0.0.0.0
DNS         : 
MAC         : 00:50:79:66:68:00
MTU:        : 0"""


@pytest.mark.parametrize("commands", [
    ["ip 10.0.0.9/24 10.0.0.1"], ["ip 10.0.0.9 255.255.255.0"], ["clear ip"], ["IP DNS 8.8.8.8"],
    ["ip dhcp"], ["ip domain x.example", "ip 10.1.1.1/8"],
])
def test_vpcs_addressing_is_undoable_from_show_ip(commands):
    assert plan("vpcs", commands).snapshot == ("show ip",)


@pytest.mark.parametrize("commands", [["arp"], ["ip 10.0.0.9/24", "set pcname X"], ["ip mtu 1400"], ["clear arp"]])
def test_anything_else_in_the_batch_is_not(commands):
    undo = plan("vpcs", commands)
    assert undo.snapshot == () and "cannot undo" in undo.reason


@pytest.mark.parametrize("driver", ["ios", "frr"])
def test_the_ios_family_is_undone_from_its_running_configuration_read_before_and_after(driver):
    undo = plan(driver, ["interface e0/0", "shutdown"])  # any configuration: the two captures tell what changed
    assert undo.snapshot == ("show running-config",) and undo.rollback is not None and undo.restore is None


def test_other_device_families_are_not_undone():
    undo = plan("junos", ["set interfaces ge-0/0/0 disable"])
    assert undo.snapshot == () and "junos devices" in undo.reason


def test_the_restore_commands_put_back_address_gateway_dns_and_domain():
    assert vpcs_undo(SHOW_IP) == ["clear ip", "ip 10.0.0.1/24 10.0.0.254", "ip dns 10.0.0.53", "ip domain lab.example"]
    assert vpcs_undo(EMPTY) == ["clear ip"]
    no_gateway = SHOW_IP.replace("10.0.0.254", "0.0.0.0").replace("10.0.0.53", "").replace("lab.example", "")
    assert vpcs_undo(no_gateway) == ["clear ip", "ip 10.0.0.1/24"]


@pytest.mark.parametrize("answer", [
    "Invalid command",  # not a show ip answer
    SHOW_IP + "\nDHCP SERVER : 10.0.0.250",  # a lease: not ours to pin
    SHOW_IP.replace("10.0.0.1/24", "10.0.0.1/24; quit"),  # nothing but addresses goes into a command
    SHOW_IP.replace("lab.example", "lab.example; quit"),
])
def test_an_answer_that_cannot_be_restored_exactly_gives_no_undo(answer):
    assert vpcs_undo(answer) is None


# ------------------------------------------------------------------- link filters (tools/links.py)


def test_link_filters_are_checked_as_gns3_defines_them():
    from gns3server.agent.gns3_copilot.tools.links import check_filters

    assert check_filters({"packet_loss": [30], "delay": [200]}) == {"packet_loss": [30], "delay": [200, 0]}
    assert check_filters({"frequency_drop": [-1], "bpf": ["icmp"]}) == {"frequency_drop": [-1], "bpf": ["icmp"]}
    assert check_filters({}) == {}
    for bad, message in [({"loss": [3]}, "unknown filter 'loss'"), ({"corrupt": [101]}, "out of range"),
                         ({"delay": [1, 2, 3]}, "takes 2 integer"), ({"packet_loss": ["5"]}, "integer"),
                         ({"packet_loss": [True]}, "integer"), ({"bpf": [3]}, "one text")]:
        with pytest.raises(ValueError, match=message):
            check_filters(bad)
