"""Cumulus Linux (Cumulus VX): scrapli-community's ``cumulus_linux`` platform, NVUE and NCLU."""

from ..modes import Commit
from .model import FamilySpec, Library

SPEC = FamilySpec(
    name="cumulus",
    title="Cumulus Linux",
    library=Library("cumulus_linux", community=True, on_open="default_async_on_open"),
    read_level="exec",
    # nv set / net add run as the logged-in user, typed as they are (the library's
    # configuration level is a root shell through sudo, which the policy refuses).
    config_level=None,
    setup=("export PAGER=cat SYSTEMD_PAGER=cat",),
    errors=("Error:", "command not found", "Invalid config"),
    commit=Commit(
        commit="nv config apply -y",
        confirmed="nv config apply --confirm {minutes} -y",
        abort="nv config detach",
        check="nv config diff",
    ),
    shell_escapes=("it is a shell", "sudo -i", "vtysh"),
    json_suffix=" -o json",
    # A switch without the management VRF prints user@host:~$ (the library's pattern wants
    # user@host:vrf:dir$).
    extra_prompts={"exec_no_vrf": r"^\S+@[^\s:]+:[^\s:]+\$\s*$"},
    sources={
        "levels": "scrapli_community/cumulus/linux/cumulus_linux.py DEFAULT_PRIVILEGE_LEVELS, failed_when_contains",
        "setup": "our linux driver's (console/drivers.py LINUX): no pager for systemctl, git, man",
        "commit": "NVIDIA NVUE command reference, Config Commands: nv config apply [-y] [--confirm <minutes>], "
                  "nv config detach, nv config diff; NCLU (Cumulus 3.x/4.x): net commit, net abort",
        "extra_prompts": "Cumulus Linux documentation examples (cumulus@switch:~$)",
        "json_suffix": "NVUE 'nv show ... -o json'",
    },
)
