"""What undoes a configuration change on a device, from what the device said before it.

Fault injection changes devices on purpose; to revert such a change the
copilot must know the value it replaced. Before an injected configuration runs,
the console tool asks the device (read-only, through the policy and the audit)
for the state the commands can touch, and this module turns that answer into
the commands that put it back. Only changes understood completely are
revertible: any other command in the batch, or a state that cannot be read
back exactly (e.g. an address leased by DHCP), leaves the fault to be undone by
hand, which the revert route says.

Each CLI family has its planner: VPCS addresses (``ip ADDRESS[/MASK] [GATEWAY]``,
``ip dns``, ``ip domain``, ``ip dhcp``, ``clear ip``), read back with ``show ip``
(here); Linux links, IPv4 addresses and routes changed with iproute2 (``ip link
set``, ``ip addr``, ``ip route``), read back with ``ip -o ... show``
(``linux_undo``). Cisco IOS devices have none (yet): their faults stay "undo it
by hand".
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from . import linux_undo

VPCS_SNAPSHOT = ("show ip",)
_ADDRESS = re.compile(r"^\d{1,3}(\.\d{1,3}){3}(/\d{1,2})?$")
_FIELD = re.compile(r"^([A-Z/ :]+?)\s*:\s*(.*)$")
_DOMAIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]{0,252}$")


@dataclass(frozen=True)
class UndoPlan:
    """The read-only commands to run before the change (``snapshot``), or why there are none.

    ``restore`` turns the snapshot's outputs, in order, into the commands that put
    the device back (None when the answers cannot be restored exactly).
    """

    snapshot: tuple[str, ...] = ()
    reason: str = ""
    restore: Callable[[Sequence[str]], list[str] | None] | None = None


def plan(driver: str, commands: Sequence[str]) -> UndoPlan:
    """Whether a batch of configuration commands can be undone, and what to read first."""
    if driver == "linux":
        planned = linux_undo.plan(commands)
        if isinstance(planned, str):
            return UndoPlan(reason=planned)
        return UndoPlan(snapshot=planned[0], restore=planned[1])
    if driver != "vpcs":
        return UndoPlan(reason=f"the copilot cannot undo configuration on {driver} devices")
    for command in commands:
        if not _vpcs_address_command(command):
            return UndoPlan(reason=f"the copilot cannot undo {command.strip()!r}")
    return UndoPlan(snapshot=VPCS_SNAPSHOT, restore=lambda outputs: vpcs_undo(outputs[0]))


def _vpcs_address_command(command: str) -> bool:
    words = command.lower().split()
    if words == ["clear", "ip"]:
        return True
    if len(words) < 2 or words[0] != "ip":
        return False
    return words[1] in ("dns", "dhcp", "domain") or bool(_ADDRESS.match(words[1]))


def vpcs_undo(show_ip: str) -> list[str] | None:
    """The VPCS commands that restore the addresses ``show ip`` printed; None if they cannot be known.

    ``clear ip`` first (it clears address, gateway, DNS, domain and DHCP), then what was there.
    """
    fields = {}
    for line in show_ip.splitlines():
        found = _FIELD.match(line.strip())
        if found:
            fields[found.group(1).strip()] = found.group(2).strip()
    if "IP/MASK" not in fields or "GATEWAY" not in fields or "DHCP SERVER" in fields:
        return None  # not a show ip answer, or a DHCP lease (not ours to pin)
    try:
        interface = ipaddress.IPv4Interface(fields["IP/MASK"])
        gateway = ipaddress.IPv4Address(fields["GATEWAY"])
        dns = [ipaddress.ip_address(d) for d in fields.get("DNS", "").split()]
    except ValueError:
        return None
    domain = fields.get("DOMAIN NAME", "")
    if domain and not _DOMAIN.match(domain):
        return None
    commands = ["clear ip"]
    if interface.ip != ipaddress.IPv4Address(0):
        commands.append(f"ip {interface.with_prefixlen}" + ("" if int(gateway) == 0 else f" {gateway}"))
    if dns:
        commands.append("ip dns " + " ".join(str(d) for d in dns[:2]))
    if domain:
        commands.append(f"ip domain {domain}")
    return commands
