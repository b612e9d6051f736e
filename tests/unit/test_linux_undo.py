"""Undo of iproute2 fault injections on Linux devices, from what ``ip -o ... show`` said before."""

from __future__ import annotations

import pytest

from gns3server.agent.gns3_copilot.tools.config_undo import plan

# iproute2 6.1 in a network namespace with a veth pair (tests/integration/test_fault_revert_linux.py
# reads them live).
LINK_UP = ("3: eth0@peer0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP mode DEFAULT "
           "group default qlen 1000\\    link/ether e6:46:c2:57:f5:00 brd ff:ff:ff:ff:ff:ff")
LINK_DOWN = ("3: eth0@peer0: <BROADCAST,MULTICAST> mtu 1500 qdisc noqueue state DOWN mode DEFAULT group default "
             "qlen 1000\\    link/ether e6:46:c2:57:f5:00 brd ff:ff:ff:ff:ff:ff")
ADDRS = """3: eth0    inet 10.0.0.1/24 brd 10.0.0.255 scope global eth0\\       valid_lft forever preferred_lft forever
3: eth0    inet 10.5.0.1/16 scope global eth0:1\\       valid_lft forever preferred_lft forever
3: eth0    inet 10.0.0.2/24 scope global secondary eth0\\       valid_lft forever preferred_lft forever"""
ROUTES = """default via 10.0.0.254 dev eth0 
10.0.0.0/24 dev eth0 proto kernel scope link src 10.0.0.1 
10.5.0.0/16 dev eth0 proto kernel scope link src 10.5.0.1 
10.9.0.0/16 via 10.0.0.253 dev eth0 proto static metric 20 
10.7.0.0/16 dev eth0 scope link linkdown """
ROUTES_SNAPSHOT = "ip -o -4 route show table main"
ROUTE_FLUSH = ["ip -4 route flush table main proto boot", "ip -4 route flush table main proto static"]
ROUTE_ADDS = ["ip route add default via 10.0.0.254 dev eth0",
              "ip route add 10.9.0.0/16 proto static via 10.0.0.253 dev eth0 metric 20",
              "ip route add 10.7.0.0/16 dev eth0 scope link"]


def restore(commands: list[str], outputs: list[str]) -> list[str] | None:
    undo = plan("linux", commands)
    assert undo.restore is not None, undo.reason
    return undo.restore(outputs)


def test_a_link_set_down_reads_the_link_and_the_routes_and_puts_both_back():
    commands = ["ip link set dev eth0 down"]
    undo = plan("linux", commands)
    assert undo.snapshot == ("ip -o link show dev eth0", ROUTES_SNAPSHOT) and not undo.reason
    # Setting a link down takes its routes away: they are put back once it is up again.
    assert restore(commands, [LINK_UP, ROUTES]) == ["ip link set dev eth0 up", *ROUTE_FLUSH, *ROUTE_ADDS]
    # A link that was down is set down last, after the routes.
    assert restore(["ip link set eth0 up"], [LINK_DOWN, ""]) == [*ROUTE_FLUSH, "ip link set dev eth0 down"]


def test_an_address_change_gives_the_interface_its_addresses_back_in_order():
    commands = ["ip addr del 10.0.0.1/24 dev eth0", "ip address add 10.0.0.99/24 brd + dev eth0"]
    undo = plan("linux", commands)
    assert undo.snapshot == ("ip -o -4 addr show dev eth0", ROUTES_SNAPSHOT)
    assert restore(commands, [ADDRS, ROUTES]) == [
        "ip -4 addr flush dev eth0",
        "ip addr add 10.0.0.1/24 brd 10.0.0.255 scope global dev eth0",  # primaries first, as read
        "ip addr add 10.5.0.1/16 scope global label eth0:1 dev eth0",
        "ip addr add 10.0.0.2/24 scope global dev eth0",  # secondary again, behind 10.0.0.1/24
        *ROUTE_FLUSH, *ROUTE_ADDS,
    ]
    assert restore(["ip addr flush dev eth0"], ["", ""]) == ["ip -4 addr flush dev eth0", *ROUTE_FLUSH]


def test_route_changes_read_the_routing_table_only():
    commands = ["ip route replace default via 10.0.0.250", "ip route del 10.9.0.0/16 via 10.0.0.253 dev eth0",
                "ip route add 10.8.0.0/16 via 10.0.0.1 metric 5 onlink"]
    assert plan("linux", commands).snapshot == (ROUTES_SNAPSHOT,)
    assert restore(commands, [ROUTES]) == [*ROUTE_FLUSH, *ROUTE_ADDS]


