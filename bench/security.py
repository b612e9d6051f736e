"""Benchmark of what keeping secrets and limits costs.

1. Log scrubbing: the time to emit one log record through a formatter, with the
   scrubbing record factory installed (``redaction.install_log_scrubber``) and,
   as the baseline, without it; for typical records (a short message with
   arguments, uvicorn's access line, httpx's request line, a record with a
   traceback) and with 0 and 4 keys of runs in progress registered.
2. The body limit: peak memory (tracemalloc) of handing a 20 MiB chunked body to
   an app through ``BodySizeLimitMiddleware``, next to the baseline of an app
   that reads the whole body itself (what happened before the limit counted
   streamed bytes).

Run: ``.venv/bin/python bench/security.py`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import logging
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gns3server.agent.gns3_copilot.api.middleware import BodySizeLimitMiddleware
from gns3server.agent.gns3_copilot.redaction import SECRETS, install_log_scrubber

CHUNK = 64 * 1024
BODY_BYTES = 20 * 1024 * 1024


def _records(logger: logging.Logger) -> dict[str, Callable[[], None]]:
    def with_traceback() -> None:
        try:
            raise RuntimeError("Error code: 401 - Incorrect API key provided: sk-abcdefghijklmnop1234")
        except RuntimeError:
            logger.exception("Copilot run of session %s failed", "0b5e")

    return {
        "message with arguments": lambda: logger.info("Copilot run of session %s: %d tool calls", "0b5e", 3),
        "uvicorn access line": lambda: logger.info(
            '%s - "%s %s HTTP/%s" %d', "127.0.0.1:5000", "GET", "/v3/projects/0b5e/nodes", "1.1", 200
        ),
        "httpx request line": lambda: logger.info(
            'HTTP Request: %s %s "%s %d %s"', "POST", "http://127.0.0.1:11434/v1/chat/completions", "HTTP/1.1", 200, "OK"
        ),
        "record with traceback": with_traceback,
    }


def _time_per_record(emit: Callable[[], None], count: int) -> float:
    start = time.perf_counter()
    for _ in range(count):
        emit()
    return (time.perf_counter() - start) / count * 1e6


def bench_logging(count: int) -> list[tuple[str, str, float, float]]:
    logger = logging.getLogger("bench.security")
    handler = logging.StreamHandler(io.StringIO())
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s:%(lineno)d %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    original = logging.getLogRecordFactory()
    rows = []
    for keys in (0, 4):
        registered = [f"key-of-run-{i}-{'x' * 40}" for i in range(keys)]
        with SECRETS.registered(*registered):
            for name, emit in _records(logger).items():
                logging.setLogRecordFactory(original)
                baseline = _time_per_record(emit, count)
                install_log_scrubber()
                scrubbed = _time_per_record(emit, count)
                rows.append((name, str(keys), baseline, scrubbed))
    logging.setLogRecordFactory(original)
    return rows


async def _peak_bytes(app: Any, limited: bool) -> tuple[int, int]:
    """(peak traced bytes, status) of one 20 MiB chunked request."""
    chunks = BODY_BYTES // CHUNK
    sent = 0
    block = b"x" * CHUNK
    status: list[int] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        sent += 1
        return {"type": "http.request", "body": block, "more_body": sent < chunks}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])

    scope = {"type": "http", "path": "/v3/copilot/x", "headers": []}
    target = BodySizeLimitMiddleware(app, prefix="/v3/copilot/") if limited else app
    tracemalloc.start()
    tracemalloc.reset_peak()
    await target(scope, receive, send)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak, status[0]


async def _reading_app(scope: Any, receive: Any, send: Any) -> None:
    """What a route does with a body: read all of it (as FastAPI does before validating)."""
    parts = []
    while True:
        message = await receive()
        parts.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    body = b"".join(parts)
    await send({"type": "http.response.start", "status": 422 if body else 400, "headers": []})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    count = 2_000 if parser.parse_args().quick else 20_000

    print(f"1. Log scrubbing: microseconds per record, {count} records each")
    print(f"{'record':<24} {'keys':>4} {'baseline':>10} {'scrubbed':>10} {'overhead':>9}")
    for name, keys, baseline, scrubbed in bench_logging(count):
        print(f"{name:<24} {keys:>4} {baseline:>10.1f} {scrubbed:>10.1f} {scrubbed / baseline:>8.2f}x")

    print(f"\n2. A {BODY_BYTES // 2**20} MiB chunked body: peak memory (tracemalloc)")
    print(f"{'':<36} {'status':>6} {'peak MiB':>9}")
    for label, limited in (("baseline: the route reads it all", False), ("BodySizeLimitMiddleware", True)):
        peak, status = asyncio.run(_peak_bytes(_reading_app, limited))
        print(f"{label:<36} {status:>6} {peak / 2**20:>9.2f}")


if __name__ == "__main__":
    main()
