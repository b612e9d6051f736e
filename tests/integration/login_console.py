"""A console that asks for a login: busybox's real ``login`` served by ``shell_process.ShellServer``.

:func:`start` serves, one connection at a time, ``busybox login`` (``Host1 login:``,
``Password:``, ``Login incorrect``) for :data:`USER`, a user that exists only inside
the console's private mount namespace: a passwd, shadow and group file of the test's
own are bound over /etc's there (the host's users are never touched), and a UTS
namespace of its own gives it ``hostname``. After the login the user's shell is
``/bin/sh``.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from shell_process import ShellServer

USER, PASSWORD = "copilot", "Console-Pw-4242"
# openssl passwd -6 -salt copilotsalt Console-Pw-4242
HASH = "$6$copilotsalt$57OagKh.snYfAaGtQIrkbGchIfmc3zE8PV0XHWHTtQoi0x4utUB66RkPBMCUB6vNjY/f4pmtw9k2MzHe2Yisk1"


def start(directory: Path, port: int = 0, hostname: str = "Host1") -> ShellServer:
    """Serve the login on ``port`` (a free one if 0); ``directory`` holds the test's /etc files."""
    (directory / "passwd").write_text(Path("/etc/passwd").read_text() + f"{USER}:x:4242:4242:console test user:/tmp:/bin/sh\n")
    (directory / "group").write_text(Path("/etc/group").read_text() + f"{USER}:x:4242:\n")
    shadow = directory / "shadow"
    shadow.write_text(f"{USER}:{HASH}:19000:0:99999:7:::\n")
    shadow.chmod(0o600)
    binds = " && ".join(f"mount --bind {shlex.quote(str(directory / name))} /etc/{name}" for name in ("passwd", "group", "shadow"))
    script = f"{binds} && hostname {shlex.quote(hostname)} && exec busybox login"
    return ShellServer.start(port, command=("unshare", "--mount", "--uts", "--propagation", "private", "sh", "-c", script))
