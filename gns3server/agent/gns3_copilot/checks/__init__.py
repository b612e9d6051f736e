"""Typed, declarative checks of device state, judged on parsed output (``docs/changes.md``, "Checks").

``model`` is the data format (pydantic, one ``kind`` per check), ``families`` how
each CLI family's state is read, ``parsers`` the readers of its answers (JSON where
the CLI has it: FRR ``json``, iproute2 ``-j``; TextFSM templates for IOS; VPCS's
text), ``evaluate`` the pure judgement (readings in, verdict and evidence out),
``implied`` the checks a change implies, ``run`` the loop that reads devices until
every check is decided (its I/O injected). Nothing here imports the console layer.
"""

from .evaluate import Timeline, Verdict, commands_for, evaluate, needed_aspects, state_of
from .families import FAMILY_READS, StateReads, reads_for
from .implied import held_before, implied_checks, intent_of
from .model import (
    AddressPresent,
    BGPNeighbor,
    Check,
    CheckSpec,
    InterfaceUp,
    OSPFNeighbor,
    Ping,
    RouteTo,
    check_key,
    parse_check,
    parse_checks,
)
from .run import CheckReport, run_checks, summary
from .state import DeviceState, Reading

__all__ = [
    "FAMILY_READS",
    "AddressPresent",
    "BGPNeighbor",
    "Check",
    "CheckReport",
    "CheckSpec",
    "DeviceState",
    "InterfaceUp",
    "OSPFNeighbor",
    "Ping",
    "Reading",
    "RouteTo",
    "StateReads",
    "Timeline",
    "Verdict",
    "check_key",
    "commands_for",
    "evaluate",
    "held_before",
    "implied_checks",
    "intent_of",
    "needed_aspects",
    "parse_check",
    "parse_checks",
    "reads_for",
    "run_checks",
    "state_of",
    "summary",
]
