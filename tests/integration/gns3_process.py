"""Start and stop a real gns3-server on loopback, for tests and benchmarks.

The server is the installed gns3-server started through our launcher
(``gns3server-copilot`` next to ``sys.executable``, so the copilot is mounted),
run with a temporary HOME, a config file of ours (admin user, no crash reports,
data dirs and port ranges of its own, optionally a ``[Copilot]`` section) and
its log in a file. :func:`server_command` is the single place that says how it
is started.

Readiness is observed, not slept on: the helper polls ``/v3/version`` with a
bounded deadline, waiting on the process between polls so that a server that
dies during start-up is reported at once with the tail of its log.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from joserfc import jwt
from joserfc.jwk import OctKey
from processes import free_port

from tests.support.gns3_admin import AdminClient

ADMIN_USERNAME = "admin"
ADMIN_PASSWORD = "admin"

# Port ranges below Linux's ephemeral range (32768+), where free_port() picks the
# HTTP port, so a node console never lands on another server's HTTP port. Two test
# runs at once (scripts/test runs the router tests beside the rest) each get a block
# of their own (GNS3_TEST_PORT_BLOCK=0 or 1): GNS3 checks a console port is free only
# when it allocates it, and the tests attach their CLIs to it later, so two servers
# sharing one range could hand two nodes the same port.
_RANGES = {"console": (20000, 24999), "vnc_console": (25000, 25999), "udp": (26000, 31999)}


def _port_ranges(block: str | None = None) -> dict[str, int]:
    """The ranges of the run's block (the whole range when no block is set)."""
    block = os.environ.get("GNS3_TEST_PORT_BLOCK", "") if block is None else block
    if block not in ("", "0", "1"):
        raise ValueError(f"GNS3_TEST_PORT_BLOCK must be 0 or 1, not {block!r}")
    ranges: dict[str, int] = {}
    for name, (start, end) in _RANGES.items():
        if block:
            half = (end - start + 1) // 2
            start, end = (start, start + half - 1) if block == "0" else (start + half, end)
        ranges[f"{name}_start_port_range"], ranges[f"{name}_end_port_range"] = start, end
    return ranges

_COMPUTE_CONNECTED = "Connected to compute 'local'"


def server_command(config_file: Path, *extra_args: str) -> list[str]:
    """How the server under test is started: gns3-server through our installed launcher."""
    launcher = Path(sys.executable).with_name("gns3server-copilot")
    return [str(launcher), "--config", str(config_file), *extra_args]


def write_config(
    root: Path, host: str, port: int, copilot: Mapping[str, Any] | None = None
) -> Path:
    """A gns3_server.conf keeping every file of the server under ``root``."""
    data = root / "data"
    server: dict[str, Any] = {
        "host": host,
        "port": port,
        "report_errors": False,
        "projects_path": data / "projects",
        "images_path": data / "images",
        "appliances_path": data / "appliances",
        "symbols_path": data / "symbols",
        "configs_path": data / "configs",
        "compute_password": secrets.token_hex(16),
        **_port_ranges(),
    }
    controller = {
        "default_admin_username": ADMIN_USERNAME,
        "default_admin_password": ADMIN_PASSWORD,
    }
    lines = ["[Server]", *(f"{k} = {v}" for k, v in server.items()),
             "", "[Controller]", *(f"{k} = {v}" for k, v in controller.items()), ""]
    if copilot:
        lines += ["[Copilot]", *(f"{k} = {v}" for k, v in copilot.items()), ""]
    config_file = root / "config" / "gns3_server.conf"
    config_file.parent.mkdir(parents=True, exist_ok=True)
    config_file.write_text("\n".join(lines))
    return config_file


def sign_token(secret_key: str, username: str = ADMIN_USERNAME, *, expires_in: timedelta) -> str:
    """A JWT shaped like GNS3's own (HS256, ``sub`` and ``exp``), signed with ``secret_key``."""
    claims = {"sub": username, "exp": datetime.now(UTC) + expires_in}
    return jwt.encode({"alg": "HS256"}, claims, OctKey.import_key(secret_key))


