"""A node of each vendor family read and configured through the copilot's tools on a real gns3-server.

Each family's node is a QEMU node GNS3 makes from the registry's appliance (its image file
names what it runs; SR Linux, whose appliance is a container, is a node a user set the
family of), renamed, with its console credentials set through the copilot's route. No
vendor CLI runs here: the family's simulator (``tests/support/cli_sim``, replaying the
vendor's transcripts) listens on the console port GNS3 gave the node, as the real VPCS
daemon does in ``test_copilot_confirm``. The model is the OpenAI-compatible stub: it reads
the node (the system prompt shows its ``cli=`` family), asks to configure it, the user
approves, the batch runs and is committed (confirmed where the CLI has it) and read back;
a dangerous command in the family's own words is refused after approval too; everything
typed is in the administrators' audit with the approval it ran under.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from test_console_families_gns3 import appliance_template, known_images

# The API client and its fixtures live with the API tests; reused here as they are.
from test_copilot_api import (  # noqa: F401
    API,
    COPILOT,
    SECRET,
    admin,
    admin_llm,
    chat_path,
    http,
    sessions_path,
    stub,
)

from gns3server.agent.gns3_copilot.console.families import FAMILY_NAMES, load_drivers
from gns3server.agent.gns3_copilot.console.runner import commit_lines
from tests.support.cli_sim import CliSimulator, Transcript
from tests.support.openai_stub import reply, tool_call
from tests.unit.test_cli_sim import CONFIG, LOGINS, READS

pytestmark = pytest.mark.integration

APPLIANCES = {
    "eos": "arista-veos.gns3a", "junos": "juniper-vJunos-router.gns3a", "iosxr": "cisco-iosxrv9k.gns3a",
    "nxos": "cisco-nxosv9k.gns3a", "routeros": "mikrotik-chr.gns3a", "vrp": "huawei-ne40e.gns3a", "vyos": "vyos.gns3a",
    "fortios": "fortigate.gns3a", "cumulus": "cumulus-vx.gns3a",
    "srlinux": "debian.gns3a",  # a QEMU node whose family a user chose (the image alone says Linux)
}
# A command each family's policy refuses, in the vendor's own words.
DANGEROUS = {
    "eos": "reload", "junos": "request system reboot", "iosxr": "reload", "nxos": "write erase",
    "srlinux": "tools system reboot", "routeros": "/system reset-configuration", "vrp": "reset saved-configuration",
    "vyos": "poweroff", "fortios": "execute factoryreset", "cumulus": "sudo -i",
}
PASSWORD = "Console-Pw-42"
DRIVERS = load_drivers()


@pytest.fixture(scope="module")
async def vendors(admin: API) -> AsyncIterator[dict[str, Any]]:
    """One project, a node per family named after it (eos1, junos1 ...), its console credentials set."""
    suffix = uuid.uuid4().hex[:6]
    status, project = await admin.post("/v3/projects", {"name": f"vendors-{suffix}"})
    assert status == 201, project
    project_id = project["project_id"]
    templates: list[dict[str, Any]] = []
    nodes: dict[str, dict[str, Any]] = {}
    known = await known_images(admin)
    try:
        for family in FAMILY_NAMES:
            template = await appliance_template(admin, APPLIANCES[family], f"{family}-{suffix}", known)
            templates.append(template)
            status, node = await admin.post(f"{'/v3/projects'}/{project_id}/templates/{template['template_id']}",
                                            {"x": 0, "y": 0})
            assert status == 201, node
            status, node = await admin.put(f"/v3/projects/{project_id}/nodes/{node['node_id']}", {"name": f"{family}1"})
            assert status == 200 and node["console_type"] == "telnet", node
            if family in LOGINS:
                user, _password = LOGINS[family]
                status, body = await admin.put(f"{COPILOT}/projects/{project_id}/nodes/{node['node_id']}/console-credentials",
                                               {"username": user, "password": PASSWORD})
                assert status == 200, body
            nodes[family] = node
        status, chosen = await admin.put(f"{COPILOT}/projects/{project_id}/nodes/{nodes['srlinux']['node_id']}/family",
                                         {"family": "srlinux"})
        assert status == 200 and chosen["family"] == "srlinux", chosen
        yield {"project_id": project_id, "nodes": nodes}
    finally:
        await admin.delete(f"/v3/projects/{project_id}")
        for template in templates:
            await admin.delete(f"/v3/templates/{template['template_id']}")


def device_for(family: str, node: dict[str, Any]) -> CliSimulator:
    """The family's simulated CLI on the node's console port, its login the one the copilot was given."""
    transcript = Transcript.load(family)
    if transcript.login.get("password_prompt"):
        transcript.login["password"] = PASSWORD
    in_seconds = transcript.config.get("confirmed_unit_seconds", 60) == 1
    return CliSimulator(transcript, seconds_per_unit=0.005 if in_seconds else 0.2, listen_port=node["console"])


async def audited(admin: API, session_id: str) -> list[tuple[str, str, str, bool]]:
    status, entries = await admin.get(f"{COPILOT}/console/audit?session_id={session_id}&limit=1000")
    assert status == 200, entries
    return [(e["device"], e["command"], e["outcome"], bool(e.get("approval_id"))) for e in reversed(entries)]


def tool_answers(stub: Any) -> list[str]:
    """What the tools answered, as the model read it in its last request."""
    return [m["content"] for m in stub.requests[-1]["messages"] if m["role"] == "tool"]


@pytest.mark.parametrize("family", FAMILY_NAMES)
async def test_a_node_of_the_family_is_read_and_configured_with_approval_policy_and_audit(
    admin, admin_llm, stub, vendors, family
):
    project_id, node = vendors["project_id"], vendors["nodes"][family]
    name = f"{family}1"
    read, _abbreviation, shown = READS[family]
    line, show, expected = CONFIG[family]
    batch = ["config system interface", "edit port1", line, "end"] if family == "fortios" else [line]
    async with device_for(family, node) as sim:
        # The model reads the node, then asks to configure it: the run waits for the user.
        stub.enqueue(
            reply(tool_calls=[tool_call("gns3_show_commands", {"devices": [name], "commands": [read]})]),
            reply(tool_calls=[tool_call("gns3_config_commands", {"device": name, "commands": batch})]),
        )
        result = await admin.chat(project_id, f"Configure {name}")
        assert result["status"] == "waiting_confirmation", result
        system = stub.requests[0]["messages"][0]["content"]
        assert f"{name} qemu" in system and f"cli={family}" in system, system
        assert shown in tool_answers(stub)[0]
        session_id = result["session_id"]
        # Nothing of the batch yet: the read, and the console login where the console asked for one.
        assert {entry[1] for entry in await audited(admin, session_id)} <= {read, "<console login>"}
        assert not any(expected in entry for entry in sim.device.running)

        # Approved: the batch runs and is committed; the model reads it back.
        stub.enqueue(reply(tool_calls=[tool_call("gns3_show_commands", {"devices": [name], "commands": [show]})]),
                     "Done.")
        status, done = await admin.post(sessions_path(project_id, session_id, "/confirm"),
                                        {"approved": True, "stream": False})
        assert status == 200 and done["status"] == "completed", done
        assert any(expected in entry for entry in sim.device.running), sim.device.events
        configured, read_back = tool_answers(stub)[-2:]
        assert '"status": "ok"' in configured.replace("'", '"') or '"status":"ok"' in configured, configured
        assert expected in read_back
        entries = await audited(admin, session_id)
        typed = [(command, outcome, approved) for device, command, outcome, approved in entries if device == name]
        configured_lines = [e for e in typed if e[2] and e[0] != "<console login>"]  # under the approval
        # The change transaction's one summary line (docs/changes.md): its checks did not fail.
        (change,) = [e for e in configured_lines if e[0] == "<change>"]
        assert change[1] in ("verified", "unverified"), change
        configured_lines = [e for e in configured_lines if e[0] != "<change>"]
        assert [c for c, _o, _a in configured_lines][: len(batch)] == batch
        assert all(outcome == "ok" for _c, outcome, _a in configured_lines), configured_lines
        ends = commit_lines(DRIVERS[family].commit, True)
        assert [c for c, _o, _a in configured_lines][len(batch):] == ends
        if len(ends) == 2:  # a confirmed commit, confirmed once the console answered: never rolled back
            assert "committed, confirmed" in " ".join(sim.device.events) and "confirmed" in sim.device.events
        elif ends:
            assert "committed" in sim.device.events, sim.device.events
        assert "rolled back" not in sim.device.events

        # A dangerous command in the family's own words: refused after approval too, nothing sent.
        dangerous = DANGEROUS[family]
        stub.enqueue(reply(tool_calls=[tool_call("gns3_config_commands", {"device": name, "commands": [dangerous]})]))
        waiting = await admin.chat(project_id, f"{dangerous} on {name}", session_id=session_id)
        assert waiting["status"] == "waiting_confirmation", waiting
        stub.enqueue("The policy refused it.")
        status, refused = await admin.post(sessions_path(project_id, session_id, "/confirm"),
                                           {"approved": True, "stream": False})
        assert status == 200 and refused["status"] == "completed", refused
        assert "blocked by the console policy" in tool_answers(stub)[-1]
        assert dangerous not in sim.received
        assert (name, dangerous, "blocked", True) in await audited(admin, session_id)
