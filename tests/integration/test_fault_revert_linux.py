"""Injected faults on a Linux device reverted for real: an interface shut, a wrong address and gateway.

The real server, real GNS3 users, the OpenAI-compatible stub as the LLM issuing
``gns3_config_commands`` in ``chat/inject``, then ``POST .../faults/{id}/revert``.
The device is a real root bash (``ShellServer``) on the console port GNS3 gave
node Host1, inside a network namespace of the test's own (``ip netns``, so
nothing here touches this machine's network) holding a veth pair: eth0 with
two addresses on one subnet, a labelled one on another, a default route and a
static route. What the device holds is read on its own console, outside the
copilot, and must come back exactly as it was.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from shell_process import ShellServer
from test_copilot_api import (  # noqa: F401  (fixtures)
    API,
    COPILOT,
    add_vpcs_node,
    admin,
    http,
    sessions_path,
    stub,
    users,
)
from test_fault_revert import INJECT, faults

from gns3server.agent.gns3_copilot.console import LINUX, AuditLog, Device, DeviceLocks, Who, load_policy, run_commands
from tests.support.openai_stub import reply, tool_call

pytestmark = pytest.mark.integration

LAB_SETUP = [
    "link add eth0 type veth peer name peer0",
    "link set peer0 up",
    "link set eth0 up",
    "addr add 10.0.0.1/24 brd + dev eth0",
    "addr add 10.0.0.2/24 dev eth0",  # a secondary behind 10.0.0.1
    "addr add 10.5.0.1/16 dev eth0 label eth0:1",
    "route add default via 10.0.0.254",
    "route add 10.9.0.0/16 via 10.0.0.253 proto static metric 20",
]
READ = ["ip -o link show dev eth0", "ip -o -4 addr show dev eth0", "ip -o -4 route show table main"]
RESTORE_ROUTES = [
    "ip -4 route flush table main proto boot", "ip -4 route flush table main proto static",
    "ip route add default via 10.0.0.254 dev eth0",
    "ip route add 10.9.0.0/16 proto static via 10.0.0.253 dev eth0 metric 20",
]
RESTORE_ADDRESSES = [
    "ip -4 addr flush dev eth0",
    "ip addr add 10.0.0.1/24 brd 10.0.0.255 scope global dev eth0",
    "ip addr add 10.5.0.1/16 scope global label eth0:1 dev eth0",
    "ip addr add 10.0.0.2/24 scope global dev eth0",
]


@pytest.fixture
def netns() -> Iterator[str]:
    """A network namespace of the test's own with the lab's eth0 (removed with it afterwards)."""
    name = f"copilot-test-{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "netns", "add", name], check=True, capture_output=True)
    try:
        for command in LAB_SETUP:
            subprocess.run(["ip", "-n", name, *command.split()], check=True, capture_output=True)
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=True, capture_output=True)


@pytest.fixture
async def linux_lab(admin: API, netns: str) -> AsyncIterator[tuple[str, ShellServer]]:
    """A project with Host1, whose console is a root bash in ``netns``."""
    nsenter = shutil.which("nsenter")
    assert nsenter is not None, "nsenter (util-linux) is not installed"
    status, made = await admin.post("/v3/projects", {"name": f"revert-linux-{uuid.uuid4().hex[:8]}"})
    assert status == 201, made
    node = await add_vpcs_node(admin, made["project_id"], "Host1")  # any node with a telnet console port
    shell = ShellServer.start(port=node["console"], wrapper=(nsenter, f"--net=/run/netns/{netns}"))
    try:
        yield made["project_id"], shell
    finally:
        await asyncio.to_thread(shell.stop)
        await admin.delete(f"/v3/projects/{made['project_id']}")


async def device_state(shell: ShellServer, workdir: Path) -> list[str]:
    """eth0's link, its IPv4 addresses and the main routing table, read on the console outside the copilot."""
    audit = AuditLog(workdir / f"check-{uuid.uuid4().hex[:6]}")
    try:
        result = await run_commands(
            Device("Host", shell.host, shell.port, LINUX), READ, mode="show", policy=load_policy(),
            locks=DeviceLocks(), audit=audit, who=Who("tests", "-", "-"), timeout=15,
        )
    finally:
        await audit.close()
    assert result.status == "ok", result
    return [r.output for r in result.results]


async def settles_to(shell: ShellServer, workdir: Path, wanted: list[str], deadline: float = 30.0) -> list[str]:
    """The device's state once it equals ``wanted``, or the last one read when the deadline passed.

    A link set up reaches its operational state (``state UP``, routes without
    ``linkdown``) through the kernel's link watch, a moment after the command.
    """
    end = time.monotonic() + deadline
    while True:
        state = await device_state(shell, workdir)
        if state == wanted or time.monotonic() > end:
            return state
        await asyncio.sleep(0.2)  # polling a state with a deadline, not a synchronisation


async def inject(teacher: API, stub: Any, project_id: str, calls: list[dict[str, Any]]) -> str:
    """One fault-injection run issuing ``calls`` (config commands: approved), its session id."""
    stub.enqueue(reply(tool_calls=[tool_call("gns3_config_commands", c) for c in calls]))
    session_id = str(uuid.uuid4())
    status, result = await teacher.post(f"{COPILOT}/projects/{project_id}/chat/inject",
                                        {"message": INJECT, "session_id": session_id, "stream": False})
    assert status == 200 and result["status"] == "waiting_confirmation", result
    stub.enqueue("A fault was injected.")
    status, result = await teacher.post(sessions_path(project_id, session_id, "/confirm"),
                                        {"approved": True, "stream": False})
    assert status == 200 and result["content"] == "A fault was injected.", result
    return session_id


