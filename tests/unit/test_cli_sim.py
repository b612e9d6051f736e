"""The console simulator itself: each vendor's transcript played over TCP as its CLI would behave.

Every check goes through the family's own data (console/families): its prompts (the
library's patterns) recognise the simulator's, its error strings find the simulator's
error lines, its pager pattern its pager, its escalate/deescalate and commit commands
drive the simulator's modes. A transcript and the family data must agree, or these fail.
"""

from __future__ import annotations

import asyncio
import re

import pytest

from gns3server.agent.gns3_copilot.console.families import Family, load_families
from tests.support.cli_sim import CliSimulator, Transcript, families
from tests.support.cli_sim.client import SimClient

FAMILIES = load_families()
NAMES = list(families())
LOGINS = {"junos": ("root", ""), "routeros": ("admin", ""), "vyos": ("vyos", "vyos"), "fortios": ("admin", ""),
          "cumulus": ("cumulus", "cumulus")}
# A read command, an abbreviation of it, and text its output holds.
READS = {
    "eos": ("show version", "sh ver", "Software image version: 4.22.1F"),
    "nxos": ("show version", "sh ver", "Cisco Nexus Operating System"),
    "iosxr": ("show version", "sh ver", "Cisco IOS XR Software, Version 6.5.3"),
    "junos": ("show version", "sh ver", "JUNOS Software Release [17.3R2.10]"),
    "srlinux": ("show version", "sh ver", "Software Version     : v24.10.1"),
    "routeros": ("/system resource print", "/sys res pr", "uptime"),
    "vrp": ("display version", "dis ver", "Huawei Versatile Routing Platform"),
    "vyos": ("show version", "sh ver", "VyOS 1.4.4"),
    "fortios": ("get system status", "g sys st", "Version: FortiGate"),
    "cumulus": ("nv show interface", "nv sh int", "swp1"),
}
# A configuration line, the command reading it back, and what shows it there.
CONFIG = {
    "eos": ("hostname leaf1", "show running-config", "hostname leaf1"),
    "nxos": ("hostname nx1", "show running-config", "hostname nx1"),
    "iosxr": ("hostname xr1", "show running-config", "hostname xr1"),
    "junos": ("set system host-name vj1", "show configuration | display set", "set system host-name vj1"),
    "srlinux": ("set / system name host-name srl1", "info", "set / system name host-name srl1"),
    "routeros": ("/system identity set name=R1", "/export", "system identity set name=R1"),
    "vrp": ("sysname R1", "display current-configuration", "sysname R1"),
    "vyos": ("set system host-name vy1", "show configuration commands", "set system host-name vy1"),
    "fortios": ("set ip 10.0.0.1 255.255.255.0", "show full-configuration", "set ip 10.0.0.1 255.255.255.0"),
    "cumulus": ("nv set system hostname leaf9", "nv config show", "nv set system hostname leaf9"),
}
LONG = {"eos": "show running-config", "nxos": "show running-config", "iosxr": "show running-config",
        "junos": "show interfaces", "vrp": "display interface brief", "fortios": "get system interface"}


def prompt_regex(family: Family) -> re.Pattern[str]:
    """Any of the family's prompts at the end of what was read (as the driver waits for them)."""
    return re.compile("|".join(f"(?:{level.prompt.pattern})" for level in family.levels), re.MULTILINE | re.IGNORECASE)


async def read_to_prompt(client: SimClient, family: Family) -> str:
    return await client.until(prompt_regex(family))


async def command(client: SimClient, family: Family, line: str) -> str:
    """Type ``line`` and return what came back before the next prompt (its echo removed), answering
    the family's pager with a space as the driver does."""
    client.line(line)
    if family.spec.echo_twice:  # RouterOS prints the prompt and the line it read once more
        for _ in range(2):
            await client.until(re.escape(line) + r"[^\n]*\n")
    ends = prompt_regex(family)
    if family.spec.pager:
        ends = re.compile(f"(?:{family.spec.pager})|{ends.pattern}", re.MULTILINE | re.IGNORECASE)
    text = ""
    while True:
        text += await client.until(ends)
        if family.spec.pager and re.search(family.spec.pager, text.rsplit("\n", 1)[-1]):
            client.send(" ")
            continue
        if family.spec.echo_twice:
            return text
        return text.split("\n", 1)[1] if "\n" in text else ""


