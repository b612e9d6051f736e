"""A network of real FRR routers in network namespaces of its own, for tests that troubleshoot routers.

:meth:`FRRLab.start` builds, in a few seconds, a line of routers (three by
default) joined by veth pairs: ``R1 eth1 -- eth1 R2 eth2 -- eth1 R3``. Each
router is a ``frr_router.FRRRouter`` (network and UTS namespaces of its own, its
hostname its name, so vtysh's prompt is ``R1#``, Debian's FRR 8.4 daemons zebra,
staticd, ospfd and bgpd) whose directory is one of the lab's temporary directory.
Every name is derived from a random suffix, so parallel runs on one machine never
collide, and nothing is created outside the namespaces and that directory.

Routing, as :func:`router_config` writes it: OSPF area 0 on every link and on
``lo`` (the router id, ``10.255.0.N/32``), point-to-point, hello 1 s, dead 4 s;
eBGP on every link (AS ``6500N``, keepalive 1 s, hold 3 s, connect retry 1 s)
originating ``192.168.N.0/24`` (a static blackhole). A link may give its second
end a smaller MTU (``b_mtu``): that end then ignores the MTU in OSPF's database
description packets (``ip ospf mtu-ignore``), the set-up an MTU-mismatch fault
undoes. Interfaces, addresses and MTUs are set with iproute2 (the "cabling");
everything else is FRR configuration, read back with ``show running-config``.

:meth:`FRRLab.wait_converged` polls vtysh's json until every OSPF neighbour is
Full and every BGP session Established (generous deadlines: the machine may be
busy); :attr:`FRRLab.baseline` is each router's running configuration then, and
:meth:`FRRLab.restore` restarts the daemons of any router whose configuration a
test left different from it. :meth:`FRRLab.console` gives the command that runs a
router's vtysh on a console (``ShellServer``, see ``cli_servers.serve_vtysh``);
:meth:`FRRLab.vtysh` reads a router outside the copilot. :meth:`FRRLab.stop`
kills every daemon, deletes the namespaces (and with them the veths) and the
directory, also after a failed start.
"""

from __future__ import annotations

import ipaddress
import json
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from frr_router import FRRRouter, check_installed, poll, run_command

HELLO, DEAD = 1, 4
CONVERGE_TIMEOUT = 90.0  # OSPF needs a few hellos, BGP a connect retry or two; a busy machine is slower
FULL = "Full"
ESTABLISHED = "Established"

T = TypeVar("T")


@dataclass(frozen=True)
class Link:
    """A veth pair between two routers' interfaces, on a /30 (``a`` gets .1, ``b`` .2)."""

    a: str
    a_if: str
    b: str
    b_if: str
    subnet: str
    b_mtu: int = 1500

    def address(self, router: str) -> ipaddress.IPv4Interface:
        network = ipaddress.IPv4Network(self.subnet)
        host = 1 if router == self.a else 2
        return ipaddress.IPv4Interface(f"{network.network_address + host}/{network.prefixlen}")

    def peer(self, router: str) -> tuple[str, ipaddress.IPv4Address]:
        """The other end's router and address."""
        other = self.b if router == self.a else self.a
        return other, self.address(other).ip

    def interface(self, router: str) -> str:
        return self.a_if if router == self.a else self.b_if


@dataclass
class Router(FRRRouter):
    """A router of the lab: ``R<index>``, with the AS, router id and network its index gives it."""

    index: int = 0

    @property
    def asn(self) -> int:
        return 65000 + self.index

    @property
    def router_id(self) -> str:
        return f"10.255.0.{self.index}"

    @property
    def prefix(self) -> str:
        """The network the router originates in BGP."""
        return f"192.168.{self.index}.0/24"


def line_of(count: int) -> tuple[list[str], list[Link]]:
    """Router names and the links of ``R1 -- R2 -- ... -- Rn``; the last link's far end has MTU 1400."""
    names = [f"R{i}" for i in range(1, count + 1)]
    links = []
    for i in range(1, count):
        far_if = "eth1"
        near_if = "eth1" if i == 1 else "eth2"
        links.append(Link(f"R{i}", near_if, f"R{i + 1}", far_if, f"10.0.{i}{i + 1}.0/30",
                          b_mtu=1400 if i == count - 1 else 1500))
    return names, links


