"""Cisco IOS-XR (XRv, XRv 9000): scrapli's ``cisco_iosxr`` platform."""

from ..modes import Commit
from .model import Dialog, FamilySpec, Library

_ON_OPEN = "scrapli.driver.core.cisco_iosxr.async_driver"
_NETMIKO = "netmiko.cisco.cisco_xr"

SPEC = FamilySpec(
    name="iosxr",
    title="Cisco IOS-XR",
    library=Library("cisco_iosxr", community=False, on_open="iosxr_on_open", driver_class="AsyncIOSXRDriver"),
    read_level="privilege_exec",
    config_level="configuration",
    setup=("terminal length 0", "terminal width 512"),
    errors=("% Failed to commit",),
    pager=r" ?--More-- ?",
    commit=Commit(
        commit="commit",
        confirmed="commit confirmed {seconds}",
        confirm="commit",
        abort="abort",
        min_seconds=30,
    ),
    dialogs=(Dialog(r"Uncommitted changes found, commit them", "no",
                    "leaving configuration mode never commits what was not committed on purpose"),),
    shell_escapes=("run", "run <command>", "bash"),
    checks=(
        (_ON_OPEN, "terminal length 0"), (_ON_OPEN, "terminal width 512"), (_ON_OPEN, '"abort"'),
        (_NETMIKO, 'f"{command_string} confirmed {str(confirm_delay)}"'), (_NETMIKO, "Uncommitted"),
        (_NETMIKO, "% Failed to commit"),
    ),
    sources={
        "levels": "scrapli/driver/core/cisco_iosxr/base_driver.py PRIVS, FAILED_WHEN_CONTAINS",
        "setup": "scrapli/driver/core/cisco_iosxr/async_driver.py iosxr_on_open",
        "commit": "netmiko/cisco/cisco_xr.py commit() ('commit confirmed <seconds>'); scrapli _abort_config (abort); "
                  "IOS-XR: confirm with commit; the timer takes 30 to 65535 seconds",
        "dialogs": "netmiko/cisco/cisco_xr.py exit_config_mode (answers 'no' to Uncommitted changes)",
        "errors": "netmiko/cisco/cisco_xr.py commit() failed-commit message",
    },
)
