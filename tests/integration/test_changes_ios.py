"""Changes you can trust on a Cisco IOS router: faults injected and reverted exactly, changes rolled back exactly.

No IOS image runs here: the router is ``tests/support/cli_sim/ios.py``, Cisco IOS 15
replayed from captures with a running configuration that the commands typed change
(``show running-config`` prints what they left, in IOS's order) and the state it
implies (an OSPF neighbour is Full while the interface matches the peer's hello and
dead intervals, a BGP session is Established while the neighbour has the peer's AS).
It listens on the console port a real gns3-server gave a QEMU node made from GNS3's
``cisco-iosv`` appliance, so the copilot finds the node, tells its family (IOS, from
the image) and drives its console (user exec, ``enable``, paging off, configuration
mode and back) exactly as it would a real IOSv. The LLM is the OpenAI-compatible stub.

* a fault injected through ``chat/inject`` (an OSPF hello-interval mismatch, a BGP
  neighbour's wrong AS, an interface shut down): its undo computed from the router's
  running configuration before and after (hier-config's IOS driver); the fault seen
  through ``gns3_show_commands``; reverted through the revert route; the running
  configuration read back from the router is the baseline, line for line;
* the revert refused (409) on a router changed since, and running nothing on one
  fixed already;
* an approved ``gns3_config_commands`` change goes through the transaction (baseline,
  diff, backup, checks) and ``POST .../changes/{id}/rollback`` brings the running
  configuration back exactly; a change that breaks the OSPF neighbour fails its
  checks and its rollback brings the neighbour back to Full.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from test_console_families_gns3 import appliance_template, known_images

# The API client and its fixtures live with the API tests; reused here as they are.
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

from tests.support.cli_sim import CliSimulator
from tests.support.cli_sim.ios import IOSDevice, transcript
from tests.support.openai_stub import OpenAIStub, reply, tool_call

pytestmark = pytest.mark.integration

PEER = "10.255.0.2"  # R2's router id, R1's OSPF neighbour on GigabitEthernet0/0
BGP_PEER = "10.0.12.2"


@pytest.fixture(scope="module")
async def iosv(admin: API) -> AsyncIterator[dict[str, Any]]:
    """A project with R1, a QEMU node GNS3 made from its cisco-iosv appliance (its image says IOS)."""
    suffix = uuid.uuid4().hex[:6]
    status, project = await admin.post("/v3/projects", {"name": f"changes-ios-{suffix}"})
    assert status == 201, project
    template = await appliance_template(admin, "cisco-iosv.gns3a", f"ios-{suffix}", await known_images(admin))
    try:
        status, node = await admin.post(f"/v3/projects/{project['project_id']}/templates/{template['template_id']}",
                                        {"x": 0, "y": 0})
        assert status == 201, node
        status, node = await admin.put(f"/v3/projects/{project['project_id']}/nodes/{node['node_id']}", {"name": "R1"})
        assert status == 200 and node["console_type"] == "telnet", node
        yield {"project_id": project["project_id"], "node": node}
    finally:
        await admin.delete(f"/v3/projects/{project['project_id']}")
        await admin.delete(f"/v3/templates/{template['template_id']}")


@pytest.fixture
async def router(iosv: dict[str, Any]) -> AsyncIterator[CliSimulator]:
    """R1's IOS, booted from its startup configuration for each test, on the node's console port."""
    async with CliSimulator(transcript(), kind=IOSDevice, listen_port=iosv["node"]["console"]) as sim:
        yield sim


@pytest.fixture
async def people(users, stub) -> tuple[API, API]:
    """The teacher who injects faults and the engineer (student) who reads, fixes and changes R1."""
    teacher, engineer = await users("ios_teacher"), await users("ios_engineer")
    for person in (teacher, engineer):
        await person.use_llm(stub, context_limit=128)  # the tool results whole, as the assertions read them
    return teacher, engineer


def device(sim: CliSimulator) -> IOSDevice:
    assert isinstance(sim.device, IOSDevice)
    return sim.device


def configuration(sim: CliSimulator) -> list[str]:
    """R1's running configuration as show running-config prints it, read outside the copilot, without the one
    line that is IOS's clock rather than configuration (when it last changed)."""
    return [line for line in device(sim).running_config().splitlines()
            if not line.startswith("! Last configuration change at ")]


