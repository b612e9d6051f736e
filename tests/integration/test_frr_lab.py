"""The FRR network of the troubleshooting tests, and the IOS-family rollback applied to its real routers.

``frr_lab.FRRLab``: three FRR 8.4 routers in network namespaces of their own,
OSPF and BGP converged; ``frr_project.frr_project``: the same routers as nodes
of a real gns3-server's project, each node's console answering with that
router's vtysh. Then every rollback ``tests/unit/test_ios_rollback.py`` computes
from text is computed here from what the real router printed before and after a
change, typed back on the router's GNS3 console through the copilot's console
layer (FRR driver, the policy of a node whose CLI GNS3 does not know, audit),
and the running configuration must come back exactly.
"""

from __future__ import annotations

import asyncio
import subprocess
import uuid
from pathlib import Path

import pytest
from frr_lab import ESTABLISHED, FULL, FRRLab
from frr_project import frr_gns3, frr_lab, frr_restored  # noqa: F401  (fixtures)

from gns3server.agent.gns3_copilot.console import (
    FRR,
    AuditLog,
    Device,
    DeviceLocks,
    Who,
    load_policy,
    run_commands,
)
from gns3server.agent.gns3_copilot.console.registry import Drivers
from gns3server.agent.gns3_copilot.tools.ios_rollback import rollback

pytestmark = pytest.mark.integration


def test_three_routers_run_ospf_and_bgp_to_convergence(frr_lab):
    for name, router in frr_lab.routers.items():
        ospf = frr_lab.show_json(name, "show ip ospf neighbor")["neighbors"]
        bgp = frr_lab.show_json(name, "show bgp ipv4 unicast summary")["peers"]
        neighbours = {link.peer(name)[0] for link in frr_lab.links if name in (link.a, link.b)}
        assert {rid: [e["nbrState"] for e in entries] for rid, entries in ospf.items()} == {
            frr_lab.routers[n].router_id: ["Full/-"] for n in neighbours}
        assert {peer["remoteAs"] for peer in bgp.values()} == {frr_lab.routers[n].asn for n in neighbours}
        assert {peer["state"] for peer in bgp.values()} == {ESTABLISHED}
        routes = frr_lab.routes(name)
        for other in frr_lab.routers.values():
            if other is not router:
                assert routes[f"{other.router_id}/32"] == "ospf" and routes[other.prefix] == "bgp", routes
        hostname = subprocess.run(["nsenter", f"--uts={router.uts}", "hostname"], capture_output=True, text=True,
                                  check=True)
        assert hostname.stdout.strip() == name  # its own UTS namespace
    assert frr_lab.ospf_states("R2") == {"10.255.0.1": FULL, "10.255.0.3": FULL}
    assert len({r.netns for r in frr_lab.routers.values()}) == 3