@dataclass
class GNS3ServerProcess:
    """A running gns3-server; use :meth:`start` (or ``with GNS3ServerProcess.start(...)``)."""

    root: Path
    host: str
    port: int
    jwt_secret_key: str
    process: subprocess.Popen[bytes]
    log_file: Path
    username: str = ADMIN_USERNAME
    password: str = ADMIN_PASSWORD
    version: str = field(default="")

    def signed_token(self, username: str = ADMIN_USERNAME, *, expires_in: timedelta) -> str:
        """A JWT signed with this server's key (see :func:`sign_token`)."""
        return sign_token(self.jwt_secret_key, username, expires_in=expires_in)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @classmethod
    def start(
        cls,
        root: Path,
        *,
        host: str = "127.0.0.1",
        startup_timeout: float = 90.0,
        copilot: Mapping[str, Any] | None = None,
        extra_args: Sequence[str] = (),
    ) -> GNS3ServerProcess:
        """Start a server with everything under ``root``; return once it answers.

        ``copilot`` is written as the config's ``[Copilot]`` section. Starting again
        with the same ``root`` keeps the server's data (users, projects, copilot).
        """
        root.mkdir(parents=True, exist_ok=True)
        home = root / "home"
        home.mkdir(exist_ok=True)
        port = free_port(host)
        config_file = write_config(root, host, port, copilot)
        # GNS3 signs with the key file in its secrets dir (the config's directory), not the config's
        # jwt_secret_key: written here, and kept across restarts with the same root as GNS3 keeps it.
        key_file = config_file.with_name("gns3_jwt_secret_key")
        if not key_file.exists():
            key_file.write_text(secrets.token_hex(32))
        jwt_secret_key = key_file.read_text()
        log_file = root / "gns3server.log"
        env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
               "XDG_DATA_HOME": str(home / ".local" / "share")}
        with log_file.open("wb") as log:
            # A file, not a pipe: nobody drains a pipe, and a full one would block the server.
            process = subprocess.Popen(
                server_command(config_file, *extra_args), stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, env=env, cwd=root, start_new_session=True,
            )
        server = cls(root=root, host=host, port=port, jwt_secret_key=jwt_secret_key,
                     process=process, log_file=log_file)
        try:
            server.version = server._wait_ready(startup_timeout)
        except BaseException:
            server.stop()
            raise
        return server

    def _wait_ready(self, deadline_seconds: float) -> str:
        """Wait until the API answers and the built-in 'local' compute is connected.

        The compute connects a moment after the API is up, and until then GNS3
        fails node creation from templates that name no compute (500). GNS3 shows
        that state in no route, only in its log, so the log line is awaited.
        """
        deadline = time.monotonic() + deadline_seconds
        url = f"{self.base_url}/v3/version"
        version = ""
        while time.monotonic() < deadline:
            if not version:
                try:
                    with urllib.request.urlopen(url, timeout=2) as response:
                        version = str(json.load(response)["version"])
                except (urllib.error.URLError, ConnectionError, TimeoutError):
                    pass
            if version and _COMPUTE_CONNECTED in self.log_file.read_text(errors="replace"):
                return version
            try:
                code = self.process.wait(timeout=0.2)  # the pause between polls, and a liveness check
            except subprocess.TimeoutExpired:
                continue
            raise RuntimeError(f"gns3-server exited with {code} during start-up:\n{self.log_tail()}")
        raise RuntimeError(f"gns3-server at {self.base_url} was not ready within {deadline_seconds:g} s:\n"
                           f"{self.log_tail()}")

    def stop(self, timeout: float = 20.0) -> int:
        """Terminate (then kill on timeout) the server and its process group; return its exit code."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=timeout)
        try:
            # Anything the server spawned is in its session; none of it may outlive it.
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return int(self.process.returncode)

    def kill(self, timeout: float = 20.0) -> None:
        """SIGKILL the server and everything it spawned, as a crash or an OOM kill would."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=timeout)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError as exc:
            return f"(no log: {exc})"

    def client(self, **kwargs: Any) -> AdminClient:
        """A client for this server, logged in as admin unless ``token=`` is given."""
        if "token" not in kwargs:
            kwargs.setdefault("username", self.username)
            kwargs.setdefault("password", self.password)
        return AdminClient(self.base_url, **kwargs)

    async def token(self, username: str | None = None, password: str | None = None) -> str:
        """A fresh bearer token (admin's by default)."""
        async with AdminClient(self.base_url) as client:
            return await client.login(username or self.username, password or self.password)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
