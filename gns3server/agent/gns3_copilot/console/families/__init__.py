"""CLI families as data: what each vendor's CLI prints and expects, borrowed from scrapli.

One module per family holds its :class:`FamilySpec`: the scrapli (2025.1.30) or
scrapli-community platform that knows the family's privilege levels, prompts,
escalate/deescalate commands and error strings, and the facts no library holds as
data (paging off, commit and confirmed commit, login dialogs, the shell escapes),
each citing where it came from. :func:`load_families` reads the installed library
and returns the families; it imports scrapli (about 150 ms): call it once, off the
event loop (``asyncio.to_thread``), and hand the result down.
"""

from __future__ import annotations

from collections.abc import Mapping

from . import cumulus, eos, fortios, iosxr, junos, nxos, routeros, srlinux, vrp, vyos
from .library import FamilyLibraryError, load_family, prompt_regex
from .model import Commit, Dialog, Family, FamilySpec, Level, Library, Login, Structured

SPECS: Mapping[str, FamilySpec] = {
    spec.name: spec
    for spec in (eos.SPEC, junos.SPEC, iosxr.SPEC, nxos.SPEC, srlinux.SPEC, routeros.SPEC, vrp.SPEC, vyos.SPEC,
                 fortios.SPEC, cumulus.SPEC)
}
FAMILY_NAMES = tuple(SPECS)


def load_families(names: tuple[str, ...] = FAMILY_NAMES) -> dict[str, Family]:
    """The named families, read from the installed scrapli (blocking: call it in a thread)."""
    unknown = set(names) - set(SPECS)
    if unknown:
        raise ValueError(f"names: unknown CLI families {', '.join(sorted(unknown))} (known: {', '.join(SPECS)})")
    return {name: load_family(SPECS[name]) for name in names}


__all__ = [
    "FAMILY_NAMES",
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