async def console_greeting(port: int) -> bytes:
    """What a fresh connection to a console receives until its first prompt."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        data = b""
        async with asyncio.timeout(30):
            while not data.rstrip().endswith(b"#"):
                chunk = await reader.read(4096)
                assert chunk, data
                data += chunk
        return data
    finally:
        writer.close()


async def test_each_router_s_vtysh_answers_on_its_gns3_node_s_console(frr_gns3, gns3_server, tmp_path):
    async with gns3_server.client() as client:
        nodes, links = await client.nodes_and_links(frr_gns3.project_id)
    by_id = {n["node_id"]: n["name"] for n in nodes}
    assert sorted(by_id.values()) == ["R1", "R2", "R3"]
    assert sorted(sorted(by_id[end["node_id"]] + f":e{end['adapter_number']}" for end in link["nodes"])
                  for link in links) == [["R1:e1", "R2:e1"], ["R2:e2", "R3:e1"]]
    for node in nodes:
        greeting = await console_greeting(node["console"])
        assert b"Hello, this is FRRouting (version 8.4" in greeting
        assert greeting.rstrip().endswith(node["name"].encode() + b"#")  # the prompt is the router's name
    audit = AuditLog(tmp_path / "audit")
    try:
        port = frr_gns3.nodes["R2"]["console"]
        result = await run_commands(Device("R2", "127.0.0.1", port, FRR, cli_known=False),
                                    ["show ip ospf neighbor", "show bgp ipv4 unicast summary"], mode="show",
                                    policy=load_policy(), locks=DeviceLocks(), audit=audit, who=Who("tests", "-", "-"),
                                    timeout=30)
    finally:
        await audit.close()
    assert result.status == "ok", result
    ospf, bgp = (r.output for r in result.results)
    assert [line.split()[:3] for line in ospf.splitlines()[1:]] == [
        ["10.255.0.1", "1", "Full/-"], ["10.255.0.3", "1", "Full/-"]]
    assert "10.0.12.1" in bgp and "10.0.23.2" in bgp


def test_a_router_left_changed_is_restarted_from_its_baseline(frr_lab):
    frr_lab.vtysh("R2", "configure terminal", "interface eth1", "ip ospf hello-interval 7")
    assert frr_lab.changed() == ["R2"]
    assert frr_lab.restore() == ["R2"]
    assert frr_lab.running_config("R2") == frr_lab.baseline["R2"] and frr_lab.converged()
    assert frr_lab.restore() == []  # nothing changed: nothing restarted


def leftovers(suffix: str) -> dict[str, list[str]]:
    """What a frr_lab named ``suffix`` may have left: namespaces, directories, mounts, processes."""
    mark = f"copilot-frr-{suffix}-"
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    processes = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and mark.encode() in (entry / "cmdline").read_bytes():
                processes.append(entry.name)
        except OSError:
            continue
    return {
        "netns": [line for line in netns.splitlines() if mark in line],
        "directories": [str(p) for p in Path("/tmp").glob(f"{mark}*")],
        "mounts": [line for line in Path("/proc/mounts").read_text().splitlines() if mark in line],
        "processes": processes,
    }


def test_stopping_a_lab_removes_everything_it_started():
    suffix = uuid.uuid4().hex[:6]
    other = FRRLab.start(count=2, suffix=suffix)
    pids = other.pids()
    assert len(pids) == 8 and all(leftovers(suffix).values())  # 4 daemons per router, all of it named
    other.stop()
    assert leftovers(suffix) == {"netns": [], "directories": [], "mounts": [], "processes": []}


def test_a_lab_that_fails_to_start_leaves_nothing_behind():
    suffix = uuid.uuid4().hex[:6]
    with pytest.raises(RuntimeError, match="did not converge"):
        FRRLab.start(count=2, suffix=suffix, timeout=0)  # no router converges at once: the start fails
    assert leftovers(suffix) == {"netns": [], "directories": [], "mounts": [], "processes": []}


# ---------------------------------------------------------------- rollback on the real routers

# Each: a router, a change typed in its configuration mode, and the rollback computed from its
# running configuration before and after (the same cases as the unit tests' FRR_CASES).
REAL_CASES = {
    "hello interval": ("R1", ["interface eth1", "ip ospf hello-interval 2"],
                       ["interface eth1", "ip ospf hello-interval 1"]),
    "area": ("R1", ["interface eth1", "no ip ospf area", "ip ospf area 1"],
             ["interface eth1", "no ip ospf area 1", "ip ospf area 0"]),
    "mtu-ignore removed": ("R3", ["interface eth1", "no ip ospf mtu-ignore"], ["interface eth1", "ip ospf mtu-ignore"]),
    "wrong AS": ("R1", ["router bgp 65001", "neighbor 10.0.12.2 remote-as 65009"],
                 ["router bgp 65001", "neighbor 10.0.12.2 remote-as 65002"]),
    "neighbour shut down": ("R1", ["router bgp 65001", "neighbor 10.0.12.2 shutdown"],
                            ["router bgp 65001", "no neighbor 10.0.12.2 shutdown"]),
    "neighbour removed": ("R1", ["router bgp 65001", "no neighbor 10.0.12.2"],
                          ["router bgp 65001", "neighbor 10.0.12.2 remote-as 65002",
                           "neighbor 10.0.12.2 timers connect 1"]),
    "network withdrawn, static route removed": (
        "R1", ["no ip route 192.168.1.0/24 blackhole", "router bgp 65001", "address-family ipv4 unicast",
               "no network 192.168.1.0/24"],
        ["ip route 192.168.1.0/24 blackhole", "router bgp 65001", "address-family ipv4 unicast",
         "network 192.168.1.0/24", "exit-address-family"]),
    "interface section added": ("R1", ["interface eth9", "description spare", "ip ospf cost 7"],
                                ["interface eth9", "no description", "no ip ospf cost 7"]),
    "interface the kernel has": ("R2", ["interface eth2", "description to R3"], ["interface eth2", "no description"]),
    "neighbour description": ("R1", ["router bgp 65001", "neighbor 10.0.12.2 description to R2"],
                              ["router bgp 65001", "no neighbor 10.0.12.2 description"]),
    "route-map applied": ("R2", ["route-map X permit 10", "set metric 5", "router bgp 65002",
                                 "address-family ipv4 unicast", "neighbor 10.0.12.1 route-map X in"],
                          ["no route-map X permit 10", "router bgp 65002", "address-family ipv4 unicast",
                           "no neighbor 10.0.12.1 route-map X in", "exit-address-family"]),
}


@pytest.mark.parametrize("case", REAL_CASES)
async def test_a_change_on_a_real_router_is_rolled_back_exactly(case, frr_lab, frr_gns3, tmp_path):
    router, change, expected = REAL_CASES[case]
    baseline = await asyncio.to_thread(frr_lab.running_config, router)
    assert baseline == frr_lab.baseline[router]
    await asyncio.to_thread(frr_lab.vtysh, router, "configure terminal", *change)
    after = await asyncio.to_thread(frr_lab.running_config, router)
    assert after != baseline
    commands = rollback(baseline, after)
    assert commands == expected
    audit = AuditLog(tmp_path / "audit")
    try:
        result = await run_commands(
            Device(router, "127.0.0.1", frr_gns3.nodes[router]["console"], FRR, cli_known=False), commands,
            mode="config", policy=load_policy(), locks=DeviceLocks(), audit=audit, who=Who("tests", "-", "-"),
            timeout=30,
        )
    finally:
        await audit.close()
    assert result.status == "ok", result
    assert await asyncio.to_thread(frr_lab.running_config, router) == baseline
    assert await asyncio.to_thread(frr_lab.changed) == []  # so the autouse restore restarts nothing


@pytest.mark.parametrize("tags", [["driver:frr"], []], ids=["tagged driver:frr", "untagged, driver named by the caller"])
async def test_exit_and_shutdown_pass_where_gns3_says_the_node_runs_frr(tags, frr_lab, frr_gns3, tmp_path):
    # FRR's own grammar reads "exit" as leaving a section and "shutdown" as an interface's; only when
    # GNS3's data confirms the CLI (a driver:frr tag) is that the grammar the policy judges them in.
    # Elsewhere they are judged in every CLI's too, where they end a shell and power a Linux VM off.
    commands = ["interface eth9", "shutdown", "exit", "no interface eth9"]
    known = Drivers().pick({**frr_gns3.nodes["R2"], "tags": tags}, override="frr").cli_known
    assert frr_gns3.nodes["R2"]["node_type"] == "qemu" and known == bool(tags)
    audit = AuditLog(tmp_path / "audit")
    try:
        result = await run_commands(
            Device("R2", "127.0.0.1", frr_gns3.nodes["R2"]["console"], FRR, cli_known=known), commands,
            mode="config", policy=load_policy(), locks=DeviceLocks(), audit=audit, who=Who("tests", "-", "-"),
            timeout=30,
        )
    finally:
        await audit.close()
    if known:
        assert result.status == "ok", result
        assert [(r.status, r.errors) for r in result.results] == [("ok", [])] * 4, result
    else:
        assert result.status == "blocked", result
        reasons = {r.command: r.reason for r in result.results if r.status == "blocked"}
        assert sorted(reasons) == ["exit", "shutdown"], result
        assert "(reload)" in reasons["shutdown"] and "(leave_console)" in reasons["exit"]
    assert await asyncio.to_thread(frr_lab.changed) == []  # eth9 removed again, or never sent
