"""One real FRR router in network namespaces of its own: the way every test runs FRR.

:meth:`FRRRouter.start` runs Debian's FRR daemons (zebra, staticd, ospfd, bgpd)
in a new network namespace and a UTS namespace whose hostname is the router's
name (so vtysh's prompt is ``R1#``), with their configuration, pid files, zebra
socket and vty sockets in a temporary directory (FRR's ``-f``, ``-i``, ``-z``,
``--vty_socket``; ``-P 0``: no TCP vty), never in ``/etc/frr`` or ``/var/run/frr``.
Names come from a random suffix, so parallel runs never collide. :meth:`console`
is the command that runs the router's interactive vtysh (served on a console by
``shell_process.ShellServer``), :meth:`vtysh` reads it outside the copilot, and
:meth:`stop` kills the daemons and removes the namespaces and the directory.
A network of them (``frr_lab.FRRLab``) names and places each router itself:
:meth:`FRRRouter.create` makes its namespaces, :meth:`FRRRouter.start_daemons`
starts (and, after :meth:`FRRRouter.stop_daemons`, restarts) its daemons with a
configuration given through vtysh.

:func:`record_commands` asks the running vtysh for its command syntaxes (``list``)
in each node of :data:`NODES`: the data file the FRR grammar resolves abbreviations
with (``console/grammar/data/frr-commands.txt``) is its output, and
``test_console_frr.py`` checks that it still is. To record it again::

    .venv/bin/python tests/integration/frr_router.py > \\
        gns3server/agent/gns3_copilot/console/grammar/data/frr-commands.txt
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

FRR_DIR = Path("/usr/lib/frr")
DAEMONS = ("zebra", "staticd", "ospfd", "bgpd")
T = TypeVar("T")
# The nodes whose commands are recorded: how vtysh enters each from the config node.
NODES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("enable", ()),
    ("config", ("configure terminal",)),
    ("config-router (ospf)", ("configure terminal", "router ospf")),
    ("config-router (bgp)", ("configure terminal", "router bgp 65000")),
    ("config-router-af", ("configure terminal", "router bgp 65000", "address-family ipv4 unicast")),
    ("config-if", ("configure terminal", "interface lo")),
    ("config-route-map", ("configure terminal", "route-map COPILOT permit 10")),
    ("config-keychain", ("configure terminal", "key chain COPILOT")),
    ("config-keychain-key", ("configure terminal", "key chain COPILOT", "key 1")),
    ("config-line", ("configure terminal", "line vty")),
    ("config-vrf", ("configure terminal", "vrf COPILOT")),
    ("config-nh-group", ("configure terminal", "nexthop-group COPILOT")),
    ("config-sr", ("configure terminal", "segment-routing")),
)


def run_command(argv: list[str] | tuple[str, ...], timeout: float = 60) -> str:
    done = subprocess.run(list(argv), check=False, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def poll(check: Callable[[], T | None], timeout: float, what: str, pause: float = 0.25) -> T:
    """``check()``'s first true answer, polled until ``timeout``; RuntimeError naming ``what`` after it.

    The pause is the interval between reads of a state, not a synchronisation.
    """
    deadline = time.monotonic() + timeout
    while True:
        answer = check()
        if answer:
            return answer
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} within {timeout:g}s")
        time.sleep(pause)


@dataclass
class FRRRouter:
    """An FRR router (see the module docstring): :meth:`start` for one on its own, or
    :meth:`create` then :meth:`start_daemons` for one of a network (``frr_lab.FRRLab``)."""

    name: str
    netns: str
    directory: Path
    daemons: list[subprocess.Popen[bytes]] = field(default_factory=list)
    _uts_mounted: bool = False
    _netns_made: bool = False

    @classmethod
    def start(cls, name: str = "R1") -> FRRRouter:
        """A router with no configuration, in a temporary directory of its own."""
        check_installed()
        suffix = uuid.uuid4().hex[:8]
        # Not pytest's tmp_path: the daemons run as user frr, who must reach their directory.
        directory = Path(tempfile.mkdtemp(prefix=f"copilot-frr-{suffix}-"))
        directory.chmod(0o755)
        router = cls(name, f"copilot-frr-{suffix}", directory)
        try:
            router.create()
            router.start_daemons()
        except BaseException:
            router.stop()
            raise
        return router

    @property
    def uts(self) -> Path:
        """The file its UTS namespace is bound to (``nsenter --uts=``)."""
        return self.directory / "uts"

    def enter(self) -> tuple[str, ...]:
        """The prefix that runs a program inside the router (its network and UTS namespaces)."""
        return ("nsenter", f"--net=/run/netns/{self.netns}", f"--uts={self.uts}")

    def create(self) -> None:
        """The router's directory (owned by user frr), network namespace (``lo`` up) and UTS namespace."""
        self.directory.mkdir(exist_ok=True)
        shutil.chown(self.directory, "frr", "frr")
        run_command(["ip", "netns", "add", self.netns])
        self._netns_made = True
        run_command(["ip", "-n", self.netns, "link", "set", "lo", "up"])
        self.uts.touch()
        run_command(["unshare", f"--uts={self.uts}", "hostname", self.name])
        self._uts_mounted = True
        (self.directory / "vtysh.conf").write_text("service integrated-vtysh-config\n")

    def start_daemons(self, config: Path | None = None) -> None:
        """Start the daemons with no configuration, then give them ``config`` (if any) through vtysh.

        zebra first, until it listens: a daemon that finds no zebra socket retries only
        seconds later, and answers no vty command meanwhile; vtysh needs every daemon's
        vty socket. Sockets a previous run left are removed first, so that a restart
        waits for the new daemons' own.
        """
        empty = self.directory / "empty.conf"
        empty.touch()
        zserv = self.directory / "zserv.api"
        zserv.unlink(missing_ok=True)
        for daemon in DAEMONS:
            (self.directory / f"{daemon}.vty").unlink(missing_ok=True)
            argv = [*self.enter(), str(FRR_DIR / daemon), "-f", str(empty), "-i", str(self.directory / f"{daemon}.pid"),
                    "-z", str(zserv), "--vty_socket", str(self.directory), "-A", "127.0.0.1", "-P", "0",
                    "--limit-fds", "1024", "--log", f"file:{self.directory / daemon}.log"]
            process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL, start_new_session=True)
            self.daemons.append(process)
            if daemon == "zebra":
                self._wait_listening(daemon, process, zserv)
            self._wait_listening(daemon, process, self.directory / f"{daemon}.vty")
        if config is not None:
            output = run_command([*self.vtysh_argv(), "-f", str(config)])
            if "%" in output or "Error" in output:
                raise RuntimeError(f"{self.name} refused its configuration: {output}")

    def _wait_listening(self, daemon: str, process: subprocess.Popen[bytes], socket_file: Path) -> None:
        def listening() -> bool:
            if process.poll() is not None:
                raise RuntimeError(f"{self.name}'s {daemon} exited with {process.returncode}: "
                                   f"{self.log_tail(daemon)}")
            return socket_file.exists()

        poll(listening, 30, f"{self.name}'s {daemon} did not open {socket_file.name}", pause=0.02)

    def log_tail(self, daemon: str, lines: int = 20) -> str:
        try:
            text = (self.directory / f"{daemon}.log").read_text(errors="replace")
        except OSError as exc:
            return f"(no log: {exc})"
        return "\n".join(text.splitlines()[-lines:])

    def vtysh_argv(self) -> tuple[str, ...]:
        """vtysh inside the router, on its own sockets and config directory (never /etc/frr)."""
        return (*self.enter(), "vtysh", "--vty_socket", str(self.directory), "--config_dir", str(self.directory),
                "-H", "/dev/null")

    def console(self, path: str | None = None) -> tuple[str, ...]:
        """The command that serves the router's interactive vtysh on a console; ``path``: the PATH
        vtysh runs its ping and traceroute from (a directory of the test's own)."""
        if path is None:
            return self.vtysh_argv()
        vtysh = shutil.which("vtysh") or "vtysh"
        return (*self.enter(), "env", f"PATH={path}", vtysh, *self.vtysh_argv()[len(self.enter()) + 1:])

    def vtysh(self, *commands: str) -> str:
        """What vtysh prints for ``commands`` (each a ``-c``), read directly, with no policy or audit."""
        return run_command([*self.vtysh_argv(), *(a for c in commands for a in ("-c", c))])

    def pids(self) -> list[int]:
        """Its live daemons."""
        return [p.pid for p in self.daemons if p.poll() is None]

    def stop_daemons(self, timeout: float = 30) -> list[str]:
        """Kill the daemons; what could not be (for :meth:`stop`'s error)."""
        errors = []
        for process in self.daemons:
            if process.poll() is None:
                process.kill()
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                errors.append(f"pid {process.pid} outlived SIGKILL")
        self.daemons.clear()
        return errors

    def stop(self) -> None:
        """Kill the daemons, remove the namespaces and the directory; raise if something stays."""
        errors = self.stop_daemons()
        if self._uts_mounted:
            done = subprocess.run(["umount", str(self.uts)], capture_output=True, text=True, check=False)
            if done.returncode != 0:
                errors.append(f"umount {self.uts}: {done.stderr.strip()}")
            self._uts_mounted = False
        if self._netns_made:
            done = subprocess.run(["ip", "netns", "del", self.netns], capture_output=True, text=True, check=False)
            if done.returncode != 0:
                errors.append(f"ip netns del {self.netns}: {done.stderr.strip()}")
            self._netns_made = False
        shutil.rmtree(self.directory, ignore_errors=True)
        if errors:
            raise RuntimeError(f"FRR router {self.name} was not torn down cleanly: " + "; ".join(errors))


