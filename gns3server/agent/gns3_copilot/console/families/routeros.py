"""MikroTik RouterOS (CHR and the RouterBOARD appliances): scrapli-community's ``mikrotik_routeros``."""

from ..modes import SafeMode
from .model import Dialog, FamilySpec, Library, Login

_DRIVER = "scrapli_community.mikrotik.routeros.sync_driver"

SPEC = FamilySpec(
    name="routeros",
    title="MikroTik RouterOS",
    library=Library("mikrotik_routeros", community=True),
    read_level="exec",
    # Every command applies at once, typed as an absolute menu path; safe mode undoes the
    # changes made since it was entered if the session is lost.
    config_level=None,
    errors=("bad command name", "syntax error", "expected end of command", "no such item", "failure:",
            "invalid value", "input does not match any value"),
    pager=r"-- \[Q quit\|D dump[^\]]*\]",
    login=Login(
        # Console login options: no colours, a 'dumb' terminal, no terminal detection, 511
        # columns and 4098 rows (no paging).
        username_suffix="+cet511w4098h",
        after=(Dialog(r"Do you want to see the software license\? \[Y/n\]:", "n", "the first login asks once"),),
    ),
    echo_twice=True,
    # Ctrl-X takes safe mode ("<SAFE>" replaces the prompt's ">") and, again, releases it keeping
    # the changes; Ctrl-D ends the session undoing them.
    safe_mode=SafeMode(key="\x18", undo="\x04", marker="<SAFE>"),
    textfsm_platform="mikrotik_routeros",
    checks=((_DRIVER, '"+cet511w4098h"'), (_DRIVER, "echoes the prompt/pattern twice")),
    sources={
        "levels": "scrapli_community/mikrotik/routeros/mikrotik_routeros.py SCRAPLI_PLATFORM comms_prompt_pattern, "
                  "comms_return_char (CR LF)",
        "login": "scrapli_community/mikrotik/routeros/sync_driver.py MikrotikRouterOSDriver (username +cet511w4098h, "
                 "after MikroTik's console login process); the licence question: RouterOS first login",
        "echo_twice": "scrapli_community/mikrotik/routeros/sync_driver.py send_command (the command is echoed twice)",
        "safe_mode": "RouterOS manual, Console: Safe Mode (Ctrl-X takes it, '[Safe Mode taken]', the prompt "
                     "ends in <SAFE>; Ctrl-X again releases it; exiting the session by Ctrl-D undoes the changes)",
        "errors": "RouterOS console messages",
        "textfsm_platform": "ntc-templates (mikrotik_routeros templates)",
    },
)
