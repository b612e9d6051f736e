"""CLI families as data: what each vendor's CLI prints and expects, borrowed from scrapli.

One module per family holds its :class:`FamilySpec`: the scrapli (2025.1.30) or
scrapli-community platform that knows the family's privilege levels, prompts,
escalate/deescalate commands and error strings, and the facts no library holds as
data (paging off, commit and confirmed commit, login dialogs, the shell escapes),
each citing where it came from. :func:`load_families` reads the installed library
and returns the families; it imports scrapli (about 150 ms): call it once, off the
event loop (``asyncio.to_thread``), and hand the result down. :func:`load_drivers` is
what the console tools use: the built-in drivers and one per family, built from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, get_args

from ..drivers import DRIVERS, Driver
from ..modes import Commit, Level
from . import cumulus, eos, fortios, iosxr, junos, nxos, routeros, srlinux, vrp, vyos
from .library import FamilyLibraryError, load_family, prompt_regex
from .model import Dialog, Family, FamilySpec, Library, Login, Structured

SPECS: Mapping[str, FamilySpec] = {
    spec.name: spec
    for spec in (eos.SPEC, junos.SPEC, iosxr.SPEC, nxos.SPEC, srlinux.SPEC, routeros.SPEC, vrp.SPEC, vyos.SPEC,
                 fortios.SPEC, cumulus.SPEC)
}
FAMILY_NAMES = tuple(SPECS)
DriverName = Literal["vpcs", "ios", "linux", "frr", "bird", "eos", "junos", "iosxr", "nxos", "srlinux", "routeros",
                     "vrp", "vyos", "fortios", "cumulus"]
"""A CLI family the console drives, as the tools and routes accept it (a test keeps it :data:`DRIVER_NAMES`)."""
DRIVER_NAMES: tuple[str, ...] = get_args(DriverName)
"""Every CLI family the console drives: the built-in drivers' and the vendor families'."""


def load_families(names: tuple[str, ...] = FAMILY_NAMES) -> dict[str, Family]:
    """The named families, read from the installed scrapli (blocking: call it in a thread)."""
    unknown = set(names) - set(SPECS)
    if unknown:
        raise ValueError(f"names: unknown CLI families {', '.join(sorted(unknown))} (known: {', '.join(SPECS)})")
    return {name: load_family(SPECS[name]) for name in names}


def load_drivers(families: Mapping[str, Family] | None = None) -> dict[str, Driver]:
    """Every driver by name: the built-in ones and each family's, with its measured structured
    forms (``structured.toml``). Blocking (scrapli's platforms and a packaged file are read):
    call it once at start-up, in a worker thread."""
    from ..structured import load_forms  # a packaged file, read here and not at import

    families = load_families() if families is None else families
    forms = load_forms()
    drivers: dict[str, Driver] = dict(DRIVERS)
    for name, family in families.items():
        measured = forms.get(name)
        drivers[name] = family.to_driver({c: choice.use for c, choice in measured.commands.items()} if measured else None)
    return drivers


__all__ = [
    "DRIVER_NAMES",
    "DriverName",
    "FAMILY_NAMES",
    "load_drivers",
    "SPECS",
    "load_families",
    "FamilyLibraryError",
    "load_family",
    "prompt_regex",
    "Commit",
    "Dialog",
    "Family",
    "FamilySpec",
    "Level",
    "Library",
    "Login",
    "Structured",
]
