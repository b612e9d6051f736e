"""Cisco NX-OS (NX-OSv, NX-OSv 9000): scrapli's ``cisco_nxos`` platform."""

from ..modes import Commit
from .model import FamilySpec, Library

_ON_OPEN = "scrapli.driver.core.cisco_nxos.async_driver"

SPEC = FamilySpec(
    name="nxos",
    title="Cisco NX-OS",
    library=Library("cisco_nxos", community=False, on_open="nxos_on_open", driver_class="AsyncNXOSDriver"),
    read_level="privilege_exec",
    config_level="configuration",
    setup=("terminal length 0", "terminal width 511"),
    pager=r" ?--More-- ?",
    # Plain config mode applies each line at once; a session holds them until commit. NX-OS has
    # no confirmed commit: a checkpoint and 'rollback running-config checkpoint' are its undo.
    commit=Commit(commit="commit", abort="abort", session="configure session {name}"),
    shell_escapes=("run bash", "bash", "guestshell", "python", "tclsh"),
    json_suffix=" | json",
    checks=((_ON_OPEN, "terminal length 0"), (_ON_OPEN, "terminal width 511"), (_ON_OPEN, '"abort"')),
    sources={
        "levels": "scrapli/driver/core/cisco_nxos/base_driver.py PRIVS (exec, privilege_exec, configuration, "
                  "tclsh), FAILED_WHEN_CONTAINS",
        "setup": "scrapli/driver/core/cisco_nxos/async_driver.py nxos_on_open",
        "commit": "scrapli NX-OS configuration sessions (base_driver._create_configuration_session, "
                  "async_driver._abort_config)",
        "shell_escapes": "scrapli's tclsh level; NX-OS manual: run bash, guestshell, python",
        "json_suffix": "NX-OS '| json'",
    },
)
