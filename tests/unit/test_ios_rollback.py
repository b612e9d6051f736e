"""The way back from a changed running configuration to the baseline, for the IOS family (IOS, FRR's vtysh).

The FRR texts are what FRR 8.4's ``show running-config`` printed for router R1 of
the test lab (``tests/integration/frr_lab.py``); every rollback below is also
applied to the real routers by ``tests/integration/test_frr_rollback.py``, which
checks that the running configuration comes back exactly. The IOS texts follow
Cisco IOS 15's format (no IOS runs here: these are checked against the text only).
"""

from __future__ import annotations

import pytest

from gns3server.agent.gns3_copilot.tools.config_undo import Undo, holds, plan, with_undo
from gns3server.agent.gns3_copilot.tools.ios_rollback import (
    NoRollback,
    fingerprint,
    flavour,
    rollback,
)

FRR_R1 = """Building configuration...

Current configuration:
!
frr version 8.4.4
frr defaults traditional
hostname R1
no ipv6 forwarding
service integrated-vtysh-config
!
ip route 192.168.1.0/24 blackhole
!
interface eth1
 ip ospf area 0
 ip ospf dead-interval 4
 ip ospf hello-interval 1
 ip ospf network point-to-point
exit
!
interface lo
 ip ospf area 0
exit
!
router bgp 65001
 bgp router-id 10.255.0.1
 no bgp ebgp-requires-policy
 timers bgp 1 3
 neighbor 10.0.12.2 remote-as 65002
 neighbor 10.0.12.2 timers connect 1
 !
 address-family ipv4 unicast
  network 192.168.1.0/24
 exit-address-family
exit
!
router ospf
 ospf router-id 10.255.0.1
 timers throttle lsa all 0
 timers lsa min-arrival 0
exit
!
end
"""

IOS_R1 = """Building configuration...

Current configuration : 1090 bytes
!
! Last configuration change at 10:00:00 UTC Mon Mar 1 2024
!
version 15.9
service timestamps debug datetime msec
no service password-encryption
!
hostname R1
!
interface GigabitEthernet0/0
 ip address 10.0.12.1 255.255.255.252
 ip ospf hello-interval 1
 duplex auto
!
interface GigabitEthernet0/1
 no ip address
 shutdown
!
router ospf 1
 network 10.0.12.0 0.0.0.3 area 0
!
router bgp 65001
 bgp log-neighbor-changes
 neighbor 10.0.12.2 remote-as 65002
 !
 address-family ipv4
  network 192.168.1.0
  neighbor 10.0.12.2 activate
 exit-address-family
!
line con 0
line vty 0 4
 login
!
end
"""


def changed(text: str, *edits: tuple[str, str]) -> str:
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    return text


def test_the_cli_is_told_by_the_configuration_itself():
    assert flavour(FRR_R1) == "frr" and flavour(IOS_R1) == "ios"


# Each: the edit a fault makes to R1's running configuration, and the commands that undo it.
FRR_CASES = {
    "hello interval": ([(" ip ospf hello-interval 1", " ip ospf hello-interval 2")],
                       ["interface eth1", "ip ospf hello-interval 1"]),
    # FRR refuses a new area before the old one is removed: the negation comes first.
    "area": ([(" ip ospf area 0\n ip ospf dead", " ip ospf area 1\n ip ospf dead")],
             ["interface eth1", "no ip ospf area 1", "ip ospf area 0"]),
    "mtu-ignore removed": ([(" ip ospf hello-interval 1\n", " ip ospf hello-interval 1\n ip ospf mtu-ignore\n")],
                           ["interface eth1", "no ip ospf mtu-ignore"]),
    # Negating remote-as would delete the neighbour and its timers: the AS is set again in place.
    "wrong AS": ([("remote-as 65002", "remote-as 65009")], ["router bgp 65001", "neighbor 10.0.12.2 remote-as 65002"]),
    "neighbour shut down": ([(" neighbor 10.0.12.2 timers", " neighbor 10.0.12.2 shutdown\n neighbor 10.0.12.2 timers")],
                            ["router bgp 65001", "no neighbor 10.0.12.2 shutdown"]),
    "neighbour removed": ([(" neighbor 10.0.12.2 remote-as 65002\n neighbor 10.0.12.2 timers connect 1\n", "")],
                          ["router bgp 65001", "neighbor 10.0.12.2 remote-as 65002",
                           "neighbor 10.0.12.2 timers connect 1"]),
    # An address family's own end is typed; other sections are left by the next global command.
    "network withdrawn, static route removed": (
        [("  network 192.168.1.0/24\n", ""), ("ip route 192.168.1.0/24 blackhole\n", "")],
        ["ip route 192.168.1.0/24 blackhole", "router bgp 65001", "address-family ipv4 unicast",
         "network 192.168.1.0/24", "exit-address-family"]),
    # FRR deletes an interface the kernel has only line by line; a description is negated without its text.
    "interface section added": ([("interface lo\n", ("interface eth9\n description spare\n ip ospf cost 7\nexit\n!\n"
                                                   "interface lo\n"))],
                                ["interface eth9", "no description", "no ip ospf cost 7"]),
    "neighbour description": ([(" neighbor 10.0.12.2 timers", (" neighbor 10.0.12.2 description to R2\n"
                                                                " neighbor 10.0.12.2 timers"))],
                              ["router bgp 65001", "no neighbor 10.0.12.2 description"]),
}