def configured_since(sim: CliSimulator, mark: int) -> list[str]:
    """The configuration lines typed on R1's console since ``mark`` (an index into what it received)."""
    typed, lines, inside = sim.received[mark:], [], False
    for line in typed:
        if line.strip() == "configure terminal":
            inside = True
        elif line.strip() == "end":
            inside = False
        elif inside:
            lines.append(line.strip())
    return lines


def tool_results(stub: OpenAIStub) -> list[dict[str, Any]]:
    return [json.loads(m["content"]) for m in stub.requests[-1]["messages"] if m["role"] == "tool"]


async def look(api: API, stub: OpenAIStub, project_id: str, commands: list[str]) -> list[str]:
    """A chat turn in which the model reads ``commands`` on R1: the outputs as the tool returned them to it."""
    stub.enqueue(reply(tool_calls=[tool_call("gns3_show_commands", {"devices": ["R1"], "commands": commands})]),
                 "I read them.")
    result = await api.chat(project_id, "What does R1 say?")
    assert result["status"] == "completed", result
    (answer,) = tool_results(stub)[-1:]
    (r1,) = answer["devices"]
    assert r1["device"] == "R1" and r1["status"] == "ok", r1
    return [r["output"] for r in r1["results"]]


async def approved(api: API, stub: OpenAIStub, project_id: str, commands: list[str], answer: str) -> dict[str, Any]:
    """The model proposes ``commands`` on R1, the user approves them: the tool's result."""
    call = {"device": "R1", "commands": commands}
    stub.enqueue(reply("I will change it.", tool_calls=[tool_call("gns3_config_commands", call)]))
    result = await api.chat(project_id, "Change R1")
    assert result["status"] == "waiting_confirmation", result
    assert [p["args"] for p in result["pending_calls"]] == [call]
    stub.enqueue(answer)
    status, done = await api.post(sessions_path(project_id, result["session_id"], "/confirm"),
                                  {"approved": True, "stream": False})
    assert status == 200 and done["content"] == answer, done
    (ran,) = tool_results(stub)[-1:]
    return ran


def neighbours(output: str) -> set[str]:
    """The router ids show ip ospf neighbor lists."""
    return {line.split()[0] for line in output.splitlines()[1:] if line.strip()}


def bgp_row(output: str, address: str) -> list[str]:
    return next(line.split() for line in output.splitlines() if line.startswith(address + " "))


@dataclass(frozen=True)
class Fault:
    commands: list[str]
    undo: list[str]
    look: list[str]
    seen: Any  # (outputs) -> None: asserts the fault on what the tool returned


def hello_seen(outputs: list[str]) -> None:
    neighbour_table, interface = outputs
    assert PEER not in neighbours(neighbour_table)  # R2 is no longer R1's neighbour ...
    assert "Timer intervals configured, Hello 2, Dead 4," in interface  # ... since R1 says hello every 2 s


def wrong_as_seen(outputs: list[str]) -> None:
    summary, routes = outputs
    row = bgp_row(summary, BGP_PEER)
    assert row[2] == "65009" and not row[-1].isdigit(), row  # the AS R1 expects, and no prefixes: down
    assert "192.168.2.0/24" not in routes


def shut_seen(outputs: list[str]) -> None:
    brief, neighbour_table = outputs
    row = next(line for line in brief.splitlines() if line.startswith("GigabitEthernet0/0 "))
    assert "administratively down down" in " ".join(row.split()), row
    assert PEER not in neighbours(neighbour_table)


FAULTS = {
    "ospf hello-interval mismatch": Fault(
        ["interface GigabitEthernet0/0", "ip ospf hello-interval 2"],
        ["interface GigabitEthernet0/0", "ip ospf hello-interval 1"],
        ["show ip ospf neighbor", "show ip ospf interface GigabitEthernet0/0"], hello_seen),
    "bgp neighbour with the wrong AS": Fault(
        ["router bgp 65001", "neighbor 10.0.12.2 remote-as 65009"],
        ["router bgp 65001", "neighbor 10.0.12.2 remote-as 65002"],
        ["show ip bgp summary", "show ip route"], wrong_as_seen),
    "interface shut down": Fault(
        ["interface GigabitEthernet0/0", "shutdown"],
        ["interface GigabitEthernet0/0", "no shutdown"],
        ["show ip interface brief", "show ip ospf neighbor"], shut_seen),
}


