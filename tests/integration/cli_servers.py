"""Real CLIs served on console ports the way ``ShellServer`` serves bash: FRR's vtysh, BIRD's birdc, busybox's ash.

Each is an interactive program on a pseudo-terminal of its own, one TCP client at a
time, so what the console layer meets is what the real CLI sends to a terminal:
vtysh's banner and prompts (``R1#``, ``R1(config-if)#``), birdc's readline
(``ESC[?2004h`` before ``bird> ``), busybox ash's cursor-position request
(``ESC[6n``) after each prompt.

- :func:`serve_vtysh`: a router of an ``FRRLab`` (``frr_lab.py``), inside its namespaces.
- :func:`serve_birdc`: ``birdc`` on a ``bird_process.BirdDaemon``'s control socket.
- :func:`serve_busybox`: busybox's ``sh -i`` (ash), with a prompt of its own.
"""

from __future__ import annotations

import shutil

from bird_process import BirdDaemon
from frr_lab import FRRLab
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


def serve_birdc(daemon: BirdDaemon, port: int = 0) -> ShellServer:
    """``birdc`` on ``daemon``'s control socket, on ``port``."""
    return ShellServer.start(port, command=daemon.birdc())
