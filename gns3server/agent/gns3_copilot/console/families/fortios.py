"""Fortinet FortiOS (FortiGate VM): scrapli-community's ``fortinet_fortios`` platform."""

from ..modes import Commit
from .model import Dialog, FamilySpec, Library, Login

_DRIVER = "scrapli_community.fortinet.fortios.async_driver"

SPEC = FamilySpec(
    name="fortios",
    title="Fortinet FortiOS",
    library=Library("fortinet_fortios", community=True, on_open="default_async_on_open"),
    read_level="exec",
    # Configuration is typed as it is: config <table> / edit <entry> / set ... / next / end. The
    # block applies at end; abort leaves it unsaved.
    config_level=None,
    # scrapli and netmiko turn paging off by setting 'output standard' under 'config system
    # console', a change to the device's saved configuration (they set it back on close).
    # Pages are answered instead.
    setup=(),
    errors=("Unknown action", "Command fail", "command parse error", "entry not found", "value parse error"),
    pager=r"--More--",
    commit=Commit(commit="end", abort="abort", typed=True),
    login=Login(
        wake=(Dialog(r"\(Press 'a' to accept\):", "a", "a post-login banner waits for acceptance"),),
    ),
    shell_escapes=("execute shell", "fnsysctl <command>", "diagnose sys ..."),
    textfsm_platform="fortinet",
    checks=((_DRIVER, "(Press 'a' to accept):"), (_DRIVER, "set output standard"), (_DRIVER, '["abort", "end"]')),
    sources={
        "levels": "scrapli_community/fortinet/fortios/fortinet_fortios.py SCRAPLI_PLATFORM comms_prompt_pattern",
        "setup": "scrapli_community/fortinet/fortios/async_driver.py prepare_session (config system console / "
                 "set output standard / end): not used, see the comment",
        "commit": "scrapli_community/fortinet/fortios/async_driver.py _to_system (abort, end)",
        "login": "scrapli_community/fortinet/fortios/async_driver.py prepare_session ((Press 'a' to accept):)",
        "textfsm_platform": "ntc-templates (fortinet templates)",
    },
)
