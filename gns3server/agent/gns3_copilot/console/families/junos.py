"""Juniper Junos (vJunos, vMX, vSRX, vQFX): scrapli's ``juniper_junos`` platform."""

from ..modes import Commit
from .model import Dialog, FamilySpec, Library, Login

_ON_OPEN = "scrapli.driver.core.juniper_junos.async_driver"
_NETMIKO = "netmiko.juniper.juniper"
# scrapli's root_shell level (juniper_junos/base_driver.py): root logs in to a FreeBSD shell.
ROOT_SHELL = r"^.*root@(?:\S*:?\S*\s?)?[%\#]\s?$"

SPEC = FamilySpec(
    name="junos",
    title="Juniper Junos",
    library=Library("juniper_junos", community=False, on_open="junos_on_open", driver_class="AsyncJunosDriver"),
    read_level="exec",
    config_level="configuration",
    setup=("set cli screen-length 0", "set cli screen-width 511", "set cli complete-on-space off"),
    errors=("error:",),
    pager=r"---\(more(?: \d+%)?\)---",
    commit=Commit(
        commit="commit",
        confirmed="commit confirmed {minutes}",
        confirm="commit",
        abort="rollback 0",
        check="commit check",
        pending="commit confirmed will be automatically rolled back in",
    ),
    login=Login(after=(Dialog(ROOT_SHELL, "cli", "root logs in to the FreeBSD shell; cli starts the Junos CLI"),)),
    dialogs=(Dialog(r"Exit with uncommitted changes\? \[yes,no\]", "yes",
                    "leaving configuration mode after a rollback: nothing is left to keep"),),
    shell_escapes=("start shell", "start shell user root", "start shell sh", "request routing-engine login"),
    json_suffix=" | display json",
    checks=(
        (_ON_OPEN, "set cli screen-length 0"), (_ON_OPEN, "set cli screen-width 511"),
        (_ON_OPEN, "set cli complete-on-space off"), (_ON_OPEN, '"rollback 0"'),
        (_NETMIKO, "commit confirmed will be automatically rolled back in"), (_NETMIKO, '"commit confirmed "'),
        (_NETMIKO, '"commit check"'), (_NETMIKO, "Exit with uncommitted changes"),
    ),
    sources={
        "levels": "scrapli/driver/core/juniper_junos/base_driver.py PRIVS (exec, configuration, shell, root_shell), "
                  "FAILED_WHEN_CONTAINS",
        "setup": "scrapli/driver/core/juniper_junos/async_driver.py junos_on_open",
        "commit": "netmiko/juniper/juniper.py commit() (commit confirmed N, in minutes; commit check); "
                  "scrapli juniper_junos/async_driver.py _abort_config (rollback 0); "
                  "Juniper CLI guide: confirm with commit before the minutes are up",
        "pager": "scrapli tests/test_data/mock_server_sessions/juniper_junos.yaml (---(more)---)",
        "login": "GNS3 appliance juniper-vJunos-router.gns3a: 'Default user is root. No password is needed.'; "
                 "scrapli PRIVS root_shell",
        "dialogs": "netmiko/juniper/juniper.py exit_config_mode",
        "json_suffix": "Junos '| display json'",
    },
)
