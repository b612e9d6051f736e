"""A change on a Linux host (a root bash in a network namespace of the test's own): baselined, diffed, verified.

The real server and GNS3 users, the scripted LLM proposing the change, the user
approving it with ``confirm``; Host1's console is bash in ``netns``
(``test_fault_revert_linux``), read outside the copilot too. The change adds an
address: its result carries the diff of the host's addresses, the state diff of
eth0, its implied checks passed with the values read; its recorded rollback, run by
``POST .../changes/{id}/rollback``, leaves the host as it was.
"""

from __future__ import annotations

import json

import pytest
from test_changes_vpcs import approved_change
from test_copilot_api import COPILOT, admin, http, stub, users  # noqa: F401  (fixtures)
from test_fault_revert_linux import device_state, linux_lab, netns, settles_to  # noqa: F401  (fixtures)

pytestmark = pytest.mark.integration


async def test_a_linux_change_is_baselined_diffed_verified_and_rolled_back(users, stub, linux_lab, tmp_path):
    project_id, shell = linux_lab
    person = await users("linux_changer")
    await person.use_llm(stub, context_limit=128)
    before = await device_state(shell, tmp_path)

    call = {"device": "Host1", "driver": "linux", "commands": ["ip addr add 10.7.0.1/24 dev eth0"]}
    told = await approved_change(person, stub, project_id, call)
    assert told["status"] == "ok", told
    change = told["change"]
    assert change["family"] == "linux" and change["backup"]["version"] >= 1
    added = [line for line in change["diff"]["config"] if line.startswith("+") and not line.startswith("+++")]
    # The address, and the connected route the kernel adds with it.
    assert len(added) == 2 and "eth0    inet 10.7.0.1/24" in added[0], change["diff"]["config"]
    assert added[1].startswith("+10.7.0.0/24 dev eth0 proto kernel"), change["diff"]["config"]
    (eth0,) = [d for d in change["diff"]["state"] if (d["aspect"], d["item"]) == ("interfaces", "eth0")]
    assert "10.7.0.1/24" in eth0["after"] and "10.7.0.1/24" not in eth0["before"], change["diff"]["state"]
    # Implied: the address asked for is there, the links stay up; read on Host1.
    assert change["verified"] == "pass", change["checks"]
    verdicts = {v["subject"]: v for v in change["checks"]["checks"]}
    asked = next(v for s, v in verdicts.items() if "10.7.0.1/24" in s)
    assert asked["status"] == "pass" and "10.7.0.1/24" in json.dumps(asked["observed"]), asked
    assert verdicts["Host1: interface eth0"]["status"] == "pass", verdicts  # its links stay up
    assert all(e["device"] == "Host1" and e["at"] for v in verdicts.values() for e in v["evidence"])
    assert "10.7.0.1/24" in (await device_state(shell, tmp_path))[1]

    status, undone = await person.post(f"{COPILOT}/projects/{project_id}/changes/{change['change_id']}/rollback")
    assert status == 200 and undone["result"]["status"] == "ok", undone
    assert undone["commands"] == change["rollback"]["commands"]
    # Verified by what Host1 held before (its links up), not by the address the rollback took away.
    assert undone["verify"]["passed"] is True, undone["verify"]["summary"]
    assert not any("10.7.0.1" in v["subject"] for v in undone["verify"]["checks"]), undone["verify"]
    assert await settles_to(shell, tmp_path, before) == before


async def test_a_rollback_refuses_a_host_changed_since(users, stub, linux_lab, tmp_path):
    """The recorded inverse of an address added (``ip addr del``) is exact only on the host the change left."""
    project_id, shell = linux_lab
    person = await users("linux_rollbacker")
    await person.use_llm(stub, context_limit=128)
    first = await approved_change(person, stub, project_id, {"device": "Host1", "driver": "linux",
                                                             "commands": ["ip addr add 10.7.0.1/24 dev eth0"]})
    assert set(first["change"]["rollback"]["expects"]) == {"commands", "after"}
    await approved_change(person, stub, project_id, {"device": "Host1", "driver": "linux",
                                                     "commands": ["ip route add 10.9.0.0/16 via 10.7.0.254"]})
    status, refused = await person.post(
        f"{COPILOT}/projects/{project_id}/changes/{first['change']['change_id']}/rollback")
    assert status == 409 and refused["code"] == "change_not_rollbackable", refused
    assert "Host1 no longer holds what change" in refused["message"], refused
    state = await device_state(shell, tmp_path)
    assert "10.7.0.1/24" in state[1] and "10.9.0.0/16 via 10.7.0.254" in state[2]  # nothing was run
