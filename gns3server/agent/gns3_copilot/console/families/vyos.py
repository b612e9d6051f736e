"""VyOS: scrapli-community's ``vyos_vyos`` platform (op and configuration mode are bash)."""

from ..modes import Commit
from .model import Dialog, FamilySpec, Library

_ON_OPEN = "scrapli_community.vyos.vyos.async_driver"
_NETMIKO = "netmiko.vyos.vyos_ssh"

SPEC = FamilySpec(
    name="vyos",
    title="VyOS",
    library=Library("vyos_vyos", community=True, on_open="default_async_on_open"),
    read_level="privilege_exec",
    config_level="configuration",
    setup=("set terminal length 0", "stty cols 100000"),
    commit=Commit(
        commit="commit",
        confirmed="commit-confirm {minutes}",
        confirm="confirm",
        abort="exit discard",
        check="compare",
    ),
    dialogs=(Dialog(r"Proceed\? \[confirm\]", "y", "commit-confirm asks before it starts the timer"),),
    shell_escapes=("any Linux command (op mode is bash)", "sudo su"),
    checks=(
        (_ON_OPEN, "stty cols 100000"), (_NETMIKO, "set terminal length 0"), (_NETMIKO, '"exit discard"'),
        (_NETMIKO, '"commit"'),
    ),
    sources={
        "levels": "scrapli_community/vyos/vyos/vyos.py DEFAULT_PRIVILEGE_LEVELS ($ op mode, # configure / exit), "
                  "failed_when_contains, comms_return_char",
        "setup": "netmiko/vyos/vyos_ssh.py session_preparation (set terminal length 0); "
                 "scrapli_community/vyos/vyos/async_driver.py default_async_on_open (stty cols 100000)",
        "commit": "netmiko/vyos/vyos_ssh.py (commit, exit discard); VyOS documentation: commit-confirm <minutes>, "
                  "confirm",
    },
)
