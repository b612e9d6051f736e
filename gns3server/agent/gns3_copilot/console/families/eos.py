"""Arista EOS (vEOS, cEOS): scrapli's ``arista_eos`` platform."""

from ..modes import Commit
from .model import FamilySpec, Library

_ON_OPEN = "scrapli.driver.core.arista_eos.async_driver"

SPEC = FamilySpec(
    name="eos",
    title="Arista EOS",
    library=Library("arista_eos", community=False, on_open="eos_on_open", driver_class="AsyncEOSDriver"),
    read_level="privilege_exec",
    config_level="configuration",
    setup=("terminal length 0", "terminal width 32767"),
    pager=r" ?--More-- ?",
    commit=Commit(
        commit="commit",
        confirmed="commit timer {hms}",
        confirm="commit",
        abort="abort",
        session="configure session {name}",
    ),
    shell_escapes=("bash", "bash timeout <seconds> <command>"),
    json_suffix=" | json",
    checks=((_ON_OPEN, "terminal length 0"), (_ON_OPEN, "terminal width 32767"), (_ON_OPEN, '"abort"')),
    sources={
        "levels": "scrapli/driver/core/arista_eos/base_driver.py PRIVS, FAILED_WHEN_CONTAINS",
        "setup": "scrapli/driver/core/arista_eos/async_driver.py eos_on_open",
        "commit": "configure session / commit / abort: scrapli's EOS configuration sessions "
                  "(base_driver._create_configuration_session, async_driver._abort_config); "
                  "commit timer hh:mm:ss (the session's rollback timer): Arista EOS manual, configuration sessions",
        "pager": "EOS pages like IOS (--More--); scrapli turns paging off instead",
        "json_suffix": "EOS '| json' (the output eAPI returns)",
        "shell_escapes": "EOS manual: bash",
    },
)