def router_config(router: Router, links: Iterable[Link]) -> str:
    """The router's FRR configuration (integrated, as vtysh reads it)."""
    mine = [link for link in links if router.name in (link.a, link.b)]
    # The OSPF instance (and its router id) first: interface lines naming an area would otherwise create
    # it with a router id of zebra's choosing, and the one configured next waits for the process to restart.
    lines = [f"hostname {router.name}", "ip forwarding", "!",
             f"ip route {router.prefix} blackhole", "!",
             "router ospf", f" ospf router-id {router.router_id}",
             # LSAs sent and accepted at once (the defaults hold them 5 s and 1 s): a lab converges in seconds.
             " timers throttle lsa all 0", " timers lsa min-arrival 0", "exit", "!",
             "interface lo", " ip ospf area 0", "exit", "!"]
    for link in mine:
        lines += [f"interface {link.interface(router.name)}", " ip ospf area 0",
                  f" ip ospf dead-interval {DEAD}", f" ip ospf hello-interval {HELLO}"]
        if router.name == link.b and link.b_mtu < 1500:
            lines.append(" ip ospf mtu-ignore")
        lines += [" ip ospf network point-to-point", "exit", "!"]
    lines += [f"router bgp {router.asn}", f" bgp router-id {router.router_id}", " no bgp ebgp-requires-policy",
              " timers bgp 1 3"]
    for link in mine:
        peer, address = link.peer(router.name)
        lines += [f" neighbor {address} remote-as {65000 + int(peer[1:])}", f" neighbor {address} timers connect 1"]
    lines += [" !", " address-family ipv4 unicast", f"  network {router.prefix}", " exit-address-family",
              "exit", "!"]
    return "\n".join(lines) + "\n"