async def open_cli(sim: CliSimulator, name: str) -> SimClient:
    """Connect and reach the family's read level the way a driver would, from the family's data only."""
    family = FAMILIES[name]
    client = await SimClient.connect(sim.port)
    login = family.spec.login
    if name in LOGINS:
        user, password = LOGINS[name]
        await client.until(re.compile(login.username, re.MULTILINE | re.IGNORECASE))
        client.line(user + login.username_suffix)
        if sim.transcript.login.get("password_prompt"):
            await client.until(re.compile(login.password, re.MULTILINE | re.IGNORECASE))
            client.line(password)
    steps = {dialog.prompt: dialog.answer for dialog in (*login.after, *login.wake)}
    wanted = re.compile("|".join([*(f"(?:{p})" for p in steps), f"(?:{prompt_regex(family).pattern})"]), re.MULTILINE | re.IGNORECASE)
    while True:
        text = await client.until(wanted)
        answer = next((a for p, a in steps.items() if re.search(p, text.split("\n")[-1], re.MULTILINE | re.IGNORECASE)), None)
        if answer is None or family.level_of(text) is not None and family.level_of(text).name == family.spec.read_level:
            break
        client.line(answer)
    level = family.level_of(client.transcript)
    assert level is not None and level.name == family.spec.read_level, client.transcript[-200:]
    return client


async def climb_to_config(client: SimClient, family: Family) -> None:
    """From the read level to the config level with the library's escalate commands (none: typed as is)."""
    spec = family.spec
    for step in family.escalation(spec.config_level or spec.read_level)[len(family.escalation(spec.read_level)):]:
        await command(client, family, step)


@pytest.fixture
async def sim(request):
    """The family's simulator, a confirmed commit's minute (or second) lasting a fraction of a second."""
    transcript = Transcript.load(request.param)
    in_seconds = transcript.config.get("confirmed_unit_seconds", 60) == 1
    async with CliSimulator(transcript, seconds_per_unit=0.005 if in_seconds else 0.2) as running:
        yield running


def on(names):
    return pytest.mark.parametrize("sim", names, indirect=True)


def test_every_family_has_a_transcript_with_its_origin():
    assert set(NAMES) == set(FAMILIES)
    for name in NAMES:
        transcript = Transcript.load(name)
        assert "scrapli" in transcript.origin or "ntc-templates" in transcript.origin, name


@on(NAMES)
async def test_the_librarys_prompts_and_login_reach_the_read_level(sim):
    client = await open_cli(sim, sim.transcript.family)
    await client.close()


@on(NAMES)
async def test_setup_then_a_read_command_and_its_abbreviation(sim):
    name = sim.transcript.family
    family = FAMILIES[name]
    client = await open_cli(sim, name)
    for line in family.spec.setup:
        assert not family.error_lines(await command(client, family, line)), line
    full, short, expected = READS[name]
    output = await command(client, family, full)
    assert expected in output and not family.error_lines(output)
    assert expected in await command(client, family, short)
    await client.close()


@on(NAMES)
async def test_an_unknown_command_gets_the_vendors_error_line(sim):
    name = sim.transcript.family
    family = FAMILIES[name]
    client = await open_cli(sim, name)
    prompt = client.transcript.split("\n")[-1]  # the prompt's last line, where the typed line goes
    output = await command(client, family, "/frobnicate now" if name == "routeros" else "frobnicate now")
    assert family.error_lines(output), output
    if name in ("junos", "iosxr", "nxos", "vrp"):  # the caret stands under the offending word
        caret = next(line for line in output.split("\n") if line.strip() == "^")
        assert caret.index("^") == len(prompt), (caret, prompt)
    await client.close()


@on(sorted(LONG))
async def test_long_output_stops_at_the_vendors_pager_until_a_key(sim):
    name = sim.transcript.family
    family = FAMILIES[name]
    pager = re.compile(family.spec.pager or "(?!)")
    client = await open_cli(sim, name)
    client.line(LONG[name])
    first = await client.until(pager)  # paging is on until the setup turns it off
    client.send(" ")
    rest = await client.until(re.compile(f"{pager.pattern}|{prompt_regex(family).pattern}", re.MULTILINE | re.IGNORECASE))
    assert first.count("\n") >= sim.transcript.page_lines and rest
    while pager.search(rest.split("\n")[-1]):
        client.send("q")  # q stops the output at once
        rest = await read_to_prompt(client, family)
    for line in family.spec.setup:
        await command(client, family, line)
    whole = await command(client, family, LONG[name])  # answering pages where nothing turns paging off
    assert whole.count("\n") > sim.transcript.page_lines
    assert bool(pager.search(whole)) is not bool(family.spec.setup)  # FortiOS's is answered, not turned off
    await client.close()


@on(NAMES)
async def test_configure_as_the_library_says_commit_and_read_it_back(sim):
    name = sim.transcript.family
    family = FAMILIES[name]
    spec = family.spec
    client = await open_cli(sim, name)
    line, show, expected = CONFIG[name]
    if name == "fortios":  # a config block, applied when it ends
        for step in ("config system interface", "edit port1"):
            await command(client, family, step)
    if spec.config_level is not None:
        await climb_to_config(client, family)
        assert family.level_of(client.transcript).name == spec.config_level
    assert not family.error_lines(await command(client, family, line))
    if spec.commit is not None and not spec.commit.session:  # EOS and NX-OS commit only in a session
        assert not family.error_lines(await command(client, family, spec.commit.commit))
    if spec.config_level is not None:
        await command(client, family, family.level(spec.config_level).deescalate)
        assert family.level_of(client.transcript).name == spec.read_level
    assert expected in await command(client, family, show)
    await client.close()


