"""Troubleshooting real routers end to end: faults injected, seen, fixed and reverted on an FRR network.

The network is ``frr_lab.FRRLab`` (three FRR 8.4 routers in namespaces of their
own, OSPF and eBGP), each router's vtysh on the console of its node in a real
gns3-server's project (``frr_project``). The LLM is scripted: the
OpenAI-compatible stub on loopback answers the real server's provider client
with the tool calls each step needs, and everything else is the product: the
graph, the tools, the console layer, the policy, approvals, the audit, fault
injection and its revert.

Each scenario: the teacher injects the fault through ``chat/inject`` (as GNS3
3.1's Inject Fault dialog does; its undo is computed from the router's running
configuration before and after); the router's state breaks (read outside the
copilot, with deadlines); the student's copilot reads it with
``gns3_show_commands`` (the assertions are on the router output the tool
returned to the model); the student's fix waits for approval and runs through
``confirm``; the network converges again and the tools show it. The fix is
exact: every router's running configuration is its baseline again. Other tests
revert faults through ``POST .../faults/{id}/revert``.

One lab and one project serve the module; a router a test leaves changed is
restarted from its baseline before the next test (``FRRLab.restore``).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from frr_lab import ESTABLISHED, FULL, FRRLab
from frr_project import CONSOLE_DRIVER, frr_gns3, frr_lab, frr_restored  # noqa: F401  (fixtures)
from test_copilot_api import (  # noqa: F401  (fixtures)
    API,
    COPILOT,
    admin,
    http,
    sessions_path,
    stub,
    users,
)
from test_fault_revert import faults
from test_fault_revert_linux import inject

from tests.support.openai_stub import OpenAIStub, reply, tool_call

pytestmark = pytest.mark.integration

BROKEN_TIMEOUT = 60.0  # an OSPF neighbour goes after its dead interval (4 s); a busy machine is slower


@pytest.fixture
async def people(users, stub) -> tuple[API, API]:
    """The teacher who injects faults and the student who troubleshoots, both using the scripted LLM."""
    teacher, student = await users("frr_teacher"), await users("frr_student")
    # A 128K window: a 16K one (the API tests') cuts long tool outputs for the model, and the
    # assertions read what the model read.
    await teacher.use_llm(stub, context_limit=128)
    await student.use_llm(stub, context_limit=128)
    return teacher, student


def config_call(device: str, commands: list[str]) -> dict[str, Any]:
    return {"device": device, "driver": CONSOLE_DRIVER, "commands": commands}


async def look(api: API, stub: OpenAIStub, project_id: str, devices: list[str], commands: list[str],
               session_id: str | None = None) -> dict[str, list[str]]:
    """A chat turn in which the model reads ``commands`` on ``devices``: each device's outputs as the
    tool returned them to the model."""
    stub.enqueue(reply(tool_calls=[tool_call("gns3_show_commands", {"devices": devices, "commands": commands,
                                                                     "driver": CONSOLE_DRIVER})]), "I read them.")
    body = {"session_id": session_id} if session_id else {}
    result = await api.chat(project_id, "What do the routers say?", **body)
    assert result["status"] == "completed", result
    told = [m for m in stub.requests[-1]["messages"] if m["role"] == "tool"][-1]
    answer = json.loads(told["content"])  # whole: a window this size cuts no tool output
    outputs = {}
    for device in answer["devices"]:
        assert device["status"] == "ok", device
        outputs[device["device"]] = [r["output"] for r in device["results"]]
    assert sorted(outputs) == sorted(devices)
    return outputs


async def fix(api: API, stub: OpenAIStub, project_id: str, device: str, commands: list[str]) -> str:
    """The student's copilot proposes ``commands``; the student approves them through ``confirm``."""
    call = config_call(device, commands)
    stub.enqueue(reply("I will fix it.", tool_calls=[tool_call("gns3_config_commands", call)]))
    result = await api.chat(project_id, f"Fix {device}")
    assert result["status"] == "waiting_confirmation", result
    (pending,) = result["pending_calls"]
    assert pending["args"] == call
    stub.enqueue("Fixed.")
    status, done = await api.post(sessions_path(project_id, result["session_id"], "/confirm"),
                                  {"approved": True, "stream": False})
    assert status == 200 and done["content"] == "Fixed.", done
    ran = [m for m in stub.requests[-1]["messages"] if m["role"] == "tool"][-1]
    assert json.loads(ran["content"])["status"] == "ok", ran
    return str(result["session_id"])


