"""What a change transaction does per CLI family, as data: what it captures, how it diffs, how it goes back.

A :class:`ChangeProfile` per family (keyed by the console driver's name); a family
adds its own by adding an entry (``docs/changes.md``, "Adding a family"):

* ``config``: the read-only commands whose answers are the device's configuration
  (what a backup holds and the configuration diff compares);
* ``noise``: lines of those answers that are not configuration (a timestamp, a
  byte count), left out of diffs and fingerprints;
* ``state``: the aspects of its state captured around a change (``checks.families``
  says how each is read);
* ``rollback``: how a change is undone: ``computed`` (from the configuration before
  and after, ``tools.ios_rollback``: any command), ``inverse`` (the recorded inverse
  of the commands understood, ``tools.config_undo``) or ``none``;
* ``restore``: how a backup is put back: ``computed`` (from the configuration now to
  the backup's), ``inverse`` (the backup's values typed again) or ``none``.

A family with no profile gets :data:`UNKNOWN`: its changes are applied and
audited, nothing is captured, and the result says so.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

__all__ = ["PROFILES", "UNKNOWN", "ChangeProfile", "profile_for"]

Way = Literal["computed", "inverse", "none"]

# What IOS and vtysh print around the configuration: not configuration.
_IOS_NOISE = (
    re.compile(r"^Building configuration"),
    re.compile(r"^Current configuration"),
    re.compile(r"^! (?:Last configuration change|NVRAM config last updated)"),
    re.compile(r"^ntp clock-period "),
    re.compile(r"^\s*!\s*$"),
    re.compile(r"^\s*$"),
)


@dataclass(frozen=True)
class ChangeProfile:
    family: str
    config: tuple[str, ...]
    state: tuple[str, ...]
    rollback: Way
    restore: Way
    noise: tuple[re.Pattern[str], ...] = ()
    note: str = ""
    """What the family's support lacks, said in results (e.g. VPCS keeps no configuration besides its addresses)."""
    volatile: tuple[re.Pattern[str], ...] = ()
    """Parts of configuration lines that change by themselves (an address's remaining lifetime): not compared."""

    def configuration(self, text: str) -> list[str]:
        """The configuration lines of one capture (noise left out, trailing blanks stripped)."""
        return [line.rstrip() for line in text.splitlines() if not any(p.search(line) for p in self.noise)]

    def digest(self, captures: Sequence[str]) -> str:
        """A fingerprint of the configuration ``captures`` (the ``config`` commands' answers) hold, to tell
        later whether a device still holds it: its configuration lines, ``volatile`` parts left out."""
        lines = [line for capture in captures for line in self.configuration(capture)]
        for pattern in self.volatile:
            lines = [pattern.sub("", line) for line in lines]
        return "sha256:" + hashlib.sha256("\n".join(lines).encode()).hexdigest()


IOS = ChangeProfile("ios", ("show running-config",), ("interfaces", "ospf", "bgp", "routes"), "computed", "computed",
                    _IOS_NOISE)
FRR = ChangeProfile("frr", ("show running-config",), ("interfaces", "ospf", "bgp", "routes"), "computed", "computed",
                    (*_IOS_NOISE, re.compile(r"^frr (?:version|defaults) ")))
VPCS = ChangeProfile(
    "vpcs", ("show ip",), ("interfaces", "routes"), "inverse", "inverse",
    (re.compile(r"^(?:LPORT|RHOST:PORT|MAC|MTU:?)\s*:"),),
    note="VPCS's configuration is its addressing (show ip); the rollback covers its address commands",
)
LINUX = ChangeProfile(
    "linux", ("ip -o link show", "ip -o -4 addr show", "ip -o -4 route show table main"), ("interfaces", "routes"),
    "inverse", "none",
    # Counters and lifetimes change by themselves.
    (re.compile(r"^\s*$"),),
    note="a Linux host's configuration is its links, addresses and routes; the rollback covers the iproute2 "
         "commands of docs/api.md, and a backup is kept to compare, not restored as a whole",
    volatile=(re.compile(r"\b(?:valid|preferred)_lft \S+"),),
)
UNKNOWN = ChangeProfile("unknown", (), (), "none", "none",
                        note="the copilot captures nothing around changes on this CLI family")

PROFILES: Mapping[str, ChangeProfile] = MappingProxyType({p.family: p for p in (IOS, FRR, VPCS, LINUX)})


def profile_for(family: str) -> ChangeProfile:
    return PROFILES.get(family, UNKNOWN)
