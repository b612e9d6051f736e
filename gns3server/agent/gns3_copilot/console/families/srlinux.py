"""Nokia SR Linux: scrapli-community's ``nokia_srlinux`` platform."""

from ..modes import Commit
from .model import FamilySpec, Library

_ON_OPEN = "scrapli_community.nokia.srlinux.async_driver"
_NETMIKO = "netmiko.nokia.nokia_srl"

SPEC = FamilySpec(
    name="srlinux",
    title="Nokia SR Linux",
    library=Library("nokia_srlinux", community=True, on_open="default_async_on_open"),
    read_level="exec",
    config_level="configuration",
    setup=("environment cli-engine type basic", "environment complete-on-space false"),
    errors=("Error:", "Parsing error"),
    commit=Commit(
        commit="commit stay",
        confirmed="commit confirmed timeout {seconds}",
        confirm="tools system configuration confirmed-accept",
        abort="discard now",
        check="commit validate",
    ),
    shell_escapes=("bash", "bash network-instance <name>"),
    json_suffix=" | as json",
    checks=(
        (_ON_OPEN, "environment cli-engine type basic"), (_ON_OPEN, "environment complete-on-space false"),
        (_NETMIKO, '"commit stay"'), (_NETMIKO, '"discard stay"'),
    ),
    sources={
        "levels": "scrapli_community/nokia/srlinux/nokia_srlinux.py DEFAULT_PRIVILEGE_LEVELS (exec, configuration: "
                  "enter candidate exclusive / discard now), failed_when_contains",
        "setup": "scrapli_community/nokia/srlinux/async_driver.py default_async_on_open",
        "commit": "netmiko/nokia/nokia_srl.py commit() (commit stay); confirmed commits: SR Linux "
                  "'commit confirmed timeout <seconds>' and 'tools system configuration confirmed-accept' "
                  "(napalm-srlinux guide, commit confirm)",
        "json_suffix": "SR Linux '| as json'",
    },
)
