"""A real interactive CLI served on a loopback TCP port, as GNS3 serves a node's console.

GNS3 relays a Docker node's console between a raw TCP (telnet) connection and an
interactive shell on a pseudo-terminal inside the container. The LINUX console
driver must cope with what a real shell on a real terminal sends back (readline's
echo and line wrapping at the terminal's width, bracketed paste, ANSI sequences),
which a fake shell only imitates. :class:`ShellServer` reproduces that set-up
without Docker: one connection at a time, each with a fresh ``bash --norc
--noprofile -i`` in its own session on a new PTY 80 columns wide (its controlling
terminal, so that Ctrl-C interrupts what runs in it, as on a real console), bytes
relayed both ways until either side closes; then every process of that shell's
session is killed. The listening socket is bound before :meth:`ShellServer.start`
returns, so a client may connect at once; the relay runs in a background thread.
``wrapper`` runs each shell through a command that execs it (e.g. ``nsenter
--net=...`` to put it in a network namespace of the test's own). ``command``
serves another interactive CLI the same way instead of bash (FRR's ``vtysh``,
BIRD's ``birdc``, busybox's ``ash``, a ``login`` program), ``environ`` adds to its
environment.

``persistent=True`` serves one long-lived CLI instead, like QEMU's serial console
(or a router's console line): it starts with the server, outlives every client
(what it prints while nobody is connected is dropped, as a serial line does) and
whatever a client left running in it is still running for the next one.
"""

from __future__ import annotations

import fcntl
import os
import select
import shutil
import socket
import struct
import subprocess
import termios
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from processes import kill_and_wait, live_pids

PROMPT = "root@copilot-test:~# "
COLUMNS, ROWS = 80, 24


def session_pids(sid: int) -> list[int]:
    """Live processes of session ``sid``: the shell, its jobs and their children."""
    return live_pids(lambda _, fields: int(fields[3]) == sid)


def kill_session(sid: int, timeout: float) -> None:
    """SIGKILL every process of session ``sid`` and wait until they have exited."""
    kill_and_wait(lambda: session_pids(sid), timeout, f"shell session {sid}")


def _recv(conn: socket.socket) -> bytes:
    """What the client sent; b"" once it has gone."""
    try:
        return conn.recv(65536)
    except OSError:
        return b""