@dataclass
class FRRLab:
    """A running FRR network (see the module docstring); use :meth:`start` and :meth:`stop`."""

    directory: Path
    routers: dict[str, Router]
    links: list[Link]
    baseline: dict[str, str] = field(default_factory=dict)

    @classmethod
    def start(cls, count: int = 3, timeout: float = CONVERGE_TIMEOUT, suffix: str | None = None) -> FRRLab:
        """Build the network and return once OSPF and BGP have converged (everything is torn down on failure).

        Every name the lab makes contains ``copilot-frr-<suffix>`` (random by default).
        """
        check_installed()
        suffix = suffix or uuid.uuid4().hex[:6]
        # Not pytest's tmp_path: the daemons run as user frr, who must reach their directory.
        directory = Path(tempfile.mkdtemp(prefix=f"copilot-frr-{suffix}-"))
        directory.chmod(0o755)
        names, links = line_of(count)
        routers = {name: Router(name, f"copilot-frr-{suffix}-{name}", directory / name, index=i)
                   for i, name in enumerate(names, 1)}
        lab = cls(directory, routers, links)
        try:
            lab._build()
            for router in routers.values():
                router.start_daemons(router.directory / "frr.conf")
            lab.wait_converged(timeout)
            lab.baseline = {name: lab.running_config(name) for name in routers}
        except BaseException:
            lab.stop()
            raise
        return lab

    def _build(self) -> None:
        for router in self.routers.values():
            router.create()
            _ip(router, "addr", "add", f"{router.router_id}/32", "dev", "lo")
            (router.directory / "frr.conf").write_text(router_config(router, self.links))
        for link in self.links:
            a, b = self.routers[link.a], self.routers[link.b]
            _ip(None, "link", "add", "name", link.a_if, "netns", a.netns, "type", "veth",
                "peer", "name", link.b_if, "netns", b.netns)
            _ip(b, "link", "set", link.b_if, "mtu", str(link.b_mtu))
            for router in (a, b):
                name = link.interface(router.name)
                _ip(router, "addr", "add", str(link.address(router.name)), "dev", name)
                _ip(router, "link", "set", name, "up")

    # ------------------------------------------------------------------ reading routers (outside the copilot)

    def console(self, router: str) -> tuple[str, ...]:
        """The command that serves ``router``'s interactive vtysh on a console."""
        return self.routers[router].console()

    def vtysh(self, router: str, *commands: str) -> str:
        """What vtysh prints for ``commands`` (each a ``-c``), read directly, with no policy or audit."""
        return self.routers[router].vtysh(*commands)

    def show_json(self, router: str, command: str) -> Any:
        return json.loads(self.vtysh(router, f"{command} json"))

    def running_config(self, router: str) -> str:
        return self.vtysh(router, "show running-config")

    def ospf_states(self, router: str) -> dict[str, str]:
        """Router id of each OSPF neighbour -> its state without the DR role (``Full``, ``ExStart`` ...)."""
        neighbours = self.show_json(router, "show ip ospf neighbor").get("neighbors", {})
        return {rid: entries[0]["nbrState"].split("/")[0] for rid, entries in neighbours.items() if entries}

    def bgp_states(self, router: str) -> dict[str, str]:
        """Peer address -> BGP state (``Established``, ``Idle``, ``Active`` ...)."""
        peers = self.show_json(router, "show bgp ipv4 unicast summary").get("peers", {})
        return {address: peer["state"] for address, peer in peers.items()}

    def routes(self, router: str) -> dict[str, str]:
        """Prefix -> protocol of each route the router selected (``ospf``, ``bgp``, ``connected`` ...)."""
        table = self.show_json(router, "show ip route")
        return {prefix: entry["protocol"] for prefix, entries in table.items()
                for entry in entries if entry.get("selected")}

    def expected_routes(self, router: str) -> dict[str, str]:
        """What a converged router learns: every other router's id by OSPF, its network by BGP."""
        expected = {}
        for name, other in self.routers.items():
            if name != router:
                expected[f"{other.router_id}/32"] = "ospf"
                expected[other.prefix] = "bgp"
        return expected

    def expected_neighbours(self, router: str) -> tuple[dict[str, str], dict[str, str]]:
        """The OSPF neighbours (router id -> Full) and BGP peers (address -> Established) a converged router has."""
        ospf, bgp = {}, {}
        for link in self.links:
            if router in (link.a, link.b):
                peer, address = link.peer(router)
                ospf[self.routers[peer].router_id] = FULL
                bgp[str(address)] = ESTABLISHED
        return ospf, bgp

    def converged(self, routers: Iterable[str] | None = None) -> bool:
        """Whether every OSPF neighbour is Full, every BGP session Established and every route learnt
        (on ``routers``; all by default)."""
        for name in routers or self.routers:
            ospf, bgp = self.expected_neighbours(name)
            if self.ospf_states(name) != ospf or self.bgp_states(name) != bgp:
                return False
            routes = self.routes(name)
            if any(routes.get(prefix) != protocol for prefix, protocol in self.expected_routes(name).items()):
                return False
        return True

    def wait_converged(self, timeout: float = CONVERGE_TIMEOUT) -> None:
        try:
            poll(self.converged, timeout, "the FRR network did not converge")
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}: {self.states()}") from None

    def states(self) -> dict[str, tuple[dict[str, str], dict[str, str]]]:
        """Every router's OSPF and BGP neighbour states (for messages)."""
        return {name: (self.ospf_states(name), self.bgp_states(name)) for name in self.routers}

    def wait_for(self, check: Callable[[], T | None], what: str, timeout: float = CONVERGE_TIMEOUT) -> T:
        """Poll ``check`` (e.g. a neighbour's state) until it holds; RuntimeError naming ``what`` after ``timeout``."""
        return poll(check, timeout, what)

    # ------------------------------------------------------------------ between tests

    def changed(self) -> list[str]:
        """Routers whose running configuration is no longer their baseline."""
        return [name for name in self.routers if self.running_config(name) != self.baseline[name]]

    def restore(self, timeout: float = CONVERGE_TIMEOUT) -> list[str]:
        """Restart, from their baseline configuration, the routers a test left changed; wait for convergence.

        Returns the routers restarted (none when every test put back what it changed).
        """
        changed = self.changed()
        for name in changed:
            router = self.routers[name]
            if errors := router.stop_daemons():
                raise RuntimeError(f"{name}'s daemons: {'; '.join(errors)}")
            router.start_daemons(router.directory / "frr.conf")
        self.wait_converged(timeout)
        if left := self.changed():
            raise RuntimeError(f"{', '.join(left)} did not come back to the baseline configuration")
        return changed

    def pids(self) -> list[int]:
        """Live daemons of this lab."""
        return [pid for router in self.routers.values() for pid in router.pids()]

    def stop(self) -> None:
        """Stop every router (its daemons, namespaces and directory; the veths go with the namespaces)."""
        errors: list[str] = []
        for router in self.routers.values():
            try:
                router.stop()
            except RuntimeError as exc:
                errors.append(str(exc))
        shutil.rmtree(self.directory, ignore_errors=True)
        if errors:
            raise RuntimeError("the FRR lab was not torn down cleanly: " + "; ".join(errors))


def _ip(router: Router | None, *argv: str) -> None:
    """iproute2, in ``router``'s network namespace (else this one's): the lab's cabling."""
    run_command(["ip", *(("-n", router.netns) if router else ()), *argv])

__all__ = ["FRRLab", "Link", "Router", "line_of", "poll", "router_config"]
