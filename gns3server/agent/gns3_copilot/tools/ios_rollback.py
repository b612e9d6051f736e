"""The configuration commands that take a Cisco-IOS-style device back to an earlier running configuration.

For the IOS family (Cisco IOS and IOS-XE, and FRRouting's vtysh, which reads and
prints configuration the same way) a change is undone from two captures of
``show running-config``: the baseline, read before the change, and the
configuration after it. :func:`rollback` returns the commands that take the
device from the second back to the first, computed by hier_config (a library
network engineers maintain for exactly this: remediation between two
configurations): lines the change added are negated, lines it removed or
replaced are typed again, inside their sections, negations first.

hier_config ships a Cisco IOS driver, used with one rule more (:class:`IOSDriver`).
It has none for FRR, whose running configuration differs in what it prints
around the configuration (``frr version``, ``frr defaults``, an ``exit`` closing
every section) and in which commands overwrite each other: :class:`FRRDriver`
says that (a BGP neighbour's ``remote-as`` is changed in place, since negating it
deletes the whole neighbour; interface timers, router ids, hostname). Which one
applies is told by the baseline itself (FRR prints ``frr version``).

The commands come out in the order the device reads them in configuration mode:
one-line global commands first, then each section (``interface eth1``, ``router
bgp 65001``) with its lines. A section is left implicitly: the next section's
first line is a global command, which both CLIs run in the global mode (they
fall back to the parent mode for a command the current one does not know), so
no ``exit`` is typed (an ``exit`` the console policy cannot tell from a
shell's, on a node whose CLI GNS3 does not know, would be refused). Nested
sections that need their own end keep it (``exit-address-family``).

What this does not do: state that is not configuration (a BGP session cleared,
an OSPF process restarted) comes back by itself or not at all; a change that
leaves the running configuration as it was has nothing to undo
(:class:`NoRollback`).
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable
from typing import Literal

from hier_config import HConfig, WorkflowRemediation, get_hconfig
from hier_config.child import HConfigChild
from hier_config.models import (
    IdempotentCommandsRule,
    MatchRule,
    NegationDefaultWithRule,
    NegationSubRule,
    PerLineSubRule,
    SectionalExitingRule,
)
from hier_config.platforms.cisco_ios.driver import HConfigDriverCiscoIOS
from hier_config.platforms.driver_base import HConfigDriverBase, HConfigDriverRules

from ..errors import CopilotError, ErrorKind

log = logging.getLogger(__name__)

Flavour = Literal["ios", "frr"]
_FRR_MARK = re.compile(r"^frr (?:version|defaults) ", re.MULTILINE)
# A section's own end, for the nested sections that need one (the others are left implicitly).
_NESTED_EXITS = ("exit-address-family", "exit-vrf", "exit-vni", "exit-vnc")


class NoRollback(CopilotError, ValueError):
    """No rollback can be computed: a capture is not a running configuration, or nothing changed."""

    code = "no_rollback"
    kind = ErrorKind.CONFLICT


def _idempotent(*lineage: MatchRule) -> IdempotentCommandsRule:
    return IdempotentCommandsRule(match_rules=lineage)


_INTERFACE = MatchRule(startswith="interface ")
_ROUTER_BGP = MatchRule(startswith="router bgp ")
_ROUTER_OSPF = MatchRule(startswith="router ospf")
# An interface's OSPF timers, cost, priority and network type: a new value replaces the old one in
# place (negating it first would run the interface on the default value in between).
_OSPF_INTERFACE_VALUES = tuple(
    _idempotent(_INTERFACE, MatchRule(re_search=rf"^ip ospf {name} "))
    for name in ("hello-interval", "dead-interval", "cost", "priority", "network", "retransmit-interval",
                 "transmit-delay"))


class FRRDriver(HConfigDriverBase):
    """hier_config's rules for FRRouting's running configuration (FRR 8.x, vtysh)."""

    @staticmethod
    def _instantiate_rules() -> HConfigDriverRules:
        return HConfigDriverRules(
            indentation=1,
            per_line_sub=[
                # What vtysh prints around the configuration, and the section ends it prints.
                PerLineSubRule(search=r"^Building configuration.*", replace=""),
                PerLineSubRule(search=r"^Current configuration.*", replace=""),
                PerLineSubRule(search=r"^frr (?:version|defaults) .*", replace=""),
                PerLineSubRule(search=r"^end$", replace=""),
                PerLineSubRule(search=r"^\s*!.*", replace=""),
                PerLineSubRule(search=r"^\s*exit$", replace=""),
                *(PerLineSubRule(search=rf"^\s*{word}$", replace="") for word in _NESTED_EXITS),
            ],
            # FRR negates a description without its text.
            negate_with=[NegationDefaultWithRule(match_rules=(_INTERFACE, MatchRule(startswith="description ")),
                                                 use="no description")],
            negation_sub=[NegationSubRule(match_rules=(_ROUTER_BGP, MatchRule(re_search=r"^neighbor \S+ description ")),
                                          search=r"^(no neighbor \S+ description) .*$", replace=r"\1")],
            sectional_exiting=[
                SectionalExitingRule(match_rules=(_ROUTER_BGP, MatchRule(startswith="address-family ")),
                                     exit_text="exit-address-family"),
                SectionalExitingRule(match_rules=(MatchRule(startswith="vrf "),), exit_text="exit-vrf"),
            ],
            idempotent_commands=[
                _idempotent(MatchRule(startswith="hostname ")),
                _idempotent(_INTERFACE, MatchRule(startswith="description ")),
                *_OSPF_INTERFACE_VALUES,
                _idempotent(_INTERFACE, MatchRule(startswith="bandwidth ")),
                _idempotent(_ROUTER_OSPF, MatchRule(startswith="ospf router-id ")),
                _idempotent(_ROUTER_OSPF, MatchRule(startswith="auto-cost reference-bandwidth ")),
                _idempotent(_ROUTER_BGP, MatchRule(startswith="bgp router-id ")),
                _idempotent(_ROUTER_BGP, MatchRule(startswith="timers bgp ")),
                # Negating a neighbour's remote-as removes the neighbour and all of its settings:
                # the AS is set again in place instead.
                _idempotent(_ROUTER_BGP, MatchRule(re_search=r"^neighbor (\S+) remote-as ")),
                _idempotent(_ROUTER_BGP, MatchRule(re_search=r"^neighbor (\S+) description ")),
                _idempotent(_ROUTER_BGP, MatchRule(re_search=r"^neighbor (\S+) timers connect ")),
                _idempotent(_ROUTER_BGP, MatchRule(re_search=r"^neighbor (\S+) timers \d")),
            ],
        )

    def sectional_exit(self, config: HConfigChild) -> str | None:
        """Only the ends the rules name (FRR's own ``exit`` lines are stripped when loading)."""
        for rule in self.rules.sectional_exiting:
            if config.is_lineage_match(rule.match_rules):
                return rule.exit_text
        return None


class IOSDriver(HConfigDriverCiscoIOS):
    """hier_config's Cisco IOS driver, a BGP neighbour's ``remote-as`` and an interface's OSPF values
    changed in place.

    IOS, like FRR, removes a neighbour with all of its settings (its address families'
    ``activate`` included) on ``no neighbor X remote-as``, and changes the AS of one
    that exists when given a new ``remote-as``. An interface's ``ip ospf hello-interval``
    (dead interval, cost ...) takes a new value as typed; hier_config's driver would
    negate the old one first, leaving the interface on IOS's default (hello 10) between
    the two lines.
    """

    @staticmethod
    def _instantiate_rules() -> HConfigDriverRules:
        rules = HConfigDriverCiscoIOS._instantiate_rules()
        rules.idempotent_commands.append(_idempotent(_ROUTER_BGP, MatchRule(re_search=r"^neighbor (\S+) remote-as ")))
        rules.idempotent_commands.extend(_OSPF_INTERFACE_VALUES)
        return rules


def flavour(running_config: str) -> Flavour:
    """Which CLI printed ``running_config``: FRR names itself (``frr version``), anything else is IOS."""
    return "frr" if _FRR_MARK.search(running_config) else "ios"


def _driver(kind: Flavour) -> HConfigDriverBase:
    return FRRDriver() if kind == "frr" else IOSDriver()


def _parse(driver: HConfigDriverBase, text: str, which: str) -> HConfig:
    config = get_hconfig(driver, text)
    if not config.children:
        raise NoRollback(f"the {which} capture holds no configuration")
    return config


def rollback(baseline: str, after: str) -> list[str]:
    """The configuration-mode commands that take the device from ``after`` back to ``baseline``.

    Both are ``show running-config`` outputs of one device. Raises :class:`NoRollback`
    when either is not a configuration, when they come from different CLIs, or when
    they hold the same configuration (nothing to undo).
    """
    kind = flavour(baseline)
    if flavour(after) != kind:
        raise NoRollback("the two captures come from different CLIs")
    driver = _driver(kind)
    before_config, after_config = _parse(driver, baseline, "first"), _parse(driver, after, "second")
    remediation = WorkflowRemediation(after_config, before_config).remediation_config
    if kind == "frr":
        _clear_interfaces(remediation, after_config)
    commands = _commands(remediation, driver.sectional_exit)
    if not commands:
        raise NoRollback("the running configuration did not change")
    log.debug("Rollback of %d commands computed (%s)", len(commands), kind)
    return commands


def fingerprint(running_config: str) -> str:
    """A digest of the configuration a capture holds (not of what the CLI prints around it), to tell
    later whether a device still holds it; "" for a capture that holds none."""
    kind = flavour(running_config)
    lines = get_hconfig(_driver(kind), running_config).dump_simple()
    if not lines:
        return ""
    return f"sha256:{kind}:" + hashlib.sha256("\n".join(lines).encode()).hexdigest()


def _clear_interfaces(remediation: HConfig, after: HConfig) -> None:
    """Undo an interface section the change added by negating its lines, in place of ``no interface X``.

    FRR deletes the configuration of an interface the kernel has only line by line
    ("only inactive interfaces can be deleted"); a section emptied so disappears
    from the running configuration, whether the kernel has the interface or not.
    """
    for child in list(remediation.children):
        if not child.text.startswith("no interface ") or child.children:
            continue
        section = after.get_child(equals=child.text_without_negation)
        if section is None:
            continue
        child.text = section.text
        for line in section.children:
            child.add_child(line.text).negate()


def _commands(config: HConfig, exit_for: Callable[[HConfigChild], str | None]) -> list[str]:
    """The lines of a remediation in typing order: global one-liners first, then sections (see the module)."""
    top = sorted(config.children)
    ordered = [c for c in top if not c.children] + [c for c in top if c.children]
    lines: list[str] = []

    def emit(child: HConfigChild, nested: bool) -> None:
        lines.append(child.text)
        for grandchild in sorted(child.children):
            emit(grandchild, True)
        end = exit_for(child) if nested and child.children else None
        if end and end != "exit":
            lines.append(end)

    for child in ordered:
        emit(child, False)
    return lines