async def fault_of(teacher: API, project_id: str, session_id: str) -> dict[str, Any]:
    (fault,) = [f for f in await faults(teacher, project_id) if f["session_id"] == session_id]
    return fault


@pytest.mark.parametrize("name", FAULTS)
async def test_an_ios_fault_is_injected_seen_and_reverted_exactly_from_the_baseline(name, iosv, router, people, stub,
                                                                                    admin):
    fault = FAULTS[name]
    teacher, engineer = people
    pid = iosv["project_id"]
    baseline = configuration(router)
    session_id = await inject(teacher, stub, pid, [{"device": "R1", "commands": fault.commands}])
    assert configuration(router) != baseline

    # The undo was computed from R1's running configuration before the fault and after it.
    recorded = await fault_of(teacher, pid, session_id)
    assert recorded["revertible"] and recorded["undo"]["args"]["commands"] == fault.undo, recorded
    assert set(recorded["undo"]["expects"]) == {"command", "before", "after"}

    # The engineer's copilot sees it on R1's console.
    fault.seen(await look(engineer, stub, pid, fault.look))

    mark = len(router.received)
    status, body = await teacher.post(f"{COPILOT}/projects/{pid}/faults/{recorded['fault_id']}/revert")
    assert status == 200 and body["reverted_at"] and body["revertible"] is False, body
    assert configured_since(router, mark) == fault.undo
    assert configuration(router) == baseline  # exactly, line for line

    # Audited under the teacher's revert approval: R1 read (it still holds what the fault left), the
    # undo typed as a change transaction of its own (baseline first), R1 read again (it holds what it had).
    status, entries = await admin.get(f"{COPILOT}/console/audit?session_id={session_id}")
    assert status == 200, entries
    revert_id = f"revert:{recorded['fault_id']}"
    reverting = [e["command"] for e in reversed(entries) if e["approval_id"] == revert_id]
    typed = [c for c in reverting if c in fault.undo]
    assert typed == fault.undo and reverting[0] == reverting[-1] == "show running-config"
    assert reverting.index(fault.undo[0]) > reverting.index("show running-config", 1)  # the undo's own baseline


async def test_a_revert_refuses_a_router_changed_since_and_runs_nothing_on_one_fixed_already(iosv, router, people,
                                                                                             stub):
    teacher, engineer = people
    pid = iosv["project_id"]
    hello = FAULTS["ospf hello-interval mismatch"]
    baseline = configuration(router)
    session_id = await inject(teacher, stub, pid, [{"device": "R1", "commands": hello.commands}])
    recorded = await fault_of(teacher, pid, session_id)
    # Not the right fix: R1 now holds neither what the fault left nor what it had.
    await approved(engineer, stub, pid, ["interface GigabitEthernet0/0", "ip ospf hello-interval 3"], "Changed.")

    mark = len(router.received)
    status, body = await teacher.post(f"{COPILOT}/projects/{pid}/faults/{recorded['fault_id']}/revert")
    assert status == 409 and body["code"] == "fault_not_revertible", body
    assert "R1's configuration changed since fault" in body["message"], body
    assert configured_since(router, mark) == []  # nothing was typed
    assert " ip ospf hello-interval 3" in configuration(router)
    assert (await fault_of(teacher, pid, session_id))["revertible"] is True

    # The engineer's exact fix: R1 is as it was, and the revert has nothing left to undo.
    await approved(engineer, stub, pid, ["interface GigabitEthernet0/0", "ip ospf hello-interval 1"], "Fixed.")
    assert configuration(router) == baseline
    mark = len(router.received)
    status, body = await teacher.post(f"{COPILOT}/projects/{pid}/faults/{recorded['fault_id']}/revert")
    assert status == 200 and body["reverted_at"], body
    assert configured_since(router, mark) == []
    assert configuration(router) == baseline


