"""A real BIRD daemon with its own configuration and control socket, for the birdc console tests.

:meth:`BirdDaemon.start` runs Debian's ``bird`` (BIRD 2) in the foreground, in a
network namespace of its own (``unshare -n``: it never touches the host's routes),
with a small configuration (a device protocol and a static route) and its control
socket and pid file in a temporary directory; :meth:`birdc` is the command that
runs its client on that socket (served on a console by ``shell_process.ShellServer``).
:meth:`stop` kills the daemon and removes the directory.

:func:`record_commands` asks the real birdc for its command table (``?`` at the top
and after each command that has more words): the data file the BIRD grammar
resolves abbreviations with (``console/grammar/data/bird-commands.txt``) is its
output, and ``test_console_bird.py`` checks that it still is. To record it again::

    .venv/bin/python tests/integration/bird_process.py > \\
        gns3server/agent/gns3_copilot/console/grammar/data/bird-commands.txt
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

CONFIG = """\
router id 10.0.0.1;
protocol device { }
protocol static st1 { ipv4; route 10.9.0.0/24 blackhole; }
"""
# birdc's help lines: "show route ...   Show routing table" (the command, then blanks, then a description).
_HELP_LINE = re.compile(r"^(\S.*?)\s{2,}\S")
# The keywords a help line starts with (up to its first argument: <x>, [x], (x), "x", ...).
_KEYWORDS = re.compile(r"^(?:[a-z][a-z0-9-]*(?: |$))+")


@dataclass
class BirdDaemon:
    """A running ``bird`` (see the module docstring)."""

    directory: Path
    process: subprocess.Popen[bytes]

    @property
    def socket(self) -> Path:
        return self.directory / "bird.ctl"

    @classmethod
    def start(cls, timeout: float = 30.0) -> BirdDaemon:
        bird = shutil.which("bird")
        if bird is None or shutil.which("birdc") is None:
            raise RuntimeError("BIRD is not installed (apt-get install bird2; scripts/test does it)")
        directory = Path(tempfile.mkdtemp(prefix="copilot-bird-"))
        (directory / "bird.conf").write_text(CONFIG)
        argv = ["unshare", "-n", bird, "-f", "-c", str(directory / "bird.conf"), "-s", str(directory / "bird.ctl"),
                "-P", str(directory / "bird.pid")]
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, start_new_session=True)
        daemon = cls(directory, process)
        deadline = time.monotonic() + timeout
        # Its control socket is what birdc needs: wait for the daemon to create it.
        while not daemon.socket.exists():
            if process.poll() is not None:
                error = process.stderr.read().decode(errors="replace") if process.stderr else ""
                daemon.stop()
                raise RuntimeError(f"bird exited with {process.returncode}: {error.strip()}")
            if time.monotonic() > deadline:
                daemon.stop()
                raise RuntimeError(f"bird did not open its control socket within {timeout:g}s")
            time.sleep(0.02)
        return daemon

    def birdc(self) -> tuple[str, ...]:
        """The command that runs the client on this daemon's socket."""
        return ("birdc", "-s", str(self.socket))

    def run(self, command: str) -> str:
        """What ``birdc`` prints for one command, read directly, with no policy or audit."""
        done = subprocess.run([*self.birdc(), command], check=False, capture_output=True, text=True, timeout=60)
        return done.stdout

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)
        if self.process.stderr is not None:
            self.process.stderr.close()
        shutil.rmtree(self.directory, ignore_errors=True)


def _ask(argv: tuple[str, ...], line: str, timeout: float = 30.0) -> str:
    """What birdc's interactive ``?`` prints after ``line`` (readline shows it only on a terminal)."""
    import pty

    pid, fd = pty.fork()
    if pid == 0:  # the child: birdc on the terminal
        os.execvp(argv[0], list(argv))
    output = b""
    try:
        os.write(fd, (line + " ?").encode())
        deadline = time.monotonic() + timeout
        # The listing ends with the prompt and the line typed so far, drawn again.
        end = f"bird> {line} ".encode()
        while output.count(b"bird> ") < 2 or not output.rstrip(b"\x1b[K").endswith(end):
            if time.monotonic() > deadline:
                raise RuntimeError(f"birdc did not answer {line!r} ? within {timeout:g}s")
            try:
                output += os.read(fd, 65536)
            except OSError:
                break
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        os.close(fd)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", output.decode(errors="replace")).replace("\r", "")
    return text


def bird_version() -> str:
    """``BIRD version 2.0.12`` (bird prints it on stderr)."""
    done = subprocess.run(["bird", "--version"], check=False, capture_output=True, text=True, timeout=30)
    return (done.stderr or done.stdout).strip()


def record_commands(daemon: BirdDaemon) -> str:
    """birdc's command table (the command column of its ``?`` help), asked after every keyword path."""
    found: dict[str, None] = {}
    asked: set[str] = set()
    todo = [""]
    while todo:
        prefix = todo.pop(0)
        asked.add(prefix)
        for line in _ask(daemon.birdc(), prefix).splitlines():
            match = _HELP_LINE.match(line)
            if not match or line.startswith("bird>") or not match.group(1).startswith(prefix):
                continue
            command = match.group(1).strip()
            found.setdefault(command)
            keywords = _KEYWORDS.match(command)
            path = keywords.group(0).strip() if keywords else ""
            if path and path != prefix and path not in asked and path not in todo:
                todo.append(path)
    return "\n".join([
        "# birdc's command table (the command column of its `?` help, at every level): what",
        "# console/grammar/bird.py resolves abbreviations with. Recorded by tests/integration/bird_process.py",
        "# from the real birdc (do not edit by hand; test_console_bird.py checks it against the installed BIRD).",
        f"# version {bird_version()}",
        *found,
    ]) + "\n"


if __name__ == "__main__":
    recorded = BirdDaemon.start()
    try:
        sys.stdout.write(record_commands(recorded))
    finally:
        recorded.stop()