async def test_a_wrong_address_and_gateway_are_reverted_exactly(users, stub, admin, linux_lab, tmp_path):
    project_id, shell = linux_lab
    teacher, student = await users("linux_teacher"), await users("linux_student")
    await teacher.use_llm(stub)
    before = await device_state(shell, tmp_path)
    link, addresses, routes = before
    assert "UP" in link.split("<")[1].split(">")[0].split(",")
    assert [line.split()[3] for line in addresses.splitlines()] == ["10.0.0.1/24", "10.5.0.1/16", "10.0.0.2/24"]
    assert "default via 10.0.0.254 dev eth0" in routes and "10.9.0.0/16 via 10.0.0.253" in routes

    wrong = {"device": "Host1", "driver": "linux", "commands": [
        "ip addr del 10.0.0.1/24 dev eth0", "ip addr add 10.0.0.99/24 dev eth0",
        "ip route replace default via 10.0.0.250"]}
    opaque = {"device": "Host1", "driver": "linux", "commands": ["ip neigh flush dev eth0"]}  # no undo known
    session_id = await inject(teacher, stub, project_id, [wrong, opaque])
    _, broken_addresses, broken_routes = await device_state(shell, tmp_path)
    broken = [line.split()[3] for line in broken_addresses.splitlines()]
    assert "10.0.0.99/24" in broken and "10.0.0.1/24" not in broken, broken_addresses
    assert "default via 10.0.0.250 dev eth0" in broken_routes, broken_routes

    recorded = await faults(teacher, project_id)  # the two calls ran concurrently: either may be first
    (changed,) = [f for f in recorded if f["args"] == wrong]
    (unknown,) = [f for f in recorded if f["args"] == opaque]
    assert changed["revertible"] is True
    assert changed["undo"] == {"tool": "gns3_config_commands", "args": {
        "device": "Host1", "driver": "linux", "commands": RESTORE_ADDRESSES + RESTORE_ROUTES}}
    assert (unknown["revertible"], unknown["undo"]) == (False, None)

    status, body = await student.post(f"{COPILOT}/projects/{project_id}/faults/{changed['fault_id']}/revert")
    assert status == 404, body
    status, body = await teacher.post(f"{COPILOT}/projects/{project_id}/faults/{changed['fault_id']}/revert")
    assert status == 200 and body["reverted_at"] and body["revertible"] is False, body
    assert await settles_to(shell, tmp_path, before) == before

    status, body = await teacher.post(f"{COPILOT}/projects/{project_id}/faults/{unknown['fault_id']}/revert")
    assert status == 409 and body["code"] == "fault_not_revertible" and "by hand" in body["message"], body

    # Audited: the read before the change, the change, the revert under an approval naming the fault.
    status, entries = await admin.get(f"{COPILOT}/console/audit?session_id={session_id}")
    assert status == 200, entries
    sent = [(e["command"], e["outcome"], e["approval_id"] or "") for e in reversed(entries)
            if e["command"] != opaque["commands"][0]]
    assert [s[:2] for s in sent] == [(c, "ok") for c in [
        "ip -o -4 addr show dev eth0", "ip -o -4 route show table main", *wrong["commands"],
        *RESTORE_ADDRESSES, *RESTORE_ROUTES]]
    assert {s[2] for s in sent[-8:]} == {f"revert:{changed['fault_id']}"}


async def test_an_interface_shut_is_brought_up_with_the_routes_it_lost(users, stub, admin, linux_lab, tmp_path):
    project_id, shell = linux_lab
    teacher = await users("linux_teacher2")
    await teacher.use_llm(stub)
    before = await device_state(shell, tmp_path)
    shut = {"device": "Host1", "driver": "linux", "commands": ["ip link set dev eth0 down"]}
    await inject(teacher, stub, project_id, [shut])
    link, addresses, routes = await device_state(shell, tmp_path)
    assert "UP" not in link.split("<")[1].split(">")[0].split(","), link
    assert addresses == before[1]  # a link set down keeps its addresses ...
    assert routes == "", routes  # ... but loses every route through it, the static ones for good

    (fault,) = await faults(teacher, project_id)
    assert fault["undo"]["args"]["commands"] == ["ip link set dev eth0 up", *RESTORE_ROUTES]
    status, body = await teacher.post(f"{COPILOT}/projects/{project_id}/faults/{fault['fault_id']}/revert")
    assert status == 200 and body["reverted_at"], body
    assert await settles_to(shell, tmp_path, before) == before


async def test_a_revert_whose_commands_fail_is_a_409_and_the_fault_stays(users, stub, admin, linux_lab, netns,
                                                                        tmp_path):
    """iproute2's errors count: a revert that cannot put the routes back says so and can be retried."""
    project_id, _shell = linux_lab
    teacher = await users("linux_teacher3")
    await teacher.use_llm(stub)
    await inject(teacher, stub, project_id, [{"device": "Host1", "driver": "linux",
                                             "commands": ["ip route del default"]}])
    (fault,) = await faults(teacher, project_id)
    assert fault["undo"]["args"]["commands"] == RESTORE_ROUTES
    # Someone removes the subnet the gateway is on: the default route cannot come back.
    for address in ("10.0.0.2/24", "10.0.0.1/24"):
        await asyncio.to_thread(subprocess.run, ["ip", "-n", netns, "addr", "del", address, "dev", "eth0"],
                                check=True, capture_output=True)
    status, body = await teacher.post(f"{COPILOT}/projects/{project_id}/faults/{fault['fault_id']}/revert")
    assert status == 409 and body["code"] == "fault_not_revertible" and "Host1 was not restored" in body["message"], body
    (fault,) = await faults(teacher, project_id)
    assert fault["reverted_at"] is None and fault["revertible"] is True
