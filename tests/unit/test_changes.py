"""The change transaction and the change store on their own (the integration tests run them behind the real server).

The transaction's device is the replayed IOS router (``tests/support/cli_sim/ios.py``),
its sessions driven directly (no console): what it prints for each command is what
the transaction reads, so its baseline, diff, checks and rollback are judged on a
running configuration the commands really change. The store is a real SQLite file.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gns3server.agent.gns3_copilot.changes.store import ChangeRecord, ChangeStore
from gns3server.agent.gns3_copilot.changes.transaction import ChangeTransaction, Target, Who
from gns3server.agent.gns3_copilot.tools.ios_rollback import fingerprint
from tests.support.cli_sim.ios import IOSDevice, transcript

PEER = "10.255.0.2"


class Router:
    """The replayed IOS as a transaction's ``run``: show commands at ``R1#``, config between configure and end."""

    def __init__(self, *, refuse: bool = False, unreadable: bool = False) -> None:
        self.device = IOSDevice(transcript())
        self.session = self.device.session()
        self.session.mode, self.session.paging = "privilege_exec", False
        self.typed: list[tuple[str, str]] = []
        self.refuse, self.unreadable = refuse, unreadable

    async def run(self, commands: list[str], mode: str) -> dict[str, Any]:
        if mode == "config" and self.refuse:
            return {"device": "R1", "status": "blocked", "error": "blocked by the console policy", "results": []}
        if mode == "show" and self.unreadable:
            return {"device": "R1", "status": "error", "results": [
                {"command": c, "status": "error", "output": "% Invalid input detected at '^' marker."} for c in commands]}
        if mode == "config":
            self.session.handle("configure terminal", 0.0)
        results, status = [], "ok"
        for command in commands:
            self.typed.append((mode, command))
            reply = self.session.handle(command, 0.0)
            failed = reply.text.lstrip().startswith(("%", "^")) or "% Invalid" in reply.text
            results.append({"command": command, "status": "error" if failed else "ok", "output": reply.text})
            if failed:
                status = "error"
                break
        if mode == "config":
            self.session.handle("end", 0.0)
        return {"device": "R1", "status": status, "results": results}


@pytest.fixture
async def store(tmp_path):
    opened = await ChangeStore.open(tmp_path)
    yield opened
    await opened.close()


def transaction(router: Router, commands: list[str], store: ChangeStore | None, notes: list[tuple[str, str, str]],
                **options: Any) -> ChangeTransaction:
    async def note(command: str, outcome: str, detail: str) -> None:
        notes.append((command, outcome, detail))

    return ChangeTransaction(Target("R1", "node-1", "ios"), commands, router.run, who=Who("p1", "s1", "alice", "a1"),
                             store=store, note=note, verify_seconds=0.5, interval=0.05, **options)


async def test_a_change_that_breaks_a_neighbour_is_diffed_fails_its_checks_and_carries_its_rollback(store):
    router, notes = Router(), []
    baseline = router.device.running_config()
    outcome = await transaction(router, ["interface GigabitEthernet0/0", "ip ospf hello-interval 2"], store,
                                notes).run()
    assert outcome.result["status"] == "ok"
    change = outcome.change
    assert change["family"] == "ios"
    assert "- ip ospf hello-interval 1" in change["diff"]["config"] and "+ ip ospf hello-interval 2" in \
        change["diff"]["config"]
    assert {"aspect": "ospf", "item": PEER, "before": "Full", "after": None} in change["diff"]["state"]
    assert change["verified"] == "fail" and change["checks"]["passed"] is False
    (failed,) = [v for v in change["checks"]["checks"] if v["status"] == "fail"]
    assert failed["subject"] == f"R1: OSPF neighbour {PEER}" and failed["evidence"]
    rollback = change["rollback"]
    assert rollback["commands"] == ["interface GigabitEthernet0/0", "ip ospf hello-interval 1"]
    assert rollback["expects"]["before"] == fingerprint(baseline)
    assert rollback["expects"]["after"] == fingerprint(router.device.running_config())
    assert f"R1 ospf {PEER} Full within 0.5" in rollback["verify"] and "rollback.commands" in change["next"]

    # Read before it (configuration and state), then typed, then read again: nothing else.
    modes = [mode for mode, _ in router.typed]
    assert modes.index("config") > modes.index("show") and router.typed[0] == ("show", "show running-config")
    assert [c for m, c in router.typed if m == "config"] == ["interface GigabitEthernet0/0", "ip ospf hello-interval 2"]

    # Backed up first (version 1, what R1 held), recorded, and summed up in the audit.
    backup = await store.backup(change["backup"]["backup_id"])
    assert backup is not None and backup.version == 1 and backup.captures == [baseline]
    assert backup.fingerprint == fingerprint(baseline) and backup.change_id == change["change_id"]
    record = await store.change(change["change_id"])
    assert record is not None and record.verified == "fail" and record.rollback["commands"] == rollback["commands"]
    assert record.approval_id == "a1" and record.backup_id == backup.backup_id
    (summary,) = [n for n in notes if n[0] == "<change>"]
    assert summary[1] == "checks_failed" and "FAIL R1: OSPF neighbour" in summary[2]


