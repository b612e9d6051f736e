"""Benchmark of the MCP endpoint: tool calls through real MCP clients on one real server.

Starts gns3-server through ``gns3server-copilot`` as the integration tests do, makes
a project of ``--nodes`` VPCS nodes and an MCP key of the admin, then measures
``gns3_topology`` calls (the whole project, structured) four ways:

- ``REST baseline``: the same data straight from GNS3's REST API (project, nodes,
  links) with a GNS3 token, one call after another: the floor, what a client
  talking to GNS3 itself pays;
- ``MCP, new session per call``: the naive MCP client (initialize, call, close
  each time);
- ``MCP, one session``: calls one after another in one session;
- ``MCP, N sessions at once``: ``--clients`` sessions, each making ``--calls`` calls.

Each MCP call is authenticated afresh (key digest lookup, the user read from
GNS3's database, a GNS3 token minted), reads the project as the caller, builds
the copilot's tools and fetches the topology through GNS3's REST API.

Per run: errors, p50/p99 per call, wall time, calls/s, server CPU per call and
RSS peak. Run: ``.venv/bin/python bench/mcp_endpoint.py`` (``--write`` puts the table in
docs/performance.md under "## MCP endpoint (bench/mcp_endpoint.py)").
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import psutil
from mcp import ClientSession
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "integration"))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))  # tests.support

from gns3_process import GNS3ServerProcess
from server import percentile, write_section

SECTION = "## MCP endpoint (bench/mcp_endpoint.py)"
MCP = "/v3/copilot/mcp"


class Run:
    def __init__(self, name: str) -> None:
        self.name = name
        self.latencies: list[float] = []
        self.errors = 0
        self.wall = 0.0
        self.cpu = 0.0
        self.peak_rss = 0


async def timed(run: Run, call: Callable[[], Awaitable[bool]]) -> None:
    started = time.perf_counter()
    try:
        ok = await call()
    except Exception:  # noqa: BLE001 (counted, the run goes on)
        ok = False
    run.latencies.append(time.perf_counter() - started)
    run.errors += not ok


async def measure(run: Run, pid: int, body: Callable[[Run], Awaitable[None]]) -> Run:
    process = psutil.Process(pid)
    stop = asyncio.Event()

    async def sample_rss() -> None:
        while not stop.is_set():
            run.peak_rss = max(run.peak_rss, process.memory_info().rss)
            try:
                await asyncio.wait_for(stop.wait(), 0.02)
            except TimeoutError:
                pass

    sampler = asyncio.create_task(sample_rss())
    cpu_before = sum(process.cpu_times()[:2])
    started = time.perf_counter()
    await body(run)
    run.wall = time.perf_counter() - started
    run.cpu = sum(process.cpu_times()[:2]) - cpu_before
    stop.set()
    await sampler
    return run


@asynccontextmanager
async def session(base_url: str, key: str) -> AsyncIterator[ClientSession]:
    """An initialized official MCP client session."""
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {key}"}) as http, \
            streamable_http_client(base_url + MCP, http_client=http) as (read, write, _), \
            ClientSession(read, write) as client:
        await client.initialize()
        yield client


def table(runs: list[Run], nodes: int, clients: int, calls: int, idle_rss: int) -> str:
    def ms(value: float) -> str:
        return f"{value * 1000:,.1f}"

    lines = [
        (f"gns3_topology of a project with {nodes} VPCS nodes; {os.cpu_count()} CPU(s), load average "
        f"{os.getloadavg()[0]:.1f} at the end (other work shares the CPUs). Server RSS when idle: "
        f"{idle_rss / 2**20:,.0f} MiB."),
        "",
        ("| run | calls | errors | p50 / p99 per call (ms) | wall (s) | calls/s | server CPU per call (ms) "
        "| server RSS peak (MiB) |"),
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for run in runs:
        count = len(run.latencies)
        lines.append(
            f"| {run.name} | {count} | {run.errors} | {ms(percentile(run.latencies, 50))} / "
            f"{ms(percentile(run.latencies, 99))} | {run.wall:.2f} | {count / run.wall:.1f} | "
            f"{run.cpu / count * 1000:,.1f} | {run.peak_rss / 2**20:,.0f} |"
        )
    baseline, fresh, one = runs[0], runs[1], runs[2]
    per_call = [run.cpu / len(run.latencies) * 1000 for run in (baseline, fresh, one)]
    lines += ["", (f"Reading it: the server's CPU is the stable measure on a shared machine. A call in an open "
              f"session costs {per_call[2]:,.1f} ms of server CPU against {per_call[0]:,.1f} ms for the REST "
              f"reads alone: {per_call[2] - per_call[0]:,.1f} ms for authenticating the key, reading the user, "
              "minting a token, the project check, building the tools and the MCP framing. A client opening a "
              f"session per call (the naive way) pays {per_call[1]:,.1f} ms per call. Latencies follow the "
              "machine's load.")]
    return "\n".join(lines)


async def main(nodes: int, clients: int, calls: int, write: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-mcp-") as tmp:
        server = await asyncio.to_thread(GNS3ServerProcess.start, Path(tmp))
        try:
            base = server.base_url
            token = await server.token()
            headers = {"Authorization": f"Bearer {token}"}
            async with aiohttp.ClientSession(headers=headers) as http:
                async with http.post(f"{base}/v3/projects", json={"name": "bench-mcp"}) as response:
                    project = (await response.json())["project_id"]
                for number in range(1, nodes + 1):
                    async with http.post(f"{base}/v3/projects/{project}/nodes", json={
                            "name": f"PC{number}", "node_type": "vpcs", "compute_id": "local"}) as response:
                        assert response.status == 201, await response.text()
                async with http.post(f"{base}{MCP}/keys", json={"name": "bench", "scope": "read_only"}) as response:
                    key = (await response.json())["key"]
                args = {"project_id": project}

                async def rest() -> bool:
                    for path in ("", "/nodes", "/links"):
                        async with http.get(f"{base}/v3/projects/{project}{path}") as response:
                            await response.read()
                            if response.status != 200:
                                return False
                    return True

                async with session(base, key) as warm:  # start-up costs out of the way
                    assert not (await warm.call_tool("gns3_topology", args)).isError
                idle_rss = psutil.Process(server.process.pid).memory_info().rss
                pid, total = server.process.pid, clients * calls

                async def baseline(run: Run) -> None:
                    for _ in range(total):
                        await timed(run, rest)

                async def fresh(run: Run) -> None:
                    async def one() -> bool:
                        async with session(base, key) as client:
                            return not (await client.call_tool("gns3_topology", args)).isError
                    for _ in range(min(total, 50)):
                        await timed(run, one)

                async def reuse(run: Run) -> None:
                    async with session(base, key) as client:
                        async def one() -> bool:
                            return not (await client.call_tool("gns3_topology", args)).isError
                        for _ in range(total):
                            await timed(run, one)

                async def concurrent(run: Run) -> None:
                    async def worker() -> None:
                        async with session(base, key) as client:
                            async def one() -> bool:
                                return not (await client.call_tool("gns3_topology", args)).isError
                            for _ in range(calls):
                                await timed(run, one)
                    await asyncio.gather(*(worker() for _ in range(clients)))

                runs = [
                    await measure(Run("REST baseline (no MCP)"), pid, baseline),
                    await measure(Run("MCP, new session per call"), pid, fresh),
                    await measure(Run("MCP, one session"), pid, reuse),
                    await measure(Run(f"MCP, {clients} sessions at once"), pid, concurrent),
                ]
        finally:
            server.stop()
    body = table(runs, nodes, clients, calls, idle_rss)
    print(body)
    if write:
        write_section(body, SECTION)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--write", action="store_true")
    options = parser.parse_args()
    asyncio.run(main(options.nodes, options.clients, options.calls, options.write))
