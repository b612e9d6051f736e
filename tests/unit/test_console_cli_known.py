"""The console policy judges what the device will execute, not what the caller says the device is."""

from __future__ import annotations

from pathlib import Path

import pytest

from gns3server.agent.gns3_copilot.console import (
    IOS,
    LINUX,
    AuditLog,
    Device,
    DeviceLocks,
    Who,
    load_policy,
    run_commands,
)
from gns3server.agent.gns3_copilot.console.registry import Drivers


@pytest.mark.parametrize(("node", "override", "known"), [
    ({"node_type": "vpcs"}, None, True),
    ({"node_type": "docker"}, None, True),
    ({"node_type": "docker"}, "linux", True),  # the caller agrees with GNS3
    ({"node_type": "docker"}, "ios", False),  # the caller's word against GNS3's
    ({"node_type": "qemu"}, None, False),  # a VM may run IOS, Linux or anything
    ({"node_type": "qemu", "tags": ["driver:ios"]}, None, True),  # the administrator said
    ({"node_type": "qemu", "tags": ["driver:ios"]}, "linux", False),
])
def test_a_cli_is_known_from_gns3s_data_and_only_if_the_caller_agrees(node, override, known) -> None:
    assert Drivers().pick(node, override=override).cli_known is known


@pytest.mark.parametrize(("line", "mode"), [
    ("sh -c reboot", "show"),  # an IOS "show" abbreviation, a shell to Linux
    ("sh -c 'rm -rf /'", "show"),
    ("write erase", "config"),  # harmless words to a shell, an erase to IOS
    ("copy run start", "config"),
])
async def test_a_device_of_unknown_cli_is_judged_in_every_grammar(tmp_path: Path, line: str, mode: str) -> None:
    audit = AuditLog(tmp_path)
    try:
        for driver in (IOS, LINUX):  # whichever grammar the caller named
            device = Device("VM1", "127.0.0.1", 9, driver, cli_known=False)  # nothing listens: nothing may be sent
            result = await run_commands(device, [line], mode=mode, policy=load_policy(), locks=DeviceLocks(),
                                        audit=audit, who=Who("alice", "s1", "p1"), timeout=5)
            assert result.status == "blocked", (driver.name, result)
            assert result.results[0].reason.startswith("blocked by policy"), result
    finally:
        await audit.close()