@pytest.mark.parametrize("name", FRR_CASES)
def test_an_frr_change_is_undone_from_the_baseline(name):
    edits, expected = FRR_CASES[name]
    assert rollback(FRR_R1, changed(FRR_R1, *edits)) == expected


def test_global_lines_come_before_sections_whatever_the_configuration_order():
    after = changed(FRR_R1, (" ip ospf hello-interval 1", " ip ospf hello-interval 5"),
                    ("ip route 192.168.1.0/24 blackhole\n", ""), ("hostname R1\n", "hostname R1\nip forwarding\n"))
    assert rollback(FRR_R1, after) == ["no ip forwarding", "ip route 192.168.1.0/24 blackhole",
                                       "interface eth1", "ip ospf hello-interval 1"]


IOS_CASES = {
    # A timer is set again in place: negated first, the interface would say hello every 10 s in between.
    "hello interval": ([(" ip ospf hello-interval 1", " ip ospf hello-interval 2")],
                       ["interface GigabitEthernet0/0", "ip ospf hello-interval 1"]),
    "ospf cost added": ([(" ip ospf hello-interval 1\n", " ip ospf hello-interval 1\n ip ospf cost 20\n")],
                        ["interface GigabitEthernet0/0", "no ip ospf cost 20"]),
    "interface shut down": ([(" duplex auto\n", " duplex auto\n shutdown\n")],
                            ["interface GigabitEthernet0/0", "no shutdown"]),
    "address replaced": ([("ip address 10.0.12.1 ", "ip address 10.0.12.5 ")],
                         ["interface GigabitEthernet0/0", "ip address 10.0.12.1 255.255.255.252"]),
    "area": ([("0.0.0.3 area 0", "0.0.0.3 area 1")],
             ["router ospf 1", "no network 10.0.12.0 0.0.0.3 area 1", "network 10.0.12.0 0.0.0.3 area 0"]),
    "wrong AS, network withdrawn": ([("remote-as 65002", "remote-as 65009"), ("  network 192.168.1.0\n", "")],
                                    ["router bgp 65001", "neighbor 10.0.12.2 remote-as 65002", "address-family ipv4",
                                     "network 192.168.1.0", "exit-address-family"]),
}


@pytest.mark.parametrize("name", IOS_CASES)
def test_an_ios_change_is_undone_from_the_baseline(name):
    edits, expected = IOS_CASES[name]
    assert rollback(IOS_R1, changed(IOS_R1, *edits)) == expected


def test_what_the_cli_prints_around_the_configuration_is_not_a_change():
    newer = changed(FRR_R1, ("frr version 8.4.4", "frr version 8.4.5"), ("Current configuration:", "Current configuration:\n!\n!"))
    assert fingerprint(FRR_R1) == fingerprint(newer)
    assert fingerprint(FRR_R1) != fingerprint(changed(FRR_R1, ("hello-interval 1", "hello-interval 3")))
    with pytest.raises(NoRollback, match="did not change"):
        rollback(FRR_R1, newer)
    ios = changed(IOS_R1, ("1090 bytes", "1101 bytes"), ("10:00:00 UTC", "11:30:00 UTC"))
    assert fingerprint(IOS_R1) == fingerprint(ios) != fingerprint(FRR_R1)
    with pytest.raises(NoRollback, match="did not change"):
        rollback(IOS_R1, ios)