# (EOS's commit timer belongs to its configuration sessions, which the transcript does not replay.)
CONFIRMED = [name for name in NAMES if (commit := FAMILIES[name].spec.commit) and commit.confirmed and not commit.session]


@on(CONFIRMED)
async def test_a_confirmed_commit_not_confirmed_in_time_rolls_back_by_itself(sim):
    name = sim.transcript.family
    family = FAMILIES[name]
    commit = family.spec.commit
    client = await open_cli(sim, name)
    line, _show, expected = CONFIG[name]
    await climb_to_config(client, family)
    await command(client, family, line)
    client.line(commit.confirmed_command(max(commit.min_seconds, 60)))
    dialogs = "|".join(f"(?:{d.prompt})" for d in family.spec.dialogs)
    while True:  # VyOS asks before it starts the timer: the family's answer
        text = await client.until(re.compile(f"{dialogs + '|' if dialogs else ''}(?:{prompt_regex(family).pattern})",
                                             re.MULTILINE | re.IGNORECASE))
        dialog = next((d for d in family.spec.dialogs if re.search(d.prompt, text)), None)
        if dialog is None:
            break
        client.line(dialog.answer)
    assert any(expected in entry for entry in sim.device.running)
    deadline = asyncio.get_running_loop().time() + 60
    while "rolled back" not in sim.device.events:  # the device's own timer; nothing is typed meanwhile
        assert asyncio.get_running_loop().time() < deadline, sim.device.events
        await asyncio.sleep(0.05)
    assert not any(expected in entry for entry in sim.device.running)
    await client.close()


@on(["junos", "iosxr", "vrp"])
async def test_leaving_config_with_uncommitted_changes_asks_and_the_familys_answer_discards(sim):
    name = sim.transcript.family
    family = FAMILIES[name]
    client = await open_cli(sim, name)
    await climb_to_config(client, family)
    line, _show, _expected = CONFIG[name]
    await command(client, family, line)
    client.line(family.level(family.spec.config_level).deescalate)
    (dialog,) = family.spec.dialogs
    await client.until(re.compile(dialog.prompt))
    client.line(dialog.answer)
    await read_to_prompt(client, family)
    assert family.level_of(client.transcript).name == family.spec.read_level
    assert "discarded" in sim.device.events and not sim.device.running
    await client.close()


@on(["junos", "vyos", "routeros"])
async def test_the_interrupt_key_stops_a_command_that_never_ends(sim):
    name = sim.transcript.family
    family = FAMILIES[name]
    client = await open_cli(sim, name)
    client.line("/ping 10.0.0.2" if name == "routeros" else "ping 10.0.0.2")
    await client.until(re.compile(r"(?:64 bytes from|56  64).*\n(?:.*\n){2}"))  # it keeps going
    client.send(family.spec.interrupt)
    await read_to_prompt(client, family)
    assert "^C" in client.transcript
    await client.close()


@on(["eos"])
async def test_ambiguous_and_incomplete_words_and_two_consoles_share_one_device(sim):
    family = FAMILIES["eos"]
    first, second = await open_cli(sim, "eos"), await open_cli(sim, "eos")
    assert "% Ambiguous command" in await command(first, family, "e")  # enable, end
    assert "% Incomplete command" in await command(first, family, "show ip")
    for step in ("configure terminal", "hostname shared1", "end"):
        await command(first, family, step)
    assert "hostname shared1" in await command(second, family, "show running-config")
    await command(second, family, "disable")  # user exec, as scrapli recorded it
    assert "% Invalid input (privileged mode required)" in await command(second, family, "configure terminal")
    await first.close()
    await second.close()


@on(["routeros"])
async def test_routeros_echoes_twice_and_reads_both_path_forms(sim):
    family = FAMILIES["routeros"]
    client = await open_cli(sim, "routeros")
    slashes = await command(client, family, "/ip/address/print")
    spaces = await command(client, family, "/ip address print")
    assert slashes == spaces and "1.2.3.6/30" in spaces
    assert client.transcript.count("/ip address print") == 2  # the console prints the line it read again
    assert sim.received[-1] == "/ip address print"
    await client.close()


@on(["fortios"])
async def test_fortios_blocks_change_the_prompts_context_and_apply_at_end(sim):
    family = FAMILIES["fortios"]
    client = await open_cli(sim, "fortios")
    await command(client, family, "config system interface")
    assert client.transcript.rstrip().endswith("FGT-VM (interface) #")
    await command(client, family, "edit port1")
    assert client.transcript.rstrip().endswith("FGT-VM (port1) #")
    await command(client, family, "set ip 10.9.9.9 255.255.255.0")
    await command(client, family, "abort")  # leaves the block unsaved
    assert not sim.device.running and family.level_of(client.transcript).name == "exec"
    error = await command(client, family, "set ip 10.9.9.9 255.255.255.0")  # outside a block: not a command
    assert family.error_lines(error)
    await client.close()
