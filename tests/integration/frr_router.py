"""One real FRR router in a network namespace of its own, for the console tests of vtysh.

:meth:`FRRRouter.start` runs Debian's FRR daemons (zebra, staticd, ospfd, bgpd)
in a new network namespace and a UTS namespace whose hostname is the router's
name (so vtysh's prompt is ``R1#``), with their configuration, pid files, zebra
socket and vty sockets in a temporary directory (FRR's ``-f``, ``-i``, ``-z``,
``--vty_socket``; ``-P 0``: no TCP vty), never in ``/etc/frr`` or ``/var/run/frr``.
Names come from a random suffix, so parallel runs never collide. :meth:`console`
is the command that runs the router's interactive vtysh (served on a console by
``shell_process.ShellServer``), :meth:`vtysh` reads it outside the copilot, and
:meth:`stop` kills the daemons and removes the namespaces and the directory.

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
from dataclasses import dataclass, field
from pathlib import Path

FRR_DIR = Path("/usr/lib/frr")
DAEMONS = ("zebra", "staticd", "ospfd", "bgpd")
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


def _run(argv: list[str] | tuple[str, ...], timeout: float = 60) -> str:
    done = subprocess.run(list(argv), check=False, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def _wait_for(path: Path, process: subprocess.Popen[bytes], what: str, timeout: float = 30) -> None:
    """Until ``path`` exists (a daemon's socket): the daemon's own readiness, polled on the file system."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not create {path.name} within {timeout:g}s")
        time.sleep(0.02)


@dataclass
class FRRRouter:
    """A running FRR router (see the module docstring)."""

    name: str
    netns: str
    directory: Path
    daemons: list[subprocess.Popen[bytes]] = field(default_factory=list)
    _uts_mounted: bool = False
    _netns_made: bool = False

    @classmethod
    def start(cls, name: str = "R1") -> FRRRouter:
        if not (FRR_DIR / "zebra").exists() or shutil.which("vtysh") is None:
            raise RuntimeError("FRR is not installed (apt-get install frr; scripts/test does it)")
        suffix = uuid.uuid4().hex[:8]
        # Not pytest's tmp_path: the daemons run as user frr, who must reach their directory.
        directory = Path(tempfile.mkdtemp(prefix=f"copilot-frr-{suffix}-"))
        directory.chmod(0o755)
        shutil.chown(directory, "frr", "frr")
        router = cls(name, f"copilot-frr-{suffix}", directory)
        try:
            router._build()
        except BaseException:
            router.stop()
            raise
        return router

    @property
    def uts(self) -> Path:
        return self.directory / "uts"

    def enter(self) -> tuple[str, ...]:
        """The prefix that runs a program inside the router (its network and UTS namespaces)."""
        return ("nsenter", f"--net=/run/netns/{self.netns}", f"--uts={self.uts}")

    def _build(self) -> None:
        _run(["ip", "netns", "add", self.netns])
        self._netns_made = True
        _run(["ip", "-n", self.netns, "link", "set", "lo", "up"])
        self.uts.touch()
        _run(["unshare", f"--uts={self.uts}", "hostname", self.name])
        self._uts_mounted = True
        (self.directory / "vtysh.conf").write_text("service integrated-vtysh-config\n")
        empty = self.directory / "empty.conf"
        empty.touch()
        zserv = self.directory / "zserv.api"
        for daemon in DAEMONS:
            argv = [*self.enter(), str(FRR_DIR / daemon), "-f", str(empty), "-i", str(self.directory / f"{daemon}.pid"),
                    "-z", str(zserv), "--vty_socket", str(self.directory), "-A", "127.0.0.1", "-P", "0",
                    "--limit-fds", "1024", "--log", f"file:{self.directory / daemon}.log"]
            process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL, start_new_session=True)
            self.daemons.append(process)
            # Each daemon after zebra needs zebra's socket; vtysh needs every daemon's vty socket.
            _wait_for(self.directory / f"{daemon}.vty", process, f"{self.name}'s {daemon}")
            if daemon == "zebra":
                _wait_for(zserv, process, f"{self.name}'s zebra")

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
        return _run([*self.vtysh_argv(), *(a for c in commands for a in ("-c", c))])

    def stop(self) -> None:
        """Kill the daemons, remove the namespaces and the directory; raise if something stays."""
        errors: list[str] = []
        for process in self.daemons:
            if process.poll() is None:
                process.kill()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                errors.append(f"pid {process.pid} outlived SIGKILL")
        self.daemons.clear()
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


def frr_version(router: FRRRouter) -> str:
    """``FRRouting 8.4.4`` and Debian's package version, as the data file's header names them."""
    first = router.vtysh("show version").splitlines()[0]
    package = _run(["dpkg-query", "-W", "-f", "${Version}", "frr"]).strip()
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
