"""The console drivers a server runs with, and which one a node gets.

:class:`Drivers` is built once at start-up (:meth:`Drivers.load`: scrapli's platform data is
read in a worker thread, about 150 ms, never on the event loop nor at import) and held by
the app state with the rest of the console services: there is no module-level registry to
change. :meth:`Drivers.pick` turns a node's detected family (``detect.py``) and the
caller's override into the driver, whether the policy may trust that family, and a note
the tool shows when the family is assumed; :meth:`Drivers.confirm` is the check on the
prompt once the console is open.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from ..as_data import as_data
from .detect import Detection, confirm_by_prompt, detect_family
from .drivers import DRIVERS, Driver, UnknownDriverError

log = logging.getLogger(__name__)

# Evidence strong enough for the policy to judge a line in that family's grammar alone: a user's
# choice, a tag or 3.1's device type, a node type with one CLI, the image the node runs. Weaker
# (a template's or node's name, nothing at all): every grammar judges the line.
_TRUSTED = frozenset({"confirmed", "chosen", "explicit", "high"})


@dataclass(frozen=True)
class Picked:
    """The driver for one node, whether its family is known to the policy, and what to tell the model."""

    driver: Driver
    cli_known: bool
    detection: Detection
    note: str = ""


class Drivers(Mapping[str, Driver]):
    """Every console driver by family name (read-only)."""

    def __init__(self, drivers: Mapping[str, Driver] = DRIVERS) -> None:
        self._drivers = MappingProxyType(dict(drivers))

    @classmethod
    async def load(cls) -> Drivers:
        """The built-in drivers and one per vendor family, read in a worker thread."""
        from .families import load_drivers  # imports scrapli: only when the server starts

        started = time.perf_counter()
        drivers = cls(await asyncio.to_thread(load_drivers))
        log.info("Console drivers loaded in %.0f ms: %s", (time.perf_counter() - started) * 1000, ", ".join(drivers))
        return drivers

    def __getitem__(self, name: str) -> Driver:
        return self._drivers[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._drivers)

    def __len__(self) -> int:
        return len(self._drivers)

    def named(self, name: str) -> Driver:
        """The driver called ``name`` (any case); UnknownDriverError naming the known ones."""
        try:
            return self._drivers[name.strip().casefold()]
        except KeyError:
            raise UnknownDriverError(f"unknown console driver {name!r} (known: {', '.join(self)})") from None

    def pick(
        self, node: Mapping[str, Any], template: Mapping[str, Any] | None = None, choice: str | None = None,
        override: str | None = None,
    ) -> Picked:
        """The driver for GNS3 ``node``: the caller's ``override``, else its detected family.

        The policy trusts the family (judges a line in its grammar alone) only when strong
        evidence names it and the override, if any, agrees: what the device executes is not
        what a caller-chosen grammar reads (``sh -c reboot`` is a ``show`` to IOS, a shell to
        Linux). GNS3's Docker console is a shell in the container (busybox ``sh``), whatever
        the image runs: without a tag or a user's choice, a Docker node gets the Linux driver.
        """
        detection = detect_family(node, template, choice)
        family, note = detection.family, detection.note
        if str(node.get("node_type")) == "docker" and detection.confidence not in ("chosen", "explicit") \
                and family not in (None, "linux"):
            note = (f"{as_data(node.get('name'))}'s image runs {self.title(family)}, but GNS3's Docker console is a shell "
                    "in the container: driven as a Linux shell")
            family = "linux"
        if override is not None:
            driver = self.named(override)
            known = detection.confidence in _TRUSTED and driver.name == family
            if driver.name != family and family is not None:
                note = f"driven as {driver.name}, as asked, though {family} was detected ({detection.confidence})"
            return Picked(driver, known, detection, note)
        if family is None:
            raise UnknownDriverError(f"no console driver for node {as_data(node.get('name'))}: {detection.note}; "
                                     f"choose its family ({', '.join(self)})")
        return Picked(self.named(family), detection.confidence in _TRUSTED, detection, note)

    def title(self, family: str | None) -> str:
        driver = self._drivers.get(family or "")
        return driver.title or driver.name if driver else str(family)

    def confirm(self, detection: Detection, output: str) -> Detection:
        """The detection once the console printed ``output`` (ending in its prompt)."""
        return confirm_by_prompt(detection, output, {n: d for n, d in self._drivers.items() if d.levels})

    def prompt_check(self, picked: Picked) -> Callable[[str], str | None] | None:
        """For the runner: given the console's first prompt, why it is not ``picked``'s family.

        Checked where a prompt can tell (a vendor family's driver, or a family only assumed);
        a prompt several families share (``R1#``) passes, and a user's choice stands."""
        if not picked.driver.levels and picked.detection.confidence != "low":
            return None
        taken = replace(picked.detection, family=picked.driver.name)

        def check(output: str) -> str | None:
            seen = self.confirm(taken, output)
            if seen.family == picked.driver.name:
                return None
            return (f"{seen.note}; set the node's CLI family (or pass driver={seen.family}) "
                    "if it runs that CLI")

        return check
