"""The frr driver against a real FRR router (zebra, staticd, ospfd, bgpd in a network namespace
of the test's own) and its vtysh on a PTY: error lines, VTYSH_PAGER, config modes, abbreviations
as vtysh resolves them, json output, and a ping that never ends, interrupted."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from console_runs import run_on, serving
from frr_router import FRRRouter, record_commands
from shell_process import ShellServer

from gns3server.agent.gns3_copilot.console import (
    FRR,
    AuditLog,
    DeviceResult,
    Policy,
)
from gns3server.agent.gns3_copilot.console.grammar import frr as frr_grammar
from gns3server.agent.gns3_copilot.console.runner import Mode

pytestmark = pytest.mark.integration



@pytest.fixture(scope="module")
def router() -> Iterator[FRRRouter]:
    started = FRRRouter.start("R1")
    try:
        subprocess.run(["ip", "-n", started.netns, "addr", "add", "10.255.0.1/32", "dev", "lo"], check=True)
        started.vtysh("configure terminal", "router ospf", "ospf router-id 10.255.0.1")
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="module")
def bin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The PATH vtysh runs ping and traceroute from: nothing in it (they cannot be executed)."""
    return tmp_path_factory.mktemp("frr-bin")


@pytest.fixture(scope="module")
def vtysh(router: FRRRouter, bin_dir: Path) -> Iterator[ShellServer]:
    with serving(command=router.console(str(bin_dir))) as server:
        yield server


async def run(server: ShellServer, commands: list[str], mode: Mode, policy: Policy, audit: AuditLog, **kw: Any) -> DeviceResult:
    return await run_on(server, "R1", FRR, commands, mode, policy, audit, **kw)


async def test_vtysh_error_lines_are_errors(vtysh, policy, audit):
    shown = await run(vtysh, ["show foo", "show ip", "show ip ospf neighbor"], "show", policy, audit)
    assert [r.status for r in shown.results] == ["error", "error", "ok"], shown
    assert shown.results[0].errors == ["% Unknown command: show foo"]
    assert shown.results[1].errors == ["% Command incomplete: show ip"]
    # vtysh runs the router's own ping: this PATH has none, and the line was "ok" before.
    pinged = await run(vtysh, ["do ping 10.0.0.1"], "config", policy, audit)
    assert pinged.results[0].status == "error", pinged
    assert pinged.results[0].errors == ["Can't execute ping: No such file or directory"]


async def test_a_banner_piped_through_the_pager_is_answered(router, policy, audit):
    # VTYSH_PAGER set: vtysh pipes even its banner through less, which waits at "(END)".
    less = os.path.dirname(shutil.which("less") or "/usr/bin/less")
    with serving(command=router.console(less), environ={"VTYSH_PAGER": "less"}) as server:
        result = await run(server, ["show version", "show ip ospf"], "show", policy, audit)
    assert result.status == "ok", result
    assert result.results[0].output.startswith("FRRouting 8.4")
    assert "(END)" not in result.results[1].output and "\x1b" not in result.results[1].output
    assert "OSPF Routing Process, Router ID: 10.255.0.1" in result.results[1].output


async def test_config_modes_down_to_router_and_interface(router, vtysh, policy, audit):
    commands = [
        "router ospf",
        "network 10.255.0.1/32 area 0",
        "exit",
        "interface lo",
        "ip ospf cost 7",
        "no router bgp 64999",
    ]
    result = await run(vtysh, commands, "config", policy, audit)
    assert [r.status for r in result.results] == ["ok", "ok", "ok", "ok", "ok", "error"], result
    assert result.results[-1].errors == ["% Can't find BGP instance"]
    running = router.vtysh("show running-config")
    assert " network 10.255.0.1/32 area 0" in running.splitlines() and " ip ospf cost 7" in running.splitlines()
    # Left in enable mode: the next read needs no end.
    again = await run(vtysh, ["show ip ospf interface lo"], "show", policy, audit)
    assert again.status == "ok" and "Cost: 7" in again.results[0].output


async def test_abbreviations_are_judged_as_vtysh_runs_them(router, vtysh, policy, audit):
    # The real vtysh takes "w" alone for "write": it saves the configuration.
    saved = router.directory / "frr.conf"
    saved.unlink(missing_ok=True)
    assert "Integrated configuration saved" in router.vtysh("w") and saved.exists()
    saved.unlink()
    assert frr_grammar.analyze("w").commands == (("write",),)

    refused = await run(vtysh, ["show version", "w"], "show", policy, audit)
    assert refused.status == "blocked" and "write needs the user's approval" in refused.results[1].reason
    assert not saved.exists()  # nothing was sent
    shown = await run(vtysh, ["wr t", "sh ip ospf nei", "sh run | include ^router"], "show", policy, audit)
    assert shown.status == "ok", shown
    assert "Current configuration:" in shown.results[0].output
    assert shown.results[2].output.splitlines() == ["router ospf"]
    approval = await run(vtysh, ["clear ip ospf process"], "show", policy, audit)
    assert approval.status == "blocked" and "`do clear ip ospf process`" in approval.results[0].reason


async def test_json_forms_come_back_as_data(vtysh, policy, audit):
    result = await run(vtysh, ["show ip ospf", "show ip ospf neighbor json", "show version"], "show", policy, audit,
                       output_format="json")
    assert result.status == "ok", result
    ospf, neighbours, version = result.results
    assert ospf.command == "show ip ospf json"  # the line actually sent
    assert ospf.data["routerId"] == "10.255.0.1" and ospf.output == ""
    assert neighbours.data == {"neighbors": {}}
    assert version.command == "show version" and version.data is None  # no json form: text
    assert version.output.startswith("FRRouting")
    entries = [e.command for e in await audit.entries(device="R1")]
    assert "show ip ospf json" in entries


async def test_a_ping_that_never_ends_is_interrupted_and_the_console_recovered(router, policy, audit, tmp_path):
    # A persistent console (a router's console line) and a vtysh whose ping is real and
    # unbounded (busybox's, with no count: what vtysh's ping runs).
    (tmp_path / "ping").symlink_to(shutil.which("busybox") or "/bin/busybox")
    server = ShellServer.start(command=router.console(str(tmp_path)), persistent=True)
    try:
        refused = await run(server, ["ping 127.0.0.1"], "show", policy, audit)
        assert refused.status == "blocked" and "`traceroute 127.0.0.1`" in refused.results[0].reason
        # The call's one deadline: generous for opening the console on a busy machine; the ping
        # outlasts it whatever is left.
        pinged = await run(server, ["do ping 127.0.0.1", "do show version"], "config", policy, audit, timeout=15)
        assert [r.status for r in pinged.results] == ["timeout", "not_run"], pinged
        assert "64 bytes from 127.0.0.1" in pinged.results[0].output
        assert "at its prompt again" in pinged.results[0].reason
        after = await run(server, ["show ip ospf"], "show", policy, audit)
    finally:
        server.stop()
    assert after.status == "ok", after
    # The refused line never connected; both sessions used the one vtysh.
    assert server.connections == 2 and len(server.shells) == 1


def test_the_command_table_is_the_real_vtysh(router):
    """The syntaxes the grammar resolves abbreviations with are what the installed vtysh lists."""
    shipped = resources.files(frr_grammar.__package__).joinpath("data", frr_grammar.DATA_FILE).read_text("utf-8")
    assert record_commands(router) == shipped
