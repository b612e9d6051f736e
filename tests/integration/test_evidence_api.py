"""Evidence beside claims, on a real gns3-server: what tools read, kept; the answer's claims judged.

The stub LLM drives the real graph: it reads PC1 (a real VPCS daemon on the
console port GNS3 gave it) with ``gns3_show_commands``, then answers with a
claim the read shows, one it contradicts and one about PC2, which no tool read.
The ``evidence`` event links the first to the read (device, command, when),
marks the last not verified, and the history shows the same after the run; the
records are the session owner's only. A real FRR router's vtysh answers for R1:
its router id and interface states are judged on FRR's own output. A real bash
console (``ShellServer``) prints a configuration's secrets: the model reads
them, the store never holds them.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from frr_router import FRRRouter
from shell_process import ShellServer
from test_copilot_api import (  # noqa: F401  (fixtures)
    API,
    SECRET,
    add_vpcs_node,
    admin,
    admin_llm,
    http,
    lab,
    sessions_path,
    stub,
    users,
)

from tests.support.openai_stub import OpenAIStub, reply, tool_call

pytestmark = pytest.mark.integration

SHOW = {"devices": ["PC1"], "commands": ["show ip"]}
ANSWER = (
    "PC1's MAC address is 00:50:79:66:68:00 [E1]. PC1's gateway is 10.0.0.254. "
    "PC2 has the address 10.0.0.2/24. Shall I ping PC2?"
)


def evidence_path(project: str, session_id: str, tail: str = "") -> str:
    return sessions_path(project, session_id, "/evidence" + tail)


def tool_result(request: dict[str, Any]) -> dict[str, Any]:
    """The tool message the model was sent last, as JSON."""
    (message,) = [m for m in request["messages"] if m["role"] == "tool"]
    return dict(json.loads(message["content"]))


async def test_claims_link_to_the_reads_they_rest_on_and_unread_devices_are_marked(admin, admin_llm, stub, lab, users):
    project, _vpcs = lab
    await add_vpcs_node(admin, project, "PC2")  # in the project, never read by a tool
    stub.enqueue(reply("Reading PC1.", tool_calls=[tool_call("gns3_show_commands", SHOW)]), ANSWER)
    async with admin.stream(project, message="What is PC1's and PC2's addressing?") as sse:
        session_id = sse.session_id
        events = await sse.rest()

    # The model read the ids with the output, under an "evidence" key, device names as data.
    assert tool_result(stub.requests[-1])["evidence"] == {"E1": 'PC1 "show ip"'}
    (end,) = [e for e in events if e["type"] == "tool_end"]
    assert json.loads(end["output"])["evidence"] == {"E1": 'PC1 "show ip"'}

    # The evidence event comes after the answer, before done.
    types = [e["type"] for e in events if e["type"] != "heartbeat"]
    assert types[-2:] == ["evidence", "done"]
    shown = next(e for e in events if e["type"] == "evidence")
    (read,) = [r for r in shown["reads"] if r["source"] == "console"]
    assert (read["id"], read["device"], read["command"], read["status"], read["tool"]) == (
        "E1", "PC1", "show ip", "ok", "gns3_show_commands")
    assert read["at"] > 0 and read["tool_call_id"] == end["tool_call_id"] and "output" not in read
    verdicts = {c["text"]: (c["verdict"], c["evidence"]) for c in shown["claims"]}
    assert verdicts["PC1's MAC address is 00:50:79:66:68:00 [E1]."] == ("verified", ["E1"])
    assert verdicts["PC1's gateway is 10.0.0.254."] == ("contradicted", ["E1"])
    assert verdicts["PC2 has the address 10.0.0.2/24."][0] == "unverified"
    assert "Shall I ping PC2?" not in verdicts  # a question claims nothing
    assert shown["counts"] == {"claims": 3, "verified": 1, "contradicted": 1, "not_verified": 1}
    history_status, history = await admin.get(sessions_path(project, session_id, "/history"))
    assert history_status == 200
    (judged,) = [m for m in history["messages"] if m.get("evidence")]
    assert judged["role"] == "assistant" and judged["content"] == ANSWER
    assert {k: v for k, v in shown.items() if k != "type"} == judged["evidence"]  # replayed as it was sent

    # The records: listed without outputs, each with its output on its own route.
    status, records = await admin.get(evidence_path(project, session_id))
    assert status == 200 and (records[0]["id"], records[0]["device"], records[0]["source"]) == ("E1", "PC1", "console")
    # What GNS3 says of the nodes the answer named, read by the copilot once the answer was given.
    assert {(r["device"], r["source"], r["tool"]) for r in records[1:]} == {("PC1", "gns3", "copilot"),
                                                                             ("PC2", "gns3", "copilot")}
    assert all(r["output"] is None for r in records)
    status, record = await admin.get(evidence_path(project, session_id, "/E1"))
    assert status == 200 and "00:50:79:66:68:00" in record["output"] and record["turn_id"] == shown["turn_id"]
    status, body = await admin.get(evidence_path(project, session_id, "/E99"))
    assert status == 404 and body["code"] == "evidence_not_found"

    # Another user (who may use the project) sees none of it.
    bob = await users("bob-evidence")
    for path in (evidence_path(project, session_id), evidence_path(project, session_id, "/E1")):
        status, body = await bob.get(path)
        assert status == 404 and body["code"] == "session_not_found", body

    # Deleting the session deletes its evidence.
    status, _ = await admin.delete(sessions_path(project, session_id))
    assert status == 204
    status, _ = await admin.get(evidence_path(project, session_id))
    assert status == 404


SECRETS = ("Sup3rS3cretPw", "7a6b5c4d3e2f1", "sk-test-abcdefghijklmnop")
CONFIG = (
    "hostname R1\n"
    f"enable secret 5 {SECRETS[1]}\n"
    f"username admin privilege 15 password 0 {SECRETS[0]}\n"
    " neighbor 10.0.0.2 password also-secret\n"
    f"api_key={SECRETS[2]}\n"
    "interface eth0\n ip address 10.0.0.1/24\n"
)


@pytest.fixture
async def bash_lab(admin: API, tmp_path: Any) -> AsyncIterator[tuple[str, str]]:
    """A project with Host1, whose console is a real bash; a configuration file holding secrets."""
    status, made = await admin.post("/v3/projects", {"name": f"evidence-{uuid.uuid4().hex[:8]}"})
    assert status == 201, made
    node = await add_vpcs_node(admin, made["project_id"], "Host1")  # any node with a telnet console port
    config = tmp_path / "frr.conf"
    config.write_text(CONFIG)
    shell = ShellServer.start(port=node["console"])
    try:
        yield made["project_id"], str(config)
    finally:
        await asyncio.to_thread(shell.stop)
        await admin.delete(f"/v3/projects/{made['project_id']}")


async def test_secrets_a_device_prints_never_reach_the_evidence_store(admin, gns3_server, bash_lab, users):
    project, config = bash_lab
    alice = await users("alice-evidence")
    async with OpenAIStub(api_key=SECRET) as llm:
        await alice.use_llm(llm)
        read = {"devices": ["Host1"], "commands": [f"cat {config}"], "driver": "linux"}
        llm.enqueue(reply(tool_calls=[tool_call("gns3_show_commands", read)]), "Host1's address is 10.0.0.1/24 [E1].")
        result = await alice.chat(project, "Show Host1's configuration")
        assert result["status"] == "completed", result
        assert SECRETS[0] in json.dumps(llm.requests[-1])  # the model was shown the device's output as it is
    session_id = result["session_id"]
    assert result["evidence"]["claims"][0]["verdict"] == "verified"

    status, record = await alice.get(evidence_path(project, session_id, "/E1"))
    assert status == 200 and "hostname R1" in record["output"] and "ip address 10.0.0.1/24" in record["output"]
    assert "enable secret 5 [REDACTED]" in record["output"]
    assert "neighbor 10.0.0.2 password [REDACTED]" in record["output"]
    database = gns3_server.root / "config" / "copilot" / "copilot.sqlite3"

    def stored() -> list[tuple[str, str]]:
        with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as db:
            return db.execute("SELECT command, output FROM copilot_evidence WHERE session_id = ?",
                              (session_id,)).fetchall()

    rows = await asyncio.to_thread(stored)
    assert rows and all(secret not in text for row in rows for text in row for secret in (*SECRETS, "also-secret"))


@pytest.fixture
async def frr_lab(admin: API) -> AsyncIterator[str]:
    """A project with R1 (its console: a real FRR router's vtysh; eth0 up with 10.0.12.1/24, eth1 down)
    and R2 (never read)."""
    status, made = await admin.post("/v3/projects", {"name": f"evidence-frr-{uuid.uuid4().hex[:8]}"})
    assert status == 201, made
    node = await add_vpcs_node(admin, made["project_id"], "R1")  # any node with a telnet console port
    await add_vpcs_node(admin, made["project_id"], "R2")
    router = await asyncio.to_thread(FRRRouter.start, "R1")
    shell = None
    try:
        ip = ("ip", "-n", router.netns)
        for command in (("link", "add", "eth0", "type", "veth", "peer", "name", "eth1"), ("link", "set", "eth0", "up"),
                        ("addr", "add", "10.0.12.1/24", "dev", "eth0")):
            await asyncio.to_thread(subprocess.run, [*ip, *command], check=True, capture_output=True)
        await asyncio.to_thread(router.vtysh, "configure terminal", "router ospf", "ospf router-id 10.255.0.1")
        shell = ShellServer.start(port=node["console"], command=router.console())
        yield made["project_id"]
    finally:
        if shell is not None:
            await asyncio.to_thread(shell.stop)
        await asyncio.to_thread(router.stop)
        await admin.delete(f"/v3/projects/{made['project_id']}")


async def test_claims_about_a_real_frr_router_are_judged_on_its_output(admin, admin_llm, stub, frr_lab):
    read = {"devices": ["R1"], "commands": ["show ip ospf", "show interface brief"], "driver": "frr"}
    said = {
        "R1's OSPF router id is 10.255.0.1.": ("verified", ["E1"]),
        "R1's router id is 10.9.9.9.": ("contradicted", ["E1"]),
        "On R1, eth0 is up with 10.0.12.1/24.": ("verified", ["E2"]),
        "On R1, eth1 is up.": ("contradicted", ["E2"]),
        "R2's eth0 is up.": ("unverified", []),
    }
    stub.enqueue(reply(tool_calls=[tool_call("gns3_show_commands", read)]), " ".join(said))
    result = await admin.chat(frr_lab, "How is R1's OSPF and its interfaces?")
    assert result["status"] == "completed", result
    judged = result["evidence"]
    assert [(r["id"], r["command"]) for r in judged["reads"] if r["source"] == "console"] == [
        ("E1", "show ip ospf"), ("E2", "show interface brief")]
    assert {c["text"]: (c["verdict"], c["evidence"]) for c in judged["claims"]} == said
    contradicted = next(c for c in judged["claims"] if c["text"] == "R1's router id is 10.9.9.9.")
    assert "Router ID: 10.255.0.1" in contradicted["reason"]  # the line FRR printed, quoted
