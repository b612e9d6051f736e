"""Checks judged on real device answers: FRR's JSON, iproute2's JSON, VPCS's text, IOS through TextFSM.

The answers are recorded from the real CLIs (``tests/unit/data/checks/README.md`` says
where each comes from); the evaluation is pure, so these are the verdicts a change's
verification and a graded lab get from the same answers.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from gns3server.agent.gns3_copilot.checks import (
    AddressPresent,
    BGPNeighbor,
    CheckSpec,
    InterfaceUp,
    OSPFNeighbor,
    Ping,
    Reading,
    RouteTo,
    Timeline,
    commands_for,
    evaluate,
    held_before,
    implied_checks,
    parse_check,
    parse_checks,
    run_checks,
    state_of,
)
from gns3server.agent.gns3_copilot.checks.evaluate import Verdict

DATA = Path(__file__).parent / "data" / "checks"
FRR = json.loads((DATA / "frr_r1.json").read_text())
VPCS = json.loads((DATA / "vpcs.json").read_text())


def text(name: str) -> str:
    return (DATA / name).read_text()


def frr_readings(which: str = "R1", **override: str) -> list[Reading]:
    commands = commands_for("frr", ["interfaces", "ospf", "bgp", "routes"])
    answers = {c: FRR[f"{which}|{c}"] if f"{which}|{c}" in FRR else FRR[f"R1|{c}"] for c in commands}
    answers.update(override)
    return [Reading("R1", c, 100.0 + i, "ok", answers[c]) for i, c in enumerate(commands)]


def test_frr_state_is_read_from_its_json():
    state = state_of("R1", "frr", frr_readings())
    assert state.errors == {}
    assert state.interfaces["eth1"].up and state.interfaces["eth1"].addresses[0] == "10.0.12.1/30"
    assert state.ospf["10.255.0.2"].state == "Full" and state.ospf["10.255.0.2"].interface == "eth1"
    assert state.bgp["10.0.12.2"].state == "Established" and state.bgp["10.0.12.2"].prefixes == 2
    assert state.timers["ospf_dead"] == 4  # eth1's dead interval (lo has no neighbour)
    assert [r.next_hops for r in state.routes["10.255.0.2/32"]] == [("10.0.12.2",)]
    assert state.sources["ospf"][0] == {"device": "R1", "command": "show ip ospf neighbor json", "at": 101.0}


def test_frr_verdicts_carry_the_values_read_and_their_readings():
    healthy = state_of("R1", "frr", frr_readings())
    full = evaluate(OSPFNeighbor(device="R1", neighbor="10.255.0.2"), healthy)
    assert (full.status, full.observed) == ("pass", "Full")
    assert full.evidence[0]["command"] == "show ip ospf neighbor json"
    broken = state_of("R1", "frr", frr_readings("R1-broken"))
    gone = evaluate(OSPFNeighbor(device="R1", neighbor="10.255.0.2"), broken)
    assert gone.status == "fail" and gone.observed.startswith("not a neighbour")
    route = evaluate(RouteTo(device="R1", prefix="10.255.0.2/32", via="10.0.12.2", protocol="ospf"), healthy)
    assert route.passed and route.observed == "ospf via 10.0.12.2"
    assert not evaluate(RouteTo(device="R1", prefix="10.255.0.2/32"), broken).passed
    assert evaluate(BGPNeighbor(device="R1", peer="10.0.12.2"), healthy).observed == "Established, 2 prefixes received"
    assert evaluate(AddressPresent(device="R1", address="10.0.12.1/30", interface="eth1"), healthy).passed
    wrong_length = evaluate(AddressPresent(device="R1", address="10.0.12.1/24"), healthy)
    assert wrong_length.status == "fail" and "eth1 10.0.12.1/30" in wrong_length.observed


def test_an_aspect_that_could_not_be_read_is_unknown_never_a_guess():
    readings = frr_readings()
    readings[1] = Reading("R1", readings[1].command, 101.0, "timeout", "")
    state = state_of("R1", "frr", readings)
    verdict = evaluate(OSPFNeighbor(device="R1", neighbor="10.255.0.2"), state)
    assert verdict.status == "unknown" and "failed (timeout)" in verdict.observed
    garbage = state_of("R1", "frr", frr_readings(**{"show ip route json": "% Unknown command"}))
    assert evaluate(RouteTo(device="R1", prefix="10.0.0.0/8"), garbage).status == "unknown"
    assert "ping" in evaluate(Ping(device="R1", target="10.0.0.1"), state_of("R1", "frr", [], ["ping:10.0.0.1"])).observed


def test_linux_state_from_iproute2_json():
    readings = [Reading("H", "ip -j addr show", 1.0, "ok", text("linux_ip_addr.json")),
                Reading("H", "ip -j route show", 1.0, "ok", text("linux_ip_route.json")),
                Reading("H", "ping -c 3 -W 1 10.0.0.1", 2.0, "ok", text("linux_ping_ok.txt")),
                Reading("H", "ping -c 3 -W 1 10.0.0.9", 3.0, "ok", text("linux_ping_fail.txt"))]
    state = state_of("H", "linux", readings)
    assert evaluate(InterfaceUp(device="H", interface="eth0"), state).passed
    no_carrier = evaluate(InterfaceUp(device="H", interface="eth1"), state)
    assert no_carrier.status == "fail" and no_carrier.observed == "down"
    assert evaluate(AddressPresent(device="H", address="10.1.0.1/24"), state).passed  # configured, link down
    assert evaluate(RouteTo(device="H", prefix="default", via="10.0.0.254"), state).passed
    assert not evaluate(RouteTo(device="H", prefix="10.1.0.0/24"), state).passed  # linkdown: nothing goes there
    assert evaluate(Ping(device="H", target="10.0.0.1", min_replies=3), state).observed == "3/3 replies"
    assert evaluate(Ping(device="H", target="10.0.0.9"), state).status == "fail"
    ospf = evaluate(OSPFNeighbor(device="H", neighbor="10.0.0.2"), state_of("H", "linux", readings, ["ospf"]))
    assert ospf.status == "unknown" and "no OSPF" in ospf.observed


def test_vpcs_state_from_show_ip_and_ping():
    readings = [Reading("PC1", "show ip", 1.0, "ok", VPCS["show ip"]),
                Reading("PC1", "ping 10.0.0.2 -c 3", 2.0, "ok", VPCS["ping 10.0.0.2 -c 2"]),
                Reading("PC1", "ping 10.0.0.9 -c 3", 3.0, "ok", VPCS["ping 10.0.0.9 -c 2"])]
    state = state_of("PC1", "vpcs", readings)
    assert evaluate(AddressPresent(device="PC1", address="10.0.0.1/24"), state).passed
    assert evaluate(RouteTo(device="PC1", prefix="0.0.0.0/0", via="10.0.0.254"), state).passed
    assert evaluate(Ping(device="PC1", target="10.0.0.2"), state).observed == "2/2 replies"
    assert evaluate(Ping(device="PC1", target="10.0.0.9"), state).status == "fail"
    unset = state_of("PC1", "vpcs", [Reading("PC1", "show ip", 1.0, "ok", VPCS["show ip (unset)"])])
    assert evaluate(AddressPresent(device="PC1", address="10.0.0.1"), unset).observed == "addresses: none"


def test_ios_state_through_ntc_templates():
    readings = [Reading("R9", "show ip interface brief", 1.0, "ok", text("cisco_ios_show_ip_interface_brief.txt")),
                Reading("R9", "show ip ospf neighbor", 1.0, "ok", text("cisco_ios_show_ip_ospf_neighbor.txt")),
                Reading("R9", "show ip bgp summary", 1.0, "ok", text("cisco_ios_show_ip_bgp_summary.txt")),
                Reading("R9", "show ip route", 1.0, "ok", text("cisco_ios_show_ip_route.txt")),
                Reading("R9", "ping 192.168.0.1 repeat 3 timeout 1", 1.0, "ok", text("cisco_ios_ping.txt"))]
    state = state_of("R9", "ios", readings)
    assert state.errors == {}
    assert evaluate(InterfaceUp(device="R9", interface="Ethernet0/1"), state).passed
    shut = evaluate(InterfaceUp(device="R9", interface="Ethernet0/2"), state)
    assert (shut.status, shut.observed) == ("fail", "administratively down")
    assert evaluate(AddressPresent(device="R9", address="10.0.1.2/32"), state).passed  # the brief table has no mask
    assert evaluate(OSPFNeighbor(device="R9", neighbor="10.0.0.3"), state).observed == "Full"
    assert state.timers["ospf_dead"] == pytest.approx(39 * 4 / 3)
    assert evaluate(BGPNeighbor(device="R9", peer="10.0.0.4"), state).passed
    idle = evaluate(BGPNeighbor(device="R9", peer="10.0.0.10"), state)
    assert idle.status == "fail" and idle.observed == "Idle (Admin)"
    assert evaluate(RouteTo(device="R9", prefix="4.4.0.0/16", via="194.0.0.2", protocol="ospf"), state).passed
    assert evaluate(Ping(device="R9", target="192.168.0.1", min_replies=3), state).passed


def test_the_data_format_is_typed_and_bad_input_names_the_field():
    check = parse_check({"kind": "ospf_neighbor", "device": "R1", "neighbor": "10.255.0.2", "hold": 5})
    assert isinstance(check, OSPFNeighbor) and check.state == "Full" and check.hold == 5
    with pytest.raises(ValueError, match="neighbor"):
        parse_check({"kind": "ospf_neighbor", "device": "R1", "neighbor": "R2"})
    with pytest.raises(ValueError, match="1.route.prefix: not a network prefix"):
        parse_checks([{"kind": "interface_up", "device": "R1", "interface": "eth1"},
                      {"kind": "route", "device": "R1", "prefix": "nowhere"}])
    with pytest.raises(ValueError, match="hold"):
        parse_check({"kind": "ping", "device": "PC1", "target": "10.0.0.1", "hold": 10_000})
    spec = CheckSpec(kind="route", device="R1", target="default", via="10.0.12.2")
    assert spec.check() == RouteTo(device="R1", prefix="0.0.0.0/0", via="10.0.12.2")
    with pytest.raises(ValueError, match="target"):
        CheckSpec(kind="bgp_neighbor", device="R1", target="R2").check()


def verdict(check, status: str) -> Verdict:
    return Verdict(check, status, status)  # type: ignore[arg-type]


def test_a_timeline_holds_within_and_fails_a_hold_that_breaks():
    check = OSPFNeighbor(device="R1", neighbor="10.255.0.2", hold=4)
    holding = Timeline(check, start=0.0)
    for t in (0.5, 2.0, 3.5):
        holding.add(verdict(check, "pass"), t)
        assert not holding.decided
    holding.add(verdict(check, "pass"), 4.6)
    assert holding.decided and holding.final().passed
    breaking = Timeline(check, start=0.0)
    breaking.add(verdict(check, "pass"), 0.5)
    breaking.add(verdict(check, "fail"), 3.0)
    assert breaking.decided and breaking.final().status == "fail"
    coming = Timeline(OSPFNeighbor(device="R1", neighbor="10.255.0.2", within=30), start=0.0)
    coming.add(verdict(coming.check, "fail"), 1.0)
    assert not coming.decided
    coming.add(verdict(coming.check, "pass"), 12.0)
    assert coming.final().passed
    late = Timeline(OSPFNeighbor(device="R1", neighbor="10.255.0.2", within=5), start=0.0)
    late.add(verdict(late.check, "fail"), 6.0)
    assert late.decided and "not true within 5s" in late.final().observed


def test_a_change_implies_what_must_not_break_and_what_it_asks_for():
    baseline = state_of("R1", "frr", frr_readings())
    checks = implied_checks(baseline, ["interface eth1", "ip ospf hello-interval 2"])
    kinds = {(c.kind, getattr(c, "neighbor", None) or getattr(c, "peer", None) or getattr(c, "interface", None))
             for c in checks}
    assert {("ospf_neighbor", "10.255.0.2"), ("bgp_neighbor", "10.0.12.2"), ("interface_up", "eth1"),
            ("interface_up", "lo")} <= kinds
    assert all(c.hold == 5.0 for c in checks)  # eth1's dead interval (4 s), and a second to see it
    shut = implied_checks(baseline, ["interface eth1", "shutdown"])
    assert not any(getattr(c, "interface", None) == "eth1" or c.kind == "ospf_neighbor" for c in shut)
    peer = implied_checks(baseline, ["router bgp 65001", "neighbor 10.0.12.2 shutdown"])
    assert not any(c.kind == "bgp_neighbor" for c in peer) and any(c.kind == "ospf_neighbor" for c in peer)
    readdressed = implied_checks(baseline, ["interface eth1", "ip address 10.0.12.5/30"])
    assert AddressPresent(device="R1", address="10.0.12.5/30", interface="eth1", within=5.0,
                          why="set by the change") in readdressed
    assert not any(c.kind == "address" and getattr(c, "address", "") == "10.0.12.1/30" for c in readdressed)
    vpcs = state_of("PC1", "vpcs", [Reading("PC1", "show ip", 1.0, "ok", VPCS["show ip"])])
    moved = implied_checks(vpcs, ["ip 10.0.0.7/24 10.0.0.254"])
    assert [(c.kind, getattr(c, "address", None)) for c in moved] == [("interface_up", None), ("address", "10.0.0.7/24")]
    # What a rollback must bring back: what the device held, not what the change asked for.
    assert [c.kind for c in moved if held_before(c)] == ["interface_up"]
    assert all(held_before(c) for c in checks)
    assert [held_before(c) for c in readdressed if getattr(c, "address", "") == "10.0.12.5/30"] == [False]


async def test_run_checks_reads_again_until_each_check_is_decided():
    """A neighbour that goes away during its hold: read until it is gone, then the check fails."""
    healthy, broken = frr_readings(), frr_readings("R1-broken")
    calls: list[list[str]] = []

    async def read(device: str, commands: list[str]) -> list[Reading]:
        calls.append(commands)
        return healthy if len(calls) < 3 else broken

    checks = [OSPFNeighbor(device="R1", neighbor="10.255.0.2", hold=30)]
    report = await asyncio.wait_for(run_checks(checks, {"R1": "frr"}, read, interval=0.01), 30)
    assert not report.passed and report.verdicts[0].observed.startswith("not a neighbour")
    assert len(calls) == 3 and calls[0] == ["show ip ospf neighbor json", "show ip ospf interface json"]
    assert "FAIL R1: OSPF neighbour 10.255.0.2 expected Full" in report.as_dict()["summary"]
