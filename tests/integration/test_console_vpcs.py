"""Console commands against a real VPCS daemon: outputs, errors, locks, policy, audit, tools."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any, Self

import pytest
from langchain_core.tools import ToolException
from pydantic import ValidationError
from vpcs_process import VPCSProcess

from gns3server.agent.gns3_copilot.console import VPCS, Device, DeviceLocks, Who, run_commands
from gns3server.agent.gns3_copilot.tools.console import ConfigCommandsTool, ShowCommandsTool
from gns3server.agent.gns3_copilot.tools.errors import ToolError, failure_outcome

pytestmark = pytest.mark.integration

WHO = Who("alice", "session-1", "project-1")


def _vpcs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VPCSProcess]:
    vpcs = VPCSProcess.start(tmp_path_factory.mktemp("vpcs"))
    try:
        yield vpcs
    finally:
        vpcs.stop()
        assert vpcs.process.poll() is not None and not vpcs.pids()


@pytest.fixture(scope="module")
def vpcs(tmp_path_factory):
    yield from _vpcs(tmp_path_factory)


@pytest.fixture(scope="module")
def vpcs2(tmp_path_factory):
    yield from _vpcs(tmp_path_factory)


def pc(vpcs: VPCSProcess, name: str = "PC1") -> Device:
    return Device(name, vpcs.host, vpcs.port, VPCS)


async def test_show_config_show(vpcs, policy, audit):
    locks = DeviceLocks()
    kw: dict[str, Any] = {"policy": policy, "locks": locks, "audit": audit, "who": WHO, "timeout": 15}
    before = await run_commands(pc(vpcs), ["show ip"], mode="show", **kw)
    assert before.status == "ok", before
    assert "NAME        : VPCS[1]" in before.results[0].output
    assert "IP/MASK     : 0.0.0.0/0" in before.results[0].output

    configured = await run_commands(pc(vpcs), ["ip 10.0.0.1/24 10.0.0.254", "foo bar", "ip 999.1.1.1"], mode="config", **kw)
    assert [r.status for r in configured.results] == ["ok", "error", "error"], configured
    assert "10.0.0.1 255.255.255.0 gateway 10.0.0.254" in configured.results[0].output
    assert configured.results[1].errors == ['Bad command: "foo bar". Use ? for help.']
    assert configured.results[2].errors == ["Invalid address"]

    after = await run_commands(pc(vpcs), ["show ip"], mode="show", **kw)
    assert "IP/MASK     : 10.0.0.1/24" in after.results[0].output
    assert "GATEWAY     : 10.0.0.254" in after.results[0].output

    entries = await audit.entries(device="PC1")
    assert [(e.command, e.outcome) for e in reversed(entries)] == [
        ("show ip", "ok"),
        ("ip 10.0.0.1/24 10.0.0.254", "ok"),
        ("foo bar", "error"),
        ("ip 999.1.1.1", "error"),
        ("show ip", "ok"),
    ]
    assert {(e.user, e.session, e.project) for e in entries} == {("alice", "session-1", "project-1")}
    assert entries[0].time >= entries[-1].time > 0
    assert entries[2].detail == 'Bad command: "foo bar". Use ? for help.'


async def test_blocked_commands_never_reach_the_device(vpcs, policy, audit, tmp_path):
    # VPCS's own dangerous commands: "q" (quit) stops the PC, "!" runs a command in
    # the GNS3 host's shell. (IOS's "rel" is VPCS's harmless "relay"; the policy
    # judges each device in its own CLI's terms.)
    marker = tmp_path / "host-shell-ran"
    kw: dict[str, Any] = {"policy": policy, "locks": DeviceLocks(), "audit": audit, "who": WHO, "timeout": 15}
    for commands, mode in [
        (["set pcname HACKED", "q"], "config"),
        (["set pcname HACKED"], "show"),
        ([f"!touch {marker}"], "config"),
        ([f"show ip; !touch {marker}"], "show"),
    ]:
        result = await run_commands(pc(vpcs), commands, mode=mode, **kw)
        assert result.status == "blocked"
    shown = await run_commands(pc(vpcs), ["show ip"], mode="show", **kw)
    assert "HACKED" not in shown.results[0].output and "VPCS[1]" in shown.results[0].output  # and VPCS still runs
    assert not marker.exists()
    blocked = await audit.entries(outcome="blocked")
    assert sorted(e.command for e in blocked) == sorted(
        ["q", "set pcname HACKED", f"!touch {marker}", f"show ip; !touch {marker}"]
    )


async def test_concurrent_runs_on_one_device_do_not_interleave(vpcs, vpcs2, policy, audit):
    locks = DeviceLocks()
    kw: dict[str, Any] = {"policy": policy, "locks": locks, "audit": audit, "who": WHO, "timeout": 20}
    results = await asyncio.gather(
        run_commands(pc(vpcs), ["ip 10.0.0.2/24", "show ip"], mode="config", **kw),
        run_commands(pc(vpcs), ["show ip", "show ip"], mode="show", **kw),
        run_commands(pc(vpcs2, "PC2"), ["ip 10.0.0.3/24", "show ip"], mode="config", **kw),
    )
    assert [r.status for r in results] == ["ok", "ok", "ok"], results
    assert "IP/MASK     : 10.0.0.2/24" in results[0].results[1].output
    for r in results[1].results:  # each output is one whole "show ip", nothing of another run
        assert r.output.count("NAME        :") == 1 and "Checking for duplicate" not in r.output
    assert "IP/MASK     : 10.0.0.3/24" in results[2].results[1].output
    assert locks.active() == 0


async def test_every_call_has_a_timeout(vpcs, policy, audit):
    # ip takes about a second on VPCS (duplicate-address check): far over this budget.
    result = await run_commands(
        pc(vpcs), ["ip 10.0.0.9/24"], mode="config", policy=policy, locks=DeviceLocks(), audit=audit, who=WHO, timeout=0.3
    )
    assert result.status == "failed"
    assert result.results[0].status in ("timeout", "not_run")


class FakeNodesClient:
    """What the console tools need of GNS3Client: an async context with nodes()."""

    def __init__(self, nodes: list[dict[str, Any]]) -> None:
        self._nodes = nodes

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def nodes(self, project_id: str) -> list[dict[str, Any]]:
        assert project_id == "project-1"
        return self._nodes


async def test_console_tools(vpcs, vpcs2, policy, audit):
    nodes = [
        {"name": "PC1", "node_type": "vpcs", "console": vpcs.port, "console_host": "0.0.0.0", "console_type": "telnet", "status": "started"},
        {"node_id": "n-2", "name": "PC2", "node_type": "vpcs", "console": vpcs2.port, "console_host": "127.0.0.1", "console_type": "telnet", "status": "started"},
        {"name": "PC3", "node_type": "vpcs", "console": 1, "console_host": "127.0.0.1", "console_type": "telnet", "status": "stopped"},
        {"name": "SW1", "node_type": "ethernet_switch", "console": 2, "console_type": "none", "status": "started"},
        {"name": "Host", "node_type": "docker", "console": vpcs2.port, "console_host": "127.0.0.1", "console_type": "telnet", "status": "started"},
        {"name": "PC4", "node_type": "vpcs", "console": vpcs.port, "console_host": "127.0.0.1", "console_type": "telnet", "status": "suspended"},
    ]
    checked: list[tuple[str, str]] = []
    denied_paths: set[str] = set()

    async def authorize(privilege: str, path: str) -> str:
        """Stands in for GNS3's check (real GNS3 users: test_permissions_gns3.py)."""
        checked.append((privilege, path))
        return "denied" if path in denied_paths else "allowed"

    common: dict[str, Any] = {
        "client_factory": lambda: FakeNodesClient(nodes), "project_id": "project-1", "policy": policy, "locks": DeviceLocks(),
        "audit": audit, "authorize": authorize, "user": "alice", "session_id": "session-1", "timeout": 20,
    }
    show, config = ShowCommandsTool(**common), ConfigCommandsTool(**common)
    assert show.metadata == {"read_only": True} and config.metadata == {"needs_confirmation": True, "changes_device": "device"}
    with pytest.raises(ToolException, match="asynchronous"):
        show.invoke({"devices": ["PC1"], "commands": ["show ip"]})

    shown = await show.ainvoke({"devices": ["PC1", "pc2"], "commands": ["show ip"]})
    assert [d["device"] for d in shown["devices"]] == ["PC1", "PC2"]
    assert all(d["status"] == "ok" and "NAME" in d["results"][0]["output"] for d in shown["devices"])

    with pytest.raises(ToolError, match="PC1: every one failed") as refused:  # its only device was blocked
        await show.ainvoke({"devices": ["PC1"], "commands": ["set pcname X"]})
    assert failure_outcome(refused.value)["devices"][0]["status"] == "blocked"

    configured = await config.ainvoke({"device": "PC2", "commands": ["set pcname PC2"]})
    assert configured["status"] == "ok" and configured["results"][0]["status"] == "ok"
    assert "PC2[1]" in (await show.ainvoke({"devices": ["PC2"], "commands": ["show ip"]}))["devices"][0]["results"][0]["output"]

    # GNS3 says PC3 is stopped and nothing answers on its console: said per device, the others still run.
    mixed = await show.ainvoke({"devices": ["PC1", "PC3"], "commands": ["show ip"]})
    assert [d["status"] for d in mixed["devices"]] == ["ok", "failed"]
    assert mixed["devices"][1]["error"].startswith("PC3 is stopped; start it first (cannot connect")
    assert mixed["devices"][1]["results"][0]["status"] == "not_run"
    # GNS3's status is a hint: a "stopped" node whose console answers is used.
    nodes[1]["status"] = "stopped"
    assert (await show.ainvoke({"devices": ["PC2"], "commands": ["show ip"]}))["devices"][0]["status"] == "ok"

    # A node whose type suggests another CLI (docker: linux) is driven as the model says.
    assert show._device(nodes[4]).driver.name == "linux"
    overridden = await show.ainvoke({"devices": ["Host"], "commands": ["show ip"], "driver": "vpcs"})
    assert overridden["devices"][0]["status"] == "ok" and "NAME" in overridden["devices"][0]["results"][0]["output"]
    with pytest.raises(ValidationError, match="driver"):
        await config.ainvoke({"device": "Host", "commands": ["x"], "driver": "nosuch"})
    # Bounded calls: a confused model cannot open hundreds of consoles or queue thousands of lines.
    for tool, args, field in [
        (show, {"devices": ["PC1"] * 33, "commands": ["show ip"]}, "devices"),
        (show, {"devices": ["PC1"], "commands": ["show ip"] * 65}, "commands"),
        (config, {"device": "PC1", "commands": ["ip 10.0.0.1/24 " + "x" * 1000]}, "commands.0"),
    ]:
        with pytest.raises(ValidationError, match=field):
            await tool.ainvoke(args)

    for tool, args, message in [
        (show, {"devices": ["PC9"], "commands": ["show ip"]}, "no node named 'PC9'"),
        (config, {"device": "SW1", "commands": ["x"]}, "only telnet consoles"),
        (show, {"devices": ["PC4"], "commands": ["show ip"]}, "PC4 is suspended; resume it first"),
    ]:
        with pytest.raises(ToolException, match=message):
            await tool.ainvoke(args)
    assert {e.project for e in await audit.entries()} == {"project-1"}

    # Every device's console is checked before anything is sent; one refusal sends nothing to any of them.
    assert ("Node.Console", "/projects/project-1/nodes/n-2/console/ws") in checked
    denied_paths.add("/projects/project-1/nodes/n-2/console/ws")
    before = len(await audit.entries(limit=1000))
    with pytest.raises(ToolException, match="you lack Node.Console on PC2"):
        await show.ainvoke({"devices": ["PC1", "PC2"], "commands": ["show ip", "show arp"]})
    now = await audit.entries(limit=1000)  # newest first
    entries = now[: len(now) - before]
    assert sorted((e.device, e.command, e.outcome) for e in entries) == [
        ("PC2", "show arp", "denied"), ("PC2", "show ip", "denied")]