@pytest.mark.parametrize(("first", "second", "reason"), [
    (FRR_R1, "% Unknown command: show running-config", "different CLIs"),
    ("", "", "holds no configuration"),
    ("Building configuration...\n\nend\n", "Building configuration...\n\nend\n", "holds no configuration"),
    (FRR_R1, IOS_R1, "different CLIs"),
])
def test_captures_that_are_not_one_device_s_configuration_give_no_rollback(first, second, reason):
    with pytest.raises(NoRollback, match=reason):
        rollback(first, second)


# ------------------------------------------------------------------ with_undo: the captures around a change


class Device:
    """A device whose running configuration a change edits; records what was read and sent."""

    def __init__(self, config: str, *, readable: bool = True) -> None:
        self.config = config
        self.readable = readable
        self.calls: list[str] = []

    async def read(self, commands: list[str]) -> list[str] | None:
        self.calls.append("read " + "; ".join(commands))
        return [self.config] if self.readable else None

    def change(self, *edits: tuple[str, str], status: str = "ok"):
        async def run() -> dict[str, str]:
            self.calls.append("change")
            if status != "blocked":
                self.config = changed(self.config, *edits)
            return {"status": status}
        return run


def sent(result: dict[str, str]) -> bool:
    return result["status"] != "blocked"


async def test_an_ios_family_change_is_read_before_and_after_and_its_rollback_computed():
    device = Device(FRR_R1)
    result, undo = await with_undo(plan("ios", ["interface eth1", "ip ospf hello-interval 2"]), device.read,
                                   device.change(("hello-interval 1", "hello-interval 2")), sent)
    assert result == {"status": "ok"}
    assert device.calls == ["read show running-config", "change", "read show running-config"]
    assert undo == Undo(["interface eth1", "ip ospf hello-interval 1"], "", (FRR_R1,), (device.config,), {
        "command": "show running-config", "before": fingerprint(FRR_R1), "after": fingerprint(device.config)})
    assert [holds(undo.expects, text) for text in (device.config, FRR_R1, changed(FRR_R1, ("R1\n", "R9\n")))] == [
        "after", "before", "other"]
    assert holds(undo.expects, changed(device.config, ("frr version 8.4.4", "frr version 8.4.5"))) == "after"


async def test_a_recorded_inverse_needs_no_second_read():
    device = Device("IP/MASK     : 10.0.0.1/24\nGATEWAY     : 10.0.0.254")
    _, undo = await with_undo(plan("vpcs", ["ip 10.0.0.9/24"]), device.read, device.change(), sent)
    assert device.calls == ["read show ip", "change"]
    assert (undo.commands, undo.after) == (["clear ip", "ip 10.0.0.1/24 10.0.0.254"], None)


@pytest.mark.parametrize(("device", "status", "reason"), [
    (Device(FRR_R1), "blocked", "nothing was changed"),
    (Device(FRR_R1, readable=False), "ok", "the previous settings could not be read"),
    (Device(FRR_R1), "ok", "the running configuration did not change"),  # e.g. only "do clear ..." commands
])
async def test_a_change_without_a_way_back_says_why(device, status, reason):
    _, undo = await with_undo(plan("ios", ["router bgp 65001"]), device.read, device.change(status=status), sent)
    assert (undo.commands, undo.reason) == (None, reason)


async def test_a_change_that_cannot_be_read_back_afterwards_gives_no_rollback():
    device = Device(FRR_R1)
    calls = 0

    async def read_once(commands: list[str]) -> list[str] | None:
        nonlocal calls
        calls += 1
        return await device.read(commands) if calls == 1 else None

    _, undo = await with_undo(plan("ios", ["hostname R9"]), read_once, device.change(("R1\n", "R9\n")), sent)
    assert (undo.commands, undo.reason, undo.before) == (None, "the settings after the change could not be read",
                                                        (FRR_R1,))


