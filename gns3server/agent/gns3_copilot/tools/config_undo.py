"""What undoes a configuration change on a device, from what the device said before (and after) it.

Fault injection changes devices on purpose; to revert such a change the
copilot must know what it replaced. Before the configuration runs, the console
tool asks the device (read-only, through the policy and the audit) for the
state the commands can touch (the baseline), and this module turns that answer
into the commands that put it back. Only changes understood completely are
revertible: any other command in the batch, or a state that cannot be read
back exactly (e.g. an address leased by DHCP), leaves the fault to be undone by
hand, which the revert route says.

Each CLI family has its planner. Where the device prints its whole
configuration, the undo is computed from the baseline and a second capture made
after the change, by a maintained library: the IOS family (Cisco IOS, FRR's
vtysh) from ``show running-config`` with hier_config (``ios_rollback``), any
configuration command. Elsewhere it is the recorded inverse of the commands
understood: VPCS addresses (``ip ADDRESS[/MASK] [GATEWAY]``, ``ip dns``, ``ip
domain``, ``ip dhcp``, ``clear ip``), read back with ``show ip`` (here); Linux
links, IPv4 addresses and routes changed with iproute2 (``ip link set``, ``ip
addr``, ``ip route``), read back with ``ip -o ... show`` (``linux_undo``).

:func:`with_undo` runs a change between its captures; every way a change is made
(fault injection, a verified change) uses it, with the caller's read-only runner,
so the captures pass the same policy and audit as the change. A rollback computed
from two captures is exact only from the configuration it was computed on:
the undo records that state (``Undo.expects``, as fingerprints), :func:`holds`
tells, before the undo runs, whether the device is still in it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

from . import ios_rollback, linux_undo

R = TypeVar("R")
Read = Callable[[list[str]], Awaitable[list[str] | None]]
"""Runs read-only commands on the device (through the policy and the audit): their outputs, or None
when they did not all succeed."""

RUNNING_CONFIG = ("show running-config",)
IOS_FAMILY = ("ios", "frr")
"""Drivers whose devices print their whole configuration the IOS way (``ios_rollback``)."""

VPCS_SNAPSHOT = ("show ip",)
_ADDRESS = re.compile(r"^\d{1,3}(\.\d{1,3}){3}(/\d{1,2})?$")
_FIELD = re.compile(r"^([A-Z/ :]+?)\s*:\s*(.*)$")
_DOMAIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]{0,252}$")


@dataclass(frozen=True)
class UndoPlan:
    """The read-only commands to run before the change (``snapshot``), or why there are none.

    ``restore`` turns the snapshot's outputs, in order, into the commands that put
    the device back (None when the answers cannot be restored exactly): the recorded
    inverse. ``rollback`` instead takes the snapshot's outputs before and after the
    change (the snapshot is read again once the change ran) and computes the way back
    (raising ValueError when there is none); ``fingerprint`` digests a capture, so
    that the device can be checked later to still hold the state the rollback was
    computed from. Both are CPU work on whole configurations: they run in a worker
    thread.
    """

    snapshot: tuple[str, ...] = ()
    reason: str = ""
    restore: Callable[[Sequence[str]], list[str] | None] | None = None
    rollback: Callable[[Sequence[str], Sequence[str]], list[str]] | None = None
    fingerprint: Callable[[Sequence[str]], str] | None = None


@dataclass(frozen=True)
class Undo:
    """How a change made by :func:`with_undo` is undone: ``commands``, or ``reason`` why not.

    ``before`` and ``after`` are the captures (the snapshot's outputs) it was computed
    from, for whoever shows or checks the change (``after`` only when it was read).
    ``expects``, for a computed rollback: what the device must still hold for the
    commands to be exact (``after``, a fingerprint of the capture after the change),
    what it held before (``before``: nothing left to undo), and the ``command`` that
    reads it (see :func:`holds`).
    """

    commands: list[str] | None
    reason: str = ""
    before: tuple[str, ...] | None = None
    after: tuple[str, ...] | None = None
    expects: dict[str, str] | None = None


def holds(expects: Mapping[str, str], output: str) -> Literal["after", "before", "other"]:
    """Which of an :class:`Undo`'s ``expects`` states ``output`` (its command's answer, read now) shows.

    CPU work on a whole configuration: call it in a worker thread.
    """
    now = ios_rollback.fingerprint(output)
    if now and now == expects.get("after"):
        return "after"
    if now and now == expects.get("before"):
        return "before"
    return "other"


def plan(driver: str, commands: Sequence[str]) -> UndoPlan:
    """Whether a batch of configuration commands can be undone, and what to read first."""
    if driver in IOS_FAMILY:
        return UndoPlan(snapshot=RUNNING_CONFIG, rollback=lambda before, after: ios_rollback.rollback(before[0], after[0]),
                        fingerprint=lambda outputs: ios_rollback.fingerprint(outputs[0]))
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


async def with_undo(plan: UndoPlan, read: Read, change: Callable[[], Awaitable[R]],
                    sent: Callable[[R], bool]) -> tuple[R, Undo]:
    """Run ``change`` between the plan's captures; its result and how to undo it.

    ``read`` runs the snapshot (read-only) before and, for a computed rollback, after
    the change; ``sent(result)`` says whether the change reached the device (a batch
    the policy refused sent nothing: there is nothing to undo).
    """
    before = None
    if plan.snapshot and (plan.restore or plan.rollback):
        outputs = await read(list(plan.snapshot))
        before = tuple(outputs) if outputs is not None else None
    result = await change()
    if not sent(result):
        return result, Undo(None, "nothing was changed", before)
    if before is None:
        return result, Undo(None, plan.reason or "the previous settings could not be read")
    if plan.restore is not None:
        restored = plan.restore(before)
        return result, Undo(restored, "" if restored is not None else "the previous settings cannot be restored exactly",
                            before)
    assert plan.rollback is not None
    outputs = await read(list(plan.snapshot))
    if outputs is None:
        return result, Undo(None, "the settings after the change could not be read", before)
    return result, await asyncio.to_thread(_computed, plan, before, tuple(outputs))


def _computed(plan: UndoPlan, before: tuple[str, ...], after: tuple[str, ...]) -> Undo:
    """The rollback between two captures, and the state it applies to (in a worker thread)."""
    assert plan.rollback is not None
    try:
        commands = plan.rollback(before, after)
    except ValueError as exc:  # ios_rollback.NoRollback: not configurations, or no change
        return Undo(None, str(exc), before, after)
    expects = None
    if plan.fingerprint is not None:
        expects = {"command": plan.snapshot[0], "before": plan.fingerprint(before), "after": plan.fingerprint(after)}
    return Undo(commands, "", before, after, expects)


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
