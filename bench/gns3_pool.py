"""Benchmark of the copilot's GNS3 HTTP client: one pool per server vs. a session per operation.

Starts the installed gns3-server exactly as the integration tests do
(``tests/integration/gns3_process.py``), builds a 20-node lab (half QEMU
routers, half VPCS PCs, ``tests/integration/gns3_labs.py``) and reads its
topology N times through the topology tool (``GNS3TopologyTool``: project, nodes
and links, three GETs per read), as a run does, with three client factories in
the same run:

- ``session per read`` (naive baseline): a new ``GNS3Client`` with its own
  ``aiohttp.ClientSession``, so a new TCP connection, for every read;
- ``shared connector`` (how the copilot once did it): one ``TCPConnector`` kept
  by the server, but a ``ClientSession`` made and closed for every operation;
- ``one pool`` (now): one ``GNS3Connection`` for the server's life, a per-user
  client over it (the token sent with each request).

Per variant, over ``--rounds`` rounds taken in turns (the order rotating, so that
a busy machine's drifting load is shared out): ``--sequential`` reads one after
another (p50/p99 per read), then ``--concurrency`` reads at once (summed wall
time); the CPU time per read of this process (the copilot's side) and of the
gns3-server process (CPU time is the steady measure on a shared machine, where
wall times follow the load), and the TCP connections opened (aiohttp's tracing).

Run: ``.venv/bin/python bench/gns3_pool.py`` (``--rounds 2`` for a smoke run).
Needs ``qemu-system-x86_64`` on the PATH (the QEMU routers), as the tests do.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import aiohttp
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "integration"))
sys.path.insert(0, str(ROOT))  # tests.support

from gns3_labs import build_lab
from gns3_process import GNS3ServerProcess

from gns3server.agent.gns3_copilot.gns3_client import GNS3Client, GNS3Connection
from gns3server.agent.gns3_copilot.tools import GNS3TopologyTool

ClientFactory = Callable[[], AbstractAsyncContextManager[GNS3Client]]


class Connections:
    """Counts TCP connections aiohttp opens, through its tracing hooks."""

    def __init__(self) -> None:
        self.opened = 0
        self.trace = aiohttp.TraceConfig()
        self.trace.on_connection_create_end.append(self._created)

    async def _created(self, session: Any, context: SimpleNamespace, params: Any) -> None:
        self.opened += 1


def _cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


class Variant:
    """One way of making clients, with what its reads cost."""

    def __init__(
        self, name: str, factory: ClientFactory, counter: Connections, project_id: str, server: psutil.Process
    ) -> None:
        self.name, self.counter, self.server = name, counter, server
        self.tool = GNS3TopologyTool(client_factory=factory, project_id=project_id)
        self.latencies: list[float] = []
        self.rounds_reads = 0
        self.concurrent_s = 0.0
        self.cpu_s = 0.0
        self.server_cpu_s = 0.0

    async def one(self) -> float:
        started = time.perf_counter()
        result = await self.tool.ainvoke({})
        if "error" in result:
            raise RuntimeError(result["error"])
        return time.perf_counter() - started

    async def round(self, sequential: int, concurrency: int) -> None:
        cpu, server_cpu = time.process_time(), _cpu(self.server)
        for _ in range(sequential):
            self.latencies.append(await self.one())
        started = time.perf_counter()
        await asyncio.gather(*(self.one() for _ in range(concurrency)))
        self.rounds_reads += sequential + concurrency
        self.concurrent_s += time.perf_counter() - started
        self.cpu_s += time.process_time() - cpu
        self.server_cpu_s += _cpu(self.server) - server_cpu

    def row(self) -> dict[str, Any]:
        latencies = sorted(self.latencies)
        return {
            "p50_ms": statistics.median(latencies) * 1000,
            "p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000,
            "concurrent_s": self.concurrent_s, "cpu_ms": self.cpu_s * 1000 / self.reads,
            "server_cpu_ms": self.server_cpu_s * 1000 / self.reads, "connections": self.counter.opened,
        }

    @property
    def reads(self) -> int:
        return max(1, self.rounds_reads)


async def run(rounds: int, sequential: int, concurrency: int, nodes: int) -> list[tuple[str, dict[str, Any]]]:
    """The variants take turns, round by round, in a rotating order: a busy machine's
    load drifts over a run, and each variant gets its share of every phase of it."""
    with tempfile.TemporaryDirectory(prefix="bench-gns3-pool-") as tmp:
        server = await asyncio.to_thread(GNS3ServerProcess.start, Path(tmp) / "server")
        connector = aiohttp.TCPConnector(limit=200)
        try:
            async with server.client() as admin:
                project = await admin.create_project("bench-pool")
                pid = project["project_id"]
                await build_lab(admin, pid, nodes)
                token = admin.token
            assert token is not None
            async with GNS3Connection(server.base_url, limit=200) as pool:
                pooled = Connections()
                pool_session = pool._session  # only to attach the counter
                assert pool_session is not None
                pool_session.trace_configs.append(pooled.trace)
                pooled.trace.freeze()
                own, shared = Connections(), Connections()
                gns3 = psutil.Process(server.process.pid)
                variants = [
                    Variant("session per read (naive)",
                            lambda: _SessionPerOperation(server.base_url, token, own), own, pid, gns3),
                    Variant("shared connector, session per operation (before)",
                            lambda: _SessionPerOperation(server.base_url, token, shared, connector), shared, pid, gns3),
                    Variant("one pool (now)", lambda: pool.client(token), pooled, pid, gns3),
                ]
                for variant in variants:  # warm-up, not counted: first connections, server caches
                    await variant.one()
                for variant in variants:
                    variant.latencies.clear()
                    variant.counter.opened = 0
                    variant.rounds_reads = 0
                for i in range(rounds):
                    for variant in variants[i % 3:] + variants[:i % 3]:
                        await variant.round(sequential, concurrency)
                return [(v.name, v.row()) for v in variants]
        finally:
            await connector.close()
            await asyncio.to_thread(server.stop)


class _SessionPerOperation:
    """The naive baseline: a client over a session (and connections) of its own for each read, closed after it;
    over ``connector`` (kept open), as the copilot once did: a ClientSession per operation on one connector."""

    def __init__(
        self, base_url: str, token: str, counter: Connections, connector: aiohttp.TCPConnector | None = None
    ) -> None:
        self._base_url, self._token, self._counter, self._connector = base_url, token, counter, connector
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> GNS3Client:
        self._session = aiohttp.ClientSession(
            connector=self._connector, connector_owner=self._connector is None, trace_configs=[self._counter.trace])
        return GNS3Client(self._base_url, session=self._session, token=self._token)

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()


def table(results: list[tuple[str, dict[str, Any]]], rounds: int, sequential: int, concurrency: int) -> str:
    lines = [
        (f"per client: {rounds} rounds of {sequential} topology reads one after another, then {concurrency} at once"
         f" ({rounds * (sequential + concurrency)} reads, 3 GETs each); the clients take turns, round by round"),
        "",
        ("| client | p50 per read | p99 per read | concurrent wall | copilot-side CPU per read | gns3-server CPU per read"
         " | TCP connections |"),
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in results:
        lines.append(f"| {name} | {r['p50_ms']:.1f} ms | {r['p99_ms']:.1f} ms | {r['concurrent_s']:.2f} s "
                     f"| {r['cpu_ms']:.2f} ms | {r['server_cpu_ms']:.2f} ms | {r['connections']} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--sequential", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--nodes", type=int, default=20)
    args = parser.parse_args()
    results = asyncio.run(run(args.rounds, args.sequential, args.concurrency, args.nodes))
    print(table(results, args.rounds, args.sequential, args.concurrency))


if __name__ == "__main__":
    main()
