"""Benchmark of the copilot's own SQLite stores under concurrent use, on one event loop.

What a busy server does besides conversations: ``tasks`` concurrent tasks, each
repeating a mix of the store calls a run or a request makes (a session read and a
run recorded, an audit entry written, an MCP key verified, the user's default LLM
config read), through the stores' public APIs. Reported: calls per second, the
latency of one call (median, p99) and the event loop's longest stall (a 1 ms
ticker measures how late it wakes up).

Baseline in the same run: the naive way, the same statements on plain ``sqlite3``
connections called directly on the event loop (autocommit, no thread): no thread
hop, so less latency per call, but every call stalls the whole server.

Run: ``.venv/bin/python bench/store.py`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet
from loop_stalls import loop_stalls

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gns3server.agent.gns3_copilot.api.crypto import SecretBox
from gns3server.agent.gns3_copilot.api.llm_config_store import LLMConfigStore
from gns3server.agent.gns3_copilot.console.audit import AuditLog, Who
from gns3server.agent.gns3_copilot.mcp.keys import MCPKeyStore
from gns3server.agent.gns3_copilot.service.storage import open_sqlite_storage

CONFIG = {"model": "m", "context_limit": 8, "base_url": "http://127.0.0.1:11434/v1", "api_key": "sk-bench"}
USAGE = {"input_tokens": 100, "output_tokens": 20, "total_tokens": 120}

Mix = Callable[[int], Awaitable[None]]


async def ours(data_dir: Path) -> tuple[Mix, Callable[[], Awaitable[None]]]:
    """The stores as the server opens them; returns one call of the mix and the closer."""
    storage = await open_sqlite_storage(data_dir)
    configs = await LLMConfigStore.open(data_dir, SecretBox(Fernet.generate_key()))
    audit = AuditLog(data_dir)
    keys = await MCPKeyStore.open(data_dir)
    sessions = [await storage.sessions.create("u-bench", "p", f"s{i}") for i in range(20)]
    await configs.create("u-bench", CONFIG, make_default=True)
    _, secret = await keys.create("u-bench", "bench", "full")
    who = Who("u-bench", sessions[0].session_id, "p")

    async def call(step: int) -> None:
        kind = step % 5
        session_id = sessions[step % len(sessions)].session_id
        if kind == 0:
            await storage.sessions.get(session_id)
        elif kind == 1:
            await storage.sessions.record_run(session_id, USAGE)
        elif kind == 2:
            await audit.record(who, "R1", f"show {step}", "ok")
        elif kind == 3:
            await keys.verify(secret)
        else:
            await configs.default("u-bench")

    async def close() -> None:
        await keys.close()
        await audit.close()
        await configs.close()
        await storage.close()

    return call, close


async def naive(data_dir: Path) -> tuple[Mix, Callable[[], Awaitable[None]]]:
    """The same statements on plain connections, on the event loop."""
    data_dir.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(data_dir / "naive.sqlite3", isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.executescript("""
        CREATE TABLE sessions (session_id TEXT PRIMARY KEY, updated_at REAL, runs INTEGER DEFAULT 0,
            input_tokens INTEGER DEFAULT 0, output_tokens INTEGER DEFAULT 0, total_tokens INTEGER DEFAULT 0);
        CREATE TABLE audit (id INTEGER PRIMARY KEY, time REAL, user TEXT, device TEXT, command TEXT, outcome TEXT);
        CREATE TABLE keys (key_id TEXT PRIMARY KEY, digest TEXT UNIQUE, last_used_at REAL);
        CREATE TABLE configs (config_id TEXT PRIMARY KEY, user_id TEXT, config TEXT, is_default INTEGER);
    """)
    db.executemany("INSERT INTO sessions (session_id) VALUES (?)", [(f"s{i}",) for i in range(20)])
    db.execute("INSERT INTO keys VALUES ('k', 'digest', NULL)")
    db.execute("INSERT INTO configs VALUES ('c', 'u-bench', ?, 1)", (json.dumps(CONFIG),))

    async def call(step: int) -> None:
        kind = step % 5
        session_id = f"s{step % 20}"
        if kind == 0:
            db.execute("SELECT * FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
        elif kind == 1:
            db.execute("UPDATE sessions SET runs = runs + 1, updated_at = ?, input_tokens = input_tokens + ?, "
                       "output_tokens = output_tokens + ?, total_tokens = total_tokens + ? WHERE session_id = ?",
                       (time.time(), 100, 20, 120, session_id))
        elif kind == 2:
            db.execute("INSERT INTO audit (time, user, device, command, outcome) VALUES (?, ?, ?, ?, ?)",
                       (time.time(), "u-bench", "R1", f"show {step}", "ok"))
        elif kind == 3:
            db.execute("SELECT * FROM keys WHERE digest = 'digest'").fetchone()
            db.execute("UPDATE keys SET last_used_at = ? WHERE key_id = 'k'", (time.time(),))
        else:
            db.execute("SELECT * FROM configs WHERE user_id = 'u-bench' AND is_default = 1").fetchone()
        await asyncio.sleep(0)  # an await point, as a real handler has

    async def close() -> None:
        db.close()

    return call, close


async def measure(
    make: Callable[[Path], Awaitable[tuple[Mix, Callable[[], Awaitable[None]]]]], data_dir: Path, tasks: int, calls: int
) -> dict[str, float]:
    call, close = await make(data_dir)
    latencies: list[float] = []

    async def worker(index: int) -> None:
        for step in range(calls):
            start = time.perf_counter()
            await call(index + step)
            latencies.append((time.perf_counter() - start) * 1000)

    async with loop_stalls() as stalls:
        start = time.perf_counter()
        await asyncio.gather(*(worker(i) for i in range(tasks)))
        elapsed = time.perf_counter() - start
    await close()
    return {
        "calls": len(latencies), "per_s": len(latencies) / elapsed, "p50": statistics.median(latencies),
        "p99": statistics.quantiles(latencies, n=100)[98], "stall": max(stalls),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    tasks, calls = (10, 50) if args.quick else (20, 250)
    print("| stores | concurrent tasks | calls | calls/s | median ms per call | p99 ms | longest loop stall ms |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        await measure(ours, Path(tmp) / "warm-up", 2, 10)
        for name, make in (("ours", ours), ("naive: sqlite3 on the loop", naive)):
            r: dict[str, Any] = await measure(make, Path(tmp) / name.split(":")[0], tasks, calls)
            print(f"| {name} | {tasks} | {r['calls']} | {r['per_s']:.0f} | {r['p50']:.2f} | {r['p99']:.2f} "
                  f"| {r['stall']:.1f} |")


if __name__ == "__main__":
    asyncio.run(main())
