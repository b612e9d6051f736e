"""CLI families read from the installed scrapli / scrapli-community, and our cited tables checked against it."""

from __future__ import annotations

import importlib
import inspect
import re
import subprocess
import sys
from dataclasses import replace
from importlib import metadata

import pytest

from gns3server.agent.gns3_copilot.console.families import (
    FAMILY_NAMES,
    SPECS,
    FamilyLibraryError,
    Library,
    load_families,
    load_family,
)

FAMILIES = load_families()

# Prompts from the libraries' own tests and recorded sessions (facts, not code):
# scrapli 2025.01.30 tests/test_data/mock_server_sessions/*.yaml (privilege_level_prompts) and
# scrapli_community tests/unit/<vendor>/<os>/test_*.py (test_default_prompt_patterns).
PROMPTS = [
    ("eos", "localhost>", "exec"),
    ("eos", "localhost#", "privilege_exec"),
    ("eos", "localhost(config)#", "configuration"),
    ("eos", "localhost(config-if-Et1)#", "configuration"),
    ("iosxr", "RP/0/RP0/CPU0:ios#", "privilege_exec"),
    ("iosxr", "RP/0/RP0/CPU0:ios(config)#", "configuration"),
    ("nxos", "switch#", "privilege_exec"),
    ("nxos", "switch(config)#", "configuration"),
    ("nxos", "switch-tcl#", "tclsh"),
    ("junos", "boxen> ", "exec"),
    ("junos", "[edit]\nboxen# ", "configuration"),
    ("junos", "{master:0}\nboxen> ", "exec"),
    ("junos", "root@:~ # ", "root_shell"),
    ("srlinux", "--{ running }--[  ]--\nA:srl#", "exec"),
    ("srlinux", "--{ + running }--[  ]--\nA:srl#", "exec"),
    ("srlinux", "--{ candidate shared-exclusive default }--[ platform ]--\nA:srl#", "configuration"),
    ("srlinux", "--{ [FACTORY] * candidate private private-root }--[  ]--\nA:r2# ", "configuration"),
    ("routeros", "[username@HOSTNAME] > ", "exec"),
    ("routeros", "[username@SCRAPLI-TEST-ROUTER] /system console> ", "exec"),
    ("vrp", "<SCRAPLI_HUAWEI-VRP_TEST_SW1>", "privilege_exec"),
    ("vrp", "[SCRAPLI_HUAWEI-VRP_TEST_SW1-GigabitEthernet0/0/1]", "configuration"),
    ("vrp", "[~HUAWEI]", "configuration"),
    ("vyos", "vyos@Vy-31:~$", "privilege_exec"),
    ("vyos", "vyos@Vy-31#", "configuration"),
    ("fortios", "SCRAPLI-FORTIGATE # ", "exec"),
    ("fortios", "SCRAPLI-FORTIGATE (interface) # ", "exec"),
    ("cumulus", "user@scrapli1-r01-test-location1:mgmt-vrf:~$", "exec"),
    ("cumulus", "root@SCRAPLI1-R01-TEST-LOCATION1:MGMT-VRF:~#", "configuration"),
    ("cumulus", "cumulus@switch:~$", "exec_no_vrf"),
]


def test_every_family_is_read_from_the_pinned_library():
    assert set(FAMILIES) == set(FAMILY_NAMES) == set(SPECS)
    assert metadata.version("scrapli") == metadata.version("scrapli-community") == "2025.1.30"
    for family in FAMILIES.values():
        assert family.library_version.endswith("2025.1.30")
        assert family.levels and family.errors, family.name
        names = [level.name for level in family.levels]
        assert family.spec.read_level in names
        assert family.spec.config_level is None or family.spec.config_level in names


@pytest.mark.parametrize(("name", "prompt", "level"), PROMPTS)
def test_the_libraries_published_prompts_are_recognised_at_their_level(name, prompt, level):
    family = FAMILIES[name]
    output = "some output\n" + prompt
    assert family.level_of(output).name == level
    # As our consoles deliver it: CR LF line ends, colour codes around the prompt.
    raw = "some output\r\n" + prompt.replace("\n", "\r\n")
    assert family.level_of(raw).name == level
    assert family.level_of("\x1b[1m" + raw + "\x1b[0m").name == level
    # The driver built from the family sees the prompt of every level its sessions move between at
    # the end of raw console output, and its level there (the shells it never drives are left out).
    driver = family.to_driver()
    if level in {lv.name for lv in driver.levels}:
        assert driver.prompt.search(raw)
        assert driver.level_of(raw).name == level


@pytest.mark.parametrize(("name", "text"), [
    ("eos", "localhost# show running-config\n"),  # a prompt-like line followed by output is not a prompt
    ("fortios", "somewhere I have a prompt like: HOSTNAME $ and some other text\n"),
    ("junos", "boxen> show version\nModel: srx4100"),
])
def test_a_prompt_not_at_the_end_is_not_a_prompt(name, text):
    assert FAMILIES[name].level_of(text) is None


