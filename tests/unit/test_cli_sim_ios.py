"""The replayed Cisco IOS router (``tests/support/cli_sim/ios.py``): it must behave like IOS where a change's
exactness is judged, or the integration tests that trust it prove nothing.

Its prompts and modes, errors, paging and running configuration are read as IOS prints
them (a bare client, the copilot's IOS driver through the runner, ntc-templates through
the checks' parsers), and the rollbacks hier-config computes for IOS, applied to it,
give back the baseline exactly.
"""

from __future__ import annotations

import asyncio
import re

import pytest

from gns3server.agent.gns3_copilot.checks.parsers import ios as ios_parsers
from gns3server.agent.gns3_copilot.checks.state import Reading
from gns3server.agent.gns3_copilot.console import IOS, AuditLog, Device, DeviceLocks, Who, load_policy, run_commands
from gns3server.agent.gns3_copilot.tools.ios_rollback import fingerprint, flavour, rollback
from tests.support.cli_sim import CliSimulator
from tests.support.cli_sim.client import SimClient
from tests.support.cli_sim.ios import IOSDevice, transcript

PROMPT = re.compile(r"R1(?:\([a-z-]+\))?[>#]")
WHO = Who("alice", "s1", "p1", approval_id="a1", approval_digest="d1", approved_by="alice", approved_at=1.0)


@pytest.fixture
async def router():
    async with CliSimulator(transcript(), kind=IOSDevice) as sim:
        yield sim


@pytest.fixture
async def audit(tmp_path):
    log = AuditLog(tmp_path)
    yield log
    await log.close()


async def typed(client: SimClient, line: str) -> str:
    """``line`` typed at the prompt: what the router printed up to its next prompt (the echo left out)."""
    client.line(line)
    return await client.until(PROMPT)


async def open_router(sim: CliSimulator) -> SimClient:
    client = await SimClient.connect(sim.port)
    await client.until(re.compile(r"R1>"))
    return client


async def run(sim: CliSimulator, lines: list[str], mode: str, audit: AuditLog) -> dict:
    result = await run_commands(Device("R1", "127.0.0.1", sim.port, IOS), lines, mode=mode, policy=load_policy(),
                                locks=DeviceLocks(), audit=audit, who=WHO, timeout=30)
    return result.as_dict()


def device(sim: CliSimulator) -> IOSDevice:
    assert isinstance(sim.device, IOSDevice)
    return sim.device


async def test_prompts_and_modes_as_ios_draws_them(router):
    client = await open_router(router)
    assert (await typed(client, "enable")).endswith("R1#")
    assert "Enter configuration commands, one per line.  End with CNTL/Z." in await typed(client, "configure terminal")
    assert client.transcript.endswith("R1(config)#")
    assert (await typed(client, "interface gi0/0")).endswith("R1(config-if)#")
    # A command the sub-mode does not know is the global mode's: IOS moves to its mode.
    assert (await typed(client, "router ospf 1")).endswith("R1(config-router)#")
    assert (await typed(client, "exit")).endswith("R1(config)#")
    assert (await typed(client, "router bgp 65001")).endswith("R1(config-router)#")
    assert (await typed(client, "end")).endswith("R1#")
    assert (await typed(client, "disable")).endswith("R1>")
    await client.close()


async def test_unknown_commands_get_the_caret_under_the_word_and_user_exec_cannot_read_the_configuration(router):
    client = await open_router(router)
    answer = await typed(client, "show running-config")
    assert "% Invalid input detected at '^' marker." in answer
    caret = next(line for line in answer.splitlines() if line.strip() == "^")
    assert caret.index("^") == len("R1>show ")  # under "running-config"
    await typed(client, "enable")
    assert "% Incomplete command." in await typed(client, "show ip")
    await typed(client, "configure terminal")
    await typed(client, "interface GigabitEthernet0/0")
    answer = await typed(client, "frobnicate now")
    caret = next(line for line in answer.splitlines() if line.strip() == "^")
    assert caret.index("^") == len("R1(config-if)#") and "% Invalid input detected at '^' marker." in answer
    await client.close()


async def test_the_running_configuration_is_what_the_commands_left_in_ios_order(router, audit):
    before = device(router).running_config()
    assert flavour(before) == "ios"
    result = await run(router, [
        "interface GigabitEthernet0/0", "shutdown", "ip ospf hello-interval 2", "description changed",
        "router ospf 1", "network 10.0.99.0 0.0.0.255 area 1",
        "router bgp 65001", "neighbor 10.0.13.3 remote-as 65003", "neighbor 10.0.13.3 shutdown",
        "neighbor 10.0.12.2 remote-as 65009",
    ], "config", audit)
    assert result["status"] == "ok", result
    text = device(router).running_config()
    interface = text.split("interface GigabitEthernet0/0\n")[1].split("!\n")[0].splitlines()
    assert interface == [" description changed", " ip address 10.0.12.1 255.255.255.252", " ip ospf dead-interval 4",
                         " ip ospf hello-interval 2", " ip ospf network point-to-point", " shutdown", " duplex auto",
                         " speed auto", " media-type rj45"]
    bgp = text.split("router bgp 65001\n")[1].split("!\n")[0].splitlines()
    assert bgp == [" bgp router-id 10.255.0.1", " bgp log-neighbor-changes", " network 192.168.1.0",
                   " neighbor 10.0.12.2 remote-as 65009", " neighbor 10.0.13.3 remote-as 65003",
                   " neighbor 10.0.13.3 shutdown"]
    assert " network 10.0.99.0 0.0.0.255 area 1" in text

    # The no forms take lines away: a neighbour with all its settings, an interface's shutdown.
    result = await run(router, ["router bgp 65001", "no neighbor 10.0.13.3 remote-as 65003",
                                "neighbor 10.0.12.2 remote-as 65002", "router ospf 1",
                                "no network 10.0.99.0 0.0.0.255 area 1", "interface GigabitEthernet0/0",
                                "no shutdown", "no ip ospf hello-interval", "ip ospf hello-interval 1",
                                "description to R2"], "config", audit)
    assert result["status"] == "ok", result
    assert fingerprint(device(router).running_config()) == fingerprint(before)


