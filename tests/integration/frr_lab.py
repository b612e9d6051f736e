"""A network of real FRR routers in network namespaces of its own, for tests that troubleshoot routers.

:meth:`FRRLab.start` builds, in a few seconds, a line of routers (three by
default) joined by veth pairs: ``R1 eth1 -- eth1 R2 eth2 -- eth1 R3``. Each
router is a network namespace and a UTS namespace of its own (its hostname is
its name, so vtysh's prompt is ``R1#``) running Debian's FRR 8.4 daemons zebra,
staticd, ospfd and bgpd, each with its config, pid file, zebra socket and vty
socket in the router's own directory of a temporary directory (FRR's ``-f``,
``-i``, ``-z`` and ``--vty_socket``; ``-P 0``: no TCP vty). Every name is
derived from a random suffix, so parallel runs on one machine never collide,
and nothing is created outside the namespaces and that directory.

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
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

FRR_DIR = Path("/usr/lib/frr")
DAEMONS = ("zebra", "staticd", "ospfd", "bgpd")
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


@dataclass(frozen=True)
class Router:
    name: str
    index: int
    netns: str
    directory: Path

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

    @property
    def uts(self) -> Path:
        """The file its UTS namespace is bound to (``nsenter --uts=``)."""
        return self.directory / "uts"

    def enter(self) -> tuple[str, ...]:
        """The command prefix that runs a program inside this router (its netns and UTS namespace)."""
        return ("nsenter", f"--net=/run/netns/{self.netns}", f"--uts={self.uts}")


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


def _run(argv: list[str] | tuple[str, ...], timeout: float = 30.0) -> str:
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def poll(check: Callable[[], T | None], timeout: float, what: str, pause: float = 0.25) -> T:
    """``check()``'s first true answer, polled until ``timeout``; RuntimeError naming ``what`` after it.

    The pause is the interval between reads of a state, not a synchronisation.
    """
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        last = check()
        if last:
            return last
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} within {timeout:g}s")
        time.sleep(pause)


@dataclass
class FRRLab:
    """A running FRR network (see the module docstring); use :meth:`start` and :meth:`stop`."""

    directory: Path
    routers: dict[str, Router]
    links: list[Link]
    baseline: dict[str, str] = field(default_factory=dict)
    _daemons: dict[str, list[subprocess.Popen[bytes]]] = field(default_factory=dict)
    _namespaces: list[str] = field(default_factory=list)
    _mounts: list[Path] = field(default_factory=list)

    @classmethod
    def start(cls, count: int = 3, timeout: float = CONVERGE_TIMEOUT, suffix: str | None = None) -> FRRLab:
        """Build the network and return once OSPF and BGP have converged (everything is torn down on failure).

        Every name the lab makes contains ``copilot-frr-<suffix>`` (random by default).
        """
        if not (FRR_DIR / "zebra").exists() or shutil.which("vtysh") is None:
            raise RuntimeError("FRR is not installed (apt-get install frr; scripts/test does it)")
        suffix = suffix or uuid.uuid4().hex[:6]
        # Not pytest's tmp_path: the daemons run as user frr, who must reach their directory.
        directory = Path(tempfile.mkdtemp(prefix=f"copilot-frr-{suffix}-"))
        directory.chmod(0o755)
        names, links = line_of(count)
        routers = {name: Router(name, i, f"copilot-frr-{suffix}-{name}", directory / name)
                   for i, name in enumerate(names, 1)}
        lab = cls(directory, routers, links)
        try:
            lab._build()
            for router in routers.values():
                lab._start_daemons(router)
            lab.wait_converged(timeout)
            lab.baseline = {name: lab.running_config(name) for name in routers}
        except BaseException:
            lab.stop()
            raise
        return lab

    def _build(self) -> None:
        for router in self.routers.values():
            router.directory.mkdir()
            shutil.chown(router.directory, "frr", "frr")
            _run(["ip", "netns", "add", router.netns])
            self._namespaces.append(router.netns)
            _run(["ip", "-n", router.netns, "link", "set", "lo", "up"])
            _run(["ip", "-n", router.netns, "addr", "add", f"{router.router_id}/32", "dev", "lo"])
            router.uts.touch()
            _run(["unshare", f"--uts={router.uts}", "hostname", router.name])
            self._mounts.append(router.uts)
            (router.directory / "frr.conf").write_text(router_config(router, self.links))
            (router.directory / "vtysh.conf").write_text("service integrated-vtysh-config\n")
        for link in self.links:
            a, b = self.routers[link.a], self.routers[link.b]
            _run(["ip", "link", "add", "name", link.a_if, "netns", a.netns, "type", "veth",
                  "peer", "name", link.b_if, "netns", b.netns])
            _run(["ip", "-n", b.netns, "link", "set", link.b_if, "mtu", str(link.b_mtu)])
            for router in (a, b):
                name = link.interface(router.name)
                _run(["ip", "-n", router.netns, "addr", "add", str(link.address(router.name)), "dev", name])
                _run(["ip", "-n", router.netns, "link", "set", name, "up"])

    def _start_daemons(self, router: Router) -> None:
        """Start the router's daemons with no configuration, then give them its configuration through vtysh.

        zebra first, until it listens: a daemon that finds no zebra socket retries only
        seconds later, and answers no vty command meanwhile.
        """
        empty = router.directory / "empty.conf"
        empty.touch()
        zserv = router.directory / "zserv.api"
        zserv.unlink(missing_ok=True)
        processes = self._daemons.setdefault(router.name, [])
        for daemon in DAEMONS:
            (router.directory / f"{daemon}.vty").unlink(missing_ok=True)
            argv = [*router.enter(), str(FRR_DIR / daemon), "-f", str(empty),
                    "-i", str(router.directory / f"{daemon}.pid"), "-z", str(zserv),
                    "--vty_socket", str(router.directory), "-A", "127.0.0.1", "-P", "0", "--limit-fds", "1024",
                    "--log", f"file:{router.directory / daemon}.log"]
            process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL, start_new_session=True)
            processes.append(process)
            socket_file = zserv if daemon == "zebra" else router.directory / f"{daemon}.vty"
            self._wait_listening(router, daemon, process, socket_file)
            if daemon == "zebra":
                self._wait_listening(router, daemon, process, router.directory / "zebra.vty")
        output = _run([*self.vtysh_argv(router.name), "-f", str(router.directory / "frr.conf")])
        if "%" in output or "Error" in output:
            raise RuntimeError(f"{router.name} refused its configuration: {output}")

    def _wait_listening(self, router: Router, daemon: str, process: subprocess.Popen[bytes], socket_file: Path) -> None:
        def listening() -> bool:
            if process.poll() is not None:
                raise RuntimeError(f"{router.name}'s {daemon} exited with {process.returncode}: "
                                   f"{self.log_tail(router.name, daemon)}")
            return socket_file.exists()

        poll(listening, 30, f"{router.name}'s {daemon} did not open {socket_file.name}", pause=0.02)

    def log_tail(self, router: str, daemon: str, lines: int = 20) -> str:
        try:
            text = (self.routers[router].directory / f"{daemon}.log").read_text(errors="replace")
        except OSError as exc:
            return f"(no log: {exc})"
        return "\n".join(text.splitlines()[-lines:])

    # ------------------------------------------------------------------ reading routers (outside the copilot)

    def vtysh_argv(self, router: str) -> tuple[str, ...]:
        """vtysh for ``router``, inside it, on its own sockets and config directory (never /etc/frr)."""
        r = self.routers[router]
        return (*r.enter(), "vtysh", "--vty_socket", str(r.directory), "--config_dir", str(r.directory),
                "-H", "/dev/null")

    def console(self, router: str) -> tuple[str, ...]:
        """The command that serves ``router``'s interactive vtysh on a console."""
        return self.vtysh_argv(router)

    def vtysh(self, router: str, *commands: str) -> str:
        """What vtysh prints for ``commands`` (each a ``-c``), read directly, with no policy or audit."""
        return _run([*self.vtysh_argv(router), *(a for c in commands for a in ("-c", c))])

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
            self._stop_daemons(name)
            self._start_daemons(self.routers[name])
        self.wait_converged(timeout)
        if left := self.changed():
            raise RuntimeError(f"{', '.join(left)} did not come back to the baseline configuration")
        return changed

    def _stop_daemons(self, router: str, timeout: float = 10.0) -> None:
        for process in self._daemons.pop(router, []):
            if process.poll() is None:
                process.kill()
            process.wait(timeout)

    def pids(self) -> list[int]:
        """Live daemons of this lab."""
        return [p.pid for processes in self._daemons.values() for p in processes if p.poll() is None]

    def stop(self) -> None:
        """Kill every daemon, delete the namespaces (their veths go with them) and the directory."""
        errors: list[str] = []
        for router in list(self._daemons):
            try:
                self._stop_daemons(router)
            except (OSError, subprocess.SubprocessError) as exc:
                errors.append(f"{router}'s daemons: {exc}")
        for mount in self._mounts:
            done = subprocess.run(["umount", str(mount)], capture_output=True, text=True, check=False)
            if done.returncode != 0:
                errors.append(f"umount {mount}: {done.stderr.strip()}")
        self._mounts.clear()
        for netns in self._namespaces:
            done = subprocess.run(["ip", "netns", "del", netns], capture_output=True, text=True, check=False)
            if done.returncode != 0:
                errors.append(f"ip netns del {netns}: {done.stderr.strip()}")
        self._namespaces.clear()
        shutil.rmtree(self.directory, ignore_errors=True)
        if errors:
            raise RuntimeError("the FRR lab was not torn down cleanly: " + "; ".join(errors))


__all__ = ["FRRLab", "Link", "Router", "line_of", "poll", "router_config"]
