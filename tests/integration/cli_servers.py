"""Real CLIs served on console ports the way ``ShellServer`` serves bash: FRR's vtysh, BIRD's birdc, busybox's ash.

Each is an interactive program on a pseudo-terminal of its own, one TCP client at a
time, so what the console layer meets is what the real CLI sends to a terminal:
vtysh's banner and prompts (``R1#``, ``R1(config-if)#``), birdc's readline
(``ESC[?2004h`` before ``bird> ``), busybox ash's cursor-position request
(``ESC[6n``) after each prompt.

- :func:`serve_vtysh`: a router of an ``FRRLab`` (``frr_lab.py``), inside its namespaces.
- :class:`BirdDaemon`: a BIRD 2 daemon in a network namespace of its own (so its
  ``device`` protocol sees only that namespace's interfaces and no route reaches this
  machine), its control socket in a temporary directory; :meth:`BirdDaemon.serve`
  serves ``birdc`` on it.
- :func:`serve_busybox`: busybox's ``sh -i`` (ash), with a prompt of its own.
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

from frr_lab import FRRLab, poll
from shell_process import ShellServer

BUSYBOX_PROMPT = "copilot-busybox# "
BIRD_PROMPT = "bird> "


def serve_vtysh(lab: FRRLab, router: str, port: int = 0) -> ShellServer:
    """``router``'s vtysh on ``port`` (a free one if 0), e.g. the console port GNS3 gave its node.

    No ``VTYSH_PAGER`` in its environment: vtysh then prints without a pager, as a
    router's console does after ``terminal length 0``.
    """
    return ShellServer.start(port, command=lab.console(router), environ={"HOME": str(lab.routers[router].directory)})


def serve_busybox(port: int = 0) -> ShellServer:
    """busybox ash, interactive, on ``port``."""
    busybox = shutil.which("busybox")
    if busybox is None:
        raise RuntimeError("busybox is not installed (apt-get install busybox-static)")
    return ShellServer.start(port, command=(busybox, "sh", "-i"), environ={"PS1": BUSYBOX_PROMPT, "ENV": "/dev/null"})


@dataclass
class BirdDaemon:
    """A running ``bird`` (see the module docstring); :meth:`start`, :meth:`serve`, :meth:`stop`."""

    netns: str
    directory: Path
    process: subprocess.Popen[bytes]

    @property
    def socket(self) -> Path:
        return self.directory / "bird.ctl"

    @classmethod
    def start(cls, directory: Path, timeout: float = 30.0) -> BirdDaemon:
        bird = shutil.which("bird")
        if bird is None:
            raise RuntimeError("BIRD is not installed (apt-get install bird2)")
        netns = f"copilot-bird-{uuid.uuid4().hex[:8]}"
        subprocess.run(["ip", "netns", "add", netns], check=True, capture_output=True)
        try:
            directory.mkdir(parents=True, exist_ok=True)
            config = directory / "bird.conf"
            config.write_text("router id 10.255.1.1;\nprotocol device {}\n"
                              "protocol static { ipv4; route 192.168.77.0/24 blackhole; }\n")
            process = subprocess.Popen(
                ["nsenter", f"--net=/run/netns/{netns}", bird, "-f", "-c", str(config), "-s",
                 str(directory / "bird.ctl"), "-P", str(directory / "bird.pid")],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            )
        except BaseException:
            subprocess.run(["ip", "netns", "del", netns], capture_output=True, check=False)
            raise
        daemon = cls(netns, directory, process)
        try:
            def listening() -> bool:
                if process.poll() is not None:
                    raise RuntimeError(f"bird exited with {process.returncode}")
                return daemon.socket.exists()

            poll(listening, timeout, "bird did not open its control socket", pause=0.02)
        except BaseException:
            daemon.stop()
            raise
        return daemon

    def serve(self, port: int = 0) -> ShellServer:
        """``birdc`` on this daemon's control socket, on ``port``."""
        return ShellServer.start(port, command=("birdc", "-s", str(self.socket)))

    def stop(self, timeout: float = 10.0) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout)
        subprocess.run(["ip", "netns", "del", self.netns], check=True, capture_output=True)