def test_levels_come_from_the_library_as_defined_there():
    """Escalate/deescalate commands and patterns are scrapli's own, not copies."""
    privs = importlib.import_module("scrapli.driver.core.juniper_junos.base_driver").PRIVS
    junos = FAMILIES["junos"]
    assert junos.level("configuration").escalate == privs["configuration"].escalate == "configure"
    assert junos.level("configuration").deescalate == "exit configuration-mode"
    assert junos.level("configuration").pattern == privs["configuration"].pattern
    srl = importlib.import_module("scrapli_community.nokia.srlinux.nokia_srlinux").DEFAULT_PRIVILEGE_LEVELS
    assert FAMILIES["srlinux"].level("configuration").escalate == srl["configuration"].escalate
    assert FAMILIES["eos"].escalation("configuration") == ("enable", "configure terminal")
    assert FAMILIES["vrp"].escalation("configuration") == ("system-view",)
    assert "% Invalid input" in FAMILIES["eos"].errors and "syntax error" in FAMILIES["junos"].errors
    assert FAMILIES["routeros"].return_char == "\r\n"
    assert FAMILIES["eos"].structured.textfsm_platform == "arista_eos"
    assert FAMILIES["vrp"].structured.textfsm_platform == "huawei_vrp"


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_facts_copied_from_library_code_are_still_there(name):
    """Paging-off commands live in the platforms' on_open functions (code, not data): each one
    we copied, and each other fact taken from library code, must still be in the installed source."""
    spec = SPECS[name]
    checks = list(spec.checks)
    if spec.library.on_open and spec.setup and name != "cumulus":
        module = (f"scrapli.driver.core.{spec.library.platform}.async_driver" if not spec.library.community
                  else f"scrapli_community.{spec.library.platform.replace('_', '.')}.async_driver")
        on_open = inspect.getsource(getattr(importlib.import_module(module), spec.library.on_open))
        in_netmiko = {literal for mod, literal in spec.checks if mod.startswith("netmiko")}
        for command in spec.setup:
            assert command in on_open or command in in_netmiko, (name, command)
    for module, literal in checks:
        assert literal in inspect.getsource(importlib.import_module(module)), (name, module, literal)


def test_a_library_without_the_platform_is_a_clear_error():
    spec = replace(SPECS["vyos"], library=Library("vyos_nosuchos", community=True))
    with pytest.raises(FamilyLibraryError, match="vyos_nosuchos"):
        load_family(spec)
    spec = replace(SPECS["eos"], config_level="no_such_level")
    with pytest.raises(FamilyLibraryError, match="no_such_level"):
        load_family(spec)


def test_unknown_names_are_a_value_error_naming_the_field():
    with pytest.raises(ValueError, match="names"):
        load_families(("eos", "cisco"))


def test_confirmed_commits_in_each_clis_unit():
    commits = {name: family.spec.commit for name, family in FAMILIES.items()}
    assert commits["junos"].confirmed_command(300) == "commit confirmed 5"
    assert commits["junos"].confirmed_command(301) == "commit confirmed 6"  # minutes, rounded up
    assert commits["iosxr"].confirmed_command(120) == "commit confirmed 120"
    assert commits["vyos"].confirmed_command(600) == "commit-confirm 10"
    assert commits["srlinux"].confirmed_command(90) == "commit confirmed timeout 90"
    assert commits["eos"].confirmed_command(3725) == "commit timer 01:02:05"
    assert commits["vrp"].confirmed_command(120) == "commit trial 120"
    with pytest.raises(ValueError, match="seconds"):
        commits["iosxr"].confirmed_command(10)  # XR takes 30 s at least
    with pytest.raises(ValueError, match="seconds"):
        commits["nxos"].confirmed_command(60)  # NX-OS has none


def test_the_driver_of_a_family_enters_config_as_the_library_says():
    driver = FAMILIES["junos"].to_driver()
    assert driver.name == "junos"
    assert driver.setup == ("set cli screen-length 0", "set cli screen-width 511", "set cli complete-on-space off")
    assert driver.config_enter == ("configure",) and driver.config_exit == ("exit configuration-mode",)
    assert driver.error_lines("foo\nsyntax error, expecting <command>.\n") == ["syntax error, expecting <command>."]
    assert driver.pagers[0].pattern.search("---(more 45%)---")
    eos = FAMILIES["eos"].to_driver()
    assert eos.enable == ("enable",) and eos.user_prompt.search("localhost>")
    assert eos.config_prompt.search("localhost(config)#")


def test_error_lines():
    assert FAMILIES["vrp"].error_lines("x\r\nError: Unrecognized command found at '^' position.\r\n") == [
        "Error: Unrecognized command found at '^' position."
    ]
    assert FAMILIES["routeros"].error_lines("bad command name foo (line 1 column 1)") == [
        "bad command name foo (line 1 column 1)"
    ]


def test_importing_the_families_does_no_work():
    """scrapli is imported by load_families, not by importing our package (no work at import time)."""
    code = ("import sys, gns3server.agent.gns3_copilot.console.families as f; "
            "print(any(m.split('.')[0] in ('scrapli', 'scrapli_community') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "False"


def test_prompt_patterns_are_the_librarys_with_only_cr_tolerance_added():
    for family in FAMILIES.values():
        for level in family.levels:
            if level.name in family.spec.extra_prompts:
                continue
            assert re.sub(r"\\r\*", "", level.prompt.pattern).startswith("(?:" + level.pattern + ")"), level.name