def neighbour_rows(output: str) -> dict[str, str]:
    """``show ip ospf neighbor``: neighbour router id -> state (``Full/-``, ``ExStart/-`` ...)."""
    rows = {}
    for line in output.splitlines():
        words = line.split()
        if len(words) > 3 and re.fullmatch(r"\d+\.\d+\.\d+\.\d+", words[0]):
            rows[words[0]] = words[2]
    return rows


def bgp_rows(output: str) -> dict[str, tuple[str, str]]:
    """``show ip bgp summary``: neighbour address -> (its AS, State/PfxRcd)."""
    rows = {}
    for line in output.splitlines():
        words = line.split()
        if len(words) >= 12 and re.fullmatch(r"\d+\.\d+\.\d+\.\d+", words[0]) and words[1] == "4":
            rows[words[0]] = (words[2], " ".join(words[9:-2]))  # the state may be two words: Idle (Admin)
    return rows


def interface_block(output: str, name: str) -> str:
    """One interface's part of ``show ip ospf interface``."""
    blocks = re.split(r"\n(?=\S)", output)
    return next(b for b in blocks if b.startswith(f"{name} is "))


@dataclass(frozen=True)
class Scenario:
    router: str
    fault: list[str]
    undo: list[str]
    broken: Callable[[FRRLab], bool]
    """The state the fault leads to (read outside the copilot)."""
    commands: list[str]
    """What the student's copilot reads on ``devices``."""
    devices: list[str]
    seen: Callable[[dict[str, list[str]]], None]
    """Asserts the fault on the outputs the tool returned."""
    fix: list[str]


def hello_seen(outputs: dict[str, list[str]]) -> None:
    neighbours, interface, routes = outputs["R1"]
    assert "10.255.0.2" not in neighbour_rows(neighbours)  # R2 is no longer R1's neighbour ...
    assert "Hello 2s, Dead 4s" in interface  # ... since R1 says hello every 2 s, R2 every 1 s
    assert "10.255.0.2/32" not in routes and "10.255.0.3/32" not in routes  # and R2's and R3's routes are gone
    assert "Hello 1s, Dead 4s" in outputs["R2"][1]


def area_seen(outputs: dict[str, list[str]]) -> None:
    neighbours, interface, routes = outputs["R1"]
    assert neighbour_rows(neighbours) == {}
    assert "Area 0.0.0.1" in interface and "Area 0.0.0.0" in outputs["R2"][1]
    assert "10.255.0.2/32" not in routes


def mtu_seen(outputs: dict[str, list[str]]) -> None:
    r3, r2 = neighbour_rows(outputs["R3"][0]), neighbour_rows(outputs["R2"][0])
    assert r3["10.255.0.2"].split("/")[0] in ("ExStart", "Exchange"), r3  # stuck: R3 refuses R2's bigger MTU
    assert r2["10.255.0.3"].split("/")[0] in ("ExStart", "Exchange"), r2
    r3_eth1, r2_eth2 = interface_block(outputs["R3"][1], "eth1"), interface_block(outputs["R2"][1], "eth2")
    assert "MTU 1400 bytes" in r3_eth1 and "MTU mismatch detection: enabled" in r3_eth1
    assert "MTU 1500 bytes" in r2_eth2


def wrong_as_seen(outputs: dict[str, list[str]]) -> None:
    summary, routes = outputs["R1"]
    remote_as, state = bgp_rows(summary)["10.0.12.2"]
    assert remote_as == "65009" and not state.isdigit()  # no prefixes received: the session is down
    assert "192.168.2.0/24" not in routes and "192.168.3.0/24" not in routes


def shut_seen(outputs: dict[str, list[str]]) -> None:
    summary, routes = outputs["R1"]
    assert bgp_rows(summary)["10.0.12.2"] == ("65002", "Idle (Admin)")
    assert "192.168.2.0/24" not in routes


def ospf_lost(router: str, neighbour_id: str) -> Callable[[FRRLab], bool]:
    return lambda lab: neighbour_id not in lab.ospf_states(router)


def mtu_stuck(lab: FRRLab) -> bool:
    stuck = ("ExStart", "Exchange")
    return lab.ospf_states("R3").get("10.255.0.2") in stuck and lab.ospf_states("R2").get("10.255.0.3") in stuck


def bgp_down(lab: FRRLab) -> bool:
    return lab.bgp_states("R1").get("10.0.12.2") != ESTABLISHED and "192.168.2.0/24" not in lab.routes("R1")


