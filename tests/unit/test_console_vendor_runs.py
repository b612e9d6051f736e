"""The vendor families' drivers, built at start-up from the library, drive each CLI's simulator
through the runner: login, a read, a config batch committed (confirmed where the CLI can) or
aborted when a line fails, each line audited; the prompt checked against the family first."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading

import pytest

from gns3server.agent.gns3_copilot.console import (
    AuditLog,
    Credentials,
    Device,
    DeviceLocks,
    Who,
    load_policy,
    run_commands,
)
from gns3server.agent.gns3_copilot.console import registry as registry_module
from gns3server.agent.gns3_copilot.console.families import DRIVER_NAMES, FAMILY_NAMES, load_drivers
from gns3server.agent.gns3_copilot.console.registry import Drivers
from gns3server.agent.gns3_copilot.console.runner import commit_lines
from tests.support.cli_sim import CliSimulator, Transcript
from tests.unit.test_cli_sim import CONFIG, LOGINS, READS

DRIVERS = Drivers(load_drivers())
POLICY = load_policy()
WHO = Who("alice", "s1", "p1", approval_id="a1", approval_digest="d1", approved_by="alice", approved_at=1.0)


def login_for(transcript: Transcript) -> Credentials | None:
    """The device's console login; a factory-empty password is set first (no console login types none)."""
    if transcript.family not in LOGINS:
        return None
    user, password = LOGINS[transcript.family]
    if not password and transcript.login.get("password_prompt"):
        password = transcript.login["password"] = "s3cret-pw"
    return Credentials(user, password or None)


@pytest.fixture
async def sim(request):
    transcript = Transcript.load(request.param)
    credentials = login_for(transcript)
    async with CliSimulator(transcript, seconds_per_unit=0.2) as running:
        running.credentials = credentials
        yield running


@pytest.fixture
async def audit(tmp_path):
    log = AuditLog(tmp_path)
    yield log
    await log.close()


def on(names):
    return pytest.mark.parametrize("sim", names, indirect=True)


async def run(sim, lines, mode, audit, driver=None, output_format="text", **device):
    name = sim.transcript.family
    target = Device(name, "127.0.0.1", sim.port, driver or DRIVERS[name], credentials=sim.credentials, **device)
    return await run_commands(target, lines, mode=mode, policy=POLICY, locks=DeviceLocks(), audit=audit, who=WHO,
                              timeout=60, output_format=output_format)


def batch(name: str, line: str) -> list[str]:
    return ["config system interface", "edit port1", line, "end"] if name == "fortios" else [line]


async def test_the_drivers_are_built_in_a_worker_thread_with_every_family(monkeypatch):
    threads = []

    def recorded():
        threads.append(threading.get_ident())
        return load_drivers()

    monkeypatch.setattr("gns3server.agent.gns3_copilot.console.families.load_drivers", recorded)
    drivers = await Drivers.load()
    assert threads and threads[0] != threading.get_ident()
    assert tuple(drivers) == DRIVER_NAMES and all(drivers[n].levels for n in FAMILY_NAMES)
    assert registry_module.Drivers().named("IOS").name == "ios" and "junos" not in registry_module.Drivers()


