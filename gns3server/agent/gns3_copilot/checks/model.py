"""The checks' data format: typed, declarative statements about a device's state.

A check names a device and what must hold there; nothing in it says how the state
is read (that is each CLI family's business, ``families.py``), so the same check
runs on FRR's JSON, iproute2's JSON or VPCS's text, and a graded lab can store it
as data. Every check is a JSON object with a ``kind``:

=================  ===========================================  =================================
``kind``           fields (besides ``device``)                  holds when
=================  ===========================================  =================================
``interface_up``   ``interface``                                the interface is up (operationally)
``address``        ``address`` (``10.0.0.1/24`` or ``10.0.0.1``),  the device has the address (with
                   ``interface`` (optional)                     that prefix length, if given)
``ospf_neighbor``  ``neighbor`` (router id or address),         the OSPF neighbour is in ``state``
                   ``state`` (``Full``)                         (the DR role after ``/`` ignored)
``bgp_neighbor``   ``peer`` (address), ``state`` (``Established``)  the BGP session is in ``state``
``route``          ``prefix``, ``via`` (next hop, optional),    the device has a route to the prefix
                   ``protocol`` (optional)                      (through ``via``, learnt by ``protocol``)
``ping``           ``target``, ``min_replies`` (1)              at least that many echo replies came back
=================  ===========================================  =================================

Each check may also say *when* it must hold: ``within`` seconds (it may take that
long to come true: a neighbour coming back after a rollback) and ``hold`` seconds
(it must stay true that long: a neighbour must survive its dead interval after a
change). Both 0: one reading decides. ``why`` says where the check came from, for
the people reading the verdict ("was Full before the change").

:func:`parse_check` reads one from JSON (ValueError naming the field otherwise);
:class:`CheckSpec` is the flat form (``kind``, ``device``, ``target``, ``via``,
``within``), read into a typed check by :meth:`CheckSpec.check`; a model writes it as
one line, ``DEVICE KIND TARGET [VIA] [within SECONDS]`` (:meth:`CheckSpec.parse`),
with the short kinds ``up``, ``address``, ``ospf``, ``bgp``, ``route``, ``ping``:
``R1 ospf 10.255.0.2``, ``PC1 ping 10.0.0.2``, ``R1 route 10.0.3.0/24 10.0.12.2 within 30``.
"""

from __future__ import annotations

import ipaddress
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

__all__ = [
    "AddressPresent",
    "BGPNeighbor",
    "Check",
    "CheckSpec",
    "InterfaceUp",
    "OSPFNeighbor",
    "Ping",
    "RouteTo",
    "check_key",
    "parse_check",
    "parse_checks",
]

MAX_WAIT = 600.0
"""The most a check may ask to wait (``within`` or ``hold``), in seconds."""
Name = Annotated[str, Field(min_length=1, max_length=200)]