OSPF_LOOK = ["show ip ospf neighbor", "show ip ospf interface eth1", "show ip route ospf"]
SCENARIOS = {
    "ospf hello-interval mismatch": Scenario(
        "R1", ["interface eth1", "ip ospf hello-interval 2"], ["interface eth1", "ip ospf hello-interval 1"],
        ospf_lost("R1", "10.255.0.2"), OSPF_LOOK, ["R1", "R2"], hello_seen,
        ["interface eth1", "ip ospf hello-interval 1"]),
    "ospf area mismatch": Scenario(
        "R1", ["interface eth1", "no ip ospf area", "ip ospf area 1"],
        ["interface eth1", "no ip ospf area 1", "ip ospf area 0"],
        lambda lab: ospf_lost("R1", "10.255.0.2")(lab) and ospf_lost("R2", "10.255.0.1")(lab), OSPF_LOOK,
        ["R1", "R2"], area_seen, ["interface eth1", "no ip ospf area 1", "ip ospf area 0"]),
    "ospf mtu mismatch": Scenario(
        "R3", ["interface eth1", "no ip ospf mtu-ignore", "no ip ospf area", "ip ospf area 0"],
        ["interface eth1", "ip ospf mtu-ignore"], mtu_stuck, ["show ip ospf neighbor", "show ip ospf interface"],
        ["R2", "R3"], mtu_seen, ["interface eth1", "ip ospf mtu-ignore"]),
    "bgp neighbour with the wrong AS": Scenario(
        "R1", ["router bgp 65001", "neighbor 10.0.12.2 remote-as 65009"],
        ["router bgp 65001", "neighbor 10.0.12.2 remote-as 65002"], bgp_down,
        ["show ip bgp summary", "show ip route bgp"], ["R1"], wrong_as_seen,
        ["router bgp 65001", "neighbor 10.0.12.2 remote-as 65002"]),
    "bgp neighbour shut down": Scenario(
        "R1", ["router bgp 65001", "neighbor 10.0.12.2 shutdown"], ["router bgp 65001", "no neighbor 10.0.12.2 shutdown"],
        bgp_down, ["show ip bgp summary", "show ip route bgp"], ["R1"], shut_seen,
        ["router bgp 65001", "no neighbor 10.0.12.2 shutdown"]),
}


def _read(command: str) -> bool:
    """A read of a change transaction (configuration, state) or its summary line: not a configuration command."""
    return command.startswith("show ") or command == "<change>"


async def fault_of(teacher: API, project_id: str, session_id: str) -> list[dict[str, Any]]:
    return [f for f in await faults(teacher, project_id) if f["session_id"] == session_id]


async def converged_as_the_tools_show(lab: FRRLab, api: API, stub: OpenAIStub, project_id: str) -> None:
    """Wait (outside the copilot) for the network to converge, then check it through the copilot's tools."""
    await asyncio.to_thread(lab.wait_converged)
    outputs = await look(api, stub, project_id, list(lab.routers), ["show ip ospf neighbor", "show ip bgp summary"])
    for name, (neighbours, summary) in outputs.items():
        ospf, bgp = lab.expected_neighbours(name)
        assert {rid: state.split("/")[0] for rid, state in neighbour_rows(neighbours).items()} == ospf
        assert {peer: state.isdigit() for peer, (_, state) in bgp_rows(summary).items()} == {p: True for p in bgp}
    assert all(state == FULL for state in lab.ospf_states("R2").values())


@pytest.mark.parametrize("name", SCENARIOS)
async def test_a_fault_is_injected_seen_fixed_with_approval_and_verified(name, frr_lab, frr_gns3, people, stub, admin):
    scenario = SCENARIOS[name]
    teacher, student = people
    pid = frr_gns3.project_id
    session_id = await inject(teacher, stub, pid, [config_call(scenario.router, scenario.fault)])

    # The undo was computed from what the router had before the fault and what it has after it.
    (fault,) = await fault_of(teacher, pid, session_id)
    assert fault["revertible"] and fault["undo"]["args"] == config_call(scenario.router, scenario.undo)
    assert set(fault["undo"]["expects"]) == {"command", "before", "after"}
    await asyncio.to_thread(frr_lab.wait_for, lambda: scenario.broken(frr_lab), f"{name}: the fault's effect",
                            BROKEN_TIMEOUT)

    # The student's copilot sees it on the routers' consoles ...
    scenario.seen(await look(student, stub, pid, scenario.devices, scenario.commands))
    # ... fixes it with the student's approval, and the network converges again, as the tools show.
    fixed_in = await fix(student, stub, pid, scenario.router, scenario.fix)
    await converged_as_the_tools_show(frr_lab, student, stub, pid)
    assert await asyncio.to_thread(frr_lab.changed) == []  # exactly the baseline again, on every router

    status, entries = await admin.get(f"{COPILOT}/console/audit?session_id={fixed_in}")
    assert status == 200, entries
    sent = [(e["device"], e["command"], e["outcome"], e["approved_by"]) for e in reversed(entries)]
    # The fix is a change transaction: read first (configuration and state), then verified by its checks.
    assert sent[0] == (scenario.router, "show running-config", "ok", "frr_student")
    assert sent[-1][1:3] == ("<change>", "verified")
    assert [s for s in sent if not _read(s[1])] == [
        (scenario.router, command, "ok", "frr_student") for command in scenario.fix]