async def test_a_harmless_change_passes_and_the_next_backup_is_version_2(store):
    router = Router()
    first = (await transaction(router, ["interface GigabitEthernet0/0", "description one"], store, []).run()).change
    second = (await transaction(router, ["interface GigabitEthernet0/0", "description two"], store, []).run()).change
    assert first["verified"] == second["verified"] == "pass" and "next" not in second
    assert second["diff"]["state"] == []
    assert [line for line in second["diff"]["config"] if line[:2] in ("- ", "+ ")] == ["- description one",
                                                                                       "+ description two"]
    assert (first["backup"]["version"], second["backup"]["version"]) == (1, 2)
    assert [b.version for b in await store.backups("p1", "node-1")] == [2, 1]


async def test_a_fault_injection_is_not_verified_but_gets_its_undo():
    router = Router()
    outcome = await transaction(router, ["router bgp 65001", "neighbor 10.0.12.2 remote-as 65009"], None, [],
                                verify=False).run()
    assert "checks" not in outcome.change and outcome.change["verified"] == "none"
    assert outcome.undo is not None and outcome.undo.commands == ["router bgp 65001",
                                                                  "neighbor 10.0.12.2 remote-as 65002"]
    assert outcome.change["rollback"]["commands"] == outcome.undo.commands


async def test_a_batch_the_policy_refused_is_no_change(store):
    router = Router(refuse=True)
    outcome = await transaction(router, ["interface GigabitEthernet0/0", "shutdown"], store, []).run()
    assert outcome.result["status"] == "blocked" and outcome.change == {}
    assert outcome.undo is not None and outcome.undo.commands is None
    assert await store.changes("p1") == []


async def test_a_device_unreadable_before_the_change_is_not_verified_nor_backed_up(store):
    router = Router(unreadable=True)
    outcome = await transaction(router, ["interface GigabitEthernet0/0", "description x"], store, []).run()
    change = outcome.change
    assert change["verified"] == "none" and "backup" not in change
    assert change["checks"]["summary"] == "not verified: R1's state could not be read before the change"
    assert change["rollback"]["commands"] is None
    assert await store.backups("p1") == []


def record(change_id: str, username: str = "alice", device: str = "R1", at: float = 1.0) -> ChangeRecord:
    return ChangeRecord(change_id, "p1", "s1", username, device, "node-1", "ios", ["description x"], "ok", "pass",
                        {"rollback": {"commands": ["no description"]}}, created_at=at)


async def test_the_store_lists_changes_newest_first_per_user_and_device_and_claims_a_rollback_once(store):
    for number, (user, device) in enumerate([("alice", "R1"), ("bob", "R1"), ("alice", "R2")]):
        await store.record(record(f"c{number}", user, device, at=10.0 + number))
    assert [c.change_id for c in await store.changes("p1")] == ["c2", "c1", "c0"]
    assert [c.change_id for c in await store.changes("p1", username="alice")] == ["c2", "c0"]
    assert [c.change_id for c in await store.changes("p1", device="R1")] == ["c1", "c0"]
    assert await store.changes("p2") == []
    assert (await store.change("c0")).rollback == {"commands": ["no description"]}  # type: ignore[union-attr]

    assert await store.claim_rollback("c0", "alice") is True
    assert await store.claim_rollback("c0", "bob") is False  # once
    claimed = await store.change("c0")
    assert claimed is not None and claimed.rolled_back_by == "alice" and claimed.rolled_back_at
    await store.release_rollback("c0")  # the rollback did not run
    assert await store.claim_rollback("c0", "bob") is True


async def test_backups_at_once_on_one_node_get_distinct_versions(store):
    async def back_up(node: str, n: int) -> int:
        backup = await store.back_up(project_id="p1", node_id=node, device=node, driver="ios",
                                     commands=["show running-config"], captures=[f"hostname {n}"], fingerprint=str(n),
                                     taken_by="alice", reason="test")
        return backup.version

    versions = await asyncio.gather(*(back_up("node-1", n) for n in range(6)), back_up("node-2", 9))
    assert sorted(versions[:6]) == [1, 2, 3, 4, 5, 6] and versions[6] == 1
    listed = await store.backups("p1", "node-1")
    assert [b.version for b in listed] == sorted(versions[:6], reverse=True)
    assert "captures" not in listed[0].summary() and listed[0].summary()["version"] == listed[0].version