class _Check(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    device: Name
    within: float = Field(default=0.0, ge=0, le=MAX_WAIT, description="Seconds it may take to come true.")
    hold: float = Field(default=0.0, ge=0, le=MAX_WAIT, description="Seconds it must stay true.")
    why: str = Field(default="", max_length=300)

    def subject(self) -> str:  # pragma: no cover - every kind overrides it
        raise NotImplementedError

    def expected(self) -> str:  # pragma: no cover
        raise NotImplementedError


def _ip(value: str, what: str) -> str:
    try:
        return str(ipaddress.ip_address(value.strip()))
    except ValueError:
        raise ValueError(f"{what}: not an IP address: {value!r}") from None


class InterfaceUp(_Check):
    kind: Literal["interface_up"] = "interface_up"
    interface: Name

    def subject(self) -> str:
        return f"interface {self.interface}"

    def expected(self) -> str:
        return "up"


class AddressPresent(_Check):
    kind: Literal["address"] = "address"
    address: str
    interface: str | None = None

    @field_validator("address")
    @classmethod
    def _address(cls, value: str) -> str:
        text = value.strip()
        try:
            return str(ipaddress.ip_interface(text)) if "/" in text else str(ipaddress.ip_address(text))
        except ValueError:
            raise ValueError(f"not an IP address (with an optional /prefix): {value!r}") from None

    @property
    def ip(self) -> str:
        return self.address.split("/")[0]

    @property
    def prefix_length(self) -> int | None:
        return int(self.address.split("/")[1]) if "/" in self.address else None

    def subject(self) -> str:
        return f"address {self.address}" + (f" on {self.interface}" if self.interface else "")

    def expected(self) -> str:
        return "present"


class OSPFNeighbor(_Check):
    kind: Literal["ospf_neighbor"] = "ospf_neighbor"
    neighbor: str
    state: str = "Full"

    @field_validator("neighbor")
    @classmethod
    def _neighbor(cls, value: str) -> str:
        return _ip(value, "neighbor")

    def subject(self) -> str:
        return f"OSPF neighbour {self.neighbor}"

    def expected(self) -> str:
        return self.state


class BGPNeighbor(_Check):
    kind: Literal["bgp_neighbor"] = "bgp_neighbor"
    peer: str
    state: str = "Established"

    @field_validator("peer")
    @classmethod
    def _peer(cls, value: str) -> str:
        return _ip(value, "peer")

    def subject(self) -> str:
        return f"BGP neighbour {self.peer}"

    def expected(self) -> str:
        return self.state


class RouteTo(_Check):
    kind: Literal["route"] = "route"
    prefix: str
    via: str | None = None
    protocol: str | None = None

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        text = value.strip()
        if text == "default":
            text = "0.0.0.0/0"
        try:
            return str(ipaddress.ip_network(text, strict=False))
        except ValueError:
            raise ValueError(f"not a network prefix: {value!r}") from None

    @field_validator("via")
    @classmethod
    def _via(cls, value: str | None) -> str | None:
        return None if value in (None, "") else _ip(value, "via")

    def subject(self) -> str:
        return f"route to {self.prefix}"

    def expected(self) -> str:
        parts = ["present"]
        if self.via:
            parts.append(f"via {self.via}")
        if self.protocol:
            parts.append(f"by {self.protocol}")
        return " ".join(parts)


class Ping(_Check):
    kind: Literal["ping"] = "ping"
    target: str
    min_replies: int = Field(1, ge=1, le=10)

    @field_validator("target")
    @classmethod
    def _target(cls, value: str) -> str:
        return _ip(value, "target")

    def subject(self) -> str:
        return f"ping {self.target}"

    def expected(self) -> str:
        return f"at least {self.min_replies} repl{'y' if self.min_replies == 1 else 'ies'}"


Check = Annotated[
    InterfaceUp | AddressPresent | OSPFNeighbor | BGPNeighbor | RouteTo | Ping, Field(discriminator="kind")
]
KINDS = ("interface_up", "address", "ospf_neighbor", "bgp_neighbor", "route", "ping")
_ADAPTER: TypeAdapter[Any] = TypeAdapter(Check)
_LIST: TypeAdapter[Any] = TypeAdapter(list[Check])


def _summary(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'check'}: {e['msg'].removeprefix('Value error, ')}" for e in exc.errors())


def parse_check(value: Any) -> Check:
    """A check from its JSON form; ValueError naming the field that is wrong."""
    try:
        return _ADAPTER.validate_python(value)
    except ValidationError as exc:
        raise ValueError(_summary(exc)) from None


def parse_checks(values: Any) -> list[Check]:
    """A list of checks from JSON; ValueError naming the item and field that is wrong."""
    try:
        return list(_LIST.validate_python(values))
    except ValidationError as exc:
        raise ValueError(_summary(exc)) from None


def check_key(check: Check) -> str:
    """What a check is about, without its timing: two checks with one key test the same thing."""
    fields = check.model_dump(exclude={"within", "hold", "why"})
    return "|".join(f"{k}={fields[k]}" for k in sorted(fields))


SHORT_KINDS = {"up": "interface_up", "interface": "interface_up", "address": "address", "ospf": "ospf_neighbor",
               "bgp": "bgp_neighbor", "route": "route", "ping": "ping"}
"""The kinds as a check line names them (the full names are accepted too)."""


class CheckSpec(BaseModel):
    """A check in one flat form for every kind (what a model writes, as a line: :meth:`parse`)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["interface_up", "address", "ospf_neighbor", "bgp_neighbor", "route", "ping"]
    device: Name
    target: Name
    via: Annotated[str, Field(max_length=200)] | None = None
    within: float = Field(default=0.0, ge=0, le=MAX_WAIT)

    @classmethod
    def parse(cls, line: str) -> CheckSpec:
        """``DEVICE KIND TARGET [VIA] [within SECONDS]``; ValueError saying what is wrong in the line."""
        words = line.split()
        within = 0.0
        if len(words) >= 2 and words[-2].casefold() == "within":
            try:
                within = float(words[-1].rstrip("s"))
            except ValueError:
                raise ValueError(f"{line!r}: within takes seconds, not {words[-1]!r}") from None
            words = words[:-2]
        if not 3 <= len(words) <= 4:
            raise ValueError(f"{line!r}: expected DEVICE KIND TARGET [VIA] (e.g. 'R1 ospf 10.255.0.2')")
        kind = SHORT_KINDS.get(words[1].casefold(), words[1].casefold())
        if kind not in KINDS:
            raise ValueError(f"{line!r}: unknown kind {words[1]!r} (up, address, ospf, bgp, route, ping)")
        try:
            return cls.model_validate({"kind": kind, "device": words[0], "target": words[2],
                                       "via": words[3] if len(words) == 4 else None, "within": within})
        except ValidationError as exc:
            raise ValueError(f"{line!r}: {_summary(exc)}") from None

    def line(self) -> str:
        """The check as :meth:`parse` reads it."""
        short = {v: k for k, v in SHORT_KINDS.items() if k != "interface"}[self.kind]
        parts = [self.device, short, self.target, *([self.via] if self.via else [])]
        return " ".join(parts + ([f"within {self.within:g}"] if self.within else []))

    @classmethod
    def of(cls, check: Check) -> CheckSpec:
        """The flat form of a typed check (its ``hold`` is not kept: a flat check is read until it holds)."""
        if isinstance(check, InterfaceUp):
            target, via = check.interface, None
        elif isinstance(check, AddressPresent):
            target, via = check.address, None
        elif isinstance(check, OSPFNeighbor):
            target, via = check.neighbor, check.state
        elif isinstance(check, BGPNeighbor):
            target, via = check.peer, check.state
        elif isinstance(check, RouteTo):
            target, via = check.prefix, check.via
        else:
            target, via = check.target, None
        return cls(kind=check.kind, device=check.device, target=target, via=via, within=check.within)

    def check(self) -> Check:
        """The typed check; ValueError naming the field (as the model wrote it) otherwise."""
        fields: dict[str, Any] = {"kind": self.kind, "device": self.device, "within": self.within}
        target, via = self.target, self.via or None
        if self.kind == "interface_up":
            fields["interface"] = target
        elif self.kind == "address":
            fields["address"] = target
        elif self.kind == "ospf_neighbor":
            fields.update(neighbor=target, **({"state": via} if via else {}))
        elif self.kind == "bgp_neighbor":
            fields.update(peer=target, **({"state": via} if via else {}))
        elif self.kind == "route":
            fields.update(prefix=target, via=via)
        else:
            fields["target"] = target
        try:
            return parse_check(fields)
        except ValueError as exc:
            raise ValueError(f"{self.kind} check on {self.device}: {exc}".replace("neighbor:", "target:")
                             .replace("peer:", "target:").replace("prefix:", "target:")) from None
