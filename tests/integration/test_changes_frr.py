"""Changes you can trust, on real routers: baselined, applied, diffed, verified, rolled back, snapshotted.

The FRR network of ``frr_lab`` (three FRR 8.4 routers, OSPF and eBGP, dead 4 s and
hold 3 s) behind a real gns3-server's project (``frr_project``); the scripted LLM
drives the agent, everything else is the product: the graph, the tool gate,
approvals, the console policy and audit, the change transaction and the change
store. What the routers hold is read outside the copilot too (``FRRLab``).

* a harmless change: its result (what the model and the approval card's result
  show) carries the configuration diff, a state diff without a difference, the
  implied checks passed with the values read, a versioned backup and the rollback;
* a change that breaks a neighbour (an OSPF area mismatch): its checks fail, with
  the state read as evidence; the rollback it offers is approved with one click
  (the model proposes exactly it, the user confirms) and the change's checks,
  run again by ``gns3_verify``, see the neighbour Full again; every router holds
  its baseline again;
* a batch on two routers: a GNS3 snapshot (GNS3's own routes) is taken once before
  it, listed, and restored by the copilot's route.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from frr_lab import FULL
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
from test_frr_troubleshooting import BROKEN_TIMEOUT, ospf_lost

from tests.support.openai_stub import OpenAIStub, reply, tool_call

pytestmark = pytest.mark.integration


@pytest.fixture
async def engineer(users, stub) -> API:
    person = await users("change_engineer")
    await person.use_llm(stub, context_limit=128)  # the tool results whole, as the assertions read them
    return person


def config_call(device: str, commands: list[str]) -> dict[str, Any]:
    return {"device": device, "driver": CONSOLE_DRIVER, "commands": commands}


def tool_results(stub: OpenAIStub) -> list[dict[str, Any]]:
    """The tool results the model was last given, parsed."""
    return [json.loads(m["content"]) for m in stub.requests[-1]["messages"] if m["role"] == "tool"]


async def approved(api: API, stub: OpenAIStub, project_id: str, calls: list[dict[str, Any]], answer: str,
                   session_id: str | None = None) -> tuple[str, list[dict[str, Any]]]:
    """A turn in which the model proposes ``calls`` and the user approves them with one confirm: the
    session and the tool results of those calls."""
    stub.enqueue(reply("I will change it.", tool_calls=[tool_call("gns3_config_commands", c) for c in calls]))
    body = {"session_id": session_id} if session_id else {}
    result = await api.chat(project_id, "Change it", **body)
    assert result["status"] == "waiting_confirmation", result
    assert [p["args"] for p in result["pending_calls"]] == calls
    stub.enqueue(answer)
    status, done = await api.post(sessions_path(project_id, result["session_id"], "/confirm"),
                                  {"approved": True, "stream": False})
    assert status == 200 and done["content"] == answer, done
    return str(result["session_id"]), tool_results(stub)[-len(calls):]


def verdicts(change: dict[str, Any]) -> dict[str, str]:
    return {v["subject"]: v["status"] for v in change["checks"]["checks"]}


async def test_a_change_is_baselined_applied_diffed_verified_and_backed_up(frr_lab, frr_gns3, engineer, stub, admin):
    pid = frr_gns3.project_id
    call = config_call("R1", ["interface eth1", "description to R2"])
    session_id, (result,) = await approved(engineer, stub, pid, [call], "Done.")
    assert result["status"] == "ok", result
    change = result["change"]
    assert "+ description to R2" in change["diff"]["config"], change["diff"]
    assert change["diff"]["state"] == []  # neighbours, interfaces and routes as they were
    # The checks it implies: the neighbours that were up stay up, read on R1 itself, with the evidence.
    assert change["verified"] == "pass" and change["checks"]["passed"] is True
    subjects = verdicts(change)
    assert subjects["R1: OSPF neighbour 10.255.0.2"] == "pass" and subjects["R1: BGP neighbour 10.0.12.2"] == "pass"
    evidence = change["checks"]["checks"][0]["evidence"]
    assert evidence and {e["device"] for e in evidence} == {"R1"} and all(e["at"] for e in evidence)
    assert change["rollback"]["commands"] == ["interface eth1", "no description"]
    assert change["backup"]["version"] >= 1 and "next" not in change
    assert await asyncio.to_thread(lambda: "description to R2" in frr_lab.running_config("R1"))

    # The backup taken before it holds the configuration the router had, restorable from the store's routes.
    node_id = frr_gns3.nodes["R1"]["node_id"]
    status, backups = await engineer.get(f"{COPILOT}/projects/{pid}/backups?node_id={node_id}")
    assert status == 200, backups
    (newest, *_) = backups
    assert (newest["backup_id"], newest["version"]) == (change["backup"]["backup_id"], change["backup"]["version"])
    status, diff = await engineer.get(f"{COPILOT}/projects/{pid}/backups/{newest['backup_id']}/diff")
    assert status == 200 and "- description to R2" in diff["diff"], diff  # from the router now back to the backup
    status, restored = await engineer.post(f"{COPILOT}/projects/{pid}/backups/{newest['backup_id']}/restore")
    assert status == 200 and restored["commands"] == ["interface eth1", "no description"], restored
    assert await asyncio.to_thread(frr_lab.changed) == []

    # The audit: the change under the session's approval, summed up in one "<change>" line.
    status, entries = await admin.get(f"{COPILOT}/console/audit?session_id={session_id}")
    assert status == 200, entries
    sent = [(e["command"], e["outcome"]) for e in reversed(entries)]
    assert ("description to R2", "ok") in sent and ("<change>", "verified") in sent
    assert sent.index(("show running-config", "ok")) < sent.index(("description to R2", "ok"))


async def test_a_change_that_breaks_a_neighbour_fails_its_checks_and_its_rollback_brings_it_back(
        frr_lab, frr_gns3, engineer, stub, admin):
    pid = frr_gns3.project_id
    breaking = config_call("R1", ["interface eth1", "no ip ospf area", "ip ospf area 1"])
    session_id, (result,) = await approved(engineer, stub, pid, [breaking], "The check failed.")
    change = result["change"]
    assert change["verified"] == "fail" and change["checks"]["passed"] is False, change["checks"]
    assert verdicts(change)["R1: OSPF neighbour 10.255.0.2"] == "fail"
    (failed,) = [v for v in change["checks"]["checks"] if v["subject"] == "R1: OSPF neighbour 10.255.0.2"]
    assert failed["expected"] != failed["observed"] and failed["evidence"]  # what was read, when, by which command
    assert "FAIL R1: OSPF neighbour 10.255.0.2" in change["checks"]["summary"]
    await asyncio.to_thread(frr_lab.wait_for, lambda: ospf_lost("R2", "10.255.0.1")(frr_lab), "R2 loses R1",
                            BROKEN_TIMEOUT)
    rollback = change["rollback"]
    assert "rollback.commands" in change["next"]  # what the model is told to do
    assert rollback["commands"] == ["interface eth1", "no ip ospf area 1", "ip ospf area 0"]

    # One click: the model proposes exactly the rollback, the user confirms it.
    _, (undone,) = await approved(engineer, stub, pid, [config_call("R1", rollback["commands"])], "Rolled back.",
                                  session_id)
    assert undone["status"] == "ok", undone
    # The change's checks, run again on demand, see the neighbour come back to Full.
    assert "R1 ospf 10.255.0.2 Full within 60" in rollback["verify"]
    stub.enqueue(reply(tool_calls=[tool_call("gns3_verify", {"checks": rollback["verify"], "driver": CONSOLE_DRIVER})]),
                 "Verified.")
    done = await engineer.chat(pid, "Is it back?", session_id=session_id)
    assert done["status"] == "completed", done
    (report,) = tool_results(stub)[-1:]
    assert report["passed"] is True, report["summary"]
    assert {v["subject"]: v["observed"] for v in report["checks"]}["R1: OSPF neighbour 10.255.0.2"] == FULL
    assert await asyncio.to_thread(frr_lab.changed) == []  # the baseline again, exactly

    status, entries = await admin.get(f"{COPILOT}/console/audit?session_id={session_id}")
    assert status == 200, entries
    outcomes = [e["outcome"] for e in reversed(entries) if e["command"] == "<change>"]
    assert outcomes[0] == "checks_failed"


async def test_a_change_that_breaks_a_neighbour_is_rolled_back_with_one_click_by_its_route(
        frr_lab, frr_gns3, engineer, stub, users, admin):
    pid = frr_gns3.project_id
    breaking = config_call("R1", ["interface eth1", "no ip ospf area", "ip ospf area 1"])
    _, (result,) = await approved(engineer, stub, pid, [breaking], "The check failed.")
    change = result["change"]
    assert change["verified"] == "fail", change["checks"]
    await asyncio.to_thread(frr_lab.wait_for, lambda: ospf_lost("R2", "10.255.0.1")(frr_lab), "R2 loses R1",
                            BROKEN_TIMEOUT)
    path = f"{COPILOT}/projects/{pid}/changes/{change['change_id']}/rollback"

    other = await users("change_onlooker")
    status, refused = await other.post(path)
    assert status == 404 and refused["code"] == "change_not_found", refused

    status, done = await engineer.post(path)  # the POST is the approval
    assert status == 200, done
    assert done["commands"] == change["rollback"]["commands"] and done["result"]["status"] == "ok", done
    # The change's checks, run again after it: the neighbour Full again.
    assert done["verify"]["passed"] is True, done["verify"]["summary"]
    assert {v["subject"]: v["observed"] for v in done["verify"]["checks"]}["R1: OSPF neighbour 10.255.0.2"] == FULL
    assert done["rolled_back_at"]
    assert await asyncio.to_thread(frr_lab.changed) == []  # the baseline again, exactly

    status, changes = await engineer.get(f"{COPILOT}/projects/{pid}/changes")
    assert status == 200, changes
    (listed,) = [c for c in changes if c["change_id"] == change["change_id"]]
    assert listed["rolled_back_at"] == done["rolled_back_at"] and listed["rolled_back_by"] == "change_engineer"
    status, again = await engineer.post(path)  # once only
    assert status == 409 and again["code"] == "change_not_rollbackable", again

    status, entries = await admin.get(f"{COPILOT}/console/audit?session_id=rollback-{change['change_id']}")
    assert status == 200, entries
    assert {e["approval_id"] for e in entries if e["command"] == "no ip ospf area 1"} == {
        f"rollback:{change['change_id']}"}, entries


async def test_a_rollback_refuses_a_device_changed_since(frr_lab, frr_gns3, engineer, stub):
    pid = frr_gns3.project_id
    _, (first,) = await approved(engineer, stub, pid, [config_call("R3", ["interface eth1", "description one"])],
                                 "Done.")
    await approved(engineer, stub, pid, [config_call("R3", ["interface eth1", "description two"])],
                   "Done.")
    status, refused = await engineer.post(f"{COPILOT}/projects/{pid}/changes/{first['change']['change_id']}/rollback")
    assert status == 409 and "no longer holds" in refused["message"], refused
    assert await asyncio.to_thread(lambda: "description two" in frr_lab.running_config("R3"))


# Last: GNS3's restore closes and reopens the project; the routers' consoles are not reached through it after.
async def test_a_batch_on_two_routers_is_snapshotted_once_and_the_snapshot_restored(
        frr_lab, frr_gns3, engineer, stub):
    pid = frr_gns3.project_id
    calls = [config_call("R1", ["interface eth1", "description batch"]),
             config_call("R2", ["interface eth1", "description batch"])]
    _, results = await approved(engineer, stub, pid, calls, "Both done.")
    snapshots = {r["change"]["snapshot"]["snapshot_id"] for r in results}
    assert len(snapshots) == 1 and None not in snapshots, results  # one snapshot, before the batch
    (snapshot_id,) = snapshots

    status, listed = await engineer.get(f"{COPILOT}/projects/{pid}/snapshots")
    assert status == 200 and snapshot_id in [s["snapshot_id"] for s in listed], listed
    status, restored = await engineer.post(f"{COPILOT}/projects/{pid}/snapshots/{snapshot_id}/restore")
    assert status == 200 and restored["project_id"] == pid, restored
    status, missing = await engineer.post(f"{COPILOT}/projects/{pid}/snapshots/{'0' * 32}/restore")
    assert status == 404, missing