def check_installed() -> None:
    if not (FRR_DIR / "zebra").exists() or shutil.which("vtysh") is None:
        raise RuntimeError("FRR is not installed (apt-get install frr; scripts/test does it)")


def frr_version(router: FRRRouter) -> str:
    """``FRRouting 8.4.4`` and Debian's package version, as the data file's header names them."""
    first = router.vtysh("show version").splitlines()[0]
    package = run_command(["dpkg-query", "-W", "-f", "${Version}", "frr"]).strip()
    return f"{' '.join(first.split()[:2])} (Debian package {package})"


def record_commands(router: FRRRouter) -> str:
    """The command syntaxes of each node of :data:`NODES`, as ``list`` prints them, in the data file's format."""
    parts = [
        "# The command syntaxes of FRR's vtysh, as its `list` command prints them in each node below:",
        "# what console/grammar/frr.py resolves abbreviations with. Recorded by tests/integration/frr_router.py",
        "# from the real vtysh (do not edit by hand; test_console_frr.py checks it against the installed FRR).",
        f"# version {frr_version(router)}",
    ]
    for node, path in NODES:
        listed = router.vtysh(*path, "list")
        parts.append(f"# node {node}")
        parts.extend(sorted({line.strip() for line in listed.splitlines() if line.strip()}))
    return "\n".join(parts) + "\n"


if __name__ == "__main__":
    recorded = FRRRouter.start()
    try:
        sys.stdout.write(record_commands(recorded))
    finally:
        recorded.stop()