@dataclass
class ShellServer:
    """Serves ``bash -i`` on a PTY to one TCP client at a time (see the module docstring)."""

    listener: socket.socket
    host: str
    port: int
    shells: list[subprocess.Popen[bytes]] = field(default_factory=list)
    connections: int = 0
    _wake_r: int = -1
    _wake_w: int = -1
    _thread: threading.Thread | None = None
    _error: BaseException | None = None
    wrapper: tuple[str, ...] = ()
    command: tuple[str, ...] = ()
    environ: Mapping[str, str] = field(default_factory=dict)
    persistent: bool = False

    @classmethod
    def start(
        cls, port: int = 0, wrapper: tuple[str, ...] = (), command: Sequence[str] = (),
        environ: Mapping[str, str] | None = None, *, persistent: bool = False,
    ) -> ShellServer:
        """Listening on ``port`` (a free one if 0): e.g. the console port GNS3 gave a node."""
        bash = shutil.which("bash")
        if bash is None or shutil.which("setsid") is None or shutil.which("env") is None:
            raise RuntimeError("bash, setsid (util-linux) and env (coreutils) are needed")
        listener = socket.create_server(("127.0.0.1", port), backlog=1)
        host, port = listener.getsockname()[:2]
        server = cls(listener, host, port, wrapper=wrapper, command=tuple(command), environ=dict(environ or {}),
                     persistent=persistent)
        server._wake_r, server._wake_w = os.pipe()
        target = server._serve_persistent if persistent else server._serve
        server._thread = threading.Thread(target=target, args=(bash,), name=f"shell-{port}", daemon=True)
        server._thread.start()
        return server

    def _serve(self, bash: str) -> None:
        try:
            while True:
                ready, _, _ = select.select([self.listener, self._wake_r], [], [])
                if self._wake_r in ready:
                    return
                conn, _ = self.listener.accept()
                with conn:
                    self.connections += 1
                    if not self._relay(bash, conn):
                        return
        except BaseException as exc:  # noqa: BLE001  # reported by stop()
            self._error = exc

    def _serve_persistent(self, bash: str) -> None:
        """One CLI for the server's life; each client in turn is relayed to it."""
        try:
            shell, master = self._spawn(bash)
            try:
                conn: socket.socket | None = None
                while True:
                    sources = [master, self._wake_r, conn if conn is not None else self.listener]
                    ready, _, _ = select.select(sources, [], [])
                    if self._wake_r in ready:
                        return
                    if conn is None and self.listener in ready:
                        conn, _ = self.listener.accept()
                        self.connections += 1
                    elif conn is not None and conn in ready:
                        data = _recv(conn)
                        if not data:  # the client left; the CLI stays as it is
                            conn.close()
                            conn = None
                        else:
                            os.write(master, data)
                    if master in ready:
                        try:
                            data = os.read(master, 65536)
                        except OSError:  # the CLI is gone
                            return
                        if conn is not None:
                            try:
                                conn.sendall(data)
                            except OSError:
                                conn.close()
                                conn = None
            finally:
                if conn is not None:
                    conn.close()
                kill_session(shell.pid, timeout=10)
                shell.wait(timeout=10)
                os.close(master)
        except BaseException as exc:  # noqa: BLE001  # reported by stop()
            self._error = exc

    def _spawn(self, bash: str) -> tuple[subprocess.Popen[bytes], int]:
        master, slave = os.openpty()
        # 80 columns, so that readline wraps long lines as on a real console.
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": "/root",
            "TERM": "xterm",
            "PS1": PROMPT,
            "LANG": "C.UTF-8",
            **self.environ,
        }
        try:
            # setsid --ctty: a session of its own (its pid is the session's id) whose controlling
            # terminal is the PTY, so that Ctrl-C reaches what runs in it. (Popen's own
            # start_new_session would not give the session a terminal.)
            # env --default-signal: every signal handled as by default, as a console's getty or
            # Docker starts its CLI; a test run started by a script's "command &" ignores SIGINT and
            # SIGQUIT, and a program inherits what it ignores (then Ctrl-C could not stop a command).
            shell = subprocess.Popen(
                ["env", "--default-signal", "setsid", "--ctty", *self.wrapper,
                 *(self.command or (bash, "--norc", "--noprofile", "-i"))],
                stdin=slave,
                stdout=slave,
                stderr=slave,
                env=env,
                cwd="/",
            )
        except BaseException:
            os.close(master)
            raise
        finally:
            os.close(slave)
        self.shells.append(shell)
        return shell, master

    def _relay(self, bash: str, conn: socket.socket) -> bool:
        """Relay one connection; False when stop() asked to end."""
        shell, master = self._spawn(bash)
        keep_serving = True
        try:
            while True:
                ready, _, _ = select.select([conn, master, self._wake_r], [], [])
                if self._wake_r in ready:
                    keep_serving = False
                    break
                if conn in ready:
                    data = _recv(conn)
                    if not data:
                        break
                    os.write(master, data)
                if master in ready:
                    try:
                        data = os.read(master, 65536)
                    except OSError:  # EIO: the shell and everything on the PTY are gone
                        data = b""
                    if not data:
                        break
                    try:
                        conn.sendall(data)
                    except OSError:
                        break
        finally:
            kill_session(shell.pid, timeout=10)
            shell.wait(timeout=10)
            os.close(master)
        return keep_serving

    def pids(self) -> list[int]:
        """Live processes of every shell session this server started."""
        return [pid for shell in self.shells for pid in session_pids(shell.pid)]

    def stop(self, timeout: float = 10.0) -> None:
        """End the relay, kill every shell session, close the socket; raise if anything is left."""
        if self._thread is not None:
            os.write(self._wake_w, b"x")
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise RuntimeError(f"the shell server on port {self.port} did not stop within {timeout}s")
            self._thread = None
            self.listener.close()
            os.close(self._wake_r)
            os.close(self._wake_w)
        for shell in self.shells:
            if shell.returncode is None:  # normally reaped when its connection ended
                kill_session(shell.pid, timeout)
                shell.wait(timeout)
        if self._error is not None:
            raise RuntimeError(f"the shell server on port {self.port} failed") from self._error
        if left := self.pids():
            raise RuntimeError(f"shell processes {left} outlived stop()")
