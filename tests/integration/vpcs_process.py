"""A real VPCS daemon (Debian's ``vpcs``) on a free loopback console port.

Started from a temporary directory, one instance, UDP ports of its own. With
``-p`` VPCS daemonizes (fork, setsid, then a forkpty child for its CLI), so the
process we start exits at once and the daemon is not our child: the daemon's
processes are found by their exact command line (the console port is unique to
this instance) and :meth:`VPCSProcess.stop` kills them by pid and waits until
they are gone.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from processes import free_port, kill_and_wait, live_pids

from gns3server.agent.gns3_copilot.console import VPCS, AuditLog, Device, DeviceLocks, Who, load_policy, run_commands


@dataclass
class VPCSProcess:
    process: subprocess.Popen[bytes]
    host: str
    port: int
    argv: list[str] = field(default_factory=list)

    def pids(self) -> list[int]:
        """Live processes running exactly our command line."""
        wanted = "\0".join(self.argv).encode() + b"\0"
        return live_pids(lambda proc, _: (proc / "cmdline").read_bytes() == wanted)

    @classmethod
    def start(cls, workdir: Path, port: int | None = None, startup_timeout: float = 10.0) -> VPCSProcess:
        """A daemon on ``port`` (a free one if None): e.g. the console port GNS3 gave a node."""
        binary = shutil.which("vpcs")
        if binary is None:
            raise RuntimeError("vpcs is not installed (apt-get install vpcs; scripts/test does it)")
        port = port or free_port()
        lport, rport = free_port(kind=socket.SOCK_DGRAM), free_port(kind=socket.SOCK_DGRAM)
        argv = [binary, "-i", "1", "-p", str(port), "-s", str(lport), "-c", str(rport), "-t", "127.0.0.1"]
        process = subprocess.Popen(
            argv,
            cwd=workdir,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        vpcs = cls(process, "127.0.0.1", port, argv)
        deadline = time.monotonic() + startup_timeout
        while True:  # start-up only: poll a connect until the console listens
            if process.poll() not in (None, 0):
                raise RuntimeError(f"vpcs exited with {process.returncode} before listening on {port}")
            try:
                socket.create_connection((vpcs.host, port), timeout=0.5).close()
                return vpcs
            except OSError:
                if time.monotonic() > deadline:
                    vpcs.stop()
                    raise RuntimeError(f"vpcs did not listen on {port} within {startup_timeout}s") from None
                time.sleep(0.05)

    async def address(self, workdir: Path) -> str:
        """The "IP/MASK" line of ``show ip``, read on the console outside the copilot's tools."""
        audit = AuditLog(workdir / "vpcs-check-audit")
        try:
            result = await run_commands(
                Device("PC", self.host, self.port, VPCS), ["show ip"], mode="show", policy=load_policy(),
                locks=DeviceLocks(), audit=audit, who=Who("tests", "-", "-"), timeout=15,
            )
        finally:
            await audit.close()
        assert result.status == "ok", result
        return next(line for line in result.results[0].output.splitlines() if line.startswith("IP/MASK"))

    def stop(self, timeout: float = 10.0) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=timeout)
        kill_and_wait(self.pids, timeout, f"vpcs on port {self.port}")
