"""Huawei VRP (AR1000v, NE40E, CE12800, USG6000v): scrapli-community's ``huawei_vrp``."""

from ..modes import Commit
from .model import Dialog, FamilySpec, Library

_ON_OPEN = "scrapli_community.huawei.vrp.async_driver"
_NETMIKO = "netmiko.huawei.huawei"

SPEC = FamilySpec(
    name="vrp",
    title="Huawei VRP",
    library=Library("huawei_vrp", community=True, on_open="default_async_on_open"),
    read_level="privilege_exec",
    config_level="configuration",
    setup=("screen-length 0 temporary",),
    errors=("Unrecognized command", "Incomplete command", "Too many parameters", "Wrong parameter"),
    pager=r"-{2,} ?More ?-{2,}",
    # VRP8 (NE40E, CE) in two-stage mode; AR routers apply each line at once (commit is then unknown).
    commit=Commit(
        commit="commit",
        confirmed="commit trial {seconds}",
        confirm="commit",
        abort="abort trial",
        min_seconds=60,
        pending="The system will revert to previous configuration",
    ),
    dialogs=(Dialog(r"Uncommitted configurations found.*\[Y\(yes\)/N\(no\)/C\(cancel\)\]", "N",
                    "leaving the system view never commits what was not committed on purpose"),),
    checks=((_ON_OPEN, "screen-length 0 temporary"), (_NETMIKO, '"system-view"'), (_NETMIKO, '"return"')),
    sources={
        "levels": "scrapli_community/huawei/vrp/huawei_vrp.py DEFAULT_PRIVILEGE_LEVELS (<name> and [name], "
                  "system-view / quit), failed_when_contains",
        "setup": "scrapli_community/huawei/vrp/async_driver.py default_async_on_open",
        "commit": "Huawei NE40E/CE command reference: commit, commit trial <60-65535 s>, abort trial; netmiko "
                  "huawei.py commit()",
        "pager": "VRP '  ---- More ----'",
        "dialogs": "VRP8 two-stage mode, leaving the system view with uncommitted changes",
    },
)
