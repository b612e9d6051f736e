"""Helpers the test fixtures share for the programs they start: free ports, and
finding and killing processes that are not (or no longer) our children.

VPCS daemonises itself and a shell's jobs live in their own process groups, so
neither can be stopped through a ``Popen``; they are found in ``/proc`` and
killed by pid, and their exit is awaited on pidfds (no polling).
"""

from __future__ import annotations

import os
import select
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path


def free_port(host: str = "127.0.0.1", kind: int = socket.SOCK_STREAM) -> int:
    """A port (TCP by default) nothing is bound to right now."""
    with socket.socket(socket.AF_INET, kind) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def live_pids(match: Callable[[Path, list[str]], bool]) -> list[int]:
    """Live (not zombie) processes for which ``match(proc_dir, stat_fields)`` holds.

    ``stat_fields`` are the fields of ``/proc/PID/stat`` after the command name:
    state, ppid, pgrp, session ...
    """
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if fields[0] not in ("Z", "X") and match(entry, fields):
                found.append(int(entry.name))
        except OSError:  # gone meanwhile
            continue
    return found


def kill_and_wait(find: Callable[[], list[int]], timeout: float, what: str) -> None:
    """SIGKILL every process ``find()`` returns, until it returns none; RuntimeError after ``timeout``."""
    deadline = time.monotonic() + timeout
    while pids := find():
        pidfds = []
        for pid in pids:
            try:
                pidfd = os.pidfd_open(pid)
            except ProcessLookupError:
                continue
            pidfds.append(pidfd)
            try:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            while pidfds:  # a pidfd turns readable when its process has exited
                ready, _, _ = select.select(pidfds, [], [], max(deadline - time.monotonic(), 0))
                if not ready:
                    raise RuntimeError(f"{what}: processes {find()} outlived SIGKILL")
                for pidfd in ready:
                    pidfds.remove(pidfd)
                    os.close(pidfd)
        finally:
            for pidfd in pidfds:
                os.close(pidfd)
