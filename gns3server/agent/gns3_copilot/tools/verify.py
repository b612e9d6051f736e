"""``gns3_verify``: checks of device state run on demand, read-only, with the values read as evidence.

The model writes each check as a line (:meth:`~..checks.CheckSpec.parse`: ``DEVICE
KIND TARGET [VIA] [within SECONDS]``, the tool schema's cheapest form: the model is
offered it at small windows too); each device is read through its console
(the read-only policy, the audit, GNS3's ``Node.Console`` as for every console
tool) in its family's commands, until every check is decided
(:func:`~..checks.run_checks`). The result lists each check's verdict: what was
expected, what was read, and the readings it was decided on (device, command, when).
"""

from __future__ import annotations

import time
from typing import Annotated, Any

from langchain_core.runnables import RunnableConfig
from pydantic import BaseModel, Field, StringConstraints

from ..changes.transaction import readings_of
from ..checks import CheckSpec, Reading, run_checks
from .console import ConsoleTool, DriverName
from .errors import ToolError

__all__ = ["MAX_CHECKS", "VERIFY", "VerifyInput", "VerifyTool"]

VERIFY = "gns3_verify"
MAX_CHECKS = 32


class VerifyInput(BaseModel):
    checks: list[Annotated[str, StringConstraints(max_length=300)]] = Field(min_length=1, max_length=MAX_CHECKS)
    driver: DriverName | None = None


class VerifyTool(ConsoleTool):
    name: str = VERIFY
    description: str = (
        "Check device state (read-only): pass/fail with the values read. Each check is a line 'DEVICE KIND TARGET "
        "[VIA] [within SECONDS]'; KIND: up (interface), address (IP[/len]), ospf (neighbour router id [state]), "
        "bgp (peer [state]), route (prefix [next hop]), ping (IP)."
    )
    args_schema: type[BaseModel] = VerifyInput
    metadata: dict[str, Any] = Field(default_factory=lambda: {"read_only": True})

    async def _arun(
        self, checks: list[str], driver: DriverName | None = None, *, config: RunnableConfig, **_: Any,
    ) -> dict[str, Any]:
        try:
            typed = [CheckSpec.parse(line).check() for line in checks]
        except ValueError as exc:
            raise ToolError(f"invalid check: {exc}") from exc
        who = self._who(config)
        names = list(dict.fromkeys(c.device for c in typed))
        devices = {d.name: d for d in await self._devices(names, [f"<verify {len(typed)} checks>"], driver, who)}

        async def read(name: str, commands: list[str]) -> list[Reading]:
            batch = await self._run_on(devices[name], commands, "show", who)
            return readings_of(name, batch, time.time())

        report = await run_checks(typed, {name: d.driver.name for name, d in devices.items()}, read)
        return report.as_dict()