async def test_a_line_ios_refuses_fails_the_batch(router, audit):
    result = await run(router, ["router ospf 1", "network 10.0.99.0 area 0"], "config", audit)
    assert result["status"] == "error", result
    assert "% Invalid input detected at '^' marker." in result["results"][-1]["output"], result


async def test_its_state_is_read_by_the_copilots_ios_parsers(router, audit):
    reads = ["show ip interface brief", "show ip ospf neighbor", "show ip bgp summary", "show ip route"]

    async def state() -> tuple:
        result = await run(router, reads, "show", audit)
        assert result["status"] == "ok", result
        readings = [Reading("R1", r["command"], 0.0, "ok", r["output"]) for r in result["results"]]
        return (ios_parsers.interfaces(readings[:1])[0], ios_parsers.ospf(readings[1:2]),
                ios_parsers.bgp(readings[2:3])[0], ios_parsers.routes(readings[3:])[0])

    interfaces, (neighbours, timers), sessions, routes = await state()
    assert interfaces["GigabitEthernet0/0"].up and not interfaces["GigabitEthernet0/1"].admin_up
    assert neighbours["10.255.0.2"].state == "Full" and timers["ospf_dead"] == 4
    assert sessions["10.0.12.2"].state == "Established"
    assert {"10.0.12.0/30", "10.255.0.2/32", "192.168.2.0/24", "192.168.1.0/24"} <= set(routes)
    assert routes["10.255.0.2/32"][0].protocol == "ospf" and routes["192.168.2.0/24"][0].protocol == "bgp"

    await run(router, ["interface GigabitEthernet0/0", "ip ospf hello-interval 2", "router bgp 65001",
                       "neighbor 10.0.12.2 remote-as 65009"], "config", audit)
    interfaces, (neighbours, _), sessions, routes = await state()
    assert "10.255.0.2" not in neighbours and sessions["10.0.12.2"].state != "Established"
    assert "10.255.0.2/32" not in routes and "192.168.2.0/24" not in routes

    await run(router, ["interface GigabitEthernet0/0", "shutdown"], "config", audit)
    interfaces, *_ = await state()
    assert not interfaces["GigabitEthernet0/0"].admin_up


async def test_long_output_pages_until_terminal_length_0(router):
    client = await open_router(router)
    await typed(client, "enable")
    client.line("show running-config")
    await client.until(" --More-- ")
    client.send(" ")
    await client.until(" --More-- ")
    client.send("q")
    await client.until(re.compile(r"R1#"))
    await typed(client, "terminal length 0")
    assert "--More--" not in await typed(client, "show running-config")
    await client.close()


# Each: a fault's commands; hier-config's rollback of it, applied to the router, gives the baseline back.
EDITS = {
    "hello interval": ["interface GigabitEthernet0/0", "ip ospf hello-interval 2"],
    "shut down": ["interface GigabitEthernet0/0", "shutdown"],
    "wrong AS": ["router bgp 65001", "neighbor 10.0.12.2 remote-as 65009"],
    "neighbour removed": ["router bgp 65001", "no neighbor 10.0.12.2"],
    "area": ["router ospf 1", "no network 10.0.12.0 0.0.0.3 area 0", "network 10.0.12.0 0.0.0.3 area 1"],
    "loopback added, static removed": ["interface Loopback9", "ip address 10.9.9.9 255.255.255.255",
                                       "no ip route 192.168.1.0 255.255.255.0 Null0"],
    "address and description": ["interface GigabitEthernet0/0", "no description", "ip address 10.0.12.5 255.255.255.252"],
}


@pytest.mark.parametrize("name", EDITS)
async def test_a_rollback_hier_config_computes_gives_the_baseline_back_exactly(router, audit, name):
    baseline = device(router).running_config()
    assert (await run(router, EDITS[name], "config", audit))["status"] == "ok"
    after = device(router).running_config()
    commands = await asyncio.to_thread(rollback, baseline, after)
    result = await run(router, commands, "config", audit)
    assert result["status"] == "ok", (commands, result)
    now = device(router).running_config()
    stamp = re.compile(r"^! Last configuration change at .*$", re.MULTILINE)
    assert stamp.sub("", now) == stamp.sub("", baseline), commands


@pytest.mark.parametrize(("lines", "refusal"), [
    (["router bgp 65001", "neighbor 10.0.99.9 shutdown"], "% Specify remote-as or peer-group commands first"),
    (["router bgp 65009"], "% BGP is already running; AS is 65001"),
])
async def test_a_line_ios_refuses_in_words_of_its_own_fails_the_batch(router, audit, lines, refusal):
    before = device(router).running_config()
    result = await run(router, lines, "config", audit)
    assert result["status"] == "error" and refusal in result["results"][-1]["output"], result
    assert fingerprint(device(router).running_config()) == fingerprint(before)