async def test_faults_on_two_routers_are_reverted_through_the_revert_route(frr_lab, frr_gns3, people, stub, admin):
    teacher, student = people
    pid = frr_gns3.project_id
    mtu, shut = SCENARIOS["ospf mtu mismatch"], SCENARIOS["bgp neighbour shut down"]
    session_id = await inject(teacher, stub, pid, [config_call(mtu.router, mtu.fault),
                                                  config_call(shut.router, shut.fault)])
    await asyncio.to_thread(frr_lab.wait_for, lambda: mtu_stuck(frr_lab) and bgp_down(frr_lab), "both faults' effects",
                            BROKEN_TIMEOUT)
    recorded = {f["args"]["device"]: f for f in await fault_of(teacher, pid, session_id)}
    assert recorded["R3"]["undo"]["args"]["commands"] == mtu.undo
    assert recorded["R1"]["undo"]["args"]["commands"] == shut.undo

    status, body = await student.post(f"{COPILOT}/projects/{pid}/faults/{recorded['R3']['fault_id']}/revert")
    assert status == 404, body  # not the student's fault
    for device in ("R3", "R1"):
        status, body = await teacher.post(f"{COPILOT}/projects/{pid}/faults/{recorded[device]['fault_id']}/revert")
        assert status == 200 and body["reverted_at"] and body["revertible"] is False, body
    await converged_as_the_tools_show(frr_lab, student, stub, pid)
    assert await asyncio.to_thread(frr_lab.changed) == []

    # Audited: each router's configuration read before and after the fault, the fault, then the
    # revert under the teacher's revert approval: the read showing the router still holds what the
    # fault left, the undo, and the read showing it holds what it had.
    status, entries = await admin.get(f"{COPILOT}/console/audit?session_id={session_id}")
    assert status == 200, entries
    r3 = [(e["command"], e["outcome"], e["approval_id"] or "") for e in reversed(entries) if e["device"] == "R3"]
    revert_id = f"revert:{recorded['R3']['fault_id']}"
    # Each change (the fault, the undo) is a transaction: its state reads and summary line left out here,
    # the configuration it reads before and after it stays.
    r3 = [c for c in r3 if c[0] == "show running-config" or not _read(c[0])]
    assert [c[:2] for c in r3] == [(c, "ok") for c in [
        "show running-config", *mtu.fault, "show running-config",
        "show running-config", "show running-config", *mtu.undo, "show running-config", "show running-config"]]
    reverting = 4 + len(mtu.undo)
    assert {c[2] for c in r3[-reverting:]} == {revert_id} and revert_id not in {c[2] for c in r3[:-reverting]}


async def test_a_revert_refuses_a_router_changed_since_and_skips_one_already_fixed(frr_lab, frr_gns3, people, stub):
    """The recorded undo is exact from the configuration it was computed on, and from there only."""
    teacher, student = people
    pid = frr_gns3.project_id
    hello = SCENARIOS["ospf hello-interval mismatch"]
    wrong = await inject(teacher, stub, pid, [config_call("R1", hello.fault)])
    (first,) = await fault_of(teacher, pid, wrong)
    await fix(student, stub, pid, "R1", ["interface eth1", "ip ospf hello-interval 3"])  # not the right fix

    status, body = await teacher.post(f"{COPILOT}/projects/{pid}/faults/{first['fault_id']}/revert")
    assert status == 409 and body["code"] == "fault_not_revertible", body
    assert "R1's configuration changed since fault" in body["message"], body
    assert "ip ospf hello-interval 3" in await asyncio.to_thread(frr_lab.running_config, "R1")  # nothing was run
    (first,) = await fault_of(teacher, pid, wrong)
    assert first["revertible"] is True  # it can be reverted once R1 holds what the fault left again

    await asyncio.to_thread(frr_lab.restore)
    again = await inject(teacher, stub, pid, [config_call("R1", hello.fault)])
    (second,) = await fault_of(teacher, pid, again)
    await fix(student, stub, pid, "R1", hello.fix)  # the student's exact fix: R1 is as it was
    status, body = await teacher.post(f"{COPILOT}/projects/{pid}/faults/{second['fault_id']}/revert")
    assert status == 200 and body["reverted_at"], body  # nothing left to undo
    assert await asyncio.to_thread(frr_lab.changed) == []