def test_importing_the_copilot_reads_no_library():
    code = ("import sys; import gns3server.agent.gns3_copilot.api.lifecycle, gns3server.agent.gns3_copilot.tools.toolset; "
            "print(sorted(m for m in sys.modules if m.startswith(('scrapli', 'textfsm', 'ntc_templates'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout


@on(FAMILY_NAMES)
async def test_a_read_through_the_familys_driver(sim, audit):
    name = sim.transcript.family
    read, _abbreviation, expected = READS[name]
    result = await run(sim, [read], "show", audit)
    assert result.status == "ok", result
    assert expected in result.results[0].output
    assert (read, "ok") in [(e.command, e.outcome) for e in await audit.entries()]


@on(FAMILY_NAMES)
async def test_a_config_batch_is_committed_confirmed_where_the_cli_can(sim, audit):
    name = sim.transcript.family
    line, show, expected = CONFIG[name]
    commit = DRIVERS[name].commit
    result = await run(sim, batch(name, line), "config", audit)
    assert result.status == "ok", result
    ends = commit_lines(commit, True)
    assert [r.command for r in result.results] == [*batch(name, line), *ends]
    assert any(expected in entry for entry in sim.device.running), sim.device.events
    if commit is not None and commit.confirmed and commit.confirm and not commit.session:
        assert ends == [commit.confirmed_command(max(60, commit.min_seconds)), commit.confirm]
        assert "confirmed" in sim.device.events, sim.device.events
    # Every line, the commit's too, is audited under the batch's approval.
    audited = {(e.command, e.outcome, e.approval_id) for e in await audit.entries()}
    assert {(r.command, "ok", "a1") for r in result.results} <= audited
    read = await run(sim, [show], "show", audit)
    assert expected in read.results[0].output


ABORTING = [n for n in FAMILY_NAMES if (c := DRIVERS[n].commit) and c.abort and not c.session and not c.typed]


@on(ABORTING)
async def test_a_failed_line_aborts_the_candidate(sim, audit):
    name = sim.transcript.family
    line, _show, expected = CONFIG[name]
    result = await run(sim, [line, "frobnicate the widget"], "config", audit)
    assert result.status == "error", result
    commit = DRIVERS[name].commit
    assert [r.command for r in result.results][-1] == commit.abort
    assert result.results[1].status == "error" and result.results[1].errors
    assert not any(expected in entry for entry in sim.device.running), sim.device.events
    assert "committed" not in " ".join(sim.device.events)


@on(["srlinux"])
async def test_a_prompt_of_another_family_stops_the_batch_before_anything_is_sent(sim, audit):
    # The image says EOS; the console shows SR Linux's two-line prompt.
    node = {"name": "leaf1", "node_type": "qemu", "properties": {"hda_disk_image": "vEOS64-lab-4.30.qcow2"}}
    picked = DRIVERS.pick(node)
    assert (picked.driver.name, picked.cli_known) == ("eos", True)
    result = await run(sim, ["show version"], "show", audit, driver=picked.driver,
                       check_prompt=DRIVERS.prompt_check(picked))
    assert (result.status, result.code) == ("failed", "console_family_mismatch"), result
    assert "Nokia SR Linux" in result.error and "driver=srlinux" in result.error
    assert "show version" not in sim.received and result.results[0].status == "not_run"
    # A family a user chose stands: the mismatch is theirs to judge.
    chosen = DRIVERS.pick(node, choice="eos")
    assert DRIVERS.prompt_check(chosen)("\r\n--{ running }--[  ]--\r\nA:leaf1#") is None


@pytest.mark.parametrize(("node", "choice", "override", "driver", "known"), [
    ({"name": "leaf1", "node_type": "qemu", "properties": {"hda_disk_image": "vEOS64-lab.qcow2"}}, None, None, "eos", True),
    ({"name": "R1", "node_type": "qemu", "template_id": "t"}, "junos", None, "junos", True),
    ({"name": "R1", "node_type": "qemu", "tags": ["family:vrp"]}, None, None, "vrp", True),
    ({"name": "R1", "node_type": "qemu", "tags": ["netmiko_device_type:cisco_xr_telnet"]}, None, None, "iosxr", True),
    ({"name": "vyos-1", "node_type": "qemu"}, None, None, "vyos", False),  # the node's name only
    ({"name": "R1", "node_type": "qemu"}, None, "junos", "junos", False),  # the caller's word only
    ({"name": "f1", "node_type": "docker", "properties": {"image": "frrouting/frr:v8.4.0"}}, None, None, "linux", True),
    ({"name": "b1", "node_type": "qemu", "tags": ["driver:bird"]}, None, None, "bird", True),
])
def test_the_detected_family_picks_the_driver(node, choice, override, driver, known):
    picked = DRIVERS.pick(node, choice=choice, override=override)
    assert (picked.driver.name, picked.cli_known) == (driver, known)
    if node["node_type"] == "docker":  # GNS3's Docker console is a shell, whatever the image runs
        assert "FRR" in picked.note and "shell" in picked.note


def test_every_family_ends_a_batch_as_its_cli_does():
    ends = {name: commit_lines(DRIVERS[name].commit, True) for name in DRIVER_NAMES}
    assert ends["junos"] == ["commit confirmed 1", "commit"]
    assert ends["iosxr"] == ["commit confirmed 60", "commit"]
    assert ends["cumulus"] == ["nv config apply -y"]
    assert ends["eos"] == ends["nxos"] == ends["fortios"] == ends["ios"] == ends["frr"] == []
    assert commit_lines(DRIVERS["junos"].commit, False) == ["rollback 0"]
    assert asyncio.iscoroutinefunction(Drivers.load)


@on(["junos", "vrp"])
async def test_structured_output_hands_over_the_form_measured_smallest(sim, audit):
    name = sim.transcript.family
    form = DRIVERS[name].structured
    replayed = {" ".join(entry.words) for entry in sim.transcript.entries}
    rows_command = next(c for c, use in form.forms.items() if use == "textfsm" and c in replayed)
    raw_command = next(c for c in (*form.forms, READS[name][0], CONFIG[name][1]) if c in replayed and form.form_of(c) == "raw")
    result = await run(sim, [rows_command, raw_command], "show", audit, output_format="structured")
    rows, raw = result.results
    assert rows.status == "ok" and rows.output == "" and rows.data["columns"] and rows.data["rows"], rows
    text = await run(sim, [rows_command], "show", audit)
    assert text.results[0].data is None and text.results[0].output  # as text unless asked
    assert raw.data is None and raw.output, raw


@on(["eos"])
async def test_output_its_template_cannot_read_stays_text(sim, audit):
    # ntc-templates' arista_eos show version wants the "Arista" model line; a vEOS prints "vEOS"
    # (scrapli's recorded vEOS session): the rows are measured smaller, the text is what reaches the model.
    assert DRIVERS["eos"].structured.form_of("show version") == "textfsm"
    result = await run(sim, ["show version"], "show", audit, output_format="structured")
    (read,) = result.results
    assert read.status == "ok" and read.data is None and "4.22.1F" in read.output, read