def verdicts(change: dict[str, Any]) -> dict[str, str]:
    return {v["subject"]: v["status"] for v in change["checks"]["checks"]}


async def test_an_approved_change_is_baselined_diffed_backed_up_and_rolled_back_exactly(iosv, router, people, stub,
                                                                                        admin):
    _, engineer = people
    pid = iosv["project_id"]
    baseline = configuration(router)
    result = await approved(engineer, stub, pid, ["interface GigabitEthernet0/0", "description uplink to R2",
                                                  "ip ospf cost 20"], "Done.")
    assert result["status"] == "ok", result
    change = result["change"]
    assert change["family"] == "ios"
    diff = change["diff"]["config"]
    assert "- description to R2" in diff and "+ description uplink to R2" in diff and "+ ip ospf cost 20" in diff, diff
    assert not any("Last configuration change" in line or "Current configuration" in line for line in diff), diff
    assert change["diff"]["state"] == []  # the neighbour, the session, the interfaces and routes as they were
    assert change["verified"] == "pass", change["checks"]
    subjects = verdicts(change)
    assert subjects[f"R1: OSPF neighbour {PEER}"] == "pass" and subjects[f"R1: BGP neighbour {BGP_PEER}"] == "pass"
    assert change["rollback"]["commands"] == ["interface GigabitEthernet0/0", "no ip ospf cost 20",
                                              "description to R2"], change["rollback"]
    node_id = iosv["node"]["node_id"]
    status, backups = await engineer.get(f"{COPILOT}/projects/{pid}/backups?node_id={node_id}")
    assert status == 200, backups
    newest = next(b for b in backups if b["backup_id"] == change["backup"]["backup_id"])
    assert newest["version"] == change["backup"]["version"] >= 1

    mark = len(router.received)
    status, done = await engineer.post(f"{COPILOT}/projects/{pid}/changes/{change['change_id']}/rollback")
    assert status == 200 and done["result"]["status"] == "ok", done
    assert configured_since(router, mark) == change["rollback"]["commands"]
    assert configuration(router) == baseline  # exactly, line for line
    status, again = await engineer.post(f"{COPILOT}/projects/{pid}/changes/{change['change_id']}/rollback")
    assert status == 409 and again["code"] == "change_not_rollbackable", again


async def test_a_change_that_breaks_the_ospf_neighbour_fails_its_checks_and_its_rollback_brings_it_back(
        iosv, router, people, stub):
    _, engineer = people
    pid = iosv["project_id"]
    baseline = configuration(router)
    result = await approved(engineer, stub, pid, ["interface GigabitEthernet0/0", "ip ospf hello-interval 2"],
                            "The check failed.")
    change = result["change"]
    assert change["verified"] == "fail", change["checks"]
    assert verdicts(change)[f"R1: OSPF neighbour {PEER}"] == "fail"
    assert {"aspect": "ospf", "item": PEER} in [{k: d[k] for k in ("aspect", "item")} for d in change["diff"]["state"]]
    assert change["rollback"]["commands"] == ["interface GigabitEthernet0/0", "ip ospf hello-interval 1"]

    status, done = await engineer.post(f"{COPILOT}/projects/{pid}/changes/{change['change_id']}/rollback")
    assert status == 200, done
    assert done["verify"]["passed"] is True, done["verify"]["summary"]
    assert {v["subject"]: v["observed"] for v in done["verify"]["checks"]}[f"R1: OSPF neighbour {PEER}"] == "Full"
    assert configuration(router) == baseline


async def test_a_rollback_refuses_a_router_changed_since(iosv, router, people, stub):
    _, engineer = people
    pid = iosv["project_id"]
    first = await approved(engineer, stub, pid, ["interface GigabitEthernet0/0", "description one"], "Done.")
    await approved(engineer, stub, pid, ["interface GigabitEthernet0/0", "description two"], "Done.")
    mark = len(router.received)
    status, refused = await engineer.post(f"{COPILOT}/projects/{pid}/changes/{first['change']['change_id']}/rollback")
    assert status == 409 and "no longer holds" in refused["message"], refused
    assert configured_since(router, mark) == []
    assert " description two" in configuration(router)
