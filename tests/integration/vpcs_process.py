"""A real VPCS daemon (Debian's ``vpcs``) on a free loopback console port.

Started in the foreground (``-F``) from a temporary directory, one instance,
UDP ports of its own; :meth:`VPCSProcess.stop` kills it and reaps it.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class VPCSProcess:
    process: subprocess.Popen[bytes]
    host: str
    port: int

    @classmethod
    def start(cls, workdir: Path, startup_timeout: float = 10.0) -> VPCSProcess:
        binary = shutil.which("vpcs")
        if binary is None:
            raise RuntimeError("vpcs is not installed (apt-get install vpcs; scripts/test does it)")
        port, lport, rport = free_port(), free_port(socket.SOCK_DGRAM), free_port(socket.SOCK_DGRAM)
        process = subprocess.Popen(
            [binary, "-F", "-i", "1", "-p", str(port), "-s", str(lport), "-c", str(rport), "-t", "127.0.0.1"],
            cwd=workdir,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        vpcs = cls(process, "127.0.0.1", port)
        deadline = time.monotonic() + startup_timeout
        while True:  # start-up only: poll a connect until the console listens
            if process.poll() is not None:
                raise RuntimeError(f"vpcs exited with {process.returncode} before listening on {port}")
            try:
                socket.create_connection((vpcs.host, port), timeout=0.5).close()
                return vpcs
            except OSError:
                if time.monotonic() > deadline:
                    vpcs.stop()
                    raise RuntimeError(f"vpcs did not listen on {port} within {startup_timeout}s") from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)
