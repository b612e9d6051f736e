"""The one check a lab needs that ``checks/`` does not judge: which DNS server a host asks.

Only VPCS says it on its console (``show ip``'s ``DNS`` line); on other families the
check is reported as one that cannot be read, never guessed. Kept here, beside the
scenarios that need it, rather than in the shared checks package.
"""

from __future__ import annotations

import ipaddress
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["DNS_COMMAND", "DNSServer", "dns_verdict"]

DNS_COMMAND = {"vpcs": "show ip"}
"""Per family, the read-only command whose answer names the DNS server."""


class DNSServer(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["dns_server"] = "dns_server"
    device: str = Field(min_length=1, max_length=200)
    server: str
    within: float = Field(0.0, ge=0, le=600)
    why: str = ""

    @field_validator("server")
    @classmethod
    def _server(cls, value: str) -> str:
        try:
            return str(ipaddress.ip_address(value.strip()))
        except ValueError:
            raise ValueError(f"not an IP address: {value!r}") from None

    def subject(self) -> str:
        return "DNS server"

    def expected(self) -> str:
        return self.server


def dns_verdict(check: DNSServer, family: str, output: str | None) -> dict[str, Any]:
    """The verdict on ``check`` from the answer to :data:`DNS_COMMAND` (None: it could not be read)."""
    base = {"device": check.device, "kind": check.kind, "subject": check.subject(), "expected": check.expected()}
    if family not in DNS_COMMAND:
        return {**base, "status": "unknown", "passed": False, "observed": f"{family} devices do not say their DNS server"}
    if output is None:
        return {**base, "status": "unknown", "passed": False, "observed": "the device could not be read"}
    servers = [line.partition(":")[2].split() for line in output.splitlines() if line.split(":")[0].strip() == "DNS"]
    seen = servers[0] if servers else []
    passed = check.server in seen
    return {**base, "status": "pass" if passed else "fail", "passed": passed, "observed": " ".join(seen) or "none"}