def test_several_interfaces_are_each_read_once():
    commands = ["ip link set eth1 down", "ip addr add 10.1.0.1/24 dev eth1", "ip link set dev eth0 down",
                "ip link set dev eth1 up", "ip addr del 10.0.0.1/24 dev eth0"]
    assert plan("linux", commands).snapshot == (
        "ip -o link show dev eth1", "ip -o link show dev eth0",
        "ip -o -4 addr show dev eth1", "ip -o -4 addr show dev eth0", ROUTES_SNAPSHOT)


@pytest.mark.parametrize("command", [
    "ip link set dev eth0 mtu 1400",  # not a link state
    "ip link set dev eth0 down; reboot",  # shell syntax
    "ip link set dev $(reboot) down",
    "ip link set dev eth0:1 down",  # not an interface name
    "ip link set dev averyveryverylongname down",
    "ip link set dev up down",  # a keyword as an interface name: ambiguous
    "ip -6 addr add 2001:db8::1/64 dev eth0",
    "ip addr add 2001:db8::1/64 dev eth0",
    "ip addr add 10.0.0.300/24 dev eth0",  # values that do not parse
    "ip addr add 10.0.0.1/33 dev eth0",
    "ip addr add 10.0.0.1/24",  # no device
    "ip addr add 10.0.0.1/24 dev eth0 dev eth1",
    "ip addr add 10.0.0.1/24 dev eth0 valid_lft 30",
    "ip route add default via 10.0.0.999",
    "ip route add 10.0.0.1/24 via 10.0.0.254",  # host bits set: not a network
    "ip route add default via 10.0.0.254 table 5",
    "ip route flush table main",
    "ip neigh add 10.0.0.9 lladdr 00:11:22:33:44:55 dev eth0",
    "ifconfig eth0 down",
    "sysctl -w net.ipv4.ip_forward=0",
])
def test_anything_else_in_the_batch_leaves_it_by_hand(command):
    undo = plan("linux", ["ip link set dev eth0 down", command])
    assert undo.snapshot == () and undo.restore is None
    assert undo.reason == f"the copilot cannot undo {command!r}"


@pytest.mark.parametrize(("commands", "outputs"), [
    (["ip link set eth0 down"], ["Device \"eth0\" does not exist.", ROUTES]),
    (["ip link set eth0 down"], [LINK_UP.replace("eth0@", "eth1@"), ROUTES]),  # another interface's answer
    (["ip link set eth0 down"], [LINK_UP + "\n" + LINK_UP, ROUTES]),
    (["ip addr flush dev eth0"], [ADDRS.replace("valid_lft forever", "valid_lft 3600sec", 1), ROUTES]),  # a lease
    (["ip addr flush dev eth0"], [ADDRS.replace("scope global eth0:1", "scope global dynamic eth0:1"), ROUTES]),
    (["ip addr flush dev eth0"], [ADDRS.replace("10.5.0.1/16", "10.5.0.1/16; reboot"), ROUTES]),
    (["ip addr flush dev eth0"], [ADDRS.replace("eth0:1", "eth0:1;reboot"), ROUTES]),
    (["ip addr flush dev eth0"], [ADDRS.replace("10.0.0.1/24 brd", "10.0.0.1 peer 10.0.0.2/32 brd"), ROUTES]),
    (["ip route del default"], [ROUTES + "\ndefault via 10.0.0.1 dev eth0 proto dhcp src 10.0.0.5 metric 100"]),
    (["ip route del default"], [ROUTES + "\nunreachable 10.66.0.0/16"]),
    (["ip route del default"], [ROUTES + "\n10.66.0.0/16 via 10.0.0.1 dev eth0 mtu 1400"]),
    (["ip route del default"], [ROUTES.replace("dev eth0 proto static", "dev eth0;reboot proto static")]),
    (["ip route del default"], ["default via 10.0.0.254 dev"]),
    (["ip route del default"], ["Error: something"]),
    (["ip route del default"], []),  # not as many answers as commands read
])
def test_an_answer_that_cannot_be_restored_exactly_gives_no_undo(commands, outputs):
    assert restore(commands, outputs) is None


def test_other_families_keep_their_planners():
    assert plan("vpcs", ["ip 10.0.0.9/24"]).snapshot == ("show ip",)
    assert plan("ios", ["interface e0/0", "shutdown"]).restore is None
